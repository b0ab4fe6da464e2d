"""PRISM's learning-rate search table: every (λ, lr) grid point Table 1's pick looked at, one row each.

Where ``table.lr_search`` names a backbone, Table 1 picks the tuned-weight-decay arm over λ × learning
rate and PRISM over the learning rates (:func:`~recrepro.papers.prism.experiments.select_weight_decay`).
Table 1 shows only the picks; this table shows each grid point on the seeds the selection reads
(``table.select_on``): its run, best validation NDCG@20 (the score the selection compares), epochs to
best, why it stopped, whether it diverged and its test NDCG@20, and marks each arm's pick (read from
the selection record, ``wd_selection_<dataset>.json``). A point without a record is a "not run" row,
so the table says how much of the grid ran.

It reads records only (no torch), like Table 1, so a redraw from records rewrites it byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import write_text
from recrepro.papers.prism.methods import table_arms
from recrepro.records import read_history, read_record_json

__all__ = ["lr_search_table", "read_point"]

ARMS = ("tuned weight decay", "PRISM")
COLUMNS = ["backbone", "loss", "arm", "weight_decay", "lr", "run", "seed", "status", "val_ndcg", "epochs_to_best",
           "epochs_run", "stopping_reason", "diverged", "test_ndcg", "picked"]


def read_point(run_dir: Path) -> dict[str, Any]:
    """One grid point's record: validation and test NDCG@20, epochs, stopping reason, divergence.

    The validation score is the one the selection compares (``load_prism_runs``: ``history.json``'s
    ``best_val_ndcg``, else ``metrics.json``'s), likewise the epochs to best (``best_epoch``, else
    ``epochs_to_best``). The trainer writes no stopping reason: it stops after ``patience`` epochs
    without a better validation score or at the epoch limit, both in the history's ``settings``, so
    the reason follows from the epochs run. Nor does it record divergence: a non-finite loss or
    embedding stops the run with an error before any record is written (records hold finite
    numbers only); a record carrying a ``diverged`` field (``{"epoch": N, ...}``) says so.
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
             "epochs run, the best epoch and the run's patience and epoch limit. Diverged: the trainer records no "
             "divergence (a non-finite loss or embedding stops the run with an error and no record is written, so "
             "such a point shows as not run); \"not recorded\" unless the record carries a `diverged` field.", "",
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
    record (:func:`~recrepro.papers.prism.experiments.select_weight_decay`), whose ``chosen`` marks
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
