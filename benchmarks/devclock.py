"""Which clock a benchmark reads on which device, and how a row names both.

On the CPU the measures count **process CPU seconds** (``time.process_time``): on the shared 2-core
machine other jobs move wall times by tens of per cent, CPU seconds of the same work far less.  On a
CUDA device the process's CPU seconds say nothing about the work (kernels run asynchronously, the
host mostly waits), so every stamp is the wall clock (``time.perf_counter``) taken right after
``torch.cuda.synchronize()``: the stamp falls after all work queued before it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # torch is imported where used, as bench_full_ranking does: importing this module stays cheap
    import torch

#: a row's ``clock`` field on the CPU and on a CUDA device
CPU_CLOCK = "process CPU s"
CUDA_CLOCK = "wall s (cuda, synchronised)"


def on_cuda(device: str | torch.device) -> bool:
    """Whether ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a :class:`torch.device`) is a CUDA device."""
    import torch

    return torch.device(device).type == "cuda"


def stamp_fn(device: str | torch.device, cpu_clock: Callable[[], float] = time.process_time) -> Callable[[], float]:
    """The stamp function of a measure on ``device``.

    Parameters
    ----------
    device:
        The torch device the measured work runs on.
    cpu_clock:
        The clock on the CPU, returned unchanged (so a CPU run reads exactly the clock it always did):
        ``time.process_time`` for the CPU-seconds measures, ``time.perf_counter`` for the wall-clock ones.

    Returns
    -------
    Callable[[], float]
        ``cpu_clock`` on the CPU; on CUDA a function that synchronises ``device`` and then reads
        ``time.perf_counter``.
    """
    if not on_cuda(device):
        return cpu_clock
    import torch

    def synchronised() -> float:
        torch.cuda.synchronize(device)
        return time.perf_counter()

    return synchronised


def clock_label(device: str | torch.device, cpu_label: str = CPU_CLOCK) -> str:
    """A row's ``clock`` field: ``cpu_label`` on the CPU, :data:`CUDA_CLOCK` on CUDA."""
    return CUDA_CLOCK if on_cuda(device) else cpu_label


def device_label(device: str | torch.device) -> str:
    """A row's ``device`` field: ``"cpu"`` or the CUDA device's name (e.g. ``"NVIDIA H100 80GB HBM3"``)."""
    if not on_cuda(device):
        return "cpu"
    import torch

    return torch.cuda.get_device_name(torch.device(device))
