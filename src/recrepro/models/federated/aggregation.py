"""The server's aggregate of row-wise uploads, without forming the dense uploads.

A client that trains only the item rows it samples uploads ``C_i = shrink_i · C`` (the server's
table ``C`` under its weight decay, one scalar per client) with its trained rows written over it.
:class:`RowUploads` holds those uploads compactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["RowUploads", "row_upload_nnz", "row_upload_sum", "row_uploads_dense"]


@dataclass
class RowUploads:
    """The uploads of a round's clients ``0..B``, each ``shrink_i · C`` with its trained rows over it."""

    owner: torch.Tensor   #: ``[M]`` the client of each trained row (an index into the round's clients)
    item: torch.Tensor    #: ``[M]`` its item
    values: torch.Tensor  #: ``[M, d]`` its trained values
    shrink: torch.Tensor  #: ``[B]`` each client's weight-decay factor of the rows it did not train


def row_uploads_dense(C: torch.Tensor, uploads: RowUploads) -> torch.Tensor:
    """The uploads ``C_i`` as ``[B, n_items, d]``."""
    shrink = uploads.shrink.to(torch.float32)
    up = C[None].mul(shrink[:, None, None]).contiguous()
    up.view(-1, C.shape[1]).index_copy_(0, uploads.owner * C.shape[0] + uploads.item, uploads.values)
    return up


def row_upload_sum(C: torch.Tensor, uploads: RowUploads) -> torch.Tensor:
    """``Σ_i C_i`` (float64)."""
    shrink = uploads.shrink
    total = C.to(torch.float64) * shrink.sum()
    delta = uploads.values - (C.index_select(0, uploads.item)
                              * shrink.to(torch.float32).index_select(0, uploads.owner)[:, None])
    return total.add_(torch.zeros_like(C).index_add_(0, uploads.item, delta))


def row_upload_nnz(C: torch.Tensor, uploads: RowUploads, abs_sorted: np.ndarray, threshold: float) -> int:
    """Entries with ``|C_i| > threshold`` summed over the clients.

    Untouched rows of client i hold ``shrink_i · C``: counted from the sorted ``|C|``
    (``abs_sorted``, float64) by binary search, minus the touched rows' share, plus the touched rows.
    """
    rows = uploads.values
    shrink = uploads.shrink.cpu().numpy()
    thr = threshold / np.maximum(shrink, 1e-300)
    untouched_all = abs_sorted.size - np.searchsorted(abs_sorted, thr, side="right")
    thr_rows = torch.as_tensor(thr, dtype=torch.float32, device=rows.device).index_select(0, uploads.owner)
    base = torch.count_nonzero(C.index_select(0, uploads.item).abs_() > thr_rows[:, None])
    touched = torch.count_nonzero(rows.abs() > threshold)
    return int(untouched_all.sum() - int(base) + int(touched))
