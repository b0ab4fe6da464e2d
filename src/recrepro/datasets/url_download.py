"""Downloading one URL to a file, verified on the way (:func:`download_url`), with retries of the
failures that a retry may cure."""

from __future__ import annotations

import http.client
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from recrepro import __version__
from recrepro.datasets.digests import Expected, ShortRead, copy_verified

__all__ = ["download_url"]

# HTTP statuses worth retrying; anything else (404, 403, ...) will not change on retry.
_TRANSIENT_HTTP = frozenset({408, 425, 429, 500, 502, 503, 504})
_USER_AGENT = f"recrepro/{__version__} (+dataset fetch)"


class _TransientError(Exception):
    """A failure worth retrying (server error, timeout, dropped connection)."""


def _show_progress(progress: bool | None) -> bool:
    return sys.stderr.isatty() if progress is None else progress


def download_url(
    url: str,
    dest: str | Path,
    expected: Expected = Expected(),
    *,
    progress: bool | None = None,
    tries: int = 3,
    backoff_s: float = 1.0,
    timeout_s: float = 60.0,
) -> str:
    """Download ``url`` to ``dest`` (atomically, verified); return the file's sha256.

    Parameters
    ----------
    url:
        http(s) (or file) URL.
    dest:
        Final path; only a complete, verified file is ever renamed onto it.
    expected:
        Published digests; a mismatch raises :class:`ChecksumError` (not retried).
    progress:
        tqdm progress bar on stderr; None shows it when stderr is a terminal.
    tries, backoff_s:
        Transient failures (timeouts, dropped connections, HTTP 5xx/429) are retried,
        ``tries`` attempts in all, sleeping ``backoff_s``, then twice as long, ... in between.
    timeout_s:
        Socket timeout per attempt.

    Raises
    ------
    ChecksumError
        The downloaded bytes do not match ``expected``.
    OSError
        (``urllib.error.URLError`` and friends) the URL could not be read.
    """
    dest = Path(dest)
    last_error: BaseException | None = None
    for attempt in range(tries):
        if attempt:
            time.sleep(backoff_s * 2 ** (attempt - 1))
        try:
            return _download_once(url, dest, expected, progress=progress, timeout_s=timeout_s)
        except _TransientError as exc:
            last_error = exc.__cause__ or exc
    assert last_error is not None
    raise OSError(f"{url}: failed after {tries} attempts: {last_error}") from last_error


def _download_once(url: str, dest: Path, expected: Expected, *, progress: bool | None, timeout_s: float) -> str:
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    try:
        response = urllib.request.urlopen(request, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        if exc.code in _TRANSIENT_HTTP:
            raise _TransientError() from exc
        raise
    except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
        raise _TransientError() from exc
    with response:
        length = response.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        bar = None
        if _show_progress(progress):
            from tqdm import tqdm

            bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=dest.name, file=sys.stderr)
        try:
            return copy_verified(response, dest, expected, f"{dest.name} (from {url})", bar, expected_size=total)
        except (ShortRead, TimeoutError, ConnectionError, http.client.HTTPException, urllib.error.URLError) as exc:
            raise _TransientError() from exc
        finally:
            if bar is not None:
                bar.close()
