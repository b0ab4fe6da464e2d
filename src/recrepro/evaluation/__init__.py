"""Evaluation core: full ranking, sampled ranking, ranking metrics and item exposure.

Entry points
------------
- :func:`evaluate_full_ranking` — score all items for every evaluated user (batched),
  mask an exclusion matrix, rank with the tie rule *score desc, then item id asc*, and
  compute Recall (Liang / LightGCN forms), NDCG, HR, precision, coverage, Gini,
  position-weighted Gini, stratified NDCG and, on request, AUC and λOpt's per-positive
  HR/NDCG.  Returns an :class:`EvaluationResult` with per-user vectors.
- :func:`full_ranking_topk` — just the top-K lists.
- :func:`evaluate_sampled` — leave-one-out ranking against fixed sampled negatives
  (FedRAP/NCF), with pessimistic or optimistic ties.

Data arrive as split parts with ``user``/``item`` columns; build the sparse inputs with
:func:`interactions_to_csr` (and :func:`negatives_from_frame` for ``negatives.parquet``).
"""

from recrepro.evaluation.exposure import STRATA, coverage, exposure_counts, gini, item_strata, lower_is_better
from recrepro.evaluation.inputs import canonical_csr, interactions_to_csr, negatives_from_frame
from recrepro.evaluation.metrics import (
    dcg_discounts,
    hit_rate,
    hits_at,
    ideal_dcg,
    ndcg,
    precision,
    rank_hit,
    rank_ndcg,
    recall_lgcn,
    recall_liang,
)
from recrepro.evaluation.results import EvaluationResult, SampledResult, TopKResult

# The ranking and sampled modules need torch (2-3 s to import); record readers, tables and figures
# import this package only for metrics and exposure, so those names load on first use (PEP 562).
_TORCH_BOUND = {
    "ALL_METRICS": "ranking",
    "DEFAULT_METRICS": "ranking",
    "evaluate_full_ranking": "ranking",
    "full_ranking_topk": "ranking",
    "rank_positives": "ranking",
    "select_topk": "ranking",
    "evaluate_sampled": "sampled",
    "sampled_ranks": "sampled",
}


def __getattr__(name: str):
    module = _TORCH_BOUND.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

__all__ = [
    "ALL_METRICS",
    "DEFAULT_METRICS",
    "STRATA",
    "EvaluationResult",
    "SampledResult",
    "TopKResult",
    "canonical_csr",
    "coverage",
    "dcg_discounts",
    "evaluate_full_ranking",
    "evaluate_sampled",
    "exposure_counts",
    "full_ranking_topk",
    "gini",
    "hit_rate",
    "hits_at",
    "ideal_dcg",
    "interactions_to_csr",
    "item_strata",
    "lower_is_better",
    "ndcg",
    "negatives_from_frame",
    "precision",
    "rank_hit",
    "rank_ndcg",
    "rank_positives",
    "recall_lgcn",
    "recall_liang",
    "sampled_ranks",
    "select_topk",
]
