"""House plotting style: figures, method colours, error-bar plots and deterministic saving.

Figures are built with :class:`matplotlib.figure.Figure` directly, never through
``pyplot``, so this module neither picks a backend nor touches pyplot's global figure
state (importers that chose an interactive backend keep it). Style is applied to the
axes explicitly rather than through global ``rcParams``.

Every saved figure carries a caption line ``tier: <tier> · dataset: <dataset> · <caption>``
so a smoke-tier plot cannot be mistaken for a real one, and is written atomically as
PDF and PNG with fixed metadata (identical input gives identical bytes).
"""

from __future__ import annotations

import contextlib
import hashlib
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure

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

#: Default figure width in inches (a full text width); height follows a 4:3 panel.
DEFAULT_WIDTH_IN = 6.0
PANEL_ASPECT = 0.75
PNG_DPI = 200
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
        Figure width in inches.
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
    if height is None:
        height = width / ncols * PANEL_ASPECT * nrows
    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=True)
    for ax in np.atleast_1d(axes).ravel():
        style_axes(ax)
    return figure, axes


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
) -> dict[str, str]:
    """One line with ±sd error bars per method.

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
        Add a legend.

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
        ax.errorbar(
            x_values, mean_values, yerr=_sd_array(sds, x_values.size), label=method,
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
    out_pdf: str | Path,
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
        PDF path.
    out_png:
        PNG path (``PNG_DPI`` dpi), or ``None`` for PDF only.
    tier, dataset:
        Shown in the caption so plots of different tiers cannot be confused.
    caption:
        Free text appended to the caption line.

    Returns
    -------
    str
        The caption line added to the figure.
    """
    text = caption_line(tier, dataset, caption)
    _add_caption(fig, text)
    with contextlib.ExitStack() as stack:
        pdf_tmp = stack.enter_context(atomic_path(out_pdf))
        png_tmp = stack.enter_context(atomic_path(out_png)) if out_png is not None else None
        with matplotlib.rc_context(_DETERMINISTIC_SAVE_RC):
            # format= is explicit because the temporary files end in ".tmp".
            fig.savefig(pdf_tmp, format="pdf", metadata=dict(_PDF_METADATA), bbox_inches="tight", pad_inches=0.05)
            if png_tmp is not None:
                fig.savefig(png_tmp, format="png", dpi=PNG_DPI, metadata=dict(_PNG_METADATA),
                            bbox_inches="tight", pad_inches=0.05)
    return text

