"""A run's provenance (``provenance.json``): everything needed to say *how* its numbers were produced.

The config slice and its hash, the split files' hashes, git commit, library versions, seed, device,
thread settings, host, wall and CPU time (summed over the pieces of a resumed run), peak memory and the
Snakemake benchmark file: :class:`RunProvenance` holds what the caller knows of a run and builds the
rest from the process it runs in.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recrepro.io import _json_default, read_json, sha256_file
from recrepro.records.errors import ManifestMismatchError
from recrepro.runtime.machine import (
    _device_name,
    git_state,
    host_description,
    library_versions,
    peak_rss_mb,
    process_cpu_seconds,
    thread_settings,
)

__all__ = ["PROVENANCE_SCHEMA_VERSION", "RunProvenance", "canonical_json", "config_sha256",
           "portable_split_path", "split_file_hashes"]

PROVENANCE_SCHEMA_VERSION = 1


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
        ``{"manifest": str, "manifest_sha256": str, "files": {name: {"sha256", "rows"[, "content_sha256"]}},
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
        recorded[file_name] = {"sha256": entry["sha256"], "rows": entry.get("rows"),
                               **({"content_sha256": entry["content_sha256"]} if "content_sha256" in entry else {})}
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


def _with_earlier_pieces(earlier: Mapping[str, Any] | None, wall_seconds: float | None,
                         cpu_seconds: float) -> tuple[dict[str, Any], float | None, float]:
    """The ``pieces`` and ``earlier_pieces`` of a resumed run's provenance (``{}`` for a run in one piece),
    and its wall and CPU seconds summed over the pieces where the earlier ones were measured."""
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
    return pieces, wall_seconds, cpu_seconds


@dataclass(frozen=True)
class RunProvenance:
    """What the caller knows of how a run was made; :meth:`build` adds what the process tells (git,
    versions, device name, threads, host, times, peak memory) and gives ``provenance.json``'s content.

    Fields (the parameters of :func:`~recrepro.records.write.write_run_record` of the same names):
    ``meta`` (the run's identity), ``config_slice`` (hashed canonically), ``split_manifest`` (``None``:
    no split files, e.g. synthetic tests), ``seed``, ``device``, ``started_at`` (with no
    ``wall_seconds`` the wall time is measured from it to now), ``wall_seconds``, ``benchmark_file``,
    ``verify_split`` (recompute the split files' sha256 against the manifest) and ``earlier`` (what the
    earlier pieces of a resumed run spent: :func:`recrepro.runtime.checkpoints.earlier_usage`).

    Provenance keys: ``schema_version, run, config, config_sha256, split, git, versions, seed, device,
    device_name, threads, host, started_at, finished_at, wall_seconds, cpu_seconds, peak_rss_mb,
    benchmark_file``; a resumed run adds ``pieces, earlier_pieces``.
    """

    meta: Mapping[str, Any]
    config_slice: Mapping[str, Any]
    split_manifest: str | Path | None
    seed: int
    device: str
    started_at: float | dt.datetime | None = None
    wall_seconds: float | None = None
    benchmark_file: str | None = None
    verify_split: bool = True
    earlier: Mapping[str, Any] | None = None

    def build(self) -> dict[str, Any]:
        """The provenance dictionary, its times taken now (the run's end)."""
        started = _as_timestamp(self.started_at)
        now = dt.datetime.now(dt.timezone.utc)
        wall_seconds = self.wall_seconds
        if wall_seconds is None and started is not None:
            wall_seconds = (now - started).total_seconds()
        pieces, wall_seconds, cpu_seconds = _with_earlier_pieces(self.earlier, wall_seconds, process_cpu_seconds())
        return {
            "schema_version": PROVENANCE_SCHEMA_VERSION,
            "run": {key: self.meta[key] for key in sorted(self.meta)},
            "config": dict(self.config_slice),
            "config_sha256": config_sha256(self.config_slice),
            "split": (split_file_hashes(self.split_manifest, verify=self.verify_split)
                      if self.split_manifest is not None else None),
            "git": git_state(),
            "versions": library_versions(),
            "seed": int(self.seed),
            "device": str(self.device),
            "device_name": _device_name(self.device),
            "threads": thread_settings(),
            "host": host_description(),
            "started_at": started.isoformat() if started is not None else None,
            "finished_at": now.isoformat(),
            "wall_seconds": None if wall_seconds is None else round(float(wall_seconds), 3),
            "cpu_seconds": cpu_seconds,
            **pieces,
            "peak_rss_mb": peak_rss_mb(),
            "benchmark_file": None if self.benchmark_file is None else str(self.benchmark_file),
        }

