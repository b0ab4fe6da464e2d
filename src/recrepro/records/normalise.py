"""Records written by an earlier version of the pipeline, brought into the current layout
(``recrepro records normalise``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from recrepro.io import compact_parquet_file, read_json, write_json, write_text
from recrepro.records.correlations import (
    RANK_CORRELATION_PAIRS,
    rank_correlations_current,
    write_rank_correlations,
)
from recrepro.records.history import read_history, write_history
from recrepro.records.layout import (
    METRICS_FILE,
    PROVENANCE_FILE,
    RANK_CORRELATIONS_KEY,
    TIMINGS_FILE,
    TIMINGS_KEY,
    history_text,
    provenance_text,
    write_provenance,
)
from recrepro.records.provenance import portable_split_path
from recrepro.records.timings import is_timing_key, read_timings, split_timing_values, update_timings

__all__ = ["normalise_run_dir"]


def normalise_run_dir(run_dir: str | Path) -> list[str]:
    """Bring a record written by an earlier version into the current layout; returns what changed.

    Timing keys leave ``metrics.json`` and the histories for the ``timings`` of ``provenance.json``,
    and a ``timings.json`` of an earlier layout is folded in there and removed; ``provenance.json``
    takes the layout of :func:`provenance_text` (``history.json``: :func:`history_text`); the split
    manifest in ``provenance.json`` is named below the data root. Metric values are not
    touched, so a record normalised here equals one written by the current code from the
    same run; parquet files lose the column statistics and stored Arrow schema of an earlier layout
    (the values and the dtypes pandas reads stay); a per-item table whose rank correlations a record keeps
    (:data:`~recrepro.records.correlations.RANK_CORRELATION_PAIRS`) gets them into ``metrics.json``, again
    where the table's content changed (metric values are not touched). Idempotent.
    """
    run_dir = Path(run_dir)
    changed: list[str] = []
    metrics_path = run_dir / METRICS_FILE
    if metrics_path.is_file():
        metrics = read_json(metrics_path)
        moved = {k: v for k, v in metrics.items() if is_timing_key(k)}
        if moved:
            update_timings(run_dir, "meta", {**read_timings(run_dir).get("meta", {}), **moved})
            write_json(metrics_path, {k: v for k, v in metrics.items() if k not in moved})
            changed.append(f"{METRICS_FILE}: {sorted(moved)} -> {TIMINGS_FILE}")
    for name in ("history.json", "history.parquet"):
        path = run_dir / name
        if not path.is_file():
            continue
        history = read_history(run_dir, name)
        has_timing = (any(is_timing_key(c) for c in history.columns) if isinstance(history, pd.DataFrame)
                      else split_timing_values(history)[1] not in (None, {}, []))
        if has_timing and name not in read_timings(run_dir):
            write_history(run_dir, history, name)
            changed.append(f"{name}: timings -> {TIMINGS_FILE}")
    history_path = run_dir / "history.json"
    if history_path.is_file():
        text = history_path.read_text()
        compact = history_text(json.loads(text))
        if compact != text:
            write_text(history_path, compact)
            changed.append("history.json: one line per epoch's or iteration's values")
    prov_path = run_dir / PROVENANCE_FILE
    timings_path = run_dir / TIMINGS_FILE
    if timings_path.is_file() and prov_path.is_file():
        prov = read_json(prov_path)
        # sections the provenance has already are newer than the left-over file's
        prov[TIMINGS_KEY] = {**read_json(timings_path), **(prov.get(TIMINGS_KEY) or {})}
        write_provenance(prov_path, prov)
        timings_path.unlink()
        changed.append(f"{TIMINGS_FILE} -> {PROVENANCE_FILE} ({TIMINGS_KEY})")
    if prov_path.is_file():
        text = prov_path.read_text()
        prov = json.loads(text)
        split = prov.get("split") or {}
        if split.get("manifest") and split["manifest"] != portable_split_path(split["manifest"]):
            split["manifest"] = portable_split_path(split["manifest"])
            changed.append(f"{PROVENANCE_FILE}: split manifest named below the data root")
        if provenance_text(prov) != text:
            write_provenance(prov_path, prov)
            if not changed or not changed[-1].startswith(PROVENANCE_FILE):
                changed.append(f"{PROVENANCE_FILE}: one line per object that holds no other, timings to the "
                               "millisecond")
    changed += [f"{path.name}: no column statistics or stored Arrow schema; distinct-valued floats byte-stream-split"
                for path in sorted(run_dir.glob("*.parquet")) if compact_parquet_file(path)]
    for file in RANK_CORRELATION_PAIRS:
        if (run_dir / file).is_file() and metrics_path.is_file() and not rank_correlations_current(run_dir, file):
            write_rank_correlations(run_dir, file)
            changed.append(f"{METRICS_FILE}: {file}'s rank correlations -> {RANK_CORRELATIONS_KEY}")
    return changed

