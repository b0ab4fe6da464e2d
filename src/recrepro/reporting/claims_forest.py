"""The forest plot of a paper's claim checks (``results/<tier>/<paper>/checks.csv``, written by
``recrepro claims``): one row per check, its effect and interval, coloured by outcome.

It lives with the pages, not in :mod:`recrepro.scorecard`: the scorecard decides, the pages draw.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import PercentFormatter

from recrepro.reporting.plotting import (
    FONT_SIZES,
    MAX_WIDTH_IN,
    figure_legend,
    note_no_data,
    panel_grid,
    save_figure,
    style_axes,
)

#: Colour (Okabe-Ito), marker and legend label of each drawn outcome of a check.
FOREST_OUTCOMES: dict[str, tuple[str, str]] = {
    "holds": ("#009E73", "o"),
    "against": ("#D55E00", "s"),
    "inconclusive": ("#7F7F7F", "D"),
}
NOT_TESTABLE = "not testable"
#: The x label of each unit's panel, in panel order (an unknown unit gets a panel of its own, after these).
FOREST_UNITS: dict[str, str] = {
    "relative": "effect, relative to the reference side's mean",
    "difference": "effect, absolute difference",
    "rho": "Spearman ρ",
    "tau": "trend statistic τ",
    "": "effect",
}
FOREST_TARGET_COLOR = "#56B4E9"
FOREST_LABEL_CHARS = 60
_ROW_IN, _PANEL_IN, _FIGURE_IN, _MAX_HEIGHT_IN = 0.2, 0.55, 1.1, 20.0
_CHECK_COLUMNS = ("paper", "claim", "check", "outcome", "effect", "ci_low", "ci_high", "ci_level", "unit",
                  "target_low", "target_high", "defect")


@dataclass(frozen=True)
class ForestSummary:
    """What :func:`draw_claims_forest` drew: the figure, one panel per unit, the checks per panel."""

    figure: Figure
    panels: tuple[str, ...]
    rows: tuple[int, ...]
    error_bars: int
    not_drawn: int


def _read_checks(checks_csv: str | Path) -> pd.DataFrame:
    """The checks table: text columns as strings ('' for empty), numbers as floats (NaN for empty)."""
    frame = pd.read_csv(checks_csv, dtype=str, keep_default_na=False)
    missing = [c for c in _CHECK_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{checks_csv}: no column(s) {missing}")
    for column in ("effect", "ci_low", "ci_high", "ci_level", "target_low", "target_high"):
        frame[column] = pd.to_numeric(frame[column].replace("", np.nan), errors="raise")
    unknown = sorted(set(frame["outcome"]) - set(FOREST_OUTCOMES) - {NOT_TESTABLE})
    if unknown:
        raise ValueError(f"{checks_csv}: unknown outcome(s) {unknown}; expected {[*FOREST_OUTCOMES, NOT_TESTABLE]}")
    return frame


def _row_label(check: str, defect: str, ci_note: str) -> str:
    # "dataset: `a` vs `b` (label)" past the length: the label tells the rows of a claim apart, the
    # methods repeat, so they go first (else a cut in the middle loses the metric of the label)
    labelled = re.match(r"^(.*?): `[^`]*` vs `[^`]*` (\(.*\))$", check)
    if labelled and len(check) > FOREST_LABEL_CHARS:
        check = f"{labelled.group(1)} {labelled.group(2)}"
    text = check.replace("`", "").replace("$", r"\$")
    if len(text) > FOREST_LABEL_CHARS:  # cut in the middle: the dataset leads, the condition (pool, ...) ends
        head = (FOREST_LABEL_CHARS - 1) // 2
        text = text[:head].rstrip() + "…" + text[len(text) - (FOREST_LABEL_CHARS - 1 - head):].lstrip()
    return text + ci_note + (" (defect)" if defect else "")


def _draw_panel(ax: Axes, rows: pd.DataFrame, unit: str, claims: list[str], fontsize: float, level: float) -> int:
    """One unit's checks, grouped by claim under a bold claim header; returns the error bars drawn."""
    bounds = rows[["effect", "ci_low", "ci_high", "target_low", "target_high"]].to_numpy(dtype=float)
    finite = np.append(bounds[np.isfinite(bounds)], 0.0)
    low, high = finite.min(), finite.max()
    pad = 0.06 * (high - low) if high > low else 0.05
    xlim = (low - pad, high + pad)
    # a relative effect of several hundred percent (a sparsity share) would squeeze every other row
    # into a sliver: past ±100 % the axis turns logarithmic, and its label says so
    symlog = unit == "relative" and max(abs(xlim[0]), abs(xlim[1])) > 2.0
    if symlog:
        xlim = (xlim[0], xlim[1] * 1.5)  # room for the marker at the far end on the log side
    labels, bold, y, error_bars = [], [], 0, 0
    present = set(rows["claim"])
    for claim in [c for c in claims if c in present]:
        if y:
            ax.axhline(y - 0.5, color="0.8", linewidth=0.6, zorder=1)
        labels.append(claim)
        bold.append(True)
        y += 1
        for row in rows[rows["claim"] == claim].itertuples():
            color, marker = FOREST_OUTCOMES[row.outcome]
            alpha = 0.55 if row.defect else 1.0
            target = (row.target_low if math.isfinite(row.target_low) else xlim[0],
                      row.target_high if math.isfinite(row.target_high) else xlim[1])
            if math.isfinite(row.target_low) or math.isfinite(row.target_high):
                ax.barh(y, target[1] - target[0], left=target[0], height=0.75, color=FOREST_TARGET_COLOR,
                        alpha=0.25, linewidth=0, zorder=0)
            if math.isfinite(row.ci_low) and math.isfinite(row.ci_high):
                # centred on the interval, not the point: a CI need not be symmetric about the effect
                ax.errorbar((row.ci_low + row.ci_high) / 2, y, xerr=(row.ci_high - row.ci_low) / 2, fmt="none",
                            ecolor=color, elinewidth=1.2, capsize=2.5, alpha=alpha, zorder=3)
                error_bars += 1
            ax.plot(row.effect, y, marker=marker, markersize=4.5, color=color, markeredgecolor=color,
                    markerfacecolor="white" if row.defect else color, markeredgewidth=1.2, alpha=alpha,
                    linestyle="none", zorder=4)
            ci_note = "" if not math.isfinite(row.ci_level) or row.ci_level == level else f" ({row.ci_level:.0%} CI)"
            labels.append(_row_label(row.check, row.defect, ci_note))
            bold.append(False)
            y += 1
    ax.axvline(0.0, color="0.3", linewidth=0.8, zorder=1)
    ax.set_xlim(*xlim)
    if symlog:
        ax.set_xscale("symlog", linthresh=1.0, linscale=1.0)
        ax.set_xticks([t for t in (-1.0, -0.5, 0.0, 0.5, 1.0, 5.0, 10.0, 50.0, 100.0) if xlim[0] <= t <= xlim[1]])
    ax.set_ylim(y - 0.5, -0.5)
    ax.set_yticks(np.arange(y), labels, fontsize=fontsize)
    for tick, is_header, text in zip(ax.get_yticklabels(), bold, labels, strict=True):
        tick.set_fontweight("bold" if is_header else "normal")
        tick.set_color("0.45" if text.endswith("(defect)") else "black")
    ax.tick_params(axis="y", length=0)
    ax.grid(False, axis="y")
    ax.set_xlabel(FOREST_UNITS.get(unit, unit) + (" (logarithmic past ±100 %)" if symlog else ""))
    if unit == "relative":
        span = xlim[1] - xlim[0]
        ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0 if span >= 0.1 else 1 if span >= 0.01 else 2))
    return error_bars


def draw_claims_forest(checks_csv: str | Path, out_png: str | Path, out_pdf: str | Path | None = None, *,
                       title: str | None = None, tier: str = "", dataset: str = "all") -> ForestSummary:
    """Forest plot of a paper's claim checks: effect and CI per check against the claim's target region.

    One row per check with an effect, grouped under its claim; one panel per unit (the panels stacked,
    their heights in proportion to their rows); the marker and colour say the outcome, a hollow marker
    and grey label a check run under a documented defect; the shaded band is the region the claim asks
    the effect to lie in (open sides run to the panel's edge), the vertical line marks 0.

    Parameters
    ----------
    checks_csv:
        ``results/<tier>/<paper>/checks.csv``: one row per check (``paper, claim, check, outcome, effect,
        ci_low, ci_high, ci_level, unit, target_low, target_high, ..., defect``); ``not testable`` rows and
        rows without an effect are counted in the caption, not drawn.
    out_png, out_pdf:
        Where to write the figure (PNG; PDF too unless ``None``), with the house style's fixed metadata.
    title:
        Figure title; default ``"<paper>: claim checks"``.
    tier, dataset:
        The caption line's tier and dataset (:func:`recrepro.reporting.plotting.caption_line`).

    Returns
    -------
    ForestSummary
        The figure, the units of its panels, the checks drawn per panel, the error bars drawn and the
        checks not drawn.

    Raises
    ------
    ValueError
        A row's outcome is none of holds, against, inconclusive, not testable.
    """
    frame = _read_checks(checks_csv)
    paper = frame["paper"].iloc[0] if len(frame) else Path(checks_csv).parent.name
    title = title if title is not None else f"{paper}: claim checks"
    drawn = frame[(frame["outcome"] != NOT_TESTABLE) & np.isfinite(frame["effect"])]
    not_drawn = len(frame) - len(drawn)
    units = [u for u in FOREST_UNITS if u in set(drawn["unit"])] + sorted(set(drawn["unit"]) - set(FOREST_UNITS))
    claims = list(dict.fromkeys(frame["claim"]))
    not_testable = int((frame["outcome"] == NOT_TESTABLE).sum())
    parts = [f"{not_testable} of {len(frame)} checks not testable here"] if not_testable else []
    parts += [f"{not_drawn - not_testable} without an effect"] if not_drawn > not_testable else []
    skipped = ", ".join(parts) + " (not drawn)" if parts else ""
    if not units:
        figure = Figure(figsize=(MAX_WIDTH_IN, 2.2), layout="constrained")
        ax = figure.subplots()
        note_no_data(ax, "no testable checks")
        figure.suptitle(title, fontsize=FONT_SIZES["title"])
        save_figure(figure, out_pdf, out_png, tier=tier, dataset=dataset, caption=skipped)
        return ForestSummary(figure, (), (), 0, not_drawn)
    slots = [len(drawn[drawn["unit"] == u]) + drawn.loc[drawn["unit"] == u, "claim"].nunique() for u in units]
    height = min(_MAX_HEIGHT_IN, _FIGURE_IN + _PANEL_IN * len(units) + _ROW_IN * sum(slots))
    row_in = (height - _FIGURE_IN - _PANEL_IN * len(units)) / sum(slots)  # under _ROW_IN past the height cap
    fontsize = float(np.clip(FONT_SIZES["annotation"] * row_in / _ROW_IN, 5.0, FONT_SIZES["annotation"]))
    figure = Figure(figsize=(MAX_WIDTH_IN, height), layout="constrained")
    axes = figure.subplots(len(units), 1, squeeze=False, gridspec_kw={"height_ratios": slots})[:, 0]
    levels = drawn["ci_level"].dropna()
    level = float(levels.mode().iloc[0]) if len(levels) else 0.95
    error_bars = 0
    for ax, unit in zip(axes, units, strict=True):
        style_axes(ax)
        error_bars += _draw_panel(ax, drawn[drawn["unit"] == unit], unit, claims, fontsize, level)
    present = [o for o in FOREST_OUTCOMES if o in set(drawn["outcome"])]
    handles = [Line2D([], [], color=FOREST_OUTCOMES[o][0], marker=FOREST_OUTCOMES[o][1], linestyle="none")
               for o in present]
    names = list(present)
    if (drawn["defect"] != "").any():
        handles.append(Line2D([], [], color="0.45", marker="o", markerfacecolor="white", linestyle="none"))
        names.append("ran under a defect")
    if np.isfinite(drawn[["target_low", "target_high"]].to_numpy(dtype=float)).any():
        handles.append(Patch(color=FOREST_TARGET_COLOR, alpha=0.25, linewidth=0))
        names.append("claim's target region")
    legend = figure_legend(figure, extra=(handles, names), title=title)  # a suptitle would overlap it
    legend.get_title().set_fontsize(FONT_SIZES["title"])
    caption = "; ".join(part for part in (f"point: effect; bar: {level:.0%} confidence interval", "vertical line: 0",
                                          skipped) if part)
    save_figure(figure, out_pdf, out_png, tier=tier, dataset=dataset, caption=caption)
    return ForestSummary(figure, tuple(units), tuple(len(drawn[drawn["unit"] == u]) for u in units), error_bars,
                         not_drawn)
