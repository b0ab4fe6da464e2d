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
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colorbar import Colorbar
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D

from recrepro.io import atomic_path

#: Okabe-Ito colour-blind-safe palette; methods are hashed onto these six.
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#E69F00",  # orange
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
)
#: Used only when a figure has more methods than PALETTE (black is close to the
#: baselines' greys and yellow is weak on white, so neither is a first choice).
OVERFLOW_COLORS: tuple[str, ...] = ("#000000", "#F0E442")
#: Reference baselines always get the same neutral colours.
FIXED_METHOD_COLORS: Mapping[str, str] = {"random": "#999999", "mostpop": "#555555"}

#: Every colour a figure may use, in the order :func:`fixed_colors` hands them out.
COLORS: tuple[str, ...] = (*PALETTE, *OVERFLOW_COLORS)
#: Markers and dashes that tell methods apart beyond the colours (and in greyscale print).
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">")
LINESTYLES: tuple[str, ...] = ("-", "--", ":", "-.")

#: Default figure width in inches (a full text width); height follows a 4:3 panel.
DEFAULT_WIDTH_IN = 6.0
#: Widest figure: a wider one is shrunk to this (at 100 % zoom its PNG is still about a laptop
#: screen wide, so 8 pt text stays readable); more panels go into more rows (:func:`panel_grid`).
MAX_WIDTH_IN = 7.5
PANEL_ASPECT = 0.75
#: PNG resolution (the report shows the PNGs; at least 150 dpi).
PNG_DPI = 200
#: PNG palette size (:func:`_save_png`).
PNG_COLORS = 256
#: A scatter with more points than this is rasterised (:func:`scatter`).
DENSE_POINTS = 500
FONT_SIZES = {"tick": 8, "label": 9, "title": 10, "legend": 8, "caption": 7, "annotation": 7}
CAPTION_COLOR = "#444444"
CAPTION_SEPARATOR = " · "
CAPTION_GID = "recrepro-caption"

#: rcParams for the house style, for code that draws through pyplot: ``with house_style(): ...``.
HOUSE_RC: Mapping[str, Any] = {
    "font.size": FONT_SIZES["label"],
    "axes.titlesize": FONT_SIZES["title"],
    "axes.labelsize": FONT_SIZES["label"],
    "xtick.labelsize": FONT_SIZES["tick"],
    "ytick.labelsize": FONT_SIZES["tick"],
    "legend.fontsize": FONT_SIZES["legend"],
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.prop_cycle": matplotlib.cycler(color=[*PALETTE, *OVERFLOW_COLORS]),
}

#: Settings that make saved files byte-identical across runs (svg ids, embedded fonts).
_DETERMINISTIC_SAVE_RC: Mapping[str, Any] = {"svg.hashsalt": "recrepro", "pdf.fonttype": 42}
_PDF_METADATA: Mapping[str, Any] = {"CreationDate": None, "ModDate": None, "Creator": "recrepro", "Producer": "recrepro"}
_PNG_METADATA: Mapping[str, Any] = {"Software": "recrepro"}


@contextlib.contextmanager
def house_style() -> Iterator[None]:
    """Temporarily apply :data:`HOUSE_RC` (for pyplot-based code; restored on exit)."""
    with matplotlib.rc_context(HOUSE_RC):
        yield


def style_axes(ax: Axes) -> None:
    """Apply the house style to one axes (spines, grid, font sizes)."""
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.grid(True, alpha=0.3, linewidth=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(labelsize=FONT_SIZES["tick"])
    ax.xaxis.label.set_size(FONT_SIZES["label"])
    ax.yaxis.label.set_size(FONT_SIZES["label"])
    ax.title.set_size(FONT_SIZES["title"])


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


# -------------------------------------------------------------------------- colours


def method_color(method: str) -> str:
    """Colour of one method: fixed for reference baselines, otherwise a stable hash of the name.

    Two methods may share a hashed colour; use :func:`method_colors` for a figure.
    """
    if method in FIXED_METHOD_COLORS:
        return FIXED_METHOD_COLORS[method]
    return PALETTE[_palette_index(method)]


def _palette_index(method: str) -> int:
    # sha256 rather than hash(): Python salts str hashes per process.
    return int.from_bytes(hashlib.sha256(method.encode("utf-8")).digest()[:4], "big") % len(PALETTE)


def method_colors(methods: Sequence[str]) -> dict[str, str]:
    """Distinct colours for the methods of one figure, stable across figures where possible.

    Each method gets :func:`method_color` unless another method of this figure already
    has that colour; then the next free palette colour. Methods are resolved in sorted
    order, so the mapping does not depend on the order they are plotted in.
    """
    colors: dict[str, str] = {}
    used: set[str] = set()
    for method in sorted(set(methods)):
        if method in FIXED_METHOD_COLORS:
            colors[method] = FIXED_METHOD_COLORS[method]
            used.add(colors[method])
    for method in sorted(set(methods) - set(colors)):
        start = _palette_index(method)
        candidates = [PALETTE[(start + step) % len(PALETTE)] for step in range(len(PALETTE))]
        free = [color for color in (*candidates, *OVERFLOW_COLORS) if color not in used]
        # More methods than colours: reuse (a legend still tells them apart by marker).
        colors[method] = free[0] if free else candidates[0]
        used.add(colors[method])
    return {method: colors[method] for method in methods}


def fixed_colors(order: Sequence[str]) -> dict[str, str]:
    """The colour of every method of a paper: the i-th method of the paper's order gets the i-th of :data:`COLORS`.

    Every figure of a paper looks its methods up in the same mapping, so a method keeps its
    colour from figure to figure whichever subset a figure shows (unlike :func:`method_colors`,
    which resolves clashes per figure). Reference baselines keep :data:`FIXED_METHOD_COLORS`.
    Past :data:`COLORS` the colours repeat; :func:`method_styles` adds marker and dash.

    Parameters
    ----------
    order:
        The paper's methods (or series) in its own order: the order of its tables and legends.

    Returns
    -------
    dict
        ``{method: colour}`` in ``order``.
    """
    colors: dict[str, str] = {}
    index = 0
    for method in dict.fromkeys(order):
        if method in FIXED_METHOD_COLORS:
            colors[method] = FIXED_METHOD_COLORS[method]
            continue
        colors[method] = COLORS[index % len(COLORS)]
        index += 1
    return colors


def method_styles(order: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Line keywords (``color``, ``marker``, ``linestyle``) per method of a paper's method order.

    Colours as :func:`fixed_colors`; the marker follows the position too and the dash changes
    each time the colours wrap around, so even a paper with more methods than colours has a
    distinct style per method.
    """
    colors = fixed_colors(order)
    styles: dict[str, dict[str, Any]] = {}
    for position, method in enumerate(dict.fromkeys(order)):
        styles[method] = {"color": colors[method], "marker": MARKERS[position % len(MARKERS)],
                          "linestyle": LINESTYLES[(position // len(COLORS)) % len(LINESTYLES)]}
    return styles


def ordered(methods: Sequence[str], order: Sequence[str]) -> list[str]:
    """``methods`` (deduplicated) in the paper's ``order``; methods it does not list follow, sorted."""
    present = list(dict.fromkeys(methods))
    known = [m for m in order if m in present]
    return known + sorted(m for m in present if m not in order)


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


# ---------------------------------------------------------------------------- saving


def caption_line(tier: str, dataset: str, caption: str = "") -> str:
    """``"tier: <tier> · dataset: <dataset> · <caption>"`` (caption part omitted if empty)."""
    parts = [f"tier: {tier}", f"dataset: {dataset}"]
    if caption:
        parts.append(caption)
    return CAPTION_SEPARATOR.join(parts)


def _add_caption(figure: Figure, text: str) -> None:
    # Saving twice must not stack two captions.
    for old in [t for t in figure.texts if t.get_gid() == CAPTION_GID]:
        old.remove()
    # Place the caption just under everything already drawn (axes, tick and axis labels),
    # so it never overlaps them; bbox_inches="tight" then includes it in the saved file.
    figure.draw_without_rendering()
    content = figure.get_tightbbox()
    width_in, height_in = figure.get_size_inches()
    chars_per_line = max(40, int(content.width * 72 / (FONT_SIZES["caption"] * 0.55)))
    figure.text(
        (content.x0 + content.x1) / 2 / width_in, (content.y0 - 0.06) / height_in,
        textwrap.fill(text, chars_per_line), ha="center", va="top",
        fontsize=FONT_SIZES["caption"], color=CAPTION_COLOR, gid=CAPTION_GID,
    )


def save_figure(
    fig: Figure,
    out_pdf: str | Path | None,
    out_png: str | Path | None = None,
    *,
    tier: str,
    dataset: str,
    caption: str = "",
) -> str:
    """Add the tier/dataset caption and write the figure as PDF (and PNG) atomically.

    Both files are rendered to temporary siblings first and renamed only when both
    succeeded, so an interrupted or failing save leaves neither file (nor a temporary).

    Parameters
    ----------
    fig:
        The figure (from :func:`new_figure`).
    out_pdf:
        PDF path, or ``None`` for PNG only.
    out_png:
        PNG path (``PNG_DPI`` dpi), or ``None`` for PDF only (one of the two is needed).
    tier, dataset:
        Shown in the caption so plots of different tiers cannot be confused.
    caption:
        Free text appended to the caption line.

    Raises
    ------
    ValueError
        The figure has more than one legend (one per figure: :func:`figure_legend`).

    Returns
    -------
    str
        The caption line added to the figure.
    """
    if out_pdf is None and out_png is None:
        raise ValueError("save_figure: neither a PDF nor a PNG path given")
    legends = len(fig.legends) + sum(ax.get_legend() is not None for ax in fig.axes)
    if legends > 1:
        raise ValueError(f"{Path(out_pdf or out_png).name}: {legends} legends; the house style has one per figure "
                         "(recrepro.reporting.plotting.figure_legend)")
    text = caption_line(tier, dataset, caption)
    _add_caption(fig, text)
    with contextlib.ExitStack() as stack:
        pdf_tmp = stack.enter_context(atomic_path(out_pdf)) if out_pdf is not None else None
        png_tmp = stack.enter_context(atomic_path(out_png)) if out_png is not None else None
        with matplotlib.rc_context(_DETERMINISTIC_SAVE_RC):
            # format= is explicit because the temporary files end in ".tmp".
            if pdf_tmp is not None:
                fig.savefig(pdf_tmp, format="pdf", metadata=dict(_PDF_METADATA), bbox_inches="tight",
                            pad_inches=0.05)
            if png_tmp is not None:
                _save_png(fig, png_tmp)
    return text


def _save_png(fig: Figure, path: str | Path) -> None:
    """Write ``fig`` as a PNG with a palette of at most :data:`PNG_COLORS` colours.

    A plot has few colours besides its lines' anti-aliasing: the palette keeps every figure under
    the committed reproduction's size budget at about a third of the bytes of a full-colour PNG,
    while fewer than 1 % of the pixels of the densest figures (heat maps, many overlaid curves)
    move by more than a tenth of one channel's range. The quantiser (median cut) is deterministic.
    """
    from PIL import Image, PngImagePlugin  # matplotlib's own dependency; only PNG saving needs it

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=PNG_DPI, bbox_inches="tight", pad_inches=0.05)
    buffer.seek(0)
    with Image.open(buffer) as rendered:
        rgba = rendered.convert("RGBA")
    opaque = Image.new("RGBA", rgba.size, "white")
    opaque.alpha_composite(rgba)  # a figure is drawn on white: nothing is lost by dropping alpha
    palette = opaque.convert("RGB").quantize(colors=PNG_COLORS, method=Image.Quantize.MEDIANCUT)
    info = PngImagePlugin.PngInfo()
    for key, value in _PNG_METADATA.items():
        info.add_text(key, value)
    palette.save(path, format="png", optimize=True, pnginfo=info, dpi=(PNG_DPI, PNG_DPI))

