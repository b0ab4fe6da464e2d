"""Exceptions raised while fetching and unpacking datasets.

``DataFormatError`` (a malformed data file) lives in :mod:`recrepro.datasets.container`
and is re-exported by :mod:`recrepro.datasets`.
"""

from __future__ import annotations


class ChecksumError(RuntimeError):
    """A file's digest differs from the published one (the message names file, expected and actual)."""


class DatasetUnavailableError(RuntimeError):
    """Neither the mirror nor the canonical URLs (nor a hand-placed copy) could provide a file.

    The message names the dataset, the missing file(s), what was tried, the canonical URLs
    and, where the registry has them, the instructions for placing the file by hand.
    """


class UnsafeArchiveError(ValueError):
    """An archive member would be written outside the target folder (absolute path, ``..``,
    a link pointing outside, or a special file such as a device)."""


class ArchiveTooLargeError(UnsafeArchiveError):
    """An archive expanded past the cap set for it (a decompression bomb, or a cap set too low);
    the message names the archive, the cap and the setting that raises it."""
