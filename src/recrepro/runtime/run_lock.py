"""One process per run: the exclusive lock a :class:`~recrepro.runtime.checkpoints.Checkpointer`
takes on ``<checkpoint>.lock`` (holding the process id) and keeps until the run record is written or
the process ends; a second process training the same run stops at once with
:class:`CheckpointLockedError`."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["CheckpointLockedError", "acquire_lock", "lock_path", "open_job_log", "release_lock"]


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


def open_job_log(log: str | Path, checkpoint: str | Path | None) -> None:
    """Send this process's stdout and stderr to ``log`` (truncated), once it holds ``checkpoint``'s lock.

    A workflow job that redirects its command into its log (``> {log} 2>&1``) truncates the log before
    the command starts; a second job of a run that another process is training then wiped the running
    job's log, only to be refused by the lock. With ``--log`` the command takes the lock first
    (:func:`acquire_lock`, raising :class:`CheckpointLockedError` on the caller's stderr) and opens the log
    only then, so a refused job leaves the log as it was. The lock stays held (re-entrant: the
    checkpointer takes it again) until the run's record is written or the process ends.
    """
    import sys

    if checkpoint is not None:
        acquire_lock(checkpoint)
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
