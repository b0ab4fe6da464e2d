"""A grid record's scored points handed to the job that tunes it again (``recrepro strong reuse-points``).

A walk past the grid's edges switched on after the grid ran (gowalla's EASE: three points of about
18 CPU-minutes each on each split) would score every point again: ``strong_tune``'s output is the
grid record, which Snakemake removes before the job starts, and the job's ledger
(:class:`recrepro.baselines.strong.PointLedger`) is gone once a record is written. This module
writes that ledger again from the record, under the key today's job computes, after checking that
the record was scored as today's job would score it: the same model, grid points, validation metric,
seed, evaluation section, batch size and split. Each reused row says where it came from
(``from_record``: the record, the commit that scored it, how the split was found the same), and the
job's ``grid.json`` keeps those rows; the ledger's code digest is today's, so a row scored by an
earlier commit is named as such rather than silently taken for today's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recrepro.baselines.grid import expand_grid
from recrepro.baselines.strong import PointLedger, ledger_key, validation_section
from recrepro.io import read_json
from recrepro.runtime.checkpoints import release_lock

__all__ = ["reuse_points"]


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _same_split(recorded: Mapping[str, Any], split_dir: Path, split_checked: str | None) -> str:
    """How the record's split is known to be today's (the words ``from_record`` keeps); ``ValueError``
    when it is not: other rows, other content digests, or other file digests with no content digest
    and no ``split_checked``."""
    today = read_json(split_dir / "manifest.json").get("files", {})
    then = dict(recorded.get("files") or {})
    if set(then) != set(today):
        raise ValueError(f"its split has the parts {sorted(then)}, today's {sorted(today)}")
    for name in sorted(then):
        if then[name].get("rows") != today[name].get("rows"):
            raise ValueError(f"its {name} has {then[name].get('rows')} rows, today's {today[name].get('rows')}")
    if all("content_sha256" in then[n] and "content_sha256" in today[n] for n in then):
        differ = [n for n in sorted(then) if then[n]["content_sha256"] != today[n]["content_sha256"]]
        if differ:
            raise ValueError(f"its split's content differs from today's in {', '.join(differ)} (content_sha256)")
        return "the same content_sha256 in every part"
    if all(then[n].get("sha256") == today[n].get("sha256") for n in then):
        return "the same files (sha256) in every part"
    if split_checked:
        return f"other file digests, the same pairs as checked: {split_checked}"
    raise ValueError("its split files' sha256 differ from today's and it names no content digest: check that "
                     "the pairs are the same (docs/protocols.md) and say how with --split-checked")


def reuse_points(grid_file: str | Path, *, split_dir: str | Path, model: str, grid: Mapping[str, Sequence[Any]],
                 fixed: Mapping[str, Any], evaluation: Mapping[str, Any], select: str, seeds: Sequence[int],
                 batch_size: int, beyond: Mapping[str, Sequence[Any]] | None, checkpoint: str | Path,
                 split_checked: str | None = None) -> list[int]:
    """Write the ledger ``checkpoint`` of a ``strong_tune`` job from its grid record ``grid_file``: the
    record's scored points (grid and walk), so that the job run again scores only what the record lacks.

    The other arguments are today's job's (``recrepro.baselines.strong_config.tune_params``). Returns the
    reused points' numbers. ``ValueError`` names what differs when the record was scored otherwise than
    today's job would score it, or when the ledger already holds points (a job under way or killed:
    running it resumes them).
    """
    grid_file, split_dir = Path(grid_file), Path(split_dir)
    summary = read_json(grid_file)
    record_dir = grid_file.parent
    problems = []
    if summary.get("model") != model:
        problems.append(f"it tuned {summary.get('model')!r}, not {model!r}")
    if summary.get("select") != select:
        problems.append(f"it picked on {summary.get('select')!r}, today's job on {select!r}")
    points = expand_grid(grid, fixed)
    scored_grid = [r["settings"] for r in summary.get("points", []) if not r.get("beyond")]
    if _canon(scored_grid) != _canon(points):
        problems.append(f"its grid points ({len(scored_grid)}) are not today's ({len(points)})")
    if list(summary.get("seeds", []))[:1] != [int(seeds[0])]:
        problems.append(f"it scored the grid under seed {summary.get('seeds', [None])[0]}, today's job under {seeds[0]}")
    provenance_file = record_dir / f"seed{int(seeds[0])}" / "provenance.json"
    if not provenance_file.is_file():
        raise ValueError(f"{grid_file}: cannot reuse its points: no {provenance_file} says how they were scored")
    provenance = read_json(provenance_file)
    made = provenance.get("config") or {}
    if _canon(made.get("evaluation")) != _canon(dict(evaluation)):
        problems.append("its evaluation section differs from today's")
    if made.get("batch_size") != batch_size:
        problems.append(f"its batch size was {made.get('batch_size')}, today's {batch_size}")
    try:
        split_note = _same_split(provenance.get("split") or {}, split_dir, split_checked)
    except ValueError as err:
        problems.append(str(err))
    if problems:
        raise ValueError(f"{grid_file}: cannot reuse its points: " + "; ".join(problems))
    key = ledger_key(model, points, validation_section(evaluation), select, seeds, batch_size, beyond, split_dir)
    ledger = PointLedger(checkpoint, key)
    if ledger.rows:
        raise ValueError(f"{checkpoint} already holds {len(ledger.rows)} scored points: a job is under way or was "
                         "killed; run it again (it resumes them), or delete the ledger first")
    origin = {"record": str(grid_file), "commit": (provenance.get("git") or {}).get("commit"), "split": split_note}
    for row in summary["points"]:  # a row reused before keeps where it was first scored
        ledger.add({**row, "from_record": row.get("from_record", origin)})
    release_lock(Path(checkpoint))
    return [int(r["point"]) for r in summary["points"]]
