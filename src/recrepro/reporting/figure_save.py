"""Saving a figure: the caption line every figure carries (``tier: <tier> · dataset: <dataset> ·
<caption>``) and the PDF and PNG written atomically with fixed metadata, so identical input gives
identical bytes."""

from __future__ import annotations

import contextlib
import io
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from recrepro.io import atomic_path
from recrepro.reporting.figure_style import (
    CAPTION_COLOR,
    CAPTION_GID,
    CAPTION_SEPARATOR,
    FONT_SIZES,
    PNG_COLORS,
    PNG_DPI,
)

__all__ = ["caption_line", "save_figure"]

#: Settings that make saved files byte-identical across runs (svg ids, embedded fonts).
_DETERMINISTIC_SAVE_RC: Mapping[str, Any] = {"svg.hashsalt": "recrepro", "pdf.fonttype": 42}
_PDF_METADATA: Mapping[str, Any] = {"CreationDate": None, "ModDate": None, "Creator": "recrepro", "Producer": "recrepro"}
_PNG_METADATA: Mapping[str, Any] = {"Software": "recrepro"}


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

