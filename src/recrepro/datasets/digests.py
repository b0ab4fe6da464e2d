"""Published digests and the files checked against them: a file is verified (sha256, md5) while it is
streamed, and only a complete, verified copy is renamed into place (:mod:`recrepro.datasets.download`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from recrepro.datasets.errors import ChecksumError
from recrepro.io import atomic_path

__all__ = ["CHUNK", "Expected", "ShortRead", "copy_verified", "verify_file"]

#: Bytes read and hashed at a time.
CHUNK = 1 << 20


@dataclass(frozen=True)
class Expected:
    """Published digests a file must match (either may be None)."""

    sha256: str | None = None
    md5: str | None = None

    @property
    def known(self) -> bool:
        return bool(self.sha256 or self.md5)

    @property
    def method(self) -> str:
        return "+".join(n for n, v in (("sha256", self.sha256), ("md5", self.md5)) if v) or "none"


class _Hasher:
    """sha256 (always) and md5 (when asked) over one stream of bytes."""

    def __init__(self, want_md5: bool) -> None:
        self.sha256 = hashlib.sha256()
        self.md5 = hashlib.md5() if want_md5 else None

    def update(self, block: bytes) -> None:
        self.sha256.update(block)
        if self.md5 is not None:
            self.md5.update(block)

    def check(self, label: str, expected: Expected) -> str:
        """Raise ChecksumError on mismatch; return the sha256 hex digest."""
        actual_sha = self.sha256.hexdigest()
        if expected.sha256 and actual_sha != expected.sha256:
            raise ChecksumError(f"{label}: sha256 mismatch: expected {expected.sha256}, actual {actual_sha}")
        if expected.md5 and self.md5 is not None:
            actual_md5 = self.md5.hexdigest()
            if actual_md5 != expected.md5:
                raise ChecksumError(f"{label}: md5 mismatch: expected {expected.md5}, actual {actual_md5}")
        return actual_sha


def verify_file(path: str | Path, expected: Expected, label: str | None = None) -> str:
    """Check ``path`` against ``expected`` (ChecksumError on mismatch); return its sha256."""
    hasher = _Hasher(want_md5=bool(expected.md5))
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            hasher.update(block)
    return hasher.check(label or str(path), expected)


class ShortRead(Exception):
    """Fewer bytes arrived than the server announced."""


def copy_verified(
    src: BinaryIO,
    dest: Path,
    expected: Expected,
    label: str,
    progress_bar=None,
    expected_size: int | None = None,
) -> str:
    """Stream ``src`` into ``dest`` atomically, verifying on the way; return sha256.

    The size (when announced) and the digests are checked before the rename; on any
    failure the temporary file is removed and ``dest`` is left as it was.
    """
    hasher = _Hasher(want_md5=bool(expected.md5))
    size = 0
    with atomic_path(dest) as tmp:
        with open(tmp, "wb") as out:
            for block in iter(lambda: src.read(CHUNK), b""):
                out.write(block)
                hasher.update(block)
                size += len(block)
                if progress_bar is not None:
                    progress_bar.update(len(block))
        # A truncated transfer is a network failure (retried), not corruption.
        if expected_size is not None and size != expected_size:
            raise ShortRead(f"short read: {size} of {expected_size} bytes")
        return hasher.check(label, expected)

