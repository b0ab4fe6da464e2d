"""How the command line ends: a known failure is a short ``error:`` line, not a traceback.

:func:`recrepro.cli.main.main` runs every verb (``recrepro data ...``, ``recrepro <paper> <verb> ...``)
and reports the failures listed here with :func:`report_error`. Snakemake shows a failing job's
log on the console (``show-failed-logs`` in the profiles): its last lines should say what went
wrong, not end in a traceback. ``RECREPRO_TRACEBACK=1`` (or ``recrepro -v``) re-raises, for
debugging.
"""

from __future__ import annotations

import sys

__all__ = ["KNOWN_ERRORS", "TRACEBACK_ENV", "report_error"]

#: Failures with a message written for the user (checksum, format, missing data, config,
#: non-finite training): reported in a few lines, without a traceback.
KNOWN_ERRORS = (ValueError, LookupError, OSError, RuntimeError)
TRACEBACK_ENV = "RECREPRO_TRACEBACK"


def report_error(exc: BaseException, prog: str = "recrepro") -> None:
    """Print ``exc`` as the last lines of stderr (the job's log), ``prog: error: Type: message``."""
    print(f"{prog}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(f"{prog}: (set {TRACEBACK_ENV}=1 for the traceback)", file=sys.stderr)
