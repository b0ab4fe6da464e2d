"""FedRAP's validation grids: grid expansion, run names, settings layering, picks, the tuning table."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from recrepro.papers.fedrap import rules as fedrap_rules
from recrepro.papers.fedrap import tuning


def _config(repo_root: Path) -> dict:
    return yaml.safe_load((repo_root / "config.yaml").read_text())


def test_grid_points_lists_points_then_the_product_in_key_order():
    spec = {"points": [{"lam": 0.1, "mu": 1.0e-3}],
            "product": {"lam": [0.1, 0.01], "mu": [1.0, 0.1], "l2": [1.0e-4]}}
    assert tuning.grid_points(spec) == [
        {"lam": 0.1, "mu": 1.0e-3},
        {"lam": 0.1, "mu": 1.0, "l2": 1.0e-4}, {"lam": 0.1, "mu": 0.1, "l2": 1.0e-4},
        {"lam": 0.01, "mu": 1.0, "l2": 1.0e-4}, {"lam": 0.01, "mu": 0.1, "l2": 1.0e-4}]
    # points only (FedNCF's grid): no empty point of the default flags appended (itertools.product())
    assert tuning.grid_points({"points": [{"lr_network": 0.01}, {"lr_network": 0.001}]}) == [
        {"lr_network": 0.01}, {"lr_network": 0.001}]
    assert tuning.grid_points({"points": [{"lam": 0.1}], "product": {}}) == [{"lam": 0.1}]


def test_grid_run_names_round_trip_and_other_names_are_not_grid_runs():
    assert tuning.grid_run_name("fedrap_code", 7) == "fedrap_code-g07"
    assert tuning.parse_grid_run("fedrap_code-g07") == ("fedrap_code", 7)
    assert tuning.parse_grid_run("fedrap_code-g123") == ("fedrap_code", 123)
    for name in ("fedrap_code", "fedrap_code_tuned", "fedrap_code-g7", "fedrap_code-x07"):
        assert tuning.parse_grid_run(name) is None


def test_paper_grids_stay_within_the_stated_budget_and_hold_the_public_reference_points(repo_root):
    block = _config(repo_root)["fedrap"]["tiers"]["paper"]["tuning"]
    sizes = {g: len(tuning.grid_points(spec)) for g, spec in block["grids"].items()}
    assert all(1 <= n <= 30 for n in sizes.values()), sizes
    points = tuning.grid_points(block["grids"]["fedrap_code"])
    readme = {"lam": 0.1, "mu": 1.0e-3, "lr_network": 1.0e-4, "lr_args": 1000.0, "l2": 1.0e-6}
    ml1m_log = {"lam": 0.01, "mu": 0.01, "lr_network": 0.5, "lr_args": 1000.0, "l2": 1.0e-4}
    lastfm_log = {"lam": 0.1, "mu": 1.0, "lr_network": 0.01, "lr_args": 100.0, "l2": 1.0e-4}
    assert points[0] == readme
    assert ml1m_log in points and lastfm_log in points
    assert len({json.dumps(p, sort_keys=True) for p in points}) == len(points)  # no point twice


def test_grid_run_settings_put_the_point_over_the_dataset_flags(repo_root):
    config = _config(repo_root)
    s = fedrap_rules.rule_settings(config, "paper", "ml-100k", "fedrap_code-g00")
    # g00 is the README's ML-100K flags; the dataset block holds the same, the point wins either way
    assert (s["lam"], s["mu"], s["lr_network"], s["lr_args"], s["l2"]) == (0.1, 1.0e-3, 1.0e-4, 1000.0, 1.0e-6)
    s = fedrap_rules.rule_settings(config, "paper", "ml-100k", "fedrap_code-g01")
    assert (s["lam"], s["mu"], s["lr_network"], s["lr_args"], s["l2"]) == (0.1, 1.0, 0.5, 1000.0, 1.0e-4)
    assert (s["method"], s["mode"], s["negative_pool"]) == ("fedrap", "code", "train")
    with pytest.raises(ValueError, match="g00..g29, not g99"):
        fedrap_rules.rule_settings(config, "paper", "ml-100k", "fedrap_code-g99")


def test_tuned_variant_takes_its_grid_pick_and_keeps_its_own_pool_and_mode(repo_root):
    config = _config(repo_root)
    block = config["fedrap"]["tiers"]["paper"]["tuning"]
    config = copy.deepcopy(config)
    block = config["fedrap"]["tiers"]["paper"]["tuning"]
    block["picks"] = {}
    with pytest.raises(ValueError, match="needs a pick of grid 'fedrap_code' on amazon-video"):
        fedrap_rules.rule_settings(config, "paper", "amazon-video", "fedrap_pool_tuned")
    block["picks"] = {"amazon-video": {"fedrap_code": "g03", "fedmf": "g00"}}
    point = tuning.grid_points(block["grids"]["fedrap_code"])[3]
    s = fedrap_rules.rule_settings(config, "paper", "amazon-video", "fedrap_pool_tuned")
    assert (s["mode"], s["negative_pool"]) == ("paper", "all_interactions")
    assert {k: s[k] for k in point} == point
    s = fedrap_rules.rule_settings(config, "paper", "amazon-video", "fedmf_pool_tuned")
    assert (s["method"], s["negative_pool"], s["lr_network"], s["lr_args"], s["l2"]) == \
        ("fedmf", "all_interactions", 0.5, 200.0, 1.0e-4)  # g00: the released train.py's defaults
    # the tuned runs appear only where their grid has a pick, on every seed
    runs = fedrap_rules.rule_runs(config, "paper")
    tuned = [r for r in runs if "_tuned/" in r]
    assert tuned and all("/amazon-video/" in r for r in tuned)
    assert {r.split("/")[6] for r in tuned} == {n for n, t in block["tuned"].items() if t["grid"] in ("fedrap_code", "fedmf")}
    assert {r.split("/")[7] for r in tuned} == {"seed0", "seed1", "seed2"}


def test_grid_runs_cover_every_point_on_the_tuning_datasets_at_the_first_seed(repo_root):
    config = _config(repo_root)
    block = config["fedrap"]["tiers"]["paper"]["tuning"]
    runs = fedrap_rules.rule_grid_runs(config, "paper")
    n = sum(len(tuning.grid_points(g)) for g in block["grids"].values())
    assert len(runs) == n * len(block["datasets"])
    assert all(r.endswith(f"/seed{block['seed']}/metrics.json") for r in runs)
    assert "results/paper/fedrap/runs/amazon-video/leave_one_out/fedmf-g17/seed0/metrics.json" in runs


def _grid_record(root: Path, dataset: str, name: str, val_hr: float, test_hr: float) -> Path:
    d = root / dataset / name / "seed0"
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({
        "dataset": dataset, "method": name, "seed": 0, "selected_round": 5,
        "val_hr@10_at_selected": val_hr, "val_ndcg@10_at_selected": val_hr / 2,
        "overall": {"hr@10": test_hr, "ndcg@10": test_hr / 2}}))
    return d


def test_pick_is_the_best_validation_point_never_the_best_test_and_a_tie_keeps_the_earlier(tmp_path):
    block = {"select": "val_hr@10", "seed": 0,
             "grids": {"fedmf": {"product": {"lr_network": [0.5, 0.01, 1.0e-4]}}},
             "picks": {"ml-100k": {"fedmf": "g02"}}}
    dirs = [_grid_record(tmp_path, "ml-100k", "fedmf-g00", 0.40, 0.30),
            _grid_record(tmp_path, "ml-100k", "fedmf-g01", 0.45, 0.20),   # best validation
            _grid_record(tmp_path, "ml-100k", "fedmf-g02", 0.35, 0.50)]   # best test: never picked
    frame = tuning.grid_frame(dirs)
    assert tuning.pick_from_records(frame) == {"ml-100k": {"fedmf": "g01"}}
    tie = [_grid_record(tmp_path, "lastfm", "fedmf-g00", 0.45, 0.1), _grid_record(tmp_path, "lastfm", "fedmf-g01", 0.45, 0.2)]
    assert tuning.pick_from_records(tuning.grid_frame(tie)) == {"lastfm": {"fedmf": "g00"}}
    table = tuning.tuning_table(block, dirs)
    assert table["settings"].tolist() == ["lr_network=0.5", "lr_network=0.01", "lr_network=0.0001"]
    md = tuning.tuning_markdown(table, block, "paper")
    assert "| g01 | lr_network=0.01 | 0.4500 |" in md and "**pick**" in md
    # the config names g02, the records say g01: the page says so
    assert "config pick (not the records' best)" in md and "ml-100k/fedmf" in md


def test_tuning_table_says_when_a_grid_is_incomplete_or_empty(tmp_path):
    block = {"grids": {"fedmf": {"product": {"lr_network": [0.5, 0.01, 1.0e-4]}}}}
    dirs = [_grid_record(tmp_path, "ml-100k", "fedmf-g00", 0.40, 0.30)]
    md = tuning.tuning_markdown(tuning.tuning_table(block, dirs), block, "paper")
    assert "(1 of 3 points run)" in md and "provisional: 2 point(s) not run yet" in md
    assert "No grid run is recorded yet." in tuning.tuning_markdown(tuning.tuning_table(block, []), block, "paper")


def test_extra_points_come_after_the_product_so_earlier_points_keep_their_numbers():
    spec = {"points": [{"lam": 0.1}], "product": {"lam": [1.0, 2.0]}}
    before = tuning.grid_points(spec)
    after = tuning.grid_points({**spec, "extra": [{"lam": 4.0}, {"lam": 8.0}]})
    assert after[:len(before)] == before and after[len(before):] == [{"lam": 4.0}, {"lam": 8.0}]


def test_a_pick_on_the_grids_edge_is_flagged_and_an_interior_one_is_not(tmp_path):
    block = {"grids": {"fedmf": {"product": {"lr_network": [0.5, 0.01, 1.0e-4], "l2": [1.0e-4]}}}}
    edge = [_grid_record(tmp_path / "a", "ml-100k", "fedmf-g00", 0.30, 0.3),
            _grid_record(tmp_path / "a", "ml-100k", "fedmf-g01", 0.20, 0.3),
            _grid_record(tmp_path / "a", "ml-100k", "fedmf-g02", 0.40, 0.3)]
    md = tuning.tuning_markdown(tuning.tuning_table(block, edge), block, "paper")
    # g02 holds the smallest lr_network; l2 was searched at one value, so it is no edge
    assert "edge in lr_network (smallest):" in md and "l2" not in md.split("edge in")[1].split(":")[0]
    inner = [_grid_record(tmp_path / "b", "ml-100k", "fedmf-g00", 0.30, 0.3),
             _grid_record(tmp_path / "b", "ml-100k", "fedmf-g01", 0.40, 0.3),
             _grid_record(tmp_path / "b", "ml-100k", "fedmf-g02", 0.20, 0.3)]
    assert "edge" not in tuning.tuning_markdown(tuning.tuning_table(block, inner), block, "paper")
    assert tuning.grid_edges([{"a": 1.0}, {"a": 2.0}], {"a": 2.0}) == ["a (largest)"]


def test_a_diverged_grid_point_is_shown_and_never_picked_even_with_the_best_validation(tmp_path):
    block = {"grids": {"fedmf": {"product": {"lr_network": [0.5, 0.01]}}}}
    dirs = [_grid_record(tmp_path, "ml-100k", "fedmf-g00", 0.60, 0.5),
            _grid_record(tmp_path, "ml-100k", "fedmf-g01", 0.40, 0.3)]
    m = json.loads((dirs[0] / "metrics.json").read_text())
    (dirs[0] / "metrics.json").write_text(json.dumps({**m, "diverged": {"round": 52, "error": "inf in client losses"}}))
    frame = tuning.grid_frame(dirs)
    assert tuning.pick_from_records(frame) == {"ml-100k": {"fedmf": "g01"}}
    md = tuning.tuning_markdown(tuning.tuning_table(block, dirs), block, "paper")
    assert "(2 of 2 points run)" in md and "diverged in round 52 (never picked)" in md
    assert "| g01 | lr_network=0.01 | 0.4000 |" in md.replace(" **pick**", "")


def _run(root: Path, dataset: str, method: str, seed: int, hr: float) -> Path:
    d = root / dataset / method / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({"dataset": dataset, "method": method, "seed": seed,
                                                "overall": {"hr@10": hr, "ndcg@10": hr / 2}}))
    return d


def test_comparison_marks_the_best_federated_row_per_block_and_pairs_fedrap_with_each_baseline(tmp_path):
    from recrepro.papers.fedrap.comparison import comparison_frame, comparison_markdown, paired_rows

    dirs = []
    for seed, (ours, fedmf, mf) in enumerate([(0.30, 0.40, 0.70), (0.32, 0.41, 0.71), (0.34, 0.45, 0.69)]):
        dirs += [_run(tmp_path, "ml-100k", "fedrap_code_tuned", seed, ours),
                 _run(tmp_path, "ml-100k", "fedmf_tuned", seed, fedmf), _run(tmp_path, "ml-100k", "mf", seed, mf)]
    dirs.append(_run(tmp_path, "ml-100k", "fedrap_code_pool", 0, 0.99))
    frame = comparison_frame(dirs)
    md = comparison_markdown(frame, "paper", picks={"ml-100k": {"fedrap_code": "g07", "fedmf": "g03"}},
                             tuned={"fedrap_code_tuned": {"grid": "fedrap_code"}, "fedmf_tuned": {"grid": "fedmf"}})
    # FedMF (0.42 mean) is the best federated row of the train block; MF (centralised) is higher but not marked
    assert "| FedMF `fedmf_tuned` | tuned (fedmf g03) | **0.4200 ± 0.0265** |" in md
    assert "| MF (centralised) `mf` | centralised upper bound | 0.7000 ± 0.0100 |" in md
    assert "| FedRAP (released code) `fedrap_code_tuned` | tuned (fedrap_code g07) | 0.3200 ± 0.0200 |" in md
    # the code's-pool block has its own best, with one seed said
    assert "**0.9900 (1 seed)**" in md
    # picks that differ between datasets are named per dataset, in the columns' order
    two = comparison_markdown(comparison_frame(dirs + [_run(tmp_path / "two", "amazon-video", "fedmf_tuned", 0, 0.4)]), "paper",
                              picks={"ml-100k": {"fedmf": "g03"}, "amazon-video": {"fedmf": "g00"}},
                              tuned={"fedmf_tuned": {"grid": "fedmf"}})
    assert "| FedMF `fedmf_tuned` | tuned (fedmf ml-100k g03, amazon-video g00) |" in two
    # a grid extended past an edge whose best point moved: the row says its runs are not at it yet
    moved = comparison_markdown(frame, "paper", picks={"ml-100k": {"fedmf": "g03"}}, tuned={"fedmf_tuned": {"grid": "fedmf"}},
                                records_picks={"ml-100k": {"fedmf": "g05"}})
    assert "| FedMF `fedmf_tuned` | tuned (fedmf g03); validation now prefers ml-100k g05 (its runs not redone yet) |" in moved
    tests = paired_rows(frame, ["ml-100k"])
    row = tests[(tests["metric"] == "hr@10") & (tests["baseline"] == "fedmf_tuned")].iloc[0]
    # differences -0.10, -0.09, -0.11: mean -0.10, t = -0.10 / (0.01 / sqrt 3) = -17.32, two-sided p = 0.00332
    assert row["n_seeds"] == 3 and row["mean_diff"] == pytest.approx(-0.10)
    assert row["p_value"] == pytest.approx(0.003317, rel=1e-3)
    assert "| train | tuned | `fedrap_code_tuned` | `fedmf_tuned` | ml-100k | hr@10 | 3 | -0.1000 | 0.00332 |" in md
    assert comparison_markdown(comparison_frame([]), "paper") == ""
    # a configured tuned row without a record is shown as not run, with its grid's progress; a tuned
    # row that ran on one dataset says "not run" in the other's cells
    grid_done = _run(tmp_path, "amazon-video", "fedncf-g02", 0, 0.1)
    video = _run(tmp_path, "amazon-video", "fedmf_tuned", 0, 0.4)
    md = comparison_markdown(comparison_frame(dirs + [grid_done, video]), "paper",
                             tuned={"fedmf_tuned": {"grid": "fedmf"}, "fedncf_tuned": {"grid": "fedncf"}},
                             grids={"fedncf": {"points": [{"lr_network": 0.1}, {"lr_network": 0.01},
                                                          {"lr_network": 0.001}, {"lr_network": 0.0001}]}})
    assert ("| FedNCF `fedncf_tuned` | not run (grid fedncf: ml-100k 0 of 4, amazon-video 1 of 4) | not run | not run "
            "| not run | not run |") in md
    assert "| FedMF `fedmf_tuned` | tuned on validation | **0.4200 ± 0.0265** | **0.2100 ± 0.0132** | **0.4000 (1 seed)**" in md
    assert "`fedncf_pool_tuned`" not in md          # not named in the config's tuned rows
    # the grid's progress read from the grid records handed apart (the table's own runs hold none);
    # a diverged grid point has no test metrics and still counts as run, a comparison row without them is refused
    diverged = tmp_path / "div" / "seed0"
    diverged.mkdir(parents=True)
    (diverged / "metrics.json").write_text(json.dumps({"dataset": "ml-100k", "method": "fedncf-g03", "seed": 0,
                                                       "diverged": {"round": 1}}))
    grid_frame = comparison_frame([grid_done, diverged], grid=True)
    md = comparison_markdown(comparison_frame(dirs + [video]), "paper", tuned={"fedncf_tuned": {"grid": "fedncf"}},
                             grids={"fedncf": {"points": [{"lr_network": 0.1}] * 4}}, grid_frame=grid_frame)
    assert "not run (grid fedncf: ml-100k 1 of 4, amazon-video 1 of 4)" in md
    with pytest.raises(ValueError, match="no test hr@10"):
        comparison_frame([diverged])
    # a dataset outside the poster's three gets a column after them, TaFeng none
    extra = [_run(tmp_path, "synthetic", "fedmf_tuned", 0, 0.2), _run(tmp_path, "tafeng", "fedmf_tuned", 0, 0.3)]
    md = comparison_markdown(comparison_frame(dirs + extra), "paper")
    assert "| ml-100k HR@10 | ml-100k NDCG@10 | synthetic HR@10 | synthetic NDCG@10 |" in md and "tafeng HR@10" not in md


def test_official_agreement_pairs_each_released_curve_with_our_run_of_the_same_flags(tmp_path):
    import pandas as pd

    from recrepro.papers.fedrap.comparison import official_agreement, official_markdown

    curve = tmp_path / "official" / "ml-100k_readme_seed0.jsonl"
    curve.parent.mkdir()
    curve.write_text("".join(json.dumps({"round": a, "test_hr@10": v}) + "\n" for a, v in [(1, 0.18), (2, 0.28), (3, 0.35)]))
    ours = tmp_path / "runs" / "ml-100k" / "leave_one_out" / "fedrap_code_pool" / "seed0"
    ours.mkdir(parents=True)
    pd.DataFrame({"round": [1, 2, 3, 4], "test_hr@10": [0.17, 0.26, 0.36, 0.50]}).to_parquet(ours / "history.parquet")
    table = official_agreement([curve], tmp_path / "runs")
    r = table.iloc[0]
    # |Δ| = 0.01, 0.02, 0.01: the largest at round 2; our peak is taken over the released code's rounds only
    assert (r["ours"], r["rounds"], r["round_of_max"]) == ("fedrap_code_pool", 3, 2)
    assert r["max_abs_delta"] == pytest.approx(0.02) and r["mean_abs_delta"] == pytest.approx(0.04 / 3)
    assert (r["ours_peak"], r["ours_peak_round"], r["ours_last"]) == (pytest.approx(0.36), 3, pytest.approx(0.36))
    assert "| ml-100k | readme | 0 | `fedrap_code_pool` | 3 | 0.0200 (2) |" in official_markdown(table)
    bad = tmp_path / "official" / "ml-100k_other_seed0.jsonl"
    bad.write_text("")
    with pytest.raises(ValueError, match="ml-100k_other_seed0.jsonl"):
        official_agreement([bad], tmp_path / "runs")
    # a harness run just started has written no round yet: it is left out, not an error
    started = tmp_path / "official" / "ml-100k_ml1m_seed0.jsonl"
    started.write_text("")
    assert official_agreement([curve, started], tmp_path / "runs")["flags"].tolist() == ["readme"]
    # one seed of ours: no range to set the released curve against
    assert "| one seed of ours |" in official_markdown(table)
    # two more seeds: per round our lowest and highest; the released code's 0.18, 0.28, 0.35 against
    # [0.17, 0.19], [0.26, 0.27], [0.30, 0.36]: rounds 1 and 3 inside, round 2 above
    for seed, values in ((1, [0.19, 0.27, 0.30]), (2, [0.18, 0.26, 0.31])):
        d = ours.parent / f"seed{seed}"
        d.mkdir()
        pd.DataFrame({"round": [1, 2, 3], "test_hr@10": values}).to_parquet(d / "history.parquet")
    r = official_agreement([curve], tmp_path / "runs").iloc[0]
    assert (r["band_seeds"], r["band_rounds"], r["band_last"]) == (3, 3, (pytest.approx(0.30), pytest.approx(0.36)))
    assert r["band_share"] == pytest.approx(2 / 3)
    assert r["band_above"] == pytest.approx(1 / 3)
    assert "| 67% of 3 rounds, above it in 33% (3 seeds; last round 0.3000–0.3600) |" in official_markdown(
        official_agreement([curve], tmp_path / "runs"))


def test_official_figure_draws_each_released_curve_over_our_run(tmp_path):
    import pandas as pd
    from matplotlib.image import imread

    from recrepro.papers.fedrap.comparison import official_figure

    curve = tmp_path / "official" / "ml-100k_ml1m_seed0.jsonl"
    curve.parent.mkdir()
    curve.write_text("".join(json.dumps({"round": a, "test_hr@10": v, "test_ndcg@10": v / 2}) + "\n"
                             for a, v in [(1, 0.18), (2, 0.28)]))
    ours = tmp_path / "runs" / "ml-100k" / "leave_one_out" / "fedrap_code_pool_ml1m" / "seed0"
    ours.mkdir(parents=True)
    pd.DataFrame({"round": [1, 2, 3], "test_hr@10": [0.2, 0.3, 0.4],
                  "test_ndcg@10": [0.1, 0.15, 0.2]}).to_parquet(ours / "history.parquet")
    (ours.parent / "seed1").mkdir()  # a second seed: our range is drawn under the line
    pd.DataFrame({"round": [1, 2], "test_hr@10": [0.25, 0.27],
                  "test_ndcg@10": [0.12, 0.14]}).to_parquet(ours.parent / "seed1" / "history.parquet")
    official_figure([curve], tmp_path / "runs", str(tmp_path / "o.pdf"), str(tmp_path / "o.png"), "smoke")
    assert (tmp_path / "o.pdf").stat().st_size > 0 and imread(tmp_path / "o.png").shape[0] > 100
    with pytest.raises(ValueError, match="no released-code curve"):
        official_figure([], tmp_path / "runs", str(tmp_path / "x.pdf"), str(tmp_path / "x.png"), "smoke")


def test_a_grid_record_whose_settings_are_not_its_points_is_refused_by_name(tmp_path):
    block = {"grids": {"fedmf": {"product": {"lr_network": [0.5, 0.01]}}}}
    d = _grid_record(tmp_path, "ml-100k", "fedmf-g01", 0.40, 0.30)
    (d / "provenance.json").write_text(json.dumps({"config": {"settings": {"lr_network": 0.01, "dim": 32}}}))
    assert tuning.tuning_table(block, [d])["settings"].tolist() == ["lr_network=0.01"]
    # the grid gained a listed point in front: g01 now means lr_network=0.5, which this record never ran
    block["grids"]["fedmf"]["points"] = [{"lr_network": 0.5}]
    with pytest.raises(ValueError, match=r"fedmf-g01/seed0: ran with lr_network=0.01, but its grid point now reads "
                                         r"lr_network=0.5"):
        tuning.tuning_table(block, [d])


def test_a_tuned_record_that_did_not_run_at_the_current_pick_is_refused_by_name(tmp_path):
    block = {"grids": {"fedncf": {"points": [{"lr_network": 3.0e-3}, {"lr_network": 3.0e-2}]}},
             "picks": {"ml-100k": {"fedncf": "g00"}},
             "tuned": {"fedncf_tuned": {"grid": "fedncf", "variant": "fedncf"}}}
    tuned = _grid_record(tmp_path, "ml-100k", "fedncf_tuned", 0.50, 0.44)
    (tuned / "provenance.json").write_text(json.dumps({"config": {"settings": {"lr_network": 3.0e-3, "dim": 32}}}))
    other = _grid_record(tmp_path, "ml-100k", "fedmf", 0.40, 0.30)   # not a tuned name: never checked
    (other / "provenance.json").write_text(json.dumps({"config": {"settings": {"lr_network": 0.5}}}))
    tuning.check_tuned_records(block, [tuned, other])
    # a better point was found and the pick moved to it, but the tuned runs were not redone
    block["picks"]["ml-100k"]["fedncf"] = "g01"
    with pytest.raises(ValueError, match=r"fedncf_tuned/seed0: ran with lr_network=0.003, but the pick \(fedncf g01 "
                                         r"on ml-100k\) now reads lr_network=0.03: the pick changed after the run"):
        tuning.check_tuned_records(block, [tuned, other])
    # a tuned record on a dataset without a pick is refused too (the row would name no settings)
    del block["picks"]["ml-100k"]
    with pytest.raises(ValueError, match="names no 'fedncf' pick on ml-100k"):
        tuning.check_tuned_records(block, [tuned])


def test_the_pick_says_which_points_its_validation_noise_does_not_separate(tmp_path):
    block = {"grids": {"fedmf": {"product": {"lr_network": [0.5, 0.01, 1.0e-4, 1.0e-5]}}}}
    dirs = [_grid_record(tmp_path, "ml-100k", f"fedmf-g0{i}", v, 0.3) for i, v in enumerate((0.45, 0.41, 0.40, 0.30))]
    for d in dirs:  # 100 users evaluated: the pick's (g00, 0.45) binomial standard error is sqrt(.45 .55 / 100)
        m = json.loads((d / "metrics.json").read_text())
        (d / "metrics.json").write_text(json.dumps({**m, "counts": {"n_users_evaluated": 100}}))
    md = tuning.tuning_markdown(tuning.tuning_table(block, dirs), block, "paper")
    # 0.0497: g01 (0.41) lies within it, g02 (0.40, 0.0003 further) and g03 do not
    assert "hr@10 0.4500 has a binomial standard error of 0.0497 over 100 users; 1 other point lies within" in md
    # one point run: nothing to compare it with, no line
    md = tuning.tuning_markdown(tuning.tuning_table(block, dirs[:1]), block, "paper")
    assert "Validation noise" not in md
    # records without the count (older ones): no line rather than a guess
    bare = [_grid_record(tmp_path / "b", "ml-100k", f"fedmf-g0{i}", v, 0.3) for i, v in enumerate((0.45, 0.41))]
    assert "Validation noise" not in tuning.tuning_markdown(tuning.tuning_table(block, bare), block, "paper")


def test_headline_pairs_each_tuned_fedrap_row_with_the_best_tuned_baseline_of_its_pool(tmp_path):
    from recrepro.papers.fedrap.comparison import best_baseline_rows, comparison_frame, comparison_markdown

    dirs = []
    for seed, (ours, fedmf, pfedrec, central) in enumerate([(0.30, 0.40, 0.35, 0.9), (0.32, 0.41, 0.36, 0.9),
                                                            (0.34, 0.45, 0.37, 0.9)]):
        dirs += [_run(tmp_path, "ml-100k", "fedrap_code_tuned", seed, ours), _run(tmp_path, "ml-100k", "fedmf_tuned", seed, fedmf),
                 _run(tmp_path, "ml-100k", "pfedrec_tuned", seed, pfedrec), _run(tmp_path, "ml-100k", "mf", seed, central),
                 _run(tmp_path, "ml-100k", "fedmf_pool_tuned", seed, 0.5 + seed / 100)]
    # the default-flags rows never enter the headline, however high
    dirs += [_run(tmp_path, "ml-100k", "fedmf", s, 0.99) for s in range(3)]
    dirs.append(_run(tmp_path, "ml-100k", "fedrap_pool_tuned", 0, 0.99))   # one seed: means shown, not tested
    frame = comparison_frame(dirs)
    rows = best_baseline_rows(frame, ["ml-100k"]).set_index("method")
    # FedMF (mean 0.42) beats PFedRec (0.36) and is the baseline; MF is centralised and left out
    train = rows.loc["fedrap_code_tuned"]
    assert train["baseline"] == "fedmf_tuned" and train["baseline_mean"] == pytest.approx(0.42)
    # differences -0.10, -0.09, -0.11: t = -17.32 over 2 degrees of freedom, p = 0.00332
    assert train["p_value"] == pytest.approx(0.003317, rel=1e-3) and train["verdict"] == "baseline ahead"
    pool = rows.loc["fedrap_pool_tuned"]
    assert pool["baseline"] == "fedmf_pool_tuned" and pool["n_paired"] == 1 and pool["verdict"] == "too few seeds to test"
    md = comparison_markdown(frame, "paper")
    assert ("| train | ml-100k | `fedrap_code_tuned` | 0.3200 (3) | `fedmf_tuned` | 0.4200 (3) | -0.1000 | 3 | 0.00332 "
            "| baseline ahead |") in md
    assert ("| all_interactions | ml-100k | `fedrap_pool_tuned` | 0.9900 (1) | `fedmf_pool_tuned` | 0.5100 (3) | +0.4800 "
            "| 1 | — | too few seeds to test |") in md
    # FedRAP ahead, and a difference the seeds do not separate
    ahead = comparison_frame([_run(tmp_path / "a", "ml-100k", "fedrap_tuned", s, v) for s, v in enumerate([0.5, 0.52, 0.55])]
                             + [_run(tmp_path / "a", "ml-100k", "fedmf_tuned", s, v) for s, v in enumerate([0.4, 0.41, 0.43])]
                             + [_run(tmp_path / "a", "ml-100k", "fedncf_tuned", s, v) for s, v in enumerate([0.5, 0.56, 0.50])])
    verdicts = best_baseline_rows(ahead, ["ml-100k"]).set_index("method")["verdict"]
    # FedNCF (mean 0.52) is the best baseline; differences 0, -0.04, +0.05 give p ≈ 0.99
    assert verdicts["fedrap_tuned"] == "no significant difference"
    ahead = comparison_frame([_run(tmp_path / "b", "ml-100k", "fedrap_tuned", s, v) for s, v in enumerate([0.5, 0.52, 0.55])]
                             + [_run(tmp_path / "b", "ml-100k", "fedmf_tuned", s, v) for s, v in enumerate([0.4, 0.41, 0.43])])
    assert best_baseline_rows(ahead, ["ml-100k"])["verdict"].tolist() == ["FedRAP ahead"]
