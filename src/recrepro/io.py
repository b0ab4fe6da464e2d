"""Atomic file output, checksums and small JSON/parquet helpers.

Every file the pipeline writes goes through :func:`atomic_path` (write to a temporary
sibling, then ``os.replace``), so an interrupted job never leaves a file that a later
run would trust.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

CHUNK = 1 << 20


def file_digest(path: str | Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in 1 MiB chunks (bounded memory)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: str | Path) -> str:
    return file_digest(path, "sha256")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp makes the file 0600; give it the mode a plain open() would.
        os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_yaml_entries(path: str | Path, section: str, keys: set[str] | frozenset[str],
                      error: type[Exception] = ValueError) -> list[tuple[str, dict[str, Any]]]:
    """The entries listed under ``section`` of the YAML file ``path``, each a mapping with exactly
    ``keys``, as ``(where, entry)`` pairs (``where`` names the file and the entry for the caller's own
    checks); ``[]`` when the file is missing or empty. A malformed file raises ``error``."""
    import yaml

    path = Path(path)
    raw = yaml.safe_load(path.read_text()) if path.is_file() else None
    if raw is None:
        return []
    entries = raw.get(section) if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise error(f"{path}: expected a mapping with a list under {section!r}")
    out = []
    for i, entry in enumerate(entries):
        where = f"{path}: {section}[{i}]"
        if not isinstance(entry, dict) or set(entry) != set(keys):
            got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise error(f"{where}: needs exactly the keys {sorted(keys)}, got {got}")
        out.append((where, entry))
    return out


class JSONFileError(ValueError):
    """A file that should hold JSON does not (the message names the file, line and column)."""


def read_json(path: str | Path) -> Any:
    """The JSON in ``path``; invalid JSON raises :class:`JSONFileError` naming the file, line and column."""
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONFileError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def copy_file(src: str | Path, dst: str | Path) -> None:
    """Copy ``src`` to ``dst`` through a temporary sibling (``dst`` is never half-written)."""
    import shutil

    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


def frame_digest(frame: pd.DataFrame) -> str:
    """sha256 of a frame's content: each column's name, dtype and values in row order, independent of
    how a file stores them. A parquet file's own sha256 changes with its writer's settings (the zstd
    level, byte-stream-split: :func:`write_parquet_table`) although every value is the same; this one
    changes only with a value, a dtype, a column or the row order."""
    import numpy as np

    h = hashlib.sha256()
    for name in frame.columns:
        column = frame[name]
        h.update(f"{name}\0{column.dtype}\0".encode())
        values = column.to_numpy()
        if values.dtype.kind in "biufcmM":
            h.update(np.ascontiguousarray(values).tobytes())
        else:  # strings, categories: pandas' documented row hash (SipHash with a fixed key)
            h.update(pd.util.hash_pandas_object(column, index=False).to_numpy().tobytes())
    return h.hexdigest()


def write_parquet(path: str | Path, frame: pd.DataFrame) -> None:
    """Write a DataFrame to parquet deterministically (no pandas index, no timestamps in metadata)."""
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    # Drop pandas metadata so identical frames give byte-identical files across runs.
    table = table.replace_schema_metadata(None)
    with atomic_path(path) as tmp:
        write_parquet_table(table, tmp)


def write_parquet_table(table: Any, path: str | Path) -> None:
    """Write an Arrow table as the records' parquet: zstd, no column statistics, no stored Arrow schema.

    A record is a handful of files of a few kB, each taking whole 4 KiB disk blocks; the statistics
    and the serialised Arrow schema are a third of a small history's bytes and nothing reads them
    (pandas reads the same columns and dtypes back from the parquet schema alone).

    A float column whose values are mostly distinct (a loss or AUC per epoch, an item's norm) is stored
    byte-stream-split without a dictionary: each value's bytes grouped by position before zstd, where
    a dictionary would only add a copy of the values; one with few distinct values (a hit per user, a
    constant setting) keeps its dictionary. Lossless either way, read back by any parquet reader; a
    table up to a million rows (every record) is compressed at zstd's level 19, a larger one (the
    processed data) at its default level, which writes it in seconds rather than minutes.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    dense = [field.name for field in table.schema if pa.types.is_floating(field.type) and table.num_rows
             and pc.count_distinct(table[field.name]).as_py() > table.num_rows // 2]
    keep_dictionary = [name for name in table.schema.names if name not in dense]
    level = 19 if table.num_rows <= 1_000_000 else None
    pq.write_table(table, path, compression="zstd", compression_level=level, write_statistics=False,
                   store_schema=False, use_byte_stream_split=dense or False, use_dictionary=keep_dictionary or False)


def compact_parquet_file(path: str | Path) -> bool:
    """Rewrite ``path`` with :func:`write_parquet_table` when that makes it smaller (a file of an earlier
    layout); returns whether it did. The values and the dtypes pandas reads are unchanged."""
    import io

    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    write_parquet_table(pq.read_table(path), buffer)
    if buffer.getbuffer().nbytes >= Path(path).stat().st_size:
        return False
    with atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getvalue())
    return True


class CommittedFileMissingError(FileNotFoundError):
    """Files that git tracks are missing from the working tree (deleted by accident, not with ``git rm``)."""


def check_committed_present(paths: list[str], folder: str | Path = ".") -> None:
    """Refuse when a path of ``paths`` that git tracks (in the checkout holding ``folder``) is missing.

    A redraw from records draws what is on disk; a committed run record deleted by accident would
    silently become a ``not_run`` row.  Outside a git checkout nothing is checked.

    Raises
    ------
    CommittedFileMissingError
        Naming the missing files and the ``git checkout --`` that restores them.
    """
    import subprocess

    absent = [str(p) for p in paths if not Path(folder, p).exists()]
    if not absent:
        return
    try:
        done = subprocess.run(["git", "-C", str(folder), "--literal-pathspecs", "ls-files", "-z", "--", *absent],
                              capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return
    tracked = [p for p in done.stdout.decode("utf-8", "replace").split("\0") if p] if done.returncode == 0 else []
    if tracked:
        shown = " ".join(tracked[:5]) + (" ..." if len(tracked) > 5 else "")
        raise CommittedFileMissingError(
            f"{len(tracked)} committed file(s) missing from the working tree, e.g. {tracked[0]}: a redraw does not "
            f"drop a committed run. Restore them with `git checkout -- {shown}` (or `git rm` them to drop the runs "
            "on purpose; or, if a job is training them again, redraw once it has written them)")


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
