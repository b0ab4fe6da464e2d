"""PRISM (Loveland et al., KDD 2025): the run records read back, Table 1 and its learning-rate search table.

Every function here reads run records only (no torch), so a redraw from records rewrites the tables
byte for byte. The figures drawn from the same runs are in :mod:`recrepro.papers.prism.figures`.

``select-wd`` (:func:`select_weight_decay`)
    Table 1's tuned λ per (backbone, loss), picked on validation (and, where ``table.lr_search`` names a
    backbone, its learning rate).
``table`` (:func:`table_prism`)
    Table 1: tuned coupled weight decay vs PRISM, test NDCG@20 and epochs to best.
``lr-search`` (:func:`lr_search_table`)
    Every (λ, lr) grid point Table 1's pick looked at, one row each.

Where ``table.lr_search`` names a backbone, Table 1 picks the tuned-weight-decay arm over λ × learning
rate and PRISM over the learning rates (:func:`select_weight_decay`). Table 1 shows only the picks; the
learning-rate search table shows each grid point on the seeds the selection reads
(``table.select_on``): its run, best validation NDCG@20 (the score the selection compares), epochs to
best, why it stopped, whether it diverged and its test NDCG@20, and marks each arm's pick (read from
the selection record, ``wd_selection_<dataset>.json``). A point without a record is a "not run" row,
so the table says how much of the grid ran.

The rules in ``workflow/rules/prism.smk`` call these through ``recrepro prism <verb>``
(:mod:`recrepro.papers.prism.cli`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.io import copy_file, write_json, write_text
from recrepro.papers.prism.methods import method_name, parse_method, table_arms
from recrepro.records import TIMINGS_FILE, read_history, read_record_json

__all__ = ["copy_as", "load_prism_runs", "lr_search_table", "read_point", "select_weight_decay", "table_prism"]


# ------------------------------------------------------------------------- reading runs


def load_prism_runs(run_dirs: Sequence[Path]) -> pd.DataFrame:
    """One row per run: identity, test NDCG@20 (overall and strata), validation and timing."""
    rows = []
    for run_dir in map(Path, run_dirs):
        metrics = read_record_json(run_dir / "metrics.json")
        history = read_history(run_dir) if (run_dir / "history.json").exists() else {}
        row = {"run_dir": str(run_dir), "dataset": metrics["dataset"], "method": metrics["method"],
               "seed": int(metrics["seed"]), "ndcg": metrics["overall"].get("ndcg@20"),
               "best_val_ndcg": history.get("best_val_ndcg", metrics.get("best_val_ndcg")),
               "epochs_to_best": history.get("best_epoch", metrics.get("epochs_to_best")),
               "seconds_per_epoch": history.get("seconds_per_epoch"),
               "diverged": bool(metrics.get("diverged") or history.get("diverged"))}
        for stratum, values in (metrics.get("strata") or {}).items():
            row[f"ndcg_{stratum}"] = values.get("ndcg@20")
        try:
            row.update(parse_method(metrics["method"]))
        except ValueError:
            pass
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------- table


def _num(value: float, spec: str, unit: str = "") -> str:
    """``value`` formatted by ``spec``, or "–" when it is missing (a cell whose runs are not there)."""
    return f"{value:{spec}}{unit}" if value is not None and np.isfinite(value) else "–"


def _fmt(mean: float, sd: float) -> str:
    if not np.isfinite(mean):
        return "–"
    return f"{mean:.4f} ± {sd:.4f}" if np.isfinite(sd) else f"{mean:.4f}"


def _arms(backbone: str, loss: str, weight_decays: Sequence[float], alpha: float,
          lr_search: Mapping[str, Sequence[float]] | None) -> tuple[dict[str, tuple[float, float | None]],
                                                                  dict[str, float | None]]:
    """:func:`~recrepro.papers.prism.methods.table_arms` with the backbone's searched learning rates."""
    return table_arms(backbone, loss, weight_decays, alpha, (lr_search or {}).get(backbone, []))


def _best(names: Sequence[str], val: Mapping[str, float]) -> str:
    """The name with the highest validation score; ties go to the first in grid order."""
    return max(names, key=lambda m: (val.get(m, -np.inf), -list(names).index(m)))


def select_weight_decay(run_dirs: Sequence[Path], *, backbones: Sequence[str], losses: Sequence[str],
                        weight_decays: Sequence[float], alpha: float = 1.0,
                        lr_search: Mapping[str, Sequence[float]] | None = None) -> dict[str, Any]:
    """Pick Table 1's tuned λ per (backbone, loss): highest mean *validation* NDCG@20 over the given runs.

    With ``lr_search`` (``{backbone: [learning rates besides the tier's]}``, the paper's grid over
    {0.1, 0.01, 0.001}) the weight-decay arm is picked over λ × learning rate and PRISM's arm over
    the learning rates: its pick is ``chosen["<backbone>_<loss>_prism"]``.

    Returns ``{"seeds": [...], "chosen": {"<backbone>_<loss>": method, ...}, "validation": {method: mean},
    "candidates": {"<backbone>_<loss>": n, ...}}`` (``candidates``: how many of the arm's grid points
    ran); a (backbone, loss) with no run is left out.
    """
    runs = load_prism_runs(run_dirs)
    chosen, validation, candidates = {}, {}, {}
    for backbone in backbones:
        for loss in losses:
            wd_arm, prism_arm = _arms(backbone, loss, weight_decays, alpha, lr_search)
            arms = [(f"{backbone}_{loss}", list(wd_arm))]
            if len(prism_arm) > 1:  # PRISM has something to pick only where the learning rate is searched
                arms.append((f"{backbone}_{loss}_prism", list(prism_arm)))
            for key, names in arms:
                sub = runs[runs["method"].isin(names)] if len(runs) else runs
                if sub.empty:
                    continue
                candidates[key] = int(sub["method"].nunique())  # a diverged point ran: it counts as searched
                # a point that diverged on any seed is never picked
                diverged = set(sub.loc[sub["diverged"], "method"])
                ok = sub[~sub["method"].isin(diverged)]
                if ok.empty:
                    continue
                val = ok.groupby("method")["best_val_ndcg"].mean()
                # ties (equal validation) go to the first point of the grid, as the paper's lists order them
                chosen[key] = _best(names, val)
                validation.update({m: float(v) for m, v in val.items()})
    seeds = sorted({int(s) for s in runs["seed"]}) if len(runs) else []
    return {"seeds": seeds, "chosen": chosen, "validation": dict(sorted(validation.items())),
            "candidates": candidates}


def table_prism(run_dirs: Sequence[Path], out_md: Path, out_csv: Path, tuned_root: Path | None, *, tier: str,
                dataset: str, backbones: Sequence[str], losses: Sequence[str], weight_decays: Sequence[float],
                alpha: float = 1.0, selection: Mapping[str, Any] | None = None,
                diagnostic_backbones: Sequence[str] = (),
                lr_search: Mapping[str, Sequence[float]] | None = None, tier_lr: float | None = None) -> pd.DataFrame:
    """Table 1: tuned coupled weight decay vs PRISM (α, no weight decay), test NDCG@20 and epochs to best.

    The tuned λ is the one with the highest mean *validation* NDCG@20 over seeds (never the
    test score); with ``selection`` (:func:`select_weight_decay`, e.g. on the first seed only),
    its pick is used and the tuned column averages the chosen λ's runs over every seed.
    When ``tuned_root`` is given, the chosen runs are copied to
    ``<tuned_root>/<backbone>_<loss>_tunedwd/seed<k>/`` with the method renamed, so the
    scorecard can compare them with the published "Tuned Weight Decay" cells.

    ``diagnostic_backbones`` (e.g. ``nlmflinear``, the official code's non-linear MF): backbones
    run in the PRISM column only, listed under the table with the table backbone they stand in
    for; not part of the paper's table, so they stay out of the CSV and the tuned aliases.

    ``lr_search`` (as :func:`select_weight_decay`'s): on those backbones the tuned arm is picked over
    λ × learning rate and PRISM over the learning rates; the PRISM pick's runs are copied to
    ``<tuned_root>/<backbone>_<loss>_tunedprism/`` (with the share of its learning rates that ran),
    and the table names each arm's learning rate (``tier_lr``: the value a run without a learning rate
    in its name trained at).
    """
    runs = load_prism_runs(run_dirs)
    if tuned_root is not None:  # the workflow's output folder, even before any grid has run
        # the table owns the folder: an alias left from an earlier pick (a seed the new pick has not run
        # on) would otherwise stand beside the new pick's and be averaged with it
        if Path(tuned_root).exists():
            shutil.rmtree(tuned_root)
        Path(tuned_root).mkdir(parents=True)
    rows = []
    searched = bool(lr_search) and any(len(v) for v in lr_search.values())
    for backbone in backbones:
        for loss in losses:
            row = _table_row(runs, backbone, loss, weight_decays, alpha, selection, lr_search, searched, tuned_root)
            if row is not None:
                rows.append(row)
    frame = pd.DataFrame(rows)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    write_text(out_csv, frame.to_csv(index=False))
    lines = _table_header(tier, dataset, weight_decays, alpha, selection, lr_search, searched)
    for r in rows:
        lines.append(_table_line(r, weight_decays, tier_lr))
    if any(not np.isfinite(r["tuned_ndcg_mean"]) for r in rows):
        lines += ["", "–: the weight-decay grid of that row has not run yet."]
    lines += _diagnostic_lines(runs, diagnostic_backbones, losses, alpha)
    write_text(out_md, "\n".join(lines) + "\n")
    return frame


def _table_row(runs: pd.DataFrame, backbone: str, loss: str, weight_decays: Sequence[float], alpha: float,
               selection: Mapping[str, Any] | None, lr_search: Mapping[str, Sequence[float]] | None, searched: bool,
               tuned_root: Path | None) -> dict[str, Any] | None:
    """:func:`table_prism`'s row of ``(backbone, loss)`` (``None``: none of its runs has a record), its tuned
    picks' runs copied under ``tuned_root`` (when given)."""
    candidates, prism_arm = _arms(backbone, loss, weight_decays, alpha, lr_search)
    sub = runs[runs["method"].isin(list(candidates))]
    prism_pick = (selection.get("chosen") or {}).get(f"{backbone}_{loss}_prism") if selection is not None \
        and len(prism_arm) > 1 else None
    prism = runs[runs["method"] == (prism_pick or method_name(backbone, loss, alpha=alpha))]
    if sub.empty and prism.empty:
        return None
    # a PRISM run whose weight-decay grid has not run yet keeps its row, tuned side empty
    chosen = None
    if selection is not None:
        chosen = (selection.get("chosen") or {}).get(f"{backbone}_{loss}")
    elif not sub.empty:
        chosen = str(sub.groupby("method")["best_val_ndcg"].mean().idxmax())
    if chosen is None and prism.empty:
        return None
    tuned = sub[sub["method"] == chosen]
    # how many λ of the grid the pick saw: a pick from part of the grid is a capped cell
    n_grid = (selection.get("candidates") or {}).get(f"{backbone}_{loss}", 0) if selection is not None \
        else int(sub["method"].nunique())
    points = "weight decays" if len(prism_arm) == 1 else "(weight decay, learning rate) points"
    grid_cap = f"tuned over {n_grid} of {len(candidates)} {points}" \
        if chosen is not None and n_grid < len(candidates) else ""
    n_prism = (selection.get("candidates") or {}).get(f"{backbone}_{loss}_prism", 0) if prism_pick else 0
    prism_cap = f"tuned over {n_prism} of {len(prism_arm)} learning rates" \
        if prism_pick and n_prism < len(prism_arm) else ""
    t_mean, t_sd = tuned["ndcg"].mean(), tuned["ndcg"].std(ddof=1)
    p_mean, p_sd = prism["ndcg"].mean(), prism["ndcg"].std(ddof=1)
    row = {
        "backbone": backbone, "loss": loss, "tuned_weight_decay": candidates.get(chosen, (np.nan, None))[0],
        **({"tuned_lr": candidates.get(chosen, (np.nan, None))[1], "prism_lr": prism_arm.get(prism_pick)}
           if searched else {}),
        "tuned_ndcg_mean": t_mean, "tuned_ndcg_sd": t_sd,
        "prism_ndcg_mean": p_mean, "prism_ndcg_sd": p_sd,
        # the paper's % Diff is relative to PRISM: ML-1M MF + SSM, (0.3002 - 0.3061) / 0.3002 = -1.97 % as
        # printed (relative to the tuned cell it would be -1.93 %); claim P3 divides the same way
        "pct_diff": 100.0 * (p_mean - t_mean) / p_mean if p_mean and np.isfinite(p_mean) else np.nan,
        "tuned_epochs_to_best": tuned["epochs_to_best"].mean(),
        "prism_epochs_to_best": prism["epochs_to_best"].mean(),
        "tuned_seconds_per_epoch": tuned["seconds_per_epoch"].mean(),
        "prism_seconds_per_epoch": prism["seconds_per_epoch"].mean(),
        "n_seeds_tuned": len(tuned), "n_seeds_prism": len(prism),
        "n_weight_decays_run": n_grid if chosen is not None else 0,
        **({"n_grid_points": len(candidates), "n_prism_lrs_run": n_prism, "n_prism_lrs": len(prism_arm)}
           if searched else {}),
    }
    if tuned_root is not None:
        for _, run in tuned.iterrows():
            copy_as(Path(run["run_dir"]), Path(tuned_root) / f"{backbone}_{loss}_tunedwd" / f"seed{run['seed']}",
                     f"{backbone}_{loss}_tunedwd", chosen, budget=grid_cap)
        if prism_pick:
            for _, run in prism.iterrows():
                copy_as(Path(run["run_dir"]),
                         Path(tuned_root) / f"{backbone}_{loss}_tunedprism" / f"seed{run['seed']}",
                         f"{backbone}_{loss}_tunedprism", prism_pick, budget=prism_cap)
    return row


def _table_header(tier: str, dataset: str, weight_decays: Sequence[float], alpha: float,
                  selection: Mapping[str, Any] | None, lr_search: Mapping[str, Sequence[float]] | None,
                  searched: bool) -> list[str]:
    """:func:`table_prism`'s Markdown down to the table's header rows: the title and what the cells mean."""
    if selection is None:
        chosen_on = "every seed"
    elif selection.get("seeds"):
        chosen_on = "seed " + ", ".join(str(s) for s in selection["seeds"])
    else:
        chosen_on = "the selection seeds (no grid run yet)"
    search_text = ""
    if searched:
        search_text = (" On " + ", ".join(f"{b} (learning rates {', '.join(f'{x:g}' for x in lrs)} besides the "
                                          "tier's)" for b, lrs in lr_search.items() if lrs) +
                       " each arm also picks its learning rate on validation (the paper's grid): "
                       "the tuned λ over λ × learning rate, PRISM over the learning rates; `lr` names the pick.")
    return [f"# PRISM vs tuned weight decay ({tier} tier, {dataset})", "",
            f"Test NDCG@20, mean ± sd over seeds; tuned λ chosen by mean validation NDCG@20 on {chosen_on} from "
            f"{list(weight_decays)}, then run on every seed; PRISM α = {alpha}, no weight decay. "
            f"% diff = (PRISM − tuned wd) / PRISM, as the paper's % Diff. "
            f"Epochs = epochs to the best validation epoch.{search_text}",
            *(["", f"Every (λ, lr) point of the learning-rate search, its record or \"not run\": "
                   f"[lr_search_{dataset}.md](lr_search_{dataset}.md)."] if searched else []),
            "", "| backbone | loss | tuned λ | tuned wd | PRISM | % diff | epochs (wd) | epochs (PRISM) |",
            "|---|---|---|---|---|---|---|---|"]


def _table_line(r: Mapping[str, Any], weight_decays: Sequence[float], tier_lr: float | None) -> str:
    """One row of :func:`table_prism`'s Markdown table from its row ``r`` (:func:`_table_row`)."""
    total = r.get("n_grid_points", len(weight_decays))
    grid = "" if r["n_weight_decays_run"] in (0, total) else \
        (f" ({r['n_weight_decays_run']} of {total} λ run)" if total == len(weight_decays)
         else f" ({r['n_weight_decays_run']} of {total} (λ, lr) run)")
    row_searched = r.get("n_prism_lrs", 1) > 1     # this backbone's learning rate is searched
    tuned_lr = f", lr {_lr_text(r['tuned_lr'], tier_lr)}" if row_searched and r["n_weight_decays_run"] else ""
    prism_lr = ""
    if row_searched and r["n_prism_lrs_run"]:
        share = f"; {r['n_prism_lrs_run']} of {r['n_prism_lrs']} lr run" \
            if r["n_prism_lrs_run"] < r["n_prism_lrs"] else ""
        prism_lr = f" (lr {_lr_text(r['prism_lr'], tier_lr)}{share})"
    return (f"| {r['backbone']} | {r['loss']} | {_num(r['tuned_weight_decay'], 'g')}{tuned_lr}{grid} | "
            f"{_fmt(r['tuned_ndcg_mean'], r['tuned_ndcg_sd'])} | "
            f"{_fmt(r['prism_ndcg_mean'], r['prism_ndcg_sd'])}{prism_lr} | "
            f"{_num(r['pct_diff'], '+.2f', '%')} | {_num(r['tuned_epochs_to_best'], '.1f')} | "
            f"{_num(r['prism_epochs_to_best'], '.1f')} |")

def _lr_text(lr: float | None, tier_lr: float | None = None) -> str:
    """A pick's learning rate: ``None`` is the tier's (``tier_lr`` where known)."""
    if lr is None:
        return "the tier's" if tier_lr is None else f"{tier_lr:g}"
    return f"{lr:g}"


#: What each diagnostic backbone of Table 1 stands in for, and why it is run.
DIAGNOSTIC_BACKBONES = {
    "nlmflinear": ("nlmf", "non-linear MF as the official code builds it: the towers' ReLU output is discarded, "
                           "so each tower is one affine map (docs/deviations.md#prism-nlmf-relu)"),
}


def _diagnostic_lines(runs: pd.DataFrame, backbones: Sequence[str], losses: Sequence[str], alpha: float) -> list[str]:
    """Markdown rows comparing each diagnostic backbone's PRISM runs with its table backbone's."""
    rows = []
    for backbone in backbones:
        stands_for = DIAGNOSTIC_BACKBONES[backbone][0]
        for loss in losses:
            diag = runs[runs["method"] == method_name(backbone, loss, alpha=alpha)] if len(runs) else runs
            if diag.empty:
                continue
            table = runs[runs["method"] == method_name(stands_for, loss, alpha=alpha)]
            seeds = sorted(set(diag["seed"]) & set(table["seed"]))
            paired = table[table["seed"].isin(seeds)]
            rows.append(f"| {backbone} | {loss} | {_fmt(diag['ndcg'].mean(), diag['ndcg'].std(ddof=1))} | "
                        f"{_fmt(paired['ndcg'].mean(), paired['ndcg'].std(ddof=1))} | "
                        f"{', '.join(str(s) for s in sorted(diag['seed']))} | {_num(diag['epochs_to_best'].mean(), '.1f')} | "
                        f"{_num(paired['epochs_to_best'].mean(), '.1f')} |")
    if not rows:
        return []
    notes = "; ".join(f"`{b}`: {DIAGNOSTIC_BACKBONES[b][1]}" for b in backbones)
    return ["", "## Diagnostic runs (not in the paper's table)", "",
            f"PRISM column only, test NDCG@20; the table backbone's column averages the same seeds. {notes}.",
            "", "| backbone | loss | PRISM | PRISM, table backbone | seeds | epochs | epochs (table backbone) |",
            "|---|---|---|---|---|---|---|", *rows]


def copy_as(src: Path, dst: Path, method: str, selected: str, *, budget: str = "") -> None:
    """Copy a run record under a new method name (the tuned-weight-decay alias).

    ``budget``: the alias's cap in words when the pick saw only part of the grid; the
    scorecard shows it in the row (:func:`recrepro.scorecard.runs.run_budget`).
    """
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("per_user.parquet", "provenance.json", "history.json", TIMINGS_FILE):
        if (src / name).exists():
            copy_file(src / name, dst / name)
    metrics = json.loads((src / "metrics.json").read_text())
    metrics["method"] = method
    metrics["selected_method"] = selected
    if budget:
        metrics["budget"] = "; ".join(b for b in (metrics.get("budget"), budget) if b)
    write_json(dst / "metrics.json", metrics)


# ------------------------------------------------------------- the learning-rate search table


ARMS = ("tuned weight decay", "PRISM")
COLUMNS = ["backbone", "loss", "arm", "weight_decay", "lr", "run", "seed", "status", "val_ndcg", "epochs_to_best",
           "epochs_run", "stopping_reason", "diverged", "test_ndcg", "picked"]


def read_point(run_dir: Path) -> dict[str, Any]:
    """One grid point's record: validation and test NDCG@20, epochs, stopping reason, divergence.

    The validation score is the one the selection compares (``load_prism_runs``: ``history.json``'s
    ``best_val_ndcg``, else ``metrics.json``'s), likewise the epochs to best (``best_epoch``, else
    ``epochs_to_best``). The trainer writes no stopping reason: it stops after ``patience`` epochs
    without a better validation score or at the epoch limit, both in the history's ``settings``, so
    the reason follows from the epochs run. A run whose loss or embeddings turned non-finite is recorded
    with a ``diverged`` field (``{"epoch": N, "error": ...}``, in the history and the metrics) and the
    scores of its best epoch before; records made before the trainer recorded divergence carry none
    (such a run stopped with an error and left no record).
    """
    run_dir = Path(run_dir)
    metrics = read_record_json(run_dir / "metrics.json")
    history = read_history(run_dir) if (run_dir / "history.json").exists() else {}
    counts = metrics.get("counts") or {}
    best = history.get("best_epoch", metrics.get("epochs_to_best", counts.get("epochs_to_best")))
    run = history.get("epochs_run", counts.get("epochs_run"))
    diverged = metrics.get("diverged") or history.get("diverged")
    return {"method": metrics["method"], "seed": int(metrics["seed"]),
            "val_ndcg": history.get("best_val_ndcg", metrics.get("best_val_ndcg")),
            "test_ndcg": (metrics.get("overall") or {}).get("ndcg@20"),
            "epochs_to_best": None if best is None else int(best), "epochs_run": None if run is None else int(run),
            "stopping_reason": "diverged" if diverged else _stopping_reason(best, run, history.get("settings") or {}),
            "diverged": _diverged_text(diverged)}


def _stopping_reason(best: int | None, run: int | None, settings: Mapping[str, Any]) -> str:
    patience, limit = settings.get("patience"), settings.get("epochs")
    if best is None or run is None or patience is None or limit is None:
        return "not recorded"
    if run - best >= int(patience):
        return f"early stop ({int(patience)} epochs without gain)"
    if run >= int(limit):
        return f"epoch limit ({int(limit)})"
    return "not recorded"


def _diverged_text(diverged: Any) -> str:
    if not diverged:
        return "not recorded"
    epoch = diverged.get("epoch") if isinstance(diverged, Mapping) else None
    return "diverged" if epoch is None else f"diverged at epoch {int(epoch)}"


def _grid(backbones: Sequence[str], losses: Sequence[str], weight_decays: Sequence[float], alpha: float,
          lr_search: Mapping[str, Sequence[float]], tier_lr: float | None) -> list[dict[str, Any]]:
    """Every (backbone, loss, arm, λ, lr) point of the searched backbones, with its run name and sort key."""
    points = []
    for b_index, backbone in enumerate(b for b in backbones if (lr_search or {}).get(b)):
        for l_index, loss in enumerate(losses):
            wd_arm, prism_arm = table_arms(backbone, loss, weight_decays, alpha, lr_search[backbone])
            named = [(0, m, wd, lr) for m, (wd, lr) in wd_arm.items()]
            named += [(1, m, None, lr) for m, lr in prism_arm.items()]
            for arm, method, wd, lr in named:
                lr_value = tier_lr if lr is None else lr
                # the tier's lr sorts first when its value is not given
                key = (b_index, l_index, arm, -1.0 if lr_value is None else lr_value, wd or 0.0)
                points.append({"backbone": backbone, "loss": loss, "arm": ARMS[arm], "weight_decay": wd,
                               "lr": lr_value, "run": method, "key": key,
                               "pick_key": f"{backbone}_{loss}" + ("_prism" if arm else "")})
    return sorted(points, key=lambda p: p["key"])


def _rows(points: list[dict[str, Any]], records: Mapping[tuple[str, int], dict[str, Any]], seeds: Sequence[int],
          chosen: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for point in points:
        for seed in seeds:
            record = records.get((point["run"], int(seed)))
            row = {c: point.get(c) for c in ("backbone", "loss", "arm", "weight_decay", "lr", "run")}
            row.update(seed=int(seed), status="run" if record else "not run",
                       picked=chosen.get(point["pick_key"]) == point["run"])
            row.update({k: (record or {}).get(k) for k in ("val_ndcg", "epochs_to_best", "epochs_run",
                                                           "stopping_reason", "diverged", "test_ndcg")})
            rows.append(row)
    return rows


def _g(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _f(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _csv_text(rows: list[dict[str, Any]]) -> str:
    """The rows with every number written in a fixed format (a rewrite is byte-identical)."""
    fmt = {"weight_decay": _g, "lr": _g, "val_ndcg": lambda v: "" if v is None else f"{v:.6f}",
           "test_ndcg": lambda v: "" if v is None else f"{v:.6f}",
           "epochs_to_best": lambda v: "" if v is None else str(v), "epochs_run": lambda v: "" if v is None else str(v),
           "picked": lambda v: "true" if v else "false"}
    frame = pd.DataFrame([{c: fmt.get(c, lambda v: "" if v is None else str(v))(r[c]) for c in COLUMNS}
                          for r in rows], columns=COLUMNS)
    return frame.to_csv(index=False, lineterminator="\n")


def _count_lines(points: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[str]:
    """Per (backbone, loss, arm): how many of its points have a record (on any selection seed)."""
    ran = {r["run"] for r in rows if r["status"] == "run"}
    groups: dict[tuple[str, str, str], list[str]] = {}
    for p in points:
        groups.setdefault((p["backbone"], p["loss"], p["arm"]), []).append(p["run"])
    lines = ["| backbone | loss | arm | points run |", "|---|---|---|---|"]
    for (backbone, loss, arm), runs in groups.items():
        unit = "(λ, lr) points" if arm == ARMS[0] else "learning rates"
        lines.append(f"| {backbone} | {loss} | {arm} | {sum(r in ran for r in runs)} of {len(runs)} {unit} |")
    return lines


def _markdown(points: list[dict[str, Any]], rows: list[dict[str, Any]], *, tier: str, dataset: str,
              weight_decays: Sequence[float], alpha: float, lr_search: Mapping[str, Sequence[float]],
              tier_lr: float | None, seeds: Sequence[int]) -> str:
    searched = [b for b in lr_search if lr_search[b]]
    lrs = ", ".join(f"{lr:g}" for lr in sorted({float(p["lr"]) for p in points if p["lr"] is not None}))
    tier_text = f" (the tier's lr {tier_lr:g} among them)" if tier_lr is not None else " and the tier's lr"
    n_run = len({p["run"] for p in points} & {r["run"] for r in rows if r["status"] == "run"})
    seed_text = ", ".join(str(s) for s in seeds)
    lines = [f"# PRISM learning-rate search ({tier} tier, {dataset})", "",
             f"Table 1's pick over the learning rate on {', '.join(searched) or 'no backbone'}: the "
             f"tuned-weight-decay arm over λ ∈ {[float(w) for w in weight_decays]} × lr ∈ {{{lrs}}}{tier_text}, "
             f"PRISM (α = {alpha}, no weight decay) over lr. Each point on seed {seed_text} (the seeds the "
             "selection reads, `select_on`); "
             "validation NDCG@20 is the run's best validation score (`best_val_ndcg` of history.json), the score "
             "each arm's pick maximises; **picked** marks the pick of the selection record "
             f"(`wd_selection_{dataset}.json`); test NDCG@20 is never used to pick. Best epoch: epochs to the best "
             "validation epoch (`epochs_to_best`). Stopping reason: the trainer records none, so it is read off the "
             "epochs run, the best epoch and the run's patience and epoch limit. Diverged: a run whose loss or embeddings "
             "turn non-finite stops there and its record says so (`diverged`: the epoch and why); such a point "
             "counts as searched and is never picked. \"not recorded\": the record carries no `diverged` field (it "
             "did not diverge, or it predates that field).", "",
             f"{n_run} of {len(points)} grid points run.", "", *_count_lines(points, rows), "",
             "| backbone | loss | arm | λ | lr | run | seed | val NDCG@20 | best epoch | stopping reason | diverged "
             "| test NDCG@20 | pick |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        wd = "–" if r["weight_decay"] is None else _g(r["weight_decay"])
        lr = "the tier's" if r["lr"] is None else _g(r["lr"])
        if r["status"] == "not run":
            cells = ["not run", "", "", "", "", ""]
        else:
            cells = [_f(r["val_ndcg"]) or "–", "–" if r["epochs_to_best"] is None else str(r["epochs_to_best"]),
                     r["stopping_reason"], r["diverged"], _f(r["test_ndcg"]) or "–"]
            cells.append("**picked**" if r["picked"] else "")
        if r["status"] == "not run" and r["picked"]:
            cells[-1] = "**picked** (no record)"
        lines.append(f"| {r['backbone']} | {r['loss']} | {r['arm']} | {wd} | {lr} | `{r['run']}` | {r['seed']} | "
                     + " | ".join(cells) + " |")
    if not points:
        lines += ["", "No backbone of this tier searches the learning rate (`table.lr_search`)."]
    return "\n".join(lines) + "\n"


def lr_search_table(run_dirs: Sequence[Path], out_md: Path, out_csv: Path, *, tier: str, dataset: str,
                    backbones: Sequence[str], losses: Sequence[str], weight_decays: Sequence[float],
                    lr_search: Mapping[str, Sequence[float]], seeds: Sequence[int], alpha: float = 1.0,
                    selection: Mapping[str, Any] | None = None, tier_lr: float | None = None) -> pd.DataFrame:
    """Write the learning-rate search table (Markdown and CSV) and return its rows.

    ``run_dirs``: the grid's run records (others are ignored; a point without one is "not run");
    ``lr_search``: ``{backbone: [learning rates besides the tier's]}`` as for Table 1 (only those
    backbones are listed); ``seeds``: the seeds the selection reads; ``selection``: the selection
    record (:func:`select_weight_decay`), whose ``chosen`` marks
    each arm's pick; ``tier_lr``: the learning rate of the runs without one in their name.
    Rows sort by backbone and loss (in the given order), arm, lr, λ and seed.
    """
    points = _grid(backbones, losses, weight_decays, alpha, lr_search, tier_lr)
    wanted = {p["run"] for p in points}
    records: dict[tuple[str, int], dict[str, Any]] = {}
    for run_dir in sorted(map(Path, run_dirs)):
        if not (run_dir / "metrics.json").exists():
            continue
        record = read_point(run_dir)
        if record["method"] in wanted:
            records.setdefault((record["method"], record["seed"]), record)
    rows = _rows(points, records, sorted(int(s) for s in seeds), (selection or {}).get("chosen") or {})
    Path(out_md).parent.mkdir(parents=True, exist_ok=True)
    write_text(out_csv, _csv_text(rows))
    write_text(out_md, _markdown(points, rows, tier=tier, dataset=dataset, weight_decays=weight_decays, alpha=alpha,
                                 lr_search=lr_search, tier_lr=tier_lr, seeds=sorted(int(s) for s in seeds)))
    return pd.DataFrame(rows, columns=COLUMNS)
