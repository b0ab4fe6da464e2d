"""Top-K selection under the tie rule (score descending, then item id ascending): exactly that order,
not whatever order ``torch.topk``/``argpartition`` happen to return for ties
(:mod:`recrepro.evaluation.ranking`, "Tie rule")."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from recrepro.records import NonFiniteError  # a ValueError: NaN scores mean a diverged model

__all__ = ["select_topk", "select_topk_refined"]

# Rows per chunk in the tie fix-up of select_topk: bounds its temporaries to a few tens of MB whatever
# the batch size.
_TIE_CHUNK_ROWS = 512


def select_topk(scores: np.ndarray | torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` items of every row under the tie rule (score desc, item id asc).

    Parameters
    ----------
    scores:
        ``[b, n_items]`` float scores (NumPy or torch, any device); ``-inf`` marks a
        non-candidate.  Not modified.
    k:
        List length.

    Returns
    -------
    items, values:
        int64 ``[b, k]`` item ids (``-1`` padding) and float32 ``[b, k]`` scores
        (``-inf`` padding), in ranking order.

    Notes
    -----
    ``torch.topk`` with ``k + 1`` gives the k-th and (k+1)-th largest values.  If they
    differ (or the k-th is ``-inf``), the set of the first ``k`` is unambiguous.  Otherwise
    a tie straddles the boundary; for those rows only, the items strictly above the k-th
    value are kept and the remaining places go to the lowest ids among the items equal to
    it (a second ``topk`` over an id key).  The ``k`` chosen items are then sorted by
    (score desc, id asc).
    """
    if not isinstance(scores, torch.Tensor):
        scores = torch.from_numpy(np.ascontiguousarray(scores, dtype=np.float32))
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D, got shape {tuple(scores.shape)}")
    b, n = scores.shape
    if k < 1:
        raise ValueError("k must be >= 1")
    k_eff = min(k, n)
    if b == 0 or n == 0:
        return np.full((b, k), -1, dtype=np.int64), np.full((b, k), -np.inf, dtype=np.float32)
    n_fetch = min(k_eff + 1, n)
    values, indices = torch.topk(scores, n_fetch, dim=1, largest=True, sorted=True)
    if torch.isnan(values).any():  # topk orders NaN above everything, so any NaN shows up here
        raise NonFiniteError("scores contain NaN: the model diverged or its input holds NaN")
    kth = values[:, k_eff - 1]
    chosen_items = indices[:, :k_eff].clone()
    chosen_values = values[:, :k_eff].clone()
    if n_fetch > k_eff:
        ambiguous = torch.nonzero((values[:, k_eff] == kth) & (kth > -torch.inf)).flatten()
        if ambiguous.numel():
            # Key that is larger for lower ids; int32 is exact for any realistic n_items.
            id_key = torch.arange(n, 0, -1, device=scores.device, dtype=torch.int32)
            positions = torch.arange(k_eff, device=scores.device)
            for start in range(0, ambiguous.numel(), _TIE_CHUNK_ROWS):
                rows = ambiguous[start : start + _TIE_CHUNK_ROWS]
                threshold = kth[rows].unsqueeze(1)
                n_above = (values[rows, :k_eff] > threshold).sum(dim=1, keepdim=True)
                tie_key = torch.where(scores[rows] == threshold, id_key, torch.zeros_like(id_key))
                lowest_tied = torch.topk(tie_key, k_eff, dim=1, largest=True, sorted=True).indices
                take_above = positions.unsqueeze(0) < n_above
                tie_slot = (positions.unsqueeze(0) - n_above).clamp(min=0)
                chosen_items[rows] = torch.where(take_above, indices[rows, :k_eff], lowest_tied.gather(1, tie_slot))
                chosen_values[rows] = torch.where(take_above, values[rows, :k_eff], threshold)
    items = chosen_items.cpu().numpy().astype(np.int64, copy=False)
    vals = chosen_values.cpu().numpy().astype(np.float32, copy=False)
    # Final order: score desc, id asc; -inf (padding) sorts last.
    order = np.lexsort((items, -vals), axis=-1)
    items = np.take_along_axis(items, order, axis=1)
    vals = np.take_along_axis(vals, order, axis=1)
    items[vals == -np.inf] = -1
    if k_eff < k:
        items = np.pad(items, ((0, 0), (0, k - k_eff)), constant_values=-1)
        vals = np.pad(vals, ((0, 0), (0, k - k_eff)), constant_values=-np.inf)
    return items, vals


# How many extra items the fast path fetches beyond k.  Rows whose error window reaches
# past them fall back to exact full rows, so this only trades speed, never correctness.
_REFINE_MARGIN = 8


def select_topk_refined(approx: torch.Tensor, k: int, source: Any, user_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact tie-rule top-``k`` from fast float32 scores plus exact re-scoring.

    ``approx`` are float32-sgemm scores (masked with ``-inf``) whose last bits depend on
    the batch; ``source`` (a NumPy embedding source) bounds their error per user by ``B``
    and re-scores chosen items exactly (float64 accumulation, rounded to float32).

    Any item of the exact top-``k`` has an approximate score of at least
    ``v_k - 2B`` (``v_k`` = k-th largest approximate score), so it suffices to re-score
    the items above that window and apply the tie rule to the exact values.  ``torch.topk``
    fetches ``k + _REFINE_MARGIN`` items; rows whose window extends past the fetched
    items (many near-equal scores) are recomputed exactly in full and go through
    :func:`select_topk`.  The result is therefore identical to :func:`select_topk` on
    exact full rows, at the cost of one sgemm instead of a float64 dgemm.
    """
    b, n = approx.shape
    k_eff = min(k, n)
    if b == 0 or n == 0:
        return select_topk(approx, k)
    n_fetch = min(k_eff + _REFINE_MARGIN, n)
    values_t, indices_t = torch.topk(approx, n_fetch, dim=1, largest=True, sorted=True)
    if torch.isnan(values_t).any():
        raise NonFiniteError("scores contain NaN: the model diverged or its input holds NaN")
    values = values_t.cpu().numpy()
    fetched = indices_t.cpu().numpy()
    kth = values[:, k_eff - 1].astype(np.float64)
    window_low = kth - 2.0 * source.error_bound(user_ids)
    if n_fetch < n:
        overflow = (values[:, -1] >= window_low) & (kth > -np.inf)
    else:
        overflow = np.zeros(b, dtype=bool)
    # Only the columns that some row's window reaches need exact scores (usually k or
    # k + 1 of them); re-scoring fewer items keeps the float64 gather small.
    n_rescore = max(k_eff, int((values >= window_low[:, None]).sum(axis=1).max()))
    fetched = np.ascontiguousarray(fetched[:, :n_rescore])
    values = values[:, :n_rescore]
    exact = source.exact_scores_at(user_ids, fetched)
    exact[values == -np.inf] = -np.inf
    order = np.lexsort((fetched, -exact), axis=-1)[:, :k_eff]
    items = np.take_along_axis(fetched, order, axis=1).astype(np.int64)
    vals = np.take_along_axis(exact, order, axis=1)
    items[vals == -np.inf] = -1
    if overflow.any():
        rows = np.flatnonzero(overflow)
        full = source.exact_rows(user_ids[rows])
        full[approx[torch.from_numpy(rows)].cpu().numpy() == -np.inf] = -np.inf
        items[rows], vals[rows] = select_topk(full, k_eff)
    if k_eff < k:
        items = np.pad(items, ((0, 0), (0, k - k_eff)), constant_values=-1)
        vals = np.pad(vals, ((0, 0), (0, k - k_eff)), constant_values=-np.inf)
    return items, vals
