"""A record's files: their names, and the text of its JSON files (sorted keys; an object or list that
holds no other on one line) that keeps two runs with the same seed byte-identical and a record's files
small."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recrepro.io import _json_default, write_text

__all__ = ["METRICS_FILE", "PER_USER_FILE", "PROVENANCE_FILE", "RANK_CORRELATIONS_KEY", "TIMINGS_FILE",
           "TIMINGS_KEY", "TIMING_DECIMALS", "history_text", "provenance_text", "write_provenance"]

METRICS_FILE = "metrics.json"
PER_USER_FILE = "per_user.parquet"
#: the key of metrics.json holding a per-item table's rank correlations (:mod:`recrepro.records.correlations`)
RANK_CORRELATIONS_KEY = "rank_correlations"
PROVENANCE_FILE = "provenance.json"
#: Where records written before the timings moved into ``provenance.json`` (key ``timings``) kept them;
#: :func:`normalise_run_dir` folds such a file in (one file fewer per record: a disk block each).
TIMINGS_FILE = "timings.json"
TIMINGS_KEY = "timings"


#: Wall seconds are kept to the millisecond: finer digits are timer noise (an epoch's time moves by
#: more than that between runs on one machine) and cost the committed records space (a λOpt run's
#: 3,200 epoch times took 220 kB at full precision, one per line; to the millisecond a record's
#: provenance fits one 4 KiB disk block more often).
TIMING_DECIMALS = 3


def _round_timings(obj: Any) -> Any:
    if isinstance(obj, float):
        return round(obj, TIMING_DECIMALS) if math.isfinite(obj) else obj
    if isinstance(obj, Mapping):
        return {k: _round_timings(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_round_timings(v) for v in obj]
    return obj


def _is_flat(obj: Any) -> bool:
    children = obj.values() if isinstance(obj, Mapping) else obj
    return not any(isinstance(c, (Mapping, list, tuple)) for c in children)


def _layout(obj: Any, depth: int) -> str:
    if not isinstance(obj, (Mapping, list, tuple)) or not obj or _is_flat(obj):
        return json.dumps(obj, sort_keys=True, default=_json_default)
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(obj, Mapping):
        items = [f"{inner}{json.dumps(str(k))}: {_layout(obj[k], depth + 1)}" for k in sorted(obj)]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    return "[\n" + ",\n".join(f"{inner}{_layout(v, depth + 1)}" for v in obj) + f"\n{pad}]"


def history_text(history: Any) -> str:
    """``history.json``'s text: sorted keys, two-space indent, one line per object or list that holds no
    other (one epoch's or iteration's values per line: a tenth of the lines ``indent=2`` makes)."""
    return _layout(history, 0) + "\n"


def provenance_text(provenance: Mapping[str, Any]) -> str:
    """``provenance.json``'s text: the layout of :func:`history_text` (an object or list that holds no
    other on one line), its ``timings`` to :data:`TIMING_DECIMALS` decimals.

    A record is several files of a few kB, each taking whole disk blocks: this layout keeps a
    provenance with its timings inside one 4 KiB block for most runs.
    """
    prov = dict(provenance)
    if TIMINGS_KEY in prov:
        prov[TIMINGS_KEY] = _round_timings(prov[TIMINGS_KEY])
    return _layout(prov, 0) + "\n"


def write_provenance(path: str | Path, provenance: Mapping[str, Any]) -> None:
    """Write a run's ``provenance.json`` (:func:`provenance_text`), atomically."""
    write_text(path, provenance_text(provenance))
