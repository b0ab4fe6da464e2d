"""A run's wall-clock values, kept apart from its metrics and histories (the ``timings`` of
``provenance.json``), so that a rerun with the same seed leaves those byte-identical."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recrepro.io import read_json
from recrepro.records.layout import PROVENANCE_FILE, TIMINGS_FILE, TIMINGS_KEY, write_provenance

__all__ = ["is_timing_key", "merge_timing_values", "read_timings", "split_timing_values", "update_timings"]

#: Keys that hold wall-clock measurements: these go to ``timings.json``.
_TIMING_WORDS = ("seconds", "wall", "elapsed")


def is_timing_key(key: str) -> bool:
    """``seconds``, ``epoch_seconds``, ``seconds_per_round``, ``wall_seconds``: a wall-clock measurement."""
    return any(word in str(key).split("_") for word in _TIMING_WORDS)


def read_timings(run_dir: str | Path) -> dict[str, Any]:
    """A run's wall-clock values: section (``"meta"``, ``"history.json"``, ...) -> values; ``{}`` if none.

    They are the ``timings`` of ``provenance.json``; a record written before that (and not yet
    normalised) has them in its own ``timings.json``, which is read then.
    """
    run_dir = Path(run_dir)
    prov = run_dir / PROVENANCE_FILE
    return _timings_of(run_dir, read_json(prov) if prov.is_file() else {})


def _timings_of(run_dir: Path, provenance: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`read_timings` given the run's provenance already read (``{}``: none)."""
    timings = provenance.get(TIMINGS_KEY)
    if timings is not None:
        return dict(timings)
    legacy = run_dir / TIMINGS_FILE
    return read_json(legacy) if legacy.is_file() else {}


def update_timings(run_dir: Path, section: str, values: Any) -> None:
    """Replace one section of the run's timings in ``provenance.json`` (others are kept: histories and
    the record are written apart; a history written before the record starts the file)."""
    path = run_dir / PROVENANCE_FILE
    prov = read_json(path) if path.is_file() else {}
    timings = _timings_of(run_dir, prov)
    if values in ({}, None):
        timings.pop(section, None)
    else:
        timings[section] = values
    prov.pop(TIMINGS_KEY, None)
    if timings:
        prov[TIMINGS_KEY] = timings
    if prov:
        write_provenance(path, prov)
    (run_dir / TIMINGS_FILE).unlink(missing_ok=True)


def split_timing_values(obj: Any) -> tuple[Any, Any]:
    """``obj`` without its timing keys, and those keys' values (same nesting); dicts and lists of dicts."""
    if isinstance(obj, Mapping):
        clean, timing = {}, {}
        for key, value in obj.items():
            if is_timing_key(key):
                timing[key] = value
                continue
            sub_clean, sub_timing = split_timing_values(value)
            clean[key] = sub_clean
            if sub_timing not in (None, {}, []):
                timing[key] = sub_timing
        return clean, timing
    if isinstance(obj, list) and obj and all(isinstance(item, Mapping) for item in obj):
        pairs = [split_timing_values(item) for item in obj]
        timing = [p[1] for p in pairs]
        return [p[0] for p in pairs], (timing if any(timing) else [])
    return obj, None


def merge_timing_values(clean: Any, timing: Any) -> Any:
    """``clean`` with the timing values :func:`split_timing_values` took off it put back."""
    if isinstance(clean, Mapping) and isinstance(timing, Mapping):
        out = dict(clean)
        for key, value in timing.items():
            out[key] = merge_timing_values(out[key], value) if key in out else value
        return out
    if isinstance(clean, list) and isinstance(timing, list) and len(clean) == len(timing):
        return [merge_timing_values(c, t) for c, t in zip(clean, timing)]
    return clean

