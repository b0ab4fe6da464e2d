"""Every name a claim's checks use must exist: a method, dataset or metric that neither the tier's
planned runs, the records nor the expected file's entries know is a typo (``than: [fedrap_fixd]``), and
the claims are refused with the claim, the name and the closest known one. Without this, such a check
would read "not testable yet: waits for `fedrap_fixd`" for ever, and the verdict would be computed
without it.

The planned runs come from the workflow (``tier_run_records``: every run record the tier's DAG makes),
so a method the config would run but has not yet counts as known.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from recrepro.scorecard.claimrecords import ClaimRecords, ClaimsError
from recrepro.scorecard.claimspec import Check
from recrepro.scorecard.expected import ExpectedFile

__all__ = ["KnownNames", "check_claim_names", "known_names"]

#: Check kinds whose ``metric`` names a column of a table (or the strong-baselines table), not a record's
_TABLE_METRICS = ("cells", "cost", "waits")


@dataclass
class KnownNames:
    """The methods, datasets and metrics of one paper that the records, the planned runs or the
    expected file know."""

    methods: set[str] = field(default_factory=set)
    datasets: set[str] = field(default_factory=set)
    metrics: set[str] = field(default_factory=set)


def _planned(paper: str, paths: Iterable[str]) -> Iterable[tuple[str, str]]:
    """``(dataset, method)`` of the planned run records of ``paper``
    (``results/<tier>/<paper>/<runs|tuned>/<dataset>/.../<method>/seed<k>/metrics.json``)."""
    for path in paths:
        parts = Path(path).parts
        if len(parts) >= 7 and parts[0] == "results" and parts[2] == paper and parts[-2].startswith("seed"):
            yield parts[4], parts[-3]


def known_names(paper: str, records: ClaimRecords, expected: ExpectedFile, planned: Sequence[str]) -> KnownNames:
    """What exists for ``paper``: its records' and planned runs' methods and datasets, the metrics its
    records keep, and the methods, datasets and metrics of its expected entries."""
    known = KnownNames()
    for (dataset, _split, method), seeds in records.values.items():
        known.methods.add(method)
        known.datasets.add(dataset)
        for values in seeds.values():
            known.metrics.update(values)
    for dataset, method in _planned(paper, planned):
        known.methods.add(method)
        known.datasets.add(dataset)
    for entry in expected.entries:
        known.methods.add(entry.method)
        known.datasets.add(entry.dataset)
        known.metrics.add(entry.metric)
    for dataset, method in records.untrained:  # left out of the values, known all the same
        known.datasets.add(dataset)
        known.methods.add(method)
    return known


def _closest(name: str, pool: set[str]) -> str:
    found = difflib.get_close_matches(name, sorted(pool), n=1, cutoff=0.6)
    return f" (the closest known: `{found[0]}`)" if found else ""


def _unknown(names: Iterable[str], pool: set[str]) -> list[str]:
    """The names that match nothing in ``pool``: ``*`` and ``?`` are shell wildcards, brackets are
    literal (a stratified metric, ``ndcg@20[unpopular]``)."""
    def known(name: str) -> bool:
        if "*" not in name and "?" not in name:
            return name in pool
        pattern = name.replace("[", "[[]")
        return any(fnmatch.fnmatchcase(p, pattern) for p in pool)

    return [n for n in names if not known(n)]


def _check_names(check: Check, known: KnownNames) -> list[tuple[str, str, set[str]]]:
    """``(what, name, pool)`` of every unknown name in ``check``."""
    missing = []
    methods = [*check.method, *check.than, *check.baselines]
    if check.kind != "cells":
        methods += list(check.methods)
    missing += [("method", n, known.methods) for n in _unknown(methods, known.methods)]
    missing += [("dataset", n, known.datasets) for n in _unknown(check.datasets, known.datasets)]
    reads_records = check.kind not in _TABLE_METRICS and not check.table and not (
        check.kind == "beats_strongest_baseline" and not check.baselines)
    if reads_records:
        metrics = [m for m in (check.metric, check.x if check.kind == "frontier" else None,
                               check.y if check.kind == "frontier" else None) if m]
        missing += [("metric", n, known.metrics) for n in _unknown(metrics, known.metrics)]
    return missing


def check_claim_names(expected: ExpectedFile, known: KnownNames) -> None:
    """Refuse the claims when a check names a method, dataset or metric nothing knows."""
    for claim in expected.claims:
        for index, check in enumerate(claim.checks):
            for what, name, pool in _check_names(check, known):
                raise ClaimsError(f"{expected.path}: claim {claim.id}, checks[{index}]: {what} `{name}` is neither "
                                  f"planned by the config nor in any record or expected entry{_closest(name, pool)}")
