"""λOpt (Chen et al., KDD 2019): the figures, drawn from the run records.

The verbs ``recrepro lambdaopt <verb>`` (:mod:`recrepro.papers.lambdaopt.cli`, called by
``workflow/rules/lambdaopt.smk``) run these functions:

``figure-trajectory`` (:func:`figure_trajectory`)
    heat maps of mean λ by training frequency (x) and epoch (y) + lines.
``figure-sensitivity`` (:func:`figure_sensitivity`)
    validation AUC over epochs per fixed λ (the table of ``train --mode sensitivity``).
``figure-groups`` (:func:`figure_groups`)
    HR@100 / NDCG@100 of two methods by user-frequency quartile.

The released code's curves beside ours are drawn by :mod:`recrepro.papers.lambdaopt.official`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from recrepro.papers.lambdaopt.tables import METHOD_ORDER

__all__ = ["METHOD_LABELS", "figure_groups", "figure_sensitivity", "figure_trajectory", "frequency_bins",
           "sensitivity_budget"]


#: Colours of λOpt's methods, fixed across its figures: the two the figures compare get the
#: strongest colours, the rest follow in the paper's table order.
METHOD_COLORS_ORDER = ("lambdaopt_dui", "lambdafix", "lambdaopt_d", "lambdaopt_du", "lambdaopt_di", "sgda", "amf",
                       "neumf", "lambdaopt_dui_code")


#: Labels of the methods in figures and legends (the paper's names).
METHOD_LABELS = {"sgda": "SGDA", "amf": "AMF", "neumf": "NeuMF", "lambdafix": "MF-λFix", "lambdaopt_d": "MF-λOpt-D",
                 "lambdaopt_du": "MF-λOpt-DU", "lambdaopt_di": "MF-λOpt-DI", "lambdaopt_dui": "MF-λOpt-DUI",
                 "lambdaopt_dui_code": "MF-λOpt-DUI (code)"}


def frequency_bins(freq: np.ndarray, weight: np.ndarray, n_bins: int) -> tuple[np.ndarray, list[str]]:
    """Integer frequency bins by (weighted) quantiles: ``(bin index of each freq, "lo–hi" labels)``.

    Each bin holds about the same number of users (items): ``weight`` counts them per
    frequency. Bins are closed integer ranges, so the labels never show fractions
    ("19–34", not "19–34.75"); frequencies that fill more than one quantile collapse into one bin.

    Parameters
    ----------
    freq:
        Integer training frequencies (one entry per distinct frequency or per user).
    weight:
        How many users (items) have each ``freq``.
    n_bins:
        Bins at most.
    """
    freq = np.asarray(freq, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.int64)
    population = np.repeat(freq, weight)
    quantiles = np.quantile(population, np.linspace(0, 1, n_bins + 1)[1:-1], method="inverted_cdf")
    uppers = np.unique(np.append(quantiles.astype(np.int64), population.max()))
    index = np.searchsorted(uppers, freq, side="left")
    lowers = np.concatenate([[population.min()], uppers[:-1] + 1])
    labels = [f"{lo}" if lo == hi else f"{lo}–{hi}" for lo, hi in zip(lowers, uppers, strict=True)]
    return index, labels


def figure_trajectory(run_dir: str | Path, out_pdf: str, out_png: str, tier: str, dataset: str,
                      n_bins: int = 10) -> None:
    """λ-trajectories of MF-λOpt-DUI (slide 22): heat maps of mean λ by training frequency and epoch.

    Top: per kind (users, items) a heat map, x = training frequency in ``n_bins`` quantile bins
    (about equally many users per bin, integer ranges), y = epoch, colour = mean λ over the
    users (items) of the bin. Bottom: the same averaged over frequency quartiles, one line each.
    """
    from recrepro.reporting.plotting import add_colorbar, figure_legend, fixed_colors, new_figure, save_figure

    traj = pd.read_parquet(Path(run_dir) / "trajectory.parquet")
    fig, axes = new_figure(ncols=2, nrows=2, width=7.0, height=6.0)
    quartile_names = ["Q1 (least frequent)", "Q2", "Q3", "Q4 (most frequent)"]
    colors = fixed_colors(quartile_names)
    for col, kind in enumerate(("user", "item")):
        part = traj[traj["kind"] == kind]
        ax, ax2 = axes[0, col], axes[1, col]
        if part.empty:
            ax.set_title(f"{kind}s: no trajectory")
            ax2.set_visible(False)
            continue
        freq = part[["freq", "n"]].drop_duplicates("freq").sort_values("freq")
        bins, labels = frequency_bins(freq["freq"].to_numpy(), freq["n"].to_numpy(), n_bins)
        bin_of = dict(zip(freq["freq"].to_numpy(), bins, strict=True))
        binned = part.assign(bin=part["freq"].map(bin_of), w=part["mean_lambda"] * part["n"])
        grid = binned.groupby(["epoch", "bin"])[["w", "n"]].sum()
        grid = (grid["w"] / grid["n"]).unstack("bin").reindex(columns=range(len(labels)))
        epochs = grid.index.to_numpy() + 1
        # rows are the recorded epochs (every one, or every k-th in long runs): each row spans k epochs
        step = float(np.min(np.diff(epochs))) if epochs.size > 1 else 1.0
        im = ax.imshow(grid.to_numpy(), aspect="auto", origin="lower", cmap="viridis", interpolation="nearest",
                       extent=[-0.5, len(labels) - 0.5, epochs.min() - step / 2, epochs.max() + step / 2])
        add_colorbar(fig, im, ax, "mean λ")
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
        ax.set_xlabel(f"{kind} training frequency ({len(labels)} bins, ≈ equal {kind}s)")
        ax.set_ylabel("epoch")
        ax.set_title(f"({'ab'[col]}) {kind}s")
        ax.grid(False)
        q_bins, q_labels = frequency_bins(freq["freq"].to_numpy(), freq["n"].to_numpy(), 4)
        q_of = dict(zip(freq["freq"].to_numpy(), q_bins, strict=True))
        lines = part.assign(q=part["freq"].map(q_of), w=part["mean_lambda"] * part["n"])
        lines = lines.groupby(["q", "epoch"])[["w", "n"]].sum().reset_index()
        names = quartile_names if len(q_labels) == 4 else [f"Q{k + 1}" for k in range(len(q_labels))]
        for q, sub in lines.groupby("q"):
            name = names[int(q)]
            ax2.plot(sub["epoch"] + 1, sub["w"] / sub["n"], marker="o", ms=3, color=colors.get(name, "#000000"),
                     label=name, markevery=max(1, len(sub) // 10))  # a marker per epoch hides the line
        ax2.set_xlabel("epoch")
        ax2.set_ylabel("mean λ")
        ax2.set_title(f"{kind}s by frequency quartile: " + " | ".join(q_labels), fontsize=8)
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption="λ-trajectories of MF-λOpt-DUI (Chen et al. 2019, slide 22); bins: training frequency")


def sensitivity_budget(table: pd.DataFrame, epochs: int | None = None) -> tuple[str, bool]:
    """What budget the sensitivity ``table`` ran under, as a caption fragment, and whether it is not
    the configured one (``epochs``: the configured cap; ``None``: not checked).  A table from before
    the rows carried their budget (no ``epoch_cap`` column) counts as another budget."""
    last = int(table["epoch"].max()) if len(table) else 0
    if "epoch_cap" not in table.columns:
        return f"curves to epoch {last}, budget not recorded", epochs is not None
    cap = int(table["epoch_cap"].iloc[0])
    patience = table["patience"].iloc[0] if "patience" in table.columns else float("nan")
    rule = f"patience {int(patience)}, " if pd.notna(patience) else ""
    return f"curves to epoch {last} ({rule}cap {cap})", epochs is not None and cap != int(epochs)


def figure_sensitivity(table: pd.DataFrame, out_pdf: str, out_png: str, tier: str, dataset: str,
                       epochs: int | None = None) -> None:
    """Validation AUC per epoch of MF-λFix for each fixed λ (poster Fig. 2), λ from large to small.

    The caption says the budget the curves ran under; with ``epochs`` (the configured cap) a table
    made under another budget is marked on the figure, so an outdated sweep is not read as current."""
    from recrepro.reporting.plotting import figure_legend, method_styles, new_figure, save_figure

    fig, ax = new_figure(width=5.0)
    lams = sorted(table["lam"].unique(), reverse=True)
    styles = method_styles([f"λ = {lam:.0e}" for lam in lams])
    for i, lam in enumerate(lams):
        part = table[table["lam"] == lam].sort_values("epoch")
        label = f"λ = {lam:.0e}"
        # about ten markers a line, staggered: curves that lie on top of each other stay tellable apart
        step = max(1, len(part) // 10)
        ax.plot(part["epoch"], part["val_auc"], ms=3, label=label, markevery=(i * step // len(lams), step),
                **styles[label])
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation AUC")
    budget, outdated = sensitivity_budget(table, epochs)
    if outdated:
        ax.text(0.5, 0.5, f"run under another budget than the configuration's (up to {epochs} epochs):\n"
                          "rerun this dataset's sensitivity job", transform=ax.transAxes, ha="center", va="center",
                color="#b00020", fontsize=8, bbox={"facecolor": "white", "edgecolor": "#b00020", "alpha": 0.9})
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption=f"MF-λFix: sensitivity to λ (poster Fig. 2); {budget}")


def _seeds_text(data: pd.DataFrame) -> str:
    """"3 seeds" or, where the methods differ, "seeds: MF-λOpt-DUI 2, MF-λFix 3"."""
    per = data.groupby("method")["seed"].nunique()
    if per.nunique() == 1:
        n = int(per.iloc[0])
        return f"{n} seed" + ("s" if n != 1 else "")
    return "seeds: " + ", ".join(f"{METHOD_LABELS.get(m, m)} {int(n)}" for m, n in per.items())


def figure_groups(runs_a: str | Path | Sequence[str | Path], runs_b: str | Path | Sequence[str | Path],
                  out_pdf: str, out_png: str, tier: str, dataset: str) -> pd.DataFrame:
    """HR@100 / NDCG@100 of two methods by user-frequency quartile (training counts); returns the data.

    As slide 21 (sparse vs active users): bars per frequency group, MF-λOpt-DUI beside MF-λFix.
    ``runs_a`` / ``runs_b``: each method's run records, one per seed (the split is the same for every
    seed, so the training counts come from the first of ``runs_a``). The data have one row per method,
    seed, group and metric (the mean and sd over the group's users), so that a verdict on them pairs the
    seeds; a bar is the mean over a method's seeds of the group's mean, its whisker the mean over the
    seeds of the sd over users. The groups are quartiles of the training frequency with integer
    bounds (the slide's fixed bins <30, [30, 60), [60, 90), ≥90 fit Amazon Food Review only).
    """
    from recrepro.io import read_json
    from recrepro.reporting.plotting import figure_legend, fixed_colors, new_figure, save_figure

    runs_a = [runs_a] if isinstance(runs_a, (str, Path)) else list(runs_a)
    runs_b = [runs_b] if isinstance(runs_b, (str, Path)) else list(runs_b)
    if not runs_a or not runs_b:
        raise ValueError("figure_groups needs at least one run record of each method")
    counts = pd.read_parquet(Path(runs_a[0]) / "train_counts.parquet")
    freq = np.zeros(int(counts["user"].max()) + 1, dtype=np.int64)
    freq[counts["user"].to_numpy()] = counts["train_count"].to_numpy()
    active = freq[freq > 0]
    values, weights = np.unique(active, return_counts=True)
    bins, labels = frequency_bins(values, weights, 4)
    bin_of = np.full(int(freq.max()) + 1, -1, dtype=np.int64)
    bin_of[values] = bins
    rows = []
    for run in (*runs_a, *runs_b):
        meta = read_json(Path(run) / "metrics.json")
        method, seed = meta["method"], int(meta["seed"])
        pu = pd.read_parquet(Path(run) / "per_user.parquet")
        b = bin_of[freq[pu["user"].to_numpy()]]
        for k, label in enumerate(labels):
            sel = b == k
            for metric in ("pp_hr@100", "pp_ndcg@100"):
                vals = pu.loc[sel, metric].to_numpy(dtype=float)
                rows.append({"method": method, "seed": seed, "group": label, "k": k, "metric": metric,
                             "mean": float(np.nanmean(vals)) if vals.size else np.nan,
                             "sd": float(np.nanstd(vals)) if vals.size else np.nan, "n": int(sel.sum())})
    data = pd.DataFrame(rows)
    colors = fixed_colors(METHOD_COLORS_ORDER)
    fig, axes = new_figure(ncols=2, width=7.0, height=3.0)
    # the paper's order: MF-λFix first, then λOpt (its bars sit right of the baseline)
    methods = sorted(dict.fromkeys(data["method"]), key=lambda m: METHOD_ORDER.index(m) if m in METHOD_ORDER else 99)
    for ax, metric in zip(axes, ("pp_hr@100", "pp_ndcg@100"), strict=True):
        part = data[data["metric"] == metric].groupby(["method", "k"], as_index=False)[["mean", "sd"]].mean()
        width = 0.8 / len(methods)
        for m_i, m in enumerate(methods):
            sub = part[part["method"] == m].sort_values("k")
            ax.bar(sub["k"] + m_i * width, sub["mean"], width, yerr=sub["sd"], capsize=2,
                   label=METHOD_LABELS.get(m, m), color=colors.get(m, "#000000"), error_kw={"elinewidth": 0.8})
        ax.set_xticks(np.arange(len(labels)) + width * (len(methods) - 1) / 2, labels)
        ax.set_xlabel("user training frequency (quartiles)")
        ax.set_ylabel("test " + metric.replace("pp_", "").upper())
        ax.set_ylim(bottom=0)
        ax.grid(False, axis="x")
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption=f"Sparse vs active users (slide 21); bars: mean over users, averaged over {_seeds_text(data)}; "
                        "whiskers: sd over users")
    return data
