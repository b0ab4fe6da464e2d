"""AMHT-LRS's acceptance run records against the configuration they would be made under today.

An acceptance record keeps the tier's whole ``lrs`` block it ran under (``provenance.json``:
``config``), but each record reads only part of it (:func:`recrepro.papers.lrs.run.run_acceptance`):
its own setting of ``acceptance`` (``noiseless``, ``noisy``, ``floor`` or ``private``), the
run-to-convergence override ``acceptance.algorithm`` (not for ``private``), the tier's ``algorithm``
and the ridge of the low-rank + ridge baseline.  Only those are compared, so a change to the sweeps'
grids does not mark the acceptance records outdated.  No difference among them is taken to leave a
record unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.records.drift import records_drift

__all__ = ["record_drift", "read_settings"]


def read_settings(block: Mapping[str, Any], split: str) -> dict[str, dict[str, Any]]:
    """What the acceptance record of ``split`` reads from the tier's ``lrs`` block, as
    ``{part: {key: value}}`` (:func:`recrepro.records.drift.compare_settings`)."""
    acc = block.get("acceptance") or {}
    own = {"setting": acc.get(split)}
    if split != "private":
        own["algorithm_override"] = acc.get("algorithm")
    return {"acceptance": own, "tier": {"algorithm": block.get("algorithm"), "ridge": block.get("ridge", 1.0)}}


def record_drift(config: Mapping[str, Any], tier: str, results_root: str | Path = "results") -> pd.DataFrame:
    """Every setting in which an acceptance record under ``results_root/<tier>/lrs/runs`` differs from
    what ``config`` gives it now (:func:`read_settings`), one row each; empty when all are current."""
    block = config.get("lrs", {}).get("tiers", {}).get(tier, {})

    def slices(run_dir: Path, provenance: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        split = run_dir.parts[-3]
        return read_settings(provenance.get("config") or {}, split), read_settings(block, split)

    return records_drift(Path(results_root, tier, "lrs", "runs"), "synthetic/*/*/seed*/provenance.json", slices)
