"""The house style's settings: the colour-blind-safe palette, markers and dashes, figure sizes, font
sizes, the caption's look and the PNG resolution, and the axes style that applies them
(:mod:`recrepro.reporting.plotting`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import matplotlib
from matplotlib.axes import Axes

__all__ = ["CAPTION_COLOR", "CAPTION_GID", "CAPTION_SEPARATOR", "COLORS", "DEFAULT_WIDTH_IN", "DENSE_POINTS",
           "FIXED_METHOD_COLORS", "FONT_SIZES", "HOUSE_RC", "LINESTYLES", "MARKERS", "MAX_WIDTH_IN", "OVERFLOW_COLORS",
           "PALETTE", "PANEL_ASPECT", "PNG_COLORS", "PNG_DPI", "house_style", "style_axes"]

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
