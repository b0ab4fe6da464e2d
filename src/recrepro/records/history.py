"""A run's training history (``history.json`` or a ``.parquet`` frame): written without its wall-clock
values, which go to the ``timings`` of ``provenance.json``, and read back with them merged in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.io import write_parquet, write_text
from recrepro.records.errors import RecordValueError
from recrepro.records.layout import history_text
from recrepro.records.read import read_record_json
from recrepro.records.timings import (
    is_timing_key,
    merge_timing_values,
    read_timings,
    split_timing_values,
    update_timings,
)
from recrepro.records.values import is_unit_metric

__all__ = ["read_history", "write_history"]


def write_history(run_dir: str | Path, history: Mapping[str, Any] | pd.DataFrame,
                  name: str = "history.json") -> Path:
    """Write a run's training history without its wall-clock values; those go to the ``timings`` of
    ``provenance.json``.

    ``history`` is a JSON-able mapping (``name`` ending in ``.json``) or a frame (``.parquet``):
    keys or columns for which :func:`is_timing_key` holds are split off, so the history
    itself is byte-identical between two runs with the same seed.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / name
    if isinstance(history, pd.DataFrame):
        timing_cols = [c for c in history.columns if is_timing_key(c)]
        write_parquet(path, history.drop(columns=timing_cols))
        update_timings(run_dir, name, {c: history[c].tolist() for c in timing_cols} or None)
    else:
        clean, timing = split_timing_values(history)
        write_text(path, history_text(clean))
        update_timings(run_dir, name, timing or None)
    return path


def read_history(run_dir: str | Path, name: str = "history.json") -> Any:
    """A history written by :func:`write_history`, with its timings merged back; its values are checked
    (:func:`check_record_values`; a frame: no infinity, shares in [0, 1], NaN marks a skipped epoch)."""
    run_dir = Path(run_dir)
    timing = read_timings(run_dir).get(name)
    if name.endswith(".parquet"):
        frame = _check_history_frame(run_dir / name, pd.read_parquet(run_dir / name))
        for col, values in (timing or {}).items():
            if len(values) == len(frame):
                frame[col] = values
        return frame
    history = read_record_json(run_dir / name)
    return merge_timing_values(history, timing) if timing else history


def _check_history_frame(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """A history frame's columns: no infinity, shares in [0, 1] (NaN marks an epoch a column skips)."""
    for column in frame.columns:
        if frame[column].dtype.kind not in "fiu":
            continue
        values = frame[column].to_numpy(dtype=np.float64)
        if np.isinf(values).any():
            raise RecordValueError(f"{path}: column {column!r} holds an infinite value; the record is damaged")
        finite = values[~np.isnan(values)]
        if is_unit_metric(str(column)) and ((finite < 0) | (finite > 1)).any():
            raise RecordValueError(f"{path}: column {column!r} has values outside [0, 1] (max {finite.max()!r}, "
                                   f"min {finite.min()!r}); the record is damaged")
    return frame
