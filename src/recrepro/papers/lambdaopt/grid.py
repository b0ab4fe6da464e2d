"""MF-λFix's λ grid as one job per λ, and its record assembled from theirs.

One job trains MF-λFix at every λ of ``lambdafix_grid`` in turn and keeps the λ with the best
validation AUC (:func:`recrepro.papers.lambdaopt.run.run_variant`). Under the converging
budget that job is the sum of eight stopped runs: on amazon-video about four CPU-hours, longer
than a machine that stops jobs lets one job live. On the datasets a tier lists under
``lambdafix_per_lambda`` each λ is a job of its own, the grid point ``<variant>-gNN`` (the NN-th λ,
from 00), with its own run record; ``<variant>``'s record is then assembled from them by
:func:`assemble_lambdafix`: exactly what the one job writes, because each λ's model, sampler and
stopping rule draw from the run's seed alone, whatever ran before it
(``tests/test_lambdaopt_pipeline.py::test_lambdafix_from_its_grid_points_equals_the_one_job``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import copy_file, read_json, write_json
from recrepro.records import (PROVENANCE_FILE, RunProvenance, read_history, write_history,
                              write_provenance)

__all__ = ["GRID_POINT", "assemble_lambdafix", "grid_point_settings", "grid_point_names"]

#: a grid point's run name: ``<variant>-gNN`` trains ``<variant>`` (MF-λFix) at the NN-th λ of its grid alone
GRID_POINT = re.compile(r"^(?P<variant>.+)-g(?P<k>\d{2})$")

#: the files of a λFix record copied from the picked grid point as they are
COPIED = ("per_user.parquet", "trajectory.parquet", "train_counts.parquet")


def grid_point_settings(settings: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``settings`` of the variant a grid point ``name`` belongs to, narrowed to its one λ."""
    point = GRID_POINT.match(name)
    grid = settings.get("lambdafix_grid") if settings.get("method") == "lambdafix" else None
    if point is None or not grid or int(point["k"]) >= len(grid):
        size = f"a grid of {len(grid)}" if grid else "no λ grid (not MF-λFix)"
        raise ValueError(f"lambdaopt: {name!r} names no λ of its variant's lambdafix_grid ({size})")
    return {**settings, "lambdafix_grid": [grid[int(point["k"])]]}


def grid_point_names(variant: str, settings: Mapping[str, Any]) -> list[str]:
    """The grid points' run names of an MF-λFix variant, in grid order; ``[]`` for any other method."""
    if settings.get("method") != "lambdafix" or GRID_POINT.match(variant):
        return []
    return [f"{variant}-g{k:02d}" for k in range(len(settings.get("lambdafix_grid") or []))]


def assemble_lambdafix(point_dirs: Sequence[str | Path], out_dir: str | Path, variant: str,
                       settings: Mapping[str, Any], evaluation: Mapping[str, Any],
                       benchmark_file: str | None = None) -> dict[str, Any]:
    """Write ``variant``'s MF-λFix record from its grid points' records, as the one job would.

    The λ with the best validation AUC wins (the first of equals in grid order, as the one job
    keeps it); its test metrics, per-user rows, trajectory and training counts are the record's,
    and the history holds every λ's curve, then every λ's grid row, in grid order. Each point must
    be ``<variant>-gNN`` at the NN-th λ of ``settings["lambdafix_grid"]``, of one dataset, split and
    seed: anything else is refused, so no record mixes runs. The provenance names the points
    (``grid_points``: run, λ, CPU and wall seconds, config digest); its own CPU and wall seconds
    are the assembly's, the training's being the points' records'.
    """
    started = time.time()
    grid = list(settings.get("lambdafix_grid") or [])
    names = grid_point_names(variant, settings)
    if len(point_dirs) != len(names):
        raise ValueError(f"lambdaopt: {variant!r} has {len(names)} grid points, {len(point_dirs)} runs were given")
    metrics, provenance = [], []
    for k, (name, run_dir) in enumerate(zip(names, map(Path, point_dirs))):
        m, p = read_json(run_dir / "metrics.json"), read_json(run_dir / PROVENANCE_FILE)
        if m.get("method") != name or m.get("selected_lam") != grid[k]:
            raise ValueError(f"lambdaopt: {run_dir} is {m.get('method')!r} at λ={m.get('selected_lam')!r}, "
                             f"not {name!r} at λ={grid[k]!r}")
        metrics.append(m)
        provenance.append(p)
    for key in ("dataset", "split", "seed", "tier"):
        values = {m.get(key) for m in metrics}
        if len(values) > 1:
            raise ValueError(f"lambdaopt: {variant!r}'s grid points mix {key} values {sorted(map(str, values))}")
    best = 0
    for k, m in enumerate(metrics):   # strictly better only: the first of equals stays, as in the one job
        if m["selected_val_auc"] > metrics[best]["selected_val_auc"]:
            best = k
    out, pick = Path(out_dir), Path(point_dirs[best])
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").unlink(missing_ok=True)   # written last: a crash leaves no record beside old files
    for name in COPIED:
        if (pick / name).is_file():
            copy_file(pick / name, out / name)
    histories = [read_history(d, "history.parquet") for d in point_dirs]
    curves = [h[h["epoch"].notna()] for h in histories]
    rows = [h[h["epoch"].isna()] for h in histories]
    history = pd.concat([pd.concat(curves, ignore_index=True), pd.concat(rows, ignore_index=True)],
                        ignore_index=True)
    record = {**metrics[best], "method": variant}
    run_meta = {**provenance[best].get("run", {}), "method": variant}
    prov = RunProvenance(meta=run_meta,
                         config_slice={"variant": variant, "settings": dict(settings), "evaluation": dict(evaluation)},
                         split_manifest=None, seed=int(record["seed"]), device=provenance[best].get("device", "cpu"),
                         started_at=started, benchmark_file=benchmark_file).build()
    prov["split"] = provenance[best].get("split")
    prov["grid_points"] = [{"run": n, "lam": grid[k], "cpu_seconds": p.get("cpu_seconds"),
                            "wall_seconds": p.get("wall_seconds"), "config_sha256": p.get("config_sha256")}
                           for k, (n, p) in enumerate(zip(names, provenance))]
    write_provenance(out / PROVENANCE_FILE, prov)
    write_history(out, history, "history.parquet")   # its wall seconds join the provenance's timings
    write_json(out / "metrics.json", record)
    return {"selected_lam": record["selected_lam"], "selected_val_auc": record["selected_val_auc"],
            "picked": names[best]}
