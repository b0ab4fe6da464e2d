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

from recrepro.io import read_json
from recrepro.papers.drift import compare_settings, drift_frame
from recrepro.papers.prism.experiments import settings_for
from recrepro.papers.prism.workflow import tier_conf

__all__ = ["record_drift"]


def record_drift(config: Mapping[str, Any], tier: str, results_root: str | Path = "results") -> pd.DataFrame:
    """Every setting in which a PRISM run record under ``results_root/<tier>/prism/runs`` differs from
    what ``config`` gives its method now (trainer settings, switches, evaluation), one row each
    (:func:`recrepro.papers.drift.compare_settings`).  Empty when every record is current."""
    rows = []
    switches = dict(config["prism"]["switches"])
    conf = tier_conf(config, tier)
    for prov_file in sorted(Path(results_root, tier, "prism", "runs").glob("*/*/*/*/seed*/provenance.json")):
        run_dir = prov_file.parent
        dataset, split, method = run_dir.parts[-5], run_dir.parts[-3], run_dir.parts[-2]
        provenance = read_json(prov_file)
        recorded = provenance.get("config") or {}
        settings = recorded.get("settings") or {}
        _, now_settings = settings_for(method, conf, switches, int(provenance.get("seed", 0)),
                                       str(settings.get("device", "cpu")), dataset=dataset)
        now = {"settings": now_settings, "switches": switches, "evaluation": config["evaluation"]["splits"].get(split)}
        rows += compare_settings(run_dir, {part: recorded.get(part) for part in now}, now)
    return drift_frame(rows)
