"""The forest plot of a paper's claim checks (recrepro.reporting.claims_forest.draw_claims_forest, recrepro claims-forest)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from matplotlib.container import ErrorbarContainer

from recrepro.reporting.claims_forest import draw_claims_forest

COLUMNS = ["paper", "claim", "check", "outcome", "effect", "ci_low", "ci_high", "ci_level", "unit", "target_low",
           "target_high", "test", "n", "p", "p_holm", "defect"]

# every outcome, two units, a defect row, open-ended and two-sided targets, a point without a CI,
# a not-testable row, a row without an effect, a 90 % interval and a label past the truncation length
ROWS = [
    ["prism", "P1", "gowalla: `mf_ssm_tunedwd` vs `mf_ssm_wd0`", "holds", "0.12", "0.05", "0.19", "0.95", "relative",
     "0", "", "paired t", "3", "0.01", "0.02", ""],
    ["prism", "P1", "yelp2018: `mf_ssm_tunedwd` vs `mf_ssm_wd0`", "against", "-0.08", "-0.15", "-0.02", "0.95",
     "relative", "0", "", "paired t", "3", "0.03", "0.06", ""],
    ["prism", "P1", "ml-1m: `mf_ssm_tunedwd` vs `mf_ssm_wd0`", "inconclusive", "0.01", "-0.04", "0.07", "0.95",
     "relative", "0", "", "paired t", "3", "0.6", "0.6", ""],
    ["prism", "P2", "gowalla: PRISM init matches the tuned weight decay within 5 %, a very long label indeed",
     "holds", "-0.01", "-0.03", "0.02", "0.90", "relative", "-0.05", "0.05", "TOST", "3", "0.02", "0.04", ""],
    ["prism", "P2", "yelp2018: PRISM init vs tuned weight decay (leaking negative pool)", "against", "0.09",
     "0.06", "0.12", "0.95", "relative", "-0.05", "0.05", "TOST", "3", "0.4", "0.4", "leaking negative pool"],
    ["prism", "P3", "gowalla: norm vs popularity", "holds", "0.62", "0.55", "0.70", "0.95", "rho", "0.3", "", "",
     "3", "", "", ""],
    ["prism", "P3", "yelp2018: norm vs popularity", "inconclusive", "0.21", "", "", "", "rho", "0.3", "", "", "1",
     "", "", ""],
    ["prism", "P4", "amazon-book: not run here", "not testable", "", "", "", "", "", "", "", "", "", "", "", ""],
    ["prism", "P4", "ml-1m: one seed, no effect", "inconclusive", "", "", "", "", "relative", "0", "", "", "1", "",
     "", ""],
]


def write_checks(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return path


def error_bars(figure) -> int:
    return sum(isinstance(c, ErrorbarContainer) for ax in figure.axes for c in ax.containers)


def test_forest_draws_one_panel_per_unit_and_one_row_per_testable_check(tmp_path):
    checks = write_checks(tmp_path / "checks.csv", ROWS)
    png, pdf = tmp_path / "figures" / "claims.png", tmp_path / "figures" / "claims.pdf"
    summary = draw_claims_forest(checks, png, pdf, tier="paper")
    assert png.stat().st_size > 0 and pdf.stat().st_size > 0
    assert summary.panels == ("relative", "rho")  # the panels in a fixed unit order
    assert summary.rows == (5, 2) and summary.not_drawn == 2
    caption = " ".join(summary.figure.texts[-1].get_text().split())  # the caption line, unwrapped
    assert "1 of 9 checks not testable here, 1 without an effect (not drawn)" in caption
    assert "bar: 95% confidence interval" in caption
    assert len(summary.figure.axes) == 2
    assert summary.error_bars == error_bars(summary.figure) == 6  # the point without a CI has no bar
    relative, rho = summary.figure.axes
    assert relative.get_xlabel() == "effect, relative to the reference side's mean"
    assert rho.get_xlabel() == "Spearman ρ"
    assert relative.xaxis.get_major_formatter()(0.05, 0).endswith("%")
    labels = [t.get_text() for t in relative.get_yticklabels()]
    assert labels[0] == "P1" and "P2" in labels  # claim headers above their checks
    assert len(labels) == 5 + 2
    assert all(len(label) <= 60 + len(" (90% CI) (defect)") for label in labels)
    # long labels are cut in the middle: the dataset and the condition at the end stay
    assert "yelp2018: PRISM init vs tuned…decay (leaking negative pool) (defect)" in labels
    assert sum("…" in label for label in labels) == 2
    assert any("(90% CI)" in label for label in labels)  # the odd interval level is marked
    assert not any("`" in label for label in labels)
    # the rows with a target are shaded: 5 in the relative panel, 2 open-ended ones in the rho panel
    assert len(relative.patches) == 5 and len(rho.patches) == 2
    legend = summary.figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["holds", "against", "inconclusive", "ran under a defect",
                                                          "claim's target region"]


def test_forest_redraw_is_byte_identical(tmp_path):
    checks = write_checks(tmp_path / "checks.csv", ROWS)
    first = (tmp_path / "a.png", tmp_path / "a.pdf")
    second = (tmp_path / "b.png", tmp_path / "b.pdf")
    draw_claims_forest(checks, *first, tier="paper")
    draw_claims_forest(checks, *second, tier="paper")
    assert first[0].read_bytes() == second[0].read_bytes()
    assert first[1].read_bytes() == second[1].read_bytes()


def test_forest_png_only_when_no_pdf_is_asked_for(tmp_path):
    checks = write_checks(tmp_path / "checks.csv", ROWS[:3])
    summary = draw_claims_forest(checks, tmp_path / "only.png", tier="smoke")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checks.csv", "only.png"]
    assert summary.panels == ("relative",) and summary.rows == (3,)


def test_forest_without_testable_checks_says_so(tmp_path):
    not_testable = [["lrs", "L1", f"check {i}", "not testable", *[""] * 12] for i in range(3)]
    checks = write_checks(tmp_path / "checks.csv", not_testable)
    png = tmp_path / "claims.png"
    summary = draw_claims_forest(checks, png, tier="paper")
    assert png.stat().st_size > 0
    assert summary.panels == () and summary.error_bars == 0 and summary.not_drawn == 3
    texts = [t.get_text() for ax in summary.figure.axes for t in ax.texts]
    assert "no testable checks" in texts
    assert any("3 of 3 checks not testable" in t.get_text() for t in summary.figure.texts)


def test_forest_many_checks_stay_within_the_height_cap(tmp_path):
    rows = [["fedrap", f"F{i % 6 + 1}", f"dataset {i}: `fedrap_tuned` vs `baseline_{i}` (train pool)",
             ("holds", "against", "inconclusive")[i % 3], str(0.01 * (i - 30)), str(0.01 * (i - 35)),
             str(0.01 * (i - 25)), "0.95", "relative", "0", "", "paired t", "3", "0.1", "0.2", ""]
            for i in range(60)]
    checks = write_checks(tmp_path / "checks.csv", rows)
    summary = draw_claims_forest(checks, tmp_path / "claims.png", tier="paper")
    assert summary.rows == (60,)
    assert summary.figure.get_size_inches()[1] <= 20.0


def test_forest_refuses_an_unknown_outcome(tmp_path):
    checks = write_checks(tmp_path / "checks.csv", [["prism", "P1", "x", "maybe", *[""] * 12]])
    with pytest.raises(ValueError, match="unknown outcome"):
        draw_claims_forest(checks, tmp_path / "claims.png")


def test_a_relative_effect_of_several_hundred_percent_turns_the_axis_logarithmic(tmp_path):
    # a sparsity share 4.5x its reference beside effects of a few percent: linear up to ±100 %, then log
    rows = [ROWS[0], ["fedrap", "F3", "amazon-video: sparsity of C", "inconclusive", "4.5", "", "", "", "relative",
                      "0", "", "", "1", "", "", ""]]
    summary = draw_claims_forest(write_checks(tmp_path / "checks.csv", rows), tmp_path / "claims.png")
    [ax] = summary.figure.axes
    assert ax.get_xscale() == "symlog" and ax.get_xlim()[1] >= 4.5 and "logarithmic past" in ax.get_xlabel()
    few = draw_claims_forest(write_checks(tmp_path / "few.csv", ROWS[:3]), tmp_path / "few.png")
    assert few.figure.axes[0].get_xscale() == "linear"


def test_a_long_labelled_check_keeps_its_label_and_drops_the_repeated_methods(tmp_path):
    check = "ml-100k: `lambdaopt_dui_code` vs `lambdafix` (NDCG@100, the released code's switches)"
    rows = [["lambdaopt", "L1", check, "against", "-0.05", "-0.08", "-0.02", "0.95", "relative", "0", "", "t", "3",
             "0.01", "0.02", ""]]
    summary = draw_claims_forest(write_checks(tmp_path / "checks.csv", rows), tmp_path / "claims.png")
    labels = [t.get_text() for t in summary.figure.axes[0].get_yticklabels()]
    assert "ml-100k (NDCG@100, the released code's switches)" in labels
