"""House plotting style: figures, method colours, error-bar plots and deterministic saving.

Figures are built with :class:`matplotlib.figure.Figure` directly, never through
``pyplot``, so this module neither picks a backend nor touches pyplot's global figure
state (importers that chose an interactive backend keep it). Style is applied to the
axes explicitly rather than through global ``rcParams``.

Every saved figure carries a caption line ``tier: <tier> · dataset: <dataset> · <caption>``
so a smoke-tier plot cannot be mistaken for a real one, and is written atomically as
PDF and PNG with fixed metadata (identical input gives identical bytes).

The house style, in one place:

* a colour-blind-safe palette (Okabe-Ito) with a **fixed colour per method across all the
  figures of a paper** (:func:`fixed_colors`: the paper's method order decides, not the
  figure's), plus marker and dash for papers with more methods than colours
  (:func:`method_styles`);
* figures at most :data:`MAX_WIDTH_IN` wide, panels in a grid (:func:`panel_grid`), constrained
  layout, font sizes from :data:`FONT_SIZES` (colour bars too: :func:`add_colorbar`), PNG at
  :data:`PNG_DPI` dpi, so text stays readable at 100 % zoom on a laptop screen, in a palette of
  :data:`PNG_COLORS` colours (a third of a full-colour PNG's bytes, no visible change);
* **one legend per figure** (:func:`figure_legend`), outside the panels;
* published values drawn as **hollow markers** beside ours (:func:`plot_published`), the legend
  saying which is which (:func:`published_handles`);
* dense scatters rasterised (:func:`scatter`), so the PDFs stay small.

The style's settings (:mod:`.figure_style`), the methods' colours (:mod:`.method_colors`) and saving
(:mod:`.figure_save`) are modules of their own; everything is importable from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colorbar import Colorbar
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D

# callers reach save_figure through this module (the tests stand in for it here)
from recrepro.reporting.figure_save import caption_line, save_figure
from recrepro.reporting.figure_style import (
    CAPTION_COLOR,
    CAPTION_GID,
    CAPTION_SEPARATOR,
    COLORS,
    DEFAULT_WIDTH_IN,
    DENSE_POINTS,
    FIXED_METHOD_COLORS,
    FONT_SIZES,
    HOUSE_RC,
    LINESTYLES,
    MARKERS,
    MAX_WIDTH_IN,
    OVERFLOW_COLORS,
    PALETTE,
    PANEL_ASPECT,
    PNG_COLORS,
    PNG_DPI,
    house_style,
    style_axes,
)
from recrepro.reporting.method_colors import fixed_colors, method_color, method_colors, method_styles, ordered

def new_figure(
    ncols: int = 1,
    nrows: int = 1,
    *,
    width: float = DEFAULT_WIDTH_IN,
    height: float | None = None,
    sharex: bool = False,
    sharey: bool = False,
) -> tuple[Figure, Any]:
    """A house-styled figure with a grid of axes (no pyplot involved).

    Parameters
    ----------
    ncols, nrows:
        Panel grid.
    width:
        Figure width in inches, at most :data:`MAX_WIDTH_IN` (a wider one is shrunk to it).
    height:
        Figure height in inches; default gives each panel a 4:3 aspect.
    sharex, sharey:
        Share axes between panels.

    Returns
    -------
    (Figure, Axes or ndarray of Axes)
        Like ``pyplot.subplots``: a single Axes for a 1x1 grid, a 1-D array for one
        row or column, a 2-D array otherwise.
    """
    if ncols < 1 or nrows < 1:
        raise ValueError(f"need at least one panel, got ncols={ncols}, nrows={nrows}")
    width = min(float(width), MAX_WIDTH_IN)
    if height is None:
        height = width / ncols * PANEL_ASPECT * nrows
    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=True)
    for ax in np.atleast_1d(axes).ravel():
        style_axes(ax)
    return figure, axes


def panel_grid(
    n_panels: int,
    *,
    max_cols: int = 3,
    panel_width: float = 2.5,
    panel_height: float | None = None,
    sharex: bool = False,
    sharey: bool = False,
) -> tuple[Figure, list[Axes]]:
    """A figure with ``n_panels`` panels in a grid of at most ``max_cols`` columns (row-major).

    Panels the grid has beyond ``n_panels`` are hidden.

    Parameters
    ----------
    n_panels:
        Number of panels.
    max_cols:
        Columns at most; the rows follow.
    panel_width, panel_height:
        Size of one panel in inches (height default: 4:3); the figure is at most
        :data:`MAX_WIDTH_IN` wide, so many columns get narrower panels.
    sharex, sharey:
        Share axes between panels.

    Returns
    -------
    (Figure, list of Axes)
        The figure and its ``n_panels`` visible axes in reading order.
    """
    if n_panels < 1:
        raise ValueError(f"need at least one panel, got {n_panels}")
    ncols = min(n_panels, max(1, max_cols))
    nrows = math.ceil(n_panels / ncols)
    width = min(MAX_WIDTH_IN, ncols * panel_width)
    height = nrows * (panel_height if panel_height is not None else width / ncols * PANEL_ASPECT)
    figure, axes = new_figure(ncols, nrows, width=width, height=height, sharex=sharex, sharey=sharey)
    flat = list(np.atleast_1d(axes).ravel())
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return figure, flat[:n_panels]


# ----------------------------------------------------------------------------- plots


def _sd_array(sd: Any, n_points: int) -> np.ndarray | None:
    if sd is None:
        return None
    sd_values = np.broadcast_to(np.asarray(sd, dtype=np.float64), (n_points,)).copy()
    # A single seed has no sd (NaN): draw no bar rather than let NaN hide the point.
    sd_values[~np.isfinite(sd_values)] = 0.0
    return sd_values


def errorbar_lines(
    ax: Axes,
    x: Sequence[float],
    series: Mapping[str, tuple[Sequence[float], Sequence[float] | None]],
    *,
    colors: Mapping[str, str] | None = None,
    capsize: float = 2.5,
    legend: bool = True,
    band: bool = False,
) -> dict[str, str]:
    """One line with ±sd error bars (or a shaded ±sd band) per method.

    Parameters
    ----------
    ax:
        Target axes.
    x:
        Shared x values (e.g. a hyper-parameter grid).
    series:
        ``{method: (means, sds)}``; ``sds`` may be ``None`` (no bars) and NaN entries
        (single seed) draw no bar.
    colors:
        Method colours; default :func:`method_colors` of the series' methods.
    capsize:
        Error-bar cap size in points.
    legend:
        Add a legend to the axes (leave it out and call :func:`figure_legend` for one per figure).
    band:
        Draw the sd as a shaded band around the line (as papers that say "filled regions
        denote standard deviation") instead of error bars.

    Returns
    -------
    dict
        The colour used per method.
    """
    x_values = np.asarray(x, dtype=np.float64)
    colors = dict(colors) if colors is not None else method_colors(list(series))
    for method, (means, sds) in series.items():
        mean_values = np.asarray(means, dtype=np.float64)
        if mean_values.shape != x_values.shape:
            raise ValueError(f"{method}: {mean_values.size} means for {x_values.size} x values")
        sd_values = _sd_array(sds, x_values.size)
        if band:
            ax.plot(x_values, mean_values, label=method, color=colors[method], marker="o", markersize=3.5,
                    linewidth=1.2)
            if sd_values is not None and np.any(sd_values > 0):
                ax.fill_between(x_values, mean_values - sd_values, mean_values + sd_values, color=colors[method],
                                alpha=0.2, linewidth=0)
            continue
        ax.errorbar(
            x_values, mean_values, yerr=sd_values, label=method,
            color=colors[method], marker="o", markersize=3.5, linewidth=1.2, capsize=capsize, elinewidth=0.8,
        )
    if legend and series:
        ax.legend(fontsize=FONT_SIZES["legend"], frameon=False)
    return colors


def plot_metric_bars(
    ax: Axes,
    series: Mapping[str, tuple[float, float | None]],
    *,
    metric: str,
    n_seeds: Mapping[str, int] | None = None,
    colors: Mapping[str, str] | None = None,
    annotate: bool = True,
) -> BarContainer:
    """Bar chart of one metric per method with ±sd error bars (the baselines figure).

    Parameters
    ----------
    ax:
        Target axes.
    series:
        ``{method: (mean, sd)}`` in display order; ``sd`` ``None``/NaN draws no bar.
    metric:
        Metric key, used as the y label.
    n_seeds:
        Seeds per method; shown under the method name as ``n=3``.
    colors:
        Method colours; default :func:`method_colors`.
    annotate:
        Write each mean above its bar.

    Returns
    -------
    BarContainer
        The bars (heights are the means).
    """
    methods = list(series)
    means = np.array([series[m][0] for m in methods], dtype=np.float64)
    sds = _sd_array([np.nan if series[m][1] is None else series[m][1] for m in methods], len(methods))
    colors = dict(colors) if colors is not None else method_colors(methods)
    positions = np.arange(len(methods), dtype=np.float64)
    bars = ax.bar(
        positions, means, yerr=sds, color=[colors[m] for m in methods], width=0.65,
        capsize=3, error_kw={"elinewidth": 0.8, "capthick": 0.8},
    )
    labels = [f"{m}\nn={n_seeds[m]}" if n_seeds and m in n_seeds else m for m in methods]
    ax.set_xticks(positions, labels)
    ax.set_ylabel(metric)
    ax.grid(False, axis="x")
    if annotate:
        for position, mean, sd in zip(positions, means, sds if sds is not None else np.zeros_like(means)):
            ax.annotate(
                f"{mean:.4f}", (position, mean + sd), xytext=(0, 2), textcoords="offset points",
                ha="center", va="bottom", fontsize=FONT_SIZES["annotation"],
            )
    return bars


def scatter(ax: Axes, x: Any, y: Any, **kwargs: Any) -> Any:
    """``ax.scatter`` that rasterises a dense cloud (more than :data:`DENSE_POINTS` points).

    Thousands of vector dots make a PDF slow to open; rasterised they are one image inside
    the PDF while axes and text stay vector.
    """
    n_points = int(np.size(x))
    kwargs.setdefault("rasterized", n_points > DENSE_POINTS)
    kwargs.setdefault("linewidths", 0)
    return ax.scatter(x, y, **kwargs)


def note_no_data(ax: Axes, message: str) -> None:
    """Say in an empty panel why it is empty (e.g. its runs have no records yet), with no ticks.

    A blank panel with unit axes reads as a plotting failure; a redraw from partial records
    leaves panels empty on purpose, so the panel names what is missing instead.
    """
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", fontsize=8,
            color="0.35", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def add_colorbar(figure: Figure, mappable: Any, ax: Axes, label: str) -> Colorbar:
    """A colour bar for ``mappable`` beside ``ax`` with the house font sizes (not larger than the axes')."""
    bar = figure.colorbar(mappable, ax=ax)
    bar.set_label(label, size=FONT_SIZES["label"])
    bar.ax.tick_params(labelsize=FONT_SIZES["tick"])
    bar.ax.yaxis.get_offset_text().set_size(FONT_SIZES["tick"])
    return bar


#: How published values look: hollow markers, drawn above our lines.
PUBLISHED_STYLE: Mapping[str, Any] = {"markerfacecolor": "none", "markersize": 8, "markeredgewidth": 1.6,
                                      "linestyle": "none", "zorder": 6}
#: Neutral colour of the "ours" / "published" legend keys.
KEY_COLOR = "#333333"


def plot_published(ax: Axes, x: Any, y: Any, *, color: str, marker: str = "o", label: str | None = None) -> Line2D:
    """Published values as hollow markers (``x``, ``y`` scalars or sequences) in the method's colour.

    Draw ours filled and the paper's hollow, next to each other, and add
    :func:`published_handles` to the figure legend so that it says which is which.
    """
    (line,) = ax.plot(np.atleast_1d(x), np.atleast_1d(y), marker=marker, color=color, markeredgecolor=color,
                      label=label, **PUBLISHED_STYLE)
    line.set_gid("recrepro-published")
    return line


def published_handles(source: str = "paper") -> tuple[list[Line2D], list[str]]:
    """Two legend keys: a filled marker for ours, a hollow one for the published value (``source``)."""
    ours = Line2D([], [], color=KEY_COLOR, marker="o", markersize=6, linestyle="none")
    published = Line2D([], [], color=KEY_COLOR, marker="o", markeredgecolor=KEY_COLOR, **PUBLISHED_STYLE)
    return [ours, published], ["ours (filled)", f"published, {source} (hollow)"]


def figure_legend(
    figure: Figure,
    axes: Sequence[Axes] | Axes | None = None,
    *,
    extra: tuple[Sequence[Any], Sequence[str]] | None = None,
    loc: str = "outside upper center",
    ncols: int | None = None,
    title: str | None = None,
) -> Legend | None:
    """One legend for the whole figure, outside the panels (constrained layout makes room).

    Above the panels by default: the caption :func:`save_figure` adds goes below them, and the
    saved file's tight bounding box moves a figure legend anchored at the bottom onto it.

    Collects the labelled artists of ``axes`` (default: every axes of the figure), keeps the
    first of each label, removes the axes' own legends and draws one figure legend.

    Parameters
    ----------
    figure:
        The figure (from :func:`new_figure` / :func:`panel_grid`).
    axes:
        Where to collect handles; default all axes of the figure.
    extra:
        ``(handles, labels)`` appended after the collected ones (e.g. :func:`published_handles`).
    loc:
        A constrained-layout "outside" location above or beside the panels
        (``"outside upper center"``, ``"outside right upper"``); not ``"outside lower ..."``.
    ncols:
        Legend columns; default as many as fit the figure width.
    title:
        Legend title.

    Returns
    -------
    Legend or None
        ``None`` when there is nothing to label.
    """
    if loc.startswith("outside lower"):
        raise ValueError("a figure legend below the panels would collide with the caption; use loc="
                         "'outside upper center' or 'outside right upper'")
    if axes is None:
        axes = figure.axes
    axes = list(np.atleast_1d(axes).ravel())
    handles: list[Any] = []
    labels: list[str] = []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label and not label.startswith("_") and label not in labels:
                handles.append(handle)
                labels.append(label)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if extra is not None:
        handles += list(extra[0])
        labels += list(extra[1])
    if not handles:
        return None
    if ncols is None:
        longest = max(len(label) for label in labels)
        entry_in = (longest * FONT_SIZES["legend"] * 0.55 + 28) / 72  # text + key + padding, inches
        fit = max(1, min(len(labels), int(figure.get_size_inches()[0] / entry_in)))
        ncols = math.ceil(len(labels) / math.ceil(len(labels) / fit))  # balanced rows
    return figure.legend(handles, labels, loc=loc, ncols=ncols, fontsize=FONT_SIZES["legend"], frameon=False,
                         title=title, title_fontsize=FONT_SIZES["legend"])

