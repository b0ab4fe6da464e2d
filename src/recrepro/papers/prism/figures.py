"""PRISM Figs. 1-11 (Loveland et al., KDD 2025) from run records, and Fig. 7 from Theorem 3.1.

Each figure is described by a JSON-able *spec* (built by
:mod:`recrepro.papers.prism.rules` from the config) and drawn by :func:`draw_figure`
from the run directories the rule hands over.  Figures never train: they read
``metrics.json`` / ``history.json`` / ``magnitudes.parquet`` of runs that other figures
share (one run directory per distinct setting).

=================  ============================================================================
``wd``             NDCG@20 overall + strata vs weight decay (Figs. 3, 8, 10, 11; as Fig. 1)
``magnitudes``     item ‖e_i‖ vs training degree with Spearman ρ (Fig. 3's scatter; as Fig. 2)
``epochs``         test NDCG@20 vs epochs to early stop, PRISM α grid vs tuned weight decay (Fig. 4)
``alpha``          overall + stratified NDCG@20 vs α (Fig. 5)
``curves``         validation NDCG@20 per epoch, cosine and dot-product scores (Fig. 6)
``debias``         unpopular/popular NDCG@20 ratio vs overall NDCG@20 (Fig. 9)
=================  ============================================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.papers.prism.tables import load_prism_runs
from recrepro.papers.prism.methods import method_name, parse_method
from recrepro.records import read_history

__all__ = ["draw_figure", "figure_alpha", "figure_curves", "figure_debias", "figure_epochs", "figure_magnitudes",
           "figure_theory", "figure_weight_decay", "select_by_validation", "theorem31_change"]


#: NDCG@20 overall and its additive shares by item popularity, in the paper's order (colours fixed).
STRATA = ("overall", "popular", "neutral", "unpopular")
STRATA_COLUMNS = {"overall": "ndcg", "popular": "ndcg_popular", "neutral": "ndcg_neutral",
                  "unpopular": "ndcg_unpopular"}
#: Fig. 9's methods in the paper's order (colours fixed).
DEBIAS_ORDER = ("BPR", "DirectAU", "PRISM + DirectAU", "IPL", "ReSN", "MACR")


def published_ndcg(dataset: str, method: str) -> float | None:
    """Table 1's published test NDCG@20 of ``method`` (e.g. ``mf_directau_prism``) on ``dataset``, if any.

    A PRISM run at α = 1 stands for its row's PRISM cell, which the expected values file keys by the
    learning-rate pick (``mf_directau_tunedprism``) where the learning rate is searched.
    """
    from recrepro.scorecard import published_value, published_values

    values = published_values("prism")
    value = published_value(values, dataset, method, "ndcg@20")
    if value is None and method.endswith("_prism"):
        value = published_value(values, dataset, method.removesuffix("_prism") + "_tunedprism", "ndcg@20")
    return value


def _mean_sd(values: pd.Series) -> tuple[float, float]:
    values = values.astype(float).dropna()
    mean = float(values.mean()) if len(values) else float("nan")
    sd = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
    return mean, sd


def seeds_note(runs: pd.DataFrame) -> str:
    """The seeds a figure's points average, for its caption: ``seed 123``, ``seeds 123, 246, 492``,
    or ``1-3 seeds per point (of 123, 246, 492)`` while some runs are still missing."""
    if runs.empty or "seed" not in runs:
        return "no runs"
    seeds = ", ".join(str(s) for s in sorted(set(runs["seed"].astype(int))))
    per_point = runs.groupby("method")["seed"].nunique()
    if per_point.min() != per_point.max():
        return f"{per_point.min()}–{per_point.max()} seeds per point (of {seeds})"
    return f"seed{'s' if ', ' in seeds else ''} {seeds}"


def unrun_note(runs: pd.DataFrame, groups: Mapping[str, Mapping[str, str]]) -> str:
    """A caption clause naming the sweep points with no run record, e.g. ``no run record yet: α 0.25, 0.5``.

    ``groups`` maps a prefix (``"α "``, ``"SSM λ "``, or ``""``) to its points, ``{label: method}``.
    A redraw from partial records draws only the points that ran, and a sparse sweep would
    otherwise read as the paper's grid. ``""`` when every point has at least one seed.
    """
    have = set(runs["method"]) if "method" in runs else set()
    parts = []
    for prefix, points in groups.items():
        missing = [label for label, method in points.items() if method not in have]
        if missing:
            parts.append(prefix + ", ".join(missing))
    return "no run record yet: " + " and ".join(parts) if parts else ""


def _clauses(*parts: str) -> str:
    """``"; "``-joined non-empty caption clauses, with a leading ``"; "`` (``""`` if none)."""
    kept = [p for p in parts if p]
    return "; " + "; ".join(kept) if kept else ""


def select_by_validation(runs: pd.DataFrame, candidates: Sequence[str]) -> str | None:
    """The candidate method with the highest mean best validation NDCG@20 (never the test score)."""
    sub = runs[runs["method"].isin(list(candidates))]
    if "diverged" in sub.columns:  # a run that blew up is never picked
        sub = sub[~sub["method"].isin(set(sub.loc[sub["diverged"].astype(bool), "method"]))]
    if sub.empty:
        return None
    return str(sub.groupby("method")["best_val_ndcg"].mean().idxmax())


# ------------------------------------------------------------------------------ Fig. 4


def _setting_text(method: str) -> str:
    """``λ 1e-08, lr 0.01`` of a weight-decay run name (the learning rate only where it is not the tier's)."""
    spec = parse_method(method)
    return f"λ {spec['weight_decay']:g}" + (f", lr {spec['lr']:g}" if spec["lr"] is not None else "")


def _lr_text(lr: float | None) -> str:
    """The caption's clause naming the PRISM runs' learning rate."""
    return "" if lr is None else f" at lr {lr:g} (the learning rate of Table 1's PRISM pick)"


def figure_epochs(run_dirs: Sequence[Path], out_pdf: Path, out_png: Path, *, tier: str, dataset: str,
                  alphas: Mapping[str, str], tuned_candidates: Sequence[str], lr: float | None = None) -> pd.DataFrame:
    """Fig. 4: test NDCG@20 vs epochs to the best validation epoch, mean ± sd over seeds.

    Parameters
    ----------
    alphas:
        ``{label: method}`` of the PRISM runs (e.g. ``{"α=0.25": "mf_directau_prism_a025"}``).
    tuned_candidates:
        The coupled weight-decay methods: Table 1's pick alone where its selection has picked (over λ and
        the learning rates it searches, on the selection seed), else every λ at the tier's rate; the one
        with the best mean validation NDCG@20 is the "tuned weight decay" point.
    lr:
        The learning rate the PRISM points ran at (the caption names it; ``None``: not stated).

    Published points whose epochs the paper states (``figure_points`` of ``fig4_epochs`` in
    ``expected/prism.yaml``) are drawn as hollow markers in their series' colour.
    """
    from recrepro.reporting.plotting import figure_legend, fixed_colors, new_figure, plot_published, published_handles, save_figure
    from recrepro.scorecard import figure_points

    runs = load_prism_runs(run_dirs)
    points = dict(alphas)
    tuned = select_by_validation(runs, tuned_candidates)
    tuned_label = None
    if tuned is not None:
        tuned_label = f"tuned wd ({_setting_text(tuned)})"
        points[tuned_label] = tuned
    colors = fixed_colors([*alphas, "tuned wd"])
    fig, ax = new_figure(1, 1, width=4.5)
    rows = []
    for label, method in points.items():
        color = colors["tuned wd" if label == tuned_label else label]
        sub = runs[runs["method"] == method]
        (x, xsd), (y, ysd) = _mean_sd(sub["epochs_to_best"]), _mean_sd(sub["ndcg"])
        rows.append({"label": label, "method": method, "epochs_mean": x, "epochs_sd": xsd, "ndcg_mean": y,
                     "ndcg_sd": ysd, "n_seeds": len(sub)})
        if np.isfinite(x) and np.isfinite(y):
            ax.errorbar([x], [y], xerr=None if not np.isfinite(xsd) else [xsd],
                        yerr=None if not np.isfinite(ysd) else [ysd], fmt="s" if label == tuned_label else "o",
                        color=color, label=label, capsize=2.5, markersize=5)
    published = figure_points("prism", "fig4_epochs", dataset)
    for point in published:
        plot_published(ax, point.x, point.y, color=colors.get(point.series, colors["tuned wd"]),
                       marker="s" if point.series == "tuned wd" else "o")
    ax.set_xlabel("epochs to early stop (best validation epoch)")
    ax.set_ylabel("test NDCG@20")
    figure_legend(fig, extra=published_handles("§5.2.1 + Table 1") if published else None)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption=f"DirectAU: PRISM α grid{_lr_text(lr)} vs tuned weight decay, mean ± sd over seeds "
                        f"({seeds_note(runs)})"
                        + _clauses(unrun_note(runs, {"": alphas}),
                                   "hollow: published (epochs from §5.2.1, NDCG@20 from Table 1)" if published else ""))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ Fig. 5


def figure_alpha(run_dirs: Sequence[Path], out_pdf: Path, out_png: Path, *, tier: str, dataset: str,
                 alphas: Mapping[str, str], lr: float | None = None) -> pd.DataFrame:
    """Fig. 5: overall and popular / neutral / unpopular NDCG@20 vs PRISM α (mean ± sd band).

    ``alphas`` maps the α value (as text, e.g. ``"0.25"``) to its method name. Table 1's
    published PRISM (α = 1) NDCG@20 of MF + DirectAU on this dataset is a hollow marker.
    """
    from recrepro.reporting.plotting import (errorbar_lines, figure_legend, fixed_colors, new_figure, plot_published,
                                   published_handles, save_figure)

    runs = load_prism_runs(run_dirs)
    xs = [float(a) for a in alphas]
    fig, axes = new_figure(2, 1, width=6.5, height=2.8)
    colors = fixed_colors(STRATA)
    table = []
    series_all: dict[str, tuple[list[float], list[float]]] = {}
    for label in STRATA:
        col = STRATA_COLUMNS[label]
        means, sds = [], []
        for alpha, method in alphas.items():
            vals = runs.loc[runs["method"] == method, col] if col in runs else pd.Series(dtype=float)
            mean, sd = _mean_sd(vals)
            means.append(mean)
            sds.append(sd)
            table.append({"alpha": float(alpha), "series": label, "mean": mean, "sd": sd, "n_seeds": len(vals)})
        series_all[label] = (means, sds)
    errorbar_lines(axes[0], xs, {"overall": series_all["overall"]}, colors=colors, legend=False, band=True)
    errorbar_lines(axes[1], xs, {k: v for k, v in series_all.items() if k != "overall"}, colors=colors,
                   legend=False, band=True)
    published = published_ndcg(dataset, "mf_directau_prism")
    if published is not None and 1.0 in xs:
        plot_published(axes[0], 1.0, published, color=colors["overall"])
    for ax, title in zip(axes, ("(a) overall", "(b) by item popularity (additive shares)"), strict=True):
        ax.set_xlabel("PRISM α")
        ax.set_ylabel("test NDCG@20")
        ax.set_title(title)
    figure_legend(fig, extra=published_handles("Table 1, α = 1") if published is not None else None)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption=f"DirectAU with PRISM α, no weight decay{_lr_text(lr)}: NDCG@20 overall and per stratum, "
                        "mean ± sd "
                        f"({seeds_note(runs)})" + _clauses(unrun_note(runs, {"α ": alphas})))
    return pd.DataFrame(table)


# ------------------------------------------------------------------------------ Fig. 6


def figure_curves(run_dirs: Mapping[str, Path], out_pdf: Path, out_png: Path, *, tier: str,
                  dataset: str) -> pd.DataFrame:
    """Fig. 6: validation NDCG@20 per epoch under cosine (left) and dot-product (right) scores.

    ``run_dirs`` maps a curve label (e.g. "λ = 1e-06") to a run directory whose
    ``history.json`` holds ``val_ndcg`` and ``val_ndcg_cosine``.
    """
    from recrepro.reporting.plotting import figure_legend, fixed_colors, new_figure, save_figure

    colors = fixed_colors(list(run_dirs))
    fig, axes = new_figure(2, 1, width=6.5, height=2.8, sharey=False)
    rows = []
    for label, run_dir in run_dirs.items():
        history = read_history(run_dir)
        for ax, key in zip(axes, ("val_ndcg_cosine", "val_ndcg"), strict=True):
            values = history.get(key) or []
            epochs = np.arange(1, len(values) + 1)
            ax.plot(epochs, values, color=colors[label], label=label, linewidth=1.2, marker="o", markersize=2.5)
            rows += [{"label": label, "scores": key, "epoch": int(e), "ndcg": float(v)}
                     for e, v in zip(epochs, values, strict=True)]
    from matplotlib.ticker import MaxNLocator

    for ax, title in zip(axes, ("(a) cosine similarity", "(b) dot product"), strict=True):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel("validation NDCG@20")
        ax.set_title(title)
    figure_legend(fig, title="weight decay")
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption="DirectAU training curves by weight decay: validation NDCG@20, cosine vs dot product "
                        "(first seed)")
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ Fig. 9


def figure_debias(run_dirs: Sequence[Path], out_pdf: Path, out_png: Path, *, tier: str, dataset: str,
                  groups: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Fig. 9: unpopular/popular NDCG@20 ratio (x) vs overall NDCG@20 (y), mean ± sd over seeds.

    ``groups`` maps a label to candidate methods; a label with several candidates (a
    weight-decay grid) is represented by the one with the best mean validation NDCG@20.
    The ratio is taken per seed, then averaged.
    """
    from recrepro.reporting.plotting import figure_legend, fixed_colors, new_figure, save_figure

    runs = load_prism_runs(run_dirs)
    colors = fixed_colors([*DEBIAS_ORDER, *groups])
    fig, ax = new_figure(1, 1, width=4.5)
    rows = []
    # the paper's order (the spec arrives as JSON with sorted keys)
    order = [g for g in DEBIAS_ORDER if g in groups] + sorted(set(groups) - set(DEBIAS_ORDER))
    for label in order:
        candidates = groups[label]
        method = select_by_validation(runs, candidates)
        if method is None:
            continue
        sub = runs[runs["method"] == method]
        ratio = sub["ndcg_unpopular"].astype(float) / sub["ndcg_popular"].astype(float)
        ratio = ratio.replace([np.inf, -np.inf], np.nan)
        (x, xsd), (y, ysd) = _mean_sd(ratio), _mean_sd(sub["ndcg"])
        rows.append({"label": label, "method": method, "ratio_mean": x, "ratio_sd": xsd, "ndcg_mean": y,
                     "ndcg_sd": ysd, "n_seeds": len(sub)})
        if np.isfinite(x) and np.isfinite(y):
            ax.errorbar([x], [y], xerr=None if not np.isfinite(xsd) else [xsd],
                        yerr=None if not np.isfinite(ysd) else [ysd], fmt="o", color=colors[label],
                        label=label, capsize=2.5, markersize=5)
    ax.set_xlabel("unpopular NDCG@20 / popular NDCG@20")
    ax.set_ylabel("overall NDCG@20")
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption="debiasing: BPR, DirectAU (tuned wd), PRISM + DirectAU, IPL, ReSN, MACR; mean ± sd "
                        f"({seeds_note(runs)})")
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ Fig. 7


def theorem31_change(degree: np.ndarray, batch_fraction: np.ndarray, *, lr: float, weight_decay: float,
                     norm: float = 1.0, cosine: float = 0.9) -> np.ndarray:
    r"""Expected change of ‖i‖² in one step, Theorem 3.1 (Eq. 3), for fixed ‖i‖ and cos(u, i).

    .. math:: \mathbb{E}[\Delta\|i\|^2] = \|i\|^2\,\eta\lambda(\eta\lambda - 2)
              + \bigl(1 - (1 - |B|/|E|)^{d_i}\bigr)\,\frac{\eta^2}{\|i\|^2}(1 - \cos^2(u, i))

    Parameters
    ----------
    degree, batch_fraction:
        Broadcastable arrays of item degree ``d_i`` and ``|B|/|E|`` in [0, 1].
    lr, weight_decay:
        η and λ.
    norm, cosine:
        ‖i^{(k)}‖ and the cosine ``u·i/(‖u‖‖i‖)`` (the paper's Fig. 7 fixes it at 0.9).
    """
    degree = np.asarray(degree, dtype=np.float64)
    frac = np.asarray(batch_fraction, dtype=np.float64)
    p_in_batch = 1.0 - np.power(1.0 - frac, degree)
    decay = norm ** 2 * lr * weight_decay * (lr * weight_decay - 2.0)
    ranking = p_in_batch * lr ** 2 / norm ** 2 * (1.0 - cosine ** 2)
    return decay + ranking


def figure_theory(out_pdf: Path, out_png: Path, *, tier: str, lr: float, weight_decay: float, norm: float,
                  cosine: float, max_degree: float, batch_fractions: Sequence[float]) -> pd.DataFrame:
    """Fig. 7: heat map of :func:`theorem31_change` over degree × |B|/|E| (both log-spaced).

    ``batch_fractions`` is the ``(lo, hi)`` range of ``|B|/|E|``; degrees run from 1 to
    ``max_degree``.  Pure computation: no data, no training.
    """
    from matplotlib.colors import TwoSlopeNorm

    from recrepro.reporting.plotting import add_colorbar, new_figure, save_figure

    degrees = np.unique(np.round(np.logspace(0, math.log10(max_degree), 60)))
    if not 0.0 < batch_fractions[0] < batch_fractions[1] <= 1.0:
        raise ValueError(f"batch fractions must satisfy 0 < lo < hi <= 1, got {batch_fractions}")
    fracs = np.logspace(math.log10(batch_fractions[0]), math.log10(batch_fractions[1]), 50)
    change = theorem31_change(degrees[None, :], fracs[:, None], lr=lr, weight_decay=weight_decay, norm=norm,
                              cosine=cosine)
    fig, ax = new_figure(1, 1, width=5.0)
    lo, hi = float(change.min()), float(change.max())
    scale = TwoSlopeNorm(vcenter=0.0, vmin=min(lo, -1e-30), vmax=max(hi, 1e-30))
    mesh = ax.pcolormesh(degrees, fracs, change, cmap="RdBu_r", norm=scale, shading="auto", rasterized=True)
    bar = add_colorbar(fig, mesh, ax, "E[Δ‖i‖²] per step")
    # the two halves of the scale differ by orders of magnitude: tick each half on its own,
    # so the shrinking (blue) side is read as well as the growing one
    ticks = sorted({v for v in (lo, lo / 2, 0.0, hi / 2, hi) if scale.vmin <= v <= scale.vmax})
    bar.set_ticks(ticks, labels=[f"{v:.1e}" if v else "0" for v in ticks])
    bar.ax.yaxis.get_offset_text().set_visible(False)
    ax.grid(False)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("item degree d_i")
    ax.set_ylabel("batch size / |E|")
    ax.set_title(f"η = {lr:g}, λ = {weight_decay:g}, ‖i‖ = {norm:g}, cos = {cosine:g}")
    save_figure(fig, out_pdf, out_png, tier=tier, dataset="theory",
                caption="Theorem 3.1: expected magnitude change of an item embedding (no training)")
    grid = pd.DataFrame({"batch_fraction": np.repeat(fracs, degrees.size), "degree": np.tile(degrees, fracs.size),
                         "change": change.ravel()})
    return grid


# ------------------------------------------------------------ Figs. 1 and 2 (and 3)


def _wd_positions(values: Sequence[float]) -> tuple[np.ndarray, list[str]]:
    labels = ["0" if v == 0 else f"1e{int(round(math.log10(v)))}" if math.log10(v).is_integer() else f"{v:g}"
              for v in values]
    return np.arange(len(values), dtype=float), labels


#: Backbones and losses as the paper writes them (figure titles).
PAPER_NAMES = {"mf": "MF", "nlmf": "Non-linear MF", "lightgcn": "LightGCN", "bpr": "BPR", "ssm": "SSM",
               "directau": "DirectAU", "mawu": "MAWU", "ipl": "IPL", "resn": "ReSN", "macr": "MACR"}


def figure_weight_decay(run_dirs: Sequence[Path], out_pdf: Path, out_png: Path, *, tier: str, dataset: str,
                        backbone: str, losses: Sequence[str], weight_decays: Sequence[float],
                        batched: bool = False) -> pd.DataFrame:
    """Fig. 1 (coupled) / Fig. 3 (batched): NDCG@20 overall and per stratum vs weight decay, mean ± sd.

    One row of panels per loss (the paper: BPR top, DirectAU bottom), the sd as a shaded band
    ("filled regions denote standard deviation"). Where Table 1 publishes the tuned-weight-decay
    cell of a panel's (backbone, loss) on this dataset, it is drawn as a hollow marker at our
    tuned λ (best mean validation NDCG@20 among the panel's runs).
    """
    from recrepro.reporting.plotting import (errorbar_lines, figure_legend, fixed_colors, new_figure, plot_published,
                                   published_handles, save_figure)

    runs = load_prism_runs(run_dirs)
    x, labels = _wd_positions(weight_decays)
    fig, axes = new_figure(1, len(losses), width=5.5, height=2.3 * len(losses) + 0.4)
    axes = np.atleast_1d(axes)
    colors = fixed_colors(STRATA)
    drawn_published = False
    table = []
    grids = {f"{PAPER_NAMES.get(loss, loss)} λ ": {label: method_name(backbone, loss, weight_decay=wd, batched=batched)
                                                    for label, wd in zip(labels, weight_decays, strict=True)}
             for loss in losses}
    for ax, loss in zip(axes, losses, strict=True):
        series = {}
        for label in STRATA:
            col = STRATA_COLUMNS[label]
            means, sds = [], []
            for wd in weight_decays:
                name = method_name(backbone, loss, weight_decay=wd, batched=batched)
                vals = runs.loc[runs["method"] == name, col].astype(float) if col in runs else pd.Series(dtype=float)
                means.append(vals.mean() if len(vals) else np.nan)
                sds.append(vals.std(ddof=1) if len(vals) > 1 else np.nan)
                table.append({"loss": loss, "weight_decay": wd, "series": label, "mean": means[-1], "sd": sds[-1],
                              "n_seeds": len(vals)})
            series[label] = (means, sds)
        errorbar_lines(ax, x, series, colors=colors, legend=False, band=True)
        published = None if batched else published_ndcg(dataset, f"{backbone}_{loss}_tunedwd")
        if published is not None and len(runs):
            candidates = [method_name(backbone, loss, weight_decay=wd) for wd in weight_decays]
            tuned = select_by_validation(runs, candidates)
            if tuned is not None:
                plot_published(ax, x[candidates.index(tuned)], published, color=colors["overall"])
                drawn_published = True
        ax.set_xticks(x, labels)
        ax.set_xlabel(("batched " if batched else "") + "weight decay λ")
        ax.set_ylabel("test NDCG@20")
        ax.set_title(f"{PAPER_NAMES.get(backbone, backbone)} + {PAPER_NAMES.get(loss, loss)}")
    figure_legend(fig, extra=published_handles("Table 1, tuned λ") if drawn_published else None)
    caption = ("NDCG@20 (overall and popular/neutral/unpopular shares) vs "
               + ("batched" if batched else "coupled")
               + f" weight decay, mean ± sd (band) over seeds ({seeds_note(runs)})"
               + _clauses(unrun_note(runs, grids), "hollow: Table 1's tuned-weight-decay NDCG@20, drawn at the λ of "
                          "the panel's best validation NDCG@20 (Table 1's own pick also searches the learning rate)"
                          if drawn_published else ""))
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset, caption=caption)
    return pd.DataFrame(table)


def figure_magnitudes(run_dirs: Mapping[str, Path], out_pdf: Path, out_png: Path, *, tier: str,
                      dataset: str) -> dict[str, float]:
    """Fig. 2: item ‖e_i‖ vs training degree (log x) per run, Spearman ρ in each panel.

    ``run_dirs`` maps a panel title (e.g. "bpr, wd 1e-06") to a run directory; panels fill a
    grid of two columns in that order (the paper: with weight decay on top, without below;
    BPR left, DirectAU right). Each point is one item; the clouds are rasterised.
    """
    from recrepro.reporting.plotting import new_figure, save_figure, scatter

    n = len(run_dirs)
    ncols = 2 if n > 1 else 1
    nrows = math.ceil(n / ncols)
    fig, axes = new_figure(ncols, nrows, width=6.0, height=2.5 * nrows)
    axes = np.atleast_1d(axes).ravel()
    from scipy import stats  # here, not at the top: a second of import that only this figure needs

    rhos = {}
    for ax, (title, run_dir) in zip(axes, run_dirs.items()):
        mags = pd.read_parquet(Path(run_dir) / "magnitudes.parquet")
        rho = float(stats.spearmanr(mags["train_degree"], mags["norm"]).statistic)
        rhos[title] = rho
        scatter(ax, mags["train_degree"] + 1, mags["norm"], s=3, alpha=0.5, color="#0072B2")
        ax.set_xscale("log")
        ax.set_xlabel("training degree + 1")
        ax.set_ylabel("item magnitude ‖e_i‖")
        ax.set_title(title)
        ax.text(0.03, 0.95, f"Spearman ρ = {rho:.3f}", transform=ax.transAxes, va="top", fontsize=7)
    for ax in axes[n:]:
        ax.set_visible(False)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption="item embedding magnitude vs training degree, with and without weight decay (first seed)")
    return rhos


# ------------------------------------------------------------------------- dispatcher


def draw_figure(spec: Mapping[str, Any], run_dirs: Sequence[Path], out_pdf: Path, out_png: Path, *, tier: str,
                dataset: str) -> Any:
    """Draw the figure a workflow spec describes from ``run_dirs`` (see the module table)."""
    kind = spec["kind"]
    by_method = _by_method(run_dirs)
    if kind == "wd":
        return figure_weight_decay(run_dirs, out_pdf, out_png, tier=tier, dataset=dataset,
                                   backbone=spec["backbone"], losses=spec["losses"],
                                   weight_decays=spec["weight_decays"], batched=bool(spec.get("batched", False)))
    if kind == "magnitudes":
        panels = {title: by_method[(method, seed)] for title, method, seed in spec["panels"]}
        return figure_magnitudes(panels, out_pdf, out_png, tier=tier, dataset=dataset)
    if kind == "curves":
        curves = {label: by_method[(method, seed)] for label, method, seed in spec["curves"]}
        return figure_curves(curves, out_pdf, out_png, tier=tier, dataset=dataset)
    if kind == "epochs":
        return figure_epochs(run_dirs, out_pdf, out_png, tier=tier, dataset=dataset, alphas=spec["alphas"],
                             tuned_candidates=spec["tuned_candidates"], lr=spec.get("lr"))
    if kind == "alpha":
        return figure_alpha(run_dirs, out_pdf, out_png, tier=tier, dataset=dataset, alphas=spec["alphas"],
                            lr=spec.get("lr"))
    if kind == "debias":
        return figure_debias(run_dirs, out_pdf, out_png, tier=tier, dataset=dataset, groups=spec["groups"])
    raise ValueError(f"unknown PRISM figure kind {kind!r}")


def _by_method(run_dirs: Sequence[Path]) -> dict[tuple[str, int], Path]:
    """``(method, seed) -> run directory`` from the run paths ``.../<method>/seed<k>``."""
    out = {}
    for run_dir in map(Path, run_dirs):
        out[(run_dir.parent.name, int(run_dir.name.removeprefix("seed")))] = run_dir
    return out
