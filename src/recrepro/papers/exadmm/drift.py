"""exADMM's run records against the configuration they would be made under today.

An exADMM record keeps its operating point's family and model parameters, its cut-offs, metrics
and the parts it fitted, folded in and scored (``provenance.json``: ``config``), as
:func:`recrepro.papers.exadmm.run.run_point` writes them.  No difference is taken to leave
a record unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.records.drift import records_drift
from recrepro.papers.exadmm.rules import DEFAULT_KS, DEFAULT_METRICS, smk_point

__all__ = ["record_drift"]


def record_drift(config: Mapping[str, Any], tier: str, results_root: str | Path = "results") -> pd.DataFrame:
    """Every setting in which an exADMM run record under ``results_root/<tier>/exadmm/runs`` differs
    from what ``config`` gives its operating point now (model parameters, family, cut-offs, metrics,
    parts), one row each (:func:`recrepro.records.drift.compare_settings`).  Empty when every record is
    current."""
    block = config.get("exadmm", {})

    def slices(run_dir: Path, provenance: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        recorded = provenance.get("config") or {}
        point = smk_point(config, tier, run_dir.parts[-4], run_dir.parts[-2])
        part = point.get("record_part", "test")
        run = {"family": point["family"], "ks": list(block.get("ks", list(DEFAULT_KS))),
               "metrics": list(block.get("metrics", DEFAULT_METRICS)), "fit": ["train"],
               "fold_in": f"{part}_tr", "target": f"{part}_te"}
        return ({"params": recorded.get("params"), "run": {k: recorded.get(k) for k in run}},
                {"params": dict(point["params"]), "run": run})

    return records_drift(Path(results_root, tier, "exadmm", "runs"), "*/*/*/seed*/provenance.json", slices)
