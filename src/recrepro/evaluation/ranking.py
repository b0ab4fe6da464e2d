"""Full-ranking evaluation: batched scoring, exclusion masking, top-K with a fixed tie rule.

Tie rule
--------
Items are ranked by **score descending, then item id ascending**: among equal scores the
lower item id ranks first.  This is a strict total order, so every top-K list and every
rank is fully determined by the score values; the selection below is written so that it
gives that order exactly (not whatever order ``torch.topk``/``argpartition`` happen to
return for ties).  Together with float64-accumulated, float32-rounded scores (see
:mod:`recrepro.evaluation.scoring`) the results do not depend on ``batch_size`` or on the
backend.  (The exADMM code uses ``nth_element`` + ``stable_sort``, which is the same rule
for the order inside the list but leaves the boundary tie unspecified.)

Candidates
----------
An item is a candidate for a user unless it is in the user's row of ``exclude`` (those
cells are set to ``-inf``).  A score of ``-inf`` means "not a candidate": such items
never appear in a top-K list and never count as hits.  A user with fewer than ``K``
candidates gets a shorter list, padded with item ``-1`` (which is never a hit); metrics
use only the real entries (their denominators are unchanged, e.g. precision still divides
by ``K``).  ``NaN`` scores raise ``ValueError``.

Metrics
-------
The keys of :func:`evaluate_full_ranking`'s result (``K`` from its ``ks``):

- ``recall_liang@K`` = hits@K / min(K, |T_u|)  (Liang et al. 2018, exADMM);
- ``recall_lgcn@K`` = hits@K / |T_u|  (LightGCN/NGCF);
- ``precision@K`` = hits@K / K  (LightGCN);
- ``ndcg@K`` = DCG@K / IDCG@K, gains 1/log2(r+1), IDCG over min(K, |T_u|);
- ``hr@K`` = 1[hits@K > 0];
- ``coverage@K``, ``gini@K`` (uniform exposure), ``gini_pos@K`` (exposure
  1/log2(r+1) per appearance) over all ``n_items`` items;
- ``auc`` = per user, the fraction of (target, negative) pairs in which the target
  ranks above the negative (negatives = candidates that are not targets),
  averaged over the user's targets (an excluded target contributes 0); users
  without negatives get NaN and are left out of the mean;
- ``pp_hr@K`` / ``pp_ndcg@K``: λOpt's per-positive metrics — every target is
  ranked alone against the negatives; HR = 1[rank <= K], NDCG = 1/log2(rank+1)
  if rank <= K; averaged over the user's targets, then **over users (default,
  as λOpt's code)**; ``pp_hr_micro@K`` / ``pp_ndcg_micro@K`` average over all
  targets instead;
- ``ndcg_popular@K`` / ``ndcg_neutral@K`` / ``ndcg_unpopular@K`` (with
  ``item_degree``): DCG of the hits on the stratum's items over the user's full
  IDCG, so the three sum to ``ndcg@K``.

Means are over evaluated users (at least one target).

The top-K lists (:mod:`recrepro.evaluation.topk`) and the ranks of the targets among the
negatives (:mod:`recrepro.evaluation.positive_ranks`) are modules of their own; their
functions are importable from here too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch

from recrepro.evaluation import metrics as M
from recrepro.evaluation.exposure import STRATA, coverage, exposure_counts, gini, item_strata
from recrepro.evaluation.inputs import canonical_csr
from recrepro.evaluation.positive_ranks import RankTies, rank_positives
from recrepro.evaluation.results import EvaluationResult, TopKResult
from recrepro.evaluation.scoring import ScoreSource, resolve_backend, resolve_score_source
from recrepro.evaluation.topk import select_topk, select_topk_refined

__all__ = [
    "DEFAULT_METRICS",
    "ALL_METRICS",
    "select_topk",
    "select_topk_refined",
    "rank_positives",
    "full_ranking_topk",
    "evaluate_full_ranking",
]

#: Metric families computed from the top-K hit matrix (cheap).
HIT_METRICS: tuple[str, ...] = ("recall_liang", "recall_lgcn", "ndcg", "hr", "precision")
#: Metric families computed from item exposure over all top-K lists (global, no per-user value).
EXPOSURE_METRICS: tuple[str, ...] = ("coverage", "gini", "gini_pos")
#: Metric families that need the rank of every target among all candidates (a row sort per
#: user; ~10× the cost of the top-K path), so they are opt-in.
RANK_METRICS: tuple[str, ...] = ("auc", "pp_hr", "pp_ndcg")
DEFAULT_METRICS: tuple[str, ...] = HIT_METRICS + EXPOSURE_METRICS
ALL_METRICS: tuple[str, ...] = DEFAULT_METRICS + RANK_METRICS


# --------------------------------------------------------------------------- batching


def _check_users(users: Any, n_users: int) -> np.ndarray:
    if users is None:
        return np.arange(n_users, dtype=np.int64)
    users = np.asarray(users, dtype=np.int64).ravel()
    if users.size and (users.min() < 0 or users.max() >= n_users):
        raise ValueError(f"user ids must lie in [0, {n_users})")
    if np.unique(users).size != users.size:
        raise ValueError("users contains duplicates")
    return users


def _csr_rows(matrix: sp.csr_matrix, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(local row, column) of the stored entries of ``matrix[batch]``, row-major sorted."""
    sub = matrix[batch]
    local = np.repeat(np.arange(len(batch), dtype=np.int64), np.diff(sub.indptr))
    return local, sub.indices.astype(np.int64, copy=False)


def _iter_ranked_batches(
    source: ScoreSource, users: np.ndarray, exclude: sp.csr_matrix | None, k: int, batch_size: int,
    need_exact_rows: bool = False,
) -> Iterator[tuple[np.ndarray, torch.Tensor, np.ndarray, np.ndarray]]:
    """Yield ``(batch_users, masked_scores, topk_items, topk_values)`` per batch.

    ``masked_scores`` is only valid until the next iteration (its buffer is reused).  It
    holds exact scores when ``need_exact_rows`` is set or the source has no fast path;
    otherwise (NumPy embeddings) it holds the fast float32 approximation and the top-K
    comes from :func:`select_topk_refined` — the same lists either way.
    """
    n = source.n_items
    fast = not need_exact_rows and hasattr(source, "approx_scores")
    for start in range(0, len(users), batch_size):
        batch = users[start : start + batch_size]
        scores = source.approx_scores(batch) if fast else source.scores(batch)
        if exclude is not None:
            rows, cols = _csr_rows(exclude, batch)
            if rows.size:
                flat_index = torch.from_numpy(rows * n + cols).to(scores.device)
                scores.view(-1).index_fill_(0, flat_index, -torch.inf)
        if fast:
            items, values = select_topk_refined(scores, k, source, batch)
        else:
            items, values = select_topk(scores, k)
        yield batch, scores, items, values


def _prepare(score_source: Any, exclude: Any, n_users: int, n_items: int, batch_size: int, n_eval: int,
             device: str, backend: str) -> tuple[ScoreSource, sp.csr_matrix | None, str]:
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    resolved = resolve_backend(device, backend)
    exclude_csr = None if exclude is None else canonical_csr(exclude, (n_users, n_items))
    source = resolve_score_source(score_source, n_items, backend=resolved, device=device,
                                  max_batch=min(batch_size, max(1, n_eval)))
    return source, exclude_csr, resolved


def full_ranking_topk(
    score_source: Any,
    k: int,
    exclude: sp.spmatrix | None = None,
    users: Sequence[int] | np.ndarray | None = None,
    *,
    n_items: int | None = None,
    batch_size: int = 2048,
    device: str = "cpu",
    backend: str = "auto",
) -> TopKResult:
    """Top-``k`` recommendation lists of ``users`` over all items, excluding ``exclude``.

    Parameters
    ----------
    score_source:
        ``(user_emb, item_emb)``, a :class:`~recrepro.models.base.Recommender`, or a callable
        ``score_batch(user_ids) -> [b, n_items]`` (see
        :func:`recrepro.evaluation.scoring.resolve_score_source`).
    k:
        List length.
    exclude:
        ``[n_users, n_items]`` sparse matrix; stored entries are never recommended.
    users:
        User ids (rows); default all rows of ``exclude``.
    n_items:
        Needed only when both ``exclude`` is ``None`` and ``score_source`` is a callable.
    batch_size, device, backend:
        As in :func:`evaluate_full_ranking`.

    Returns
    -------
    TopKResult
        Lists in tie-rule order, ``-1``/``-inf`` padded.
    """
    if exclude is not None:
        n_users, n_items = exclude.shape
    else:
        if users is None:
            raise ValueError("pass users when exclude is None")
        if n_items is None:
            n_items = _infer_n_items(score_source)
        n_users = int(np.max(users)) + 1 if len(users) else 0
    users_arr = _check_users(users, n_users)
    source, exclude_csr, _ = _prepare(score_source, exclude, n_users, n_items, batch_size, users_arr.size,
                                      device, backend)
    all_items, all_values = [], []
    for _, _, items, values in _iter_ranked_batches(source, users_arr, exclude_csr, k, batch_size):
        all_items.append(items.astype(np.int32))
        all_values.append(values)
    if not all_items:
        return TopKResult(users_arr, np.empty((0, k), np.int32), np.empty((0, k), np.float32))
    return TopKResult(users_arr, np.concatenate(all_items), np.concatenate(all_values))


def _infer_n_items(score_source: Any) -> int:
    if isinstance(score_source, (tuple, list)) and len(score_source) == 2:
        return int(score_source[1].shape[0])
    for name in ("item_factors", "n_items"):
        value = getattr(score_source, name, None)
        if value is not None:
            return int(value.shape[0]) if hasattr(value, "shape") else int(value)
    raise ValueError("cannot infer n_items; pass n_items=")


# --------------------------------------------------------------------------- evaluation


def _membership(keys_sorted: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Boolean: is each query in the sorted key array."""
    if keys_sorted.size == 0:
        return np.zeros(queries.shape, dtype=bool)
    pos = np.searchsorted(keys_sorted, queries)
    return keys_sorted[np.minimum(pos, keys_sorted.size - 1)] == queries



def _check_settings(ks: Sequence[int], metrics: Sequence[str], rank_ties: str) -> tuple[list[int], list[str]]:
    """The cut-offs, sorted and distinct, and the metric families, in order and distinct (ValueError when
    one is unknown)."""
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError("ks must be a non-empty list of positive integers")
    families = list(dict.fromkeys(metrics))
    unknown = [m for m in families if m not in ALL_METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; known: {list(ALL_METRICS)}")
    if rank_ties not in ("item_id", "optimistic", "pessimistic"):
        raise ValueError(f"rank_ties must be 'item_id', 'optimistic' or 'pessimistic', got {rank_ties!r}")
    return ks, families


def _evaluated_users(targets_csr: sp.csr_matrix, users: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The requested users (default: every row), those of them with at least one target, and their targets'
    counts."""
    requested = _check_users(users, targets_csr.shape[0])
    target_counts = np.diff(targets_csr.indptr)[requested]
    return requested, requested[target_counts > 0], target_counts[target_counts > 0]


def _strata_labels(item_degree: np.ndarray | None, n_items: int) -> np.ndarray | None:
    """Each item's popularity stratum (:func:`~recrepro.evaluation.exposure.item_strata`), or ``None``
    without item degrees."""
    if item_degree is None:
        return None
    item_degree = np.asarray(item_degree)
    if item_degree.shape != (n_items,):
        raise ValueError(f"item_degree must have shape ({n_items},), got {item_degree.shape}")
    return item_strata(item_degree)


# Long on purpose: one batch pass feeds every metric family; splitting it would spread the per_user/overall key order the records depend on
def _per_user_metrics(
    eval_users: np.ndarray,
    n_targets: np.ndarray,
    topk: np.ndarray,
    hits: np.ndarray,
    ranks: np.ndarray,
    rank_users: np.ndarray,
    auc: np.ndarray | None,
    ks: list[int],
    families: list[str],
    strata_labels: np.ndarray | None,
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The per-user metric columns of :func:`evaluate_full_ranking` from its ranked hits.

    Returns the columns (``user``, ``n_targets``, then one per metric and cut-off) and the overall
    values that are not per-user means (the per-positive ``pp_*_micro@K``).
    """
    per_user: dict[str, np.ndarray] = {"user": eval_users, "n_targets": n_targets}
    overall: dict[str, float] = {}
    hit_functions = {
        "recall_liang": M.recall_liang,
        "recall_lgcn": M.recall_lgcn,
        "ndcg": M.ndcg,
        "hr": M.hit_rate,
        "precision": M.precision,
    }
    for k in ks:
        for name in families:
            if name in hit_functions:
                per_user[f"{name}@{k}"] = hit_functions[name](hits, n_targets, k)
    if strata_labels is not None:
        item_label = np.where(topk >= 0, strata_labels[np.maximum(topk, 0)], -1)
        for k in ks:
            idcg = M.ideal_dcg(n_targets, k)
            discounts = M.dcg_discounts(k)
            for label, stratum in enumerate(STRATA):
                dcg = (hits[:, :k] & (item_label[:, :k] == label)) @ discounts
                with np.errstate(invalid="ignore", divide="ignore"):
                    per_user[f"ndcg_{stratum}@{k}"] = dcg / idcg
    if auc is not None:
        per_user["auc"] = auc
    for k in ks:
        for name, fn in (("pp_hr", M.rank_hit), ("pp_ndcg", M.rank_ndcg)):
            if name in families:  # the rank metrics: ``ranks`` holds every target's rank
                per_positive = fn(ranks, k)
                per_user[f"{name}@{k}"] = (np.bincount(rank_users, weights=per_positive, minlength=eval_users.size)
                                           / n_targets)
                overall[f"{name}_micro@{k}"] = float(per_positive.mean()) if per_positive.size else float("nan")
    return per_user, overall


def _counts_and_settings(
    requested: np.ndarray,
    n_eval: int,
    n_items: int,
    n_targets: np.ndarray,
    n_excluded_targets: int,
    topk: np.ndarray,
    per_user: dict[str, np.ndarray],
    families: list[str],
    ks: list[int],
    rank_ties: str | None,
    resolved: str,
    device: str,
    batch_size: int,
    strata_labels: np.ndarray | None,
) -> tuple[dict[str, int], dict[str, Any]]:
    """The ``counts`` and ``settings`` an :class:`EvaluationResult` of :func:`evaluate_full_ranking` records."""
    counts = {
        "n_users_requested": int(requested.size),
        "n_users_evaluated": int(n_eval),
        "n_users_skipped_no_targets": int(requested.size - n_eval),
        "n_items": int(n_items),
        "n_targets": int(n_targets.sum()),
        "n_targets_excluded": int(n_excluded_targets),
        "n_users_short_list": int(np.count_nonzero(topk[:, -1] < 0)) if n_eval else 0,
    }
    if "auc" in families:
        counts["n_users_auc_undefined"] = int(np.count_nonzero(np.isnan(per_user["auc"])))
    settings: dict[str, Any] = {
        "ks": ks,
        "metrics": families,
        "tie_rule": "score desc, then item id asc",
        "rank_ties": rank_ties,
        "backend": resolved,
        "device": str(device),
        "batch_size": int(batch_size),
    }
    if strata_labels is not None:
        settings["strata_sizes"] = {s: int(np.count_nonzero(strata_labels == i)) for i, s in enumerate(STRATA)}
    return counts, settings


def _overall_and_strata(per_user_frame: pd.DataFrame, overall: dict[str, float], topk: np.ndarray, n_items: int,
                        ks: list[int], families: list[str], strata_labels: np.ndarray | None
                        ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The overall values (``overall`` so far, then the per-user columns' means and the exposure metrics),
    in key order, and the stratified NDCG by stratum."""
    strata: dict[str, dict[str, float]] = {}
    metric_columns = [c for c in per_user_frame.columns if c not in ("user", "n_targets")]
    for column in metric_columns:
        values = per_user_frame[column].to_numpy(dtype=np.float64)
        overall[column] = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
    overall.update(_exposure_metrics(topk, n_items, ks, families))
    if strata_labels is not None:
        for k in ks:
            for stratum in STRATA:
                strata.setdefault(stratum, {})[f"ndcg@{k}"] = overall[f"ndcg_{stratum}@{k}"]
    overall = dict(sorted(overall.items(), key=lambda kv: _sort_key(kv[0])))
    return overall, strata


def evaluate_full_ranking(
    score_source: Any,
    exclude: sp.spmatrix | None,
    targets: sp.spmatrix,
    ks: Sequence[int],
    users: Sequence[int] | np.ndarray | None = None,
    batch_size: int = 2048,
    device: str = "cpu",
    item_degree: np.ndarray | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    rank_ties: RankTies = "item_id",
    backend: str = "auto",
    return_topk: bool = False,
) -> EvaluationResult:
    """Full-ranking evaluation of ``users``: score all items, mask ``exclude``, rank.

    Parameters
    ----------
    score_source:
        ``(user_emb [n_users, d], item_emb [n_items, d])`` (NumPy or torch; score = dot
        product, accumulated in float64 and rounded to float32), a
        :class:`~recrepro.models.base.Recommender`, or a callable
        ``score_batch(user_ids: np.ndarray) -> [b, n_items]`` (NumPy or torch).
    exclude:
        ``[n_users, n_items]`` sparse; stored entries are not candidates (e.g. train, or
        train + validation, or a held-out user's fold-in part ``test_tr``).  ``None`` = no
        exclusion.  Values are ignored, only the structure counts.
    targets:
        ``[n_users, n_items]`` sparse; stored entries are the relevant items (e.g. test,
        or ``test_te``).  Targets that are also excluded stay in ``|T_u|`` but can never
        be hit (counted in ``counts["n_targets_excluded"]``).
    ks:
        Cut-offs, e.g. ``[20]`` or ``[20, 50, 100]``.  One top-``max(ks)`` list per user is
        computed; smaller cut-offs use its prefix.
    users:
        Rows to evaluate (default: all rows of ``targets``).  Users without targets are
        skipped (never scored) and counted in ``n_users_skipped_no_targets``.
    batch_size:
        Users per batch; peak memory ≈ ``batch_size × n_items × 4`` bytes plus fixed
        scratch (see :mod:`recrepro.evaluation.scoring`).
    device:
        ``"cpu"`` or a torch device such as ``"cuda"``.
    item_degree:
        ``[n_items]`` item degrees (e.g. training interaction counts); when given, the
        stratified NDCG ``ndcg_{popular,neutral,unpopular}@K`` is added (strata from
        :func:`recrepro.evaluation.exposure.item_strata`).
    metrics:
        Metric families: any of ``recall_liang, recall_lgcn, ndcg, hr, precision,
        coverage, gini, gini_pos`` (the default set) and the opt-in rank metrics ``auc,
        pp_hr, pp_ndcg``.
    rank_ties:
        Tie rule for the rank metrics only (``auc``, ``pp_*``), see
        :func:`rank_positives`.  Top-K lists always use the global rule (score desc, item
        id asc).  λOpt's code uses ``"optimistic"`` for HR/NDCG and counts ties as
        wrongly ordered pairs (``"pessimistic"``) for AUC.
    backend:
        ``"auto"`` (NumPy on CPU, torch elsewhere), ``"numpy"`` or ``"torch"``.
    return_topk:
        Keep the top-``max(ks)`` item lists in ``result.topk``.

    Returns
    -------
    EvaluationResult
        The metrics listed in the module docstring (*Metrics*), overall and per user.
    """
    ks, families = _check_settings(ks, metrics, rank_ties)
    targets_csr = canonical_csr(targets)
    n_users, n_items = targets_csr.shape
    requested, eval_users, n_targets = _evaluated_users(targets_csr, users)
    source, exclude_csr, resolved = _prepare(score_source, exclude, n_users, n_items, batch_size,
                                             eval_users.size, device, backend)
    k_max = ks[-1]
    want_rank = any(m in RANK_METRICS for m in families)
    strata_labels = _strata_labels(item_degree, n_items)

    topk, hits, n_excluded_targets, ranks, rank_users, auc = _ranked_hits(
        source, eval_users, n_targets, exclude_csr, targets_csr, k_max, batch_size,
        want_rank=want_rank, want_auc="auc" in families, rank_ties=rank_ties)
    n_eval = eval_users.size

    per_user, overall = _per_user_metrics(eval_users, n_targets, topk, hits, ranks, rank_users, auc, ks, families,
                                          strata_labels)
    per_user_frame = pd.DataFrame(per_user)
    overall, strata = _overall_and_strata(per_user_frame, overall, topk, n_items, ks, families, strata_labels)

    counts, settings = _counts_and_settings(requested, n_eval, n_items, n_targets, n_excluded_targets, topk, per_user,
                                            families, ks, rank_ties if want_rank else None, resolved, device,
                                            batch_size, strata_labels)
    return EvaluationResult(
        overall=overall,
        per_user=per_user_frame,
        counts=counts,
        strata=strata,
        settings=settings,
        topk=topk if return_topk else None,
    )


def _ranked_hits(source: Any, eval_users: np.ndarray, n_targets: np.ndarray, exclude_csr: sp.csr_matrix | None,
                 targets_csr: sp.csr_matrix, k_max: int, batch_size: int, *, want_rank: bool, want_auc: bool,
                 rank_ties: RankTies) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray, np.ndarray | None]:
    """Rank ``eval_users`` batch by batch: top-``k_max`` lists, their hit mask, the excluded targets' count,
    and (``want_rank``) every target's rank with its user's row and the per-user AUC."""
    n_items = targets_csr.shape[1]
    topk_parts: list[np.ndarray] = []
    hit_parts: list[np.ndarray] = []
    n_excluded_targets = 0
    rank_parts: list[np.ndarray] = []
    rank_user_parts: list[np.ndarray] = []
    auc_parts: list[np.ndarray] = []
    offset = 0
    for batch, scores, items, _ in _iter_ranked_batches(source, eval_users, exclude_csr, k_max, batch_size,
                                                          need_exact_rows=want_rank):
        b = len(batch)
        t_rows, t_items = _csr_rows(targets_csr, batch)
        target_keys = t_rows * n_items + t_items  # sorted: rows ascending, indices sorted
        list_keys = np.arange(b, dtype=np.int64)[:, None] * n_items + items
        hit_parts.append(_membership(target_keys, list_keys) & (items >= 0))
        topk_parts.append(items.astype(np.int32))
        if exclude_csr is not None:
            e_rows, e_items = _csr_rows(exclude_csr, batch)
            n_excluded_targets += int(_membership(e_rows * n_items + e_items, target_keys).sum())
        if want_rank:
            ranks, n_neg = rank_positives(scores.cpu().numpy(), t_rows, t_items, ties=rank_ties)
            rank_parts.append(ranks)
            rank_user_parts.append(t_rows + offset)
            if want_auc:
                # Pairs ordered right for target p: negatives below it = n_neg - (rank - 1).
                with np.errstate(invalid="ignore", divide="ignore"):
                    share = np.where(np.isfinite(ranks), (n_neg[t_rows] - (ranks - 1.0)) / n_neg[t_rows], 0.0)
                auc_sum = np.bincount(t_rows, weights=share, minlength=b)
                auc_parts.append(np.where(n_neg > 0, auc_sum / n_targets[offset : offset + b], np.nan))
        offset += b
    topk = np.concatenate(topk_parts) if topk_parts else np.empty((0, k_max), np.int32)
    hits = np.concatenate(hit_parts) if hit_parts else np.empty((0, k_max), bool)
    ranks_all = np.concatenate(rank_parts) if rank_parts else np.empty(0)
    rank_users = np.concatenate(rank_user_parts) if rank_user_parts else np.empty(0, np.int64)
    auc = (np.concatenate(auc_parts) if auc_parts else np.empty(0)) if want_rank and want_auc else None
    return topk, hits, n_excluded_targets, ranks_all, rank_users, auc


def _exposure_metrics(topk: np.ndarray, n_items: int, ks: Sequence[int], families: Sequence[str]) -> dict[str, float]:
    """Coverage and Gini of the top-K lists' exposure over all ``n_items`` items, per cut-off."""
    out: dict[str, float] = {}
    for k in ks:
        if "coverage" in families or "gini" in families:
            uniform = exposure_counts(topk, n_items, k, "uniform")
            if "coverage" in families:
                out[f"coverage@{k}"] = coverage(uniform)
            if "gini" in families:
                out[f"gini@{k}"] = gini(uniform)
        if "gini_pos" in families:
            out[f"gini_pos@{k}"] = gini(exposure_counts(topk, n_items, k, "log_rank"))
    return out


def _sort_key(key: str) -> tuple[int, str]:
    name, _, k = key.partition("@")
    return (int(k) if k.isdigit() else -1, name)
