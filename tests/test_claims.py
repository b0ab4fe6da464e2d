"""Claims and their verdicts (recrepro.scorecard.claims, claimspec, claimpage): each check kind on hand-made
records that make it supported, contradicted and not testable; the loader's errors; the pages, the
counts and a byte-identical redraw."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from recrepro.scorecard import ExpectedFileError, expected_path, load_expected
from recrepro.scorecard.claimpage import claims_counts, claims_section, dataset_checks_section, write_claims
from recrepro.scorecard.claims import (
    _fmt_vs,
    CONTRADICTED,
    MIXED,
    NOT_TESTABLE,
    SUPPORTED,
    ClaimRecords,
    Context,
    evaluate_check,
)
from recrepro.scorecard.claimspec import claim_from_mapping
from recrepro.scorecard.verdicts import judge_claim

PAPERS = ("exadmm", "prism", "lambdaopt", "fedrap", "lrs")


def run(root: Path, method: str, seed: int, overall: dict, *, dataset: str = "toy", split: str = "s1",
        extra: dict | None = None, history: dict | None = None) -> Path:
    d = root / "runs" / dataset / split / method / f"seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    metrics = {"dataset": dataset, "split": split, "method": method, "seed": seed, "tier": "paper",
               "overall": overall, **(extra or {})}
    (d / "metrics.json").write_text(json.dumps(metrics))
    if history is not None:
        (d / "history.json").write_text(json.dumps(history))
    return d


def ctx(root: Path, seeds_required: int | None = 3, paper_datasets=("toy",)) -> Context:
    return Context(paper="demo", results=root, records=ClaimRecords.under(root), seeds_required=seeds_required,
                   paper_datasets=frozenset(paper_datasets))


def check(**raw):
    """One check through the loader (so the tests use what a yaml file would give)."""
    return claim_from_mapping({"id": "X1", "claim": "c", "source": "s", "checks": [raw]}).checks[0]


def statuses(results) -> list[str]:
    return [r.status for r in results]


# ------------------------------------------------------------------------------------------ better


def test_better_supported_contradicted_and_not_testable(tmp_path):
    for seed, (a, b) in enumerate([(0.30, 0.20), (0.32, 0.21), (0.31, 0.19)]):
        run(tmp_path, "a", seed, {"ndcg@20": a})
        run(tmp_path, "b", seed, {"ndcg@20": b})
    c = ctx(tmp_path)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="ndcg@20", method="a", than="b"), c)
    assert r.status == SUPPORTED and not r.provisional
    assert "0.3100 vs 0.2000 (3 seeds; paired t-test over 3 seeds p=" in r.numbers
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="ndcg@20", method="b", than="a"), c)
    assert r.status == CONTRADICTED
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="ndcg@20", method="a", than="b",
                               lower_is_better=True), c)
    assert r.status == CONTRADICTED
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="ndcg@20", method="a", than=["c_tuned", "c"]), c)
    assert r.status == NOT_TESTABLE and r.numbers == "waits for `c_tuned` or `c` on toy (ndcg@20)"


def test_a_gain_inside_the_seed_noise_is_no_evidence_and_does_not_hold(tmp_path):
    # a: 0.41, 0.40, 0.39 (mean 0.40); b: 0.36, 0.36, 0.395 (mean 0.3717); differences 0.05, 0.04, -0.005:
    # t = 0.02833 / (0.02930 / sqrt 3) = 1.675 on 2 df, two-sided p = 0.236 by hand (t-table: 0.2 < p < 0.3)
    for seed, (a, b) in enumerate([(0.41, 0.36), (0.40, 0.36), (0.39, 0.395)]):
        run(tmp_path, "a", seed, {"hr@10": a})
        run(tmp_path, "b", seed, {"hr@10": b})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="hr@10", method="a", than="b"), ctx(tmp_path))
    assert r.status == CONTRADICTED
    assert "paired t-test over 3 seeds p=0.236; better in the mean, not significantly (p ≥ 0.05)" in r.numbers
    # the same gain, consistent over the seeds, holds
    for seed, b in enumerate([0.37, 0.36, 0.35]):
        run(tmp_path, "b", seed, {"hr@10": b})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="hr@10", method="a", than="b"), ctx(tmp_path))
    assert r.status == SUPPORTED and "not significantly" not in r.numbers
    # one seed each: no test, the mean decides (and the result is provisional)
    one = tmp_path / "one"
    run(one, "a", 0, {"hr@10": 0.41})
    run(one, "b", 0, {"hr@10": 0.40})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="hr@10", method="a", than="b"), ctx(one))
    assert r.status == SUPPORTED and r.provisional


def test_a_run_that_never_left_its_initialisation_is_not_compared(tmp_path):
    # stopped on patience with its best validation score at its first evaluation (epoch 5, every 5th epoch)
    stuck = {"stopping": {"stopped": "patience", "best_epoch": 5, "eval_every": 5}}
    run(tmp_path, "a", 0, {"auc": 0.65}, extra={"stopping": {"stopped": "patience", "best_epoch": 1425,
                                                              "eval_every": 5}})
    run(tmp_path, "b", 0, {"auc": 0.50}, extra=stuck)
    run(tmp_path, "c", 0, {"auc": 0.70}, extra={"stopping": {"stopped": "cap", "best_epoch": 5, "eval_every": 5}})
    records = ClaimRecords.under(tmp_path)
    assert records.untrained == {("toy", "b")}
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="auc", method=["a"], than=["b"]), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "`b` stopped at its first evaluation, never leaving its initialisation" in r.numbers
    # stopped at the cap (or improving after its first evaluation): compared as usual
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="auc", method=["a"], than=["c"]), ctx(tmp_path))
    assert r.status == CONTRADICTED


def test_better_prefers_the_first_candidate_that_ran_and_one_seed_is_provisional(tmp_path):
    run(tmp_path, "fedrap", 0, {"hr@10": 0.2})
    run(tmp_path, "fedrap_tuned", 0, {"hr@10": 0.5})
    run(tmp_path, "fedmf", 0, {"hr@10": 0.4})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="hr@10", method=["fedrap_tuned", "fedrap"],
                               than=["fedmf_tuned", "fedmf"], label="train pool"), ctx(tmp_path))
    assert r.label == "toy: `fedrap_tuned` vs `fedmf` (train pool)" and r.status == SUPPORTED
    assert r.seeds == (1, 3) and r.provisional and "(1 of 3 seeds)" in r.numbers


def test_better_and_relative_change_compare_the_seeds_both_sides_ran(tmp_path):
    # a: seed 0 at 0.30, seed 1 at 0.10 (an unlucky seed); b ran seed 0 only, at 0.25.  Over every
    # seed a's mean (0.20) is below b's; on the one seed both ran, a is above it.
    run(tmp_path, "a", 0, {"m": 0.30})
    run(tmp_path, "a", 1, {"m": 0.10})
    run(tmp_path, "b", 0, {"m": 0.25})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="m", method="a", than="b"), ctx(tmp_path))
    assert r.status == SUPPORTED and r.seeds == (1, 3)
    assert r.numbers.startswith("m 0.3000 vs 0.2500") and "`a`'s seed 1 left out (not run on the other side)" in r.numbers
    [r] = evaluate_check(check(kind="relative_change", datasets=["toy"], metric="m", method="a", than="b",
                               published=0.2, tolerance=0.05), ctx(tmp_path))
    assert r.status == SUPPORTED and "+20.0%" in r.numbers  # (0.30 - 0.25) / 0.25, not (0.20 - 0.25) / 0.25
    # no seed in common: the means of different seeds, and the line says so
    run(tmp_path, "c", 2, {"m": 0.15})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="m", method="a", than="c"), ctx(tmp_path))
    assert r.status == SUPPORTED and "no seed in common: means over different seeds" in r.numbers


def test_a_table_of_seed_means_says_when_the_sides_average_different_seed_counts(tmp_path):
    (tmp_path / "tables").mkdir()
    pd.DataFrame({"dataset": ["toy", "toy"], "method": ["a", "b"], "seeds": [2, 1], "m": [0.5, 0.4]}).to_csv(
        tmp_path / "tables" / "t.csv", index=False)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], table="tables/t.csv", metric="m", method=["a"],
                               than=["b"]), ctx(tmp_path))
    assert r.status == SUPPORTED and r.numbers.endswith("(means over 2 and 1 seeds)")


def test_paired_better_compares_like_with_like_never_a_tuned_run_with_an_untuned_one(tmp_path):
    spec = dict(kind="better", paired=True, datasets=["toy"], metric="m", method=["a_tuned", "a"],
                than=["b_tuned", "b"])
    for seed in range(3):
        run(tmp_path, "a", seed, {"m": 0.1})
        run(tmp_path, "b_tuned", seed, {"m": 0.4})
    # a ran untuned, b only tuned: no like-with-like pair yet (unpaired lists would pit `a` against `b_tuned`)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "`a_tuned` with `b_tuned` or `a` with `b`" in r.numbers
    assert evaluate_check(check(**{**spec, "paired": False}), ctx(tmp_path))[0].label.endswith("`a` vs `b_tuned`")
    for seed in range(3):
        run(tmp_path, "b", seed, {"m": 0.05})
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == SUPPORTED and "`a` vs `b`" in r.label
    for seed in range(3):
        run(tmp_path, "a_tuned", seed, {"m": 0.3})
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == CONTRADICTED and "`a_tuned` vs `b_tuned`" in r.label


def test_better_on_a_table_per_group(tmp_path):
    (tmp_path / "figures").mkdir()
    pd.DataFrame({"method": ["x", "y", "x", "y"], "group": ["low", "low", "high", "high"],
                  "metric": ["hr"] * 4, "mean": [0.5, 0.4, 0.1, 0.3]}).to_csv(tmp_path / "figures/g_toy.csv", index=False)
    results = evaluate_check(check(kind="better", datasets=["toy"], table="figures/g_{dataset}.csv", per="group",
                                   where={"metric": "hr"}, metric="mean", method="x", than="y"), ctx(tmp_path))
    assert [(r.label.split(":")[0], r.status) for r in results] == [("toy, group high", CONTRADICTED),
                                                                    ("toy, group low", SUPPORTED)]
    [r] = evaluate_check(check(kind="better", datasets=["other"], table="figures/g_{dataset}.csv", metric="mean",
                               method="x", than="y"), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "figures/g_{dataset}.csv" in r.numbers
    # a table drawn from one seed's runs (its seed column): a verdict on one seed is provisional
    pd.DataFrame({"method": ["x", "y"], "seed": [0, 0], "group": ["low", "low"], "metric": ["hr"] * 2,
                  "mean": [0.5, 0.4]}).to_csv(tmp_path / "figures/g_toy.csv", index=False)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], table="figures/g_{dataset}.csv", per="group",
                               where={"metric": "hr"}, metric="mean", method="x", than="y"), ctx(tmp_path))
    assert r.status == SUPPORTED and r.seeds == (1, 3) and r.provisional
    assert r.numbers == "mean 0.5000 vs 0.4000 (1 of 3 seeds)"
    # three seeds: paired over the seeds, and a gain inside their noise is no gain; a label names the check
    rows = [{"method": m, "seed": s, "group": "low", "metric": "hr", "mean": v}
            for s, (vx, vy) in enumerate([(0.50, 0.40), (0.41, 0.42), (0.60, 0.45)]) for m, v in (("x", vx), ("y", vy))]
    pd.DataFrame(rows).to_csv(tmp_path / "figures/g_toy.csv", index=False)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], table="figures/g_{dataset}.csv", per="group",
                               where={"metric": "hr"}, metric="mean", method="x", than="y", label="share"), ctx(tmp_path))
    assert r.status == CONTRADICTED and "paired t-test over 3 seeds" in r.numbers and "not significantly" in r.numbers
    assert r.label == "toy, group low: `x` vs `y` (share)" and r.place == "toy, group low share"


# ------------------------------------------------------------------------------------------ relative change


def test_relative_change_against_a_published_change(tmp_path):
    run(tmp_path, "prism", 0, {"x": 1.0}, extra={"epochs_to_best": 60})
    run(tmp_path, "tuned", 0, {"x": 1.0}, extra={"counts": {"epochs_to_best": 100}})
    run(tmp_path, "slow", 0, {"x": 1.0}, extra={"epochs_to_best": 150})
    c = ctx(tmp_path, seeds_required=1)
    spec = dict(kind="relative_change", datasets=["toy"], metric="epochs_to_best", than="tuned", published=-0.4,
                tolerance=0.05)
    [r] = evaluate_check(check(method="prism", **spec), c)  # (60 - 100) / 100 = -40 %
    assert r.status == SUPPORTED and "-40.0% against the paper's -40.00%" in r.numbers
    [r] = evaluate_check(check(method="slow", **spec), c)  # +50 %
    assert r.status == CONTRADICTED
    [r] = evaluate_check(check(method="ghost", **spec), c)
    assert r.status == NOT_TESTABLE and "`ghost`" in r.numbers


def test_relative_change_divides_by_the_method_and_counts_a_gain_with_or_better(tmp_path):
    run(tmp_path, "p", 0, {"ndcg@20": 0.125})
    run(tmp_path, "t", 0, {"ndcg@20": 0.100})
    spec = dict(kind="relative_change", datasets=["toy"], metric="ndcg@20", method="p", than="t", published=0.0,
                tolerance=0.05, denominator="method")
    [r] = evaluate_check(check(**spec), ctx(tmp_path, None))
    assert r.status == CONTRADICTED and "+20.0%" in r.numbers  # (0.125 - 0.1) / 0.125, beyond 5 %
    [r] = evaluate_check(check(or_better=True, **spec), ctx(tmp_path, None))
    assert r.status == SUPPORTED


# ------------------------------------------------------------------------------------------ monotone


def test_monotone_along_methods(tmp_path):
    for name, gini in [("sw1", 0.9), ("sw2", 0.8), ("sw3", 0.7), ("up", 0.85)]:
        run(tmp_path, name, 0, {"gini@20": gini})
    c = ctx(tmp_path, None)
    [r] = evaluate_check(check(kind="monotone", datasets=["toy"], metric="gini@20", methods=["sw1", "sw2", "sw3"],
                               direction="decreasing"), c)
    assert r.status == SUPPORTED and r.numbers.startswith("gini@20: 0.9000 > 0.8000 > 0.7000")
    [r] = evaluate_check(check(kind="monotone", datasets=["toy"], metric="gini@20",
                               methods=["sw1", "sw2", "sw3", "up"], direction="decreasing"), c)
    assert r.status == CONTRADICTED and r.numbers.endswith("not decreasing at `sw3` → `up`")  # one seed: no count
    [r] = evaluate_check(check(kind="monotone", datasets=["toy"], metric="gini@20", methods=["sw1", "sw9", "sw3"],
                               direction="decreasing"), c)
    assert r.status == NOT_TESTABLE and r.numbers == "waits for `sw9` on toy (gini@20)"
    # sw3 gains a seed 1 at 0.99: over its own seeds its mean (0.845) would rise above sw2's and break
    # the trend; the trend rests on seed 0, which every point ran
    run(tmp_path, "sw3", 1, {"gini@20": 0.99})
    [r] = evaluate_check(check(kind="monotone", datasets=["toy"], metric="gini@20", methods=["sw1", "sw2", "sw3"],
                               direction="decreasing"), ctx(tmp_path, None))
    assert r.status == SUPPORTED and r.numbers.startswith("gini@20: 0.9000 > 0.8000 > 0.7000")
    assert r.numbers.endswith("; on the seed every point ran (0), seed 1 left out")


def test_monotone_along_a_table_column(tmp_path):
    (tmp_path / "sweeps").mkdir()
    rows = [{"method": "dp", "eps": e, "seed": s, "err": 1.0 / e + 0.01 * s} for e in (0.5, 1.0, 4.0) for s in (0, 1, 2)]
    pd.DataFrame(rows).to_parquet(tmp_path / "sweeps/p.parquet")
    spec = dict(kind="monotone", datasets=["toy"], table="sweeps/p.parquet", method="dp", along="eps", metric="err")
    [r] = evaluate_check(check(direction="decreasing", **spec), ctx(tmp_path))
    assert r.status == SUPPORTED and r.seeds == (3, 3) and "eps 0.5, eps 1, eps 4" in r.numbers
    [r] = evaluate_check(check(direction="increasing", **spec), ctx(tmp_path))
    assert r.status == CONTRADICTED
    [r] = evaluate_check(check(direction="decreasing", **{**spec, "table": "sweeps/none.parquet"}), ctx(tmp_path))
    assert r.status == NOT_TESTABLE
    # one seed's outlier breaks the mean: the break stays (the verdict is the means'), and says in how
    # many of the seeds both points ran the step goes against the direction (1/e + 0.01 s, seed 0 at
    # eps 1 raised to 5.0: mean 2.01 at eps 0.5 → 2.343 at eps 1, against in 1 of 3 seeds)
    rows = [{**r, "err": 5.0} if (r["eps"], r["seed"]) == (1.0, 0) else r for r in rows]
    pd.DataFrame(rows).to_parquet(tmp_path / "sweeps/p.parquet")
    c = ctx(tmp_path)
    [r] = evaluate_check(check(direction="decreasing", **spec), c)
    assert r.status == CONTRADICTED and r.numbers.endswith("not decreasing at eps 0.5 → eps 1 (against in 1 of 3 seeds)")


# ------------------------------------------------------------------------------------------ correlation


def test_correlation_of_a_runs_file(tmp_path):
    degree = np.arange(50)
    for method, norm in [("wd", degree * 0.1 + 1.0), ("nowd", np.cos(degree * 7.0))]:
        d = run(tmp_path, method, 0, {"ndcg@20": 0.1})
        pd.DataFrame({"train_degree": degree, "norm": norm}).to_parquet(d / "magnitudes.parquet")
    spec = dict(kind="correlation", datasets=["toy"], file="magnitudes.parquet", x="train_degree", y="norm", min=0.5)
    [r] = evaluate_check(check(method="wd", than="nowd", **spec), ctx(tmp_path, 1))
    assert r.status == SUPPORTED and "`wd` +1.000" in r.numbers
    [r] = evaluate_check(check(method="nowd", than="wd", **spec), ctx(tmp_path, 1))
    assert r.status == CONTRADICTED
    [r] = evaluate_check(check(method="ghost", **spec), ctx(tmp_path, 1))
    assert r.status == NOT_TESTABLE and "magnitudes.parquet of `ghost`" in r.numbers


# ------------------------------------------------------------------------------------------ frontier


def test_frontier_of_operating_points(tmp_path):
    # the method's curve: (gini, ndcg) = (0.9, 0.08), (0.8, 0.07)
    for name, gini, ndcg in [("ex_a", 0.9, 0.08), ("ex_b", 0.8, 0.07), ("base_low", 0.85, 0.07),
                             ("rival_high", 0.85, 0.079), ("far", 0.5, 0.01)]:
        run(tmp_path, name, 0, {"gini@20": gini, "ndcg@20": ndcg})
    spec = dict(kind="frontier", datasets=["toy"], x="gini@20", y="ndcg@20", methods=["ex_*"])
    [r] = evaluate_check(check(baselines=["base_*"], **spec), ctx(tmp_path, None))
    assert r.status == SUPPORTED and r.numbers.startswith("1 of 1 `base_*` points at or below the curve")
    [r] = evaluate_check(check(baselines=["rival_*"], **spec), ctx(tmp_path, None))
    assert r.status == CONTRADICTED and "above it: `rival_high` (0.8500, 0.0790)" in r.numbers  # curve there: 0.075
    [r] = evaluate_check(check(baselines=["far"], **spec), ctx(tmp_path, None))
    assert r.status == NOT_TESTABLE
    # the curve's end is a seed mean: a point past it by less than its standard error over seeds is
    # compared with it. ex_a's gini over two seeds, 0.89 and 0.91: mean 0.9, standard error 0.01
    run(tmp_path, "ex_a", 0, {"gini@20": 0.89, "ndcg@20": 0.08})
    run(tmp_path, "ex_a", 1, {"gini@20": 0.91, "ndcg@20": 0.08})
    run(tmp_path, "edge_close", 0, {"gini@20": 0.905, "ndcg@20": 0.085})   # within 0.01 of 0.9: above the end
    run(tmp_path, "edge_far", 0, {"gini@20": 0.915, "ndcg@20": 0.085})     # past it: not comparable
    [r] = evaluate_check(check(baselines=["edge_close"], **spec), ctx(tmp_path, None))
    assert r.status == CONTRADICTED and "above it: `edge_close` (0.9050, 0.0850)" in r.numbers
    [r] = evaluate_check(check(baselines=["edge_far"], **spec), ctx(tmp_path, None))
    assert r.status == NOT_TESTABLE
    # a label names the check in the result and its place (two cut-offs of one figure)
    [r] = evaluate_check(check(baselines=["base_*"], label="K = 20", **spec), ctx(tmp_path, None))
    assert r.label.startswith("toy (K = 20): ") and r.place == "toy base_*, K = 20"


# ------------------------------------------------------------------------------------------ converges


def test_converges_on_a_history(tmp_path):
    run(tmp_path, "admm", 0, {"x": 1.0}, history={"train": [{"r": 0.5}, {"r": 1.0}, {"r": 0.05}]})
    run(tmp_path, "admm", 0, {"x": 1.0}, dataset="flat", history={"train": [{"r": 1.0}, {"r": 0.9}]})
    spec = dict(kind="converges", method="admm", series="r", history="train", max_ratio=0.1)
    [r] = evaluate_check(check(datasets=["toy"], **spec), ctx(tmp_path, 1))
    assert r.status == SUPPORTED and "at most 0.0500" in r.numbers  # 0.05 / peak 1.0
    [r] = evaluate_check(check(datasets=["flat"], **spec), ctx(tmp_path, 1))
    assert r.status == CONTRADICTED
    [r] = evaluate_check(check(datasets=["none"], **spec), ctx(tmp_path, 1))
    assert r.status == NOT_TESTABLE


def test_cost_ratios_and_growth_from_a_timing_record(tmp_path):
    # hand-made timings: `a` costs 2x `b` at d 16 and 3x at d 32; along users a grows as n^1 (0.1 s at
    # 1,000 users, 0.4 s at 4,000: slope log(4)/log(4) = 1), `quad` as n^2
    rows = [{"family": "a", "axis": "dim", "dim": 16, "n_users": 9, "seconds": 0.2},
            {"family": "b", "axis": "dim", "dim": 16, "n_users": 9, "seconds": 0.1, "post_seconds": 5.0},
            {"family": "a", "axis": "dim", "dim": 32, "n_users": 9, "seconds": 0.6},
            {"family": "b", "axis": "dim", "dim": 32, "n_users": 9, "seconds": 0.2},
            {"family": "b", "axis": "dim", "dim": 64, "n_users": 9, "seconds": 0.4},  # no `a` here: not paired
            {"family": "a", "axis": "users", "dim": 16, "n_users": 1000, "seconds": 0.1},
            {"family": "a", "axis": "users", "dim": 16, "n_users": 4000, "seconds": 0.4},
            {"family": "quad", "axis": "users", "dim": 16, "n_users": 1000, "seconds": 0.1},
            {"family": "quad", "axis": "users", "dim": 16, "n_users": 4000, "seconds": 1.6}]
    (tmp_path / "timing").mkdir()
    (tmp_path / "timing/toy.json").write_text(json.dumps({"records": rows}))
    ratio = dict(kind="cost", datasets=["toy"], file="timing/{dataset}.json", method="a", than="b", along="dim")
    [r] = evaluate_check(check(**ratio, max_ratio=10), ctx(tmp_path))
    assert r.status == SUPPORTED and "2–3 at 2 points along dim" in r.numbers
    [r] = evaluate_check(check(**ratio, max_ratio=2.5), ctx(tmp_path))
    assert r.status == CONTRADICTED   # 3x is outside a factor 2.5
    [r] = evaluate_check(check(**{**ratio, "method": "b", "than": "a"}, max_ratio=2.5), ctx(tmp_path))
    assert r.status == CONTRADICTED   # either way: 1/3 is outside it too
    growth = dict(kind="cost", datasets=["toy"], file="timing/{dataset}.json", along="users", x="n_users",
                  max_exponent=1.2)
    [r] = evaluate_check(check(**growth, method="a"), ctx(tmp_path))
    assert r.status == SUPPORTED and "n_users^1.00 over n_users 1,000–4,000" in r.numbers
    [r] = evaluate_check(check(**growth, method="quad"), ctx(tmp_path))
    assert r.status == CONTRADICTED and "n_users^2.00" in r.numbers
    # no record, or no family timed there: waits, never judged
    [r] = evaluate_check(check(**{**growth, "datasets": ["big"]}, method="a"), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "timing/big.json" in r.numbers
    [r] = evaluate_check(check(**{**ratio, "than": "c"}, max_ratio=10), ctx(tmp_path))
    assert r.status == NOT_TESTABLE
    # the loader asks for one bound and what it needs
    for bad, words in ((dict(ratio), "either max_ratio"), ({**ratio, "max_ratio": 2, "max_exponent": 1}, "either"),
                       ({**growth, "method": "a", "x": None}, "needs x"),
                       ({**ratio, "than": None, "max_ratio": 2}, "needs than")):
        with pytest.raises(ValueError, match=words):
            check(**{k: v for k, v in bad.items() if v is not None})


# ------------------------------------------------------------------------------------------ cells, strongest, waits


def test_cells_read_the_scorecard(tmp_path):
    c = ctx(tmp_path)
    [r] = evaluate_check(check(kind="cells"), c)
    assert r.status == NOT_TESTABLE and "scorecard.csv" in r.numbers
    pd.DataFrame([
        {"source": "Table 1", "dataset": "toy", "method": "m_prism", "metric": "ndcg@20", "published": 0.1,
         "ours_mean": 0.101, "n_seeds": 3, "seeds_required": 3, "verdict": "within"},
        {"source": "Table 1", "dataset": "toy", "method": "n_prism", "metric": "ndcg@20", "published": 0.1,
         "ours_mean": 0.05, "n_seeds": 1, "seeds_required": 3, "verdict": "deviates"},
        {"source": "Table 1", "dataset": "big", "method": "m_prism", "metric": "ndcg@20", "published": 0.2,
         "ours_mean": None, "n_seeds": 0, "seeds_required": 3, "verdict": "not_run"},
    ]).to_csv(tmp_path / "scorecard.csv", index=False)
    c = ctx(tmp_path)
    results = evaluate_check(check(kind="cells", methods=["*_prism"], sources=["Table 1"]), c)
    assert statuses(results) == [SUPPORTED, CONTRADICTED, NOT_TESTABLE]
    assert results[1].provisional and results[1].seeds == (1, 3)


def test_beats_strongest_baseline(tmp_path):
    spec = dict(kind="beats_strongest_baseline", metric="ndcg@20")
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "tuned simple baselines" in r.numbers
    (tmp_path / "tables").mkdir()
    rows = [{"dataset": "toy", "split": "s1", "method": m, "settings": "{}", "budget": "", "metric": "ndcg@20",
             "mean": v, "sd": 0.001, "n_seeds": 3, "paper_method": "ours", "paper_mean": 0.11, "p_value": 0.01}
            for m, v in [("ease", 0.10), ("itemknn", 0.09)]]
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == SUPPORTED and "vs strongest `ease` 0.1000" in r.numbers
    rows[1]["mean"] = 0.12
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == CONTRADICTED and "strongest `itemknn`" in r.numbers and "edge" not in r.numbers
    # a baseline picked on its grid's edge: the verdict says so (empty cells read back as NaN: no note)
    rows[1]["pick_edges"], rows[0]["pick_edges"] = "k (largest)", ""
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == CONTRADICTED and r.numbers.endswith("`itemknn`'s pick sits on its grid's edge in k (largest))")
    assert not r.provisional  # a loss to an edge pick stands: a point beyond only widens it
    rows[1]["mean"] = 0.105
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    # the paper's method beats an edge pick: supported, provisional, and the reader learns the baseline may do better
    assert r.status == SUPPORTED and "strongest `itemknn` 0.1050" in r.numbers and "grid's edge in k" in r.numbers
    assert r.provisional and r.on_edge == "`itemknn`"
    # a win where only a weaker baseline sits on its edge is provisional too (a point beyond may beat ours)
    rows[0]["pick_edges"], rows[1]["pick_edges"] = "l2 (smallest)", ""
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == SUPPORTED and r.on_edge == "`ease`" and "edge" not in r.numbers
    rows[0]["pick_edges"] = ""
    rows[1]["mean"] = 0.12
    for row in rows:
        del row["pick_edges"]
    # the paper's method has no record on the split (its mean is empty): not testable, never contradicted
    for row in rows:
        row["paper_mean"] = float("nan")
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "`ours` on toy (ndcg@20)" in r.numbers
    # Gini: lower is better, so the strongest baseline is the one with the lowest value
    gini = [{**row, "metric": "gini@20", "mean": v, "paper_mean": 0.50} for row, v in zip(rows, (0.40, 0.60))]
    pd.DataFrame(gini).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(kind="beats_strongest_baseline", metric="gini@20"), ctx(tmp_path))
    assert r.status == CONTRADICTED and "strongest `ease` 0.4000" in r.numbers
    gini[0]["mean"] = 0.55
    pd.DataFrame(gini).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(kind="beats_strongest_baseline", metric="gini@20"), ctx(tmp_path))
    assert r.status == SUPPORTED and "strongest `ease` 0.5500" in r.numbers
    # two protocols on one dataset: one result per split, each named; `split` keeps one of them
    other = [{**row, "split": "s2", "metric": "ndcg@20", "mean": 0.5, "paper_mean": float("nan")} for row in rows]
    both = [{**row, "paper_mean": 0.11} for row in rows] + other
    pd.DataFrame(both).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    results = evaluate_check(check(**spec), ctx(tmp_path))
    assert [r.label for r in results] == ["toy · s1 ndcg@20", "toy · s2 ndcg@20"]
    assert statuses(results) == [CONTRADICTED, NOT_TESTABLE]
    [r] = evaluate_check(check(**spec, split="s1"), ctx(tmp_path))
    assert r.label == "toy ndcg@20" and r.status == CONTRADICTED
    # a configured baseline not run (no mean): the paper's method beating the others run is not yet a win,
    # but one that ran and beats it still contradicts
    not_run = {**rows[0], "method": "ials", "mean": float("nan"), "n_seeds": 0, "paper_mean": 0.11}
    ran = [{**row, "paper_mean": 0.11, "mean": v} for row, v in zip(rows, (0.10, 0.09))]
    pd.DataFrame(ran + [not_run]).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "`ials` on toy (not run" in r.numbers and "`ease` 0.1000" in r.numbers
    ran[1]["mean"] = 0.12
    pd.DataFrame(ran + [not_run]).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == CONTRADICTED and "strongest `itemknn` 0.1200" in r.numbers
    pd.DataFrame([not_run]).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "tuned simple baselines on toy" in r.numbers
    # a deterministic baseline run once on the protocol's one split stands for every seed; a seeded
    # one run once is one seed of three (provisional)
    once = [{**rows[0], "paper_mean": 0.11, "mean": 0.12, "n_seeds": 1, "paper_n_seeds": 3, "covers_seeds": c}
            for c in (True, False)]
    for covers, (seeds, provisional) in zip((True, False), (((3, 3), False), ((1, 3), True))):
        pd.DataFrame([once[0 if covers else 1]]).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
        [r] = evaluate_check(check(**spec), ctx(tmp_path))
        assert r.status == CONTRADICTED and r.seeds == seeds and r.provisional == provisional
        assert ("the baseline is deterministic: one run" in r.numbers) == covers
    # beating the strongest inside the noise (the table's paired p 0.3) is no evidence of beating it
    pd.DataFrame([{**rows[0], "paper_mean": 0.11, "mean": 0.10, "p_value": 0.3}]).to_csv(
        tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == CONTRADICTED and "p=0.3; better in the mean, not significantly" in r.numbers


def test_beats_strongest_baseline_for_another_arm_of_the_paper_method(tmp_path):
    """``method`` without ``baselines``: the table's strongest baseline against another arm's run
    records (λOpt's released-code switches), by a t-test over seeds (hand-checked p)."""
    spec = dict(kind="beats_strongest_baseline", metric="ndcg@20", method="arm")
    (tmp_path / "tables").mkdir()
    rows = [{"dataset": "toy", "split": "s1", "method": m, "settings": "{}", "budget": "", "metric": "ndcg@20",
             "mean": v, "sd": 0.0, "n_seeds": 1, "covers_seeds": True, "paper_method": "ours",
             "paper_mean": 0.05, "paper_n_seeds": 3, "p_value": 1e-9} for m, v in [("ease", 0.10), ("itemknn", 0.09)]]
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and r.numbers == "waits for `arm` on toy (ndcg@20)"
    for seed, v in enumerate([0.11, 0.12, 0.13]):
        run(tmp_path, "arm", seed, {"ndcg@20": v})
    # one-sample t against the deterministic 0.10: t = 0.02 / (0.01 / √3) = 2√3, df 2, two-sided
    # p = 1 − 2√3/√14 = 0.0742: better in the mean, not significantly
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == CONTRADICTED and "`arm` 0.1200 vs strongest `ease` 0.1000" in r.numbers
    assert "one-sample t-test of 3 seeds against the deterministic baseline: p=0.0742" in r.numbers
    assert "not significantly" in r.numbers and r.seeds == (3, 3)
    for seed, v in enumerate([0.119, 0.120, 0.121]):
        run(tmp_path, "arm", seed, {"ndcg@20": v})
    [r] = evaluate_check(check(**spec), ctx(tmp_path))       # t = 20√3, p = 1 − 20√3/√1202 = 0.000832
    assert r.status == SUPPORTED and "p=0.000832" in r.numbers
    # a seeded baseline: Welch's t-test from its row's mean, sd and seed count; the table's own
    # paired p (of the table's paper method) plays no part
    seeded = [{**row, "sd": 0.001, "n_seeds": 3, "covers_seeds": False, "p_value": 0.9} for row in rows]
    pd.DataFrame(seeded).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == SUPPORTED and "Welch's t-test over 3 and 3 seeds: p=" in r.numbers
    # the table's form of the same check still judges the table's paper method
    [r] = evaluate_check(check(kind="beats_strongest_baseline", metric="ndcg@20"), ctx(tmp_path))
    assert r.status == CONTRADICTED and "`ours` 0.0500 vs strongest `ease` 0.1000" in r.numbers


def test_beats_strongest_baseline_from_the_protocols_own_run_records(tmp_path):
    """A protocol whose simple baselines are run records (LRS: a per-user regression, no ranking table):
    the strongest is the best seed mean among those that ran, lower is better where the metric is an error."""
    spec = dict(kind="beats_strongest_baseline", datasets=["toy"], metric="param_error", method="ours",
                baselines=["ls", "ridge", "iht"], lower_is_better=True)
    for seed, (ours, ls, ridge) in enumerate([(0.08, 0.87, 0.68), (0.10, 0.88, 0.69), (0.09, 0.86, 0.67)]):
        run(tmp_path, "ours", seed, {"param_error": ours})
        run(tmp_path, "ls", seed, {"param_error": ls})
        run(tmp_path, "ridge", seed, {"param_error": ridge})
    # `iht` has no record: beating the two that ran is not yet a win
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "`iht` on toy (not run; `ours` 0.0900 beats" in r.numbers
    assert "`ridge` 0.6800" in r.numbers
    for seed, v in enumerate([0.05, 0.06, 0.04]):
        run(tmp_path, "iht", seed, {"param_error": v})
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == CONTRADICTED and "`ours` 0.0900 vs strongest `iht` 0.0500 (3 seeds; paired t-test" in r.numbers
    for seed, v in enumerate([1.2, 1.3, 1.25]):
        run(tmp_path, "iht", seed, {"param_error": v})
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == SUPPORTED and "vs strongest `ridge` 0.6800" in r.numbers
    [r] = evaluate_check(check(**{**spec, "method": "missing"}), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and r.numbers == "waits for `missing` on toy (param_error)"
    with pytest.raises(ValueError, match="needs both method and baselines"):
        check(kind="beats_strongest_baseline", datasets=["toy"], metric="m", baselines=["ls"])


def test_waits_is_never_testable(tmp_path):
    [r] = evaluate_check(check(kind="waits", waits_for="a timing check"), ctx(tmp_path))
    assert (r.status, r.numbers) == (NOT_TESTABLE, "waits for a timing check")


# ------------------------------------------------------------------------------------------ verdicts


def _claim(checks, **extra):
    return claim_from_mapping({"id": "P1", "claim": "c", "source": "Fig. 1", "checks": checks, **extra})


def test_claim_verdicts_mixed_stand_in_provisional_and_pending(tmp_path):
    for seed in range(3):
        run(tmp_path, "a", seed, {"m": 0.3}, dataset="toy")
        run(tmp_path, "b", seed, {"m": 0.2}, dataset="toy")
        run(tmp_path, "a", seed, {"m": 0.1}, dataset="alt")
        run(tmp_path, "b", seed, {"m": 0.2}, dataset="alt")
    c = ctx(tmp_path)
    both = _claim([{"kind": "better", "datasets": ["toy", "alt"], "metric": "m", "method": "a", "than": "b"}])
    v = judge_claim(both, c)
    assert v.verdict_class == MIXED
    assert v.verdict == "mixed: holds for toy `a` vs `b`; not for alt `a` vs `b`"
    alt = _claim([{"kind": "better", "datasets": ["alt"], "metric": "m", "method": "b", "than": "a"}])
    assert judge_claim(alt, c).verdict == "supported; on alt (a stand-in)"
    pending = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b"}],
                     pending=[{"what": "the lr search", "methods": ["*_lr1em2"]}])
    v = judge_claim(pending, c)
    assert v.verdict == "supported (provisional); waits for the lr search" and v.provisional
    run(tmp_path, "a_lr1em2", 0, {"m": 0.3})
    assert judge_claim(pending, ctx(tmp_path)).verdict == "supported"
    part = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b"},
                   {"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "c", "label": "vs c"}])
    assert judge_claim(part, c).verdict == "supported; not testable yet: toy vs c (claims.md names the runs)"
    none = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "zz", "than": "b"}])
    v = judge_claim(none, c)
    assert v.verdict_class == NOT_TESTABLE and v.verdict == "not testable here: waits for `zz` on toy (m)"


def test_a_tuned_pick_from_part_of_its_grid_is_named_and_provisional(tmp_path):
    for seed in range(3):
        run(tmp_path, "a_tunedwd", seed, {"m": 0.3}, extra={"budget": "tuned over 3 of 4 weight decays"})
        run(tmp_path, "a_wd0", seed, {"m": 0.2}, extra={"budget": ""})
        run(tmp_path, "b_tunedwd", seed, {"m": 0.3})
    c = ctx(tmp_path)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="m", method="a_tunedwd", than="a_wd0"), c)
    assert r.status == SUPPORTED and r.provisional and r.capped == "`a_tunedwd`: tuned over 3 of 4 weight decays"
    assert r.numbers.endswith("; `a_tunedwd`: tuned over 3 of 4 weight decays)")
    [r] = evaluate_check(check(kind="relative_change", datasets=["toy"], metric="m", method="a_wd0", than="a_tunedwd",
                               published=0.0, tolerance=0.05), c)
    assert r.status == CONTRADICTED and r.provisional and "tuned over 3 of 4" in r.numbers
    claim = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a_tunedwd", "than": "a_wd0"},
                    {"kind": "better", "datasets": ["toy"], "metric": "m", "method": "b_tunedwd", "than": "a_wd0",
                     "label": "b"}])
    assert judge_claim(claim, c).verdict == "supported (provisional); 1 check on a tuned pick from part of its grid"
    # a full grid (no budget note, or an empty one) leaves the verdict final
    full = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "b_tunedwd", "than": "a_wd0"}])
    assert judge_claim(full, c).verdict == "supported"


def test_a_tuned_pick_that_is_the_other_side_s_own_run_is_not_tested(tmp_path):
    # yelp2018's DirectAU weight-decay grid had run its no-decay point alone: the "tuned" pick was
    # `mf_directau_wd0` itself, and P1 read "tuned vs no decay: 0.0531 vs 0.0531, does not hold"
    run(tmp_path, "a_tunedwd", 0, {"m": 0.2}, extra={"budget": "tuned over 1 of 4 weight decays",
                                                     "selected_method": "a_wd0"})
    run(tmp_path, "a_wd0", 0, {"m": 0.2})
    c = ctx(tmp_path)
    for method, than in (("a_tunedwd", "a_wd0"), ("a_wd0", "a_tunedwd")):
        [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="m", method=method, than=than), c)
        assert r.status == NOT_TESTABLE
        assert r.numbers == ("waits for the rest of the tuned grid on toy: its pick is `a_wd0` itself "
                             "(`a_tunedwd`: tuned over 1 of 4 weight decays)")
    [r] = evaluate_check(check(kind="relative_change", datasets=["toy"], metric="m", method="a_wd0",
                               than="a_tunedwd", published=-0.1, tolerance=0.05), c)
    assert r.status == NOT_TESTABLE
    # once the pick is another run, the comparison is made
    run(tmp_path, "a_tunedwd", 0, {"m": 0.3}, extra={"budget": "tuned over 2 of 4 weight decays",
                                                     "selected_method": "a_wd1em4"})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="m", method="a_tunedwd", than="a_wd0"),
                         ctx(tmp_path))
    assert r.status == SUPPORTED


def test_one_seed_of_three_is_at_most_provisional(tmp_path):
    run(tmp_path, "a", 0, {"m": 0.1})
    run(tmp_path, "b", 0, {"m": 0.2})
    claim = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b"}])
    assert judge_claim(claim, ctx(tmp_path)).verdict == "contradicted (provisional); 1 of 3 seeds"
    assert judge_claim(claim, ctx(tmp_path, seeds_required=1)).verdict == "contradicted"


# ------------------------------------------------------------------------------------------ loader


GOOD = {"id": "P1", "claim": "c", "source": "s",
        "checks": [{"kind": "better", "datasets": ["d"], "metric": "m", "method": "a", "than": "b"}]}


@pytest.mark.parametrize(("change", "message"), [
    ({"checks": [{"kind": "bigger"}]}, r"checks\[0\]: kind must be one of"),
    ({"checks": [{"kind": "better", "datasets": ["d"], "metric": "m", "method": "a"}]}, r"needs \['than'\]"),
    ({"checks": [{**GOOD["checks"][0], "toleranse": 0.1}]}, r"takes no \['toleranse'\]"),
    ({"checks": [{**GOOD["checks"][0], "than": "a"}]}, "than must differ from method"),
    ({"checks": [{"kind": "monotone", "datasets": ["d"], "metric": "m", "direction": "down", "methods": ["a", "b"]}]},
     "direction must be"),
    ({"checks": [{"kind": "monotone", "datasets": ["d"], "metric": "m", "direction": "increasing"}]},
     "either methods"),
    ({"checks": [{"kind": "relative_change", "datasets": ["d"], "metric": "m", "method": "a", "than": "b",
                  "published": "-38%", "tolerance": 0.1}]}, "published must be a number"),
    ({"checks": []}, "checks must be a non-empty list"),
    ({"id": "p 1"}, "id must be a short name"),
    ({"colour": "red"}, r"unknown keys \['colour'\]"),
    ({"pending": [{"what": "x"}]}, "pending needs methods"),
    ({"deviation": "See Below"}, "not a markdown anchor"),
])
def test_the_loader_names_the_claim_and_what_is_wrong(tmp_path, change, message):
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump({"paper": "demo", "entries": [], "claims": [{**GOOD, **change}]}))
    with pytest.raises(ExpectedFileError, match=message) as error:
        load_expected(path)
    assert str(error.value).startswith(f"{path}: claims[0]")


def test_two_claims_may_not_share_an_id(tmp_path):
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump({"paper": "demo", "entries": [], "claims": [GOOD, GOOD]}))
    with pytest.raises(ExpectedFileError, match=r"claims\[1\] \(id='P1'\): duplicates the id"):
        load_expected(path)


def test_packaged_files_give_every_entry_a_kind_and_every_paper_claims():
    counts = {"printed": 0, "other": 0}
    for paper in PAPERS:
        raw = yaml.safe_load(expected_path(paper).read_text())
        assert all("kind" in entry for entry in raw["entries"]), paper  # written out, never defaulted
        expected = load_expected(expected_path(paper))
        for entry in expected.entries:
            if entry.published is not None:
                counts["printed" if entry.kind == "printed" else "other"] += 1
        ids = [c.id for c in expected.claims]
        assert ids and any(k.kind == "beats_strongest_baseline" for c in expected.claims for k in c.checks), paper
    # the issue's count: 128 values the papers print, 27 other targets (official code, a log, our thresholds)
    assert counts == {"printed": 128, "other": 27}


def test_packaged_claims_link_to_what_exists():
    from recrepro.scorecard.render import markdown_anchors

    repo = Path(__file__).resolve().parents[1]
    anchors = markdown_anchors(repo / "docs" / "deviations.md")
    for paper in PAPERS:
        for claim in load_expected(expected_path(paper)).claims:
            assert claim.deviation is None or claim.deviation in anchors, (paper, claim.id)
            assert claim.evidence is None or (repo / "results" / "paper" / paper / claim.evidence).is_file(), \
                (paper, claim.id)


def test_every_committed_contradiction_says_how_a_bug_on_our_side_was_ruled_out():
    # the guide: before a verdict of "contradicted" is written, rule out a bug on our side and say how
    repo = Path(__file__).resolve().parents[1]
    contradicted = []
    for paper in PAPERS:
        page = pd.read_csv(repo / "results" / "paper" / paper / "claims.csv")
        ids = set(page.loc[page["verdict_class"] == CONTRADICTED, "id"])
        for claim in load_expected(expected_path(paper)).claims:
            if claim.id in ids:
                contradicted.append((paper, claim.id))
                assert (claim.caveat or "").startswith("Bug ruled out: "), (paper, claim.id)
    assert contradicted  # the committed pages do contradict some claims; an empty list would test nothing


# ------------------------------------------------------------------------------------------ pages


def _demo_expected(tmp_path: Path) -> Path:
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump({"paper": "demo", "reference": "Demo 2024", "entries": [], "claims": [
        {**GOOD, "checks": [{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b"}],
         "evidence": "figures/f.png", "deviation": "demo-gap", "why": "A against B."},
        {"id": "P2", "claim": "waits", "source": "s", "checks": [{"kind": "waits", "waits_for": "runs"}]},
    ]}))
    return path


def test_pages_and_a_byte_identical_redraw(tmp_path):
    results = tmp_path / "results" / "paper"
    for seed in range(3):
        run(results / "demo", "a", seed, {"m": 0.3 + seed / 100})
        run(results / "demo", "b", seed, {"m": 0.2})
    md, csv = results / "demo" / "claims.md", results / "demo" / "claims.csv"
    write_claims("demo", "paper", _demo_expected(tmp_path), results / "demo", md, csv, seeds_required=3)
    first = (md.read_bytes(), csv.read_bytes())
    write_claims("demo", "paper", _demo_expected(tmp_path), results / "demo", md, csv, seeds_required=3)
    assert (md.read_bytes(), csv.read_bytes()) == first
    text = md.read_text()
    assert "| [P1](#p1) | c | s | **supported** |" in text
    assert "- toy: `a` vs `b`: *holds* — m 0.3100 vs 0.2000 (3 seeds; paired t-test over 3 seeds p=" in text
    assert "deviation: [demo-gap](../../../docs/deviations.md#demo-gap)" in text
    frame = pd.read_csv(csv, dtype=str, keep_default_na=False)
    assert frame[["id", "verdict_class"]].values.tolist() == [["P1", SUPPORTED], ["P2", NOT_TESTABLE]]
    assert claims_counts(results, ["demo", "absent"]) == {"supported": 1, "contradicted": 0, "mixed": 0,
                                                          "not_testable_here": 1, "provisional": 0}
    section = claims_section(results, ["demo", "absent"], "../../docs/deviations.md")
    assert section[0] == "## Claims"
    row = next(x for x in section if x.startswith("| [demo]"))
    assert row.startswith("| [demo](#demo) | **P1** c | supported | toy `a` vs `b`: m 0.3100 vs 0.2000")
    assert row.endswith("[claims](demo/claims.md#p1) · [f](demo/figures/f.png) · "
                        "[deviation](../../docs/deviations.md#demo-gap) |")
    assert "No claims page yet for: absent." in section


def test_the_cli_verb_writes_the_same_files(tmp_path):
    from recrepro.cli import main

    results = tmp_path / "demo"
    run(results, "a", 0, {"m": 0.1})
    run(results, "b", 0, {"m": 0.2})
    outs = []
    for name in ("one", "two"):
        md, csv = tmp_path / f"{name}.md", tmp_path / f"{name}.csv"
        main(["claims", "--paper", "demo", "--tier", "paper", "--results", str(results), "--expected",
              str(_demo_expected(tmp_path)), "--seeds-required", "3", "--out-md", str(md), "--out-csv", str(csv)])
        outs.append((md.read_bytes(), csv.read_bytes()))
    assert outs[0] == outs[1] and b"contradicted (provisional); 1 of 3 seeds" in outs[0][1]


def test_dataset_checks_compare_printed_sizes_with_ours(tmp_path):
    (tmp_path / "fedrap" / "tables").mkdir(parents=True)
    pd.DataFrame({"dataset": ["ml-100k", "tafeng"], "ratings": [100000, 763098], "users": [943, 20490],
                  "items": [1682, 23561]}).to_csv(tmp_path / "fedrap/tables/dataset_stats.csv", index=False)
    printed = [{"source": "poster Table 1", "paper": "fedrap", "dataset": d, "users": u, "items": i,
                "interactions": n} for d, u, i, n in [("ml-100k", 943, 1682, 100000), ("tafeng", 120, 32266, 100000),
                                                     ("ml-1m", 6040, 3706, 1000209)]]
    rows = [x for x in dataset_checks_section(tmp_path, printed, {"ml-100k": "mirror"}) if x.startswith("| fedrap")]
    assert rows[0].endswith("| 943 / 1,682 / 100,000 | 943 / 1,682 / 100,000 | matches |")
    assert rows[1].endswith("| differs: users +20,370, items -8,705, interactions +663,098 |")
    assert rows[2].endswith("| — | not testable here: the data are not here |")


def test_dataset_checks_read_per_dataset_summaries_and_respect_the_recipe(tmp_path):
    """A printed row for ratings >= 3 is not compared with data that kept every rating (the ML-1M pairs
    form); the row whose recipe applies is; a dataset held only in a form with no summary says so."""
    import subprocess
    import sys

    stats = {"dataset": "ml-1m", "protocol": "prism", "users": 6040, "items": 3706, "interactions": 1000209,
             "recipe": {"positive_op": None, "positive_threshold": None, "merge_given_parts": True},
             "raw_form": {"name": "pairs", "lacks": ["rating", "timestamp"]}}
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    out = tmp_path / "prism" / "tables" / "dataset_stats_ml-1m.csv"
    subprocess.run([sys.executable, "-m", "recrepro", "data", "summary", str(tmp_path / "stats.json"),
                    "--out-csv", str(out)], check=True, capture_output=True)
    assert pd.read_csv(out, keep_default_na=False).loc[0, "form"] == "pairs"
    printed = [
        {"source": "Table 2", "paper": "prism", "dataset": "ml-1m", "protocol": "prism", "users": 6040,
         "items": 3629, "interactions": 836478, "recipe": {"positive_op": ">=", "positive_threshold": 3.0}},
        {"source": "README", "paper": "prism", "dataset": "ml-1m", "protocol": "prism", "users": 6040,
         "items": 3706, "interactions": 1000209, "recipe": {"positive_op": None}},
        {"source": "poster", "paper": "fedrap", "dataset": "ml-1m", "protocol": "fedrap", "users": 6040,
         "items": 3706, "interactions": 1000209, "recipe": {}},
    ]
    rows = [x for x in dataset_checks_section(tmp_path, printed, {"ml-1m": "form:pairs"}) if x.startswith("| ")][1:]
    assert rows[0].endswith("| 6,040 / 3,706 / 1,000,209 | not testable here: printed for another recipe "
                            "(positive_op >=, positive_threshold 3.0); ours has positive_op none, "
                            "positive_threshold none (the mirror's `pairs` form) |")
    assert rows[1].endswith("| 6,040 / 3,706 / 1,000,209 | matches |")
    assert "| — | not testable here: the mirror holds it only in its `pairs` form" in rows[2]


def test_a_long_mixed_verdict_is_counted_along_the_factor_that_splits_it():
    """Eight places: under one pool the claim never holds, under the other it holds three times in
    four; the verdict counts per pool (the factor with unanimous groups), not per dataset."""
    from recrepro.scorecard.claims import Result
    from recrepro.scorecard.verdicts import _grouped_mixed

    def result(dataset, pool, held):
        return Result(label=f"{dataset} vs B, {pool}", status=SUPPORTED if held else CONTRADICTED)

    rows = [result(d, "train pool", False) for d in "abcd"]
    rows += [result(d, "code pool", held) for d, held in zip("abcd", (True, True, True, False))]
    supported = [r for r in rows if r.status == SUPPORTED]
    contradicted = [r for r in rows if r.status == CONTRADICTED]
    assert _grouped_mixed(supported, contradicted) == "holds in 3 of 8 checks — code pool: 3 of 4; train pool: 0 of 4"
    # six places or fewer: the names say more than the counts
    assert _grouped_mixed(supported[:2], contradicted[:4]) is None
    # no factor with unanimous groups over half the checks: the list stays
    mixed = [result(d, p, held) for d, p, held in [("a", "x", True), ("a", "y", False), ("b", "x", False),
                                                   ("b", "y", True), ("c", "x", True), ("c", "y", False),
                                                   ("d", "x", False), ("d", "y", True)]]
    assert _grouped_mixed([r for r in mixed if r.status == SUPPORTED],
                          [r for r in mixed if r.status == CONTRADICTED]) is None
    # ... but past twelve places nobody reads the list: counts along the factor with the fewest
    # groups stand in for it (FedRAP's F1: 29 checks, one train-pool check holding on 1 seed)
    many = [result(d, p, held) for d in "abcdefg" for p, held in (("x", d != "a"), ("y", d == "a"))]
    assert len(many) == 14
    assert _grouped_mixed([r for r in many if r.status == SUPPORTED],
                          [r for r in many if r.status == CONTRADICTED]) == "holds in 7 of 14 checks — y: 1 of 7; x: 6 of 7"
    # labels with and without a comma (FedRAP's F2: "train pool", "released code, train pool"): the
    # factor "all but the dataset" groups them, where "the part after the last comma" cannot
    places = [(d, label, held) for d in ("ml", "av") for label, held in
              (("train pool", False), ("code pool", True), ("released code, train pool", False),
               ("released code, code pool", True))]
    rows = [Result(label=f"{d} {label}", status=SUPPORTED if held else CONTRADICTED) for d, label, held in places]
    assert _grouped_mixed([r for r in rows if r.status == SUPPORTED], [r for r in rows if r.status == CONTRADICTED]) == (
        "holds in 4 of 8 checks — code pool: 2 of 2; released code, code pool: 2 of 2; train pool: 0 of 2; "
        "released code, train pool: 0 of 2")


def test_a_comparison_prints_both_sides_at_one_precision():
    # a leak-driven HR@10 of exactly 1 beside a baseline's 0.5387 printed "1 vs 0.5387"
    assert _fmt_vs(1.0, 0.5387) == "1.0000 vs 0.5387"
    assert _fmt_vs(0.1096, 0.0911) == "0.1096 vs 0.0911"
    assert _fmt_vs(2.5, 1.25) == "2.5 vs 1.25"          # neither side a share: as before
    assert _fmt_vs(1234.0, 0.5) == "1.23e+03 vs 0.5000"  # large values keep their own form


def test_a_win_over_baselines_picked_on_their_grids_edge_is_provisional_and_says_so(tmp_path):
    (tmp_path / "tables").mkdir()
    rows = [{"dataset": "toy", "split": "s1", "method": m, "settings": "{}", "budget": "", "metric": "ndcg@20",
             "mean": v, "sd": 0.001, "n_seeds": 3, "paper_method": "ours", "paper_mean": 0.11, "p_value": 0.01,
             "pick_edges": e} for m, v, e in [("ease", 0.10, "lam (largest)"), ("itemknn", 0.09, "")]]
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    claim = _claim([{"kind": "beats_strongest_baseline", "metric": "ndcg@20"}])
    v = judge_claim(claim, ctx(tmp_path))
    assert v.verdict_class == SUPPORTED and v.provisional
    assert v.verdict == ("supported (provisional); won against baselines picked on their grid's edge (`ease`): "
                         "a point beyond may do better")
    rows[0]["pick_edges"] = ""
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    v = judge_claim(claim, ctx(tmp_path))
    assert v.verdict == "supported" and not v.provisional
