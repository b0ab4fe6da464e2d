"""Writing a run record: ``metrics.json``, ``per_user.parquet`` and ``provenance.json``, every piece
validated before anything is written, ``metrics.json`` removed first and written last."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.io import write_json, write_parquet
from recrepro.records.errors import NonFiniteError, RunRecordError
from recrepro.records.layout import (
    METRICS_FILE,
    PER_USER_FILE,
    PROVENANCE_FILE,
    RANK_CORRELATIONS_KEY,
    TIMINGS_KEY,
    write_provenance,
)
from recrepro.records.provenance import RunProvenance, canonical_json
from recrepro.records.timings import is_timing_key, read_timings
from recrepro.records.values import check_finite

__all__ = ["REQUIRED_META_KEYS", "write_run_record"]

#: Keys ``meta`` must provide; they identify the run inside metrics.json.
REQUIRED_META_KEYS = ("dataset", "split", "method", "tier")

#: Keys of metrics.json that the record writer owns; ``meta`` may not override them.
_RESERVED_METRICS_KEYS = ("overall", "per_k", "strata", "counts", "seed")
#: ``meta`` keys that are what the run measured rather than what it is: metrics.json only, not provenance
_METRICS_ONLY_KEYS = frozenset({RANK_CORRELATIONS_KEY})


def _finite_float(value: Any, label: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise RunRecordError(f"{label} must be a number, got {type(value).__name__} {value!r}")
    as_float = float(value)
    if not math.isfinite(as_float):
        # A metric that came out NaN/inf means the run is broken; write no result.
        raise NonFiniteError(f"{'NaN' if math.isnan(as_float) else 'inf'} in metric {label}")
    return as_float


def _clean_metrics(overall: Mapping[str, Any], strata: Mapping[str, Mapping[str, Any]]) -> tuple[dict, dict]:
    clean_overall = {str(k): _finite_float(v, f"overall[{k!r}]") for k, v in overall.items()}
    clean_strata: dict[str, dict[str, float]] = {}
    for stratum, metrics in strata.items():
        if not isinstance(metrics, Mapping):
            raise RunRecordError(f"strata[{stratum!r}] must be a mapping of metric -> value")
        clean_strata[str(stratum)] = {
            str(k): _finite_float(v, f"strata[{stratum!r}][{k!r}]") for k, v in metrics.items()
        }
    return clean_overall, clean_strata


def _clean_per_user(per_user: pd.DataFrame, overall_keys: set[str]) -> pd.DataFrame:
    if "user" not in per_user.columns:
        raise RunRecordError(f"per_user needs a 'user' column; has {list(per_user.columns)}")
    unknown = [c for c in per_user.columns if c != "user" and c not in overall_keys]
    if unknown:
        raise RunRecordError(f"per_user columns {unknown} are not keys of overall {sorted(overall_keys)}")
    if per_user["user"].duplicated().any():
        raise RunRecordError("per_user has duplicate users")
    metric_columns = sorted(c for c in per_user.columns if c != "user")
    frame = per_user[["user", *metric_columns]].copy()
    frame[metric_columns] = frame[metric_columns].astype(np.float64)
    for column in metric_columns:
        check_finite(f"per-user {column}", frame[column].to_numpy(), "evaluation")
    # Sorting by user makes the file independent of the order the evaluator produced.
    return frame.sort_values("user", kind="stable").reset_index(drop=True)


def _group_by_k(overall: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """``{"ndcg@20": x}`` -> ``{"20": {"ndcg": x}}``; metrics without a cut-off (``auc``) are left out."""
    grouped: dict[str, dict[str, float]] = {}
    for key, value in overall.items():
        name, _, k = key.partition("@")
        if k.isdigit():
            grouped.setdefault(k, {})[name] = value
    return {k: grouped[k] for k in sorted(grouped, key=int)}


def _clean_counts(counts: Mapping[str, int]) -> dict[str, int]:
    clean_counts: dict[str, int] = {}
    for key, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise RunRecordError(f"counts[{key!r}] must be a non-negative int, got {value!r}")
        clean_counts[str(key)] = int(value)
    return clean_counts


def _split_meta(meta: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``meta`` checked (the required keys, none the writer owns) and split: its identity for metrics.json
    and its timing keys for the provenance's timings."""
    missing = [key for key in REQUIRED_META_KEYS if key not in meta]
    if missing:
        raise RunRecordError(f"meta lacks {missing} (needs {list(REQUIRED_META_KEYS)})")
    reserved = [key for key in _RESERVED_METRICS_KEYS if key in meta]
    if reserved:
        raise RunRecordError(f"meta may not set {reserved}; pass them as their own arguments")
    meta_timings = {str(k): v for k, v in meta.items() if is_timing_key(k)}
    return {k: v for k, v in meta.items() if not is_timing_key(k)}, meta_timings


def _metrics_json(meta: Mapping[str, Any], overall: dict[str, float], strata: dict[str, dict[str, float]],
                  counts: dict[str, int], seed: int) -> dict[str, Any]:
    """metrics.json's content: the run's identity, the metrics overall, by cut-off and by stratum, the counts."""
    return {
        **{str(key): value for key, value in meta.items()},
        "overall": overall,
        "per_k": _group_by_k(overall),
        "strata": strata,
        "counts": counts,
        "seed": int(seed),
    }


def write_run_record(
    run_dir: str | Path,
    *,
    overall: Mapping[str, float],
    strata: Mapping[str, Mapping[str, float]],
    per_user: pd.DataFrame,
    counts: Mapping[str, int],
    meta: Mapping[str, Any],
    config_slice: Mapping[str, Any],
    split_manifest: str | Path | None,
    seed: int,
    device: str,
    started_at: float | dt.datetime | None = None,
    wall_seconds: float | None = None,
    benchmark_file: str | None = None,
    verify_split: bool = True,
    earlier: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``metrics.json``, ``per_user.parquet`` and ``provenance.json`` into ``run_dir``.

    Everything is validated before anything is written; each file is written atomically,
    and ``metrics.json`` (the file Snakemake and the scorecard look for) is removed
    first and written last, so a crash never leaves a new metrics.json beside stale
    companions.

    Parameters
    ----------
    run_dir:
        ``results/<tier>/<paper>/runs/<dataset>/<split>/<method>/seed<k>/``.
    overall:
        Metric key (``"ndcg@20"``, ...) -> finite float.
    strata:
        Stratum (``"popular"``, ...) -> metric key -> finite float. May be empty.
    per_user:
        Column ``user`` plus float columns whose names are keys of ``overall``.
    counts:
        ``{"n_users_evaluated": int, "n_users_skipped_no_targets": int}`` (more allowed).
    meta:
        Must hold ``dataset``, ``split``, ``method``, ``tier``; other keys (e.g.
        ``paper``) are copied into metrics.json too.
    config_slice:
        The part of the config that determines this run; hashed canonically.
    split_manifest:
        Path of the split's ``manifest.json`` or ``None`` (e.g. synthetic tests).
    seed, device:
        Random seed and torch device string (``"cpu"``, ``"cuda:0"``).
    started_at:
        Start time (``time.time()`` value or datetime); with no ``wall_seconds`` the
        wall time is measured from it to now.
    wall_seconds:
        Wall time of the run, if the caller measured it.
    benchmark_file:
        Path of the Snakemake ``benchmark:`` file of this job, if any.
    verify_split:
        Recompute the split files' sha256 against the manifest (default).
    earlier:
        What the earlier pieces of a resumed run spent (:func:`recrepro.runtime.checkpoints.earlier_usage`):
        ``wall_seconds`` and ``cpu_seconds`` become sums over the pieces, and provenance gains
        ``pieces`` and ``earlier_pieces`` (with ``code``: the commit and source digest of each
        earlier piece, ``null`` where unknown).  ``None`` or no pieces: a run in one piece.

    Returns
    -------
    dict
        ``{"metrics": path, "per_user": path, "provenance": path}``.

    Raises
    ------
    RunRecordError
        Missing meta keys, malformed metrics, counts or per_user.
    NonFiniteError
        A metric or per-user value is NaN/inf.
    ManifestMismatchError
        The split files do not match their manifest.

    Notes
    -----
    The provenance's keys: :class:`~recrepro.records.provenance.RunProvenance`.
    """
    run_dir = Path(run_dir)
    meta, meta_timings = _split_meta(meta)
    clean_overall, clean_strata = _clean_metrics(overall, strata)
    clean_counts = _clean_counts(counts)
    per_user_frame = _clean_per_user(per_user, set(clean_overall))
    metrics = _metrics_json(meta, clean_overall, clean_strata, clean_counts, seed)
    # Fails on NaN in meta too, and proves the dict serialises before we touch disk.
    canonical_json(metrics)
    provenance = RunProvenance(
        meta={**{k: v for k, v in meta.items() if k not in _METRICS_ONLY_KEYS}, "seed": int(seed)},
        config_slice=config_slice, split_manifest=split_manifest,
        seed=seed, device=device, started_at=started_at, wall_seconds=wall_seconds,
        benchmark_file=benchmark_file, verify_split=verify_split, earlier=earlier,
    ).build()
    return _write_files(run_dir, metrics, per_user_frame, provenance, meta_timings)


def _write_files(run_dir: Path, metrics: Mapping[str, Any], per_user_frame: pd.DataFrame,
                 provenance: Mapping[str, Any], meta_timings: Mapping[str, Any]) -> dict[str, Path]:
    """The record's files, validated already: ``metrics.json`` removed first and written last, so a crash
    never leaves a new metrics.json beside stale companions."""
    paths = {
        "metrics": run_dir / METRICS_FILE,
        "per_user": run_dir / PER_USER_FILE,
        "provenance": run_dir / PROVENANCE_FILE,
    }
    paths["metrics"].unlink(missing_ok=True)
    write_parquet(paths["per_user"], per_user_frame)
    # the histories written before the record keep their timings (they are the same run's)
    timings = {k: v for k, v in read_timings(run_dir).items() if k != "meta"}
    if meta_timings:
        timings["meta"] = meta_timings
    write_provenance(paths["provenance"], {**provenance, **({TIMINGS_KEY: timings} if timings else {})})
    write_json(paths["metrics"], metrics)
    return paths
