"""Rank correlations of a per-item table of a run record, kept in its ``metrics.json``.

A per-item table (PRISM's ``magnitudes.parquet``: item, training degree, ‖e_i‖) is about 270 kB a
gowalla run, so the committed reproduction keeps it only for the runs a figure draws (the first seed).
A claim that tests a correlation over seeds needs only each seed's Spearman ρ and the number of rows it
was computed over, so every run keeps those in ``metrics.json`` under ``rank_correlations`` (a few
hundred bytes in a file every record has: no file, and so no disk block, of its own)::

    "rank_correlations": {"magnitudes.parquet": {"content_sha256": "…", "rows": 40981,
                                                 "spearman": {"norm~train_degree": 0.822}}}

The entry names the table's content digest (:func:`recrepro.io.frame_digest`), so an entry and a table of
two different runs cannot pass for one. Written by the run itself and, for records of earlier versions,
by ``recrepro records normalise`` (:func:`write_rank_correlations` on a record that holds the table).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import frame_digest, read_json, write_json
from recrepro.records.errors import RunRecordError
from recrepro.records.layout import METRICS_FILE, RANK_CORRELATIONS_KEY

__all__ = ["RANK_CORRELATION_PAIRS", "rank_correlation", "rank_correlations", "rank_correlations_current",
           "rank_correlations_of", "write_rank_correlations"]

#: the per-item tables whose rank correlations every run keeps, with the column pairs kept
RANK_CORRELATION_PAIRS: dict[str, tuple[tuple[str, str], ...]] = {
    "magnitudes.parquet": (("train_degree", "norm"),),
}


def _key(x: str, y: str) -> str:
    # Spearman's ρ is symmetric: one key for both orders
    return "~".join(sorted((x, y)))


def _spearman(frame: pd.DataFrame, x: str, y: str) -> float | None:
    """ρ, or None where it is undefined (a constant column): a record holds finite numbers only, and a
    finished run must not lose its record over a degenerate table."""
    from scipy import stats

    with warnings.catch_warnings():  # a constant column: handled here, as None
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        rho = float(stats.spearmanr(frame[x], frame[y]).statistic)
    return rho if math.isfinite(rho) else None


def rank_correlations(frame: pd.DataFrame, file: str,
                      pairs: Sequence[tuple[str, str]] | None = None) -> dict[str, Any]:
    """The entry for ``frame``, the content of the record's ``file``: its rows, content digest and
    Spearman ρ of each column pair (``pairs`` defaults to :data:`RANK_CORRELATION_PAIRS` of ``file``)."""
    pairs = tuple(pairs if pairs is not None else RANK_CORRELATION_PAIRS.get(file, ()))
    if not pairs:
        raise RunRecordError(f"{file}: no column pairs to correlate")
    missing = sorted({c for pair in pairs for c in pair} - set(frame.columns))
    if missing:
        raise RunRecordError(f"{file}: no column {', '.join(missing)}")
    return {"content_sha256": frame_digest(frame), "rows": len(frame),
            "spearman": {_key(x, y): _spearman(frame, x, y) for x, y in pairs}}


def rank_correlations_of(run_dir: str | Path, file: str,
                         pairs: Sequence[tuple[str, str]] | None = None) -> dict[str, Any]:
    """:func:`rank_correlations` of the table ``run_dir/file`` as the record keeps it."""
    return rank_correlations(pd.read_parquet(Path(run_dir) / file), file, pairs)


def _entry(run_dir: Path, file: str) -> dict[str, Any] | None:
    metrics = run_dir / METRICS_FILE
    if not metrics.is_file():
        return None
    return (read_json(metrics).get(RANK_CORRELATIONS_KEY) or {}).get(file)


def rank_correlations_current(run_dir: str | Path, file: str) -> bool:
    """Whether ``metrics.json`` has an entry for ``file`` that matches the table beside it (or whether it
    has one at all, where the table is not kept)."""
    run_dir = Path(run_dir)
    entry = _entry(run_dir, file)
    table = run_dir / file
    return entry is not None and (not table.is_file() or _same_table(entry, pd.read_parquet(table)))


def _same_table(entry: dict[str, Any], frame: pd.DataFrame) -> bool:
    return entry.get("content_sha256") == frame_digest(frame)


def write_rank_correlations(run_dir: str | Path, file: str) -> None:
    """Put ``file``'s entry (:func:`rank_correlations_of`) into the record's ``metrics.json``."""
    run_dir = Path(run_dir)
    path = run_dir / METRICS_FILE
    if not path.is_file():
        raise RunRecordError(f"{run_dir}: no {METRICS_FILE}, so no complete record to add to")
    metrics = read_json(path)
    metrics[RANK_CORRELATIONS_KEY] = {**(metrics.get(RANK_CORRELATIONS_KEY) or {}),
                                      file: rank_correlations_of(run_dir, file)}
    write_json(path, metrics)


def rank_correlation(run_dir: str | Path, file: str, x: str, y: str) -> tuple[float, int] | None:
    """Spearman's ρ of columns ``x`` and ``y`` of ``run_dir/file`` and the rows it was computed over.

    From the table where the record keeps it, else from ``metrics.json``'s entry; ``None`` where the
    record keeps neither (or an entry without that pair), or where ρ is undefined (a constant column).
    An entry whose digest differs from the table beside it is an error: the two would come from
    different runs.
    """
    run_dir = Path(run_dir)
    table = run_dir / file
    entry = _entry(run_dir, file)
    if table.is_file():
        frame = pd.read_parquet(table)
        if entry is not None and not _same_table(entry, frame):
            raise RunRecordError(f"{run_dir / METRICS_FILE}: {RANK_CORRELATIONS_KEY} of {file} names another "
                                 f"content_sha256 than the table beside it (run `recrepro records normalise "
                                 f"{run_dir}`, or restore the table)")
        rho = _spearman(frame, x, y)
        return (rho, len(frame)) if rho is not None else None
    rho = ((entry or {}).get("spearman") or {}).get(_key(x, y))
    return (float(rho), int(entry["rows"])) if rho is not None and entry is not None else None
