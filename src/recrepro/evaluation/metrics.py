"""Per-user ranking metrics computed from a boolean hit matrix or from per-positive ranks.

Conventions shared by every function here
----------------------------------------
``hits``
    Boolean array ``[n_users, K_max]``; ``hits[u, r-1]`` is True when the item at rank
    ``r`` of user ``u``'s top-K list is one of ``u``'s target items.  Padding entries
    (a list shorter than ``K_max`` because the user has fewer candidate items, marked
    ``-1`` in the item lists) are False, so they never count.
``n_targets``
    Integer array ``[n_users]``: ``|T_u|``, the number of target (held-out) items of
    each user.  Targets that were also excluded from ranking still count here (they
    can never be hit); see :func:`recrepro.evaluation.evaluate_full_ranking`.
    Users with ``|T_u| = 0`` get ``nan`` (the evaluator never passes them: it skips
    and counts them).
ranks
    1-based; ``rank = 1 + (number of candidates ranked above)``.  ``np.inf`` marks a
    positive that is not a candidate at all (excluded), which is a miss everywhere.

All results are float64 per-user (or per-positive) vectors; the evaluator averages
them.  Ranks start at 1 and the DCG discount of rank ``r`` is ``1 / log2(r + 1)``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "dcg_discounts",
    "ideal_dcg",
    "hits_at",
    "recall_liang",
    "recall_lgcn",
    "precision",
    "ndcg",
    "hit_rate",
    "rank_hit",
    "rank_ndcg",
]


def dcg_discounts(k: int) -> np.ndarray:
    """Discount of ranks ``1..k``: ``1 / log2(r + 1)`` (float64, shape ``[k]``).

    Binary-gain DCG as in Järvelin & Kekäläinen (2002) in the ``log2(r + 1)`` form used by
    Liang et al. (2018, VAE-CF), LightGCN (He et al., 2020) and the exADMM/PRISM code.
    """
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def ideal_dcg(n_relevant: np.ndarray, k: int) -> np.ndarray:
    """IDCG@k: ``sum_{r=1}^{min(k, n)} 1 / log2(r + 1)`` for each entry ``n`` of ``n_relevant``.

    The ideal list puts all of a user's targets first, so only ``min(k, |T_u|)`` of them
    can contribute.  ``n = 0`` gives 0.
    """
    cumulative = np.concatenate(([0.0], np.cumsum(dcg_discounts(k))))
    return cumulative[np.minimum(np.asarray(n_relevant, dtype=np.int64), k)]


def hits_at(hits: np.ndarray, k: int) -> np.ndarray:
    """Number of hits among the first ``k`` entries of each row (int64 ``[n_users]``)."""
    _check_k(hits, k)
    return hits[:, :k].sum(axis=1, dtype=np.int64)


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    out = np.full(np.broadcast_shapes(numerator.shape, denominator.shape), np.nan)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def recall_liang(hits: np.ndarray, n_targets: np.ndarray, k: int) -> np.ndarray:
    """Recall@k in the truncated form ``hits@k / min(k, |T_u|)``.

    Definition of Liang et al. (2018), "Variational Autoencoders for Collaborative
    Filtering" (``Recall_at_k_batch`` in their notebook), which the exADMM code uses
    (notes A3: ``Recall@K = |topK ∩ T_u| / min(K, |T_u|)``).  It reaches 1 whenever the
    list is as good as it can be, even if ``|T_u| > k``.
    """
    n_targets = np.asarray(n_targets)
    return _safe_divide(hits_at(hits, k), np.where(n_targets > 0, np.minimum(n_targets, k), 0))


def recall_lgcn(hits: np.ndarray, n_targets: np.ndarray, k: int) -> np.ndarray:
    """Recall@k in the plain form ``hits@k / |T_u|``.

    Definition of the LightGCN / NGCF code (``utils.RecallPrecision_ATk``:
    ``right_pred / recall_n`` with ``recall_n`` the number of test items).
    """
    return _safe_divide(hits_at(hits, k), n_targets)


def precision(hits: np.ndarray, n_targets: np.ndarray, k: int) -> np.ndarray:
    """Precision@k = ``hits@k / k`` (LightGCN code: ``right_pred / k``).

    The denominator is ``k`` even when the list is shorter than ``k`` (padding counts as a
    miss).  ``n_targets`` is only used to return ``nan`` for users without targets.
    """
    out = hits_at(hits, k) / float(k)
    return np.where(np.asarray(n_targets) > 0, out, np.nan)


def ndcg(hits: np.ndarray, n_targets: np.ndarray, k: int) -> np.ndarray:
    """NDCG@k with binary gains: ``DCG@k / IDCG@k``.

    ``DCG@k = sum_{r=1}^{k} hits[r] / log2(r + 1)`` and ``IDCG@k`` is the DCG of a list
    with ``min(k, |T_u|)`` hits at the top (Liang et al. 2018; LightGCN ``NDCGatK_r``;
    exADMM notes A3; PRISM notes B5).
    """
    _check_k(hits, k)
    dcg = hits[:, :k] @ dcg_discounts(k)
    return _safe_divide(dcg, ideal_dcg(n_targets, k))


def hit_rate(hits: np.ndarray, n_targets: np.ndarray, k: int) -> np.ndarray:
    """HR@k = 1 if at least one target is in the top-k, else 0 (He et al. 2017, NCF)."""
    out = (hits_at(hits, k) > 0).astype(np.float64)
    return np.where(np.asarray(n_targets) > 0, out, np.nan)


def rank_hit(ranks: np.ndarray, k: int) -> np.ndarray:
    """Per-positive hit: ``1[rank <= k]`` (float64).  ``rank = inf`` is a miss.

    Used for the sampled protocol (HR@K of NCF/FedRAP, where each user has one positive)
    and for λOpt's per-positive HR (``measure_user_wise_vectorized``).
    """
    return (np.asarray(ranks, dtype=np.float64) <= k).astype(np.float64)


def rank_ndcg(ranks: np.ndarray, k: int) -> np.ndarray:
    """Per-positive NDCG: ``1 / log2(rank + 1)`` if ``rank <= k`` else 0 (float64).

    A single positive has ideal DCG 1, so no normalisation is needed (NCF/FedRAP
    ``cal_ndcg``; λOpt ``measure_user_wise_vectorized``).
    """
    ranks = np.asarray(ranks, dtype=np.float64)
    inside = ranks <= k
    out = np.zeros(ranks.shape, dtype=np.float64)
    out[inside] = 1.0 / np.log2(ranks[inside] + 1.0)
    return out


def _check_k(hits: np.ndarray, k: int) -> None:
    if hits.ndim != 2:
        raise ValueError(f"hits must be 2-D [n_users, K], got shape {hits.shape}")
    if not 1 <= k <= hits.shape[1]:
        raise ValueError(f"k={k} is outside 1..{hits.shape[1]} (the width of the hit matrix)")
