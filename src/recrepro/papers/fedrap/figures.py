"""FedRAP (Li, Long & Zhou, ICLR 2024): the figures, drawn from the run records.

The verbs ``recrepro fedrap <verb>`` (:mod:`recrepro.papers.fedrap.cli`, called by
``workflow/rules/fedrap.smk``) run these functions:

``figure`` (:func:`curves_figure`)
    Learning curves (validation HR@10 / NDCG@10 per round), training loss, seconds per round,
    sparsity of C and upload size per round.
``figure --kind ablation`` (:func:`ablation_figure`)
    Ablations and curricula, and test HR@10 against the DP noise.
``embeddings`` (:func:`embeddings_figure`)
    PCA of the global item table C against the private D⁽ⁱ⁾, from the run's ``projection.parquet``
    (:func:`recrepro.papers.fedrap.run.embedding_projection`).

The released code's curves over ours are drawn by :mod:`recrepro.papers.fedrap.comparison`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.records import read_history
from recrepro.papers.fedrap.tables import runs_frame

__all__ = ["ABLATION_ORDER", "COLOR_ORDER", "CURVE_PANELS", "MAIN_METHODS", "METHOD_ORDER", "ablation_figure",
           "curves_figure", "embeddings_figure"]

#: The methods the curves figure draws, each at its validation-grid pick where that run is recorded.
MAIN_METHODS = ("fedrap", "fedrap_code", "fedrap_pool", "fedrap_code_pool", "fedmf", "pfedrec", "fedncf", "mf", "ncf")
#: Every FedRAP method in the legends' order (the paper's: FedRAP, federated baselines, centralised).
METHOD_ORDER = (*MAIN_METHODS, "fedncf_sgd", "fedrap_no", "fedrap_l2", "fedrap_fixed", "fedrap_sin", "fedrap_square",
                "fedrap_frac", "fedrap_code_no", "fedrap_code_l2", "fedrap_code_tanh", "fedrap_dp_low", "fedrap_dp",
                "fedrap_dp_high", "fedrap_dp_clip", "fedrap_dp_noise")
#: The order colours are handed out in (strongest first): a method has the same colour and marker in
#: every FedRAP figure.
COLOR_ORDER = ("fedrap", "fedmf", "pfedrec", "fedncf", "mf", "ncf", "fedrap_code", "fedrap_pool", "fedrap_code_pool",
               *METHOD_ORDER[len(MAIN_METHODS):])
#: The six panels of the curves figure per dataset: (history column, y label).
CURVE_PANELS = (("val_hr@10", "validation HR@10"), ("val_ndcg@10", "validation NDCG@10"),
                ("train_loss", "training loss (clients' mean)"), ("seconds", "wall s / round (training)"),
                ("c_sparsity", "sparsity of C (%), |C| ≤ 1e-4"), ("upload", "upload per round (MiB)"))


def _published_curve_points(dataset: str) -> dict[tuple[str, str], tuple[int, float]]:
    """``{(method, metric): (round, value)}`` of the published test values that name their round."""
    import re

    from recrepro.scorecard import expected_path, load_expected

    points = {}
    for entry in load_expected(expected_path("fedrap")).entries:
        found = re.search(r"round (\d+)", entry.source)
        if entry.published is not None and entry.dataset == dataset and found:
            points[(entry.method, entry.metric)] = (int(found.group(1)), float(entry.published))
    return points


def curves_figure(run_dirs: Sequence[str | Path], out_pdf: str, out_png: str, tier: str,
                  official_files: Sequence[str | Path] = ()) -> None:
    """Per dataset (two rows of three panels): validation HR@10 and NDCG@10, training loss and wall
    seconds per round, sparsity of C and upload size per round (mean over seeds); one legend.

    A method is drawn at its validation-grid pick (``<method>_tuned``, labelled "(tuned)") on a
    dataset where that run is recorded, else at its fixed flags (the README's).

    Published test values that name their round (the maintainer's logs in ``expected/fedrap.yaml``)
    are hollow markers at that round on the HR@10 / NDCG@10 panels.  The released code's own
    validation curves (``official_files``, ``benchmarks/official_fedrap.py``) are hollow squares in
    the colour of our run with the same flags, where that run is drawn.
    """
    from matplotlib.lines import Line2D

    from recrepro.reporting.plotting import (figure_legend, method_styles, new_figure, plot_published, published_handles,
                                   save_figure)

    runs = runs_frame(run_dirs)
    tuned = {f"{m}_tuned": m for m in MAIN_METHODS}
    if runs["method"].isin(MAIN_METHODS).any():
        runs = runs[runs["method"].isin([*MAIN_METHODS, *tuned])]
    runs = _prefer_tuned(runs, tuned)
    datasets = list(dict.fromkeys(runs["dataset"]))
    methods = [m for m in METHOD_ORDER if m in set(runs["method"])] + sorted(set(runs["method"]) - set(METHOD_ORDER))
    styles = method_styles([*COLOR_ORDER, *methods])
    fig, axes = new_figure(3, 2 * len(datasets), width=7.5, height=4.4 * len(datasets) + 0.6)
    axes = np.atleast_2d(axes)
    drawn_published = drawn_official = False
    for row, dataset in enumerate(datasets):
        panel_axes = list(axes[2 * row]) + list(axes[2 * row + 1])
        sub = runs[runs["dataset"] == dataset]
        for method in methods:
            hists = [read_history(d, "history.parquet") for d in sub[sub["method"] == method]["dir"]]
            if not hists:
                continue
            h = pd.concat(hists).groupby("round").mean(numeric_only=True).reset_index()
            drawn = sub[sub["method"] == method]["drawn"].iloc[0]
            kw = {**styles[method], "label": drawn if drawn == method else f"{method} (tuned)", "lw": 1.2,
                  "markersize": 3,
                  "markevery": max(1, len(h) // 10)}
            for ax, (column, _) in zip(panel_axes, CURVE_PANELS, strict=True):
                if column == "upload":
                    if "upload_bytes_sparse" in h and h["upload_bytes_sparse"].notna().any():
                        ax.plot(h["round"], h["upload_bytes_sparse"] / 2**20, **kw)
                        ax.plot(h["round"], h["upload_bytes_dense"] / 2**20, color=kw["color"], lw=0.8, ls=":")
                    continue
                if column not in h or not h[column].notna().any():
                    continue
                ax.plot(h["round"], (100 if column == "c_sparsity" else 1) * h[column], **kw)
        drawn_official |= _draw_official(panel_axes, official_files, dataset, set(sub["drawn"]), styles)
        for (method, metric), (rnd, value) in _published_curve_points(dataset).items():
            column = {"hr@10": 0, "ndcg@10": 1}.get(metric)
            if column is not None and method in styles:
                plot_published(panel_axes[column], rnd, value, color=styles[method]["color"])
                drawn_published = True
        for k, (ax, (_, ylabel)) in enumerate(zip(panel_axes, CURVE_PANELS, strict=True)):
            ax.set(xlabel="round (MF/NCF: epoch)", ylabel=ylabel)
            if k == 0:
                ax.set_title(dataset, loc="left", fontsize=9)
        panel_axes[5].set_title("sparse (solid) vs dense (dotted)", fontsize=7)
        panel_axes[3].set_title("shared machine: indicative", fontsize=7)
    extra = published_handles("maintainer's log, test HR/NDCG") if drawn_published else ([], [])
    if drawn_official:
        extra = ([*extra[0], Line2D([], [], color="0.3", marker="s", markerfacecolor="none", linestyle="none")],
                 [*extra[1], "released code, same flags (validation)"])
    figure_legend(fig, extra=extra if extra[0] else None, ncols=3)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=", ".join(datasets),
                caption="FedRAP vs baselines: learning curves, loss, time, sparsity of C, communication per round; "
                        "(tuned): at the validation-grid pick, else the released code's default flags for the dataset"
                        + ("; hollow: published test values at their round" if drawn_published else "")
                        + ("; hollow squares: the released code's run" if drawn_official else ""))


def _draw_official(panel_axes: Sequence[Any], official_files: Sequence[str | Path], dataset: str,
                   drawn: set[str], styles: Mapping[str, Mapping[str, Any]]) -> bool:
    """The released code's validation HR@10 / NDCG@10 on ``dataset`` as hollow squares (every tenth
    round) on the first two panels, for each curve whose flags match a run drawn there."""
    from recrepro.papers.fedrap.comparison import OFFICIAL_FLAGS, official_curves

    done = False
    for fields, official in official_curves(official_files):
        variant = OFFICIAL_FLAGS[fields["flags"]]
        if fields["dataset"] != dataset or variant not in drawn:
            continue
        step = 10 if len(official) >= 20 else 1  # a short curve (a run under way): every round
        every = official[(official["round"] - 1) % step == 0]
        for ax, column in zip(panel_axes[:2], ("val_hr@10", "val_ndcg@10"), strict=True):
            if column in every:
                ax.plot(every["round"], every[column], marker="s", linestyle="none", markersize=4,
                        markerfacecolor="none", color=styles[variant]["color"], gid="recrepro-published")
                done = True
    return done


def _prefer_tuned(runs: pd.DataFrame, tuned: Mapping[str, str]) -> pd.DataFrame:
    """Per dataset, a method's runs at its grid pick (``tuned``: run method -> method) replace its
    fixed-flag runs; ``method`` becomes the method's name and ``drawn`` the run's."""
    runs = runs.assign(drawn=runs["method"], method=runs["method"].map(lambda m: tuned.get(m, m)))
    has_tuned = runs[runs["drawn"] != runs["method"]].groupby("dataset")["method"].agg(set)
    keep = [row.drawn != row.method or row.method not in has_tuned.get(row.dataset, set())
            for row in runs.itertuples(index=False)]
    return runs[keep]


ABLATION_ORDER = ("fedrap", "fedrap_no", "fedrap_l2", "fedrap_fixed", "fedrap_sin", "fedrap_square", "fedrap_frac",
                  "fedrap_code", "fedrap_code_no", "fedrap_code_l2", "fedrap_code_tanh")


def ablation_figure(run_dirs: Sequence[str | Path], out_pdf: str, out_png: str, tier: str) -> None:
    """Top: test HR@10 of FedRAP, its ablations (FedRAP-No: μ = 0, FedRAP-L2) and curricula
    (mean ± sd over seeds), one bar per dataset.  Bottom: test HR@10 against the DP noise
    standard deviation per entry σ·clip, each point labelled with the ε (δ = 1e-5) of the run's Gaussian
    mechanism, and its clip where it is not 1 (the pre-release code's setting: σ 1, clip 0.1); FedRAP
    without DP as a dotted level, noise without a clip (no ε) as diamonds off the curve."""
    from recrepro.reporting.plotting import figure_legend, fixed_colors, new_figure, note_no_data, save_figure

    runs = runs_frame(run_dirs)
    names = [v for v in ABLATION_ORDER if v in set(runs["method"])]
    # only the datasets with a bar or a DP point: a legend entry with nothing drawn misleads
    shown = runs["method"].isin(names) | runs["dp_noise"].notna()
    datasets = [d for d in dict.fromkeys(runs["dataset"]) if d in set(runs.loc[shown, "dataset"])]
    colors = fixed_colors(datasets)  # bars and lines are datasets here
    fig, axes = new_figure(1, 2, width=6.5, height=6.0)
    ax_ab, ax_dp = np.ravel(axes)
    dp_drawn = False
    labelled: list[pd.DataFrame] = []  # each dataset's points on its noise curve
    width = 0.8 / max(len(datasets), 1)
    for j, dataset in enumerate(datasets):
        sub = runs[runs["dataset"] == dataset]
        agg = sub.groupby("method")["hr@10"].agg(["mean", "std"])
        xs = np.arange(len(names)) + j * width
        ax_ab.bar(xs, [agg["mean"].get(n, np.nan) for n in names], width,
                  yerr=[agg["std"].get(n, 0.0) if np.isfinite(agg["std"].get(n, np.nan)) else 0.0 for n in names],
                  color=colors[dataset], label=dataset, error_kw={"elinewidth": 0.8})
        dp = sub[sub["dp_noise"].notna() | (sub["method"] == "fedrap")].copy()
        # noise std per entry: σ·clip, or the std itself where nothing is clipped; no DP: 0
        dp["std"] = dp["dp_noise"].where(dp["dp_clip"].isna(), dp["dp_noise"] * dp["dp_clip"]).fillna(0.0)
        dp["clip"] = dp["dp_clip"].fillna(np.inf)  # no DP, or noise without a clip: nothing clipped
        if len(dp) > 1:
            g = (dp.groupby(["std", "clip"]).agg(hr=("hr@10", "mean"), eps=("dp_epsilon", "mean"))
                 .reset_index().sort_values(["std", "clip"], ascending=[True, False]))
            unclipped = ~np.isfinite(g["clip"]) & (g["std"] > 0)  # off the line: no privacy guarantee
            no_dp = ~np.isfinite(g["clip"]) & (g["std"] == 0)
            on_line = ~unclipped & ~no_dp
            # no DP is the reference level, not a point of the noise curve (it has no clip): a dotted
            # line, so the curve does not drop from it at σ·clip = 0 and the datasets' labels cannot collide
            for hr in g.loc[no_dp, "hr"]:
                ax_dp.axhline(hr, color=colors[dataset], linestyle=":", linewidth=1.0)
            ax_dp.plot(g.loc[on_line, "std"], g.loc[on_line, "hr"], marker="o", color=colors[dataset],
                       label=dataset)
            ax_dp.plot(g.loc[unclipped, "std"], g.loc[unclipped, "hr"], marker="D", linestyle="none",
                       color=colors[dataset])
            dp_drawn = True
            labelled.append(g[on_line])
    _label_dp_settings(ax_dp, labelled)
    ax_ab.set_xticks(np.arange(len(names)) + width * (len(datasets) - 1) / 2, names, rotation=30, ha="right")
    ax_ab.set(ylabel="test HR@10", title="(a) ablations and curricula (paper mode unless *_code*)")
    ax_ab.grid(False, axis="x")
    ax_dp.margins(x=0.06, y=0.1)  # room for the labels under and beside the outer points
    ax_dp.set(xlabel="noise std per entry σ·clip (clip 1 unless labelled; δ = 1e-5)", ylabel="test HR@10",
              title="(b) DP on the upload of C (dotted: no DP; ◆: noise, no clip, no ε)")
    if not names:
        note_no_data(ax_ab, "no run of FedRAP, its ablations or curricula is recorded")
    if not dp_drawn:
        note_no_data(ax_dp, "no DP run recorded (fedrap_dp_code, fedrap_dp_low, fedrap_dp, fedrap_dp_high,\n"
                            "fedrap_dp_clip, fedrap_dp_noise beside fedrap on the same dataset)")
    figure_legend(fig, title="dataset")
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=", ".join(datasets),
                caption="FedRAP ablations, curricula and differential privacy")


def _label_dp_settings(ax: Any, curves: Sequence[pd.DataFrame]) -> None:
    """One label per DP setting (noise std, clip) of the curves, however many datasets ran it: its ε
    (the datasets' values joined where they differ) and its clip where it is not 1, above the highest
    of its points; the clip without noise under the lowest, clear of the small stds' labels.  A label
    per dataset and point had stacked the datasets' identical labels onto each other."""
    if not curves:
        return
    points = pd.concat(curves, ignore_index=True)
    for (std, clip), part in points.groupby(["std", "clip"], sort=True):
        if std == 0:
            ax.annotate(f"clip {clip:g}, no noise", (std, part["hr"].min()), fontsize=7,
                        textcoords="offset points", xytext=(3, -9))
            continue
        eps = " / ".join(dict.fromkeys(f"{e:.3g}" for e in part["eps"]))
        ax.annotate(f"ε={eps}" + ("" if clip == 1 else f", clip {clip:g}"), (std, part["hr"].max()), fontsize=7,
                    textcoords="offset points", xytext=(3, 3))


def embeddings_figure(projection_path: str | Path, out_pdf: str, out_png: str, tier: str, dataset: str) -> None:
    """PCA of item embeddings: the global C against the private D⁽ⁱ⁾ of a few users, from the
    run's ``projection.parquet`` (:func:`recrepro.papers.fedrap.run.embedding_projection`)."""
    from recrepro.reporting.plotting import figure_legend, new_figure, save_figure, scatter

    data = pd.read_parquet(projection_path)
    fig, ax = new_figure(1, 1, width=5.0, height=4.2)
    if not (data["table"] == "D").any():
        ax.text(0.5, 0.5, "no private item tables in this run", ha="center")
    else:
        groups = [("C (global)", data[data["table"] == "C"])]
        groups += [(f"D⁽ⁱ⁾, user {u}", part) for u, part in data[data["table"] == "D"].groupby("user", sort=True)]
        markers = ["o", "^", "s", "D", "v"]
        from recrepro.reporting.plotting import fixed_colors

        colors = fixed_colors([label for label, _ in groups])
        for k, (label, block) in enumerate(groups):
            scatter(ax, block["pc1"], block["pc2"], s=5, alpha=0.6, marker=markers[k % len(markers)], label=label,
                    color=colors[label])
        proj = data[["pc1", "pc2"]].to_numpy()
        # a few rows that a user trained hard (|D − C| grown large) would squash the rest: show the
        # central 98% of the points and say how many fall outside
        lo, hi = np.percentile(proj, 1, axis=0), np.percentile(proj, 99, axis=0)
        pad = 0.1 * (hi - lo)
        outside = int((((proj < lo - pad) | (proj > hi + pad)).any(1)).sum())
        ax.set_xlim(lo[0] - pad[0], hi[0] + pad[0])
        ax.set_ylim(lo[1] - pad[1], hi[1] + pad[1])
        n_items = int((data["table"] == "C").sum())
        ax.set(xlabel="PC 1", ylabel="PC 2")
        ax.set_title(f"{n_items} random items; {outside} points outside the view", fontsize=8)
        figure_legend(fig, ncols=4)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption="PCA of FedRAP's global item table C vs the private D⁽ⁱ⁾ (first seed, last round)")
