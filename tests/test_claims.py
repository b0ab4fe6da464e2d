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

from recrepro.paperlist import summary_keys
from recrepro.scorecard import ExpectedFileError, expected_path, load_expected
from recrepro.scorecard.claimpage import claims_counts, claims_section, dataset_checks_section, write_claims
from recrepro.scorecard.claims import (
    _fmt_vs,
    AGAINST,
    CONTRADICTED,
    HOLDS,
    INCONCLUSIVE,
    MIXED,
    NOT_TESTABLE,
    SUPPORTED,
    ClaimRecords,
    Context,
    evaluate_check,
)
from recrepro.scorecard.claimspec import claim_from_mapping
from recrepro.scorecard.verdicts import judge_claim

PAPERS = summary_keys()  # the claims' papers


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
    return claim_from_mapping({"id": "X1", "claim": "c", "source": "s", "quantifier": "all",
                               "checks": [raw]}).checks[0]


def statuses(results) -> list[str]:
    return [r.status for r in results]


# ------------------------------------------------------------------------------------------ better


def test_better_supported_contradicted_and_not_testable(tmp_path):
    for seed, (a, b) in enumerate([(0.30, 0.20), (0.32, 0.21), (0.31, 0.19)]):
        run(tmp_path, "a", seed, {"ndcg@20": a})
        run(tmp_path, "b", seed, {"ndcg@20": b})
    c = ctx(tmp_path)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="ndcg@20", method="a", than="b"), c)
    assert r.status == HOLDS and not r.provisional and r.numbers == "ndcg@20 0.3100 vs 0.2000 (3 seeds)"
    # differences 0.10, 0.11, 0.12: t = 0.11 / (0.01 / √3) = 19.05 on 2 df, p = 1 − t / √(t² + 2) = 0.00275;
    # the effect is relative to the compared side's mean: 0.11 / 0.20 = +55 %
    assert r.evidence.test == "paired t-test over 3 seeds" and r.evidence.n == 3
    assert r.evidence.p == pytest.approx(0.00275, abs=2e-5) and r.evidence.effect == pytest.approx(0.55)
    assert r.evidence.unit == "relative" and r.evidence.target == (0.0, None)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="ndcg@20", method="b", than="a"), c)
    assert r.status == AGAINST
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="ndcg@20", method="a", than="b",
                               lower_is_better=True), c)
    assert r.status == AGAINST and r.evidence.target == (None, 0.0)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="ndcg@20", method="a", than=["c_tuned", "c"]), c)
    assert r.status == NOT_TESTABLE and r.numbers == "waits for `c_tuned` or `c` on toy (ndcg@20)"


def test_a_gain_inside_the_seed_noise_is_no_evidence_and_does_not_hold(tmp_path):
    # a: 0.41, 0.40, 0.39 (mean 0.40); b: 0.36, 0.36, 0.395 (mean 0.3717); differences 0.05, 0.04, -0.005:
    # t = 0.02833 / (0.02930 / sqrt 3) = 1.675 on 2 df, two-sided p = 0.236 by hand (t-table: 0.2 < p < 0.3)
    for seed, (a, b) in enumerate([(0.41, 0.36), (0.40, 0.36), (0.39, 0.395)]):
        run(tmp_path, "a", seed, {"hr@10": a})
        run(tmp_path, "b", seed, {"hr@10": b})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="hr@10", method="a", than="b"), ctx(tmp_path))
    # better in the mean, inside the seed noise: inconclusive, never "against"
    assert r.status == INCONCLUSIVE and r.evidence.p == pytest.approx(0.236, abs=5e-4)
    # its 95 % interval (t(0.975, 2) = 4.303) and the smallest effect 3 seeds could detect at 80 % power
    # ((4.303 + 1.061) × se), relative to b's mean 0.3717
    se = 0.029297 / 3 ** 0.5
    low, high = r.evidence.ci
    assert low == pytest.approx((0.028333 - 4.3027 * se) / 0.371667, abs=1e-3)
    assert high == pytest.approx((0.028333 + 4.3027 * se) / 0.371667, abs=1e-3)
    assert r.evidence.detectable == pytest.approx((4.3027 + 1.0607) * se / 0.371667, abs=1e-3)
    text = r.evidence.text(r.evidence.p, r.status)
    assert "paired t-test over 3 seeds, p = 0.236" in text and "smallest effect detectable" in text
    # the same gain, consistent over the seeds, holds
    for seed, b in enumerate([0.37, 0.36, 0.35]):
        run(tmp_path, "b", seed, {"hr@10": b})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="hr@10", method="a", than="b"), ctx(tmp_path))
    assert r.status == HOLDS
    # one seed each and no per-user rows: no test, so no evidence either way (and the result is provisional)
    one = tmp_path / "one"
    run(one, "a", 0, {"hr@10": 0.41})
    run(one, "b", 0, {"hr@10": 0.40})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="hr@10", method="a", than="b"), ctx(one))
    assert r.status == INCONCLUSIVE and r.provisional and r.evidence.p is None
    assert "1 seed and no per-user rows" in r.evidence.text(None, r.status)


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
    assert r.status == INCONCLUSIVE and r.evidence.effect < 0  # one seed: compared, not tested


def test_better_prefers_the_first_candidate_that_ran_and_one_seed_is_provisional(tmp_path):
    run(tmp_path, "fedrap", 0, {"hr@10": 0.2})
    run(tmp_path, "fedrap_tuned", 0, {"hr@10": 0.5})
    run(tmp_path, "fedmf", 0, {"hr@10": 0.4})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="hr@10", method=["fedrap_tuned", "fedrap"],
                               than=["fedmf_tuned", "fedmf"], label="train pool"), ctx(tmp_path))
    assert r.label == "toy: `fedrap_tuned` vs `fedmf` (train pool)" and r.status == INCONCLUSIVE
    assert r.seeds == (1, 3) and r.provisional and "(1 of 3 seeds)" in r.numbers


def test_better_and_relative_change_compare_the_seeds_both_sides_ran(tmp_path):
    # a: seed 0 at 0.30, seed 1 at 0.10 (an unlucky seed); b ran seed 0 only, at 0.25.  Over every
    # seed a's mean (0.20) is below b's; on the one seed both ran, a is above it.
    run(tmp_path, "a", 0, {"m": 0.30})
    run(tmp_path, "a", 1, {"m": 0.10})
    run(tmp_path, "b", 0, {"m": 0.25})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="m", method="a", than="b"), ctx(tmp_path))
    assert r.status == INCONCLUSIVE and r.seeds == (1, 3) and r.evidence.effect == pytest.approx(0.2)
    assert r.numbers.startswith("m 0.3000 vs 0.2500") and "`a`'s seed 1 left out (not run on the other side)" in r.numbers
    [r] = evaluate_check(check(kind="relative_change", datasets=["toy"], metric="m", method="a", than="b",
                               published=0.2, tolerance=0.05), ctx(tmp_path))
    assert "+20.0%" in r.numbers  # (0.30 - 0.25) / 0.25, not (0.20 - 0.25) / 0.25
    assert r.status == INCONCLUSIVE and r.evidence.p is None  # one seed: inside the region, but untested
    # no seed in common: the means of different seeds, and the line says so
    run(tmp_path, "c", 2, {"m": 0.15})
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="m", method="a", than="c"), ctx(tmp_path))
    assert r.status == INCONCLUSIVE and "no seed in common: means over different seeds" in r.numbers


def test_a_table_of_seed_means_says_when_the_sides_average_different_seed_counts(tmp_path):
    (tmp_path / "tables").mkdir()
    pd.DataFrame({"dataset": ["toy", "toy"], "method": ["a", "b"], "seeds": [2, 1], "m": [0.5, 0.4]}).to_csv(
        tmp_path / "tables" / "t.csv", index=False)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], table="tables/t.csv", metric="m", method=["a"],
                               than=["b"]), ctx(tmp_path))
    assert r.status == INCONCLUSIVE and r.numbers.endswith("(means over 2 and 1 seeds)")


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
    assert r.status == HOLDS and "`a` vs `b`" in r.label  # 0.1 against 0.05 on every seed
    for seed in range(3):
        run(tmp_path, "a_tuned", seed, {"m": 0.3})
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == AGAINST and "`a_tuned` vs `b_tuned`" in r.label


def test_better_on_a_table_per_group(tmp_path):
    (tmp_path / "figures").mkdir()
    pd.DataFrame({"method": ["x", "y", "x", "y"], "group": ["low", "low", "high", "high"],
                  "metric": ["hr"] * 4, "mean": [0.5, 0.4, 0.1, 0.3]}).to_csv(tmp_path / "figures/g_toy.csv", index=False)
    results = evaluate_check(check(kind="better", datasets=["toy"], table="figures/g_{dataset}.csv", per="group",
                                   where={"metric": "hr"}, metric="mean", method="x", than="y"), ctx(tmp_path))
    # a table of means with no seeds: compared, never tested
    assert [(r.label.split(":")[0], r.status) for r in results] == [("toy, group high", INCONCLUSIVE),
                                                                    ("toy, group low", INCONCLUSIVE)]
    assert [r.evidence.effect > 0 for r in results] == [False, True]
    [r] = evaluate_check(check(kind="better", datasets=["other"], table="figures/g_{dataset}.csv", metric="mean",
                               method="x", than="y"), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "figures/g_{dataset}.csv" in r.numbers
    # a table drawn from one seed's runs (its seed column): a verdict on one seed is provisional
    pd.DataFrame({"method": ["x", "y"], "seed": [0, 0], "group": ["low", "low"], "metric": ["hr"] * 2,
                  "mean": [0.5, 0.4]}).to_csv(tmp_path / "figures/g_toy.csv", index=False)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], table="figures/g_{dataset}.csv", per="group",
                               where={"metric": "hr"}, metric="mean", method="x", than="y"), ctx(tmp_path))
    assert r.status == INCONCLUSIVE and r.seeds == (1, 3) and r.provisional
    assert r.numbers == "mean 0.5000 vs 0.4000 (1 of 3 seeds)"
    # three seeds: paired over the seeds, and a gain inside their noise is no gain; a label names the check
    rows = [{"method": m, "seed": s, "group": "low", "metric": "hr", "mean": v}
            for s, (vx, vy) in enumerate([(0.50, 0.40), (0.41, 0.42), (0.60, 0.45)]) for m, v in (("x", vx), ("y", vy))]
    pd.DataFrame(rows).to_csv(tmp_path / "figures/g_toy.csv", index=False)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], table="figures/g_{dataset}.csv", per="group",
                               where={"metric": "hr"}, metric="mean", method="x", than="y", label="share"), ctx(tmp_path))
    assert r.status == INCONCLUSIVE and r.evidence.test == "paired t-test over 3 seeds"
    assert r.label == "toy, group low: `x` vs `y` (share)" and r.place == "toy, group low share"


# ------------------------------------------------------------------------------------------ relative change


def test_relative_change_against_a_published_change(tmp_path):
    for seed, (prism, slow) in enumerate([(60, 150), (62, 152), (58, 148)]):
        run(tmp_path, "prism", seed, {"x": 1.0}, extra={"epochs_to_best": prism})
        run(tmp_path, "tuned", seed, {"x": 1.0}, extra={"counts": {"epochs_to_best": 100}})
        run(tmp_path, "slow", seed, {"x": 1.0}, extra={"epochs_to_best": slow})
    c = ctx(tmp_path)
    spec = dict(kind="relative_change", datasets=["toy"], metric="epochs_to_best", than="tuned", published=-0.4,
                tolerance=0.05)
    [r] = evaluate_check(check(method="prism", **spec), c)  # (60 - 100) / 100 = -40 %
    assert "-40.0% against the paper's -40.00%" in r.numbers
    # TOST against [-45 %, -35 %]: differences -40, -38, -42 (sd 2, se 2/√3 = 1.155 epochs, 1.155 % of
    # 100); t = 5 / 1.155 = 4.330 on 2 df from either bound, one-sided p = (1 - t/√(t² + 2)) / 2 = 0.0247
    assert r.status == HOLDS and r.evidence.p == pytest.approx(0.0247, abs=2e-4)
    assert r.evidence.target == (pytest.approx(-0.45), pytest.approx(-0.35)) and r.evidence.ci_level == 0.9
    [r] = evaluate_check(check(method="slow", **spec), c)  # +50 %, far outside
    assert r.status == AGAINST
    [r] = evaluate_check(check(method="ghost", **spec), c)
    assert r.status == NOT_TESTABLE and "`ghost`" in r.numbers
    # one seed: inside the region, but no interval: inconclusive
    one = tmp_path / "one"
    run(one, "prism", 0, {"x": 1.0}, extra={"epochs_to_best": 60})
    run(one, "tuned", 0, {"x": 1.0}, extra={"epochs_to_best": 100})
    [r] = evaluate_check(check(method="prism", **spec), ctx(one))
    assert r.status == INCONCLUSIVE and r.evidence.p is None and r.evidence.effect == pytest.approx(-0.4)


def test_relative_change_divides_by_the_method_and_counts_a_gain_with_or_better(tmp_path):
    for seed, (a, b) in enumerate([(0.125, 0.100), (0.126, 0.101), (0.124, 0.099)]):
        run(tmp_path, "p", seed, {"ndcg@20": a})
        run(tmp_path, "t", seed, {"ndcg@20": b})
    spec = dict(kind="relative_change", datasets=["toy"], metric="ndcg@20", method="p", than="t", published=0.0,
                tolerance=0.05, denominator="method")
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == AGAINST and "+20.0%" in r.numbers  # (0.125 - 0.1) / 0.125, beyond 5 %
    [r] = evaluate_check(check(or_better=True, **spec), ctx(tmp_path))
    assert r.status == HOLDS and r.evidence.target == (pytest.approx(-0.05), None)  # non-inferiority




def test_a_ratio_of_two_strata_is_a_metric_per_seed(tmp_path):
    from recrepro.scorecard.claimrecords import stratum_ratios

    assert stratum_ratios({"unpopular": {"ndcg@20": 0.02, "recall@20": 0.1}, "popular": {"ndcg@20": 0.08},
                           "neutral": {"ndcg@20": 0.5}}) == {"ndcg@20[unpopular/popular]": pytest.approx(0.25)}
    assert stratum_ratios({"unpopular": {"ndcg@20": 0.02}, "popular": {"ndcg@20": 0.0}}) == {}  # no ratio, no inf
    # the picked model doubles the share of unpopular items against tuned weight decay on every seed:
    # ratios 0.2/0.1 … against 0.1/0.1 …, +100 % (hand-checked), within 15 points of +75.98 % or beyond
    for seed, (u, p) in enumerate([(0.020, 0.100), (0.021, 0.100), (0.019, 0.100)]):
        run(tmp_path, "picked", seed, {"ndcg@20": 0.12},
            extra={"strata": {"unpopular": {"ndcg@20": u}, "popular": {"ndcg@20": p}}})
        run(tmp_path, "tuned", seed, {"ndcg@20": 0.12},
            extra={"strata": {"unpopular": {"ndcg@20": u / 2}, "popular": {"ndcg@20": p}}})
    records = ClaimRecords.under(tmp_path)
    assert records.seeds("toy", None, "picked", "ndcg@20[unpopular/popular]") == pytest.approx(
        {0: 0.20, 1: 0.21, 2: 0.19})
    spec = dict(kind="relative_change", datasets=["toy"], metric="ndcg@20[unpopular/popular]", method="picked",
                than="tuned", published=0.7598, tolerance=0.15, or_better=True)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == HOLDS and "+100.0%" in r.numbers and r.evidence.target == (pytest.approx(0.6098), None)
    # a per-seed test (the per-user rows hold no ratio): the change is exactly +100 % on every seed
    assert "paired t-test over 3 seeds" in r.evidence.test
# ------------------------------------------------------------------------------------------ monotone


def test_monotone_along_methods(tmp_path):
    for name, gini in [("sw1", 0.9), ("sw2", 0.8), ("sw3", 0.7), ("up", 0.85)]:
        for seed, jitter in enumerate((0.0, 0.002, -0.002)):
            run(tmp_path, name, seed, {"gini@20": gini + jitter})
    c = ctx(tmp_path)
    spec = dict(kind="monotone", datasets=["toy"], metric="gini@20", direction="decreasing")
    [r] = evaluate_check(check(methods=["sw1", "sw2", "sw3"], **spec), c)
    assert r.status == HOLDS and r.numbers.startswith("gini@20: 0.9000 > 0.8000 > 0.7000")
    # Kendall's τ-b of position against value over 9 values: all 27 pairs across points discordant,
    # ties only within a point (3 × 3 pairs of x): τ = -27 / √((36 - 9) · 36) = -0.866
    assert r.evidence.unit == "tau" and r.evidence.effect == pytest.approx(-27 / (27 * 36) ** 0.5)
    assert r.evidence.test.startswith("Kendall's τ of position against value over 9 values (3 points × 3 seeds)")
    # a rise at the end that every seed shows: the trend is not decreasing throughout (a step goes
    # significantly the other way), so it cannot hold
    [r] = evaluate_check(check(methods=["sw1", "sw2", "sw3", "up"], **spec), c)
    assert r.status == INCONCLUSIVE and "not decreasing at `sw3` → `up` (against in 3 of 3 seeds)" in r.numbers
    assert r.evidence.if_significant == INCONCLUSIVE and "`sw3` → `up`" in r.evidence.note
    [r] = evaluate_check(check(methods=["sw1", "sw9", "sw3"], **spec), c)
    assert r.status == NOT_TESTABLE and r.numbers == "waits for `sw9` on toy (gini@20)"
    # the other direction, significantly: against
    [r] = evaluate_check(check(methods=["sw3", "sw2", "sw1"], **spec), c)
    assert r.status == AGAINST
    # a step smaller than the claim's minimal effect is flat, not a break: the rise of 0.15 at the end
    # stops blocking the trend once 0.2 is the smallest step that counts
    [r] = evaluate_check(check(methods=["sw1", "sw2", "sw3"], min_step=0.15, **spec), c)
    assert "flat (a step under 0.1500) at `sw1` → `sw2`, `sw2` → `sw3`" in r.numbers
    [r] = evaluate_check(check(methods=["sw1", "sw2", "sw3", "up"], min_step=0.2, **spec), c)
    assert r.evidence.if_significant == HOLDS and "not decreasing" not in r.numbers
    # sw3 gains a seed 3 at 0.99: over its own seeds its mean would rise above sw2's and break the
    # trend; the trend rests on the seeds every point ran
    run(tmp_path, "sw3", 3, {"gini@20": 0.99})
    [r] = evaluate_check(check(methods=["sw1", "sw2", "sw3"], **spec), ctx(tmp_path))
    assert r.status == HOLDS and r.numbers.startswith("gini@20: 0.9000 > 0.8000 > 0.7000")
    assert r.numbers.endswith("; on the seeds every point ran (0, 1, 2), seed 3 left out")


def test_monotone_along_a_table_column(tmp_path):
    (tmp_path / "sweeps").mkdir()
    rows = [{"method": "dp", "eps": e, "seed": s, "err": 1.0 / e + 0.01 * s} for e in (0.5, 1.0, 4.0) for s in (0, 1, 2)]
    pd.DataFrame(rows).to_parquet(tmp_path / "sweeps/p.parquet")
    spec = dict(kind="monotone", datasets=["toy"], table="sweeps/p.parquet", method="dp", along="eps", metric="err")
    [r] = evaluate_check(check(direction="decreasing", **spec), ctx(tmp_path))
    assert r.status == HOLDS and r.seeds == (3, 3) and "eps 0.5, eps 1, eps 4" in r.numbers
    [r] = evaluate_check(check(direction="increasing", **spec), ctx(tmp_path))
    assert r.status == AGAINST
    [r] = evaluate_check(check(direction="decreasing", **{**spec, "table": "sweeps/none.parquet"}), ctx(tmp_path))
    assert r.status == NOT_TESTABLE
    # one seed's outlier breaks the mean (1/e + 0.01 s, seed 0 at eps 1 raised to 5.0: mean 2.01 at
    # eps 0.5 → 2.343 at eps 1, against in 1 of 3 seeds): the break is shown, but the trend over every
    # seed's value still falls significantly (τ = (3 - 24) / √(27 · 36) = -0.674) and no step rises
    # significantly, so it holds
    rows = [{**r, "err": 5.0} if (r["eps"], r["seed"]) == (1.0, 0) else r for r in rows]
    pd.DataFrame(rows).to_parquet(tmp_path / "sweeps/p.parquet")
    [r] = evaluate_check(check(direction="decreasing", **spec), ctx(tmp_path))
    assert r.numbers.endswith("not decreasing at eps 0.5 → eps 1 (against in 1 of 3 seeds)")
    assert r.status == HOLDS and r.evidence.effect == pytest.approx(-21 / (27 * 36) ** 0.5)
    # the points the sweep should have: one with no row is missing, not a shorter sweep
    [r] = evaluate_check(check(direction="decreasing", at=[0.5, 1, 2, 4], **spec), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and "eps 2 of `dp` in `sweeps/p.parquet`" in r.numbers
    [r] = evaluate_check(check(direction="decreasing", at=[0.5, 1.0, 4], **spec), ctx(tmp_path))
    assert r.status == HOLDS
    with pytest.raises(ValueError, match="only along a column"):
        check(kind="monotone", datasets=["toy"], methods=["a", "b"], metric="m", direction="increasing", at=[1])
    with pytest.raises(ValueError, match="non-empty list of numbers"):
        check(direction="decreasing", at="0.5", **spec)


# ------------------------------------------------------------------------------------------ correlation


def test_correlation_of_a_runs_file(tmp_path):
    degree = np.arange(50)
    for method, norm in [("wd", degree * 0.1 + 1.0), ("nowd", np.cos(degree * 7.0))]:
        d = run(tmp_path, method, 0, {"ndcg@20": 0.1})
        pd.DataFrame({"train_degree": degree, "norm": norm}).to_parquet(d / "magnitudes.parquet")
    spec = dict(kind="correlation", datasets=["toy"], file="magnitudes.parquet", x="train_degree", y="norm", min=0.5)
    [r] = evaluate_check(check(method="wd", than="nowd", **spec), ctx(tmp_path, 1))
    assert r.status == HOLDS and "`wd` +1.000" in r.numbers
    [r] = evaluate_check(check(method="nowd", than="wd", **spec), ctx(tmp_path, 1))
    assert r.status == AGAINST
    [r] = evaluate_check(check(method="ghost", **spec), ctx(tmp_path, 1))
    assert r.status == NOT_TESTABLE and "magnitudes.parquet of `ghost`" in r.numbers


def test_correlation_over_seeds_reads_metrics_json_where_the_table_is_not_kept(tmp_path):
    from recrepro.records import write_rank_correlations

    rng = np.random.default_rng(0)
    degree = np.arange(200)
    for method, slope in [("wd", 1.0), ("nowd", 0.0)]:
        for seed in (0, 1, 2):
            d = run(tmp_path, method, seed, {"ndcg@20": 0.1})
            norm = slope * degree + rng.normal(0.0, 40.0, degree.size)
            pd.DataFrame({"train_degree": degree, "norm": norm}).to_parquet(d / "magnitudes.parquet")
            write_rank_correlations(d, "magnitudes.parquet")  # as the run keeps them in metrics.json
            if seed:  # the committed reproduction keeps the first seed's table only
                (d / "magnitudes.parquet").unlink()
    spec = dict(kind="correlation", datasets=["toy"], file="magnitudes.parquet", x="train_degree", y="norm", min=0.5)
    [r] = evaluate_check(check(method="wd", than="nowd", **spec), ctx(tmp_path, 3))
    assert r.status == HOLDS and "(3 seeds with the file or its ρ)" in r.numbers
    assert "over 200 items × 3 seeds" in r.evidence.test  # the rows each seed's summary names


# ------------------------------------------------------------------------------------------ frontier


def test_frontier_of_operating_points(tmp_path):
    # the method's curve: (gini, ndcg) = (0.9, 0.08), (0.8, 0.07)
    for name, gini, ndcg in [("ex_a", 0.9, 0.08), ("ex_b", 0.8, 0.07), ("base_low", 0.85, 0.07),
                             ("rival_high", 0.85, 0.079), ("far", 0.5, 0.01)]:
        run(tmp_path, name, 0, {"gini@20": gini, "ndcg@20": ndcg})
    spec = dict(kind="frontier", datasets=["toy"], x="gini@20", y="ndcg@20", methods=["ex_*"])
    [r] = evaluate_check(check(baselines=["base_*"], **spec), ctx(tmp_path, None))
    assert r.status == HOLDS and r.numbers.startswith("1 of 1 `base_*` points at or below the curve")
    [r] = evaluate_check(check(baselines=["rival_*"], **spec), ctx(tmp_path, None))
    assert r.status == AGAINST and "above it: `rival_high` (0.8500, 0.0790)" in r.numbers  # curve there: 0.075
    [r] = evaluate_check(check(baselines=["far"], **spec), ctx(tmp_path, None))
    assert r.status == NOT_TESTABLE
    # the curve's end is a seed mean: a point past it by less than its standard error over seeds is
    # compared with it. ex_a's gini over two seeds, 0.89 and 0.91: mean 0.9, standard error 0.01
    run(tmp_path, "ex_a", 0, {"gini@20": 0.89, "ndcg@20": 0.08})
    run(tmp_path, "ex_a", 1, {"gini@20": 0.91, "ndcg@20": 0.08})
    run(tmp_path, "edge_close", 0, {"gini@20": 0.905, "ndcg@20": 0.085})   # within 0.01 of 0.9: above the end
    run(tmp_path, "edge_far", 0, {"gini@20": 0.915, "ndcg@20": 0.085})     # past it: not comparable
    [r] = evaluate_check(check(baselines=["edge_close"], **spec), ctx(tmp_path, None))
    assert r.status == AGAINST and "above it: `edge_close` (0.9050, 0.0850)" in r.numbers
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
    assert r.status == HOLDS and "at most 0.0500" in r.numbers  # 0.05 / peak 1.0
    [r] = evaluate_check(check(datasets=["flat"], **spec), ctx(tmp_path, 1))
    assert r.status == AGAINST
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
    assert r.status == HOLDS and "2–3 at 2 points along dim" in r.numbers
    [r] = evaluate_check(check(**ratio, max_ratio=2.5), ctx(tmp_path))
    assert r.status == AGAINST   # 3x is outside a factor 2.5
    [r] = evaluate_check(check(**{**ratio, "method": "b", "than": "a"}, max_ratio=2.5), ctx(tmp_path))
    assert r.status == AGAINST   # either way: 1/3 is outside it too
    growth = dict(kind="cost", datasets=["toy"], file="timing/{dataset}.json", along="users", x="n_users",
                  max_exponent=1.2)
    [r] = evaluate_check(check(**growth, method="a"), ctx(tmp_path))
    assert r.status == HOLDS and "n_users^1.00 over n_users 1,000–4,000" in r.numbers
    [r] = evaluate_check(check(**growth, method="quad"), ctx(tmp_path))
    assert r.status == AGAINST and "n_users^2.00" in r.numbers
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
    assert statuses(results) == [HOLDS, AGAINST, NOT_TESTABLE]
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
    assert r.status == HOLDS and "vs strongest `ease` 0.1000" in r.numbers
    rows[1]["mean"] = 0.12
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == AGAINST and "strongest `itemknn`" in r.numbers and "edge" not in r.numbers
    # a baseline picked on its grid's edge: the verdict says so (empty cells read back as NaN: no note)
    rows[1]["pick_edges"], rows[0]["pick_edges"] = "k (largest)", ""
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == AGAINST and r.numbers.endswith("`itemknn`'s pick sits on its grid's edge in k (largest))")
    assert not r.provisional  # a loss to an edge pick stands: a point beyond only widens it
    rows[1]["mean"] = 0.105
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    # the paper's method beats an edge pick: supported, provisional, and the reader learns the baseline may do better
    assert r.status == HOLDS and "strongest `itemknn` 0.1050" in r.numbers and "grid's edge in k" in r.numbers
    assert r.provisional and r.on_edge == "`itemknn`"
    # a win where only a weaker baseline sits on its edge is provisional too (a point beyond may beat ours)
    rows[0]["pick_edges"], rows[1]["pick_edges"] = "l2 (smallest)", ""
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == HOLDS and r.on_edge == "`ease`" and "edge" not in r.numbers
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
    assert r.status == AGAINST and "strongest `ease` 0.4000" in r.numbers
    gini[0]["mean"] = 0.55
    pd.DataFrame(gini).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(kind="beats_strongest_baseline", metric="gini@20"), ctx(tmp_path))
    assert r.status == HOLDS and "strongest `ease` 0.5500" in r.numbers
    # two protocols on one dataset: one result per split, each named; `split` keeps one of them
    other = [{**row, "split": "s2", "metric": "ndcg@20", "mean": 0.5, "paper_mean": float("nan")} for row in rows]
    both = [{**row, "paper_mean": 0.11} for row in rows] + other
    pd.DataFrame(both).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    results = evaluate_check(check(**spec), ctx(tmp_path))
    assert [r.label for r in results] == ["toy · s1 ndcg@20", "toy · s2 ndcg@20"]
    assert statuses(results) == [AGAINST, NOT_TESTABLE]
    [r] = evaluate_check(check(**spec, split="s1"), ctx(tmp_path))
    assert r.label == "toy ndcg@20" and r.status == AGAINST
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
    assert r.status == AGAINST and "strongest `itemknn` 0.1200" in r.numbers
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
        assert r.status == AGAINST and r.seeds == seeds and r.provisional == provisional
        assert ("the baseline is deterministic: one run per split" in r.numbers) == covers
    # beating the strongest inside the noise (the table's paired p 0.3) is no evidence of beating it
    pd.DataFrame([{**rows[0], "paper_mean": 0.11, "mean": 0.10, "p_value": 0.3}]).to_csv(
        tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == INCONCLUSIVE and r.evidence.p == 0.3 and r.evidence.effect == pytest.approx(0.1)


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
    assert r.status == INCONCLUSIVE and "`arm` 0.1200 vs strongest `ease` 0.1000" in r.numbers
    assert r.evidence.test == "one-sample t-test of 3 seeds against the deterministic baseline"
    assert r.evidence.p == pytest.approx(0.0742, abs=5e-5) and r.seeds == (3, 3)
    for seed, v in enumerate([0.119, 0.120, 0.121]):
        run(tmp_path, "arm", seed, {"ndcg@20": v})
    [r] = evaluate_check(check(**spec), ctx(tmp_path))       # t = 20√3, p = 1 − 20√3/√1202 = 0.000832
    assert r.status == HOLDS and r.evidence.p == pytest.approx(0.000832, abs=5e-7)
    # a seeded baseline: Welch's t-test from its row's mean, sd and seed count; the table's own
    # paired p (of the table's paper method) plays no part
    seeded = [{**row, "sd": 0.001, "n_seeds": 3, "covers_seeds": False, "p_value": 0.9} for row in rows]
    pd.DataFrame(seeded).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == HOLDS and r.evidence.test == "Welch's t-test over 3 and 3 seeds"
    # the table's form of the same check still judges the table's paper method, by the table's own p (0.9)
    [r] = evaluate_check(check(kind="beats_strongest_baseline", metric="ndcg@20"), ctx(tmp_path))
    assert r.status == INCONCLUSIVE and "`ours` 0.0500 vs strongest `ease` 0.1000" in r.numbers


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
    assert r.status == AGAINST and "`ours` 0.0900 vs strongest `iht` 0.0500 (3 seeds)" in r.numbers
    assert r.evidence.test == "paired t-test over 3 seeds"
    for seed, v in enumerate([1.2, 1.3, 1.25]):
        run(tmp_path, "iht", seed, {"param_error": v})
    [r] = evaluate_check(check(**spec), ctx(tmp_path))
    assert r.status == HOLDS and "vs strongest `ridge` 0.6800" in r.numbers
    [r] = evaluate_check(check(**{**spec, "method": "missing"}), ctx(tmp_path))
    assert r.status == NOT_TESTABLE and r.numbers == "waits for `missing` on toy (param_error)"
    with pytest.raises(ValueError, match="needs both method and baselines"):
        check(kind="beats_strongest_baseline", datasets=["toy"], metric="m", baselines=["ls"])


def test_waits_is_never_testable(tmp_path):
    [r] = evaluate_check(check(kind="waits", waits_for="a timing check"), ctx(tmp_path))
    assert (r.status, r.numbers) == (NOT_TESTABLE, "waits for a timing check")


# ------------------------------------------------------------------------------------------ verdicts


def _claim(checks, **extra):
    return claim_from_mapping({"id": "P1", "claim": "c", "source": "Fig. 1", "quantifier": "all", "checks": checks,
                               **extra})


def test_claim_verdicts_by_quantifier_stand_in_and_pending(tmp_path):
    for seed in range(3):
        run(tmp_path, "a", seed, {"m": 0.3}, dataset="toy")
        run(tmp_path, "b", seed, {"m": 0.2}, dataset="toy")
        run(tmp_path, "a", seed, {"m": 0.1}, dataset="alt")
        run(tmp_path, "b", seed, {"m": 0.2}, dataset="alt")
    c = ctx(tmp_path)
    checks = [{"kind": "better", "datasets": ["toy", "alt"], "metric": "m", "method": "a", "than": "b"}]
    # "on every dataset": one dataset significantly the other way refutes it
    v = judge_claim(_claim(checks), c)
    assert v.verdict_class == CONTRADICTED
    assert v.verdict == ("contradicted: 1 of 2 checks hold, 1 against (p values Holm-corrected over the claim's "
                         "checks) (against on alt `a` vs `b`)")
    assert judge_claim(_claim(checks, quantifier="any"), c).verdict_class == SUPPORTED
    v = judge_claim(_claim(checks, quantifier="most"), c)
    assert v.verdict_class == MIXED and v.verdict.startswith("mixed: holds for toy `a` vs `b`; against for alt")
    alt = _claim([{"kind": "better", "datasets": ["alt"], "metric": "m", "method": "b", "than": "a"}])
    assert judge_claim(alt, c).verdict == "supported: 1 of 1 check holds; on alt (a stand-in)"
    # a protocol step the claim waits for: its checks are not testable yet, their numbers kept
    pending = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b"}],
                     pending=[{"what": "the lr search", "methods": ["*_lr1em2"]}])
    v = judge_claim(pending, c)
    assert v.verdict_class == NOT_TESTABLE and v.waits == ("the lr search",)
    assert v.verdict == "not testable here: waits for the lr search (so far: m 0.3000 vs 0.2000 (3 seeds))"
    run(tmp_path, "a_lr1em2", 0, {"m": 0.3})
    assert judge_claim(pending, ctx(tmp_path)).verdict == "supported: 1 of 1 check holds"
    # a pending step for some checks only (by label) leaves the others testable
    labelled = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b", "label": "MF"},
                       {"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b", "label": "NL"}],
                      pending=[{"what": "the NL search", "methods": ["nl_*"], "checks": ["NL"]}])
    v = judge_claim(labelled, c)
    assert [r.status for r in v.results] == [HOLDS, NOT_TESTABLE] and v.provisional
    part = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b"},
                   {"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "c", "label": "vs c"}])
    assert judge_claim(part, c).verdict == ("supported (provisional): 1 of 1 check holds; not testable yet: toy vs c "
                                            "(claims.md names what they wait for)")
    none = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "zz", "than": "b"}])
    v = judge_claim(none, c)
    assert v.verdict_class == NOT_TESTABLE and v.verdict == "not testable here: waits for `zz` on toy (m)"


def test_holm_decides_over_the_checks_of_one_claim(tmp_path):
    # three datasets, each a gain of 0.05 on 3 seeds; d1 and d2 noisy (sd 0.0155), d3 steady (sd 0.001)
    for dataset, diffs in (("d1", (0.05, 0.0655, 0.0345)), ("d2", (0.05, 0.0655, 0.0345)), ("d3", (0.05, 0.051, 0.049))):
        for seed, d in enumerate(diffs):
            run(tmp_path, "a", seed, {"m": 0.2 + d}, dataset=dataset)
            run(tmp_path, "b", seed, {"m": 0.2}, dataset=dataset)
    claim = _claim([{"kind": "better", "datasets": ["d1", "d2", "d3"], "metric": "m", "method": "a", "than": "b"}])
    v = judge_claim(claim, ctx(tmp_path, paper_datasets=("d1", "d2", "d3")))
    # by hand: t = 0.05 / (sd / √3) on 2 df, p = 1 - t / √(t² + 2): d1, d2 t = 5.587, p = 0.0305; d3 t = 86.6,
    # p = 1.33e-4. Holm: d3 × 3 = 4.0e-4; d1 (or d2) × 2 = 0.0610; the last max(0.0610, 0.0305) = 0.0610
    raw = [r.evidence.p for r in v.results]
    assert raw == [pytest.approx(0.0305, abs=2e-4), pytest.approx(0.0305, abs=2e-4), pytest.approx(1.333e-4, rel=1e-2)]
    assert [r.p_adjusted for r in v.results] == [pytest.approx(2 * raw[0]), pytest.approx(2 * raw[0]),
                                                 pytest.approx(3 * raw[2])]
    # alone, d1's p = 0.0305 would hold; corrected for the claim's three checks it is inconclusive, never "against"
    assert [r.status for r in v.results] == [INCONCLUSIVE, INCONCLUSIVE, HOLDS]
    assert "Holm-adjusted p = 0.061" in v.results[0].numbers
    assert v.verdict == ("inconclusive: 1 of 3 checks hold, 2 inconclusive (p values Holm-corrected over the "
                         "claim's checks)")


def test_a_check_under_a_documented_defect_is_shown_but_never_counts(tmp_path):
    for seed in range(3):
        run(tmp_path, "a_leak", seed, {"m": 0.9 + seed / 1000})
        run(tmp_path, "a", seed, {"m": 0.1 + seed / 1000})
        run(tmp_path, "b", seed, {"m": 0.2})
    claim = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b",
                     "label": "leak-free"},
                    {"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a_leak", "than": "b",
                     "label": "leaking pool", "defect": "demo-leak"}])
    v = judge_claim(claim, ctx(tmp_path))
    assert [r.status for r in v.results] == [AGAINST, HOLDS] and v.results[1].defect == "demo-leak"
    assert v.verdict_class == CONTRADICTED
    assert v.verdict.endswith("; under a documented defect (demo-leak): 1 of 1 hold, not counted")
    # the leaking check alone supports nothing: with no counted check the claim is not testable
    only = _claim([claim.checks[1].__dict__ and {"kind": "better", "datasets": ["toy"], "metric": "m",
                                                  "method": "a_leak", "than": "b", "defect": "demo-leak"}])
    v = judge_claim(only, ctx(tmp_path))
    assert v.verdict_class == NOT_TESTABLE and "not counted" in v.verdict


def test_a_mean_claim_pools_its_checks(tmp_path):
    # two datasets, relative changes -40 % and -36 % with small seed noise: pooled inside [-45 %, -35 %]?
    for dataset, values in (("d1", (60, 61, 59)), ("d2", (64, 65, 63))):
        for seed, v in enumerate(values):
            run(tmp_path, "p", seed, {"x": 1.0}, dataset=dataset, extra={"epochs_to_best": v})
            run(tmp_path, "t", seed, {"x": 1.0}, dataset=dataset, extra={"epochs_to_best": 100})
    claim = _claim([{"kind": "relative_change", "datasets": ["d1", "d2"], "metric": "epochs_to_best", "method": "p",
                     "than": "t", "published": -0.4, "tolerance": 0.05}], quantifier="mean")
    v = judge_claim(claim, ctx(tmp_path, paper_datasets=("d1", "d2")))
    # each: se 0.577 % (sd 1 epoch of 100, over √3); unweighted mean of -40 % and -36 % = -38 %,
    # se √2 · 0.577 % / 2 = 0.408 %: well inside the region, the pooled TOST holds
    assert v.verdict_class == SUPPORTED and "pooled over 2 results: effect -38.0%" in v.verdict


def test_a_mean_claim_averages_its_cells_without_weighting_them(tmp_path):
    # d1: -80 % with almost no seed noise; d2: +10 % with much. The claim is "-40 % on average" (region
    # -25 % or faster). Inverse-variance would report about -80 % (d1's) and call it held; the claim's
    # own statistic is the plain average of the two cells
    for dataset, values in (("d1", (20, 20, 20)), ("d2", (140, 80, 110))):
        for seed, v in enumerate(values):
            run(tmp_path, "p", seed, {"x": 1.0}, dataset=dataset, extra={"epochs_to_best": v})
            run(tmp_path, "t", seed, {"x": 1.0}, dataset=dataset, extra={"epochs_to_best": 100 + seed % 2})
    claim = _claim([{"kind": "relative_change", "datasets": ["d1", "d2"], "metric": "epochs_to_best", "method": "p",
                     "than": "t", "published": -0.4, "tolerance": 0.15, "or_better": True}], quantifier="mean")
    v = judge_claim(claim, ctx(tmp_path, paper_datasets=("d1", "d2")))
    # means: t 100.33; d1 20 -> -80.07 %, d2 110 -> +9.63 %; unweighted mean -35.2 %: inside the region's
    # reach but not significantly (d2's se ~17 %), so inconclusive where the weighted mean held
    assert "pooled over 2 results: effect -35.2%" in v.verdict, v.verdict
    assert "unweighted mean of 2 estimates" in v.verdict
    assert v.verdict_class == INCONCLUSIVE


def test_a_mean_claim_of_one_few_seed_check_keeps_that_checks_t_test(tmp_path):
    # epochs 110, 90, 140 against 100: +13.3 %, se 14.5 % over 3 seeds; the region is -25 % or faster.
    # (13.3 + 25) / 14.5 = 2.64: one-sided p 0.059 on t with 2 df (inconclusive); a normal approximation
    # would give 0.004 and call the claim contradicted
    for seed, v in enumerate((110, 90, 140)):
        run(tmp_path, "p", seed, {"x": 1.0}, dataset="d1", extra={"epochs_to_best": v})
        run(tmp_path, "t", seed, {"x": 1.0}, dataset="d1", extra={"epochs_to_best": 100})
    claim = _claim([{"kind": "relative_change", "datasets": ["d1"], "metric": "epochs_to_best", "method": "p",
                     "than": "t", "published": -0.4, "tolerance": 0.15, "or_better": True}], quantifier="mean")
    v = judge_claim(claim, ctx(tmp_path, paper_datasets=("d1",)))
    assert v.verdict_class == INCONCLUSIVE, v.verdict
    assert "pooled over 1 result: effect +13.3%" in v.verdict and "t with 2.0 Welch-Satterthwaite df" in v.verdict
    assert "p = 0.059" in v.verdict


def test_a_tuned_pick_from_part_of_its_grid_is_not_testable_yet(tmp_path):
    for seed in range(3):
        run(tmp_path, "a_tunedwd", seed, {"m": 0.3}, extra={"budget": "tuned over 3 of 4 weight decays"})
        run(tmp_path, "a_wd0", seed, {"m": 0.2}, extra={"budget": ""})
        run(tmp_path, "b_tunedwd", seed, {"m": 0.3})
    c = ctx(tmp_path)
    [r] = evaluate_check(check(kind="better", datasets=["toy"], metric="m", method="a_tunedwd", than="a_wd0"), c)
    assert r.status == HOLDS and r.provisional and r.capped == "`a_tunedwd`: tuned over 3 of 4 weight decays"
    assert r.numbers.endswith("; `a_tunedwd`: tuned over 3 of 4 weight decays)")
    [r] = evaluate_check(check(kind="relative_change", datasets=["toy"], metric="m", method="a_wd0", than="a_tunedwd",
                               published=0.0, tolerance=0.05), c)
    assert r.status == AGAINST and r.provisional and "tuned over 3 of 4" in r.numbers
    # in the verdict, a pick from part of its grid is no tuning yet: not testable, its numbers kept
    claim = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a_tunedwd", "than": "a_wd0"},
                    {"kind": "better", "datasets": ["toy"], "metric": "m", "method": "b_tunedwd", "than": "a_wd0",
                     "label": "b"}])
    v = judge_claim(claim, c)
    assert v.results[0].status == NOT_TESTABLE
    assert v.results[0].numbers.startswith("waits for the rest of the tuned grid (`a_tunedwd`: tuned over 3 of 4 "
                                           "weight decays) (so far: m 0.3000 vs 0.2000")
    assert v.verdict.startswith("supported (provisional): 1 of 1 check holds; not testable yet: toy `a_tunedwd`")
    # a full grid (no budget note, or an empty one) leaves the verdict final
    full = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "b_tunedwd", "than": "a_wd0"}])
    assert judge_claim(full, c).verdict == "supported: 1 of 1 check holds"


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
    assert r.status == INCONCLUSIVE and r.evidence.effect == pytest.approx(0.5)  # one seed: no test


def test_one_seed_of_three_is_inconclusive_and_provisional(tmp_path):
    run(tmp_path, "a", 0, {"m": 0.1})
    run(tmp_path, "b", 0, {"m": 0.2})
    claim = _claim([{"kind": "better", "datasets": ["toy"], "metric": "m", "method": "a", "than": "b"}])
    assert judge_claim(claim, ctx(tmp_path)).verdict == ("inconclusive (provisional): 0 of 1 check holds, "
                                                         "1 inconclusive; 1 of 3 seeds")
    assert judge_claim(claim, ctx(tmp_path, seeds_required=1)).verdict == "inconclusive: 0 of 1 check holds, 1 inconclusive"


# ------------------------------------------------------------------------------------------ loader


GOOD = {"id": "P1", "claim": "c", "source": "s", "quantifier": "all",
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
    ({"quantifier": "every"}, "quantifier must be one of"),
    ({"checks": [{**GOOD["checks"][0], "defect": "A Leak"}]}, "not a markdown anchor of docs/deviations.md"),
    ({"pending": [{"what": "x", "methods": ["a*"], "checks": "MF"}]}, "pending checks must be a list"),
])
def test_the_loader_names_the_claim_and_what_is_wrong(tmp_path, change, message):
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump({"paper": "demo", "entries": [], "claims": [{**GOOD, **change}]}))
    with pytest.raises(ExpectedFileError, match=message) as error:
        load_expected(path)
    assert str(error.value).startswith(f"{path}: claims[0]")


def test_a_name_nothing_knows_is_refused_with_the_closest_known_one(tmp_path):
    from recrepro.scorecard.claimrecords import ClaimsError

    results = tmp_path / "results" / "paper" / "demo"
    for seed in range(3):
        run(results, "fedrap", seed, {"hr@10": 0.3})
        run(results, "fedrap_fixed", seed, {"hr@10": 0.2})
    path = tmp_path / "demo.yaml"
    typo = {**GOOD, "checks": [{"kind": "better", "datasets": ["toy"], "metric": "hr@10", "method": "fedrap",
                                "than": "fedrap_fixd"}]}
    path.write_text(yaml.safe_dump({"paper": "demo", "entries": [], "claims": [typo]}))
    md, csv = tmp_path / "c.md", tmp_path / "c.csv"
    with pytest.raises(ClaimsError, match=r"claim P1, checks\[0\]: method `fedrap_fixd` is neither planned .*"
                                          r"\(the closest known: `fedrap_fixed`\)"):
        write_claims("demo", "paper", path, results, md, csv, planned=[])
    assert not md.exists()  # nothing written
    # a metric and a dataset are checked too (a stratified metric's brackets are literal)
    for change, words in (({"metric": "hr@01"}, "metric `hr@01`"), ({"datasets": ["tyo"]}, "dataset `tyo`")):
        bad = {**typo, "checks": [{**typo["checks"][0], "than": "fedrap_fixed", **change}]}
        path.write_text(yaml.safe_dump({"paper": "demo", "entries": [], "claims": [bad]}))
        with pytest.raises(ClaimsError, match=words):
            write_claims("demo", "paper", path, results, md, csv, planned=[])
    # a method the tier plans but has not run yet is known: its check waits, named
    planned = ["results/paper/demo/runs/toy/s1/fedrap_fixd/seed0/metrics.json"]
    path.write_text(yaml.safe_dump({"paper": "demo", "entries": [], "claims": [typo]}))
    [v] = write_claims("demo", "paper", path, results, md, csv, planned=planned)
    assert v.verdict_class == NOT_TESTABLE and "`fedrap_fixd`" in v.verdict
    # without the planned list (a page drawn outside the workflow), names are not checked
    [v] = write_claims("demo", "paper", path, results, md, csv)
    assert v.verdict_class == NOT_TESTABLE


def test_two_claims_may_not_share_an_id(tmp_path):
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump({"paper": "demo", "entries": [], "claims": [GOOD, GOOD]}))
    with pytest.raises(ExpectedFileError, match=r"claims\[1\] \(id='P1'\): duplicates the id"):
        load_expected(path)


def test_packaged_files_give_every_entry_a_kind_and_every_paper_claims():
    for paper in PAPERS:
        raw = yaml.safe_load(expected_path(paper).read_text())
        assert all("kind" in entry for entry in raw["entries"]), paper  # written out, never defaulted
        # every paper declares its counts, which load_expected holds its entries to
        assert set(raw["counts"]) == {"printed", "other"}, paper
        expected = load_expected(expected_path(paper))
        ids = [c.id for c in expected.claims]
        assert ids and any(k.kind == "beats_strongest_baseline" for c in expected.claims for k in c.checks), paper
    # the issue's count: 128 values the papers print, 27 other targets (official code, a log, our thresholds)
    totals = [yaml.safe_load(expected_path(p).read_text())["counts"] for p in PAPERS]
    assert (sum(c["printed"] for c in totals), sum(c["other"] for c in totals)) == (128, 27)


def test_declared_counts_hold_the_entries_to_them(tmp_path):
    src = expected_path("lrs").read_text()
    assert "counts: {printed: 0, other: 7}" in src
    bad = tmp_path / "lrs.yaml"
    bad.write_text(src.replace("counts: {printed: 0, other: 7}", "counts: {printed: 0, other: 8}"))
    with pytest.raises(ExpectedFileError, match="counts says"):
        load_expected(bad)


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
        {"id": "P2", "claim": "waits", "source": "s", "quantifier": "all",
         "checks": [{"kind": "waits", "waits_for": "runs"}]},
    ]}))
    return path


def test_pages_and_a_byte_identical_redraw(tmp_path):
    results = tmp_path / "results" / "paper"
    for seed in range(3):
        run(results / "demo", "a", seed, {"m": 0.3 + seed / 100})
        run(results / "demo", "b", seed, {"m": 0.2})
    md, csv = results / "demo" / "claims.md", results / "demo" / "claims.csv"
    out_checks = results / "demo" / "checks.csv"
    write_claims("demo", "paper", _demo_expected(tmp_path), results / "demo", md, csv, seeds_required=3,
                 out_checks=out_checks)
    first = (md.read_bytes(), csv.read_bytes())
    write_claims("demo", "paper", _demo_expected(tmp_path), results / "demo", md, csv, seeds_required=3,
                 out_checks=out_checks)
    assert (md.read_bytes(), csv.read_bytes()) == first
    text = md.read_text()
    assert "| [P1](#p1) | c | s | every check | **supported: 1 of 1 check holds** |" in text
    assert ("- toy: `a` vs `b`: *holds* — m 0.3100 vs 0.2000 (3 seeds); effect +55.0%; 95% CI +42.6% to +67.4%; "
            "paired t-test over 3 seeds, p = 0.00274") in text
    assert "deviation: [demo-gap](../../../docs/deviations.md#demo-gap)" in text
    frame = pd.read_csv(csv, dtype=str, keep_default_na=False)
    assert frame[["id", "verdict_class"]].values.tolist() == [["P1", SUPPORTED], ["P2", NOT_TESTABLE]]
    assert claims_counts(results, ["demo", "absent"]) == {"supported": 1, "contradicted": 0, "mixed": 0,
                                                          "inconclusive": 0, "not_testable_here": 1, "provisional": 0}
    checks = pd.read_csv(results / "demo" / "checks.csv", dtype=str, keep_default_na=False)
    assert checks.loc[0, ["claim", "outcome", "unit", "target_low", "target_high", "test", "n"]].tolist() == [
        "P1", "holds", "relative", "0", "", "paired t-test over 3 seeds", "3"]
    assert float(checks.loc[0, "p"]) == pytest.approx(0.002744, abs=2e-6) and checks.loc[1, "outcome"] == "not testable"
    section = claims_section(results, ["demo", "absent"], "../../docs/deviations.md")
    assert section[0] == "## Claims"
    row = next(x for x in section if x.startswith("| [demo]"))
    assert row.startswith("| [demo](#demo) | **P1** c | **supported** | 1 of 1 check holds |")
    assert row.endswith("[claims](demo/claims.md#p1) · [f](demo/figures/f.png) · "
                        "[deviation](../../docs/deviations.md#demo-gap) |")
    assert "No claims page yet for: absent." in section


def test_the_cli_verb_writes_the_same_files(tmp_path):
    from recrepro.cli.main import main

    results = tmp_path / "demo"
    run(results, "a", 0, {"m": 0.1})
    run(results, "b", 0, {"m": 0.2})
    outs = []
    for name in ("one", "two"):
        md, csv = tmp_path / f"{name}.md", tmp_path / f"{name}.csv"
        main(["claims", "--paper", "demo", "--tier", "paper", "--results", str(results), "--expected",
              str(_demo_expected(tmp_path)), "--seeds-required", "3", "--out-md", str(md), "--out-csv", str(csv)])
        outs.append((md.read_bytes(), csv.read_bytes()))
    assert outs[0] == outs[1] and b"inconclusive (provisional): 0 of 1 check holds" in outs[0][1]


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
    assert v.verdict == ("supported (provisional): 1 of 1 check holds; won against baselines picked on their grid's "
                         "edge (`ease`): a point beyond may do better")
    rows[0]["pick_edges"] = ""
    pd.DataFrame(rows).to_csv(tmp_path / "tables/strong_baselines.csv", index=False)
    v = judge_claim(claim, ctx(tmp_path))
    assert v.verdict == "supported: 1 of 1 check holds" and not v.provisional


def test_a_descriptive_check_against_never_makes_a_claim_contradicted(tmp_path):
    # a frontier (no test) with a rival point above the curve: against, but not significantly so
    for name, gini, ndcg in [("ex_a", 0.9, 0.08), ("ex_b", 0.8, 0.07), ("rival_high", 0.85, 0.079)]:
        run(tmp_path, name, 0, {"gini@20": gini, "ndcg@20": ndcg})
    claim = _claim([{"kind": "frontier", "datasets": ["toy"], "x": "gini@20", "y": "ndcg@20", "methods": ["ex_*"],
                     "baselines": ["rival_*"]}])
    v = judge_claim(claim, ctx(tmp_path, None))
    assert [r.status for r in v.results] == [AGAINST]
    assert v.verdict_class == INCONCLUSIVE and "descriptive, with no test" in v.verdict
