"""Tests for expected-number files and the paper-vs-ours scorecard (values checked by hand)."""

from __future__ import annotations

import datetime as dt
import contextlib
import importlib
import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from recrepro.paperlist import paper_keys
from recrepro.records import write_run_record
from recrepro.scorecard import (
    SCORECARD_COLUMNS,
    ExpectedFileError,
    ScorecardError,
    build_scorecard,
    expected_path,
    find_run_dirs,
    load_expected,
    parse_metric_key,
)

USERS = [0, 1, 2, 3, 4, 5, 6, 7]
# Per-user ndcg@20 of seed 0; mf beats random for 6 of 8 users, ties for one.
MF_USER_NDCG = [0.5, 0.4, 0.3, 0.0, 0.6, 0.2, 0.1, 0.3]
RANDOM_USER_NDCG = [0.1, 0.0, 0.3, 0.2, 0.0, 0.1, 0.0, 0.05]
TODAY = dt.date(2024, 5, 17)


def make_run(runs_root: Path, *, method: str, seed: int, overall: dict, strata: dict | None = None,
             per_user_ndcg: list[float] | None = None, dataset: str = "toy", split: str = "s1",
             tier: str = "smoke", paper: str = "demo") -> Path:
    run_dir = runs_root / dataset / split / method / f"seed{seed}"
    per_user = pd.DataFrame({"user": USERS})
    if per_user_ndcg is not None:
        per_user["ndcg@20"] = per_user_ndcg
    write_run_record(
        run_dir, overall=overall, strata=strata or {}, per_user=per_user,
        counts={"n_users_evaluated": len(USERS), "n_users_skipped_no_targets": 0},
        meta={"dataset": dataset, "split": split, "method": method, "tier": tier, "paper": paper},
        config_slice={"method": method}, split_manifest=None, seed=seed, device="cpu", wall_seconds=1.0,
    )
    return run_dir


@pytest.fixture()
def fake_runs(tmp_path: Path) -> list[Path]:
    """mf and random, two seeds each, on toy/s1; per-user files only for seed 0 of both."""
    root = tmp_path / "results" / "smoke" / "demo" / "runs"
    make_run(root, method="mf", seed=0, overall={"ndcg@20": 0.30, "recall_lgcn@20": 0.20, "hr@10": 0.5},
             strata={"popular": {"ndcg@20": 0.40}}, per_user_ndcg=MF_USER_NDCG)
    make_run(root, method="mf", seed=1, overall={"ndcg@20": 0.34, "recall_lgcn@20": 0.22, "hr@10": 0.6},
             strata={"popular": {"ndcg@20": 0.50}})
    make_run(root, method="random", seed=0, overall={"ndcg@20": 0.10, "recall_lgcn@20": 0.05, "hr@10": 0.1},
             strata={"popular": {"ndcg@20": 0.12}}, per_user_ndcg=RANDOM_USER_NDCG)
    make_run(root, method="random", seed=1, overall={"ndcg@20": 0.13, "recall_lgcn@20": 0.04, "hr@10": 0.2},
             strata={"popular": {"ndcg@20": 0.10}})
    return find_run_dirs(root)


EXPECTED_YAML = """\
paper: demo
reference: "Demo et al. 2024"
entries:
  - source: "Table 2"
    dataset: toy
    split: s1
    method: mf
    metric: ndcg@20
    published: 0.31
    kind: printed
    tolerance: 0.015
    baseline: random
  - source: "Table 2"
    dataset: toy
    split: s1
    method: mf
    metric: recall_lgcn@20
    published: 0.25
    kind: printed
    tolerance: 0.01
    deviation: toy-split-differs
  - source: "Table 3"
    dataset: toy
    method: mf
    metric: hr@10
    published: 0.5
    kind: printed
    tolerance: 0.1
    tolerance_kind: rel
  - source: "Fig. 2"
    dataset: toy
    split: s1
    method: mf
    metric: "ndcg@20[popular]"
    published: 0.45
    kind: printed
    tolerance: 0.01
    deviation: not-in-the-doc
  - source: "Table 2"
    dataset: toy
    split: s1
    method: lightgcn
    metric: ndcg@20
    published: 0.40
    kind: printed
    tolerance: 0.01
  - source: "anchor"
    dataset: toy
    split: s1
    method: mf
    metric: ndcg@20
    published: null
    kind: anchor
    note: "anchor; value from our own run, not a paper"
"""


def write_expected(tmp_path: Path, text: str = EXPECTED_YAML) -> Path:
    path = tmp_path / "demo.yaml"
    path.write_text(text)
    return path


def run_scorecard(tmp_path: Path, run_dirs: list[Path], tier: str = "smoke", expected: Path | None = None,
                  strong: Path | None = None):
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "deviations.md").write_text("# Deviations\n\n## Toy split differs\n\nBecause.\n")
    out_dir = tmp_path / "results" / tier / "demo"
    # Like the pipeline: run from the project root with the repo-relative docs path.
    with contextlib.chdir(tmp_path):
        card = build_scorecard(
            "demo", tier, expected or write_expected(tmp_path), run_dirs,
            out_dir / "scorecard.md", out_dir / "scorecard.csv", deviations_doc="docs/deviations.md",
            generated_on=TODAY, strong_baselines=strong,
        )
    csv = pd.read_csv(out_dir / "scorecard.csv", keep_default_na=False, na_values=[""])
    md = (out_dir / "scorecard.md").read_text()
    return card, csv, md


def test_csv_columns_and_values_by_hand(tmp_path, fake_runs):
    card, csv, _ = run_scorecard(tmp_path, fake_runs)
    assert tuple(csv.columns) == SCORECARD_COLUMNS
    assert len(csv) == 6
    by_key = {(r.source, r.method, r.metric): r for r in csv.itertuples(index=False)}

    ndcg = by_key[("Table 2", "mf", "ndcg@20")]
    assert ndcg.paper == "demo" and ndcg.dataset == "toy"
    assert ndcg.n_seeds == 2
    assert ndcg.ours_mean == pytest.approx(0.32)  # (0.30 + 0.34) / 2
    assert ndcg.ours_sd == pytest.approx(math.sqrt(2 * 0.02**2 / 1))  # ddof=1
    assert ndcg.diff == pytest.approx(0.01)  # 0.32 - 0.31
    assert ndcg.verdict == "within"  # 0.01 <= 0.015

    recall = by_key[("Table 2", "mf", "recall_lgcn@20")]
    assert recall.ours_mean == pytest.approx(0.21)
    assert recall.diff == pytest.approx(-0.04)
    assert recall.verdict == "deviates"  # 0.04 > 0.01
    assert recall.note == "deviation: docs/deviations.md#toy-split-differs"
    assert "anchor missing" not in recall.note

    # Relative tolerance 10% of 0.5 = 0.05; diff 0.55 - 0.5 = 0.05 exactly on the boundary.
    hit_rate = by_key[("Table 3", "mf", "hr@10")]
    assert hit_rate.tolerance == pytest.approx(0.05)
    assert hit_rate.diff == pytest.approx(0.05)
    assert hit_rate.verdict == "within"
    assert "tolerance 0.1 x |published|" in hit_rate.note

    popular = by_key[("Fig. 2", "mf", "ndcg@20[popular]")]
    assert popular.ours_mean == pytest.approx(0.45) and popular.verdict == "within"
    assert popular.ours_sd == pytest.approx(math.sqrt(2 * 0.05**2))
    assert "anchor missing" in popular.note

    not_run = by_key[("Table 2", "lightgcn", "ndcg@20")]
    assert not_run.verdict == "not_run" and not_run.n_seeds == 0
    assert math.isnan(not_run.ours_mean) and math.isnan(not_run.ours_sd) and math.isnan(not_run.diff)

    anchor = by_key[("anchor", "mf", "ndcg@20")]
    assert anchor.ours_mean == pytest.approx(0.32)
    assert math.isnan(anchor.published) and math.isnan(anchor.diff) and math.isnan(anchor.tolerance)
    assert isinstance(anchor.verdict, float) and math.isnan(anchor.verdict)  # empty cell: not judged
    assert "not judged" in anchor.note and "anchor; value from our own run" in anchor.note

    assert card.rows["verdict"].tolist() == csv["verdict"].fillna("").tolist()


def test_single_seed_has_blank_sd(tmp_path, fake_runs):
    one_seed = [d for d in fake_runs if d.name == "seed0"]
    _, csv, _ = run_scorecard(tmp_path, one_seed)
    ndcg = csv[(csv.source == "Table 2") & (csv.metric == "ndcg@20")].iloc[0]
    assert ndcg.n_seeds == 1 and ndcg.ours_mean == pytest.approx(0.30) and math.isnan(ndcg.ours_sd)
    assert ndcg["diff"] == pytest.approx(-0.01) and ndcg.verdict == "within"
    # One shared seed: no t-test over seeds, only the per-user Wilcoxon test.
    assert "paired t-test" not in ndcg.note
    assert "Wilcoxon signed-rank over 8 users (seed 0) vs random" in ndcg.note


def test_paired_tests_match_scipy(tmp_path, fake_runs):
    card, csv, md = run_scorecard(tmp_path, fake_runs)
    expected_t = stats.ttest_rel([0.30, 0.34], [0.10, 0.13])
    expected_w = stats.wilcoxon(MF_USER_NDCG, RANDOM_USER_NDCG)

    mf_tests = {t.kind: t for t in card.tests if t.method == "mf" and t.metric == "ndcg@20"}
    assert mf_tests["ttest_seeds"].p_value == pytest.approx(float(expected_t.pvalue), rel=1e-12)
    assert mf_tests["ttest_seeds"].n_pairs == 2
    assert mf_tests["ttest_seeds"].mean_diff == pytest.approx(0.205)
    assert mf_tests["wilcoxon_users"].p_value == pytest.approx(float(expected_w.pvalue), rel=1e-12)
    assert mf_tests["wilcoxon_users"].statistic == pytest.approx(float(expected_w.statistic))
    assert mf_tests["wilcoxon_users"].n_pairs == 8 and mf_tests["wilcoxon_users"].seed == 0

    note = csv[(csv.source == "Table 2") & (csv.metric == "ndcg@20")].iloc[0].note
    assert f"paired t-test over 2 seeds vs random: p={expected_t.pvalue:.3g}" in note
    assert f"Wilcoxon signed-rank over 8 users (seed 0) vs random: p={expected_w.pvalue:.3g}" in note
    # The md states which tests are used.
    assert "scipy.stats.ttest_rel" in md and "scipy.stats.wilcoxon" in md
    # Entries without a baseline get no test.
    assert "p=" not in csv[csv.metric == "recall_lgcn@20"].iloc[0].note


def test_markdown_header_smoke_and_deviation_link(tmp_path, fake_runs):
    _, _, md = run_scorecard(tmp_path, fake_runs)
    first_lines = md.splitlines()[:6]
    header = next(line for line in first_lines if line.startswith("paper:"))
    assert "paper: `demo`" in header and "tier: `smoke`" in header and "date: 2024-05-17" in header
    assert "commit:" in header
    assert "**These numbers come from synthetic smoke data and are NOT comparable to the published ones.**" in md
    # Link from results/smoke/demo/scorecard.md to docs/deviations.md, relative.
    assert "deviation: [docs/deviations.md#toy-split-differs](../../../docs/deviations.md#toy-split-differs) |" in md
    assert "| Table 2 | toy | s1 | mf | recall_lgcn@20 | 0.2500 | 0.0100 | 0.2100 |" in md
    assert "**deviates**" in md


def test_strong_baselines_block_shows_the_strongest_per_metric_in_its_direction(tmp_path, fake_runs):
    _, _, md = run_scorecard(tmp_path, fake_runs)
    assert "## Tuned simple baselines" not in md  # no table given: no block
    rows = [{"dataset": "toy", "split": "s1", "method": m, "settings": s, "budget": "", "metric": metric,
             "mean": v, "sd": 0.0, "n_seeds": n, "paper_method": "mf", "paper_mean": ours, "paper_n_seeds": 3,
             "p_value": p, "p_note": ""}
            for m, s, metric, v, n, ours, p in [
                ("ease", "lam=500", "ndcg@20", 0.30, 1, 0.25, 0.01), ("itemknn", "k=20", "ndcg@20", 0.20, 1, 0.25, 0.02),
                ("ease", "lam=500", "gini@20", 0.90, 1, 0.80, float("nan")),
                ("itemknn", "k=20", "gini@20", 0.70, 1, 0.80, float("nan"))]]
    table = tmp_path / "strong_baselines.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    _, _, md = run_scorecard(tmp_path, fake_runs, strong=table)
    block = md.split("## Tuned simple baselines")[1].split("## Our runs")[0]
    assert "| toy · s1 | ndcg@20 | `ease` (lam=500) | 0.3000 (1) | `mf` | 0.2500 (3) | -0.0500 | 0.0100 | the baseline |" in block
    # Gini: the lowest is the strongest, and the paper's method is ahead only below it
    assert "| toy · s1 | gini@20 | `itemknn` (k=20) | 0.7000 (1) | `mf` | 0.8000 (3) | 0.1000 | — | the baseline |" in block
    assert "[tables/strong_baselines.md](tables/strong_baselines.md)" in block


def test_full_tier_has_no_smoke_warning(tmp_path):
    root = tmp_path / "results" / "full" / "demo" / "runs"
    run = make_run(root, method="mf", seed=0, overall={"ndcg@20": 0.3}, tier="full")
    _, _, md = run_scorecard(tmp_path, [run], tier="full")
    assert "tier: `full`" in md
    assert "NOT comparable" not in md


def test_unmatched_runs_table_with_default_baseline(tmp_path):
    root = tmp_path / "results" / "smoke" / "baselines" / "runs"
    mostpop_seeds = [0.21, 0.25, 0.20]
    random_seeds = [0.02, 0.03, 0.025]
    runs = []
    for seed, (pop, rnd) in enumerate(zip(mostpop_seeds, random_seeds)):
        runs.append(make_run(root, method="mostpop", seed=seed, overall={"ndcg@20": pop}, dataset="synthetic",
                             split="random_80_20", paper="baselines"))
        runs.append(make_run(root, method="random", seed=seed, overall={"ndcg@20": rnd}, dataset="synthetic",
                             split="random_80_20", paper="baselines"))
    out = tmp_path / "results" / "smoke" / "baselines"
    card = build_scorecard("baselines", "smoke", expected_path("baselines"), runs, out / "scorecard.md",
                           out / "scorecard.csv", deviations_doc=tmp_path / "docs" / "deviations.md",
                           generated_on=TODAY)
    # The packaged anchors are for gowalla/ml-100k: nothing ran there in smoke.
    published = card.rows[~card.rows["source"].str.startswith("smoke check")]
    assert published["verdict"].tolist() == ["not_run"] * 4
    # the smoke checks follow them: both baselines ran (the orderings need splits this test lacks)
    ran = card.rows[card.rows["metric"] == "(all finite)"]
    assert ran["method"].tolist() == ["mostpop", "random"] and set(ran["verdict"]) == {"pass"}
    unmatched = card.unmatched.set_index("method")
    assert unmatched.loc["mostpop", "mean"] == pytest.approx(sum(mostpop_seeds) / 3)
    assert unmatched.loc["mostpop", "sd"] == pytest.approx(pd.Series(mostpop_seeds).std(ddof=1))
    assert unmatched.loc["mostpop", "n_seeds"] == 3
    expected_p = stats.ttest_rel(mostpop_seeds, random_seeds).pvalue
    assert f"paired t-test over 3 seeds vs random: p={expected_p:.3g}" in unmatched.loc["mostpop", "paired_test"]
    assert unmatched.loc["random", "paired_test"] == ""
    md = (out / "scorecard.md").read_text()
    assert "## Our runs without a published value" in md
    assert "| mostpop | synthetic | random_80_20 | ndcg@20 | 0.2200 |" in md


def test_unmatched_runs_list_a_stratum_metric_once(tmp_path):
    """A record stores a stratum's NDCG twice (flat among overall, bracketed among strata): listed once."""
    from recrepro.scorecard.match import stratum_alias

    assert stratum_alias("ndcg_popular@20") == "ndcg@20[popular]" and stratum_alias("ndcg@20") is None
    root = tmp_path / "results" / "smoke" / "demo" / "runs"
    runs = [make_run(root, method="m", seed=0, overall={"ndcg@20": 0.3, "ndcg_popular@20": 0.2, "recall_lgcn@20": 0.4},
                     strata={"popular": {"ndcg@20": 0.2}}),
            make_run(root, method="flat", seed=0, overall={"ndcg_popular@20": 0.1})]
    card, _, md = run_scorecard(tmp_path, runs, expected=write_expected(tmp_path, "paper: demo\nentries: []\n"))
    listed = sorted(zip(card.unmatched["method"], card.unmatched["metric"]))
    # the bracketed name stays; a flat name stays where it has no bracketed twin (or is no stratum)
    assert listed == [("flat", "ndcg_popular@20"), ("m", "ndcg@20"), ("m", "ndcg@20[popular]"),
                      ("m", "recall_lgcn@20")]
    assert "| m | toy | s1 | ndcg_popular@20 |" not in md and "| m | toy | s1 | ndcg@20[popular] |" in md


def test_errors_for_mismatched_inputs(tmp_path, fake_runs):
    with pytest.raises(ScorecardError, match="not 'other'"):
        build_scorecard("other", "smoke", write_expected(tmp_path), fake_runs,
                        tmp_path / "o.md", tmp_path / "o.csv")
    with pytest.raises(ScorecardError, match="tier"):
        build_scorecard("demo", "full", write_expected(tmp_path), fake_runs, tmp_path / "o.md", tmp_path / "o.csv")
    # hr@10 has no split in the expected file: a second split for mf makes it ambiguous.
    extra = make_run(tmp_path / "more", method="mf", seed=0, overall={"hr@10": 0.5}, split="s2")
    with pytest.raises(ScorecardError, match="no split"):
        build_scorecard("demo", "smoke", write_expected(tmp_path), [*fake_runs, extra],
                        tmp_path / "o.md", tmp_path / "o.csv")
    duplicate = make_run(tmp_path / "dup", method="mf", seed=0, overall={"ndcg@20": 0.1})
    with pytest.raises(ScorecardError, match="both"):
        build_scorecard("demo", "smoke", write_expected(tmp_path), [*fake_runs, duplicate],
                        tmp_path / "o.md", tmp_path / "o.csv")
    assert not (tmp_path / "o.md").exists() and not (tmp_path / "o.csv").exists()


def _entry(**fields) -> str:
    base = {"source": '"Table 1"', "dataset": "toy", "method": "mf", "metric": "ndcg@20",
            "published": "0.3", "tolerance": "0.01", "kind": "printed"}
    base.update(fields)
    return "\n".join(f"    {key}: {value}" if i else f"  - {key}: {value}"
                     for i, (key, value) in enumerate((k, v) for k, v in base.items() if v is not None))


@pytest.mark.parametrize(
    ("bad_entry", "message"),
    [
        (_entry(tolerance=None), "needs a tolerance"),
        (_entry(tolerence="0.01"), r"unknown keys \['tolerence'\]"),
        (_entry(published=None), r"missing keys \['published'\]"),
        (_entry(kind=None), r"missing keys \['kind'\]"),
        (_entry(kind="paper"), "kind must be one of"),
        (_entry(published='"high"'), "published must be a number"),
        (_entry(tolerance="1e-4"), "write e.g. 1.0e-4"),
        (_entry(tolerance="-0.1"), "tolerance must be >= 0"),
        (_entry(tolerance_kind="percent"), "tolerance_kind"),
        (_entry(metric='"NDCG@20"'), "metric key"),
        (_entry(metric='"ndcg@20[popular"'), "metric key"),
        (_entry(deviation='"See below!"'), "not a markdown anchor"),
        (_entry(baseline="mf"), "baseline must differ"),
        (_entry(published=".nan"), "finite"),
        (_entry(source='"Table 1"\n    source: "Table 9"'), "duplicate key 'source'"),
        (_entry(alternative="{method: mflinear}"), r"alternative: missing keys \['label'\]"),
        (_entry(alternative="{label: x}"), r"alternative: missing keys \['method'\]"),
        (_entry(alternative="{method: mflinear, label: x, seeds: 1}"), r"alternative: unknown keys \['seeds'\]"),
        (_entry(alternative="{method: mf, label: x}"), "alternative method must differ from method"),
        (_entry(alternative='{method: "mf linear", label: x}'), "alternative: method 'mf linear' is not a plain name"),
        (_entry(alternative='{method: mflinear, label: " "}'), "alternative: label must be a non-empty string"),
        (_entry(alternative="{method: mflinear, label: 3}"), "alternative: label must be a non-empty string"),
        (_entry(alternative="mflinear"), "alternative: must be a mapping"),
    ],
)
def test_bad_expected_entry_names_file_and_index(tmp_path, bad_entry, message):
    text = "paper: demo\nentries:\n" + _entry() + "\n" + bad_entry + "\n"
    path = tmp_path / "demo.yaml"
    path.write_text(text)
    with pytest.raises(ExpectedFileError, match=message) as caught:
        load_expected(path)
    text_of_error = str(caught.value)
    assert str(path) in text_of_error
    if "duplicate key" not in message:  # YAML-level errors give the line instead
        assert "entries[1]" in text_of_error
    else:
        assert "line" in text_of_error


def test_bad_expected_file_level(tmp_path):
    path = tmp_path / "x.yaml"
    for text, message in [
        ("- source: x\n", "top level must be a mapping"),
        ("entries: []\n", "'paper'"),
        ("paper: demo\nentries: {}\n", "'entries' must be a list"),
        ("paper: demo\nentries: []\nextra: 1\n", "unknown top-level keys"),
        ("paper: demo\nentries: [\n", "not valid YAML"),
        ("paper: demo\nentries:\n" + _entry() + "\n" + _entry() + "\n", r"entries\[1\].*duplicates entries\[0\]"),
    ]:
        path.write_text(text)
        with pytest.raises(ExpectedFileError, match=message) as caught:
            load_expected(path)
        assert str(path) in str(caught.value)


def test_valid_file_loads_with_defaults(tmp_path):
    expected = load_expected(write_expected(tmp_path))
    assert expected.paper == "demo" and expected.reference == "Demo et al. 2024"
    assert len(expected.entries) == 6
    ndcg = expected.entries[0]
    assert (ndcg.published, ndcg.tolerance, ndcg.tolerance_kind, ndcg.baseline) == (0.31, 0.015, "abs", "random")
    assert expected.entries[2].split is None
    assert expected.entries[2].absolute_tolerance() == pytest.approx(0.05)
    assert expected.entries[5].published is None and expected.entries[5].absolute_tolerance() is None


def test_packaged_baselines_file():
    expected = load_expected(expected_path("baselines"))
    assert expected.paper == "baselines"
    cells = {(e.dataset, e.split, e.method, e.metric) for e in expected.entries}
    assert cells == {
        ("gowalla", "lightgcn_given", "mostpop", "recall_lgcn@20"),
        ("gowalla", "lightgcn_given", "mostpop", "ndcg@20"),
        ("ml-100k", "leave_one_out", "mostpop", "hr@10"),
        ("ml-100k", "leave_one_out", "mostpop", "ndcg@10"),
    }
    published = {e.metric: e.published for e in expected.entries}
    # the values pinned by tests/test_realdata_baselines.py
    assert published == {"recall_lgcn@20": 0.041631, "ndcg@20": 0.031690, "hr@10": 0.411453, "ndcg@10": 0.226897}
    assert all("anchor" in e.note and e.tolerance == 1.0e-4 for e in expected.entries)


def test_parse_metric_key():
    assert parse_metric_key("ndcg@20[popular]") == ("ndcg@20", "popular")
    assert parse_metric_key("auc") == ("auc", None)
    assert parse_metric_key("recall_lgcn@20") == ("recall_lgcn@20", None)
    with pytest.raises(ValueError):
        parse_metric_key("ndcg@")


def test_outputs_are_reproducible(tmp_path, fake_runs):
    run_scorecard(tmp_path, fake_runs)
    out = tmp_path / "results" / "smoke" / "demo"
    first = {name: (out / name).read_bytes() for name in ("scorecard.csv", "scorecard.md")}
    run_scorecard(tmp_path, list(reversed(fake_runs)))
    assert first == {name: (out / name).read_bytes() for name in ("scorecard.csv", "scorecard.md")}
    assert first["scorecard.csv"].decode().startswith(",".join(SCORECARD_COLUMNS) + "\n")


# ------------------------------------------------------------------ smoke checks (issue 26)

SMOKE_YAML = EXPECTED_YAML + """\
smoke_checks:
  - check: ran
    methods: [mf, random, lightgcn]
    claim: "every method ran"
  - check: greater
    dataset: toy
    metric: ndcg@20
    method: mf
    than: random
    claim: "mf beats random"
    source: "Table 2"
  - check: less
    dataset: toy
    split: s1
    metric: "ndcg@20[popular]"
    method: mf
    than: random
    claim: "mf puts less on popular items"
  - check: greater
    dataset: toy
    metric: hr@10
    method: random
    value: 0.1
    claim: "random is above chance"
figure_points:
  - {figure: fig4, dataset: toy, series: mf, x: 249, y: 0.1176, source: "text"}
"""


def test_smoke_checks_replace_not_run_rows_on_the_smoke_page(tmp_path, fake_runs):
    card, csv, md = run_scorecard(tmp_path, fake_runs, expected=write_expected(tmp_path, SMOKE_YAML))
    checks = csv[csv.source.str.startswith("smoke check")]
    # one csv row per method of the 'ran' check, one per ordering
    assert checks.method.tolist() == ["mf", "random", "lightgcn", "mf", "mf", "random"]
    assert checks.verdict.tolist() == ["pass", "pass", "fail", "pass", "fail", "pass"]
    ran_mf = checks.iloc[0]
    assert ran_mf.n_seeds == 2 and "2 run(s)" in ran_mf.note and "all finite" in ran_mf.note
    assert "no run" in checks.iloc[2].note
    greater = checks.iloc[3]
    assert greater.ours_mean == pytest.approx(0.32) and greater["diff"] == pytest.approx(0.32 - 0.115)
    assert greater.source == "smoke check (Table 2)"
    less = checks.iloc[4]  # popular share: mf 0.45 is not below random 0.11
    assert less.metric == "ndcg@20[popular]" and less["diff"] == pytest.approx(0.45 - 0.11)
    assert "no" in less.note.split(":")[-1]
    # random hr@10 mean 0.15 > 0.1
    assert checks.iloc[5]["diff"] == pytest.approx(0.05)
    assert card.rows["verdict"].fillna("").tolist() == csv["verdict"].fillna("").tolist()
    # the published rows are all still in the csv, not_run included
    assert (csv.verdict == "not_run").sum() == 1
    # the page: smoke checks, one line instead of the not_run row, a pointer to the paper tier
    assert "## Smoke checks" in md
    assert "| ran | every method ran | toy | mf (2), random (2), lightgcn (0) |" in md
    assert "**fail**: lightgcn: no run" in md
    assert "| lightgcn |" not in md.split("## Published vs ours")[1].split("## Our runs")[0]
    assert "1 published value(s) are on the papers' datasets" in md
    assert "[results/paper/demo/scorecard.md](../../paper/demo/scorecard.md)" in md
    assert md.index("## Smoke checks") < md.index("## Published vs ours")


def test_smoke_check_orderings_can_fail(tmp_path, fake_runs):
    text = SMOKE_YAML.replace("    method: mf\n    than: random\n    claim: \"mf beats random\"",
                              "    method: random\n    than: mf\n    claim: \"random beats mf\"")
    _, csv, md = run_scorecard(tmp_path, fake_runs, expected=write_expected(tmp_path, text))
    row = csv[csv.note.str.startswith("random beats mf")].iloc[0]
    assert row.verdict == "fail" and row["diff"] < 0
    assert "| **fail** |" in md


def test_smoke_checks_only_on_the_smoke_tier(tmp_path):
    root = tmp_path / "results" / "full" / "demo" / "runs"
    run = make_run(root, method="mf", seed=0, overall={"ndcg@20": 0.3}, tier="full")
    _, csv, md = run_scorecard(tmp_path, [run], tier="full", expected=write_expected(tmp_path, SMOKE_YAML))
    assert not csv.source.str.startswith("smoke check").any()
    assert "Smoke checks" not in md and "results/paper/demo" not in md
    assert "| Table 2 | toy | s1 | lightgcn | ndcg@20 |" in md  # not_run rows stay on other tiers


def test_smoke_checks_and_figure_points_are_validated(tmp_path):
    expected = load_expected(write_expected(tmp_path, SMOKE_YAML))
    assert [c.check for c in expected.smoke_checks] == ["ran", "greater", "less", "greater"]
    assert expected.smoke_checks[3].value == 0.1 and expected.smoke_checks[1].than == "random"
    (point,) = expected.figure_points
    assert (point.figure, point.x, point.y) == ("fig4", 249.0, 0.1176)
    base = "paper: demo\nentries: []\nsmoke_checks:\n"
    for check, message in [
        ("  - {check: ran, claim: x}", "needs methods"),
        ("  - {check: ran, methods: [mf], claim: x, metric: auc}", "takes no"),
        ("  - {check: bigger, claim: x}", "check must be one of"),
        ("  - {check: greater, claim: x, dataset: toy, metric: auc, method: mf}", "either than"),
        ("  - {check: greater, claim: x, dataset: toy, metric: auc, method: mf, than: a, value: 1.0}", "either than"),
        ("  - {check: greater, dataset: toy, metric: auc, method: mf, than: a}", "claim"),
        ("  - {check: less, claim: x, dataset: toy, metric: AUC, method: mf, than: a}", "metric key"),
        ("  - {check: less, claim: x, dataset: toy, metric: auc, method: mf, than: mf}", "differ"),
        ("  - {check: less, claim: x, dataset: toy, metric: auc, method: mf, than: a, typo: 1}", "unknown keys"),
    ]:
        path = tmp_path / "bad.yaml"
        path.write_text(base + check + "\n")
        with pytest.raises(ExpectedFileError, match=message) as caught:
            load_expected(path)
        assert "smoke_checks[0]" in str(caught.value)
    path.write_text("paper: demo\nentries: []\nfigure_points:\n  - {figure: f, dataset: d, series: s, x: 1}\n")
    with pytest.raises(ExpectedFileError, match=r"figure_points\[0\].*missing keys"):
        load_expected(path)


@pytest.mark.parametrize("paper", ["baselines", *paper_keys()])
def test_every_paper_has_smoke_checks_for_every_smoke_method(paper, repo_root):
    """The 'ran' check names exactly the methods the smoke tier gives the paper's scorecard."""
    import yaml

    expected = load_expected(expected_path(paper))
    ran = [c for c in expected.smoke_checks if c.check == "ran"]
    orderings = [c for c in expected.smoke_checks if c.check != "ran"]
    assert len(ran) == 1 and orderings, "a 'ran' check and at least one ordering"
    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    if paper == "baselines":
        methods = set(config["tiers"]["smoke"]["baselines"])
    else:  # each paper's rules module says which methods its smoke tier runs
        methods = importlib.import_module(f"recrepro.papers.{paper}.rules").smoke_methods(config)
    assert set(ran[0].methods) == methods
    assert all(c.method in methods and (c.than is None or c.than in methods) for c in orderings)


# ------------------------------------------------------------------ alternatives

ALT_LABEL = "official code's form"
# Three entries of EXPECTED_YAML name an alternative: mflinear (ran: 2 seeds of ndcg@20, 1 of hr@10)
# or ghost (never ran); a fourth entry, without a split, is of a method that did not run.
_MFLINEAR = f"    alternative: {{method: mflinear, label: \"{ALT_LABEL}\"}}\n"
ALT_YAML = (
    EXPECTED_YAML
    .replace("    baseline: random\n", "    baseline: random\n" + _MFLINEAR)
    .replace("    deviation: toy-split-differs\n",
             "    deviation: toy-split-differs\n    alternative: {method: ghost, label: never ran}\n")
    .replace("    tolerance_kind: rel\n", "    tolerance_kind: rel\n" + _MFLINEAR)
    + f"""\
  - source: "Table 4"
    dataset: toy
    method: lightgcn
    metric: ndcg@20
    published: 0.40
    kind: printed
    tolerance: 0.01
    alternative: {{method: mflinear, label: "{ALT_LABEL}"}}
"""
)
ALT_COLUMNS = ["alt_method", "alt_label", "alt_mean", "alt_sd", "alt_n_seeds"]


@pytest.fixture()
def runs_with_alternative(tmp_path: Path, fake_runs: list[Path]) -> list[Path]:
    """fake_runs plus mflinear on toy/s1: ndcg@20 0.36 and 0.40 (seeds 0, 1), hr@10 0.7 on seed 0 only."""
    root = tmp_path / "results" / "smoke" / "demo" / "runs"
    make_run(root, method="mflinear", seed=0, overall={"ndcg@20": 0.36, "hr@10": 0.7})
    make_run(root, method="mflinear", seed=1, overall={"ndcg@20": 0.40})
    return find_run_dirs(root)


def test_alternative_is_loaded(tmp_path):
    entries = load_expected(write_expected(tmp_path, ALT_YAML)).entries
    assert [(e.alternative.method, e.alternative.label) if e.alternative else None for e in entries] == [
        ("mflinear", ALT_LABEL), ("ghost", "never ran"), ("mflinear", ALT_LABEL), None, None, None,
        ("mflinear", ALT_LABEL),
    ]


def test_alternative_columns_and_note(tmp_path, runs_with_alternative):
    card, csv, md = run_scorecard(tmp_path, runs_with_alternative, expected=write_expected(tmp_path, ALT_YAML))
    assert tuple(csv.columns) == SCORECARD_COLUMNS and list(csv.columns[-5:]) == ALT_COLUMNS
    by_key = {(r.source, r.method, r.metric): r for r in csv.itertuples(index=False)}

    ndcg = by_key[("Table 2", "mf", "ndcg@20")]  # two seeds: mean, sd (ddof=1), as ours_mean is computed
    assert (ndcg.alt_method, ndcg.alt_label, ndcg.alt_n_seeds) == ("mflinear", ALT_LABEL, 2)
    assert ndcg.alt_mean == pytest.approx(0.38) and ndcg.alt_sd == pytest.approx(math.sqrt(2 * 0.02**2))
    phrase = f"alternative — {ALT_LABEL} (`mflinear`, 2 seeds): 0.3800 ± 0.0283"
    assert ndcg.note.startswith(phrase + "; paired t-test over 2 seeds vs random")
    assert f"| {phrase}; paired t-test over 2 seeds vs random: p=" in md

    hit_rate = by_key[("Table 3", "mf", "hr@10")]  # the entry gives no split: the cell's (s1); one seed, no sd
    assert (hit_rate.alt_n_seeds, hit_rate.alt_mean) == (1, pytest.approx(0.7)) and math.isnan(hit_rate.alt_sd)
    assert hit_rate.note == f"tolerance 0.1 x |published|; alternative — {ALT_LABEL} (`mflinear`, 1 seed): 0.7000"

    recall = by_key[("Table 2", "mf", "recall_lgcn@20")]  # named, never ran: method and label, no values
    assert (recall.alt_method, recall.alt_label) == ("ghost", "never ran")
    assert math.isnan(recall.alt_mean) and math.isnan(recall.alt_sd) and math.isnan(recall.alt_n_seeds)
    assert recall.note == "deviation: docs/deviations.md#toy-split-differs"

    for key in [("Fig. 2", "mf", "ndcg@20[popular]"), ("anchor", "mf", "ndcg@20")]:  # no alternative
        row = by_key[key]
        assert all(math.isnan(getattr(row, column)) for column in ALT_COLUMNS), key

    # a cell without a split whose method has not run: the alternative's one split
    fallback = by_key[("Table 4", "lightgcn", "ndcg@20")]
    assert fallback.verdict == "not_run" and fallback.alt_n_seeds == 2 and fallback.alt_mean == pytest.approx(0.38)
    # the alternative's runs still appear among the runs without a published value
    assert set(card.unmatched.loc[card.unmatched["method"] == "mflinear", "metric"]) == {"ndcg@20", "hr@10"}
    # the csv writes the seed count as an integer, blank where none ran
    line = next(x for x in (tmp_path / "results/smoke/demo/scorecard.csv").read_text().splitlines()
                if x.startswith("demo,Table 3,"))
    assert line.endswith(f",mflinear,{ALT_LABEL},0.7,,1")
    # the page says what an alternative is
    assert "names an `alternative`" in md


def test_alternative_changes_no_verdict_row_or_count(tmp_path, runs_with_alternative):
    """The same runs with and without alternatives: same verdicts, diffs and seeds; rows without one
    (or whose alternative has not run) are the same bytes on the page."""
    plain_dir, alt_dir = tmp_path / "plain", tmp_path / "alt"
    plain_dir.mkdir(), alt_dir.mkdir()
    _, plain_csv, plain_md = run_scorecard(plain_dir, runs_with_alternative, expected=write_expected(plain_dir))
    _, alt_csv, alt_md = run_scorecard(alt_dir, runs_with_alternative, expected=write_expected(alt_dir, ALT_YAML))
    judged = [c for c in SCORECARD_COLUMNS if c not in ("note", *ALT_COLUMNS)]
    pd.testing.assert_frame_equal(alt_csv.iloc[:6][judged], plain_csv[judged])
    assert (alt_csv.iloc[:6].note != plain_csv.note).tolist() == [True, False, True, False, False, False]
    assert alt_csv.verdict.fillna("").tolist()[:6] == ["within", "deviates", "within", "within", "not_run", ""]

    def table_rows(md: str) -> list[str]:
        table = md.split("## Published vs ours")[1].split("## Our runs")[0]
        return [x for x in table.splitlines() if x.startswith("| ")]

    plain_rows, alt_rows = table_rows(plain_md), table_rows(alt_md)
    assert len(plain_rows) == 1 + 5 and len(alt_rows) == 1 + 5  # header + the rows that ran (smoke hides not_run)
    assert [a == p for a, p in zip(alt_rows, plain_rows)] == [True, False, True, False, True, True]
    assert "alternative" not in plain_md


def _prism_runs(root: Path, values: dict[str, float]) -> list[Path]:
    """Paper-tier prism runs on gowalla/random_ratio, seed 123, with the given test NDCG@20."""
    for method, value in values.items():
        make_run(root, method=method, seed=123, overall={"ndcg@20": value}, dataset="gowalla", split="random_ratio",
                 tier="paper", paper="prism")
    return find_run_dirs(root)


def test_packaged_prism_rows_show_the_linear_towers_and_keep_their_counts(tmp_path):
    """prism.yaml's NL-MF rows (the PRISM column: the pick over the learning rates, ``_tunedprism``) name
    nlmflinear_<loss>_prism; the summary counts do not see it."""
    import re

    from recrepro.scorecard import summarise_scorecards

    expected = load_expected(expected_path("prism"))
    named = {(e.dataset, e.method): e.alternative for e in expected.entries if e.alternative}
    nlmf = [e for e in expected.entries if re.fullmatch(r"nlmf_(ssm|directau|mawu)_(tunedprism|tunedwd)", e.method)]
    assert len(nlmf) == 24 and len(named) == 24
    for e in nlmf:
        loss, column = e.method.split("_")[1:]
        label = "official code's linear towers" + ("" if column == "tunedprism" else ", PRISM column")
        assert (e.alternative.method, e.alternative.label) == (f"nlmflinear_{loss}_prism", label)

    runs = _prism_runs(tmp_path / "runs", {"nlmf_directau_tunedprism": 0.0801, "nlmflinear_directau_prism": 0.1162})
    plain_yaml = tmp_path / "prism.yaml"
    plain_yaml.write_text(re.sub(r"\n    alternative: .*", "", expected.path.read_text()))
    assert not any(e.alternative for e in load_expected(plain_yaml).entries)
    counts = {}
    for name, path in [("alt", expected.path), ("plain", plain_yaml)]:
        out = tmp_path / name / "prism"
        build_scorecard("prism", "paper", path, runs, out / "scorecard.md", out / "scorecard.csv",
                        deviations_doc=tmp_path / "deviations.md", generated_on=TODAY, seeds_required=3)
        counts[name] = summarise_scorecards(tmp_path / name, {"gowalla": "mirror"}, papers=["prism"])
    published = sum(e.published is not None for e in expected.entries)
    no_claims = {"supported": 0, "contradicted": 0, "mixed": 0, "inconclusive": 0, "not_testable_here": 0,
                 "provisional": 0}
    assert counts["alt"] == counts["plain"] == {"published": published, "reachable": 12, "run": 1,
                                                "full_budget_all_seeds": 0, "within_tolerance": 0, "capped": 1,
                                                "printed": published, "printed_reachable": 12, "printed_run": 1,
                                                "printed_within_tolerance": 0, "other_targets": 0,
                                                "claims": no_claims}
    md = (tmp_path / "alt" / "prism" / "scorecard.md").read_text()
    row = next(x for x in md.splitlines() if x.startswith("| Table 1 | gowalla | random_ratio | nlmf_directau_tunedprism |"))
    assert row.endswith("; alternative — official code's linear towers (`nlmflinear_directau_prism`, 1 seed): 0.1162 |")
    assert "| 0.1105 | 0.0055 | 0.0801 |  | 1 | -0.0304 | **deviates** |" in row


def test_reference_page_shows_the_alternative_in_the_last_column(tmp_path):
    import json

    from recrepro.reporting.front_page import reference_readme

    results = tmp_path / "results" / "paper"
    runs = _prism_runs(results / "prism" / "runs", {"nlmf_directau_tunedprism": 0.0801,
                                                    "nlmflinear_directau_prism": 0.1162})
    build_scorecard("prism", "paper", expected_path("prism"), runs, results / "prism" / "scorecard.md",
                    results / "prism" / "scorecard.csv", deviations_doc=tmp_path / "docs" / "deviations.md",
                    generated_on=TODAY, seeds_required=3)
    (results / "datasets.json").write_text(json.dumps({"datasets": {"gowalla": "mirror"}}))
    text = reference_readme(results, results / "README.md", papers=["prism"])
    row = ("| gowalla | `nlmf_directau_tunedprism` | `ndcg@20` | 0.1105 | 0.0801 (1/3 seeds) | -0.0304 | **deviates** | "
           "1 of 3 seeds; [deviation: prism-nlmf-relu](../../docs/deviations.md#prism-nlmf-relu); "
           "alternative — official code's linear towers (`nlmflinear_directau_prism`, 1 seed): 0.1162 |")
    assert row in text.splitlines()
    assert text.count("alternative —") == 1  # the tuned-wd row has not run; the linear run has no published row


def test_reference_page_names_the_figures_it_could_not_draw(tmp_path):
    import json

    from recrepro.reporting.front_page import reference_readme, undrawn_figures

    results = tmp_path / "results" / "paper"
    (results / "prism" / "figures").mkdir(parents=True)
    (results / "prism" / "figures" / "fig1_weight_decay_gowalla.png").write_bytes(b"png")
    (results / "datasets.json").write_text(json.dumps({"datasets": {"gowalla": "mirror", "ml-1m": "missing",
                                                                     "yelp2018": "missing"}}))
    figures = results / "prism" / "figures"
    expected = [figures / "fig11_nlmf_gowalla.pdf", figures / "fig1_weight_decay_gowalla.pdf",
                figures / "fig8_lightgcn_gowalla.pdf", figures / "fig1_weight_decay_ml-1m.pdf",
                figures / "fig8_lightgcn_ml-1m.pdf", figures / "fig1_weight_decay_yelp2018.pdf",
                results / "lrs" / "figures" / "fig3_iterations.pdf", tmp_path / "elsewhere" / "x.pdf"]
    # fig1 on gowalla is drawn (its PNG); the others are not, in the paper's order; a path outside results is ignored
    assert undrawn_figures(results, expected) == {
        "prism": ["fig1_weight_decay_ml-1m", "fig1_weight_decay_yelp2018", "fig8_lightgcn_gowalla",
                  "fig8_lightgcn_ml-1m", "fig11_nlmf_gowalla"],
        "lrs": ["fig3_iterations"]}
    text = reference_readme(results, results / "README.md", papers=["prism"], expected_figures=expected)
    assert "![prism: fig1_weight_decay_gowalla](prism/figures/fig1_weight_decay_gowalla.png)" in text
    assert any(line.startswith("Figures not drawn: no data here for ml-1m (2 figures), yelp2018 (1 figure); "
                               "not run or not drawn yet: `fig8_lightgcn_gowalla`, `fig11_nlmf_gowalla`. A figure")
               for line in text.splitlines())
    assert "fig3_iterations" not in text  # lrs is not on this page
    # every figure drawn: no such line
    assert "not drawn" not in reference_readme(results, results / "README.md", papers=["prism"],
                                               expected_figures=expected[1:2])


def test_reference_note_words_the_alternative_like_the_scorecard():
    from recrepro.reporting.front_page import _note

    row = {"n_seeds": 3, "seeds_required": 3, "verdict": "deviates", "budget": float("nan"),
           "note": "Table 1; deviation: docs/deviations.md#prism-nlmf-relu", "alt_method": "nlmflinear_ssm_prism",
           "alt_label": "linear towers", "alt_mean": 0.11624, "alt_sd": 0.00151, "alt_n_seeds": 3.0}
    assert _note(row, "d.md") == ("[deviation: prism-nlmf-relu](d.md#prism-nlmf-relu); alternative — linear towers "
                                  "(`nlmflinear_ssm_prism`, 3 seeds): 0.1162 ± 0.0015")
    one = {**row, "alt_sd": float("nan"), "alt_n_seeds": 1.0}
    assert _note(one, "d.md").endswith("(`nlmflinear_ssm_prism`, 1 seed): 0.1162")
    not_run = {**row, "alt_mean": float("nan"), "alt_sd": float("nan"), "alt_n_seeds": float("nan")}
    assert _note(not_run, "d.md") == "[deviation: prism-nlmf-relu](d.md#prism-nlmf-relu)"
    legacy = {k: v for k, v in row.items() if not k.startswith("alt_")}  # a csv written before the columns
    assert _note(legacy, "d.md") == _note(not_run, "d.md")
    # a deviating row that links no deviation shows its note, which already words the alternative
    unlinked_note = "official binary; alternative — linear towers (`nlmflinear_ssm_prism`, 3 seeds): 0.1162 ± 0.0015"
    assert _note({**row, "note": unlinked_note}, "d.md") == unlinked_note
