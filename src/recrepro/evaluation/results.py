"""Result containers returned by the evaluators."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["EvaluationResult", "SampledResult", "TopKResult", "split_metric_key"]

_KEY = re.compile(r"^(?P<name>[a-z_]+)@(?P<k>\d+)$")


def split_metric_key(key: str) -> tuple[str, int | None]:
    """``"ndcg@20"`` → ``("ndcg", 20)``; ``"auc"`` → ``("auc", None)``."""
    match = _KEY.match(key)
    if match is None:
        return key, None
    return match["name"], int(match["k"])


class OverallMetrics:
    """What a result offers over its ``overall`` metrics: ``result["ndcg@20"]`` and :attr:`per_k`."""

    overall: dict[str, float]

    @property
    def per_k(self) -> dict[int, dict[str, float]]:
        """``{20: {"ndcg": x, ...}, ...}`` by cut-off, ascending; metrics without one (``auc``) left out."""
        out: dict[int, dict[str, float]] = {}
        for key, value in self.overall.items():
            name, k = split_metric_key(key)
            if k is not None:
                out.setdefault(k, {})[name] = value
        return dict(sorted(out.items()))

    def __getitem__(self, key: str) -> float:
        return self.overall[key]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass
class EvaluationResult(OverallMetrics):
    """Outcome of :func:`recrepro.evaluation.evaluate_full_ranking`.

    Attributes
    ----------
    overall:
        Metric key → mean over the evaluated users (users with at least one target).
        Keys are ``"<metric>@<K>"`` (e.g. ``"ndcg@20"``), plus ``"auc"``; exposure keys
        (``coverage@K``, ``gini@K``, ``gini_pos@K``) are global, not means.
    per_k:
        The same numbers regrouped as ``{K: {metric: value}}``.
    strata:
        ``{"popular" | "neutral" | "unpopular": {"ndcg@K": value}}`` when ``item_degree``
        was given, else empty.  The three values sum to ``overall["ndcg@K"]``.
    per_user:
        One row per evaluated user: ``user``, ``n_targets`` and one column per per-user
        metric key (for paired significance tests).
    counts:
        ``n_users_requested``, ``n_users_evaluated``, ``n_users_skipped_no_targets``,
        ``n_items``, ``n_targets``, ``n_targets_excluded`` (targets that were also in the
        exclusion set, which can never be hit), ``n_users_short_list`` (fewer than
        ``max(ks)`` candidate items), and ``n_users_auc_undefined`` when AUC was asked.
    settings:
        What produced the numbers (ks, tie rule, backend, batch size, strata sizes ...).
    topk:
        ``[n_users_evaluated, max(ks)]`` int32 item lists (``-1`` padding) when
        ``return_topk=True``, aligned with ``per_user``.
    """

    overall: dict[str, float]
    per_user: pd.DataFrame
    counts: dict[str, int]
    strata: dict[str, dict[str, float]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    topk: np.ndarray | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no per-user rows; non-finite floats become ``None``)."""
        return _jsonable(
            {"overall": self.overall, "strata": self.strata, "counts": self.counts, "settings": self.settings}
        )


@dataclass
class SampledResult(OverallMetrics):
    """Outcome of :func:`recrepro.evaluation.evaluate_sampled`.

    ``overall`` has ``hr@K`` and ``ndcg@K`` (means over the evaluated positives, one per
    user in the leave-one-out protocol); ``per_user`` has ``user``, ``item``, ``rank`` and
    one column per metric key; ``counts`` has ``n_positives``, ``n_users_evaluated``
    (distinct users with a positive) and ``n_negatives_per_user``.
    """

    overall: dict[str, float]
    per_user: pd.DataFrame
    counts: dict[str, int]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return _jsonable({"overall": self.overall, "counts": self.counts, "settings": self.settings})


@dataclass
class TopKResult:
    """Top-K lists from :func:`recrepro.evaluation.full_ranking_topk`.

    ``items[i]`` (int32, ``-1`` padding) and ``scores[i]`` (float32, ``-inf`` padding)
    belong to ``users[i]``; within a row the order is the ranking order.
    """

    users: np.ndarray
    items: np.ndarray
    scores: np.ndarray
