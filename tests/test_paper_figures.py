"""Paper figures in the house style (issue 26): the paper's axes, one legend, published values overlaid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def saved_figures(monkeypatch):
    """Every figure :func:`recrepro.reporting.plotting.save_figure` writes, kept for inspection."""
    import recrepro.reporting.plotting as plotting

    saved = []
    real_save = plotting.save_figure
    monkeypatch.setattr(plotting, "save_figure", lambda fig, *a, **k: (saved.append(fig), real_save(fig, *a, **k)))
    return saved


def _published(fig):
    return sorted((round(float(line.get_xdata()[0]), 4), round(float(line.get_ydata()[0]), 4))
                  for ax in fig.axes for line in ax.lines if line.get_gid() == "recrepro-published")


def test_lambdaopt_frequency_bins_are_integer_quantiles():
    from recrepro.papers.lambdaopt.figures import frequency_bins

    freq = np.arange(1, 101)
    index, labels = frequency_bins(freq, np.ones(100, dtype=int), 4)
    assert labels == ["1–25", "26–50", "51–75", "76–100"]
    assert np.bincount(index).tolist() == [25, 25, 25, 25]
    # a frequency that fills several quantiles is one bin; labels never show fractions
    index, labels = frequency_bins(np.array([1, 2, 3, 50]), np.array([90, 4, 3, 3]), 10)
    assert labels[0] == "1" and all("." not in label for label in labels)
    assert index.tolist() == sorted(index.tolist()) and len(labels) == index.max() + 1


def test_lambdaopt_trajectory_has_no_empty_columns(tmp_path, saved_figures):
    import pandas as pd

    from recrepro.papers.lambdaopt.figures import figure_trajectory

    rng = np.random.default_rng(0)
    rows = []
    for kind in ("user", "item"):
        freqs = np.unique(np.round(rng.pareto(1.5, 300) * 10).astype(int) + 1)  # long tail, gaps between values
        for epoch in range(5):
            rows.append(pd.DataFrame({"kind": kind, "epoch": epoch, "freq": freqs, "n": 1 + freqs % 3,
                                      "mean_lambda": 0.01 * epoch + 1e-4 * freqs}))
    pd.concat(rows).to_parquet(tmp_path / "trajectory.parquet")
    figure_trajectory(tmp_path, str(tmp_path / "t.pdf"), str(tmp_path / "t.png"), "smoke", "toy")
    (fig,) = saved_figures
    heat = [ax for ax in fig.axes if ax.images]
    assert len(heat) == 2
    for ax in heat:
        assert not np.isnan(ax.images[0].get_array()).any()  # quantile bins: no blank frequency gaps
        assert all(label.get_text().replace("–", "").isdigit() for label in ax.get_xticklabels())
    assert len(fig.legends) == 1 and not [ax for ax in fig.axes if ax.get_legend()]


@pytest.mark.skipif(not (REPO / "results/paper/exadmm/runs").is_dir(), reason="no committed exADMM records")
def test_exadmm_tradeoff_overlays_the_official_code_values(tmp_path, saved_figures):
    from recrepro.papers.exadmm.figures import figure_tradeoff

    runs = sorted((REPO / "results/paper/exadmm/runs").glob("*/*/*/seed*/metrics.json"))
    figure_tradeoff(runs, tmp_path / "f.pdf", tmp_path / "f.png", tier="paper", ks=[20, 100])
    (fig,) = saved_figures
    # Epinions at K = 20: iALS (Gini 0.911, nDCG 0.078), exADMM (0.863, 0.07) and (Coverage 0.30, nDCG 0.07),
    # for exadmm and exadmm_code alike; ML-1M's published values mix K = 50 and 100: not drawable
    assert set(_published(fig)) == {(0.911, 0.078), (0.863, 0.07), (0.3, 0.07)}
    assert len(fig.legends) == 1 and fig.get_size_inches()[0] <= 7.5
    assert any(t.get_text().startswith("published") for t in fig.legends[0].get_texts())
    # exADMM under the released code's U-step is its own series (squares), never mixed into ours
    from recrepro.papers.exadmm.figures import _is_code_step

    assert [m for m in ("exadmm", "exadmm_sw5", "exadmm_code", "exadmm_code_sw5") if _is_code_step(m)] == \
        ["exadmm_code", "exadmm_code_sw5"]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "exADMM, released code's U-step" in labels and "exADMM" in labels and "exADMM, exact curvature" in labels


def test_fedrap_curves_put_the_maintainers_log_at_its_round(tmp_path, saved_figures):
    import json

    import pandas as pd

    from recrepro.papers.fedrap.figures import curves_figure

    dirs = []
    for method in ("fedrap_code_pool", "fedmf"):
        d = tmp_path / method
        d.mkdir()
        (d / "metrics.json").write_text(json.dumps({
            "dataset": "hetrec2011-lastfm-2k", "method": method, "seed": 0, "overall": {"hr@10": 0.1, "ndcg@10": 0.05}}))
        pd.DataFrame({"round": [1, 2], "val_hr@10": [0.1, 0.2], "val_ndcg@10": [0.05, 0.1],
                      "train_loss": [0.5, 0.4]}).to_parquet(d / "history.parquet")
        dirs.append(d)
    curves_figure(dirs, str(tmp_path / "c.pdf"), str(tmp_path / "c.png"), "paper")
    (fig,) = saved_figures
    assert _published(fig) == [(96.0, 0.1144), (96.0, 0.2524)]  # maintainer's log, round 96
    assert len(fig.legends) == 1 and fig.get_size_inches()[0] <= 7.5
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 6  # two rows of three panels per dataset, not a strip of six


def test_exadmm_scalability_is_drawn_from_its_timings_record(tmp_path, saved_figures):
    """Fig. 2 needs no data: the scalability verb's JSON record holds all it draws and says."""
    from recrepro.io import write_json
    from recrepro.papers.exadmm.figures import figure_scalability

    records = [{"family": f, "axis": "dim", "dim": d, "n_users": 100, "seconds": s * d}
               for f, s in (("ials", 0.01), ("exadmm", 0.008), ("fairrec", 0.5)) for d in (16, 32)]
    records += [{"family": f, "axis": "users", "dim": 32, "n_users": n, "seconds": s * n}
                for f, s in (("ials", 0.001), ("exadmm", 0.0008), ("fairrec", 0.05)) for n in (50, 100)]
    write_json(tmp_path / "r.json", {"dataset": "epinions", "records": records, "epochs": 3, "fairrec_k": 20,
                                     "device": "cpu", "threads": 2})
    figure_scalability(tmp_path / "r.json", tmp_path / "f.pdf", tmp_path / "f.png", tier="paper")
    (fig,) = saved_figures
    dims, users = fig.axes[:2]
    assert [list(line.get_xdata()) for line in dims.lines] == [[16, 32]] * 3
    assert list(users.lines[2].get_ydata()) == pytest.approx([2.5, 5.0])  # FairRec, vs users
    assert dims.get_yscale() == users.get_yscale() == "log"
    text = " ".join(t.get_text() for t in fig.texts)
    assert "dataset: epinions" in text and "(mean of 3)" in text and "k 20" in text and "2 threads, cpu" in text
    assert (tmp_path / "f.png").exists()


def test_fedrap_curves_draw_a_method_at_its_grid_pick_where_that_run_is_recorded():
    import pandas as pd

    from recrepro.papers.fedrap.figures import _prefer_tuned

    runs = pd.DataFrame({"dataset": ["video", "video", "video", "ml", "ml"],
                         "method": ["fedrap", "fedrap_tuned", "fedmf", "fedrap", "fedmf"]})
    kept = _prefer_tuned(runs, {"fedrap_tuned": "fedrap", "fedmf_tuned": "fedmf"})
    # on video fedrap's README-flag run gives way to its pick; fedmf has no pick there; ml keeps both
    assert list(zip(kept["dataset"], kept["method"], kept["drawn"])) == [
        ("video", "fedrap", "fedrap_tuned"), ("video", "fedmf", "fedmf"), ("ml", "fedrap", "fedrap"),
        ("ml", "fedmf", "fedmf")]


def test_fedrap_curves_draw_the_released_codes_curve_beside_our_run_with_the_same_flags(tmp_path):
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from recrepro.papers.fedrap.figures import _draw_official

    curve = tmp_path / "ml-100k_readme_seed0.jsonl"
    curve.write_text("".join(json.dumps({"round": r, "val_hr@10": 0.1 * r, "val_ndcg@10": 0.05 * r}) + "\n"
                             for r in range(1, 4)))
    styles = {"fedrap_code_pool": {"color": "#123456"}}
    _, axes = plt.subplots(1, 2)
    # our README-flag run with the code's pool is not drawn on ml-100k: nothing to put it beside
    assert not _draw_official(list(axes), [curve], "ml-100k", {"fedrap_code_pool_tuned"}, styles)
    assert not _draw_official(list(axes), [curve], "amazon-video", {"fedrap_code_pool"}, styles)
    assert all(not ax.lines for ax in axes)
    assert _draw_official(list(axes), [curve], "ml-100k", {"fedrap_code_pool"}, styles)
    (hr,), (ndcg,) = axes[0].lines, axes[1].lines
    assert list(hr.get_xdata()) == [1, 2, 3] and list(ndcg.get_ydata()) == [0.05, 0.1, 0.15000000000000002]
    assert hr.get_markerfacecolor() == "none" and hr.get_color() == "#123456"
    plt.close("all")


def _groups_run(root, method, seed, hr):
    """A run record with what figure_groups reads: 8 users of training counts 1..8 (quartiles 1–2,
    3–4, 5–6, 7–8) and per-user HR@100 ``hr`` (NDCG a tenth of it)."""
    import json

    import pandas as pd

    run = root / method / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"method": method, "seed": seed}))
    users = np.arange(8)
    pd.DataFrame({"user": users, "train_count": users + 1}).to_parquet(run / "train_counts.parquet")
    pd.DataFrame({"user": users, "pp_hr@100": hr, "pp_ndcg@100": np.asarray(hr) / 10}).to_parquet(
        run / "per_user.parquet")
    return run


def test_lambdaopt_groups_keep_one_row_per_seed_and_draw_their_mean(tmp_path, saved_figures):
    from recrepro.papers.lambdaopt.figures import figure_groups

    a = [_groups_run(tmp_path, "lambdaopt_dui", s, [1, 1, 0, 0, 1, 0, 1, 1] if s == 0 else [0, 0, 0, 0, 1, 1, 1, 1])
         for s in (0, 1)]
    b = [_groups_run(tmp_path, "lambdafix", s, [0.5] * 8) for s in (0, 1)]
    data = figure_groups(a, b, str(tmp_path / "g.pdf"), str(tmp_path / "g.png"), "smoke", "toy")
    hr = data[data["metric"] == "pp_hr@100"].set_index(["method", "seed", "group"])["mean"]
    assert len(data) == 2 * 2 * 4 * 2 and set(data["n"]) == {2}
    # by hand: DUI seed 0 groups (1, 1), (0, 0), (1, 0), (1, 1); seed 1 (0, 0), (0, 0), (1, 1), (1, 1)
    assert [hr["lambdaopt_dui", 0, g] for g in ("1–2", "3–4", "5–6", "7–8")] == [1.0, 0.0, 0.5, 1.0]
    assert [hr["lambdaopt_dui", 1, g] for g in ("1–2", "3–4", "5–6", "7–8")] == [0.0, 0.0, 1.0, 1.0]
    (fig,) = saved_figures
    from matplotlib.container import BarContainer

    bars = {c.get_label(): [p.get_height() for p in c] for c in fig.axes[0].containers if isinstance(c, BarContainer)}
    assert bars["MF-λFix"] == [0.5] * 4
    dui_bars = bars["MF-λOpt-DUI"]
    assert dui_bars == [0.5, 0.0, 0.75, 1.0]                          # the two seeds' means averaged
    assert any("averaged over 2 seeds" in t.get_text() for t in fig.texts)
