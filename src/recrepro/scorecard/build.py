"""Build one paper's scorecard: load, match, judge, render, write ``scorecard.csv`` and ``scorecard.md``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import write_text
from recrepro.scorecard.expected import ExpectedFile, load_expected
from recrepro.scorecard.judge import (
    DEFAULT_BASELINES,
    VERDICT_NOT_RUN,
    Judgement,
    judge_entry,
    judge_smoke_checks,
    judge_unmatched,
)
from recrepro.scorecard.match import match_entry, unmatched_runs
from recrepro.scorecard.render import (
    SMOKE_TIER,
    DeviationDoc,
    csv_text,
    entry_rows,
    render_markdown,
    scorecard_frame,
    smoke_rows,
    unmatched_test_notes,
)
from recrepro.scorecard.runs import RunIndex, ScorecardError, load_runs, records_stamp
from recrepro.scorecard.stats import PairedTest


@dataclass(frozen=True)
class Scorecard:
    """What :func:`build_scorecard` computed (also written to csv/md)."""

    rows: pd.DataFrame  # exactly SCORECARD_COLUMNS
    unmatched: pd.DataFrame  # our runs without an expected entry
    tests: list[PairedTest] = field(default_factory=list)


def _check_runs_belong(tidy: pd.DataFrame, paper: str, tier: str) -> None:
    """Every run is of ``tier`` and (where it says) of ``paper`` (else ScorecardError)."""
    wrong_tier = sorted(set(tidy["tier"]) - {tier})
    if wrong_tier:
        raise ScorecardError(f"runs of tier {wrong_tier} were given to the {tier!r} scorecard of {paper}")
    wrong_paper = sorted(set(tidy["paper"].dropna()) - {paper})
    if wrong_paper:
        raise ScorecardError(f"runs of paper {wrong_paper} were given to the scorecard of {paper!r}")


@dataclass
class _SmokePage:
    """What the smoke tier changes: the checks' rows, and the published rows it leaves off the page."""

    rows: pd.DataFrame
    md_rows: list[list[str]]
    smoke_md: list[list[str]]
    hidden_not_run: int


def _smoke_page(paper: str, expected: ExpectedFile, runs: RunIndex, rows: pd.DataFrame,
                csv_rows: list[dict[str, Any]], md_rows: list[list[str]], seeds_required: int | None) -> _SmokePage:
    """Published values are on the papers' datasets, which the smoke tier does not run: their
    not_run rows stay in the csv but the page shows what the smoke tier can check instead."""
    hidden_not_run = sum(row["verdict"] == VERDICT_NOT_RUN for row in csv_rows)
    md_rows = [md for md, row in zip(md_rows, csv_rows, strict=True) if row["verdict"] != VERDICT_NOT_RUN]
    smoke_csv, smoke_md = smoke_rows(paper, judge_smoke_checks(expected.smoke_checks, runs), seeds_required)
    if smoke_csv:
        rows = scorecard_frame(smoke_csv, before=rows)
    return _SmokePage(rows=rows, md_rows=md_rows, smoke_md=smoke_md, hidden_not_run=hidden_not_run)


def _unmatched_with_tests(tidy: pd.DataFrame, judged: Sequence[Judgement], runs: RunIndex,
                          default_baselines: Mapping[str, str]) -> tuple[pd.DataFrame, list[list[PairedTest]]]:
    """Our runs without an expected entry, each with its paired test against its default baseline (the
    ``paired_test`` column), and those tests row by row."""
    unmatched = unmatched_runs(tidy, [j.cell for j in judged])
    unmatched_tests = judge_unmatched(unmatched, runs, default_baselines)
    return unmatched.assign(paired_test=unmatched_test_notes(unmatched_tests)), unmatched_tests


def _stamp(tidy: pd.DataFrame, generated_on: dt.date | None) -> tuple[dt.date, list[str], bool]:
    """The page's date (``generated_on``, else the runs' latest ``finished_at``, else today) and the runs'
    code commit(s) and whether any was dirty: the same records give the same page wherever it is drawn."""
    last_date, commits, dirty = records_stamp(sorted(set(tidy["run_dir"])))
    if generated_on is None:
        generated_on = dt.date.fromisoformat(last_date) if last_date else dt.date.today()
    return generated_on, commits, dirty


def build_scorecard(
    paper: str,
    tier: str,
    expected_path: str | Path,
    run_dirs: Sequence[str | Path],
    out_md: str | Path,
    out_csv: str | Path,
    deviations_doc: str | Path = "docs/deviations.md",
    *,
    default_baselines: Mapping[str, str] = DEFAULT_BASELINES,
    generated_on: dt.date | None = None,
    seeds_required: int | None = None,
    strong_baselines: str | Path | None = None,
) -> Scorecard:
    """Compare our runs with a paper's published numbers; write scorecard.csv and .md.

    Parameters
    ----------
    paper:
        Paper key (``exadmm``, ..., or ``baselines``); must match the expected file.
    tier:
        Tier of the runs (``smoke``, ...); every run must carry it. For ``smoke`` the
        markdown says in bold that the numbers are not comparable to the paper's, points to
        the committed paper-tier scorecard, shows the paper's smoke checks
        (:func:`~recrepro.scorecard.judge.judge_smoke_checks`, also appended to the csv) and
        collapses the ``not_run`` rows of the published values into one line (the csv keeps
        them). Other tiers are unchanged by all of this.
    expected_path:
        ``expected/<paper>.yaml`` (see :func:`~recrepro.scorecard.expected.load_expected`).
    run_dirs:
        Run directories (each with metrics.json, optionally per_user.parquet).
    out_md, out_csv:
        Output paths, written atomically.
    deviations_doc:
        Markdown file holding the deviation anchors; the md links to it relative to
        ``out_md``, and flags anchors it does not contain (when the file exists).
    default_baselines:
        Baseline to paired-test each method against in the table of our runs without a
        published value (``mostpop`` vs ``random`` by default).
    generated_on:
        Date in the header (default: the latest ``finished_at`` of the runs' provenance,
        else today); the commit in the header is the runs' code commit(s), so that the
        scorecard of the same records is byte-identical wherever it is drawn.
    strong_baselines:
        The paper's ``tables/strong_baselines.csv`` (:mod:`recrepro.baselines.strong`): the md then shows the
        strongest tuned simple baseline per metric beside the paper's method.
    seeds_required:
        Seeds the protocol runs per cell (the tier's seed list); a row with fewer says
        ``n of N seeds`` in its note and counts as capped in
        :func:`~recrepro.scorecard.summary.summarise_scorecards`.

    Returns
    -------
    Scorecard
        The csv rows, the unmatched-runs table and all paired tests computed.

    Notes
    -----
    * Runs are grouped by (dataset, split, method); ``ours_mean`` is the mean over seeds,
      ``ours_sd`` the sample sd (ddof=1, blank for one seed), ``diff = ours_mean -
      published``.
    * ``verdict``: ``within`` if ``|diff| <= tolerance`` (the csv's tolerance is in metric
      units; relative tolerances are converted), ``deviates`` otherwise, ``not_run`` if
      no run has the metric. A null published value with runs gets an empty verdict.
    * With a ``baseline``, the note reports a paired t-test over shared seeds (>= 2) and a
      Wilcoxon signed-rank test over the shared users of the lowest shared seed.
    * With an ``alternative``, the ``alt_*`` columns give that method's seed mean, sd and seeds
      on the same dataset, split and metric (blank until it has run), and the note words it
      (:func:`~recrepro.scorecard.render.alternative_phrase`); it changes no verdict, diff or count.
    """
    expected = load_expected(expected_path)
    if expected.paper != paper:
        raise ScorecardError(f"{expected.path} is for paper {expected.paper!r}, not {paper!r}")
    tidy = load_runs(run_dirs)
    _check_runs_belong(tidy, paper, tier)
    runs = RunIndex(tidy)

    judged = [judge_entry(match_entry(entry, runs), runs) for entry in expected.entries]
    deviations = DeviationDoc.for_page(deviations_doc, out_md)
    csv_rows, md_rows = entry_rows(paper, judged, seeds_required, deviations)
    rows = scorecard_frame(csv_rows)
    unmatched, unmatched_tests = _unmatched_with_tests(tidy, judged, runs, default_baselines)
    tests = [t for j in judged for t in j.tests] + [t for row_tests in unmatched_tests for t in row_tests]

    smoke_md, hidden_not_run = None, 0
    if tier == SMOKE_TIER:
        smoke = _smoke_page(paper, expected, runs, rows, csv_rows, md_rows, seeds_required)
        rows, md_rows, smoke_md, hidden_not_run = smoke.rows, smoke.md_rows, smoke.smoke_md, smoke.hidden_not_run

    generated_on, commits, dirty = _stamp(tidy, generated_on)
    md_text = render_markdown(
        paper=paper, tier=tier, expected=expected, md_rows=md_rows, unmatched=unmatched,
        generated_on=generated_on, commits=commits, dirty=dirty, n_runs=int(tidy["run_dir"].nunique()),
        smoke_md=smoke_md, hidden_not_run=hidden_not_run,
        strong=pd.read_csv(strong_baselines) if strong_baselines is not None else None,
    )
    write_text(out_csv, csv_text(rows))
    write_text(out_md, md_text)
    return Scorecard(rows=rows, unmatched=unmatched, tests=tests)
