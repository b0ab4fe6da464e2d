"""Match each published cell with the runs it is compared with, and find the runs no cell claims.

A cell is (dataset, split, method, metric) of an expected entry. An entry without a split takes
the one split its method ran on (:func:`resolve_split`); the runs' (dataset, split, method,
metric) that no entry matched make the scorecard's "Our runs without a published value".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

from recrepro.scorecard.expected import ExpectedEntry, SmokeCheck
from recrepro.scorecard.runs import RunIndex, ScorecardError, summarise_runs


@dataclass(frozen=True)
class Cell:
    """A published entry and the runs matched with it."""

    entry: ExpectedEntry
    split: str | None  # None: no run of the entry's method on its dataset (and no split given)
    values: Mapping[int, float]  # {seed: value} of the metric; empty when not run


def resolve_split(entry: ExpectedEntry, runs: RunIndex) -> str | None:
    """The entry's split, else the one split its method ran on its dataset (None: none ran).

    Raises
    ------
    ScorecardError
        The entry gives no split but the method ran on several.
    """
    if entry.split is not None:
        return entry.split
    splits = runs.splits_of(entry.dataset, entry.method)
    if len(splits) > 1:
        raise ScorecardError(
            f"expected entry {entry.source}/{entry.dataset}/{entry.method}/{entry.metric} has no split, "
            f"but runs exist for splits {splits}; give the entry a split"
        )
    return splits[0] if splits else None


def match_entry(entry: ExpectedEntry, runs: RunIndex) -> Cell:
    """The runs of ``entry``'s cell: its split and the seeds' values of its metric."""
    split = resolve_split(entry, runs)
    values = runs.values(entry.dataset, split, entry.method, entry.metric) if split is not None else {}
    return Cell(entry=entry, split=split, values=values)


def stratum_alias(metric: str) -> str | None:
    """``"ndcg@20[popular]"`` for the flat name ``"ndcg_popular@20"`` a record also stores, else None.

    The ranking evaluator writes a stratum's metric twice: among ``overall`` under the flat name
    (per-user columns need one) and under ``strata``, which the scorecard reads as the bracketed name.
    """
    match = re.fullmatch(r"([a-z]+)_([a-z]+)@(\d+)", metric)
    return f"{match[1]}@{match[3]}[{match[2]}]" if match else None


def unmatched_runs(tidy: pd.DataFrame, cells: Iterable[Cell]) -> pd.DataFrame:
    """:func:`~recrepro.scorecard.runs.summarise_runs` rows of the (dataset, split, method, metric) no cell matched.

    A stratum's metric is listed once, by its bracketed name: the flat name of the same value
    (:func:`stratum_alias`) is left out where the run has both.
    """
    matched = {(c.entry.dataset, c.split, c.entry.method, c.entry.metric) for c in cells if c.split is not None}
    summary = summarise_runs(tidy)
    present = set(zip(summary["dataset"], summary["split"], summary["method"], summary["metric"]))
    mask = [(r.dataset, r.split, r.method, r.metric) not in matched
            and (r.dataset, r.split, r.method, stratum_alias(r.metric)) not in present
            for r in summary.itertuples(index=False)]
    return summary[mask].reset_index(drop=True)


def check_split(check: SmokeCheck, runs: RunIndex) -> str | None:
    """The split an ordering smoke check compares on: its own, else the method's only one (None: unclear)."""
    if check.split is not None:
        return check.split
    splits = runs.splits_of(check.dataset, check.method)
    return splits[0] if len(splits) == 1 else None
