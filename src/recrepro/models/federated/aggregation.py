"""The server's aggregate of row-wise uploads, without forming the dense uploads.

A client that trains only the item rows it samples uploads ``C_i = shrink_i · C`` (the server's
table ``C`` under its weight decay, one scalar per client) with its trained rows written over it.
A *row result* holds that upload compactly: ``{"rows": (owner[M], item[M], values[M, d]),
"shrink": [B]}`` (``owner`` indexes the round's clients ``0..B``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["row_upload_nnz", "row_upload_sum", "row_uploads_dense"]


def row_uploads_dense(C: torch.Tensor, result: dict[str, Any]) -> torch.Tensor:
    """The uploads ``C_i`` of a row result as ``[B, n_items, d]``."""
    p_owner, p_item, rows = result["rows"]
    shrink = result["shrink"].to(torch.float32)
    up = C[None].mul(shrink[:, None, None]).contiguous()
    up.view(-1, C.shape[1]).index_copy_(0, p_owner * C.shape[0] + p_item, rows)
    return up


def row_upload_sum(C: torch.Tensor, result: dict[str, Any]) -> torch.Tensor:
    """``Σ_i C_i`` (float64) of a row result."""
    p_owner, p_item, rows = result["rows"]
    shrink = result["shrink"]
    total = C.to(torch.float64) * shrink.sum()
    delta = rows - C.index_select(0, p_item) * shrink.to(torch.float32).index_select(0, p_owner)[:, None]
    return total.add_(torch.zeros_like(C).index_add_(0, p_item, delta))


def row_upload_nnz(C: torch.Tensor, result: dict[str, Any], abs_sorted: np.ndarray, threshold: float) -> int:
    """Entries with ``|C_i| > threshold`` summed over the clients of a row result.

    Untouched rows of client i hold ``shrink_i · C``: counted from the sorted ``|C|``
    (``abs_sorted``, float64) by binary search, minus the touched rows' share, plus the touched rows.
    """
    p_owner, p_item, rows = result["rows"]
    shrink = result["shrink"].cpu().numpy()
    thr = threshold / np.maximum(shrink, 1e-300)
    untouched_all = abs_sorted.size - np.searchsorted(abs_sorted, thr, side="right")
    thr_rows = torch.as_tensor(thr, dtype=torch.float32, device=rows.device).index_select(0, p_owner)
    base = torch.count_nonzero(C.index_select(0, p_item).abs_() > thr_rows[:, None])
    touched = torch.count_nonzero(rows.abs() > threshold)
    return int(untouched_all.sum() - int(base) + int(touched))
