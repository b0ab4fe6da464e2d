"""The run records a paper's claims read (:mod:`~recrepro.scorecard.claims`): ``{seed: value}`` per
(dataset, split, method, metric), with the records a claim leaves out (runs that never left their
initialisation) and the notes a verdict carries (a tuned pick made from part of its grid)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recrepro.records import METRICS_FILE, read_record_json

__all__ = ["RATIO_STRATA", "ClaimRecords", "ClaimsError", "never_left_initialisation", "stratum_ratios"]

#: Ratios of two strata a claim may read as one metric, ``ndcg@20[unpopular/popular]``: how much of a
#: model's accuracy goes to unpopular items for each unit that goes to popular ones (PRISM, claim P5).
RATIO_STRATA = (("unpopular", "popular"),)


class ClaimsError(ValueError):
    """The records cannot be read for the claims (two runs claim one identity, or a table is malformed)."""


def never_left_initialisation(metrics: Mapping[str, Any]) -> bool:
    """A run stopped on patience whose best validation score is its first evaluation: it never
    improved on where it started, so a comparison with it says nothing about its method (λOpt's
    MF variants on amazon-video under the official N(0, 1) initialisation sit on a plateau at chance
    longer than the patience: docs/deviations.md#lambdaopt-video-init). Claims leave such records out."""
    stopping = metrics.get("stopping")
    if not isinstance(stopping, Mapping) or stopping.get("stopped") != "patience":
        return False
    best, first = stopping.get("best_epoch"), stopping.get("eval_every") or 1
    return isinstance(best, (int, float)) and best <= first


def stratum_ratios(strata: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """``{"ndcg@20[unpopular/popular]": u / p, ...}`` for each metric both strata of a
    :data:`RATIO_STRATA` pair carry; left out where the denominator is 0 (no ratio, not infinity)."""
    out: dict[str, float] = {}
    for top, bottom in RATIO_STRATA:
        over, under = strata.get(top) or {}, strata.get(bottom) or {}
        for metric in sorted(set(over) & set(under)):
            a, b = float(over[metric]), float(under[metric])
            if b != 0.0:
                out[f"{metric}[{top}/{bottom}]"] = a / b
    return out


class ClaimRecords:
    """Every run record of one paper and tier: ``{seed: value}`` per (dataset, split, method, metric).

    A value is a test metric (``overall``), a stratified one (``ndcg@20[popular]``), a ratio of two strata
    (``ndcg@20[unpopular/popular]``, :func:`stratum_ratios`) or a number the record keeps at its top level
    or in ``counts`` (``epochs_to_best``, ``best_val_ndcg``).
    """

    def __init__(self, run_dirs: Sequence[str | Path]) -> None:
        self.values: dict[tuple[str, str, str], dict[int, dict[str, float]]] = {}
        self.dirs: dict[tuple[str, str, str], dict[int, Path]] = {}
        #: (dataset, method) of the records left out as untrained (:func:`never_left_initialisation`)
        self.untrained: set[tuple[str, str]] = set()
        #: (dataset, method) -> the record's ``budget`` note: a tuned pick made from part of its grid
        #: ("tuned over 3 of 4 weight decays"), which may change once the rest of the grid runs
        self.budgets: dict[tuple[str, str], str] = {}
        #: (dataset, method) -> the run a tuned record's pick is (``selected_method``)
        self.selected: dict[tuple[str, str], str] = {}
        for run_dir in sorted(map(Path, run_dirs)):
            metrics = read_record_json(run_dir / METRICS_FILE)
            try:
                key = (str(metrics["dataset"]), str(metrics["split"]), str(metrics["method"]))
                seed = int(metrics["seed"])
            except KeyError as error:
                raise ClaimsError(f"{run_dir / METRICS_FILE}: lacks {error}") from error
            if seed in self.values.get(key, {}):
                raise ClaimsError(f"{run_dir} and {self.dirs[key][seed]} are both {key} seed {seed}")
            if never_left_initialisation(metrics):
                self.untrained.add((key[0], key[2]))
                continue
            if isinstance(metrics.get("budget"), str) and metrics["budget"]:
                self.budgets[(key[0], key[2])] = metrics["budget"]
            if isinstance(metrics.get("selected_method"), str):
                self.selected[(key[0], key[2])] = metrics["selected_method"]
            flat: dict[str, float] = {}
            for source in (metrics.get("counts") or {}, metrics, metrics.get("overall") or {}):
                flat.update({k: float(v) for k, v in source.items()
                             if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "seed"})
            strata = metrics.get("strata") or {}
            for stratum, values in strata.items():
                flat.update({f"{k}[{stratum}]": float(v) for k, v in values.items()})
            flat.update(stratum_ratios(strata))
            self.values.setdefault(key, {})[seed] = flat
            self.dirs.setdefault(key, {})[seed] = run_dir

    @classmethod
    def under(cls, root: str | Path) -> ClaimRecords:
        """The records under ``root`` (``results/<tier>/<paper>``): every folder with a metrics.json."""
        root = Path(root)
        return cls(sorted(p.parent for p in root.rglob(METRICS_FILE)) if root.is_dir() else [])

    def methods(self, dataset: str) -> set[str]:
        return {m for d, _, m in self.values if d == dataset}

    def split_of(self, dataset: str, split: str | None, method: str) -> str | None:
        """``split`` if ``method`` ran there, else the first split it ran on ``dataset``; None if it never ran."""
        splits = sorted(s for d, s, m in self.values if d == dataset and m == method)
        if split is not None:
            return split if split in splits else None
        return splits[0] if splits else None

    def seeds(self, dataset: str, split: str | None, method: str, metric: str) -> dict[int, float]:
        """``{seed: value}`` of ``metric`` (empty when the method did not run or lacks it)."""
        split = self.split_of(dataset, split, method)
        if split is None:
            return {}
        runs = self.values[(dataset, split, method)]
        return {seed: values[metric] for seed, values in sorted(runs.items()) if metric in values}

    def capped(self, dataset: str, *methods: str) -> str:
        """The budget notes of ``methods`` on ``dataset`` ("`m`: tuned over 3 of 4 weight decays"), or ""."""
        return "; ".join(f"`{m}`: {self.budgets[(dataset, m)]}" for m in dict.fromkeys(methods)
                         if (dataset, m) in self.budgets)

    def one_run(self, dataset: str, method: str, than: str) -> bool:
        """Whether one side is a tuned pick that picked the other side's run: a comparison of a run
        with itself (a weight-decay grid that has run its no-decay point alone)."""
        return self.selected.get((dataset, method)) == than or self.selected.get((dataset, than)) == method

    def first_ran(self, dataset: str, split: str | None, candidates: Sequence[str], metric: str) -> str | None:
        """The first of ``candidates`` with ``metric`` on ``dataset`` (a tuned variant before a fixed one)."""
        return next((m for m in candidates if self.seeds(dataset, split, m, metric)), None)
