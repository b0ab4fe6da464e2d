"""The statistics behind a claim's checks: an effect with its interval and test, Holm's correction,
equivalence (TOST) and non-inferiority against a margin, a trend test along a sweep, a correlation's
interval, and a pooled effect over datasets.

Every function is a plain computation on arrays (scipy for the distributions), so each is checked by
hand in ``tests/test_inference.py``. :mod:`~recrepro.scorecard.claims` builds the checks' evidence with
them and :mod:`~recrepro.scorecard.verdicts` corrects the p values of one claim together (Holm) and
turns each into an outcome. ``docs/verdicts.md`` explains the rules.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The level every test is read at (after Holm's correction over the checks of one claim).
ALPHA = 0.05
#: The power the smallest detectable effect is computed for.
POWER = 0.8


@dataclass(frozen=True)
class Estimate:
    """A mean effect with its standard error and the test it came from.

    ``df`` is the t distribution's degrees of freedom (``math.inf``: a normal approximation);
    ``test`` names the test and its n in words ("paired t-test over 943 users (ndcg@20 averaged
    over 3 seeds)"); ``n`` is the number of pairs.
    """

    effect: float
    se: float
    df: float
    n: int
    test: str

    def _quantile(self, q: float) -> float:
        from scipy import stats

        return float(stats.norm.ppf(q) if math.isinf(self.df) else stats.t.ppf(q, self.df))

    def _cdf(self, x: float) -> float:
        from scipy import stats

        return float(stats.norm.cdf(x) if math.isinf(self.df) else stats.t.cdf(x, self.df))

    def _sf(self, x: float) -> float:
        """``1 - cdf(x)`` without its cancellation (a t of 18 has p ~1e-62, not 0)."""
        from scipy import stats

        return float(stats.norm.sf(x) if math.isinf(self.df) else stats.t.sf(x, self.df))

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided ``level`` confidence interval of the effect (a point when ``se`` is 0)."""
        half = self._quantile(0.5 + level / 2) * self.se
        return self.effect - half, self.effect + half

    def p_value(self) -> float:
        """Two-sided p of ``effect == 0`` (NaN when the effect is exactly constant: ``se`` 0, effect 0)."""
        if self.se == 0:
            return math.nan if self.effect == 0 else 0.0
        return 2.0 * self._sf(abs(self.effect) / self.se)

    def p_above(self, bound: float) -> float:
        """One-sided p of ``effect <= bound`` (small when the effect lies clearly above ``bound``)."""
        if self.se == 0:
            return 0.0 if self.effect > bound else 1.0
        return self._sf((self.effect - bound) / self.se)

    def p_below(self, bound: float) -> float:
        """One-sided p of ``effect >= bound`` (small when the effect lies clearly below ``bound``)."""
        if self.se == 0:
            return 0.0 if self.effect < bound else 1.0
        return self._cdf((self.effect - bound) / self.se)

    def detectable(self, alpha: float = ALPHA, power: float = POWER) -> float:
        """The smallest effect a two-sided test at ``alpha`` finds with probability ``power`` at this
        standard error: ``(q(1 - alpha/2) + q(power)) * se``."""
        return (self._quantile(1 - alpha / 2) + self._quantile(power)) * self.se

    def scaled(self, factor: float) -> Estimate:
        """The same estimate in other units (a difference divided by a reference mean)."""
        return Estimate(self.effect * factor, self.se * abs(factor), self.df, self.n, self.test)


def paired_estimate(ours: Sequence[float], theirs: Sequence[float], test: str) -> Estimate | None:
    """The mean of the paired differences ``ours - theirs`` with the paired t-test's standard error
    (``scipy.stats.ttest_rel`` is this test); None with fewer than 2 pairs."""
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired_estimate: {a.size} against {b.size} values")
    if a.size < 2:
        return None
    diff = a - b
    se = float(diff.std(ddof=1) / math.sqrt(diff.size))
    return Estimate(float(diff.mean()), se, float(diff.size - 1), int(diff.size), test)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p values (NaN stays NaN and does not count among the tests).

    Written out rather than taken from statsmodels (``multipletests(method="holm")``): the method is
    five lines and the project does not otherwise need that dependency. The adjusted p of the k-th
    smallest of m p values is ``max_{j <= k} min(1, (m - j + 1) p_(j))``.
    """
    p = np.asarray(p_values, dtype=np.float64)
    finite = np.flatnonzero(np.isfinite(p))
    out = np.full(p.shape, np.nan)
    if finite.size:
        order = finite[np.argsort(p[finite], kind="stable")]
        m = order.size
        scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
        out[order] = np.maximum.accumulate(scaled)
    return [float(v) for v in out]


@dataclass(frozen=True)
class MarginTest:
    """An estimate against a region ``[low, high]`` (None: unbounded on that side): the p of "inside"
    (equivalence: both one-sided tests, TOST; non-inferiority where one side is open) and the p of
    "outside" (the estimate lies beyond the nearer bound)."""

    p_inside: float
    p_outside: float


def margin_test(estimate: Estimate, low: float | None, high: float | None) -> MarginTest:
    """TOST of ``low < effect < high`` (the larger of the two one-sided p values) and the p of the
    effect lying beyond a bound (the smaller of the one-sided p values of ``effect < low`` and
    ``effect > high``). Reading each at :data:`ALPHA` is reading the 90 % interval (the one-sided
    95 % bounds) against the region."""
    if low is None and high is None:
        raise ValueError("margin_test: a region needs at least one bound")
    inside = [estimate.p_above(low)] if low is not None else []
    inside += [estimate.p_below(high)] if high is not None else []
    outside = [estimate.p_below(low)] if low is not None else []
    outside += [estimate.p_above(high)] if high is not None else []
    return MarginTest(max(inside), min(outside))


@dataclass(frozen=True)
class Trend:
    """Kendall's τ between a sweep's position and its values (every seed's value a point), its
    two-sided p and the number of points."""

    tau: float
    p_value: float
    n: int


def trend_test(points: Sequence[Sequence[float]]) -> Trend:
    """Kendall's τ (``scipy.stats.kendalltau``, τ-b) of position against value over every value of every
    point along a sweep (a Mann–Kendall test with the seeds as replicates): positive when the values
    rise along the sweep."""
    from scipy import stats

    xs = np.concatenate([np.full(len(values), i, dtype=np.float64) for i, values in enumerate(points)])
    ys = np.concatenate([np.asarray(values, dtype=np.float64) for values in points])
    if xs.size < 3 or np.unique(xs).size < 2:
        return Trend(math.nan, math.nan, int(xs.size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # constant values: nan, reported as undefined
        result = stats.kendalltau(xs, ys)
    return Trend(float(result.statistic), float(result.pvalue), int(xs.size))


def spearman_estimate(rhos: Sequence[float], n_items: int) -> Estimate:
    """Seeds' Spearman correlations over ``n_items`` pairs each, as one estimate on Fisher's z scale.

    Two errors bound how well the mean z is known: the items' sampling error, sqrt(1.06 / (n - 3)) per
    seed (Fieller, Hartley and Pearson 1957's variance for Spearman's ρ), and, with two seeds or more,
    the seeds' own spread (the training run is the unit a claim about a method generalises over; the
    items are the same in every seed). The estimate takes the larger: the t over the seeds (k - 1 df)
    where their spread exceeds the items' error, the normal Fisher interval otherwise. The effect and its
    bounds are z; :func:`to_rho` turns them back."""
    z = _fisher_z(rhos)
    return _larger_error(z, math.sqrt(1.06 / max(n_items - 3, 1)) / math.sqrt(z.size), int(n_items),
                         f"Fisher z interval of Spearman's ρ over {n_items:,} items × {z.size} seed"
                         + ("s" if z.size != 1 else ""))


def spearman_difference(ours: Sequence[float], theirs: Sequence[float], n_ours: int, n_theirs: int,
                        against: str) -> Estimate:
    """z(ours) - z(theirs), the seeds' Spearman ρ of two methods on the same seeds (over ``n_ours`` and
    ``n_theirs`` items): the two items' errors in quadrature, or the paired t over the seeds'
    differences where that error is larger (as :func:`spearman_estimate`)."""
    za, zb = _fisher_z(ours), _fisher_z(theirs)
    if za.shape != zb.shape:
        raise ValueError(f"spearman_difference: {za.size} against {zb.size} seeds")
    items_se = math.hypot(*(math.sqrt(1.06 / max(n - 3, 1)) for n in (n_ours, n_theirs))) / math.sqrt(za.size)
    return _larger_error(za - zb, items_se, int(n_ours), f"difference of Fisher z against {against}'s",
                         paired=True)


def _fisher_z(rhos: Sequence[float]) -> np.ndarray:
    # clipped: a ρ of exactly ±1 (a smoke run's tiny table) has an infinite z
    return np.arctanh(np.clip(np.asarray(rhos, dtype=np.float64), -0.999999, 0.999999))


def _larger_error(z: np.ndarray, items_se: float, n: int, test: str, paired: bool = False) -> Estimate:
    mean = float(z.mean())
    if z.size >= 2:
        seeds_se = float(z.std(ddof=1) / math.sqrt(z.size))
        if seeds_se > items_se:
            what = "paired t over" if paired else "t over"
            return Estimate(mean, seeds_se, float(z.size - 1), n,
                            f"{what} {z.size} seeds' Fisher z ({test}; the seeds' spread exceeds the items' "
                            f"sampling error over {n:,} items)")
    return Estimate(mean, items_se, math.inf, n, test)


def to_rho(z: float) -> float:
    """Fisher's z back to a correlation."""
    return float(np.tanh(z))


def pooled_estimate(estimates: Sequence[Estimate]) -> Estimate | None:
    """The unweighted mean of several estimates of one effect in one unit, each counted once: the
    average over the cells a claim names ("38 % fewer epochs on average" over losses and datasets),
    as the paper's own average counts them. None without an estimate with a standard error.

    Its standard error is ``sqrt(Σ seᵢ²) / k`` (independent estimates) and its degrees of freedom
    Welch-Satterthwaite's for the sum: ``df = (Σ seᵢ²)² / Σ (seᵢ⁴ / dfᵢ)``. A normal approximation
    would treat the standard error of a 3-seed t-test as known and turn an inconclusive check into a
    significant pooled one; with one estimate the pooled result is that estimate's own test (its df),
    and estimates from large samples (df ∞) leave the normal approximation.

    Why unweighted, not inverse-variance: a fixed-effect (inverse-variance) mean estimates one effect
    shared by every cell and leans on the cell with the least seed noise. The cells of an "on average"
    claim differ in truth (PRISM's epochs to the best on gowalla: -81 % for MF + DirectAU, +11 % for
    MF + MAWU), and the claim's number is their plain average; weighting would let the most precise
    cell speak for it."""
    usable = [e for e in estimates if math.isfinite(e.se) and e.se >= 0 and math.isfinite(e.effect)]
    variances = np.array([e.se**2 for e in usable])
    if not usable or variances.sum() <= 0:
        return None
    k = len(usable)
    effect = float(np.mean([e.effect for e in usable]))
    spread = sum(v**2 / e.df for v, e in zip(variances, usable, strict=True) if math.isfinite(e.df))
    df = float(variances.sum() ** 2 / spread) if spread > 0 else math.inf
    approximation = "normal approximation" if math.isinf(df) else f"t with {df:.1f} Welch-Satterthwaite df"
    return Estimate(effect, float(math.sqrt(variances.sum()) / k), df, sum(e.n for e in usable),
                    f"unweighted mean of {k} estimate{'s' if k != 1 else ''} ({approximation})")


__all__ = ["ALPHA", "POWER", "Estimate", "MarginTest", "Trend", "holm", "margin_test", "paired_estimate",
           "pooled_estimate", "spearman_difference", "spearman_estimate", "to_rho", "trend_test"]
