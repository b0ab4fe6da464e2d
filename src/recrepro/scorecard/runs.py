"""Load the run records: one tidy table of every metric value, and lookups into it.

:func:`load_runs` reads each run's ``metrics.json`` into rows ``(dataset, split, method, seed,
metric, value, ...)``; :class:`RunIndex` answers what a published cell needs from them (its seeds'
values, the split it ran on, a run's budget, per-user values for the paired tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.io import read_json
from recrepro.records import METRICS_FILE, PROVENANCE_FILE, read_metrics, read_per_user

#: Columns of :func:`load_runs`' table, in order.
RUN_COLUMNS = ("dataset", "split", "method", "seed", "metric", "value", "tier", "paper", "run_dir", "budget")


class ScorecardError(ValueError):
    """Runs and expected entries cannot be matched unambiguously (or a run is malformed)."""


def find_run_dirs(runs_root: str | Path) -> list[Path]:
    """Run directories (those holding metrics.json) under ``runs_root``, sorted."""
    return sorted(path.parent for path in Path(runs_root).rglob(METRICS_FILE))


def load_runs(run_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy table of all metric values of the given runs.

    Returns
    -------
    DataFrame
        Columns ``dataset, split, method, seed, metric, value, tier, run_dir``; one row
        per run and metric, stratified metrics as ``"ndcg@20[popular]"``.

    Raises
    ------
    ScorecardError
        A metrics.json lacks identity keys, or two runs claim the same
        (dataset, split, method, seed).
    """
    rows: list[dict[str, Any]] = []
    owners: dict[tuple, Path] = {}
    for run_dir in map(Path, run_dirs):
        metrics = read_metrics(run_dir)
        missing = [key for key in ("dataset", "split", "method", "seed", "tier", "overall") if key not in metrics]
        if missing:
            raise ScorecardError(f"{run_dir / METRICS_FILE}: lacks {missing}")
        identity = (metrics["dataset"], metrics["split"], metrics["method"], int(metrics["seed"]))
        if identity in owners:
            raise ScorecardError(f"{run_dir} and {owners[identity]} are both {identity}")
        owners[identity] = run_dir
        values = dict(metrics["overall"])
        for stratum, stratum_metrics in (metrics.get("strata") or {}).items():
            values.update({f"{key}[{stratum}]": value for key, value in stratum_metrics.items()})
        for metric, value in values.items():
            rows.append({
                "dataset": identity[0], "split": identity[1], "method": identity[2], "seed": identity[3],
                "metric": metric, "value": float(value), "tier": metrics["tier"],
                "paper": metrics.get("paper"), "run_dir": str(run_dir), "budget": run_budget(metrics),
            })
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def run_budget(metrics: Mapping[str, Any]) -> str:
    """How a run's compute budget was cut, in words (``""``: the protocol's full budget).

    A run says so itself: a ``budget`` string, or the ``round_cap`` / ``epoch_cap`` its
    settings applied (FedRAP, λOpt), with the rounds or epochs it trained.
    """
    if metrics.get("budget"):
        return str(metrics["budget"])
    for cap_key, done_key, unit in (("round_cap", "rounds_trained", "rounds"), ("epoch_cap", "epochs_run", "epochs")):
        cap = metrics.get(cap_key)
        if cap:
            done = metrics.get(done_key) or (metrics.get("counts") or {}).get(done_key)
            return f"capped at {int(cap)} {unit}" + (f" ({int(done)} trained)" if done else "")
    return ""


def records_stamp(run_dirs: Iterable[str | Path]) -> tuple[str | None, list[str], bool]:
    """(latest finish date, code commits, any dirty) of the runs' ``provenance.json``.

    A scorecard built from the same records is then the same file on every machine and
    day: its header names the records, not the moment it was drawn.
    """
    dates, commits, dirty = [], set(), False
    for run_dir in map(Path, run_dirs):
        path = run_dir / PROVENANCE_FILE
        if not path.is_file():
            continue
        prov = read_json(path)
        if prov.get("finished_at"):
            dates.append(str(prov["finished_at"])[:10])
        git = prov.get("git") or {}
        if git.get("commit"):
            commits.add(str(git["commit"])[:12])
        dirty = dirty or bool(git.get("dirty"))
    return (max(dates) if dates else None), sorted(commits), dirty


def summarise_runs(tidy: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample sd (ddof=1; NaN for one seed) and seed count per (dataset, split, method, metric)."""
    keys = ["dataset", "split", "method", "metric"]
    if tidy.empty:
        return pd.DataFrame(columns=[*keys, "mean", "sd", "n_seeds"])
    grouped = tidy.groupby(keys, sort=True)["value"]
    summary = grouped.agg(mean="mean", sd=lambda v: v.std(ddof=1) if len(v) > 1 else np.nan, n_seeds="count")
    return summary.reset_index()


class RunIndex:
    """Seeds, values and per-user frames of the loaded runs, looked up by identity."""

    def __init__(self, tidy: pd.DataFrame) -> None:
        self.tidy = tidy
        self._per_user: dict[str, pd.DataFrame | None] = {}
        self._values: dict[tuple[str, str, str, str], dict[int, float]] = {}
        self._run_dirs: dict[tuple[str, str, str, int], str] = {}
        self._budgets: dict[tuple[str, str, str], set[str]] = {}
        for row in tidy.itertuples(index=False):
            self._values.setdefault((row.dataset, row.split, row.method, row.metric), {})[row.seed] = row.value
            self._run_dirs[(row.dataset, row.split, row.method, row.seed)] = row.run_dir
            if row.budget:
                self._budgets.setdefault((row.dataset, row.split, row.method), set()).add(row.budget)

    def budget(self, dataset: str, split: str, method: str) -> str:
        """The caps of the cell's runs in words (``""``: every run had the full budget)."""
        return "; ".join(sorted(self._budgets.get((dataset, split, method), ())))

    def splits_of(self, dataset: str, method: str) -> list[str]:
        """The splits ``method`` ran on ``dataset``, sorted."""
        rows = self.tidy[(self.tidy["dataset"] == dataset) & (self.tidy["method"] == method)]
        return sorted(rows["split"].unique())

    def has_runs(self, dataset: str, split: str, method: str) -> bool:
        """Whether ``method`` has any run on ``dataset``/``split`` (with whatever metrics)."""
        return any(key[:3] == (dataset, split, method) for key in self._run_dirs)

    def values(self, dataset: str, split: str, method: str, metric: str) -> dict[int, float]:
        """``{seed: value}`` of the runs of ``method`` on ``dataset``/``split`` that have ``metric``."""
        return self._values.get((dataset, split, method, metric), {})

    def per_user(self, dataset: str, split: str, method: str, seed: int) -> pd.DataFrame | None:
        """The run's ``per_user.parquet`` (read once), or None without such a run."""
        run_dir = self._run_dirs.get((dataset, split, method, seed))
        if run_dir is None:
            return None
        if run_dir not in self._per_user:
            self._per_user[run_dir] = read_per_user(run_dir)
        return self._per_user[run_dir]
