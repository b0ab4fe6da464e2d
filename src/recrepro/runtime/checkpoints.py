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
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch  # noqa: F401  (``checkpoints.torch``: the tests reach torch's writer through this module)

from recrepro.io import write_json
# What a checkpoint is keyed by, random generator states, the run's lock, the archive format and the
# usage ledger live in modules of their own; their public names stay importable from here.
from recrepro.runtime.checkpoint_archive import (
    FORMAT_VERSION,
    CheckpointWriteError,
    encode_state,
    read_payload,
    read_state,
    side_files,
    write_payload,
)
from recrepro.runtime.fingerprints import code_fingerprint, data_fingerprint, is_computing, settings_key
from recrepro.runtime.rng_state import generator_state, global_rng_state, set_generator_state, set_global_rng_state
from recrepro.runtime.run_lock import CheckpointLockedError, acquire_lock, lock_path, release_lock
from recrepro.runtime.usage_ledger import (
    NO_EARLIER_PIECES,
    UNMEASURED_PIECE,
    earlier_usage,
    read_ledger,
    sum_usage,
    usage_path,
)

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

# The code that saves, loads and keeps the ledger calls ``code_fingerprint`` and ``save_checkpoint``
# through this module's names (tests stand in for them here), and :class:`Throttle` reads
# ``WRITE_OVERHEAD`` here: all three stay in this module.


# ----------------------------------------------------------------------------- save, load, remove


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
               "state": encode_state(dict(state), "state"), "arrays": {}, "arrays_sha256": {}}
    return write_payload(path, payload, arrays)


def load_checkpoint(path: str | Path, *, key: str) -> dict[str, Any] | None:
    """The state saved at ``path`` under ``key``, or ``None`` (start over).

    ``None`` without a word when the file does not exist; ``None`` with a WARNING naming
    the file when it was written under another key (other settings or data) or cannot be
    read (truncated, corrupt, missing side file).  Tensors are loaded on the CPU.
    """
    path = Path(path)
    payload = read_payload(path, key=key)
    if payload is None or not _same_code(path, payload.get("code")):
        return None
    return read_state(path, payload)


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
    for p in (path, *side_files(path), usage_path(path)):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    release_lock(path)


# ----------------------------------------------------------------------------- when to write


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


# ----------------------------------------------------------------------------- the run's checkpoint


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
            ledger = read_ledger(usage_path(self.path))
            if ledger is None or ledger.get("key") != self.key:
                self.earlier = dict(UNMEASURED_PIECE)  # a checkpoint from before the ledger
                self.earlier_code = [None]
            else:
                self.earlier = dict(ledger.get("earlier") or NO_EARLIER_PIECES)
                self.earlier_code = list(ledger.get("earlier_code") or [None] * int(self.earlier["pieces"]))
                if ledger.get("current") is not None:
                    self.earlier = sum_usage(self.earlier, {"pieces": 1, **ledger["current"]})
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
