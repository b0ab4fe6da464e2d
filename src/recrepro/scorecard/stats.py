"""Statistics of a cell's runs: seed mean and sd, and paired tests of a method against its baseline.

A paired t-test over the seeds both methods ran (:func:`paired_seed_ttest`) and a Wilcoxon
signed-rank test over the users both runs of one seed evaluated (:func:`paired_user_wilcoxon`);
:func:`paired_tests` runs both on the loaded runs (:class:`~recrepro.scorecard.runs.RunIndex`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recrepro.scorecard.expected import parse_metric_key
from recrepro.scorecard.runs import RunIndex

#: ``(n_pairs, statistic, p_value, mean_diff)`` of one test.
PairedResult = tuple[int, float, float, float]


@dataclass(frozen=True)
class PairedTest:
    """Result of one paired significance test of ``method`` against ``baseline``."""

    kind: str  # "ttest_seeds" or "wilcoxon_users"
    dataset: str
    split: str
    method: str
    baseline: str
    metric: str
    n_pairs: int
    statistic: float
    p_value: float
    mean_diff: float
    seed: int | None = None  # the seed whose per-user values were paired (Wilcoxon)

    def describe(self) -> str:
        """One-line description for the scorecard note."""
        p_text = "undefined (differences constant)" if math.isnan(self.p_value) else f"{self.p_value:.3g}"
        if self.kind == "ttest_seeds":
            what = f"paired t-test over {self.n_pairs} seeds vs {self.baseline}"
        else:
            what = f"Wilcoxon signed-rank over {self.n_pairs} users (seed {self.seed}) vs {self.baseline}"
        return f"{what}: p={p_text}, mean diff {self.mean_diff:+.4g}"


def seed_stats(values: Mapping[int, float]) -> tuple[float, float, int]:
    """Mean, sample sd (ddof=1; NaN for one seed) and count of ``{seed: value}``; NaN, NaN, 0 for none."""
    array = np.array([values[s] for s in sorted(values)], dtype=np.float64)
    if not array.size:
        return math.nan, math.nan, 0
    return float(array.mean()), float(array.std(ddof=1)) if array.size > 1 else math.nan, int(array.size)


def paired_seed_ttest(ours: Mapping[int, float], baseline: Mapping[int, float]) -> PairedResult | None:
    """``scipy.stats.ttest_rel`` over the seeds both methods ran (needs >= 2).

    Returns
    -------
    tuple or None
        ``(n_pairs, statistic, p_value, mean_diff)``; ``None`` with fewer than 2 shared seeds.
    """
    from scipy import stats

    seeds = sorted(set(ours) & set(baseline))
    if len(seeds) < 2:
        return None
    ours_values = np.array([ours[s] for s in seeds], dtype=np.float64)
    baseline_values = np.array([baseline[s] for s in seeds], dtype=np.float64)
    with warnings.catch_warnings():
        # Constant differences give nan (reported as undefined), not an exception.
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.ttest_rel(ours_values, baseline_values)
    return len(seeds), float(result.statistic), float(result.pvalue), float(np.mean(ours_values - baseline_values))


def seed_ttest_against_summary(ours: Mapping[int, float], mean: float, sd: float, n: int,
                               fixed: bool) -> tuple[float, str] | None:
    """A method's seeds against a baseline known by its mean, sd and count only (a table row).

    ``fixed``: the baseline is deterministic, one value for every seed, so ``scipy.stats.ttest_1samp``
    of the method's seeds against that value; otherwise Welch's t-test from the two sides' summary
    statistics (``scipy.stats.ttest_ind_from_stats``, unequal variances), the runs of the two not
    being paired.  Returns ``(p_value, what)`` or ``None`` when a side has fewer than 2 values.
    """
    from scipy import stats

    values = np.array([ours[s] for s in sorted(ours)], dtype=np.float64)
    if values.size < 2 or (not fixed and (n < 2 or not math.isfinite(sd))):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # constant seeds: nan, reported as undefined
        if fixed:
            result = stats.ttest_1samp(values, float(mean))
            return float(result.pvalue), f"one-sample t-test of {values.size} seeds against the deterministic baseline"
        result = stats.ttest_ind_from_stats(float(values.mean()), float(values.std(ddof=1)), int(values.size),
                                            float(mean), float(sd), int(n), equal_var=False)
    return float(result.pvalue), f"Welch's t-test over {values.size} and {int(n)} seeds"


def paired_user_wilcoxon(ours: pd.DataFrame, baseline: pd.DataFrame, metric: str) -> PairedResult | None:
    """``scipy.stats.wilcoxon`` (two-sided, zero differences dropped) over shared users.

    Returns
    -------
    tuple or None
        ``(n_pairs, statistic, p_value, mean_diff)``; ``None`` when either frame lacks
        the metric or they share no user with finite values.
    """
    from scipy import stats

    if metric not in ours.columns or metric not in baseline.columns:
        return None
    paired = ours[["user", metric]].merge(baseline[["user", metric]], on="user", suffixes=("_ours", "_base"))
    paired = paired.dropna().sort_values("user")
    if paired.empty:
        return None
    ours_values = paired[f"{metric}_ours"].to_numpy(np.float64)
    baseline_values = paired[f"{metric}_base"].to_numpy(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            result = stats.wilcoxon(ours_values, baseline_values)
            statistic, p_value = float(result.statistic), float(result.pvalue)
        except ValueError:  # all differences zero in some scipy versions
            statistic, p_value = math.nan, math.nan
    return len(paired), statistic, p_value, float(np.mean(ours_values - baseline_values))


def _user_test(runs: RunIndex, dataset: str, split: str, method: str, baseline: str, metric: str,
               seeds: list[int]) -> tuple[int, PairedResult] | None:
    """The Wilcoxon test of the lowest of ``seeds`` whose two runs both have per-user values (with its seed)."""
    for seed in seeds:
        ours_frame = runs.per_user(dataset, split, method, seed)
        base_frame = runs.per_user(dataset, split, baseline, seed)
        if ours_frame is None or base_frame is None:
            continue
        result = paired_user_wilcoxon(ours_frame, base_frame, metric)
        if result is not None:
            return seed, result  # the lowest shared seed stands for all; one line per row is enough
    return None


def paired_tests(runs: RunIndex, dataset: str, split: str, method: str, baseline: str,
                 metric: str) -> list[PairedTest]:
    """The paired tests of ``method`` against ``baseline`` on one cell: seed t-test, then user Wilcoxon.

    Either is left out when it cannot be run (fewer than 2 shared seeds; no per-user values, or a
    stratified metric, which ``per_user.parquet`` does not hold).
    """
    ours = runs.values(dataset, split, method, metric)
    base = runs.values(dataset, split, baseline, metric)
    common = dict(dataset=dataset, split=split, method=method, baseline=baseline, metric=metric)
    tests: list[PairedTest] = []
    seed_test = paired_seed_ttest(ours, base)
    if seed_test is not None:
        tests.append(_paired_test("ttest_seeds", seed_test, **common))
    _, stratum = parse_metric_key(metric)
    if stratum is None:  # per_user.parquet has no stratified columns
        user_test = _user_test(runs, dataset, split, method, baseline, metric, sorted(set(ours) & set(base)))
        if user_test is not None:
            seed, result = user_test
            tests.append(_paired_test("wilcoxon_users", result, seed=seed, **common))
    return tests


def _paired_test(kind: str, result: PairedResult, **identity) -> PairedTest:
    """A :class:`PairedTest` of ``kind`` from a test's ``(n_pairs, statistic, p_value, mean_diff)``."""
    n, statistic, p_value, mean_diff = result
    return PairedTest(kind, n_pairs=n, statistic=statistic, p_value=p_value, mean_diff=mean_diff, **identity)


def matched_seeds(a: dict[int, float], b: dict[int, float], method: str,
                  than: str) -> tuple[dict[int, float], dict[int, float], str]:
    """Both sides on the seeds both ran, and a note naming the seeds left out.

    A mean over seeds 0-1 against a mean over seed 0 would mix a seed's own luck into the
    difference; a comparison rests on the seeds the two sides share.  Without a shared seed the
    means are of different seeds, and the note says so.
    """
    common = set(a) & set(b)
    if not common:
        return a, b, "; no seed in common: means over different seeds"
    extra = [(name, sorted(set(side) - common)) for name, side in ((method, a), (than, b)) if set(side) - common]
    note = "".join(f"; `{name}`'s seed{'s' if len(left) > 1 else ''} {', '.join(map(str, left))} left out "
                   f"(not run on the other side)" for name, left in extra)
    return {k: a[k] for k in sorted(common)}, {k: b[k] for k in sorted(common)}, note


def table_seed_counts(rows: pd.DataFrame, method: str, than: str) -> str:
    """" (means over 2 and 1 seeds)" where a table of seed means (a ``seeds`` column, no per-seed rows)
    averages the two sides over different numbers of seeds: the comparison cannot pair them."""
    if "seeds" not in rows.columns:
        return ""
    counts = [int(rows.loc[rows["method"] == m, "seeds"].max()) for m in (method, than)]
    return f" (means over {counts[0]} and {counts[1]} seeds)" if counts[0] != counts[1] else ""
