"""Judge a cell's runs against the published number: verdict, seeds, caps and paired tests.

:func:`judge_entry` compares a matched cell (:class:`~recrepro.scorecard.match.Cell`) with its
published value and tolerance; :func:`judge_ran` and :func:`judge_ordering` evaluate the smoke
tier's checks. Nothing here writes text: :mod:`recrepro.scorecard.render` turns the results into
the scorecard's rows and notes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recrepro.scorecard.expected import ExpectedEntry, SmokeCheck
from recrepro.scorecard.match import Cell, check_split
from recrepro.scorecard.runs import RunIndex
from recrepro.scorecard.stats import PairedTest, paired_tests, seed_stats

VERDICT_WITHIN = "within"
VERDICT_DEVIATES = "deviates"
VERDICT_NOT_RUN = "not_run"
#: Verdict of a row whose published value is null but which has runs: no comparison.
VERDICT_NOT_JUDGED = ""
#: Verdicts of a smoke check.
VERDICT_PASS = "pass"
VERDICT_FAIL = "fail"

#: Baseline each method is paired-tested against in "Our runs without a published value".
DEFAULT_BASELINES: Mapping[str, str] = {"mostpop": "random"}

#: Slack on the |diff| <= tolerance comparison so that a diff equal to the tolerance in
#: decimal (0.1234 - 0.1134 vs 0.01) is not lost to binary rounding.
TOLERANCE_SLACK = 1e-12


@dataclass(frozen=True)
class AlternativeValue:
    """The seed mean of an entry's ``alternative`` on the entry's cell: shown beside the row, never judged."""

    method: str
    label: str
    mean: float  # NaN when it has not run
    sd: float  # sample sd (ddof=1); NaN for one seed or none
    n_seeds: int  # 0: no run of the alternative has the cell's metric


@dataclass(frozen=True)
class Judgement:
    """What the runs of one published cell say about it (one scorecard row)."""

    cell: Cell
    ours_mean: float
    ours_sd: float
    n_seeds: int
    tolerance: float | None  # in metric units (a rel tolerance converted)
    diff: float  # ours_mean - published; NaN when not run or nothing published
    budget: str  # the runs' caps in words ("": full budget)
    verdict: str
    method_ran: bool  # the method has runs on the cell's split (with or without the metric)
    tested: bool  # paired tests were due: the entry names a baseline and the cell ran
    tests: tuple[PairedTest, ...] = ()
    alternative: AlternativeValue | None = None  # the entry's alternative, if it names one

    @property
    def entry(self) -> ExpectedEntry:
        return self.cell.entry

    def short_of_seeds(self, seeds_required: int | None) -> bool:
        """The cell ran, but on fewer seeds than the protocol's ``seeds_required``."""
        return bool(self.n_seeds and seeds_required and self.n_seeds < seeds_required)


def verdict_of(entry: ExpectedEntry, n_seeds: int, diff: float, tolerance: float | None) -> str:
    """``not_run`` without seeds, ``""`` without a published value, else ``within`` or ``deviates``."""
    if n_seeds == 0:
        return VERDICT_NOT_RUN
    if entry.published is None:
        return VERDICT_NOT_JUDGED
    return VERDICT_WITHIN if abs(diff) <= tolerance + TOLERANCE_SLACK else VERDICT_DEVIATES


def judge_entry(cell: Cell, runs: RunIndex) -> Judgement:
    """Seed mean and sd of the cell, its distance to the published value, verdict, caps and paired tests."""
    entry, split = cell.entry, cell.split
    ours_mean, ours_sd, n_seeds = seed_stats(cell.values)
    tolerance = entry.absolute_tolerance()
    diff = ours_mean - entry.published if (n_seeds and entry.published is not None) else math.nan
    budget = runs.budget(entry.dataset, split, entry.method) if (split is not None and n_seeds) else ""
    method_ran = bool(n_seeds) or (split is not None and runs.has_runs(entry.dataset, split, entry.method))
    tested = bool(entry.baseline and n_seeds and split is not None)
    tests = paired_tests(runs, entry.dataset, split, entry.method, entry.baseline, entry.metric) if tested else []
    return Judgement(cell=cell, ours_mean=ours_mean, ours_sd=ours_sd, n_seeds=n_seeds, tolerance=tolerance,
                     diff=diff, budget=budget, verdict=verdict_of(entry, n_seeds, diff, tolerance),
                     method_ran=method_ran, tested=tested, tests=tuple(tests),
                     alternative=judge_alternative(cell, runs))


def judge_alternative(cell: Cell, runs: RunIndex) -> AlternativeValue | None:
    """Seed mean, sd and count of the entry's ``alternative`` on the cell's dataset, split and metric.

    Computed as the row's own ``ours_mean`` is (:func:`~recrepro.scorecard.stats.seed_stats`),
    and never part of the verdict. A cell whose split is unknown (the entry gives none and its
    method has not run) takes the alternative's split when it ran on exactly one, as an entry
    without a split takes its method's (:func:`~recrepro.scorecard.match.resolve_split`);
    None when the entry names no alternative.
    """
    entry, split = cell.entry, cell.split
    alternative = entry.alternative
    if alternative is None:
        return None
    if split is None:
        splits = runs.splits_of(entry.dataset, alternative.method)
        split = splits[0] if len(splits) == 1 else None  # several: no split to call "the cell's"
    values = runs.values(entry.dataset, split, alternative.method, entry.metric) if split is not None else {}
    mean, sd, n_seeds = seed_stats(values)
    return AlternativeValue(method=alternative.method, label=alternative.label, mean=mean, sd=sd, n_seeds=n_seeds)


def judge_unmatched(unmatched: pd.DataFrame, runs: RunIndex,
                    default_baselines: Mapping[str, str]) -> list[list[PairedTest]]:
    """Per row of the unmatched runs, its paired tests against the method's default baseline (if it ran)."""
    tests: list[list[PairedTest]] = []
    for r in unmatched.itertuples(index=False):
        baseline = default_baselines.get(r.method)
        tests.append(
            paired_tests(runs, r.dataset, r.split, r.method, baseline, r.metric)
            if baseline and runs.has_runs(r.dataset, r.split, baseline) else []
        )
    return tests


# ----------------------------------------------------------------------- smoke checks


@dataclass(frozen=True)
class MethodRan:
    """One method of a ``ran`` smoke check: its runs and which of its metrics are not finite."""

    method: str
    datasets: tuple[str, ...]  # sorted
    n_runs: int
    n_values: int
    n_seeds: int
    nonfinite: tuple[str, ...]  # metrics with a non-finite value, sorted

    @property
    def passed(self) -> bool:
        """It ran, and every metric value is finite."""
        return bool(self.n_runs) and not self.nonfinite


@dataclass(frozen=True)
class RanCheck:
    """A ``ran`` smoke check judged: one :class:`MethodRan` per method it names."""

    check: SmokeCheck
    methods: tuple[MethodRan, ...]

    @property
    def datasets(self) -> list[str]:
        """Every dataset the check's methods ran on, sorted."""
        return sorted({dataset for m in self.methods for dataset in m.datasets})


def judge_ran(check: SmokeCheck, runs: RunIndex) -> RanCheck:
    """A ``ran`` check: per method of ``check.methods``, whether it ran and wrote finite metrics."""
    tidy = runs.tidy
    methods = []
    for method in check.methods:
        sub = tidy[tidy["method"] == method]
        values = sub["value"].to_numpy(dtype=np.float64)
        methods.append(MethodRan(
            method=method, datasets=tuple(sorted(set(sub["dataset"]))), n_runs=int(sub["run_dir"].nunique()),
            n_values=len(sub), n_seeds=int(sub["seed"].nunique()),
            nonfinite=tuple(sorted(set(sub.loc[~np.isfinite(values), "metric"]))),
        ))
    return RanCheck(check=check, methods=tuple(methods))


@dataclass(frozen=True)
class Ordering:
    """A ``greater`` / ``less`` smoke check: the method's seed mean against the other side."""

    check: SmokeCheck
    mean: float
    sd: float
    n_seeds: int
    other: float  # the method ``than``'s seed mean, or the number ``value``
    n_other: int  # seeds of ``than`` (1 for a number)
    passed: bool

    @property
    def compared(self) -> bool:
        """Both sides have a value (the method ran, and so did ``than``)."""
        return bool(self.n_seeds and self.n_other)


def judge_ordering(check: SmokeCheck, runs: RunIndex) -> Ordering:
    """An ordering check: does ``check.method``'s seed mean lie above (``greater``) or below (``less``)?"""
    split = check_split(check, runs)
    mean, sd, n_seeds = seed_stats(runs.values(check.dataset, split, check.method, check.metric) if split else {})
    if check.than is not None:
        other, _, n_other = seed_stats(runs.values(check.dataset, split, check.than, check.metric) if split else {})
    else:
        other, n_other = float(check.value), 1
    passed = bool(n_seeds and n_other) and (mean > other if check.check == "greater" else mean < other)
    return Ordering(check=check, mean=mean, sd=sd, n_seeds=n_seeds, other=other, n_other=n_other, passed=passed)


def smoke_verdict(passed: bool) -> str:
    """``pass`` or ``fail``."""
    return VERDICT_PASS if passed else VERDICT_FAIL


def judge_smoke_checks(checks: Sequence[SmokeCheck], runs: RunIndex) -> list[RanCheck | Ordering]:
    """Each check judged, in order: a ``ran`` check as a :class:`RanCheck`, an ordering as an :class:`Ordering`."""
    return [judge_ran(check, runs) if check.check == "ran" else judge_ordering(check, runs) for check in checks]
