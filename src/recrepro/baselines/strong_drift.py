"""Strong-baseline records against the configuration they would be made under today
(``recrepro strong-baseline drift``: :func:`recrepro.records.drift.compare_settings`)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recrepro.baselines.grid import beyond_edges
from recrepro.baselines.strong_config import tune_params
from recrepro.baselines.strong_models import MODELS, settings_text
from recrepro.io import read_json

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["outdated_grids", "record_drift"]


def record_drift(config: Mapping[str, Any], tier: str, results_root: str | Path = "results") -> pd.DataFrame:
    """Every setting in which a strong-baseline record under ``results_root/<tier>/baselines/strong``
    differs from what ``config`` gives its protocol and model today, one row each
    (:func:`recrepro.records.drift.compare_settings`; empty when every record is current).

    Compared: the grid, the fixed settings and the validation metric (``grid.json`` and each seed's
    ``provenance.json``), the evaluation section (each seed's) and the seeds tested (``grid.json``;
    a deterministic model's first only).  A grid record whose protocol or model the configuration no
    longer has is listed as such but not as outdated: no table reads it.  The grid job does not rerun
    when its parameters change on a fresh clone (Snakemake's parameter memory is local), so without
    this check a pick made on yesterday's grid would sit in today's table.
    """
    from recrepro.records.drift import compare_settings, drift_frame

    rows: list[dict[str, Any]] = []
    for grid_file in sorted(Path(results_root, tier, "baselines", "strong").glob("*/*/*/*/split*/grid.json")):
        run_dir = grid_file.parent
        dataset, protocol, split, model = run_dir.parts[-5:-1]
        try:
            now = tune_params(config, tier, dataset, protocol, split, model)
        except (KeyError, ValueError):
            rows.append({"record": str(run_dir), "setting": "protocol", "recorded": f"{dataset}/{protocol}/{split}/{model}",
                         "now": None, "same_record": True,
                         "why": "not in the configuration today: no table reads it (delete it, or restore the entry)"})
            continue
        seeds = [int(s) for s in str(now["seeds"]).split(",")]
        search_now = {"grid": now["grid"], "fixed": now["fixed"], "beyond": now["beyond"] or {},
                      "select": now["select"]}
        summary = read_json(grid_file)
        # a record made before the walk past the edges existed has no "beyond": it walked nowhere
        recorded = {"search": {**{k: summary.get(k) for k in search_now}, "beyond": summary.get("beyond") or {}},
                    "seeds": {"tested": summary.get("seeds")}}
        wanted = {"search": search_now, "seeds": {"tested": seeds if MODELS.get(model, True) else seeds[:1]}}
        same_walk = functools.partial(_same_without_walk, summary)
        rows += compare_settings(run_dir, recorded, wanted, same_walk)
        for prov_file in sorted(run_dir.glob("seed*/provenance.json")):
            slice_ = read_json(prov_file).get("config") or {}
            rows += compare_settings(prov_file.parent,
                                     {"search": {**{k: slice_.get(k) for k in search_now},
                                                 "beyond": slice_.get("beyond") or {}},
                                      "evaluation": slice_.get("evaluation") or {}},
                                     {"search": search_now, "evaluation": now["evaluation"]}, same_walk)
    return drift_frame(rows)


def _same_without_walk(summary: Mapping[str, Any], run_dir: Path, setting: str, old: Any,
                       new: Any) -> tuple[bool, str] | None:
    """Whether a grid record made with the walk list ``old`` is the record the list ``new`` makes:
    so when the walk replayed under ``new`` from the record's grid points, on the record's own
    scores, steps to exactly the points the record walked to and stops there (a record made before
    the walk existed walked nowhere: the same when ``new`` adds no point, :func:`beyond_edges`)."""
    import json

    if setting != "search.beyond":
        return None
    rows = summary.get("points", [])
    score = {json.dumps(r["settings"], sort_keys=True): r[f"val:{summary['select']}"] for r in rows}
    points = [r["settings"] for r in rows if not r.get("beyond")]
    scores = [r[f"val:{summary['select']}"] for r in rows if not r.get("beyond")]
    while steps := beyond_edges(points, scores, new):
        missing = [s for s in steps if json.dumps(s, sort_keys=True) not in score]
        if missing:
            return False, (f"today's walk goes on to {settings_text(missing[0])}, which it never scored: tune it "
                           "again (`recrepro strong reuse-points` keeps what it scored)")
        points += steps
        scores += [score[json.dumps(s, sort_keys=True)] for s in steps]
    if len(points) < len(rows):
        return False, ("it walked to points today's list does not reach: tune it again"
                       " (`recrepro strong reuse-points` keeps what it scored)")
    return True, ("today's walk, replayed on its scores, visits exactly the points it scored"
                  + (" (none past the grid)" if not old else "") + ": the same record")


def outdated_grids(config: Mapping[str, Any], tier: str, results_root: str | Path = "results") -> list[dict[str, Any]]:
    """The grid records today's configuration has moved past (:func:`record_drift`'s outdated rows of a
    grid record, not its seeds' records), one entry each: the record (``grid.json``), why, and the CPU
    minutes of its scored points (their mean: what each point the job adds costs, about).
    ``docs/compute.md`` queues them."""
    drift = record_drift(config, tier, results_root)
    if drift.empty:
        return []
    out: dict[str, dict[str, Any]] = {}
    for row in drift[~drift["same_record"].astype(bool)].itertuples(index=False):
        grid_file = Path(row.record) / "grid.json"
        if not grid_file.is_file() or str(grid_file) in out:
            continue
        points = read_json(grid_file).get("points", [])
        cpu = [float(p["cpu_seconds"]) for p in points if p.get("cpu_seconds") is not None]
        out[str(grid_file)] = {"record": str(grid_file), "why": f"{row.setting}: {row.why}",
                               "point_cpu_minutes": sum(cpu) / len(cpu) / 60 if cpu else None}
    return list(out.values())
