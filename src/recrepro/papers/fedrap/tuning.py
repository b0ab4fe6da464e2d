"""FedRAP's validation grids: every method's best shot, chosen on validation (issue 46).

The config's ``fedrap.tiers.<tier>.tuning`` block names, per method, a grid of at most ~30 settings (a list
of ``points`` and/or the ``product`` of a few values per key), the datasets it runs on and the
metric it selects by.  A grid point runs as the variant ``<grid>-gNN`` (``NN``: its index in the
expanded grid, listed points first, then the product in key order) on the first training seed,
under the grid variant's own negative pool (the leak-free ``train`` pool: the released code's
pool never draws the validation item as a negative either, so it cannot select fairly).

The picks are written into the config (``tuning.picks: {dataset: {grid: gNN}}``), so that a
comparison run names the settings it used; :func:`tuning_table` recomputes the pick from the
grid records and flags a config pick that disagrees with them.  A *tuned* variant
(``tuning.tuned: {name: {grid, variant}}``) takes ``variant``'s keys (method, mode, pool) and the
picked point of ``grid``; e.g. ``fedrap_tuned`` is the paper objective at the code-mode pick.

Settings layer ``base < tier settings < per-dataset settings < the variant's keys < the point``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.baselines.strong import grid_edges

__all__ = ["GRID_RUN", "grid_edges", "grid_frame", "grid_points", "grid_run_name", "parse_grid_run", "pick_from_records", "tuned_point",
           "check_tuned_records",
           "tuning_block", "tuning_grid_runs", "tuning_table", "tuning_markdown", "tuned_runs"]

#: a grid run's variant name: ``<grid variant>-g<index>``
GRID_RUN = re.compile(r"^(?P<grid>[a-z][a-z0-9_]*)-g(?P<index>\d{2,})$")


def tuning_block(config: Mapping[str, Any], tier: str) -> dict[str, Any]:
    """The tier's ``fedrap.tiers.<tier>.tuning`` block (empty: no grid, no tuned variant)."""
    return dict(config.get("fedrap", {}).get("tiers", {}).get(tier, {}).get("tuning") or {})


def grid_points(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The points of one grid: ``points`` in their order, then ``product`` in key order, then
    ``extra`` (points added after the grid first ran, e.g. beyond an edge a pick sat on: appended,
    so that the earlier points keep their numbers and records).

    The numbering follows the order the product's keys are written in: whatever hands a grid on
    (a rule's JSON parameter) keeps that order, and :func:`tuning_table` refuses a record whose
    settings are not its point's.

    >>> grid_points({"points": [{"lam": 0.1}], "product": {"lam": [1.0, 2.0], "mu": [3.0]},
    ...              "extra": [{"lam": 4.0, "mu": 3.0}]})
    [{'lam': 0.1}, {'lam': 1.0, 'mu': 3.0}, {'lam': 2.0, 'mu': 3.0}, {'lam': 4.0, 'mu': 3.0}]
    >>> grid_points({"points": [{"lam": 0.1}, {"lam": 0.2}]})       # no product: the points only
    [{'lam': 0.1}, {'lam': 0.2}]
    """
    points = [dict(p) for p in spec.get("points", [])]
    product = spec.get("product") or {}
    keys = list(product)
    if keys:        # itertools.product() of nothing is one empty tuple: a point of no flags
        points += [dict(zip(keys, values)) for values in itertools.product(*(product[k] for k in keys))]
    points += [dict(p) for p in spec.get("extra", [])]
    return points


def grid_run_name(grid: str, index: int) -> str:
    return f"{grid}-g{index:02d}"


def parse_grid_run(variant: str) -> tuple[str, int] | None:
    """``(grid, index)`` of a grid run's variant name, ``None`` for any other name."""
    m = GRID_RUN.match(variant)
    return (m["grid"], int(m["index"])) if m else None


def _grid(config: Mapping[str, Any], tier: str, grid: str) -> list[dict[str, Any]]:
    return _block_grid(tuning_block(config, tier), grid)


def _block_grid(block: Mapping[str, Any], grid: str) -> list[dict[str, Any]]:
    grids = block.get("grids", {})
    if grid not in grids:
        raise ValueError(f"fedrap: no tuning grid {grid!r}; grids: {sorted(grids)}")
    return grid_points(grids[grid])


def grid_point(config: Mapping[str, Any], tier: str, grid: str, index: int) -> dict[str, Any]:
    points = _grid(config, tier, grid)
    if not 0 <= index < len(points):
        raise ValueError(f"fedrap: grid {grid!r} has points g00..g{len(points) - 1:02d}, not g{index:02d}")
    return points[index]


def tuned_point(config: Mapping[str, Any], tier: str, dataset: str, name: str) -> tuple[str, dict[str, Any], str]:
    """``(variant, point, pick)`` of the tuned variant ``name`` on ``dataset``.

    Raises ``ValueError`` naming the dataset and grid when the config holds no pick yet.
    """
    block = tuning_block(config, tier)
    spec = block.get("tuned", {})[name]
    grid = spec["grid"]
    found = _pick_index(block, dataset, grid)
    if found is None:
        raise ValueError(f"fedrap: {name} needs a pick of grid {grid!r} on {dataset}: run the grid "
                         f"({grid}-gNN, seed of tuning.seed) and write fedrap.tiers.{tier}.tuning.picks.{dataset}.{grid}")
    pick, index = found
    return spec["variant"], grid_point(config, tier, grid, index), pick


def _pick_index(block: Mapping[str, Any], dataset: str, grid: str) -> tuple[str, int] | None:
    """``(gNN, N)``: the config's pick of ``grid`` on ``dataset`` (``None`` without one)."""
    pick = (block.get("picks") or {}).get(dataset, {}).get(grid)
    if pick is None:
        return None
    parsed = parse_grid_run(f"{grid}-{pick}")
    if parsed is None:
        raise ValueError(f"fedrap: tuning.picks.{dataset}.{grid} must read gNN, not {pick!r}")
    return pick, parsed[1]


def _tier_datasets(splits: Sequence[tuple[str, str, int]]) -> list[tuple[str, str]]:
    return [(d, s) for d, s, _ in splits]


def tuning_grid_runs(config: Mapping[str, Any], tier: str, splits: Sequence[tuple[str, str, int]]) -> list[str]:
    """metrics.json of every grid run of the tier (first training seed, the tuning datasets)."""
    block = tuning_block(config, tier)
    wanted = set(block.get("datasets", []))
    seed = block.get("seed", 0)
    return [f"results/{tier}/fedrap/runs/{d}/{s}/{grid_run_name(g, i)}/seed{seed}/metrics.json"
            for d, s in _tier_datasets(splits) if d in wanted
            for g in block.get("grids", {}) for i in range(len(_grid(config, tier, g)))]


def tuned_runs(config: Mapping[str, Any], tier: str, splits: Sequence[tuple[str, str, int]],
               seeds: Sequence[int]) -> list[str]:
    """metrics.json of the tuned variants on every dataset whose config holds their grid's pick."""
    block = tuning_block(config, tier)
    picks = block.get("picks") or {}
    return [f"results/{tier}/fedrap/runs/{d}/{s}/{name}/seed{seed}/metrics.json"
            for d, s in _tier_datasets(splits)
            for name, spec in block.get("tuned", {}).items() if spec["grid"] in picks.get(d, {})
            for seed in seeds]


# ----------------------------------------------------------------------------- picks and the table
def grid_frame(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    from recrepro.records import read_metrics

    rows = []
    for d in run_dirs:
        m = read_metrics(Path(d))
        parsed = parse_grid_run(str(m["method"]))
        if parsed is None:
            continue
        diverged = m.get("diverged") or {}
        rows.append({"dataset": m["dataset"], "grid": parsed[0], "point": f"g{parsed[1]:02d}",
                     "val_hr@10": m.get("val_hr@10_at_selected", np.nan),
                     "val_ndcg@10": m.get("val_ndcg@10_at_selected", np.nan),
                     "selected_round": m.get("selected_round") or np.nan,
                     # a point that diverged before its first evaluation has no metric at all
                     "test_hr@10": m["overall"].get("hr@10", np.nan),
                     "test_ndcg@10": m["overall"].get("ndcg@10", np.nan), "diverged_round": diverged.get("round"),
                     "n_users": (m.get("counts") or {}).get("n_users_evaluated", np.nan), "dir": str(d)})
    return pd.DataFrame(rows)


def pick_from_records(frame: pd.DataFrame, select: str = "val_hr@10") -> dict[str, dict[str, str]]:
    """``{dataset: {grid: gNN}}``: each grid's point with the best ``select`` (validation; the
    lower index wins a tie, so a tie keeps the earlier, reference point).  A point whose training
    diverged is never picked: the comparison runs its pick for every round on every seed."""
    picks: dict[str, dict[str, str]] = {}
    if "diverged_round" in frame:
        frame = frame[frame["diverged_round"].isna()]
    for (dataset, grid), g in frame.groupby(["dataset", "grid"], sort=True):
        values = g[select].to_numpy(dtype=float)
        if not np.isfinite(values).any():
            continue
        order = np.lexsort((g["point"].to_numpy(), -np.nan_to_num(values, nan=-np.inf)))
        picks.setdefault(str(dataset), {})[str(grid)] = str(g["point"].to_numpy()[order[0]])
    return picks


def _check_point(point: Mapping[str, Any], run_dir: Path, what: str = "its grid point",
                 remedy: str = "the grid changed after the run; rerun the grid point (delete the record) or "
                               "restore the grid") -> None:
    """Refuse a record whose settings are not ``point``'s: a grid edited after it ran renumbers its
    points, a pick changed after its tuned runs names other settings, and either record would be
    shown under settings it did not run."""
    from recrepro.io import read_json

    provenance = run_dir / "provenance.json"
    if not provenance.is_file():
        return  # a record without provenance (hand-made in tests) names nothing to compare
    ran = read_json(provenance).get("config", {}).get("settings", {})
    wrong = {k: (v, ran.get(k)) for k, v in point.items() if k in ran and ran[k] != v}
    if wrong:
        raise ValueError(f"{run_dir}: ran with {', '.join(f'{k}={b}' for k, (_, b) in wrong.items())}, but "
                         f"{what} now reads {', '.join(f'{k}={a}' for k, (a, _) in wrong.items())}: {remedy}")


def check_tuned_records(block: Mapping[str, Any], run_dirs: Sequence[str | Path]) -> None:
    """Refuse a tuned record (``<name>`` of ``block['tuned']``) that did not run at its dataset's
    current pick: the comparison names the config's pick in the row, so a pick changed after the
    tuned runs would otherwise label their numbers with settings they never used."""
    from recrepro.records import read_metrics

    tuned = block.get("tuned") or {}
    for run_dir in map(Path, run_dirs):
        m = read_metrics(run_dir)
        spec = tuned.get(str(m.get("method")))
        if spec is None:
            continue
        found = _pick_index(block, str(m.get("dataset")), spec["grid"])
        if found is None:
            raise ValueError(f"{run_dir}: a tuned record, but fedrap tuning.picks names no {spec['grid']!r} pick "
                             f"on {m.get('dataset')}: write the pick or delete the record")
        pick, index = found
        points = _block_grid(block, spec["grid"])
        if not 0 <= index < len(points):
            raise ValueError(f"fedrap: grid {spec['grid']!r} has points g00..g{len(points) - 1:02d}, not {pick}")
        _check_point(points[index], run_dir, what=f"the pick ({spec['grid']} {pick} on {m.get('dataset')})",
                     remedy="the pick changed after the run; rerun the tuned runs at the new pick (delete "
                            "their records) or restore the pick")


def tuning_table(block: Mapping[str, Any], run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """One row per grid run: its settings, validation and test metrics, whether it is the
    records' pick and the config's pick (``block``: the tier's tuning block)."""
    frame = grid_frame(run_dirs)
    if frame.empty:
        return frame
    select = block.get("select", "val_hr@10")
    best = pick_from_records(frame, select)
    written = block.get("picks") or {}
    points = [_block_grid(block, g)[int(p[1:])] for g, p in zip(frame["grid"], frame["point"])]
    for point, run_dir in zip(points, frame["dir"]):
        _check_point(point, Path(run_dir))
    frame["settings"] = [", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items())
                         for point in points]
    frame["records_pick"] = [best.get(d, {}).get(g) == p for d, g, p in zip(frame["dataset"], frame["grid"], frame["point"])]
    frame["config_pick"] = [written.get(d, {}).get(g) == p for d, g, p in zip(frame["dataset"], frame["grid"], frame["point"])]
    return frame.sort_values(["dataset", "grid", "point"], kind="stable").reset_index(drop=True)


def _pick_noise(grid: pd.DataFrame, pick: Mapping[str, Any], select: str) -> str:
    """How far the pick stands out of its grid's validation noise: the binomial standard error of its
    validation HR (a share of the users evaluated) and how many other points lie within one standard
    error of it (they are not told apart from the pick). Empty for a selection that is not an HR."""
    if not select.startswith("val_hr@") or "n_users" not in grid or select not in grid:
        return ""
    value, n = float(pick[select]), float(pick.get("n_users", np.nan))
    if not (np.isfinite(value) and np.isfinite(n) and n > 0):
        return ""
    se = float(np.sqrt(value * (1 - value) / n))
    others = grid[(grid["point"] != pick["point"]) & grid["diverged_round"].isna()] if "diverged_round" in grid \
        else grid[grid["point"] != pick["point"]]
    if others.empty:  # one point run: nothing to tell it apart from
        return ""
    close = int((others[select] >= value - se).sum())
    text = (f"Validation noise: the pick's {select.removeprefix('val_')} {value:.4f} has a binomial standard error "
            f"of {se:.4f} over {n:,.0f} users")
    if not close:
        return text + "; every other point lies more than one standard error below it."
    return (text + f"; {close} other point{'s lie' if close > 1 else ' lies'} within one standard error of it, "
            "so the grid does not tell them apart from the pick (the value is also the best of the run's rounds, "
            "which favours it).")


def tuning_markdown(table: pd.DataFrame, block: Mapping[str, Any], tier: str) -> str:
    select = block.get("select", "val_hr@10")
    lines = [f"# FedRAP: validation grids ({tier} tier)", "",
             f"Each method's grid (`fedrap.tiers.{tier}.tuning.grids` in `config.yaml`), run in its grid variant's mode under the",
             f"leak-free `train` negative pool on training seed {block.get('seed', 0)}; the pick is the point with the "
             f"best `{select}` (at the round validation selects; the lower index wins a tie).",
             f"**pick** marks it; a config pick (`fedrap.tiers.{tier}.tuning.picks`) that differs from the records' is flagged.",
             "Test metrics are shown for reference only: nothing is selected on them.", ""]
    if table.empty:
        return "\n".join(lines + ["No grid run is recorded yet.", ""])
    mismatches = []
    for (dataset, grid), g in table.groupby(["dataset", "grid"], sort=False):
        expected = len(grid_points(block.get("grids", {}).get(grid, {})))
        lines += [f"## {dataset} · `{grid}` ({len(g)} of {expected} points run)", "",
                  "| point | settings | val HR@10 | val NDCG@10 | sel. round | test HR@10 | test NDCG@10 | pick |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in g.to_dict("records"):
            mark = "**pick**" if r["records_pick"] else ""
            if r["config_pick"] and not r["records_pick"]:
                mark = "config pick (not the records' best)"
                mismatches.append(f"{dataset}/{grid}")
            elif r["config_pick"]:
                mark += " (config)"
            if pd.notna(r.get("diverged_round")):
                mark = f"diverged in round {r['diverged_round']:.0f} (never picked)"
            cells = [f"{r[c]:.4f}" if pd.notna(r[c]) else "—" for c in ("val_hr@10", "val_ndcg@10")]
            cells.append(f"{r['selected_round']:.0f}" if pd.notna(r["selected_round"]) else "—")
            cells += [f"{r[c]:.4f}" if pd.notna(r[c]) else "—" for c in ("test_hr@10", "test_ndcg@10")]
            lines.append(f"| {r['point']} | {r['settings']} | {' | '.join(cells)} | {mark} |")
        points = grid_points(block.get("grids", {}).get(grid, {}))
        picked = g[g["records_pick"]]
        if len(picked):
            edges = grid_edges(points, points[int(picked["point"].iloc[0][1:])])
            if edges:
                lines.append(f"\nThe pick sits on the grid's edge in {', '.join(edges)}: a better point may lie beyond it.")
            noise = _pick_noise(g, picked.iloc[0], select)
            if noise:
                lines.append(f"\n{noise}")
        if len(g) < expected:
            lines.append(f"\nThe pick is provisional: {expected - len(g)} point(s) not run yet.")
        lines.append("")
    if mismatches:
        lines += ["**Config picks that differ from the records' best:** " + ", ".join(mismatches), ""]
    return "\n".join(lines)
