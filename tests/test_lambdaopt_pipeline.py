"""λOpt drivers (issue 6): config helpers, run records, trajectory aggregation, table; real data."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from recrepro.config import load_config
from recrepro.papers.lambdaopt import grid as lo_grid, rules as lo_rules, run as lo_run, tables as lo_tables

EVAL = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test", "ks": [50, 100],
        "metrics": ["auc", "pp_hr", "pp_ndcg"], "rank_ties": "optimistic"}


def test_rule_settings_merge_order(repo_root):
    cfg = load_config(repo_root / "config.yaml")
    s = lo_rules.rule_settings(cfg, "paper", "ml-10m", "lambdaopt_dui_code")
    assert s["method"] == "lambdaopt" and s["granularity"] == "dui"
    assert s["sim_penalty"] == "full_table" and s["assumed_batch"] == "separate"   # variant beats switches
    assert s["batch_size"] == 10240 and s["dim"] == 128                            # dataset beats tier
    s = lo_rules.rule_settings(cfg, "paper", "amazon-fine-food", "lambdaopt_dui")
    assert (s["sim_penalty"], s["assumed_grad"], s["assumed_batch"]) == ("batch", "unregularised", "shared")
    assert s["batch_size"] == 1024 and s["lambda_lr"] == pytest.approx(1e-2)
    with pytest.raises(ValueError):
        lo_rules.rule_settings(cfg, "smoke", "synthetic", "nope")
    runs = lo_rules.rule_runs(cfg, "smoke")
    assert len(runs) == 8 and all("/synthetic/temporal_user_ratio/" in r for r in runs)


def test_epoch_cap_limits_epochs(repo_root):
    cfg = load_config(repo_root / "config.yaml")
    cfg["lambdaopt"]["tiers"]["paper"]["epoch_cap"] = 7
    assert lo_rules.rule_settings(cfg, "paper", "ml-100k", "lambdafix")["epochs"] == 7
    assert lo_rules.rule_settings(cfg, "paper", "ml-100k", "neumf")["epochs"] == 7
    assert lo_rules.rule_sensitivity_epochs(cfg, "paper") == 7
    cfg["lambdaopt"]["tiers"]["paper"]["epoch_cap"] = None
    # the converging budget's cap (the slides' heat map runs to epoch 3,200) and its patience
    settings = lo_rules.rule_settings(cfg, "paper", "ml-100k", "lambdafix")
    assert (settings["epochs"], settings["patience"], settings["eval_every"]) == (3200, 100, 1)
    assert lo_rules.rule_sensitivity_epochs(cfg, "paper") == 3200


def _fake_run(root, method, seed, values):
    from recrepro.io import write_json

    out = root / f"{method}_{seed}"
    out.mkdir(parents=True)
    write_json(out / "metrics.json", {"dataset": "toy", "split": "s", "method": method, "seed": seed,
                                      "tier": "smoke", "overall": {"auc": float(np.mean(values))}})
    pd.DataFrame({"user": np.arange(len(values)), "auc": values}).to_parquet(out / "per_user.parquet")
    return out


def test_paired_tests_hand_checked(tmp_path):
    runs = [_fake_run(tmp_path, "lambdafix", 0, [0.5, 0.5, 0.5]), _fake_run(tmp_path, "lambdaopt_dui", 0, [0.6, 0.7, 0.8]),
            _fake_run(tmp_path, "lambdafix", 1, [0.5, 0.5]), _fake_run(tmp_path, "lambdaopt_dui", 1, [0.9, 1.0])]
    t = lo_tables.paired_tests(runs).set_index("metric")
    # 5 positive differences 0.1 … 0.5: exact two-sided Wilcoxon p = 2 / 2^5
    assert t.loc["auc", "n_pairs"] == 5 and t.loc["auc", "seeds"] == 2
    assert t.loc["auc", "wilcoxon_p"] == pytest.approx(2 / 32)
    assert t.loc["auc", "diff"] == pytest.approx(0.3)
    # seed means: A (0.7, 0.95), B (0.5, 0.5); differences 0.2, 0.45 -> t = 0.325 / (0.17678 / sqrt 2) = 2.6
    assert t.loc["auc", "mean_a"] == pytest.approx(0.825)
    from scipy import stats

    assert t.loc["auc", "ttest_p"] == pytest.approx(2 * stats.t.sf(2.6, 1), rel=1e-6)
    agg = pd.DataFrame({"dataset": "toy", "metric": "auc", "method": lo_tables.GRANULARITY_METHODS,
                        "mean": [0.7, 0.6, 0.8, 0.9], "std": 0.0, "count": 1})
    assert lo_tables.granularity_order(agg)["order"].tolist() == ["dui > di > d > du"]


def test_trajectory_frame_hand_checked():
    class Fake:
        lambda_trajectory = [{"epoch": 0, "user": np.array([1.0, 3.0, 5.0]), "item": np.array([0.0, 2.0])}]

    train = sp.csr_matrix(np.array([[1, 0], [1, 0], [1, 1]], dtype=np.float32))
    frame = lo_run.trajectory_frame(Fake(), train)
    users = frame[frame["kind"] == "user"].set_index("freq")
    # users 0 and 1 have frequency 1 (mean λ 2), user 2 frequency 2 (λ 5)
    assert users.loc[1, "mean_lambda"] == pytest.approx(2.0) and users.loc[1, "n"] == 2
    assert users.loc[2, "mean_lambda"] == pytest.approx(5.0)
    items = frame[frame["kind"] == "item"].set_index("freq")
    assert items.loc[3, "mean_lambda"] == 0.0 and items.loc[1, "mean_lambda"] == 2.0


def _write_split(tmp_path):
    from recrepro.datasets.container import Interactions
    from recrepro.datasets.splits import make_split, write_split

    rng = np.random.default_rng(0)
    n_users, n_items = 60, 40
    rows = []
    for u in range(n_users):
        items = rng.choice(n_items, size=12, replace=False, p=np.linspace(2, 1, n_items) / np.linspace(2, 1, n_items).sum())
        rows += [(u, int(i), t) for t, i in enumerate(items)]
    frame = pd.DataFrame(rows, columns=["user", "item", "timestamp"]).astype(
        {"user": np.int32, "item": np.int32, "timestamp": np.int64})
    frame["rating"] = np.float32(1.0)
    data = Interactions(frame[["user", "item", "rating", "timestamp"]], n_users, n_items)
    out = tmp_path / "split"
    write_split(make_split(data, "temporal_user_ratio", {}, 0), out,
                {"dataset": "toy", "protocol": "lambdaopt", "seed": 0})
    return out


def test_run_variant_writes_records_and_table(tmp_path):
    split_dir = _write_split(tmp_path)
    base = {"dim": 4, "epochs": 2, "batch_size": 64, "val_batch_size": 64, "lr": 1e-2, "init_std": 0.1}
    out_fix = tmp_path / "runs" / "lambdafix"
    res = lo_run.run_variant(split_dir=split_dir, variant="lambdafix",
                         settings={**base, "method": "lambdafix", "lambdafix_grid": [0.1, 0.0]}, seed=0,
                         out_dir=out_fix, evaluation=EVAL, meta={"tier": "smoke", "paper": "lambdaopt"})
    assert res["selected_lam"] in (0.1, 0.0)
    hist = pd.read_parquet(out_fix / "history.parquet")
    assert set(hist["lam"].dropna()) == {0.1, 0.0}
    out_dui = tmp_path / "runs" / "lambdaopt_dui"
    lo_run.run_variant(split_dir=split_dir, variant="lambdaopt_dui",
                   settings={**base, "method": "lambdaopt", "granularity": "dui"}, seed=0, out_dir=out_dui,
                   evaluation=EVAL, meta={"tier": "smoke", "paper": "lambdaopt"})
    metrics = json.loads((out_dui / "metrics.json").read_text())
    for key in lo_run.TABLE_METRICS:
        assert 0.0 <= metrics["overall"][key] <= 1.0
    traj = pd.read_parquet(out_dui / "trajectory.parquet")
    assert sorted(traj["epoch"].unique()) == [0, 1] and (traj["mean_lambda"] >= 0).all()
    agg = lo_tables.results_table([out_fix, out_dui])
    md = lo_tables.table_markdown(agg, "smoke")
    assert "| lambdafix |" in md and "| lambdaopt_dui |" in md
    assert md.index("| lambdafix |") < md.index("| lambdaopt_dui |")


@pytest.mark.realdata
def test_ml100k_lambdaopt_dui_learns(pipeline):
    """ml-100k, λOpt protocol: a short DUI run beats random ranking and learns non-negative Λ."""
    from recrepro.evaluation.on_split import SplitData, evaluate_on_split

    _, make = pipeline
    split_dir = make("ml-100k", "lambdaopt", "temporal_user_ratio", 0)
    split = SplitData(split_dir)
    model = lo_run.make_model({"method": "lambdaopt", "granularity": "dui", "dim": 16, "epochs": 3, "batch_size": 1024,
                           "val_batch_size": 1024, "lr": 1e-2, "init_std": 0.1}, seed=0)
    model.fit(split.csr(["train"]), validation=split.csr(["validation"]))
    result = evaluate_on_split(model, split, EVAL)
    assert result.overall["auc"] > 0.75
    assert float(model.lam_user.detach().min()) >= 0 and float(model.lam_user.detach().max()) > 0


def test_lambdafix_from_its_grid_points_equals_the_one_job(tmp_path, repo_root):
    """MF-λFix one job per λ (``<variant>-gNN``), its record assembled: the one job's record, file by file."""
    from recrepro.io import read_json
    from recrepro.papers.lambdaopt.grid import assemble_lambdafix

    split_dir = _write_split(tmp_path)
    grid = [1.0, 0.1, 0.0]
    settings = {"dim": 4, "epochs": 6, "batch_size": 64, "val_batch_size": 64, "lr": 1e-2, "init_std": 0.1,
                "patience": 2, "eval_every": 1, "method": "lambdafix", "lambdafix_grid": grid}
    meta = {"tier": "smoke", "paper": "lambdaopt", "dataset": "toy"}
    one = tmp_path / "one" / "lambdafix"
    lo_run.run_variant(split_dir=split_dir, variant="lambdafix", settings=settings, seed=3, out_dir=one,
                   evaluation=EVAL, meta=meta)
    points = []
    for k in range(len(grid)):   # in reverse: no point's numbers may depend on what ran before it
        k = len(grid) - 1 - k
        name = f"lambdafix-g{k:02d}"
        out = tmp_path / "points" / name
        assert lo_grid.grid_point_settings(settings, name)["lambdafix_grid"] == [grid[k]]
        lo_run.run_variant(split_dir=split_dir, variant=name, settings=lo_grid.grid_point_settings(settings, name), seed=3,
                       out_dir=out, evaluation=EVAL, meta=meta)
        points.insert(0, out)
    assembled = tmp_path / "assembled" / "lambdafix"
    picked = assemble_lambdafix(points, assembled, "lambdafix", settings, EVAL)
    expected = read_json(one / "metrics.json")
    assert read_json(assembled / "metrics.json") == expected
    assert picked["selected_lam"] == expected["selected_lam"] and picked["picked"].startswith("lambdafix-g")
    for name in ("history.parquet", "per_user.parquet", "trajectory.parquet", "train_counts.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(assembled / name), pd.read_parquet(one / name))
    hist = pd.read_parquet(assembled / "history.parquet")
    assert hist["epoch"].isna().sum() == len(grid) and set(hist["lam"]) == set(grid)
    prov = read_json(assembled / "provenance.json")
    assert [p["run"] for p in prov["grid_points"]] == ["lambdafix-g00", "lambdafix-g01", "lambdafix-g02"]
    assert prov["run"]["method"] == "lambdafix" and prov["config"]["settings"]["lambdafix_grid"] == grid
    assert len(prov["timings"]["history.parquet"]["seconds"]) == len(hist)
    # the rule's command: the same verb as training, handed the points' records
    from recrepro.cli.main import main as recrepro

    via_cli = tmp_path / "cli" / "lambdafix"
    assert recrepro(["lambdaopt", "train", "--split-dir", str(split_dir), "--variant", "lambdafix",
                     "--settings", json.dumps(settings), "--seed", "3", "--out-dir", str(via_cli),
                     "--meta", json.dumps(meta), "--evaluation", json.dumps(EVAL),
                     "--grid-runs", *[str(p / "metrics.json") for p in points]]) == 0
    assert read_json(via_cli / "metrics.json") == expected
    # a point of another λ, or another seed, is refused: no record mixes runs
    with pytest.raises(ValueError, match="not 'lambdafix-g00' at λ=1.0"):
        assemble_lambdafix([points[1], points[1], points[2]], tmp_path / "bad", "lambdafix", settings, EVAL)
    with pytest.raises(ValueError, match="3 grid points, 2 runs"):
        assemble_lambdafix(points[:2], tmp_path / "bad", "lambdafix", settings, EVAL)
    assert not (tmp_path / "bad" / "metrics.json").exists()


def test_lambdafix_runs_one_job_per_lambda_where_the_tier_says(repo_root):
    cfg = load_config(repo_root / "config.yaml")
    grid = lo_rules.rule_settings(cfg, "paper", "amazon-video", "lambdafix")["lambdafix_grid"]
    assert cfg["lambdaopt"]["tiers"]["paper"]["lambdafix_per_lambda"] == ["amazon-video"]
    assert lo_rules.rule_grid_points(cfg, "paper", "amazon-video", "lambdafix") == \
        [f"lambdafix-g{k:02d}" for k in range(len(grid))]
    assert lo_rules.rule_grid_points(cfg, "paper", "amazon-video", "lambdafix_init001")[-1] == \
        f"lambdafix_init001-g{len(grid) - 1:02d}"
    point = lo_rules.rule_settings(cfg, "paper", "amazon-video", "lambdafix_init001-g02")
    assert point["lambdafix_grid"] == [grid[2]] and point["init_std"] == 0.01 and point["eval_every"] == 5
    assert lo_rules.rule_grid_points(cfg, "paper", "ml-100k", "lambdafix") == []           # one job there
    assert lo_rules.rule_grid_points(cfg, "paper", "amazon-video", "lambdaopt_dui") == []  # not a grid
    runs = lo_rules.rule_grid_runs(cfg, "paper")
    assert len(runs) == 2 * len(grid) * 3 and all("/amazon-video/" in r for r in runs)
    with pytest.raises(ValueError, match="names no λ"):
        lo_rules.rule_settings(cfg, "paper", "amazon-video", f"lambdafix-g{len(grid):02d}")
    with pytest.raises(ValueError, match="names no λ"):
        lo_rules.rule_settings(cfg, "paper", "amazon-video", "lambdaopt_dui-g00")
