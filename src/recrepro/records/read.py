"""Reading a run record back: its metrics (with the run's timing values merged in) and its per-user
values, each checked against what writing it promised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import read_json
from recrepro.records.layout import METRICS_FILE, PER_USER_FILE
from recrepro.records.timings import read_timings
from recrepro.records.values import check_record_values

__all__ = ["read_metrics", "read_per_user", "read_record_json"]


def read_record_json(path: str | Path) -> Any:
    """A record's JSON file (``metrics.json``, ``history.json``), read and checked (:func:`check_record_values`)."""
    return check_record_values(path, read_json(path))


def read_metrics(run_dir: str | Path) -> dict[str, Any]:
    """Load a run's ``metrics.json`` (raises ``FileNotFoundError`` naming the path), checked by
    :func:`check_record_values` (invalid JSON, a NaN or an NDCG of 5 is refused, naming the file and key).

    The run's timing keys (``seconds_per_epoch``, ...), kept in ``timings.json``, are
    merged back in, so readers see one dict as before the split.
    """
    metrics = read_record_json(Path(run_dir) / METRICS_FILE)
    timings = read_timings(run_dir).get("meta", {})
    return {**metrics, **{k: v for k, v in timings.items() if k not in metrics}}


def read_per_user(run_dir: str | Path) -> pd.DataFrame | None:
    """Load a run's ``per_user.parquet``, or ``None`` if the run has none."""
    path = Path(run_dir) / PER_USER_FILE
    return pd.read_parquet(path) if path.is_file() else None

