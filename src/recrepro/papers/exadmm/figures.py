"""exADMM (Togashi, Abe, Saito, WWW 2024): Figures 1-3, drawn from the run records.

The verbs ``recrepro exadmm <verb>`` (:mod:`recrepro.papers.exadmm.cli`, called by
``workflow/rules/exadmm.smk``) run these functions:

``tradeoff`` (:func:`figure_tradeoff`)
    Figure 1: accuracy (NDCG@K, Recall@K) vs exposure concentration (Gini@K, Coverage@K).
``convergence`` (:func:`figure_convergence`)
    Figure 3: ADMM residuals and objective per epoch.
``figure-scalability`` (:func:`figure_scalability`)
    Figure 2, drawn from the timings record of ``train --mode scalability``
    (:func:`recrepro.papers.exadmm.run.scalability`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.io import read_json
from recrepro.papers.exadmm.tables import _mean_over_seeds, load_runs
from recrepro.records import read_history, read_record_json

__all__ = ["FAMILIES", "family_colors", "figure_convergence", "figure_scalability", "figure_tradeoff"]


FAMILIES = ("ials", "exadmm", "fairrec")
#: Families in the paper's order (legends; their colours are fixed across exADMM's figures).
FAMILY_LABELS = {"ials": "iALS", "exadmm": "exADMM", "fairrec": "FairRec"}
#: Metric names as the paper writes them.
METRIC_LABELS = {"ndcg": "nDCG", "recall_liang": "Recall", "gini": "Gini", "coverage": "Coverage"}


def family_colors() -> dict[str, str]:
    """iALS, exADMM, FairRec: the same colour in every exADMM figure."""
    from recrepro.reporting.plotting import fixed_colors

    return fixed_colors(FAMILIES)


def _is_code_step(method: str) -> bool:
    """An exADMM point run with the released code's U-step (``exadmm_code``, ``exadmm_code_sw<i>``)."""
    return method == "exadmm_code" or method.startswith("exadmm_code_")


def _tradeoff_series() -> list[tuple[str, Any, str, str]]:
    """Figure 1's series: (family, which of its methods, marker, legend label). exADMM's points under
    the released code's U-step are squares of exADMM's colour, and its points with the exact per-user
    curvature diamonds, apart from our default step's (docs/deviations.md#exadmm-u-step-size)."""
    def exact(m: str) -> bool:
        return m == "exadmm_exact" or m.startswith("exadmm_exact_")

    return [("ials", lambda m: True, "o", FAMILY_LABELS["ials"]),
            ("exadmm", lambda m: not _is_code_step(m) and not exact(m), "o", FAMILY_LABELS["exadmm"]),
            ("exadmm", _is_code_step, "s", f"{FAMILY_LABELS['exadmm']}, released code's U-step"),
            ("exadmm", exact, "D", f"{FAMILY_LABELS['exadmm']}, exact curvature"),
            ("fairrec", lambda m: True, "o", FAMILY_LABELS["fairrec"])]


def figure_tradeoff(run_files, out_pdf, out_png, *, tier: str, ks: Sequence[int]) -> None:
    """Figure 1: per dataset and K, NDCG@K and Recall@K against Gini@K and Coverage@K (test, seed mean).

    One row per (dataset, K), columns nDCG vs Gini, nDCG vs Coverage, Recall vs Gini, Recall vs
    Coverage; one marker per operating point (filled; exADMM under the released code's U-step:
    squares). The numbers measured with the official
    code (``expected/exadmm.yaml``) are drawn as hollow markers where both coordinates are given.
    """
    from recrepro.reporting.plotting import figure_legend, new_figure, plot_published, published_handles, save_figure
    from recrepro.scorecard import published_value, published_values

    frame = _mean_over_seeds(load_runs(run_files))
    datasets = sorted(frame["dataset"].unique())
    panels = [(y, x) for y in ("ndcg", "recall_liang") for x in ("gini", "coverage")]
    n_rows = len(datasets) * len(ks)
    fig, axes = new_figure(ncols=len(panels), nrows=n_rows, width=7.5, height=1.9 * n_rows + 0.3)
    axes = np.atleast_2d(axes)
    colors = family_colors()
    published = published_values("exadmm")
    drawn_published = False
    row = 0
    for dataset in datasets:
        sub = frame[frame["dataset"] == dataset]
        for k in ks:
            for col, (y, x) in enumerate(panels):
                ax = axes[row, col]
                for family, series, marker, label in _tradeoff_series():
                    pts = sub[(sub["family"] == family) & sub["method"].map(series)] if f"test:{x}@{k}" in sub \
                        else sub.iloc[0:0]
                    if pts.empty or f"test:{y}@{k}" not in pts:
                        continue
                    pts = pts.sort_values(f"test:{x}@{k}")
                    ax.plot(pts[f"test:{x}@{k}"], pts[f"test:{y}@{k}"], marker=marker, linestyle="none", markersize=4,
                            color=colors[family], label=label)
                    for method in sorted(set(pts["method"])):
                        px = published_value(published, dataset, method, f"{x}@{k}")
                        py = published_value(published, dataset, method, f"{y}@{k}")
                        if px is not None and py is not None:
                            plot_published(ax, px, py, color=colors[family])
                            drawn_published = True
                ax.set_xlabel(f"{METRIC_LABELS[x]}@{k}")
                ax.set_ylabel(f"{METRIC_LABELS[y]}@{k}")
                if col == 0:
                    ax.set_title(f"{dataset}, K = {k}", loc="left", fontsize=9)
            row += 1
    figure_legend(fig, loc="outside upper center",
                  extra=published_handles("official code") if drawn_published else None)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=",".join(datasets),
                caption="accuracy vs exposure concentration, one point per operating point (test, seed mean)"
                        + ("; hollow: values measured with the official code" if drawn_published else ""))


#: Line colours of the convergence figure's terms (fixed; the datasets differ by dash).
CONVERGENCE_TERMS = {
    "residual_V": "‖ΔV‖", "residual_U": "‖ΔU‖", "residual_s": "‖Δs‖", "residual_w": "‖Δw‖ = ‖ū − s‖",
    "loss": "total", "loss_observed": "observed", "loss_unobserved": "unobserved", "loss_reg": "L2",
    "loss_expo": "exposure Λ‖Vū‖²",
}


def figure_convergence(history_files, out_pdf, out_png, *, tier: str) -> None:
    """Figure 3: exADMM residuals (left) and objective terms (right) per epoch, log scale.

    Colour = term, dash = dataset; one legend for the figure. The first history file of each
    dataset is drawn (the rule gives the base exADMM run of every seed; the curves of the seeds
    look alike).
    """
    from recrepro.reporting.plotting import (FIXED_METHOD_COLORS, KEY_COLOR, LINESTYLES, figure_legend, method_styles,
                                   new_figure, save_figure)

    fig, axes = new_figure(ncols=2, width=7.0, height=3.2)
    # colour and marker per term (nine terms, eight colours); the dash is the dataset's
    styles = {term: {"color": style["color"], "marker": style["marker"]}
              for term, style in method_styles(list(CONVERGENCE_TERMS)).items()}
    # the ninth term would wrap round to the first one's colour (‖ΔV‖: blue, a look-alike marker): neutral grey
    styles["loss_expo"]["color"] = FIXED_METHOD_COLORS["random"]
    datasets: list[str] = []
    for f in history_files:
        hist = pd.DataFrame(read_history(Path(f).parent, Path(f).name)["train"])
        d = read_record_json(Path(f).parent / "metrics.json")["dataset"]
        if d in datasets:
            continue  # one seed per dataset: further seeds would stack identical-looking lines
        datasets.append(d)
        dash = LINESTYLES[(len(datasets) - 1) % len(LINESTYLES)]
        for ax, keys in ((axes[0], ("residual_V", "residual_U", "residual_s", "residual_w")),
                         (axes[1], ("loss", "loss_observed", "loss_unobserved", "loss_reg", "loss_expo"))):
            for key in keys:
                if key in hist:
                    ax.semilogy(hist["epoch"], hist[key].clip(lower=1e-12), linestyle=dash, linewidth=1.2,
                                markersize=3, markevery=max(1, len(hist) // 8), label=CONVERGENCE_TERMS[key],
                                **styles[key])
    axes[0].set(xlabel="epoch", ylabel="residual (Frobenius / 2-norm)", title="(a) residuals")
    axes[1].set(xlabel="epoch", ylabel="objective term", title="(b) objective")
    extra = None
    if len(datasets) > 1:  # the dash of each dataset, in the same legend
        from matplotlib.lines import Line2D

        extra = ([Line2D([], [], color=KEY_COLOR, linestyle=LINESTYLES[i % len(LINESTYLES)])
                  for i in range(len(datasets))], datasets)
    figure_legend(fig, extra=extra, ncols=5)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=",".join(sorted(set(datasets))),
                caption="exADMM convergence: ‖ΔV‖, ‖ΔU‖, ‖Δs‖, ‖Δw‖ = ‖ū−s‖ and objective terms per epoch"
                        + ("; line style: dataset" if len(datasets) > 1 else ""))


def figure_scalability(record_json, out_pdf, out_png, *, tier: str) -> None:
    """Figure 2's two panels (seconds per epoch vs d, vs users) from :func:`scalability`'s record."""
    from recrepro.reporting.plotting import figure_legend, new_figure, save_figure

    record = read_json(record_json)
    caption = (f"seconds per training epoch (mean of {record['epochs']}); FairRec = iALS epoch + one "
               f"post-processing pass (k {record['fairrec_k']}); {record['threads']} threads, {record['device']}")
    frame = pd.DataFrame(record["records"])
    fig, axes = new_figure(ncols=2, width=7.0, height=3.0)
    colors = family_colors()
    for family in FAMILIES:
        a = frame[(frame.family == family) & (frame.axis == "dim")]
        axes[0].plot(a["dim"], a["seconds"], marker="o", color=colors[family], label=FAMILY_LABELS[family])
        b = frame[(frame.family == family) & (frame.axis == "users")]
        axes[1].plot(b["n_users"], b["seconds"], marker="o", color=colors[family], label=FAMILY_LABELS[family])
    axes[0].set(xlabel="embedding size d", title="(a) vs embedding size")
    axes[1].set(xlabel="training users", title="(b) vs number of users")
    for ax in axes:
        # log: FairRec's post-processing is seconds where an iALS / exADMM epoch is a tenth of one
        ax.set_yscale("log")
        ax.set_ylabel("seconds / epoch (log)")
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=record["dataset"], caption=caption)
