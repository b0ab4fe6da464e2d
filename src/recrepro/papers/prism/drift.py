"""PRISM's run records against the configuration they would be made under today.

A PRISM record keeps the trainer's settings, the paper's switches and the evaluation it ran under
(``provenance.json``: ``config``).  Its settings also name the device it trained on, which is no
setting of the method: the settings it is compared with are rebuilt for the record's own device and
seed.  No difference is taken to leave a record unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.records.drift import records_drift
from recrepro.papers.prism.rules import tier_conf
from recrepro.papers.prism.run import settings_for

__all__ = ["record_drift"]


def record_drift(config: Mapping[str, Any], tier: str, results_root: str | Path = "results") -> pd.DataFrame:
    """Every setting in which a PRISM run record under ``results_root/<tier>/prism/runs`` differs from
    what ``config`` gives its method now (trainer settings, switches, evaluation), one row each
    (:func:`recrepro.records.drift.compare_settings`).  Empty when every record is current."""
    switches = dict(config["prism"]["switches"])
    conf = tier_conf(config, tier)

    def slices(run_dir: Path, provenance: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        dataset, split, method = run_dir.parts[-5], run_dir.parts[-3], run_dir.parts[-2]
        recorded = provenance.get("config") or {}
        device = str((recorded.get("settings") or {}).get("device", "cpu"))
        _, settings = settings_for(method, conf, switches, int(provenance.get("seed", 0)), device, dataset=dataset)
        now = {"settings": settings, "switches": switches, "evaluation": config["evaluation"]["splits"].get(split)}
        return {part: recorded.get(part) for part in now}, now

    return records_drift(Path(results_root, tier, "prism", "runs"), "*/*/*/*/seed*/provenance.json", slices)
