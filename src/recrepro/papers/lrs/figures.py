"""AMHT-LRS (Pal et al., arXiv 2210.03505): Figs. 1-5 from the sweeps' rows, Fig. 6 from the ML-100K rows.

``recrepro lrs figures --tier T --out-dir D FIGURE=rows.parquet ...`` (:mod:`recrepro.papers.lrs.cli`, called by
``workflow/rules/lrs.smk``) draws each figure with :func:`make_figure` (``D/<figure name>.pdf/.png``) from
the rows ``recrepro lrs train`` wrote (:mod:`recrepro.papers.lrs.run`), mean ± sd over seeds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from recrepro.papers.lrs.run import METHODS, VARIANTS

__all__ = ["FIGURES", "LABELS", "REALDATA_FIGURES", "make_figure"]


#: Figure file names and the experiment each draws.
FIGURES = {"fig1_error_vs_m": "error_vs_m", "fig2_error_vs_t": "error_vs_t", "fig3_iterations": "iterations",
           "fig4_private": "private", "fig5_support": "support"}
#: Figures drawn from rows that are not a synthetic sweep: figure file name -> what :func:`make_figure` draws.
REALDATA_FIGURES = {"fig6_ml100k": "ml100k"}
#: Every method's name in the legends.
LABELS = {
    "amht_lrs": "AMHT-LRS (CoSaMP + swap search)", "amht_lrs_cosamp": "AMHT-LRS (CoSaMP, no swaps)",
    "amht_lrs_htp": "AMHT-LRS (HTP, no swaps)", "amht_lrs_iht": "AMHT-LRS (plain IHT, no swaps)",
    "altmin": "low rank only (AltMin)",
    "lowrank_ridge": "low rank + dense ridge", "sparse_iht": "sparse only (k-sparse Θ)", "per_user_ls": "per-user LS",
    "oracle": "oracle LS (U*, supports known)", "private_amht_lrs": "private AMHT-LRS",
    "global_mean": "global mean rating",
}


def _summary(frame: pd.DataFrame, x: str, y: str) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    out = {}
    for method, group in frame.groupby("method", sort=False):
        agg = group.groupby(x)[y].agg(["mean", "std"]).sort_index()
        out[method] = (agg.index.to_numpy(dtype=float), agg["mean"].to_numpy(), agg["std"].to_numpy())
    return out


#: Every method of the LRS figures in one order: marker fixed across the figures.
METHOD_ORDER = (*METHODS, "private_amht_lrs", "global_mean")
#: Colour and dash of every method, the same in every LRS figure: AMHT-LRS and its variants solid,
#: the baselines dashed, the oracle (the noise floor) black dotted; eleven methods, so the
#: reference lines take greys beside the eight colour-blind-safe colours.
LINE_STYLES = {
    "amht_lrs": ("#0072B2", "-"), "amht_lrs_cosamp": ("#D55E00", "-"), "amht_lrs_htp": ("#009E73", "-"),
    "amht_lrs_iht": ("#E69F00", "-"), "altmin": ("#CC79A7", "--"), "lowrank_ridge": ("#56B4E9", "--"),
    "sparse_iht": ("#F0E442", "--"), "per_user_ls": ("#555555", "--"), "oracle": ("#000000", ":"),
    "private_amht_lrs": ("#D55E00", "-"), "global_mean": ("#999999", "--"),
}


def _lines(ax, summary, order=None):
    from recrepro.reporting.plotting import method_styles

    methods = [m for m in (order or summary) if m in summary]
    markers = method_styles([*METHOD_ORDER, *methods])
    for method in methods:
        xs, mean, sd = summary[method]
        color, dash = LINE_STYLES.get(method, (markers[method]["color"], "-"))
        ax.errorbar(xs, mean, yerr=np.nan_to_num(sd), label=LABELS.get(method, method), color=color, linestyle=dash,
                    marker=markers[method]["marker"], markersize=3.5, linewidth=1.2, capsize=2.5, elinewidth=0.8)


def make_figure(experiment: str, frame: pd.DataFrame, out_pdf: str, out_png: str, tier: str) -> None:
    """Draw one figure from the concatenated seeds' rows (mean ± sd over seeds)."""
    from recrepro.reporting.plotting import FONT_SIZES, figure_legend, new_figure, save_figure

    n_seeds = frame["seed"].nunique()
    note = f"mean ± sd over {n_seeds} seed(s); synthetic LRS data, our design (no published numbers)"
    if experiment == "error_vs_m":
        fig, ax = new_figure(width=5.5)
        _lines(ax, _summary(frame, "m", "param_error"), METHODS)
        ax.set(xlabel="samples per user m", ylabel="mean relative parameter error", yscale="log")
        ax.set_title(f"Fig. 1: error vs m (t={int(frame['t'].iloc[0])})")
    elif experiment == "error_vs_t":
        fig, ax = new_figure(width=5.5)
        _lines(ax, _summary(frame, "t", "param_error"), METHODS)
        ax.set(xlabel="number of users t", ylabel="mean relative parameter error", yscale="log", xscale="log")
        ax.set_title(f"Fig. 2: error vs t (m={int(frame['m'].iloc[0])})")
        # ticks at the t grid, in plain numbers: the log axis's own minor labels (3×10², 4×10², …) ran into each other
        from matplotlib.ticker import FuncFormatter, NullFormatter
        ax.set_xticks(sorted(frame["t"].unique()))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    elif experiment == "iterations":
        fig, axes = new_figure(ncols=2, width=7.0, height=3.0)
        _lines(axes[0], _summary(frame, "iteration", "subspace_distance"), METHOD_ORDER)
        _lines(axes[1], _summary(frame, "iteration", "param_error"), METHOD_ORDER)
        axes[0].set(xlabel="outer iteration", ylabel="‖(I − ÛÛᵀ)U*‖₂", yscale="log", title="Fig. 3a: subspace distance")
        axes[1].set(xlabel="outer iteration", ylabel="mean relative parameter error", yscale="log", title="Fig. 3b: error")
        # whole iterations, written from the rounded value: a tick the locator puts at −2e-16 on one host's
        # arithmetic and at 0 on another's would print "−0" there and change the PDF's bytes
        from matplotlib.ticker import FuncFormatter, MaxNLocator
        for ax in axes:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{int(round(value))}"))
    elif experiment == "private":
        fig, ax = new_figure(width=5.5)
        priv = frame[frame["method"] == "private_amht_lrs"]
        non = frame[frame["method"] == "amht_lrs"].copy()
        summary = _summary(priv, "epsilon_target", "param_error")
        summary.update(_summary(non, "epsilon_target", "param_error"))
        _lines(ax, summary, ["private_amht_lrs", "amht_lrs"])
        ax.set(xlabel="ε (computed by the zCDP accountant, δ = %g)" % priv["delta"].iloc[0],
               ylabel="mean relative parameter error", xscale="log", yscale="log", title="Fig. 4: private vs non-private")
    elif experiment == "ml100k":
        fig, ax = new_figure(width=5.5)
        _lines(ax, _summary(frame, "m", "heldout_mse"), [*METHODS, "global_mean"])
        ax.set(xlabel="training ratings per user m", ylabel="held-out MSE (ratings)", yscale="log",
               title=f"Fig. 6 (our design): ML-100K, {int(frame['t'].iloc[0])} users as tasks")
        # MSEs span less than a decade: plain numbers on the log axis (not 2×10⁰) and ticks at the m grid
        from matplotlib.ticker import FuncFormatter
        plain = FuncFormatter(lambda value, _: f"{value:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.set_xticks(sorted(frame["m"].unique()))
        note = f"mean ± sd over {n_seeds} seed(s); our own demonstration, not the paper's experiment"
    elif experiment == "support":
        frame = frame[frame["method"].isin(["amht_lrs", *VARIANTS])]  # the error-vs-m rows also serve here
        fig, axes = new_figure(ncols=2, width=7.0, height=3.0)
        _lines(axes[0], _summary(frame, "m", "support_precision"), METHOD_ORDER)
        _lines(axes[1], _summary(frame, "m", "support_recall"), METHOD_ORDER)
        axes[0].set(xlabel="samples per user m", ylabel="precision of supp(b̂ᵢ)", title="Fig. 5a: support precision")
        axes[1].set(xlabel="samples per user m", ylabel="recall of supp(b̂ᵢ)", title="Fig. 5b: support recall")
    else:
        raise ValueError(f"unknown experiment {experiment!r}")
    for ax in fig.axes:  # a log axis spanning about a decade labels its minor ticks: at the major labels' size
        ax.tick_params(which="minor", labelsize=FONT_SIZES["tick"])
    figure_legend(fig, ncols=3 if len(fig.axes) > 1 else 2)
    dataset = "ml-100k" if experiment == "ml100k" else "synthetic LRS"
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset, caption=note)
