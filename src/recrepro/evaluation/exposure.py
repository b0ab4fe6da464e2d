"""Item exposure (coverage, Gini) over top-K lists, and popularity strata of items.

Exposure definitions follow the exADMM code (notes A3): the exposure ``E_i`` of item
``i`` is accumulated over the top-K lists of all evaluated users, and coverage and Gini
are taken over the whole item universe (every column of the score matrix, items that
were never recommended included, i.e. with ``E_i = 0``).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from recrepro.evaluation.metrics import dcg_discounts

__all__ = [
    "STRATA",
    "exposure_counts",
    "coverage",
    "gini",
    "item_strata",
    "lower_is_better",
]

#: Metrics where a smaller value is the better one (exposure concentration); every other metric
#: this package reports (accuracy, coverage) is better larger.
LOWER_IS_BETTER: tuple[str, ...] = ("gini", "gini_pos")


def lower_is_better(metric: str) -> bool:
    """Whether a smaller value of ``metric`` (e.g. ``"gini@20"``) is the better one.

    >>> lower_is_better("gini@20"), lower_is_better("ndcg@20"), lower_is_better("coverage@20")
    (True, False, False)
    """
    return metric.split("@", 1)[0] in LOWER_IS_BETTER


#: Stratum names in label order (label 0, 1, 2 of :func:`item_strata`).
STRATA: tuple[str, str, str] = ("popular", "neutral", "unpopular")

Weighting = Literal["uniform", "log_rank"]


def exposure_counts(topk_items: np.ndarray, n_items: int, k: int, weighting: Weighting = "uniform") -> np.ndarray:
    """Exposure of every item over the first ``k`` columns of the top-K lists.

    Parameters
    ----------
    topk_items:
        Int array ``[n_users, K_max]`` of item ids, ``-1`` for padding (ignored).
    n_items:
        Size of the item universe; the result has this length.
    k:
        Cut-off; only ranks ``1..k`` count.
    weighting:
        ``"uniform"``: each appearance counts 1 (exADMM ``Gini`` / ``Coverage``).
        ``"log_rank"``: an appearance at rank ``r`` counts ``1 / log2(r + 1)`` — the
        position-weighted exposure the exADMM code intended ("Gini(logrank)") but, by a
        bug, computed with a constant weight (notes A3, pitfall A9.1).

    Returns
    -------
    numpy.ndarray
        float64 ``[n_items]`` exposure ``E_i``.
    """
    if not 1 <= k <= topk_items.shape[1]:
        raise ValueError(f"k={k} is outside 1..{topk_items.shape[1]}")
    block = topk_items[:, :k]
    valid = block >= 0
    if weighting == "uniform":
        weights = None
    elif weighting == "log_rank":
        weights = np.broadcast_to(dcg_discounts(k), block.shape)[valid]
    else:
        raise ValueError(f"unknown weighting {weighting!r}")
    return np.bincount(block[valid], weights=weights, minlength=n_items).astype(np.float64)[:n_items]


def coverage(exposure: np.ndarray) -> float:
    """Coverage@K = (number of items with ``E_i > 0``) / (size of the item universe).

    exADMM code: "fraction of the m items with E_i >= 1" (notes A3).
    """
    exposure = np.asarray(exposure)
    return float(np.count_nonzero(exposure > 0) / exposure.size) if exposure.size else float("nan")


def gini(exposure: np.ndarray) -> float:
    r"""Gini coefficient of a non-negative exposure vector over the item universe.

    .. math:: G = \frac{\sum_{i=1}^{m} (2i - m - 1)\, x_{(i)}}{m \sum_i x_i},

    with :math:`x_{(1)} \le \dots \le x_{(m)}` sorted ascending.  This equals the
    mean-absolute-difference form :math:`\sum_i\sum_j |x_i - x_j| / (2 m^2 \bar x)` used by
    the exADMM code (notes A3), without the ``m / (m - 1)`` small-sample correction:
    ``G = 0`` for uniform exposure and ``G = (m - 1) / m`` when one item of ``m`` gets
    everything.  Returns ``nan`` when the total exposure is 0.
    """
    x = np.sort(np.asarray(exposure, dtype=np.float64).ravel())
    m = x.size
    total = x.sum()
    if m == 0 or total <= 0:
        return float("nan")
    weights = 2.0 * np.arange(1, m + 1, dtype=np.float64) - m - 1.0
    return float(weights @ x / (m * total))


def item_strata(item_degree: np.ndarray, popular_share: float = 0.05, neutral_share: float = 0.15) -> np.ndarray:
    """Label items popular (0) / neutral (1) / unpopular (2) by degree.

    Items are ordered by degree descending, **ties broken by item id ascending** (so at a
    boundary the lower ids fall into the more popular stratum).  The first
    ``ceil(popular_share * m)`` items are *popular*, the items up to position
    ``ceil((popular_share + neutral_share) * m)`` are *neutral*, the rest (items with
    degree 0 included) are *unpopular*.  With the defaults this is PRISM's
    "top ceil(5%) / next up to ceil(20%) / rest" (notes B5); PRISM sorts with torch and
    leaves boundary ties unspecified.  Which degree to use (train only, or all splits as
    PRISM's ``test.py`` does) is the caller's choice.

    Parameters
    ----------
    item_degree:
        ``[n_items]`` interaction counts.
    popular_share, neutral_share:
        Fractions of the item universe in the first two strata.

    Returns
    -------
    numpy.ndarray
        int8 ``[n_items]`` labels indexing :data:`STRATA`.
    """
    degree = np.asarray(item_degree)
    m = degree.size
    # Subtract a hair before ceil so that e.g. 0.05 * 100 = 5.000000000000001 gives 5.
    n_popular = min(m, math.ceil(popular_share * m - 1e-9))
    n_top = min(m, math.ceil((popular_share + neutral_share) * m - 1e-9))
    order = np.lexsort((np.arange(m), -degree.astype(np.float64)))
    labels = np.full(m, 2, dtype=np.int8)
    labels[order[:n_top]] = 1
    labels[order[:n_popular]] = 0
    return labels
