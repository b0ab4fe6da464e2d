"""Run records: the three files every training/evaluation run leaves behind.

A run directory ``results/<tier>/<paper>/runs/<dataset>/<split>/<method>/seed<k>/`` holds

``metrics.json``
    Overall and stratified metrics, user counts and the run's identity
    (dataset, split, method, seed, tier, plus any other ``meta`` keys). Written with
    sorted keys, so identical metrics give byte-identical files.
``per_user.parquet``
    Column ``user`` plus one float column per per-user metric (for paired tests).
``provenance.json``
    Everything needed to say *how* the numbers were produced: the config slice and its
    hash, the split files' hashes, git commit, library versions, seed, device, thread
    settings, host, wall time, peak memory and the Snakemake benchmark file.

``timings.json``
    Wall-clock measurements of the run (seconds per epoch or round, seconds to the best
    epoch, ...), split off ``metrics.json`` and the histories by :func:`write_history`
    and :func:`write_run_record`. A rerun with the same seed on the same device leaves
    metrics and histories byte-identical; only ``timings.json`` and ``provenance.json``
    change, so ``git diff results/paper`` shows only real differences.

``metrics.json`` is written last and removed first, so its presence means the record
is complete. :func:`check_finite` is the guard training code calls on tensors; a run
that trips it raises before anything is written.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.io import (
    _json_default,
    compact_parquet_file,
    read_json,
    sha256_file,
    write_json,
    write_parquet,
    write_text,
)
from recrepro.runtime.machine import (
    _device_name,
    git_state,
    host_description,
    library_versions,
    peak_rss_mb,
    process_cpu_seconds,
    thread_settings,
)

PROVENANCE_SCHEMA_VERSION = 1

METRICS_FILE = "metrics.json"
PER_USER_FILE = "per_user.parquet"
PROVENANCE_FILE = "provenance.json"
#: Where records written before the timings moved into ``provenance.json`` (key ``timings``) kept them;
#: :func:`normalise_run_dir` folds such a file in (one file fewer per record: a disk block each).
TIMINGS_FILE = "timings.json"
TIMINGS_KEY = "timings"

#: Keys ``meta`` must provide; they identify the run inside metrics.json.
REQUIRED_META_KEYS = ("dataset", "split", "method", "tier")

#: Keys of metrics.json that the record writer owns; ``meta`` may not override them.
_RESERVED_METRICS_KEYS = ("overall", "per_k", "strata", "counts", "seed")



class NonFiniteError(ValueError):
    """A tensor or array holds NaN or infinity (the message names what and where)."""


class ManifestMismatchError(ValueError):
    """A split file is missing or its sha256 differs from the split's manifest.json."""


class RunRecordError(ValueError):
    """The pieces handed to :func:`write_run_record` are inconsistent or malformed."""


# --------------------------------------------------------------------------- guards


def check_finite(name: str, values: Any, where: str) -> None:
    """Raise :class:`NonFiniteError` if ``values`` holds NaN or ±inf.

    Parameters
    ----------
    name:
        What the values are, e.g. ``"user embeddings"``.
    values:
        A torch tensor (any device), numpy array, Python scalar or nested sequence.
    where:
        When/where it was checked, e.g. ``"epoch 3"``; the message reads
        ``"NaN in user embeddings at epoch 3 (...)"``.

    Raises
    ------
    NonFiniteError
        With the count of NaN and infinite entries out of the total.
    """
    n_nan, n_inf, n_total = _count_non_finite(values)
    if n_nan == 0 and n_inf == 0:
        return
    kind = "NaN" if n_nan else "inf"
    raise NonFiniteError(
        f"{kind} in {name} at {where} ({n_nan} NaN and {n_inf} infinite of {n_total} values)"
    )


def _count_non_finite(values: Any) -> tuple[int, int, int]:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(values, torch.Tensor):
        # Integer/bool tensors cannot hold NaN; isnan would still work but costs a copy.
        if not (values.is_floating_point() or values.is_complex()):
            return 0, 0, values.numel()
        detached = values.detach()
        n_nan = int(torch.isnan(detached).sum().item())
        n_inf = int(torch.isinf(detached).sum().item())
        return n_nan, n_inf, detached.numel()
    array = np.asarray(values)
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.complexfloating)):
        if array.dtype == object:
            array = array.astype(np.float64)
        else:
            return 0, 0, int(array.size)
    return int(np.isnan(array).sum()), int(np.isinf(array).sum()), int(array.size)


# ------------------------------------------------------------------- provenance parts


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the form that config hashes are taken of.

    NaN/inf are refused (they have no canonical JSON form).
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False, default=_json_default)


def config_sha256(config_slice: Mapping[str, Any]) -> str:
    """sha256 (hex) of :func:`canonical_json` of ``config_slice``, UTF-8 encoded."""
    return hashlib.sha256(canonical_json(config_slice).encode("utf-8")).hexdigest()


def split_file_hashes(split_manifest: str | Path, *, verify: bool = True) -> dict[str, Any]:
    """Read a split's ``manifest.json`` and (by default) check its files against it.

    Parameters
    ----------
    split_manifest:
        Path of ``manifest.json``; it must contain
        ``{"files": {"train.parquet": {"sha256": ..., "rows": ...}, ...}}`` with file
        names relative to the manifest's folder.
    verify:
        Recompute the sha256 of every listed file next to the manifest. This costs one
        read of the split (well under a second for our largest splits) and catches a
        split that was regenerated or edited after the manifest was written.

    Returns
    -------
    dict
        ``{"manifest": str, "manifest_sha256": str, "files": {name: {"sha256", "rows"}},
        "verified": bool}``.

    Raises
    ------
    ManifestMismatchError
        If the manifest is malformed, a listed file is missing, or a hash differs; the
        message names the manifest, the file and both hashes.
    """
    manifest_path = Path(split_manifest)
    if not manifest_path.is_file():
        raise ManifestMismatchError(f"split manifest not found: {manifest_path}")
    manifest = read_json(manifest_path)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        raise ManifestMismatchError(f"{manifest_path}: has no non-empty 'files' mapping")
    recorded: dict[str, dict[str, Any]] = {}
    for file_name in sorted(files):
        entry = files[file_name]
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise ManifestMismatchError(f"{manifest_path}: entry for {file_name!r} lacks a 'sha256' string")
        recorded[file_name] = {"sha256": entry["sha256"], "rows": entry.get("rows")}
        if verify:
            file_path = manifest_path.parent / file_name
            if not file_path.is_file():
                raise ManifestMismatchError(f"{manifest_path}: listed file {file_name!r} is missing ({file_path})")
            actual = sha256_file(file_path)
            if actual != entry["sha256"]:
                raise ManifestMismatchError(
                    f"{file_path}: sha256 {actual} differs from {entry['sha256']} recorded in "
                    f"{manifest_path}; the split changed after its manifest was written - rebuild the split"
                )
    return {
        "manifest": portable_split_path(manifest_path),
        "manifest_sha256": sha256_file(manifest_path),
        "files": recorded,
        "verified": verify,
    }


def portable_split_path(manifest_path: str | Path) -> str:
    """``splits/<dataset>/<protocol>/<split>/seed<k>/manifest.json``: the manifest's path below the
    data root, so that a record names its split without the machine's folders (records are shared)."""
    parts = Path(manifest_path).parts
    if "splits" in parts:
        index = len(parts) - 1 - parts[::-1].index("splits")
        return "/".join(parts[index:])
    return "/".join(parts[-5:])


def _as_timestamp(started_at: float | dt.datetime | None) -> dt.datetime | None:
    if started_at is None:
        return None
    if isinstance(started_at, dt.datetime):
        return started_at if started_at.tzinfo else started_at.astimezone()
    return dt.datetime.fromtimestamp(float(started_at), tz=dt.timezone.utc)


def build_provenance(
    *,
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
) -> dict[str, Any]:
    """Assemble the provenance dictionary (see :func:`write_run_record` for the fields)."""
    started = _as_timestamp(started_at)
    now = dt.datetime.now(dt.timezone.utc)
    if wall_seconds is None and started is not None:
        wall_seconds = (now - started).total_seconds()
    cpu_seconds = process_cpu_seconds()
    pieces: dict[str, Any] = {}
    if earlier and int(earlier.get("pieces") or 0) > 0:
        # A resumed run: its times are the sum over its pieces, where the earlier ones were measured.
        pieces = {"pieces": int(earlier["pieces"]) + 1,
                  "earlier_pieces": {k: earlier.get(k) for k in ("pieces", "wall_seconds", "cpu_seconds")}}
        # the code each earlier piece ran (commit, source digest): a resumed run names every commit it mixes
        pieces["earlier_pieces"]["code"] = list(earlier.get("code") or [None])
        if earlier.get("wall_seconds") is not None and wall_seconds is not None:
            wall_seconds = float(wall_seconds) + float(earlier["wall_seconds"])
        if earlier.get("cpu_seconds") is not None:
            cpu_seconds = round(cpu_seconds + float(earlier["cpu_seconds"]), 3)
    return {
        "schema_version": PROVENANCE_SCHEMA_VERSION,
        "run": {key: meta[key] for key in sorted(meta)},
        "config": dict(config_slice),
        "config_sha256": config_sha256(config_slice),
        "split": split_file_hashes(split_manifest, verify=verify_split) if split_manifest is not None else None,
        "git": git_state(),
        "versions": library_versions(),
        "seed": int(seed),
        "device": str(device),
        "device_name": _device_name(device),
        "threads": thread_settings(),
        "host": host_description(),
        "started_at": started.isoformat() if started is not None else None,
        "finished_at": now.isoformat(),
        "wall_seconds": None if wall_seconds is None else round(float(wall_seconds), 3),
        "cpu_seconds": cpu_seconds,
        **pieces,
        "peak_rss_mb": peak_rss_mb(),
        "benchmark_file": None if benchmark_file is None else str(benchmark_file),
    }


# ------------------------------------------------------------------------- the record


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
    Provenance ``keys``: ``schema_version, run, config, config_sha256, split, git,
    versions, seed, device, device_name, threads, host, started_at, finished_at,
    wall_seconds, cpu_seconds, peak_rss_mb, benchmark_file``; a resumed run adds
    ``pieces, earlier_pieces``.
    """
    run_dir = Path(run_dir)
    missing = [key for key in REQUIRED_META_KEYS if key not in meta]
    if missing:
        raise RunRecordError(f"meta lacks {missing} (needs {list(REQUIRED_META_KEYS)})")
    reserved = [key for key in _RESERVED_METRICS_KEYS if key in meta]
    if reserved:
        raise RunRecordError(f"meta may not set {reserved}; pass them as their own arguments")
    meta_timings = {str(k): v for k, v in meta.items() if is_timing_key(k)}
    meta = {k: v for k, v in meta.items() if not is_timing_key(k)}
    clean_overall, clean_strata = _clean_metrics(overall, strata)
    clean_counts: dict[str, int] = {}
    for key, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise RunRecordError(f"counts[{key!r}] must be a non-negative int, got {value!r}")
        clean_counts[str(key)] = int(value)
    per_user_frame = _clean_per_user(per_user, set(clean_overall))
    metrics = {
        **{str(key): value for key, value in meta.items()},
        "overall": clean_overall,
        "per_k": _group_by_k(clean_overall),
        "strata": clean_strata,
        "counts": clean_counts,
        "seed": int(seed),
    }
    # Fails on NaN in meta too, and proves the dict serialises before we touch disk.
    canonical_json(metrics)
    provenance = build_provenance(
        meta={**meta, "seed": int(seed)}, config_slice=config_slice, split_manifest=split_manifest,
        seed=seed, device=device, started_at=started_at, wall_seconds=wall_seconds,
        benchmark_file=benchmark_file, verify_split=verify_split, earlier=earlier,
    )

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


# ------------------------------------------------------------------ reading records back

#: Metrics that are shares, in [0, 1] (``ndcg@20``, ``val_ndcg``, ``pp_hr_micro``, ``gini_pos``, ``support_recall``).
_UNIT_METRIC = re.compile(r"^(?:val_|test_|best_val_|best_)?(?:pp_)?(?:ndcg|hr|recall|precision|auc|coverage|gini"
                          r"|map|mrr)(?:_|@|\[|$)|^support_")


#: Sections of a record that hold settings and counts, not metrics: only their finiteness is checked.
_SETTINGS_KEYS = frozenset({"settings", "config", "params", "counts"})


class RecordValueError(RunRecordError):
    """A record read back breaks what writing it promised (a value NaN, infinite or out of its range)."""


def is_unit_metric(key: str) -> bool:
    """Whether the metric or history key ``key`` is a share in [0, 1] (NDCG, HR, recall, AUC, coverage, ...)."""
    return bool(_UNIT_METRIC.search(str(key).lower()))


def check_record_values(path: str | Path, obj: Any) -> Any:
    """Refuse a record's content (``metrics.json``, a history) whose numbers are NaN or infinite, or a
    share (:func:`is_unit_metric`, outside ``settings``, ``config``, ``params`` and ``counts``) outside
    [0, 1]: what :func:`write_run_record` refuses to write.

    Returns ``obj``; raises :class:`RecordValueError` naming the file and the key.
    """
    def walk(value: Any, where: str, key: str, settings: bool) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{where}[{k!r}]" if where else repr(k), str(k), settings or k in _SETTINGS_KEYS)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]", key, settings)
        elif isinstance(value, (float, int, np.floating, np.integer)) and not isinstance(value, bool):
            number = float(value)
            if not math.isfinite(number):
                raise RecordValueError(f"{path}: {where} is {number} (records hold finite numbers only); "
                                       "the record is damaged - restore it (git checkout -- <file>) or rerun the run")
            if not settings and is_unit_metric(key) and not 0.0 <= number <= 1.0:
                raise RecordValueError(f"{path}: {where} = {number!r} is outside [0, 1], the range of {key!r}; "
                                       "the record is damaged - restore it (git checkout -- <file>) or rerun the run")

    walk(obj, "", "", False)
    return obj


def read_record_json(path: str | Path) -> Any:
    """A record's JSON file (``metrics.json``, ``history.json``), read and checked (:func:`check_record_values`)."""
    return check_record_values(path, read_json(path))


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


def read_metrics(run_dir: str | Path) -> dict[str, Any]:
    """Load a run's ``metrics.json`` (raises ``FileNotFoundError`` naming the path), checked by
    :func:`check_record_values` (invalid JSON, a NaN or an NDCG of 5 is refused, naming the file and key).

    The run's timing keys (``seconds_per_epoch``, ...), kept in ``timings.json``, are
    merged back in, so readers see one dict as before the split.
    """
    metrics = read_record_json(Path(run_dir) / METRICS_FILE)
    timings = read_timings(run_dir).get("meta", {})
    return {**metrics, **{k: v for k, v in timings.items() if k not in metrics}}


# ---------------------------------------------------------------- timings

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


def _update_timings(run_dir: Path, section: str, values: Any) -> None:
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


def _split_timing_values(obj: Any) -> tuple[Any, Any]:
    """``obj`` without its timing keys, and those keys' values (same nesting); dicts and lists of dicts."""
    if isinstance(obj, Mapping):
        clean, timing = {}, {}
        for key, value in obj.items():
            if is_timing_key(key):
                timing[key] = value
                continue
            sub_clean, sub_timing = _split_timing_values(value)
            clean[key] = sub_clean
            if sub_timing not in (None, {}, []):
                timing[key] = sub_timing
        return clean, timing
    if isinstance(obj, list) and obj and all(isinstance(item, Mapping) for item in obj):
        pairs = [_split_timing_values(item) for item in obj]
        timing = [p[1] for p in pairs]
        return [p[0] for p in pairs], (timing if any(timing) else [])
    return obj, None


def _merge_timing_values(clean: Any, timing: Any) -> Any:
    if isinstance(clean, Mapping) and isinstance(timing, Mapping):
        out = dict(clean)
        for key, value in timing.items():
            out[key] = _merge_timing_values(out[key], value) if key in out else value
        return out
    if isinstance(clean, list) and isinstance(timing, list) and len(clean) == len(timing):
        return [_merge_timing_values(c, t) for c, t in zip(clean, timing)]
    return clean


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
        _update_timings(run_dir, name, {c: history[c].tolist() for c in timing_cols} or None)
    else:
        clean, timing = _split_timing_values(history)
        write_text(path, history_text(clean))
        _update_timings(run_dir, name, timing or None)
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
    return _merge_timing_values(history, timing) if timing else history


def read_per_user(run_dir: str | Path) -> pd.DataFrame | None:
    """Load a run's ``per_user.parquet``, or ``None`` if the run has none."""
    path = Path(run_dir) / PER_USER_FILE
    return pd.read_parquet(path) if path.is_file() else None


def normalise_run_dir(run_dir: str | Path) -> list[str]:
    """Bring a record written by an earlier version into the current layout; returns what changed.

    Timing keys leave ``metrics.json`` and the histories for the ``timings`` of ``provenance.json``,
    and a ``timings.json`` of an earlier layout is folded in there and removed; ``provenance.json``
    takes the layout of :func:`provenance_text` (``history.json``: :func:`history_text`); the split
    manifest in ``provenance.json`` is named below the data root. Metric values are not
    touched, so a record normalised here equals one written by the current code from the
    same run; parquet files lose the column statistics and stored Arrow schema of an earlier layout
    (the values and the dtypes pandas reads stay). Idempotent.
    """
    run_dir = Path(run_dir)
    changed: list[str] = []
    metrics_path = run_dir / METRICS_FILE
    if metrics_path.is_file():
        metrics = read_json(metrics_path)
        moved = {k: v for k, v in metrics.items() if is_timing_key(k)}
        if moved:
            _update_timings(run_dir, "meta", {**read_timings(run_dir).get("meta", {}), **moved})
            write_json(metrics_path, {k: v for k, v in metrics.items() if k not in moved})
            changed.append(f"{METRICS_FILE}: {sorted(moved)} -> {TIMINGS_FILE}")
    for name in ("history.json", "history.parquet"):
        path = run_dir / name
        if not path.is_file():
            continue
        history = read_history(run_dir, name)
        has_timing = (any(is_timing_key(c) for c in history.columns) if isinstance(history, pd.DataFrame)
                      else _split_timing_values(history)[1] not in (None, {}, []))
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
    return changed

