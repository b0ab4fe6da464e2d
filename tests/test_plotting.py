"""Tests for the house plotting module: captions, atomic deterministic saving, colours, plots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes

from recrepro.reporting.plotting import (
    CAPTION_GID,
    FIXED_METHOD_COLORS,
    PALETTE,
    caption_line,
    errorbar_lines,
    method_color,
    method_colors,
    new_figure,
    plot_metric_bars,
    save_figure,
)

PDF_MAGIC = b"%PDF-"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def bars_figure():
    fig, ax = new_figure()
    plot_metric_bars(ax, {"random": (0.01, 0.002), "mostpop": (0.1, None)}, metric="ndcg@20",
                     n_seeds={"random": 3, "mostpop": 1})
    return fig


def test_caption_names_tier_and_dataset(tmp_path):
    assert caption_line("smoke", "synthetic", "MostPopular vs Random") == (
        "tier: smoke · dataset: synthetic · MostPopular vs Random")
    assert caption_line("full", "gowalla") == "tier: full · dataset: gowalla"
    fig = bars_figure()
    text = save_figure(fig, tmp_path / "f.pdf", tmp_path / "f.png", tier="smoke", dataset="synthetic",
                       caption="baselines")
    captions = [t.get_text() for t in fig.texts if t.get_gid() == CAPTION_GID]
    assert len(captions) == 1
    assert "tier: smoke" in captions[0] and "dataset: synthetic" in captions[0] and "baselines" in captions[0]
    assert text == "tier: smoke · dataset: synthetic · baselines"
    # Saving again replaces the caption instead of stacking a second one.
    save_figure(fig, tmp_path / "g.pdf", tier="full", dataset="ml-100k")
    assert [t.get_text() for t in fig.texts if t.get_gid() == CAPTION_GID] == ["tier: full · dataset: ml-100k"]


def test_caption_sits_below_the_axes(tmp_path):
    fig, ax = new_figure()
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("x label")
    save_figure(fig, tmp_path / "f.pdf", tier="smoke", dataset="synthetic")
    caption = next(t for t in fig.texts if t.get_gid() == CAPTION_GID)
    renderer = fig._get_renderer()
    caption_top = caption.get_window_extent(renderer).y1
    xlabel_bottom = ax.xaxis.label.get_window_extent(renderer).y0
    assert caption_top <= xlabel_bottom


def test_files_are_valid_and_deterministic(tmp_path):
    save_figure(bars_figure(), tmp_path / "a.pdf", tmp_path / "a.png", tier="smoke", dataset="synthetic")
    save_figure(bars_figure(), tmp_path / "b.pdf", tmp_path / "b.png", tier="smoke", dataset="synthetic")
    pdf = (tmp_path / "a.pdf").read_bytes()
    png = (tmp_path / "a.png").read_bytes()
    assert pdf.startswith(PDF_MAGIC) and pdf.rstrip().endswith(b"%%EOF")
    assert png.startswith(PNG_MAGIC)
    assert b"/CreationDate" not in pdf  # no timestamps: identical input, identical bytes
    assert pdf == (tmp_path / "b.pdf").read_bytes()
    assert png == (tmp_path / "b.png").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pdf", "a.png", "b.pdf", "b.png"]


def test_pdf_only(tmp_path):
    save_figure(bars_figure(), tmp_path / "only.pdf", tier="smoke", dataset="synthetic")
    assert [p.name for p in tmp_path.iterdir()] == ["only.pdf"]


@pytest.mark.parametrize("fail_on", ["pdf", "png"])
def test_interrupted_save_leaves_no_file(tmp_path, monkeypatch, fail_on):
    fig = bars_figure()
    real_savefig = fig.savefig

    def savefig_interrupted(target, *args, **kwargs):
        if kwargs.get("format") == fail_on:
            partial = b"%PDF-1.4 half a fi"  # partial output, then the kill
            target.write(partial) if hasattr(target, "write") else Path(target).write_bytes(partial)
            raise KeyboardInterrupt
        return real_savefig(target, *args, **kwargs)

    monkeypatch.setattr(fig, "savefig", savefig_interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_figure(fig, tmp_path / "f.pdf", tmp_path / "f.png", tier="smoke", dataset="synthetic")
    assert list(tmp_path.iterdir()) == []


def test_interrupted_save_keeps_previous_files(tmp_path, monkeypatch):
    (tmp_path / "f.pdf").write_bytes(b"old pdf")
    (tmp_path / "f.png").write_bytes(b"old png")
    fig = bars_figure()
    monkeypatch.setattr(fig, "savefig", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        save_figure(fig, tmp_path / "f.pdf", tmp_path / "f.png", tier="smoke", dataset="synthetic")
    assert (tmp_path / "f.pdf").read_bytes() == b"old pdf"
    assert (tmp_path / "f.png").read_bytes() == b"old png"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pdf", "f.png"]


def test_new_figure_shapes_and_style():
    fig, ax = new_figure()
    assert isinstance(ax, Axes)
    assert not ax.spines["top"].get_visible() and not ax.spines["right"].get_visible()
    assert tuple(fig.get_size_inches()) == pytest.approx((6.0, 4.5))
    _, row = new_figure(3)
    assert row.shape == (3,)
    fig, grid = new_figure(2, 3, width=7.0)
    assert grid.shape == (3, 2)
    assert tuple(fig.get_size_inches()) == pytest.approx((7.0, 7.0 / 2 * 0.75 * 3))
    with pytest.raises(ValueError):
        new_figure(0)


def test_module_does_not_touch_pyplot_or_backend():
    code = (
        "import matplotlib; matplotlib.use('svg'); import sys, recrepro.reporting.plotting as p; "
        "fig, ax = p.new_figure(); "
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'; "
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_method_colours():
    assert method_color("random") == FIXED_METHOD_COLORS["random"]
    assert method_color("mostpop") == FIXED_METHOD_COLORS["mostpop"]
    assert method_color("lightgcn") in PALETTE
    assert method_color("lightgcn") == method_color("lightgcn")
    methods = ["mf", "lightgcn", "ease", "prism", "random", "mostpop", "ials"]
    colors = method_colors(methods)
    assert list(colors) == methods
    assert len(set(colors.values())) == len(methods)  # distinct within a figure
    assert method_colors(list(reversed(methods))) == colors  # independent of plotting order
    assert colors["random"] == FIXED_METHOD_COLORS["random"]
    # More methods than colours still gives every method a colour.
    many = method_colors([f"m{i}" for i in range(20)])
    assert len(many) == 20 and len(set(many.values())) == len(PALETTE) + 2


def test_errorbar_lines_draws_means_and_sd():
    fig, ax = new_figure()
    x = [1.0, 2.0, 3.0]
    colors = errorbar_lines(ax, x, {
        "mf": ([0.1, 0.2, 0.3], [0.01, 0.02, np.nan]),
        "random": ([0.05, 0.05, 0.05], None),
    })
    containers = ax.containers
    assert len(containers) == 2
    mf_line, _, mf_bars = containers[0].lines
    np.testing.assert_allclose(mf_line.get_ydata(), [0.1, 0.2, 0.3])
    assert mf_line.get_color() == colors["mf"]
    segments = mf_bars[0].get_segments()
    # Each error bar spans mean ± sd; NaN sd (one seed) gives a zero-length bar.
    np.testing.assert_allclose([s[:, 1] for s in segments], [[0.09, 0.11], [0.18, 0.22], [0.3, 0.3]])
    assert containers[1].lines[2] == ()  # no sd: no error bars
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["mf", "random"]
    with pytest.raises(ValueError, match="2 means for 3 x values"):
        errorbar_lines(ax, x, {"bad": ([0.1, 0.2], None)})


def test_plot_metric_bars_heights_labels_and_errors():
    fig, ax = new_figure()
    series = {"random": (0.01, 0.002), "mostpop": (0.1, None), "ease": (0.2, 0.01)}
    bars = plot_metric_bars(ax, series, metric="ndcg@20", n_seeds={"random": 3, "mostpop": 1, "ease": 3})
    assert [b.get_height() for b in bars] == pytest.approx([0.01, 0.1, 0.2])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["random\nn=3", "mostpop\nn=1", "ease\nn=3"]
    assert ax.get_ylabel() == "ndcg@20"
    assert [t.get_text() for t in ax.texts] == ["0.0100", "0.1000", "0.2000"]
    segments = bars.errorbar.lines[2][0].get_segments()
    np.testing.assert_allclose([s[:, 1] for s in segments], [[0.008, 0.012], [0.1, 0.1], [0.19, 0.21]])


# ------------------------------------------------------------------ house style (issue 26)


def test_fixed_colors_follow_the_paper_order_not_the_figure():
    from recrepro.reporting.plotting import COLORS, fixed_colors, method_styles

    order = ["fedrap", "fedmf", "pfedrec", "mf", "random"]
    colors = fixed_colors(order)
    assert colors["fedrap"] == COLORS[0] and colors["fedmf"] == COLORS[1] and colors["mf"] == COLORS[3]
    assert colors["random"] == FIXED_METHOD_COLORS["random"]
    # a figure showing a subset looks its methods up in the same mapping: same colour everywhere
    assert {m: colors[m] for m in ["mf", "fedrap"]} == {"mf": COLORS[3], "fedrap": COLORS[0]}
    # more methods than colours: colours repeat, but (colour, marker, dash) stays distinct
    many = [f"m{i}" for i in range(len(COLORS) + 3)]
    styles = method_styles(many)
    assert len({(s["color"], s["marker"], s["linestyle"]) for s in styles.values()}) == len(many)
    assert styles["m0"]["color"] == styles[f"m{len(COLORS)}"]["color"]
    assert styles["m0"]["linestyle"] != styles[f"m{len(COLORS)}"]["linestyle"]


def test_figures_are_at_most_max_width_and_panel_grid_wraps():
    from recrepro.reporting.plotting import MAX_WIDTH_IN, panel_grid

    fig, _ = new_figure(6, width=15.0)
    assert fig.get_size_inches()[0] == pytest.approx(MAX_WIDTH_IN)
    fig, axes = panel_grid(7, max_cols=3, panel_width=2.5, panel_height=2.0)
    assert len(axes) == 7 and all(ax.get_visible() for ax in axes)
    assert len(fig.axes) == 9 and sum(ax.get_visible() for ax in fig.axes) == 7  # 3 x 3 grid, 2 hidden
    assert tuple(fig.get_size_inches()) == pytest.approx((7.5, 6.0))


def test_one_figure_legend_collects_every_panel_once(tmp_path):
    from recrepro.reporting.plotting import figure_legend

    fig, axes = new_figure(2)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="mf")
        ax.plot([0, 1], [1, 0], label="random")
        ax.legend()
    axes[1].plot([0, 1], [0.5, 0.5], label="ease")
    legend = figure_legend(fig)
    assert [t.get_text() for t in legend.get_texts()] == ["mf", "random", "ease"]
    assert all(ax.get_legend() is None for ax in axes)  # no panel legends left
    assert fig.legends == [legend]
    with pytest.raises(ValueError, match="caption"):
        figure_legend(fig, loc="outside lower center")
    axes[0].legend()  # a second legend breaks the house style: saving refuses
    with pytest.raises(ValueError, match="2 legends"):
        save_figure(fig, tmp_path / "two.pdf", tier="smoke", dataset="synthetic")
    axes[0].get_legend().remove()
    save_figure(fig, tmp_path / "f.pdf", tmp_path / "f.png", tier="smoke", dataset="synthetic", caption="x")
    # the caption sits below the legend, never on it
    renderer = fig._get_renderer()
    caption = next(t for t in fig.texts if t.get_gid() == CAPTION_GID)
    assert caption.get_window_extent(renderer).y1 < legend.get_window_extent(renderer).y0


def test_published_values_are_hollow_and_the_legend_says_which_is_which():
    from recrepro.reporting.plotting import figure_legend, plot_published, published_handles

    fig, ax = new_figure()
    ax.plot([1.0], [0.30], marker="o", color="#0072B2", label="mf")
    line = plot_published(ax, 1.0, 0.31, color="#0072B2")
    assert line.get_markerfacecolor() == "none" and line.get_markeredgecolor() == "#0072B2"
    assert line.get_linestyle() == "None"
    legend = figure_legend(fig, extra=published_handles("Table 1"))
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts == ["mf", "ours (filled)", "published, Table 1 (hollow)"]


def test_dense_scatter_is_rasterised_and_colorbar_uses_house_fonts():
    from recrepro.reporting.plotting import DENSE_POINTS, FONT_SIZES, add_colorbar, scatter

    fig, ax = new_figure()
    few = scatter(ax, np.arange(10), np.arange(10))
    many = scatter(ax, np.arange(DENSE_POINTS + 1), np.arange(DENSE_POINTS + 1))
    assert not few.get_rasterized() and many.get_rasterized()
    image = ax.imshow(np.eye(3))
    bar = add_colorbar(fig, image, ax, "mean λ")
    assert bar.ax.yaxis.label.get_size() == FONT_SIZES["label"]
    assert all(t.get_size() == FONT_SIZES["tick"] for t in bar.ax.get_yticklabels())


def test_errorbar_lines_band_shades_the_sd():
    fig, ax = new_figure()
    errorbar_lines(ax, [1.0, 2.0], {"mf": ([0.1, 0.2], [0.01, 0.02])}, band=True, legend=False)
    assert not ax.containers  # no error bars
    (band,) = ax.collections
    vertices = band.get_paths()[0].vertices
    assert vertices[:, 1].min() == pytest.approx(0.09) and vertices[:, 1].max() == pytest.approx(0.22)
    assert ax.get_legend() is None


def test_png_resolution_is_at_least_150_dpi(tmp_path):
    from PIL import Image

    from recrepro.reporting.plotting import PNG_DPI

    fig, ax = new_figure(width=5.0, height=3.0)
    ax.plot([0, 1], [0, 1])
    save_figure(fig, tmp_path / "f.pdf", tmp_path / "f.png", tier="smoke", dataset="synthetic")
    assert PNG_DPI >= 150
    width_px = Image.open(tmp_path / "f.png").size[0]
    assert width_px >= 150 * 5.0 * 0.9  # bbox "tight" trims a little whitespace


def test_png_is_a_palette_image_close_to_the_full_colour_rendering(tmp_path):
    import io

    import numpy as np
    from PIL import Image

    from recrepro.reporting.plotting import PNG_COLORS, PNG_DPI

    fig, ax = new_figure(width=5.0, height=3.0)
    for k in range(12):  # many anti-aliased colours: more than the palette holds
        ax.plot(np.linspace(0, 1, 50), np.sin(np.linspace(0, 6, 50) + k), lw=2)
    save_figure(fig, tmp_path / "f.pdf", tmp_path / "f.png", tier="smoke", dataset="synthetic")
    full = io.BytesIO()
    fig.savefig(full, format="png", dpi=PNG_DPI, bbox_inches="tight", pad_inches=0.05)
    with Image.open(full) as im:
        reference = np.asarray(im.convert("RGB"), dtype=int)
    saved = Image.open(tmp_path / "f.png")
    assert saved.mode == "P" and len(saved.getcolors()) <= PNG_COLORS
    assert len(np.unique(reference.reshape(-1, 3), axis=0)) > PNG_COLORS
    assert saved.info["Software"] == "recrepro"
    assert round(saved.info["dpi"][0]) == PNG_DPI
    diff = np.abs(np.asarray(saved.convert("RGB"), dtype=int) - reference).sum(axis=-1)
    assert diff.shape == reference.shape[:2]
    assert diff.mean() < 1.0 and (diff > 30).mean() < 0.01
