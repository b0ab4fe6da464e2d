"""The released λOpt code beside ours: its curves on our split, our stopping rule applied to them.

``benchmarks/official_lambdaopt.py`` runs yihong-chen/lambda-opt@fdaa44d (built outside the repository)
on our temporal split and scores its tables with our evaluator after every official epoch; the curves
are committed gzipped as ``results/<tier>/lambdaopt/official/<dataset>_<variant>_seed<k>.jsonl.gz`` (``dui``: the
Amazon alter script, MF-λOpt-DUI; ``fix``: the fixed script at our λFix record's λ).  This module reads
them, applies the paper tier's stopping rule (:class:`~recrepro.papers.lambdaopt.stopping.ValidationMonitor`)
to each, and sets the released code's DUI − λFix gap beside ours, under the released code's switches
(``lambdaopt_dui_code``) and under the paper's equations (``lambdaopt_dui``): the table
``tables/official.md`` and the figure ``figures/official.png``.

Epochs are the released code's: ``num_batches`` real MF steps.  Under ``assumed_batch: separate``
(``lambdaopt_dui_code``) the λ step eats every other batch of a sampler pass, so two of that record's
epochs make one official epoch; every other record's epoch is one (its history row ``epoch`` e is the
state after e + 1 of its epochs).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.papers.lambdaopt.stopping import ValidationMonitor

__all__ = ["OFFICIAL_VARIANTS", "METRICS", "best_by_validation", "epochs_per_official_epoch", "official_curves",
           "our_curve", "official_table", "official_markdown", "official_figure"]

#: the released code's variant -> our runs it is set beside (the first: ours under its switches)
OFFICIAL_VARIANTS = {"dui": ("lambdaopt_dui_code", "lambdaopt_dui"), "fix": ("lambdafix",)}
#: the test metrics the table shows (the records' results table's)
METRICS = ("auc", "pp_hr@50", "pp_hr@100", "pp_ndcg@50", "pp_ndcg@100")
_NAME = re.compile(r"(?P<dataset>.+)_(?P<variant>dui|fix)_seed(?P<seed>\d+)\.jsonl(?:\.gz)?")


class _Curve:
    """A model stand-in for :class:`ValidationMonitor`: the score of the epoch being fed, no snapshot."""

    value = float("nan")

    def snapshot(self) -> None:
        return None


def best_by_validation(curve: Sequence[tuple[int, float]], patience: int | None = 100,
                       wait_for_gain: bool = False, gain_margin: float = 0.0) -> dict[str, Any]:
    """Our stopping rule on a finished curve ``[(epoch, val_auc)]`` (epochs from 1, in order, gaps allowed).

    Drives :class:`ValidationMonitor` (the rule the records stopped by) with the curve's values: the best
    is the first strict maximum, the run stops once ``patience`` epochs have passed without one (with
    ``wait_for_gain``, not before a value has beaten the first by more than ``gain_margin``).  Returns ``best_epoch``, ``best_val_auc``
    and ``stopped_at`` (``None``: the curve ends before the rule stops it).
    """
    if not curve:
        return {"best_epoch": None, "best_val_auc": None, "stopped_at": None}
    model = _Curve()
    monitor = ValidationMonitor(lambda m: m.value, patience=patience, cap=int(curve[-1][0]) + 1,
                                wait_for_gain=wait_for_gain, gain_margin=gain_margin)
    values = dict(curve)
    with contextlib.redirect_stdout(io.StringIO()):      # the monitor prints every evaluation
        for epoch in range(1, int(curve[-1][0]) + 1):
            # the monitor evaluates when epoch % eval_every == 0: exactly where the curve has a value
            monitor.eval_every = 1 if epoch in values else epoch + 2
            model.value = values.get(epoch, float("nan"))
            if monitor.update(model, epoch - 1):
                return {"best_epoch": monitor.best_epoch, "best_val_auc": monitor.best_value, "stopped_at": epoch}
    return {"best_epoch": monitor.best_epoch, "best_val_auc": monitor.best_value, "stopped_at": None}


def official_curves(files: Sequence[str | Path]) -> list[tuple[dict[str, str], pd.DataFrame]]:
    """``(name fields, per-evaluation frame)`` of each curve with at least one evaluation."""
    curves = []
    for path in sorted(map(Path, files)):
        m = _NAME.fullmatch(path.name)
        if m is None:
            raise ValueError(f"{path}: expected <dataset>_<dui|fix>_seed<k>.jsonl (or .jsonl.gz)")
        # gzipped where committed: the curves' full-precision numbers take a third of the room
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        frame = pd.DataFrame([json.loads(line) for line in text.splitlines() if line.strip()])
        if len(frame):
            curves.append((m.groupdict(), frame))
    return curves


def epochs_per_official_epoch(record: Path) -> int:
    """How many of a record's epochs make one official epoch: 2 under ``assumed_batch: separate``, else 1."""
    path = Path(record) / "provenance.json"
    if not path.is_file():
        return 1
    settings = json.loads(path.read_text()).get("config", {}).get("settings", {})
    return 2 if settings.get("assumed_batch") == "separate" else 1


def our_curve(record: Path) -> tuple[list[tuple[int, float]], dict[str, Any]]:
    """A record's validation curve in official epochs (λFix: the selected λ's) and its ``metrics.json``.

    History row ``epoch`` e is the state after e + 1 of the record's epochs, i.e. official epoch
    (e + 1) / :func:`epochs_per_official_epoch`; rows between two official epochs are left out.
    """
    record = Path(record)
    metrics = json.loads((record / "metrics.json").read_text())
    hist = pd.read_parquet(record / "history.parquet")
    hist = hist[hist["epoch"].notna() & hist["val_auc"].notna()]
    if "lam" in hist.columns and "selected_lam" in metrics:
        hist = hist[hist["lam"] == metrics["selected_lam"]]
    per = epochs_per_official_epoch(record)
    return [((int(e) + 1) // per, float(v)) for e, v in zip(hist["epoch"], hist["val_auc"], strict=True)
            if (int(e) + 1) % per == 0], metrics


def _released_row(frame: pd.DataFrame, patience: int | None, wait_for_gain: bool,
                  gain_margin: float) -> dict[str, Any]:
    """The released run under our rule: its best epoch and the test metrics there."""
    trained = frame[frame["epoch"] > 0]   # epoch 0: after the first step, where the released code starts
    rule = best_by_validation(list(zip(trained["epoch"].astype(int), trained["val_auc"], strict=True)),
                              patience, wait_for_gain, gain_margin)
    at = trained.loc[trained["epoch"] == rule["best_epoch"]].iloc[0]
    return {"best_epoch": rule["best_epoch"], "best_val_auc": rule["best_val_auc"],
            "stopped": (f"patience at {rule['stopped_at']}" if rule["stopped_at"] is not None
                        else f"curve ends at {int(trained['epoch'].max())}"),
            **{k: float(at[k]) for k in METRICS}}


def _our_row(runs_root: Path, dataset: str, method: str, seed: str) -> dict[str, Any] | None:
    """Our record's best epoch (official epochs) and test metrics there; None when not recorded."""
    record = runs_root / dataset / "temporal_user_ratio" / method / f"seed{seed}"
    if not (record / "metrics.json").is_file():
        return None
    metrics = json.loads((record / "metrics.json").read_text())
    stopping = metrics.get("stopping", {})
    per = epochs_per_official_epoch(record)
    best = stopping.get("best_epoch")
    return {"best_epoch": None if best is None else best / per, "best_val_auc": stopping.get("best_val_auc"),
            "stopped": f"{stopping.get('stopped')} at {stopping.get('epochs_trained', 0) / per:g}",
            **{k: float(metrics["overall"][k]) for k in METRICS}}


def official_table(files: Sequence[str | Path], runs_root: str | Path, settings: Mapping[str, Any]) -> pd.DataFrame:
    """One row per dataset, seed and side: the DUI run and λFix run at their best epochs under our rule.

    Sides: the released code (its ``dui`` and ``fix`` curves), ours under the released code's switches
    (``lambdaopt_dui_code``) and ours under the paper's equations (``lambdaopt_dui``), each against our
    ``lambdafix`` record except the released code's own λFix.  ``settings``: the tier's λOpt settings
    (``patience``, ``wait_for_gain``, ``gain_margin``).  Columns ``gap_<metric>``: DUI − λFix.
    """
    runs_root = Path(runs_root)
    patience, wait = settings.get("patience"), bool(settings.get("wait_for_gain", False))
    margin = float(settings.get("gain_margin", 0.0))
    released = {(m["dataset"], m["seed"], m["variant"]): _released_row(f, patience, wait, margin)
                for m, f in official_curves(files)}
    rows = []
    for dataset, seed in sorted({(d, s) for d, s, _ in released}, key=lambda k: (k[0], int(k[1]))):
        ours_fix = _our_row(runs_root, dataset, "lambdafix", seed)
        sides = [("released code", "dui (fdaa44d)", released.get((dataset, seed, "dui")),
                  "fix (fdaa44d)", released.get((dataset, seed, "fix")))]
        sides += [(label, method, _our_row(runs_root, dataset, method, seed), "lambdafix", ours_fix)
                  for label, method in (("ours, the released code's switches", OFFICIAL_VARIANTS["dui"][0]),
                                        ("ours, the paper's equations", OFFICIAL_VARIANTS["dui"][1]))]
        for side, dui_name, dui, fix_name, fix in sides:
            row = {"dataset": dataset, "seed": int(seed), "side": side, "dui": dui_name, "fix": fix_name}
            for prefix, run in (("dui", dui), ("fix", fix)):
                for key in ("best_epoch", "stopped", *METRICS):
                    row[f"{prefix}_{key}"] = None if run is None else run[key]
            for k in METRICS:
                row[f"gap_{k}"] = (row[f"dui_{k}"] - row[f"fix_{k}"]) if dui and fix else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def _fmt(value: Any, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "not recorded"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def official_markdown(table: pd.DataFrame) -> str:
    """The table as markdown, with the mean gap per side over the seeds where both runs exist."""
    if table.empty:
        return ""
    lines = ["## The released code, run on our split (`benchmarks/official_lambdaopt.py`)", "",
             "yihong-chen/lambda-opt@fdaa44d's own training loop (its MF, Adam, sampler, λ network, assumed step "
             "and random draws; the Amazon scripts' settings) on our temporal split, scored after every epoch by "
             "our evaluator; the runtime patches that keep it the algorithm it was written as under today's "
             "torch are listed in the harness. Each run is cut at its best validation AUC by our stopping rule "
             "(the same rule and validation part as our records; epochs are the released code's: "
             "`num_batches` real MF steps, two of `lambdaopt_dui_code`'s). Test metrics at that epoch; "
             "**DUI − λFix** is the claim L1 compares. Different random draws: one seed of either side is one "
             "draw, not a trajectory to match bit for bit.", "",
             "| dataset | seed | side | DUI run: best epoch (stop) | DUI test AUC | λFix run: best epoch (stop) "
             "| λFix test AUC | DUI − λFix AUC | DUI − λFix HR@100 | DUI − λFix NDCG@100 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.to_dict("records"):
        def run(prefix: str, name: str) -> str:
            if r[f"{prefix}_auc"] is None or pd.isna(r[f"{prefix}_auc"]):
                return f"`{name}`: not recorded"
            return f"`{name}`: {r[f'{prefix}_best_epoch']:g} ({r[f'{prefix}_stopped']})"
        lines.append(f"| {r['dataset']} | {r['seed']} | {r['side']} | {run('dui', r['dui'])} | {_fmt(r['dui_auc'])} "
                     f"| {run('fix', r['fix'])} | {_fmt(r['fix_auc'])} | {_fmt(r['gap_auc'], True)} "
                     f"| {_fmt(r['gap_pp_hr@100'], True)} | {_fmt(r['gap_pp_ndcg@100'], True)} |")
    means = (table.dropna(subset=["gap_auc"]).groupby(["dataset", "side"], sort=False)
             .agg(n=("gap_auc", "size"), gap=("gap_auc", "mean"), sd=("gap_auc", "std")).reset_index())
    if len(means):
        lines += ["", "Mean DUI − λFix test AUC over the seeds where both runs exist:", ""]
        for r in means.to_dict("records"):
            sd = "" if r["n"] < 2 else f" ± {r['sd']:.4f}"
            lines.append(f"- {r['dataset']}, {r['side']}: {r['gap']:+.4f}{sd} ({r['n']} seed{'s' if r['n'] > 1 else ''})")
    return "\n".join(lines) + "\n"


def official_figure(files: Sequence[str | Path], runs_root: str | Path, out_pdf: str, out_png: str,
                    tier: str) -> None:
    """Validation AUC per official epoch: the released code's DUI and λFix (hollow markers) over ours
    (lines: DUI under the released code's switches, dashed; under the paper's equations, solid; λFix),
    one panel per dataset and seed."""
    from recrepro.reporting.plotting import FONT_SIZES, figure_legend, new_figure, plot_published, save_figure

    curves = official_curves(files)
    panels = sorted({(m["dataset"], m["seed"]) for m, _ in curves}, key=lambda k: (k[0], int(k[1])))
    if not panels:
        raise ValueError("lambdaopt official figure: no released-code curve given")
    fig, axes = new_figure(len(panels), 1, width=3.4 * len(panels) + 0.4, height=3.4)
    axes = np.atleast_1d(axes).ravel()
    colors = {"dui": "C1", "fix": "C0"}
    ours = [("lambdaopt_dui_code", "C1", "--", "ours: DUI, the released code's switches"),
            ("lambdaopt_dui", "C3", "-", "ours: DUI, the paper's equations"),
            ("lambdafix", "C0", "-", "ours: λFix")]
    for ax, (dataset, seed) in zip(axes, panels, strict=True):
        for method, color, style, label in ours:
            record = Path(runs_root) / dataset / "temporal_user_ratio" / method / f"seed{seed}"
            if (record / "history.parquet").is_file():
                curve, _ = our_curve(record)
                if curve:
                    x, y = zip(*curve, strict=True)
                    ax.plot(x, y, color=color, ls=style, lw=1.1, label=label)
        for m, frame in curves:
            if (m["dataset"], m["seed"]) == (dataset, seed):
                shown = frame[(frame["epoch"] > 0) & (frame["epoch"] % 10 == 0)]
                plot_published(ax, shown["epoch"], shown["val_auc"], color=colors[m["variant"]],
                               marker="o" if m["variant"] == "dui" else "s",
                               label=f"released code: {'DUI' if m['variant'] == 'dui' else 'λFix'} (every 10th epoch)")
        ax.set_title(f"{dataset} · seed {seed}", loc="left", fontsize=8)
    # One x label and one y label for the row: under each panel, the long x label ran into its neighbours.
    axes[0].set_ylabel("validation AUC")
    fig.supxlabel("epoch (released code's: num_batches real MF steps)", fontsize=FONT_SIZES["label"])
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=", ".join(dict.fromkeys(d for d, _ in panels)),
                caption="λOpt: the released code (yihong-chen/lambda-opt@fdaa44d, hollow) on our split against our "
                        "runs (lines), validation AUC as our stopping rule computes it (DUI: the half of validation its λ "
                        "step never reads; λFix: all of it), per official epoch")
