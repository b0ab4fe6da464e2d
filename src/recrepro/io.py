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


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def copy_file(src: str | Path, dst: str | Path) -> None:
    """Copy ``src`` to ``dst`` through a temporary sibling (``dst`` is never half-written)."""
    import shutil

    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


def write_parquet(path: str | Path, frame: pd.DataFrame) -> None:
    """Write a DataFrame to parquet deterministically (no pandas index, no timestamps in metadata)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    # Drop pandas metadata so identical frames give byte-identical files across runs.
    table = table.replace_schema_metadata(None)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


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
