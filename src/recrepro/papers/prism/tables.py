"""PRISM experiment drivers: one training run, reading runs back, Table 1 (Loveland et al., KDD 2025).

The figures drawn from these runs are in :mod:`recrepro.papers.prism.figures`.

The rules in ``workflow/rules/prism*.smk`` call these through ``recrepro prism <verb>``
(:mod:`recrepro.papers.prism.cli`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from recrepro.io import copy_file, write_json, write_parquet, write_text
from recrepro.papers.prism.methods import method_name, parse_method, table_arms
from recrepro.records import TIMINGS_FILE, read_history, read_record_json, write_history

if TYPE_CHECKING:
    from recrepro.evaluation.on_split import SplitData

# Training and evaluation import torch inside the functions that need it: the figure, table and
# selection jobs of a redraw from records only read records, and torch's import is most of their time.

__all__ = ["evaluate_prism", "load_prism_runs", "run_method", "select_weight_decay", "table_prism"]

SSM_NEGATIVES = {"paper": 10, "code": 20}


def settings_for(method: str, tier_conf: Mapping[str, Any], switches: Mapping[str, Any], seed: int,
                 device: str, dataset: str | None = None) -> tuple[str, dict[str, Any]]:
    """Trainer settings of ``method`` under a tier's config block and the paper's switches.

    The debiasing baselines read the tier's ``debias`` block; IPL's exponent β may be
    given per dataset (``ipl_exponent: {default: 1.5, gowalla: 1.285, ...}``).
    """
    spec = parse_method(method)
    loss = spec["loss"]
    debias = dict(tier_conf.get("debias", {}))
    exponent = debias.get("ipl_exponent", 1.5)
    if isinstance(exponent, Mapping):
        exponent = exponent.get(dataset, exponent.get("default", 1.5))
    settings = {
        "loss": loss,
        "alpha": spec["alpha"],
        "weight_decay": spec["weight_decay"],
        "wd_mode": spec["wd_mode"],
        "dim": int(tier_conf["dim"]),
        "lr": float(tier_conf["lr"] if spec["lr"] is None else spec["lr"]),
        "epochs": int(tier_conf["epochs"]),
        "patience": int(tier_conf["patience"]),
        "batch_size": int(tier_conf["batch_size"].get(loss, tier_conf["batch_size"].get("bpr", 16384))),
        "n_negatives": SSM_NEGATIVES[switches["ssm_negatives"]] if loss == "ssm" else 1,
        "negatives": switches["negatives"],
        "tau": float(tier_conf.get("tau", 0.2)),
        "gamma": float(tier_conf.get("gamma", 1.0)),
        "gamma_user": float(tier_conf.get("gamma_user", 1.0)),
        "gamma_item": float(tier_conf.get("gamma_item", 1.0)),
        "nlmf_relu": bool(switches["nlmf_relu"]),
        "layers": int(tier_conf.get("layers", 3)),
        "record_cosine": _records_cosine(spec, tier_conf.get("record_cosine", "fig6")),
        "ipl_weight": float(debias.get("ipl_weight", 0.1)),
        "ipl_exponent": float(exponent),
        "resn_weight": float(debias.get("resn_weight", 1e-3)),
        "macr_alpha": float(debias.get("macr_alpha", 1e-3)),
        "macr_beta": float(debias.get("macr_beta", 1e-3)),
        "macr_c": float(debias.get("macr_c", 1.0)),
        "seed": int(seed),
        "device": device,
    }
    return spec["backbone"], settings


def _records_cosine(spec: Mapping[str, Any], mode: Any) -> bool:
    """Whether a run records cosine-score validation NDCG@20 per epoch (one extra ranking per epoch).

    ``fig6`` (default): only the runs Fig. 6 reads (MF + DirectAU, Xavier init, coupled or no
    weight decay); ``True`` / ``False``: every run / none.
    """
    if mode == "fig6":
        return spec["backbone"] == "mf" and spec["loss"] == "directau" and spec["alpha"] is None \
            and spec["wd_mode"] in ("coupled", "none")
    return bool(mode)


def evaluate_prism(model: Any, split: SplitData, evaluation: Mapping[str, Any], strata_degrees: str,
                   *, device: str = "cpu", batch_size: int = 2048):
    """Test evaluation: full ranking, ``exclude`` masked, strata from ``train`` or ``all`` degrees."""
    fit = split.csr(evaluation["fit"])
    if strata_degrees == "all":
        parts = [p for p in ("train", "validation", "test") if f"{p}.parquet" in split.manifest["files"]]
        degree_matrix = split.csr(parts)
    else:
        degree_matrix = fit
    item_degree = np.asarray(degree_matrix.sum(axis=0)).ravel()
    target = split.part(evaluation["target"])
    from recrepro.evaluation import evaluate_full_ranking

    return evaluate_full_ranking(model, split.csr(evaluation.get("exclude", [])), split.csr([evaluation["target"]]),
                                 list(evaluation["ks"]), users=np.unique(target["user"].to_numpy()),
                                 batch_size=batch_size, device=device, item_degree=item_degree)


def run_method(*, split_dir: Path, method: str, seed: int, out_dir: Path, tier_conf: Mapping[str, Any],
               switches: Mapping[str, Any], evaluation: Mapping[str, Any], meta: Mapping[str, Any],
               device: str = "cpu", batch_size: int = 2048, benchmark_file: str | None = None,
               checkpoint: str | Path | None = None) -> dict[str, Path]:
    """Train ``method`` on the split, early-stop on validation, evaluate on test, write the record.

    Besides the run record, writes ``history.json`` (per-epoch validation NDCG@20 and
    seconds, epochs to best) and ``magnitudes.parquet`` (item, train degree, ‖e_i‖ of the
    raw ID embedding after training, and right after init) for Fig. 2.

    ``checkpoint``: a file the trainer saves its state to after every epoch and resumes
    from when restarted (:mod:`recrepro.runtime.checkpoints`); deleted once the record is written.
    A resumed run writes the same record as an uninterrupted one, except wall-clock fields
    (``seconds_per_epoch``, ``epoch_seconds``, provenance times, which sum its pieces).
    """
    from recrepro.runtime.checkpoints import earlier_usage, remove_checkpoint
    from recrepro.papers.prism.recommender import EmbeddingRecommender
    from recrepro.evaluation.on_split import SplitData, write_split_record

    started = time.time()
    split = SplitData(split_dir)
    backbone, settings = settings_for(method, tier_conf, switches, seed, device, dataset=meta.get("dataset"))
    train = split.csr(evaluation["fit"])
    validation = split.csr(["validation"])
    model = EmbeddingRecommender(backbone, **settings).fit(train, validation, checkpoint=checkpoint)
    result = evaluate_prism(model, split, evaluation, switches["strata_degrees"], device=device, batch_size=batch_size)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    history = dict(model.history)
    write_history(out_dir, history)
    item_degree = np.bincount(train.indices, minlength=split.n_items)
    write_parquet(out_dir / "magnitudes.parquet", pd.DataFrame({
        "item": np.arange(split.n_items, dtype=np.int64),
        "train_degree": item_degree.astype(np.int64),
        "norm": model.item_magnitudes().astype(np.float64),
    }))
    paths = write_split_record(
        out_dir, split, result,
        counts={**result.counts, "epochs_to_best": int(history["best_epoch"]), "epochs_run": int(history["epochs_run"])},
        meta={**meta, "method": method, "backbone": backbone,
              "best_val_ndcg": history["best_val_ndcg"], "seconds_per_epoch": history["seconds_per_epoch"],
              "epochs_to_best": int(history["best_epoch"]),
              **({"diverged": history["diverged"]} if history.get("diverged") else {})},
        config_slice={"method": method, "settings": settings, "switches": dict(switches),
                      "evaluation": dict(evaluation)},
        seed=seed, device=device, started_at=started, benchmark_file=benchmark_file,
        earlier=earlier_usage(checkpoint))
    remove_checkpoint(checkpoint)  # the record is complete: a rerun must not resume a finished run
    return paths


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
        Path(tuned_root).mkdir(parents=True, exist_ok=True)
    rows = []
    searched = bool(lr_search) and any(len(v) for v in lr_search.values())
    for backbone in backbones:
        for loss in losses:
            candidates, prism_arm = _arms(backbone, loss, weight_decays, alpha, lr_search)
            sub = runs[runs["method"].isin(list(candidates))]
            prism_pick = (selection.get("chosen") or {}).get(f"{backbone}_{loss}_prism") if selection is not None \
                and len(prism_arm) > 1 else None
            prism = runs[runs["method"] == (prism_pick or method_name(backbone, loss, alpha=alpha))]
            if sub.empty and prism.empty:
                continue
            # a PRISM run whose weight-decay grid has not run yet keeps its row, tuned side empty
            chosen = None
            if selection is not None:
                chosen = (selection.get("chosen") or {}).get(f"{backbone}_{loss}")
            elif not sub.empty:
                chosen = str(sub.groupby("method")["best_val_ndcg"].mean().idxmax())
            if chosen is None and prism.empty:
                continue
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
            rows.append({
                "backbone": backbone, "loss": loss, "tuned_weight_decay": candidates.get(chosen, (np.nan, None))[0],
                **({"tuned_lr": candidates.get(chosen, (np.nan, None))[1], "prism_lr": prism_arm.get(prism_pick)}
                   if searched else {}),
                "tuned_ndcg_mean": t_mean, "tuned_ndcg_sd": t_sd,
                "prism_ndcg_mean": p_mean, "prism_ndcg_sd": p_sd,
                "pct_diff": 100.0 * (p_mean - t_mean) / t_mean if t_mean and np.isfinite(t_mean) else np.nan,
                "tuned_epochs_to_best": tuned["epochs_to_best"].mean(),
                "prism_epochs_to_best": prism["epochs_to_best"].mean(),
                "tuned_seconds_per_epoch": tuned["seconds_per_epoch"].mean(),
                "prism_seconds_per_epoch": prism["seconds_per_epoch"].mean(),
                "n_seeds_tuned": len(tuned), "n_seeds_prism": len(prism),
                "n_weight_decays_run": n_grid if chosen is not None else 0,
                **({"n_grid_points": len(candidates), "n_prism_lrs_run": n_prism, "n_prism_lrs": len(prism_arm)}
                   if searched else {}),
            })
            if tuned_root is not None:
                for _, run in tuned.iterrows():
                    _copy_as(Path(run["run_dir"]), Path(tuned_root) / f"{backbone}_{loss}_tunedwd" / f"seed{run['seed']}",
                             f"{backbone}_{loss}_tunedwd", chosen, budget=grid_cap)
                if prism_pick:
                    for _, run in prism.iterrows():
                        _copy_as(Path(run["run_dir"]),
                                 Path(tuned_root) / f"{backbone}_{loss}_tunedprism" / f"seed{run['seed']}",
                                 f"{backbone}_{loss}_tunedprism", prism_pick, budget=prism_cap)
    frame = pd.DataFrame(rows)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    write_text(out_csv, frame.to_csv(index=False))
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
    lines = [f"# PRISM vs tuned weight decay ({tier} tier, {dataset})", "",
             f"Test NDCG@20, mean ± sd over seeds; tuned λ chosen by mean validation NDCG@20 on {chosen_on} from "
             f"{list(weight_decays)}, then run on every seed; PRISM α = {alpha}, no weight decay. "
             f"Epochs = epochs to the best validation epoch.{search_text}",
             *(["", f"Every (λ, lr) point of the learning-rate search, its record or \"not run\": "
                    f"[lr_search_{dataset}.md](lr_search_{dataset}.md)."] if searched else []),
             "", "| backbone | loss | tuned λ | tuned wd | PRISM | % diff | epochs (wd) | epochs (PRISM) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
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
        lines.append(f"| {r['backbone']} | {r['loss']} | {_num(r['tuned_weight_decay'], 'g')}{tuned_lr}{grid} | "
                     f"{_fmt(r['tuned_ndcg_mean'], r['tuned_ndcg_sd'])} | "
                     f"{_fmt(r['prism_ndcg_mean'], r['prism_ndcg_sd'])}{prism_lr} | "
                     f"{_num(r['pct_diff'], '+.2f', '%')} | {_num(r['tuned_epochs_to_best'], '.1f')} | "
                     f"{_num(r['prism_epochs_to_best'], '.1f')} |")
    if any(not np.isfinite(r["tuned_ndcg_mean"]) for r in rows):
        lines += ["", "–: the weight-decay grid of that row has not run yet."]
    lines += _diagnostic_lines(runs, diagnostic_backbones, losses, alpha)
    write_text(out_md, "\n".join(lines) + "\n")
    return frame


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


def _copy_as(src: Path, dst: Path, method: str, selected: str, *, budget: str = "") -> None:
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
