"""The usage ledger of a checkpoint, ``<checkpoint>.usage.json``: what each piece of a run trained in
pieces spent (wall and CPU seconds) and the code it ran, so that a resumed run's record prices the
whole run (:mod:`recrepro.runtime.checkpoints`, "The usage ledger").

:class:`~recrepro.runtime.checkpoints.Checkpointer` writes the ledger; :func:`earlier_usage` reads
what a run's earlier pieces spent for its record.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recrepro.io import read_json

__all__ = ["NO_EARLIER_PIECES", "UNMEASURED_PIECE", "earlier_usage", "read_ledger", "sum_usage", "usage_path"]

#: Earlier pieces of a run that has none (not resumed).
NO_EARLIER_PIECES: dict[str, Any] = {"pieces": 0, "wall_seconds": 0.0, "cpu_seconds": 0.0}


def usage_path(path: str | Path) -> Path:
    """The usage ledger of the checkpoint ``path``: ``<name>.usage.json`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".usage.json")


def read_ledger(path: Path) -> dict[str, Any] | None:
    """The ledger at ``path``; ``None`` when it is missing or unreadable."""
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


def sum_usage(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two successive usages of one checkpoint added: their pieces and their seconds."""
    return {"pieces": int(a.get("pieces", 0)) + int(b.get("pieces", 0)), **_sum_seconds(a, b)}


#: One earlier piece whose times were not measured (its checkpoint predates the ledger).
UNMEASURED_PIECE: dict[str, Any] = {"pieces": 1, "wall_seconds": None, "cpu_seconds": None}


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
    ledgers = [ledger for ledger in (read_ledger(usage_path(path)) for path in paths if path is not None)
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
