"""The LRS experiment drivers end to end on tiny settings: sweeps, figures, run records, scorecard."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from recrepro.cli.main import main as recrepro
from recrepro.papers.lrs import figures as lrs_figures
from recrepro.papers.lrs import run as lrs_run
from recrepro.scorecard import build_scorecard, expected_path, load_expected

TINY = {
    "seeds": [0],
    "base": {"d": 8, "r": 2, "k": 1, "t": 40, "sigma": 0.05, "b_scale": 1.0},
    "algorithm": {"iterations": 3, "inner_steps": 2},
    "ridge": 1.0,
    "m_grid": [6, 12],
    "t_grid": [20, 40],
    "t_fixed_m": 10,
    "iterations_m": 12,
    "private": {"m": 12, "epsilons": [1.0, 8.0], "delta": 1e-5, "clip": 1.0, "init_clip": 25.0, "step": 1.0},
    "acceptance": {
        "noiseless": {"d": 8, "r": 2, "k": 1, "t": 40, "m": 20},
        "noisy": {"d": 8, "r": 2, "k": 1, "t": 40, "m": 6, "sigma": 0.05},
        "floor": {"d": 8, "r": 2, "k": 1, "t": 40, "m": 30, "sigma": 0.05},
        "private": {"spec": {"d": 8, "r": 2, "k": 1, "t": 40, "m": 12, "sigma": 0.05}, "epsilons": [1.0, 8.0],
                    "delta": 1e-5, "clip": 1.0, "init_clip": 25.0, "step": 1.0},
    },
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_sweeps_have_the_expected_rows_and_figures_draw(tmp_path):
    args = []
    for figure, experiment in lrs_figures.FIGURES.items():
        path = tmp_path / f"{experiment}.parquet"
        assert recrepro(["lrs", "train", "--mode", "sweep", "--experiment", experiment, "--seeds", "0,1", "--settings", json.dumps(TINY),
                         "--out", str(path)]) == 0
        args.append(f"{figure}={path}")
    m = pd.read_parquet(tmp_path / "error_vs_m.parquet")
    assert len(m) == 2 * 2 * len(lrs_run.METHODS) and set(m["method"]) == set(lrs_run.METHODS)
    assert (m["param_error"] > 0).all()
    it = pd.read_parquet(tmp_path / "iterations.parquet")
    assert sorted(it["iteration"].unique()) == [0, 1, 2, 3]
    priv = pd.read_parquet(tmp_path / "private.parquet")
    got = priv[priv["method"] == "private_amht_lrs"]["epsilon"]
    assert sorted(set(got.round(9))) == [1.0, 8.0]  # the accountant's spend equals the target
    assert math.isinf(priv[priv["method"] == "amht_lrs"]["epsilon"].iloc[0])
    # two figures here (drawing is the slow part); the workflow test draws all five
    drawn = [a for a in args if a.startswith(("fig1", "fig3"))]
    assert recrepro(["lrs", "figures", "--tier", "smoke", "--out-dir", str(tmp_path / "fig"), *drawn]) == 0
    for figure in ("fig1_error_vs_m", "fig3_iterations"):
        assert (tmp_path / "fig" / f"{figure}.pdf").stat().st_size > 1000
        assert (tmp_path / "fig" / f"{figure}.png").stat().st_size > 1000


def test_acceptance_records_feed_the_scorecard(tmp_path):
    runs = lrs_run.run_acceptance(TINY, 0, "smoke", tmp_path / "runs")
    assert len(runs) == 14
    metrics = json.loads((tmp_path / "runs/synthetic/noisy/amht_lrs/seed0/metrics.json").read_text())
    assert metrics["paper"] == "lrs" and metrics["split"] == "noisy"
    assert metrics["overall"]["beats_baselines"] in (0.0, 1.0)
    assert metrics["overall"]["error_to_oracle"] >= 1.0 - 1e-9 or metrics["overall"]["error_to_oracle"] > 0
    oracle = json.loads((tmp_path / "runs/synthetic/floor/oracle/seed0/metrics.json").read_text())
    assert oracle["overall"]["subspace_distance"] < 1e-12
    expected = load_expected(lrs_expected := (expected_path("lrs")))
    assert expected.paper == "lrs" and all(e.dataset == "synthetic" for e in expected.entries)
    card = build_scorecard("lrs", "smoke", lrs_expected, runs, tmp_path / "card.md", tmp_path / "card.csv")
    table = pd.read_csv(tmp_path / "card.csv")
    assert "not_run" not in set(table["verdict"].fillna(""))
    assert card is not None


def test_fig6_is_drawn_from_its_rows_alone(tmp_path):
    # the redraw from records draws Fig. 6 from the committed rows, with no ML-100K data
    rows = pd.DataFrame([{"experiment": "ml100k", "seed": seed, "method": method, "m": m, "t": 568,
                          "heldout_mse": mse + 0.1 * seed, "seconds": 0.0}
                         for seed in (0, 1) for m in (5, 10)
                         for method, mse in (("amht_lrs", 3.0), ("altmin", 2.0), ("global_mean", 1.2))])
    path = tmp_path / "ml100k.parquet"
    rows.to_parquet(path)
    assert recrepro(["lrs", "figures", "--tier", "paper", "--out-dir", str(tmp_path / "fig"),
                     f"fig6_ml100k={path}"]) == 0
    assert (tmp_path / "fig" / "fig6_ml100k.pdf").read_bytes()[:4] == b"%PDF"
    assert (tmp_path / "fig" / "fig6_ml100k.png").stat().st_size > 1000
    with pytest.raises(SystemExit, match="unknown figure 'fig9_nothing'"):
        recrepro(["lrs", "figures", "--tier", "paper", "--out-dir", str(tmp_path / "fig"), f"fig9_nothing={path}"])


def test_sweep_rows_leave_their_wall_times_to_a_file_of_their_own(tmp_path):
    # a rerun of the same seeds writes the same rows byte for byte; only the timings differ
    outs = []
    for run in ("a", "b"):
        rows, timings = tmp_path / f"{run}.parquet", tmp_path / f"{run}.timings.parquet"
        assert recrepro(["lrs", "train", "--mode", "sweep", "--experiment", "error_vs_t", "--seeds", "0", "--settings", json.dumps(TINY),
                         "--out", str(rows), "--out-timings", str(timings)]) == 0
        outs.append((rows, timings))
    (rows_a, timings_a), (rows_b, _) = outs
    assert rows_a.read_bytes() == rows_b.read_bytes()
    frame, times = pd.read_parquet(rows_a), pd.read_parquet(timings_a)
    assert "seconds" not in frame.columns
    assert list(times.columns) == ["experiment", "seed", "method", "m", "t", "seconds"]
    assert len(times) == len(frame) and (times["seconds"] > 0).all()
    assert times[["method", "t"]].equals(frame[["method", "t"]])


def test_fig3_iteration_ticks_never_print_minus_zero(tmp_path, monkeypatch):
    # a tick the locator puts at −2e-16 on one host and at 0 on another used to print "−0" there,
    # so the committed PDF changed bytes from host to host
    import recrepro.reporting.plotting as plotting

    drawn = {}
    monkeypatch.setattr(plotting, "save_figure", lambda fig, *a, **k: drawn.setdefault("fig", fig))
    rows = [{"seed": 0, "method": "amht_lrs", "iteration": i, "subspace_distance": 10.0 ** -i,
             "param_error": 2.0 ** -i} for i in range(4)]
    lrs_figures.make_figure("iterations", pd.DataFrame(rows), str(tmp_path / "f.pdf"), str(tmp_path / "f.png"), "smoke")
    fig = drawn["fig"]
    fig.canvas.draw()
    for ax in fig.axes[:2]:
        fmt = ax.xaxis.get_major_formatter()
        assert [fmt(v, 0) for v in (-2e-16, 0.0, 1.0000000000000002, 3.0)] == ["0", "0", "1", "3"]
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert labels and all(text.lstrip("-").isdigit() for text in labels) and "−0" not in labels
