"""Which torch device a run uses: ``auto`` (the default), ``cpu``, ``cuda`` or ``cuda:N``.

``auto`` is resolved where the job runs, not where the workflow is planned: a cluster job lands
on a GPU node or not, and the submitting machine cannot know which.  Every run record names the
resolved device (``provenance.json``: ``device`` and ``device_name``).
"""

from __future__ import annotations

import argparse
import re

__all__ = ["DEVICE_CHOICES", "add_device_argument", "resolve_device"]

DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N")
_CUDA = re.compile(r"^cuda(:\d+)?$")


def resolve_device(spec: str | None) -> str:
    """The concrete device of ``spec``.

    ``auto`` (or ``None``) gives ``cuda`` when torch sees a GPU, else ``cpu``.  An explicit
    ``cuda`` on a machine without one is an error (a run asked for a GPU must not silently
    take days on the CPU).

    Raises
    ------
    ValueError
        Unknown spelling, or CUDA asked for and not available.
    """
    import torch

    spec = "auto" if spec is None else str(spec).strip().lower()
    if spec == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if spec == "cpu":
        return "cpu"
    if _CUDA.match(spec):
        if not torch.cuda.is_available():
            raise ValueError(f"device {spec!r} asked for, but torch sees no CUDA device here "
                             "(use device: auto or cpu)")
        index = int(spec.split(":")[1]) if ":" in spec else 0
        if index >= torch.cuda.device_count():
            raise ValueError(f"device {spec!r} asked for, but torch sees {torch.cuda.device_count()} CUDA device(s)")
        return spec
    raise ValueError(f"unknown device {spec!r}; use one of {', '.join(DEVICE_CHOICES)}")


def _argparse_device(value: str) -> str:
    try:
        return resolve_device(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """``--device`` (default ``auto``), resolved to a concrete device when the arguments are parsed."""
    parser.add_argument("--device", default="auto", type=_argparse_device,
                        help="auto (CUDA when available, else CPU), cpu, cuda or cuda:N")
