"""λOpt's run records against the configuration they would be made under today.

A committed record keeps the configuration slice it ran under (``provenance.json``: ``config``).
Snakemake reruns a job whose parameters changed only where its own metadata remembers them, which a
fresh clone does not: there a record made under settings the configuration no longer gives would be
redrawn as if it were current.  :func:`record_drift` lists every difference, and says which ones
provably leave the record as it is:

- ``wait_for_gain`` (:mod:`recrepro.papers.lambdaopt.stopping`) added where the record ran without
  it: patience could only have ended the run differently before its validation AUC first beat its
  first value, so the record is the same when every curve of it (MF-λFix: one per λ) beat its first
  value sooner than ``patience`` epochs after it.
- ``gain_margin`` added where the record ran without it (any gain counted): the margin can only keep
  patience from ending a run whose best never beat its first value by more than the margin, so the
  record is the same when every curve of it either did (its best at the stop is its best before it)
  or ran to the cap (patience never ended it).

Any other difference makes the record outdated: it names what to rerun.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import read_json
from recrepro.records.drift import records_drift
from recrepro.papers.lambdaopt.rules import rule_settings

__all__ = ["record_drift", "same_without_margin"]


def _curves(rows: pd.DataFrame) -> list[pd.DataFrame]:
    """``rows`` of a record's history split into its validation curves (one per λ where the history
    has a ``lam`` column: λFix's grid points), each in epoch order."""
    curves = [g for _, g in rows.groupby("lam", dropna=False)] if "lam" in rows else [rows]
    return [c.sort_values("epoch") for c in curves]


def _first_gain_epochs(history: pd.DataFrame) -> list[float]:
    """Per validation curve of a record's history, the epochs from its first evaluation to the first
    that beats it (``inf``: never)."""
    gaps = []
    for curve in _curves(history[history["val_auc"].notna() & history["epoch"].notna()]):
        beaten = curve[curve["val_auc"] > curve["val_auc"].iloc[0]]
        gaps.append(float(beaten["epoch"].iloc[0] - curve["epoch"].iloc[0]) if len(beaten) else float("inf"))
    return gaps


def _phase0_curves(history: pd.DataFrame) -> list[pd.DataFrame]:
    """A record's validation curves, the rows of each one's first training phase only; every
    history row, evaluated or not."""
    rows = history[history["epoch"].notna()]
    if "phase" in rows:
        rows = rows[rows["phase"].fillna(0) == 0]
    return _curves(rows)


def same_without_margin(run_dir: Path, settings: Mapping[str, Any], margin: float) -> tuple[bool, str]:
    if settings.get("patience") is None:
        return True, "no stopping rule: gain_margin has nothing to hold"
    cap = int(settings["epochs"])
    history = pd.read_parquet(run_dir / "history.parquet")
    smallest, reasons = float("inf"), []
    for curve in _phase0_curves(history):
        values = curve["val_auc"].dropna()
        gain = float(values.max() - values.iloc[0]) if len(values) else float("-inf")
        ran_to_cap = int(curve["epoch"].iloc[-1]) + 1 >= cap
        if gain <= margin and not ran_to_cap:
            where = f" (λ = {curve['lam'].iloc[0]:g})" if "lam" in curve else ""
            reasons.append(f"a curve{where} stopped on patience with its best {gain:.4f} above its first validation AUC")
        smallest = min(smallest, gain)
    if reasons:
        return False, "; ".join(reasons) + f", not more than the gain_margin of {margin:g}: it would have trained on"
    return True, (f"every curve beat its first validation AUC by more than the gain_margin of {margin:g} "
                  f"(the least: {smallest:.4f}) or ran to the cap: the same run with or without it")


def _same_without_wait(run_dir: Path, settings: Mapping[str, Any]) -> tuple[bool, str]:
    patience = settings.get("patience")
    if patience is None:
        return True, "no stopping rule: wait_for_gain has nothing to hold"
    gaps = _first_gain_epochs(pd.read_parquet(run_dir / "history.parquet"))
    slowest = max(gaps, default=float("inf"))
    if slowest < float(patience):
        return True, (f"every curve beat its first validation AUC within {slowest:g} epoch{'' if slowest == 1 else 's'}, sooner than the "
                      f"patience of {patience:g}: the same run with or without wait_for_gain")
    return False, (f"a curve took {slowest:g} epochs to beat its first validation AUC (patience {patience:g}): "
                   "wait_for_gain could have changed when it stopped")


def _equivalent(run_dir: Path, setting: str, old: Any, new: Any) -> tuple[bool, str] | None:
    if setting == "settings.wait_for_gain" and old is None and new is True:
        settings = (read_json(run_dir / "provenance.json").get("config") or {}).get("settings") or {}
        return _same_without_wait(run_dir, settings)
    if setting == "settings.gain_margin" and old is None and isinstance(new, int | float) and new >= 0:
        settings = (read_json(run_dir / "provenance.json").get("config") or {}).get("settings") or {}
        return same_without_margin(run_dir, settings, float(new))
    return None


def record_drift(config: Mapping[str, Any], tier: str, results_root: str | Path = "results") -> pd.DataFrame:
    """Every setting in which a λOpt run record under ``results_root/<tier>/lambdaopt/runs`` differs
    from what ``config`` gives its variant now, one row each: ``record``, ``setting``, ``recorded``,
    ``now``, ``same_record`` (whether the difference provably leaves the record unchanged) and
    ``why`` (:func:`recrepro.records.drift.compare_settings`).  Empty when every record is current."""
    splits = config["evaluation"]["splits"]

    def slices(run_dir: Path, provenance: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        dataset, split, method = run_dir.parts[-4], run_dir.parts[-3], run_dir.parts[-2]
        recorded = provenance.get("config") or {}
        now = {"settings": rule_settings(config, tier, dataset, method), "evaluation": splits.get(split)}
        return {part: recorded.get(part) for part in now}, now

    return records_drift(Path(results_root, tier, "lambdaopt", "runs"), "*/*/*/seed*/provenance.json", slices,
                         _equivalent)
