"""How a command-line entry point ends: a known failure is a short ``error:`` line, not a traceback.

Shared by the package CLI (:mod:`recrepro.cli`) and the papers' entry points
(``python -m recrepro.papers.<paper> ...``). It lives below both, in the infrastructure layer,
so that paper code never imports the CLI that sits above it (docs/architecture.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

__all__ = ["KNOWN_ERRORS", "TRACEBACK_ENV", "report_error", "run_main"]

#: Failures with a message written for the user (checksum, format, missing data, config,
#: non-finite training): reported in a few lines, without a traceback.
KNOWN_ERRORS = (ValueError, LookupError, OSError, RuntimeError)
TRACEBACK_ENV = "RECREPRO_TRACEBACK"


def report_error(exc: BaseException, prog: str = "recrepro") -> None:
    """Print ``exc`` as the last lines of stderr (the job's log), ``prog: error: Type: message``."""
    print(f"{prog}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(f"{prog}: (set {TRACEBACK_ENV}=1 for the traceback)", file=sys.stderr)


def run_main(main_func: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None,
             prog: str = "recrepro") -> int:
    """Run an entry point's ``main``; a known failure ends it with a short message and status 1.

    Snakemake shows a failing job's log on the console (``show-failed-logs`` in the
    profiles): its last lines should say what went wrong, not end in a traceback.
    ``RECREPRO_TRACEBACK=1`` re-raises, for debugging.
    """
    try:
        return int(main_func(argv) or 0)
    except KNOWN_ERRORS as exc:
        if os.environ.get(TRACEBACK_ENV):
            raise
        report_error(exc, prog)
        return 1
