"""A method's colour, marker and dash: fixed per method across a paper's figures (:func:`fixed_colors`,
:func:`method_styles`), or distinct within one figure (:func:`method_colors`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from recrepro.reporting.figure_style import COLORS, FIXED_METHOD_COLORS, LINESTYLES, MARKERS, OVERFLOW_COLORS, PALETTE

__all__ = ["fixed_colors", "method_color", "method_colors", "method_styles", "ordered"]


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
