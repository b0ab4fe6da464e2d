"""How a checkpoint is stored: one zip archive written by ``torch.save`` and loaded with
``weights_only=True``, beside it optional ``.npy`` side files, each file written atomically and checked
when read back (every member of the archive against its CRC-32, every side file against the sha256
taken while it was written).

What a checkpoint holds (its key, the code that wrote it, the state) and when one is resumed is
:mod:`recrepro.runtime.checkpoints`; this module writes and reads the files.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import logging
import os
import secrets
import shutil
import zipfile
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from recrepro.io import sha256_file

__all__ = ["FORMAT_VERSION", "CheckpointWriteError", "decode_state", "encode_state", "read_payload", "read_state",
           "side_files", "write_payload"]

# The WARNINGs a job's log shows name the checkpoints module, whose functions the trainers call.
log = logging.getLogger("recrepro.runtime.checkpoints")

FORMAT_VERSION = 1
_NDARRAY = "__ndarray__"
_NPSCALAR = "__npscalar__"
_SIDE = ".ckpt-"  # side files and temporaries: ``<name>.ckpt-<token>...`` beside the checkpoint


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (no space left); the previous one is kept."""


# ----------------------------------------------------------------------------- encoding


def encode_state(obj: Any, where: str) -> Any:
    """Make ``obj`` loadable with ``weights_only=True`` (numpy -> tagged tensors)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach()
    if isinstance(obj, np.ndarray):
        if obj.dtype == object or obj.dtype.kind in "USV":
            raise TypeError(f"checkpoint: {where} is a numpy array of dtype {obj.dtype}, which cannot be stored")
        return {_NDARRAY: torch.from_numpy(np.array(obj, copy=True, order="C"))}
    if isinstance(obj, (np.str_, np.bytes_)):
        return obj.item()
    if isinstance(obj, np.generic):
        return {_NPSCALAR: torch.from_numpy(np.array(obj).reshape(1))}
    if isinstance(obj, (bool, int, float, str, bytes, type(None))):
        return obj
    if isinstance(obj, Mapping):
        # numpy keys (e.g. np.int64 round numbers) become Python scalars: weights_only loads no numpy
        items = [(k.item() if isinstance(k, np.generic) else k, encode_state(v, f"{where}[{k!r}]"))
                 for k, v in obj.items()]
        return OrderedDict(items) if isinstance(obj, OrderedDict) else dict(items)
    if isinstance(obj, (list, tuple, set, frozenset)):
        values = [encode_state(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return values if isinstance(obj, list) else type(obj)(values)
    raise TypeError(f"checkpoint: {where} is a {type(obj).__name__}, which cannot be stored "
                    "(use tensors, numpy arrays, numbers, strings and containers of them)")


def decode_state(obj: Any) -> Any:
    if isinstance(obj, dict):
        if len(obj) == 1 and _NDARRAY in obj:
            return obj[_NDARRAY].numpy()
        if len(obj) == 1 and _NPSCALAR in obj:
            return obj[_NPSCALAR].numpy()[0]
        items = [(k, decode_state(v)) for k, v in obj.items()]
        return OrderedDict(items) if isinstance(obj, OrderedDict) else dict(items)
    if isinstance(obj, list):
        return [decode_state(v) for v in obj]
    if isinstance(obj, (tuple, set, frozenset)):
        return type(obj)(decode_state(v) for v in obj)
    return obj


# ----------------------------------------------------------------------------- writing


def _fsync_dir(folder: Path) -> None:
    # the rename itself must reach the disk, or a crash may forget it (best effort: not on every FS)
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def side_files(path: Path) -> list[Path]:
    """The side files and left-over temporaries of the checkpoint ``path`` (``<name>.ckpt-*``)."""
    return [Path(p) for p in glob.glob(glob.escape(str(path)) + _SIDE + "*")]


def write_payload(path: Path, payload: dict[str, Any], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write ``payload`` (its ``arrays`` and ``arrays_sha256`` filled here) to ``path`` atomically, each of
    ``arrays`` to a new ``.npy`` side file; the previous side files go once the new checkpoint is in place."""
    token = secrets.token_hex(6)
    keep: set[Path] = set()
    tmp = path.with_name(f"{path.name}{_SIDE}{token}.tmp")
    try:
        for name, array in arrays.items():
            side = path.with_name(f"{path.name}{_SIDE}{token}.{name}.npy")
            keep.add(side)
            with open(side, "wb") as fh:
                hashing = _HashingWriter(fh)
                np.save(hashing, np.asarray(array), allow_pickle=False)
                fh.flush()
                os.fsync(fh.fileno())
            payload["arrays"][name] = side.name
            payload["arrays_sha256"][name] = hashing.sha256.hexdigest()
        with open(tmp, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        for leftover in (tmp, *keep):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        if _is_disk_full(exc):
            free = shutil.disk_usage(path.parent).free / 2**20
            raise CheckpointWriteError(
                f"no space left while writing checkpoint {path} ({free:.0f} MiB free there; "
                f"{type(exc).__name__}: {str(exc)[:120]}); the previous checkpoint is kept: free some space "
                "(or set `checkpoints:` to a folder on another disk) and rerun, the run resumes from it") from exc
        raise
    _fsync_dir(path.parent)
    # older side files and temporaries of killed writers are garbage now
    for stale in side_files(path):
        if stale not in keep:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
    return path


class _HashingWriter:
    """A write-only file object that takes the sha256 of what passes through it."""

    def __init__(self, fh: Any) -> None:
        self.fh, self.sha256 = fh, hashlib.sha256()

    def write(self, data: Any) -> int:
        self.sha256.update(data)
        return self.fh.write(data)


def _is_disk_full(exc: BaseException) -> bool:
    """An error of a write that ran out of space (torch reports it as a RuntimeError of its zip writer)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(
        sign in text for sign in ("unexpected pos", "file write failed", "No space left"))


class _DamagedCheckpoint(ValueError):
    """A checkpoint's bytes differ from what was written (a CRC or digest does not match)."""


def _verify_archive(path: Path) -> None:
    """Check every member of the checkpoint's zip archive against its CRC-32 (``torch.load`` does not)."""
    with zipfile.ZipFile(path) as archive:
        bad = archive.testzip()
    if bad is not None:
        raise _DamagedCheckpoint(f"damaged: member {bad} fails its CRC-32 check")


# ----------------------------------------------------------------------------- reading


def read_payload(path: Path, *, key: str) -> dict[str, Any] | None:
    """The checkpoint's payload, or ``None``: no file (silently), a file unreadable or damaged, or one
    written under another key (a WARNING naming the file)."""
    if not path.exists():
        return None
    try:
        _verify_archive(path)
        payload = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION or "state" not in payload:
            raise ValueError(f"not a recrepro checkpoint of format {FORMAT_VERSION}")
    except Exception as exc:  # any unreadable file: starting over is always correct
        reason = str(exc).split(". ")[0][:160]  # torch's zip errors run to several sentences
        log.warning("checkpoint %s is unreadable or damaged (%s: %s); ignoring it, the run starts from scratch",
                    path, type(exc).__name__, reason)
        return None
    if payload.get("key") != key:
        log.warning("checkpoint %s was written for other settings or data (key %.12s, expected %.12s); "
                    "ignoring it, the run starts from scratch and will overwrite it",
                    path, str(payload.get("key")), key)
        return None
    return payload


def read_state(path: Path, payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The state of a checkpoint's payload, its side files memory-mapped read-only; ``None`` (with a
    WARNING) when a side file is unreadable or damaged."""
    state = decode_state(payload["state"])
    digests = payload.get("arrays_sha256") or {}
    for name, file_name in payload.get("arrays", {}).items():
        side = path.with_name(file_name)
        try:
            if name in digests and sha256_file(side) != digests[name]:
                raise _DamagedCheckpoint(f"sha256 differs from {digests[name]:.12s} taken when it was written")
            state[name] = np.load(side, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            log.warning("checkpoint %s: side file %s is unreadable or damaged (%s); ignoring the checkpoint, "
                        "the run starts from scratch", path, file_name, exc)
            return None
    return state

