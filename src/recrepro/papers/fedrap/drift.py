"""FedRAP's run records against the configuration they would be made under today.

A FedRAP record keeps its settings in ``provenance.json`` (``config``), except the negative pool,
which the driver takes out of the settings before training and writes into ``metrics.json``
(``negative_pool``): both are compared here, so a record of one pool is never redrawn as the other's
(docs/deviations.md#fedrap-negative-pool).  No difference is taken to leave a record unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import read_json
from recrepro.records.drift import records_drift
from recrepro.papers.fedrap.rules import rule_settings

__all__ = ["record_drift"]


def record_drift(config: Mapping[str, Any], tier: str, results_root: str | Path = "results") -> pd.DataFrame:
    """Every setting in which a FedRAP run record under ``results_root/<tier>/fedrap/runs`` differs
    from what ``config`` gives its variant now (its settings, negative pool and evaluation), one row
    each (:func:`recrepro.records.drift.compare_settings`).  Empty when every record is current."""
    splits = config["evaluation"]["splits"]

    def slices(run_dir: Path, provenance: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        dataset, split, method = run_dir.parts[-4], run_dir.parts[-3], run_dir.parts[-2]
        config_slice = provenance.get("config") or {}
        settings = dict(config_slice.get("settings") or {})
        settings["negative_pool"] = read_json(run_dir / "metrics.json").get("negative_pool")
        now = {"settings": rule_settings(dict(config), tier, dataset, method), "evaluation": splits.get(split)}
        return {"settings": settings, "evaluation": config_slice.get("evaluation")}, now

    return records_drift(Path(results_root, tier, "fedrap", "runs"), "*/*/*/seed*/provenance.json", slices)
