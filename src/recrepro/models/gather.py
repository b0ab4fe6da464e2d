"""Row gathers whose backward adds in one fixed order, whatever the number of CPU threads.

``table[idx]`` (advanced indexing) has ``zeros.index_put_(idx, grad, accumulate=True)`` as its
backward.  On a CPU with more than one torch thread that kernel adds the rows of a repeated index
from several threads at once, so the order of the additions, and the last bits of the sum, change
from run to run: two trainings with the same seed on two threads drift apart within an epoch
(PRISM's NL-MF + DirectAU on gowalla, two threads: validation NDCG@20 0.096492 and 0.096508 after
the same epoch from the same checkpoint).  :func:`gather_rows` copies the same rows with
``index_select``, whose backward ``zeros.index_add_(0, idx, grad)`` adds them one after another in
the order of ``idx`` on any number of threads, which is what ``index_put_`` does on one thread:
values and gradients are bit for bit those of ``table[idx]`` on one thread
(``tests/test_gather.py``).  On CPU the pair is also faster than advanced indexing
(docs/performance.md, "Gathers by index_select").

On CUDA advanced indexing stays: its ``index_put_`` sorts the indices (run-to-run deterministic),
while CUDA's ``index_add_`` adds with atomics.
"""

from __future__ import annotations

import torch

__all__ = ["add_rows_into_zeros", "gather_rows"]


def gather_rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``table[idx]`` (rows of a 2-D table, entries of a 1-D one), by ``index_select`` on CPU."""
    return table.index_select(0, idx) if table.device.type == "cpu" else table[idx]


def add_rows_into_zeros(like: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The backward of :func:`gather_rows`: ``rows`` added into a zero table shaped ``like``."""
    if like.device.type == "cpu":
        return torch.zeros_like(like).index_add_(0, idx, rows)
    return torch.zeros_like(like).index_put_((idx,), rows, accumulate=True)
