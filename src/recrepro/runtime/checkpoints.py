"""Atomic, settings-keyed training checkpoints: a killed run resumes bit for bit.

Long paper-tier jobs are killed by the batch system after a few hours.  The trainers
(:func:`recrepro.papers.prism.trainer.train`, :meth:`recrepro.models.federated.simulation.FederatedSimulation.fit`,
the centralised MF/NCF upper bounds, :meth:`recrepro.models.mf_bpr.MFBPR.fit` and λOpt) take
an optional ``checkpoint`` path; after an epoch / round (every one, or every few where a write
would cost more than 2 % of the time: :class:`Throttle`) they write *everything* that
carries over to the next one (parameters, optimiser moments, random generator states,
learning-rate and curriculum counters, the history so far, best-so-far bookkeeping), and
on start they restore it and continue with the next epoch.  A resumed run therefore ends
with exactly the metrics of an uninterrupted one (only wall-clock seconds differ).

API
---
:func:`settings_key`
    sha256 of the canonical JSON of a run's settings (plus :func:`data_fingerprint` of
    its data): a checkpoint written under another key is never resumed.
:func:`save_checkpoint`
    Atomic: ``torch.save`` into a temporary sibling, ``fsync``, ``os.replace``; large
    arrays (FedRAP's disk-backed private tables) may go to ``.npy`` side files.
:func:`load_checkpoint`
    ``None`` when the file is missing; when its key differs, **when it was written by other
    code** (:func:`code_fingerprint`) **or the file is unreadable or damaged** (truncated;
    a byte changed: every member of the archive is checked against its CRC-32, every
    ``.npy`` side file against the sha256 taken while it was written) a WARNING names the
    file and ``None`` is returned: the run starts over and the stale file is overwritten by
    the next save.  Starting over is always correct (only slower), so a damaged checkpoint
    never stops a job.
:func:`remove_checkpoint`
    Deletes the file, its side files and its usage ledger; called once the run record is written.
:class:`Checkpointer`
    The three bound to one path and key, with a :class:`Throttle` and a usage ledger.
:func:`earlier_usage`
    What the earlier pieces of a resumed run spent (wall and CPU seconds) and the code each
    ran (commit, :func:`code_fingerprint`), read from the ledgers; the run record adds the
    seconds to its own piece's times and lists the earlier pieces' code in its provenance.

The code that wrote a checkpoint
--------------------------------
A checkpoint records :func:`code_fingerprint`: the git commit of the checkout, the package
version and the sha256 of the package's source files that train (every ``.py`` file of
``recrepro`` except those that only draw or report or check records, the data stage, whose
output the settings key covers already, and the papers the process does not train).  A checkpoint whose
source digest differs from the running code's is not resumed (a WARNING names both
commits): a record must not mix two versions of the loss.  Only the commit differing (a
change to docs, results or drawing code) resumes, and the record's ``provenance.json``
names each earlier piece's commit under ``earlier_pieces.code``.  A checkpoint written
before checkpoints recorded their code is resumed with a WARNING saying its code is
unknown (its piece's code is ``null`` in the provenance).

One process per run
-------------------
A :class:`Checkpointer` takes an exclusive ``flock`` on ``<checkpoint>.lock`` (holding the
process id) and keeps it until :func:`remove_checkpoint` (after the record is written) or
the process ends; a second process training the same run stops at once with
:class:`CheckpointLockedError`: "another process (pid N) is training this run".

Disk full
---------
A save that fails for lack of space (``ENOSPC``, or torch's ``unexpected pos`` /
``file write failed``) raises :class:`CheckpointWriteError`: "no space left while writing
checkpoint <path>"; the temporary file is removed and the previous checkpoint is kept.

The usage ledger
----------------
A run killed and resumed is trained in pieces, and each piece's process sees only its own
clock.  So that a record prices the whole run (``docs/compute.md`` sums them), a
:class:`Checkpointer` keeps ``<checkpoint>.usage.json`` beside its file: after every save
its own piece's wall and CPU seconds so far (from the trainer's start), and, when it
resumes, the sum over the earlier pieces up to their last save.  Work a killed piece did
after its last save is redone by the next piece and not counted twice.  A checkpoint with
no ledger (written before there was one) resumes as usual; its earlier pieces are then
counted but not measured (``wall_seconds: null``).

What may be stored
------------------
Files are loaded with ``torch.load(weights_only=True)`` (no arbitrary pickles), so a
state is made of tensors, dicts, lists, tuples, sets, numbers, strings, ``None`` and
numpy arrays / scalars (stored as tensors and turned back into numpy on load, dtype kept).
Random generator states: ``torch.Generator.get_state()`` (a ByteTensor) and
``numpy.random.Generator.bit_generator.state`` (a dict of ints) —
:func:`generator_state` / :func:`set_generator_state`, :func:`global_rng_state` /
:func:`set_global_rng_state`.

Cost and frequency
------------------
The default :class:`Throttle` keeps writing to at most 2 % of the wall time: after a write of
``w`` seconds the next is due ``50 w`` seconds later (at most 10 minutes), at the end of the
first epoch or round after that.  The largest PRISM state (MF, ~100k users+items × 64
float32, plus Adam's two moments and the best-epoch copy) is ~100 MB, written in well under
a second, while one epoch of the paper settings takes tens of seconds: every epoch.  λOpt's
state on amazon-video (16 MB, about 0.04 s) after epochs of a third of a second had cost a
tenth of the run when written every epoch; it is now written every few epochs.  FedRAP's
dense private tables (4 GB on LastFM) are written every few minutes.  A kill loses at most
that spacing of work; ``min_seconds`` spaces the writes out further, and the final epoch is
always written.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import glob
import hashlib
import json
import logging
import os
import secrets
import shutil
import subprocess
import time
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from recrepro.io import read_json, sha256_file, write_json

__all__ = [
    "FORMAT_VERSION",
    "CheckpointLockedError",
    "CheckpointWriteError",
    "Checkpointer",
    "Throttle",
    "code_fingerprint",
    "data_fingerprint",
    "earlier_usage",
    "generator_state",
    "global_rng_state",
    "load_checkpoint",
    "lock_path",
    "remove_checkpoint",
    "save_checkpoint",
    "set_generator_state",
    "set_global_rng_state",
    "settings_key",
    "usage_path",
]

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_NDARRAY = "__ndarray__"
_NPSCALAR = "__npscalar__"
_SIDE = ".ckpt-"  # side files and temporaries: ``<name>.ckpt-<token>...`` beside the checkpoint


# ----------------------------------------------------------------------------- keys


def _json_default(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, (Path, torch.device, torch.dtype)):
        return str(obj)
    raise TypeError(f"settings_key: cannot encode {type(obj).__name__} {obj!r}")


def settings_key(obj: Any) -> str:
    """sha256 (hex) of the canonical JSON of ``obj`` (sorted keys, no whitespace).

    Dataclasses, numpy scalars/arrays, paths and sets are encoded; tuples become lists.
    Put everything that changes the trajectory in ``obj`` (settings, seed, device,
    :func:`data_fingerprint` of the training data): a checkpoint is resumed only under the
    very same key.
    """
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True,
                      default=_json_default)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def data_fingerprint(*matrices: Any) -> str:
    """sha256 over the shape and CSR arrays of each matrix (``None`` allowed).

    Cheap next to training (~40 ms for 10M interactions) and tells two datasets of the
    same shape apart, so a checkpoint of another split is never resumed.
    """
    import scipy.sparse as sp

    h = hashlib.sha256()
    for m in matrices:
        if m is None:
            h.update(b"none;")
            continue
        csr = sp.csr_matrix(m)
        csr.sort_indices()
        h.update(repr(csr.shape).encode())
        for part in (csr.indptr.astype(np.int64), csr.indices.astype(np.int64), csr.data.astype(np.float64)):
            h.update(np.ascontiguousarray(part).data)
        h.update(b";")
    return h.hexdigest()


#: What a run computes with, by path under the package (a folder ends in ``/``): a change in one of
#: these can change what a run trains. Everything else reads, draws or reports (``cli/``,
#: ``records/``, ``reporting/``, ``scorecard/``, ``paperlist.py``), or is the data stage, whose output
#: every checkpoint key holds already (``datasets/``: :func:`data_fingerprint`).
_COMPUTING_PATHS = ("__init__.py", "config.py", "io.py", "runtime/", "models/", "evaluation/", "baselines/",
                    "papers/")
#: Inside those, what only reads or draws: a figure, the record checks of each paper (``drift.py``),
#: the rule helpers and the leak audit.
_NOT_COMPUTING_PATHS = ("baselines/figure.py", "papers/rules.py", "papers/leaks.py", "papers/*/drift.py",
                        "papers/*/figures.py")
#: Modules of a paper package that every ``recrepro`` process loads or that never train: the command
#: line registers each paper's verbs (``cli``), the drift checks read records.
_PAPER_MODULES_NOT_TRAINING = frozenset({"cli", "drift"})


def is_computing(path: str) -> bool:
    """Whether the module at ``path`` (relative to the package, POSIX) is code a run computes with."""
    from fnmatch import fnmatchcase

    inside = any(path == p or (p.endswith("/") and path.startswith(p)) for p in _COMPUTING_PATHS)
    return inside and not any(fnmatchcase(path, p) for p in _NOT_COMPUTING_PATHS)


def _papers_in_use() -> frozenset[str]:
    """The paper packages (``recrepro.papers.<name>``) this process has loaded a module of, other than
    the ones every process loads to register its verbs.

    A paper's code never imports another paper (the import-linter contract ``papers-independent``),
    and one process trains one paper's run (or none: the strong baselines sit below the papers), so
    the code of a paper it has not loaded cannot change what it trains.
    """
    import sys

    used = set()
    for name in list(sys.modules):
        parts = name.split(".")
        if len(parts) >= 4 and parts[:2] == ["recrepro", "papers"] and parts[3] not in _PAPER_MODULES_NOT_TRAINING:
            used.add(parts[2])
    return frozenset(used)


def _git_commit(folder: Path) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--verify", "HEAD"], capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> dict[str, Any]:
    """The code this process trains with: ``{"source_sha256", "commit", "recrepro"}``.

    ``source_sha256`` is the sha256 over the relative path and bytes of every ``.py`` file of
    the installed ``recrepro`` package that a run computes with (:func:`is_computing`: by package
    and path, ``_COMPUTING_PATHS`` less ``_NOT_COMPUTING_PATHS``), less the packages of the papers
    this process does not train (:func:`_papers_in_use`: an edit to λOpt leaves a FedRAP
    checkpoint resumable), sorted by path: it changes with any edit to
    what trains, committed or not.  ``commit`` is the checkout's git commit (``None`` outside a
    checkout).  Taken once per process, at the first save or load, when the run's paper is
    loaded (the code a process runs is the code it loaded), ~10 ms.
    """
    import recrepro

    root = Path(recrepro.__file__).resolve().parent
    papers = _papers_in_use()
    h = hashlib.sha256()
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root)
        if not is_computing(rel.as_posix()):
            continue
        if len(rel.parts) > 2 and rel.parts[0] == "papers" and rel.parts[1] not in papers:
            continue
        h.update(rel.as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return {"source_sha256": h.hexdigest(), "commit": _git_commit(root),
            "recrepro": getattr(recrepro, "__version__", None)}


# ----------------------------------------------------------------------------- RNG states


def generator_state(gen: np.random.Generator | torch.Generator) -> Any:
    """The state of one explicit generator: numpy's ``bit_generator.state`` or torch's ByteTensor."""
    if isinstance(gen, np.random.Generator):
        return gen.bit_generator.state
    return gen.get_state()


def set_generator_state(gen: np.random.Generator | torch.Generator, state: Any) -> None:
    """Restore a state from :func:`generator_state` into ``gen`` (in place)."""
    if isinstance(gen, np.random.Generator):
        gen.bit_generator.state = state
    else:
        gen.set_state(state)


def global_rng_state() -> dict[str, Any]:
    """torch's global CPU generator (and CUDA's when initialised) and numpy's legacy global state."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(legacy=False)}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_global_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of :func:`global_rng_state`."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ----------------------------------------------------------------------------- errors, lock


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (no space left); the previous one is kept."""


class CheckpointLockedError(RuntimeError):
    """Another live process holds the lock of this run's checkpoint."""


#: Locks this process holds: lock file (resolved) -> open descriptor.
_HELD_LOCKS: dict[str, int] = {}


def lock_path(path: str | Path) -> Path:
    """The lock file of the checkpoint ``path``: ``<name>.lock`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


def _lock_holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 64).decode("ascii", "replace").strip()
        if text:
            return text
    return "unknown"


def acquire_lock(path: str | Path) -> Path:
    """Take the exclusive lock of the run whose checkpoint is ``path`` (kept until :func:`release_lock`).

    Re-entrant within one process (a killed piece in a test, several models of one run).

    Raises
    ------
    CheckpointLockedError
        "another process (pid N) is training this run", naming the lock file.
    """
    import fcntl

    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    name = str(lock.resolve())
    if name in _HELD_LOCKS:
        return lock
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise CheckpointLockedError(
                f"another process (pid {holder}) is training this run: {lock} is locked; wait for it to end "
                "(or stop it) before training this run again") from None
        try:  # the holder may have removed the file between our open and our lock: lock the new one
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD_LOCKS[name] = fd
    return lock


def release_lock(path: str | Path) -> None:
    """Give back the lock taken by :func:`acquire_lock` and remove its file (no-op if not held)."""
    lock = lock_path(path)
    fd = _HELD_LOCKS.pop(str(lock.resolve()), None) if lock.parent.exists() else None
    if fd is None:
        return
    with contextlib.suppress(FileNotFoundError):
        lock.unlink()
    os.close(fd)


# ----------------------------------------------------------------------------- encoding


def _encode(obj: Any, where: str) -> Any:
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
        items = [(k.item() if isinstance(k, np.generic) else k, _encode(v, f"{where}[{k!r}]"))
                 for k, v in obj.items()]
        return OrderedDict(items) if isinstance(obj, OrderedDict) else dict(items)
    if isinstance(obj, (list, tuple, set, frozenset)):
        values = [_encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return values if isinstance(obj, list) else type(obj)(values)
    raise TypeError(f"checkpoint: {where} is a {type(obj).__name__}, which cannot be stored "
                    "(use tensors, numpy arrays, numbers, strings and containers of them)")


def _decode(obj: Any) -> Any:
    if isinstance(obj, dict):
        if len(obj) == 1 and _NDARRAY in obj:
            return obj[_NDARRAY].numpy()
        if len(obj) == 1 and _NPSCALAR in obj:
            return obj[_NPSCALAR].numpy()[0]
        items = [(k, _decode(v)) for k, v in obj.items()]
        return OrderedDict(items) if isinstance(obj, OrderedDict) else dict(items)
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    if isinstance(obj, (tuple, set, frozenset)):
        return type(obj)(_decode(v) for v in obj)
    return obj


# ----------------------------------------------------------------------------- files


def _fsync_dir(folder: Path) -> None:
    # the rename itself must reach the disk, or a crash may forget it (best effort: not on every FS)
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _side_files(path: Path) -> list[Path]:
    return [Path(p) for p in glob.glob(glob.escape(str(path)) + _SIDE + "*")]


def save_checkpoint(path: str | Path, state: Mapping[str, Any], *, key: str,
                    arrays: Mapping[str, np.ndarray] | None = None) -> Path:
    """Write ``state`` to ``path`` atomically, tagged with ``key``.

    Parameters
    ----------
    path:
        The checkpoint file; its folder is created.  Side files and temporaries are its
        siblings ``<name>.ckpt-*``.
    state:
        A dict of tensors, numpy arrays/scalars, numbers, strings, ``None`` and containers
        of them (``TypeError`` naming the entry otherwise, before anything is written).
    key:
        :func:`settings_key` of the run.
    arrays:
        Large arrays (e.g. a ``numpy.memmap`` of private tables) written to ``.npy`` side
        files instead of into the checkpoint; :func:`load_checkpoint` returns them,
        memory-mapped read-only, under the same names in the state.  Each save writes new
        side files and removes the previous ones only after the checkpoint naming the new
        ones is in place, so a kill at any moment leaves a consistent pair.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = dict(arrays or {})
    clash = sorted(set(arrays) & set(state))
    if clash:
        raise ValueError(f"checkpoint: {clash} given both in state and in arrays")
    payload = {"format": FORMAT_VERSION, "key": key, "saved_at": time.time(), "code": code_fingerprint(),
               "state": _encode(dict(state), "state"), "arrays": {}, "arrays_sha256": {}}
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
    for stale in _side_files(path):
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


def load_checkpoint(path: str | Path, *, key: str) -> dict[str, Any] | None:
    """The state saved at ``path`` under ``key``, or ``None`` (start over).

    ``None`` without a word when the file does not exist; ``None`` with a WARNING naming
    the file when it was written under another key (other settings or data) or cannot be
    read (truncated, corrupt, missing side file).  Tensors are loaded on the CPU.
    """
    path = Path(path)
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
    if not _same_code(path, payload.get("code")):
        return None
    state = _decode(payload["state"])
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


def _same_code(path: Path, code: Any) -> bool:
    """Whether the checkpoint's code (``code`` of its payload) is the running code's (WARNING if not)."""
    now = code_fingerprint()
    if not isinstance(code, Mapping):
        log.warning("checkpoint %s does not record the code that wrote it (written before checkpoints did); "
                    "resuming it, its piece's code is recorded as unknown", path)
        return True
    if code.get("source_sha256") != now["source_sha256"]:
        log.warning("checkpoint %s was written by other code (commit %.12s, source sha256 %.12s; this run: "
                    "commit %.12s, source sha256 %.12s); ignoring it, the run starts from scratch and will "
                    "overwrite it", path, str(code.get("commit")), str(code.get("source_sha256")),
                    str(now["commit"]), now["source_sha256"])
        return False
    if code.get("commit") != now["commit"]:
        log.info("checkpoint %s was written at commit %.12s, this run is at %.12s; the code that computes is "
                 "the same (source sha256 %.12s), resuming", path, str(code.get("commit")), str(now["commit"]),
                 now["source_sha256"])
    return True


def remove_checkpoint(path: str | Path | None) -> None:
    """Delete the checkpoint, its side files and its usage ledger (no error if absent; ``None`` is a no-op)."""
    if path is None:
        return
    path = Path(path)
    for p in (path, *_side_files(path), usage_path(path)):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    release_lock(path)


# ----------------------------------------------------------------------------- helpers


#: The share of the wall time checkpoint writes may take (:class:`Throttle`); 0 writes after every
#: epoch / round.
WRITE_OVERHEAD = 0.02


class Throttle:
    """Decides when to write: so that writing takes at most ``max_overhead`` of the wall time, and
    at most every ``min_seconds``.

    After a write of ``w`` seconds the next is due ``w / max_overhead`` seconds later (capped at
    ``max_seconds``; before any write, at once).  A state written in a fraction of an epoch's
    time (PRISM's tables: tens of MB) is still written every epoch; one whose write costs about
    as much as a short epoch (λOpt's, ~0.04 s after 0.3 s epochs) every few epochs; FedRAP's
    dense private tables (4 GB on LastFM) every few minutes.
    ``ready(force=True)`` (the last epoch) is always True.  Each True resets the clock.
    """

    def __init__(self, min_seconds: float = 0.0, clock: Callable[[], float] = time.monotonic, *,
                 max_overhead: float | None = None, max_seconds: float = 600.0) -> None:
        self.min_seconds = float(min_seconds)
        self.clock = clock
        self.last = clock()
        self.max_overhead = float(WRITE_OVERHEAD if max_overhead is None else max_overhead)
        self.max_seconds = float(max_seconds)
        self.write_seconds = 0.0

    def wrote(self, seconds: float) -> None:
        """Record that a write took ``seconds`` (the clock restarts at its end)."""
        self.write_seconds = float(seconds)
        self.last = self.clock()

    def interval(self) -> float:
        adaptive = self.write_seconds / self.max_overhead if self.max_overhead > 0 else 0.0
        return max(self.min_seconds, min(self.max_seconds, adaptive))

    def ready(self, force: bool = False) -> bool:
        now = self.clock()
        if force or now - self.last >= self.interval():
            self.last = now
            return True
        return False


# ----------------------------------------------------------------------------- usage ledger

#: Earlier pieces of a run that has none (not resumed).
NO_EARLIER_PIECES: dict[str, Any] = {"pieces": 0, "wall_seconds": 0.0, "cpu_seconds": 0.0}


def usage_path(path: str | Path) -> Path:
    """The usage ledger of the checkpoint ``path``: ``<name>.usage.json`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".usage.json")


def _read_ledger(path: Path) -> dict[str, Any] | None:
    try:
        ledger = read_json(path)
    except (OSError, ValueError):  # missing or half-written by an older writer: not measured
        return None
    return ledger if isinstance(ledger, dict) else None


def _sum_seconds(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two usages' wall and CPU seconds added (``None`` if either was not measured)."""
    out: dict[str, Any] = {}
    for field in ("wall_seconds", "cpu_seconds"):
        x, y = a.get(field), b.get(field)
        out[field] = None if x is None or y is None else round(float(x) + float(y), 3)
    return out


def _sum_usage(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two successive usages of one checkpoint added: their pieces and their seconds."""
    return {"pieces": int(a.get("pieces", 0)) + int(b.get("pieces", 0)), **_sum_seconds(a, b)}


#: One earlier piece whose times were not measured (its checkpoint predates the ledger).
_UNMEASURED_PIECE: dict[str, Any] = {"pieces": 1, "wall_seconds": None, "cpu_seconds": None}


def earlier_usage(*paths: str | Path | None) -> dict[str, Any] | None:
    """What the earlier pieces of a resumed run spent, over its checkpoints ``paths``.

    A run may train several models one after another, each with its own checkpoint (λ-Fix's
    grid); their seconds add up, while the run's earlier pieces are those of the checkpoint
    resumed most often.  Returns ``{"pieces", "wall_seconds", "cpu_seconds"}`` (the seconds
    ``None`` where a piece was not measured), or ``None`` when no path has a ledger (no
    checkpointing); a resumed run adds ``"code"``: the :func:`code_fingerprint` of each
    earlier piece (``None`` where its checkpoint did not record it), in order, repeats dropped.
    Read it before :func:`remove_checkpoint`; the current piece is not in it.
    """
    ledgers = [ledger for ledger in (_read_ledger(usage_path(path)) for path in paths if path is not None)
               if ledger is not None]
    found = [ledger.get("earlier") or NO_EARLIER_PIECES for ledger in ledgers]
    if not found:
        return None
    seconds: dict[str, Any] = dict(NO_EARLIER_PIECES)
    for earlier in found:
        seconds = _sum_seconds(seconds, earlier)
    out = {"pieces": max(int(earlier.get("pieces", 0)) for earlier in found), **seconds}
    codes: list[Any] = []
    for code in (code for ledger in ledgers for code in ledger.get("earlier_code") or []):
        if code not in codes:
            codes.append(code)
    if codes:
        out["code"] = codes
    return out


class Checkpointer:
    """One run's checkpoint: ``path`` + ``key`` + :class:`Throttle` + usage ledger.

    >>> ckpt = Checkpointer(path, settings_key(settings))        # doctest: +SKIP
    >>> state = ckpt.load()            # None: start from scratch
    >>> ckpt.save(state_of_epoch, final=stopped)                  # after each epoch
    >>> ckpt.remove()                  # after the run record is written

    ``earlier`` holds what the earlier pieces of this run spent (module docstring: the
    usage ledger) and ``earlier_code`` the code each of them ran; both are set by
    :meth:`load`.  Creating one takes the run's lock (:func:`acquire_lock`).
    """

    def __init__(self, path: str | Path, key: str, *, min_seconds: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.process_time) -> None:
        self.path = Path(path)
        self.key = key
        self.throttle = Throttle(min_seconds)
        self.earlier: dict[str, Any] = dict(NO_EARLIER_PIECES)
        self.earlier_code: list[Any] = []
        self._clock, self._cpu_clock = clock, cpu_clock
        self._started, self._cpu_started = clock(), cpu_clock()
        acquire_lock(self.path)

    def _write_ledger(self, current: Mapping[str, Any] | None) -> None:
        try:
            write_json(usage_path(self.path), {"key": self.key, "earlier": self.earlier, "current": current,
                                               "earlier_code": self.earlier_code, "code": code_fingerprint()})
        except OSError as exc:  # the ledger prices the run; it never stops one
            log.warning("checkpoint %s: cannot write its usage ledger (%s)", self.path, exc)

    def load(self) -> dict[str, Any] | None:
        state = load_checkpoint(self.path, key=self.key)
        self.earlier_code = []
        if state is None:
            self.earlier = dict(NO_EARLIER_PIECES)
        else:
            ledger = _read_ledger(usage_path(self.path))
            if ledger is None or ledger.get("key") != self.key:
                self.earlier = dict(_UNMEASURED_PIECE)  # a checkpoint from before the ledger
                self.earlier_code = [None]
            else:
                self.earlier = dict(ledger.get("earlier") or NO_EARLIER_PIECES)
                self.earlier_code = list(ledger.get("earlier_code") or [None] * int(self.earlier["pieces"]))
                if ledger.get("current") is not None:
                    self.earlier = _sum_usage(self.earlier, {"pieces": 1, **ledger["current"]})
                    self.earlier_code.append(ledger.get("code"))
        self._write_ledger(None)
        if state is not None:
            log.info("resuming from checkpoint %s", self.path)
        return state

    def save(self, state: Mapping[str, Any] | Callable[[], Mapping[str, Any]], *, final: bool = False,
             arrays: Mapping[str, np.ndarray] | None = None) -> bool:
        """Write ``state`` (or ``state()``, built only when due) if the throttle allows; True if written."""
        if not self.throttle.ready(force=final):
            return False
        started = time.monotonic()
        acquire_lock(self.path)  # held already, unless the run's checkpoint was removed in between
        save_checkpoint(self.path, state() if callable(state) else state, key=self.key, arrays=arrays)
        self.throttle.wrote(time.monotonic() - started)
        self._write_ledger({"wall_seconds": round(self._clock() - self._started, 3),
                            "cpu_seconds": round(self._cpu_clock() - self._cpu_started, 3)})
        return True

    def remove(self) -> None:
        remove_checkpoint(self.path)
