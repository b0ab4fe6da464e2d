"""Render a judged scorecard: the rows of ``scorecard.csv`` and the page ``scorecard.md``.

Each row's note has a plain form (csv) and a Markdown form (md: the deviation is a link into
``docs/deviations.md``). The Markdown is the small subset :mod:`recrepro.reporting.html` turns into HTML.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.records import git_state
from recrepro.scorecard.expected import ExpectedFile, SmokeCheck
from recrepro.scorecard.judge import (
    VERDICT_DEVIATES,
    VERDICT_FAIL,
    VERDICT_NOT_JUDGED,
    VERDICT_NOT_RUN,
    VERDICT_PASS,
    AlternativeValue,
    Judgement,
    MethodRan,
    Ordering,
    RanCheck,
    smoke_verdict,
)
from recrepro.scorecard.stats import PairedTest

#: Columns of scorecard.csv, in order. The ``alt_*`` columns (an entry's ``alternative``: its
#: method, label, seed mean, sd and seeds) come last so that readers of the older columns keep working.
SCORECARD_COLUMNS = (
    "paper", "source", "dataset", "method", "metric", "published", "tolerance",
    "ours_mean", "ours_sd", "n_seeds", "seeds_required", "budget", "diff", "verdict", "note",
    "alt_method", "alt_label", "alt_mean", "alt_sd", "alt_n_seeds",
)
#: How an alternative's part of a note begins (the reference page looks for it).
ALTERNATIVE_PREFIX = "alternative — "
SMOKE_TIER = "smoke"

#: Columns of the page's "Published vs ours" table (seeds_required and budget are in the csv and the note).
_PUBLISHED_HEADER = ["source", "dataset", "split", "method", "metric", "published", "tolerance",
                     "ours_mean", "ours_sd", "n_seeds", "diff", "verdict", "note"]
_SMOKE_HEADER = ["check", "claim", "dataset", "method", "metric", "ours", "compared with", "verdict"]
_UNMATCHED_HEADER = ["method", "dataset", "split", "metric", "mean", "sd", "n_seeds", "paired test vs baseline"]


# ------------------------------------------------------------------ Markdown pieces


def md_cell(value: Any, digits: int = 4) -> str:
    """A table cell: blank for None/NaN, a float to ``digits`` decimals, text with ``|`` escaped."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def markdown_anchors(doc: Path) -> set[str] | None:
    """Anchors of a markdown file: GitHub heading slugs and explicit ``<a id=...>``/``{#...}``."""
    if not doc.is_file():
        return None
    anchors: set[str] = set()
    for line in doc.read_text().splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            text = re.sub(r"\{#([^}]+)\}\s*$", "", heading.group(1)).strip()
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            anchors.add(slug)
        anchors.update(re.findall(r"""<a\s+(?:id|name)=["']([^"']+)["']""", line))
        anchors.update(re.findall(r"\{#([^}]+)\}", line))
    return anchors


@dataclass(frozen=True)
class DeviationDoc:
    """The deviations document as one scorecard page links it."""

    label: str  # its name as the reader knows it (``docs/deviations.md``), never the machine's folders
    href: str  # relative to the page
    anchors: set[str] | None  # None: the document is not there to check against

    @classmethod
    def for_page(cls, doc: str | Path, page: str | Path) -> DeviationDoc:
        """``doc`` linked from the Markdown page ``page``."""
        doc, page = Path(doc), Path(page)
        href = Path(os.path.relpath(doc.resolve(), page.resolve().parent)).as_posix()
        label = f"{doc.parent.name}/{doc.name}" if doc.parent.name else doc.name
        return cls(label=label, href=href, anchors=markdown_anchors(doc))

    def note(self, anchor: str) -> tuple[str, str]:
        """The note part of a deviation: plain, and Markdown with the link (flagged if the anchor is missing)."""
        missing = self.anchors is not None and anchor not in self.anchors
        flag = f" (anchor missing in {self.label})" if missing else ""
        target = f"{self.label}#{anchor}"
        return f"deviation: {target}{flag}", f"deviation: [{target}]({self.href}#{anchor}){flag}"


class _Notes:
    """The parts of a row's note, each in a plain form (csv) and a Markdown form (md, with links)."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, str]] = []

    def add(self, text: str, markdown: str | None = None) -> None:
        """Append a part; ``markdown`` defaults to the plain ``text``."""
        self.parts.append((text, text if markdown is None else markdown))

    def plain(self) -> str:
        return "; ".join(plain for plain, _ in self.parts)

    def markdown(self) -> str:
        return "; ".join(md for _, md in self.parts)


# ------------------------------------------------------------------ published rows


def alternative_phrase(label: str, method: str, mean: float, sd: float, n_seeds: int) -> str:
    """An alternative's value in words, for a note: label, method, seeds, mean (± sd from 2 seeds).

    ``alternative — official code's linear towers (`nlmflinear_directau_prism`, 1 seed): 0.1162``.
    The scorecard's notes and the reference page (from the csv's ``alt_*`` columns) both use it.
    """
    value = f"{mean:.4f}"
    if n_seeds >= 2 and not math.isnan(sd):
        value += f" ± {sd:.4f}"
    seeds = f"{n_seeds} seed" + ("" if n_seeds == 1 else "s")
    return f"{ALTERNATIVE_PREFIX}{label} (`{method}`, {seeds}): {value}"


def _alternative_cells(alternative: AlternativeValue | None) -> dict[str, Any]:
    """The ``alt_*`` csv cells: method and label when the entry names one, the values when it ran."""
    if alternative is None:
        return {"alt_method": "", "alt_label": "", "alt_mean": math.nan, "alt_sd": math.nan,
                "alt_n_seeds": math.nan}
    ran = alternative.n_seeds > 0
    return {"alt_method": alternative.method, "alt_label": alternative.label,
            "alt_mean": alternative.mean, "alt_sd": alternative.sd,
            "alt_n_seeds": alternative.n_seeds if ran else math.nan}


def _entry_notes(judged: Judgement, seeds_required: int | None, deviations: DeviationDoc) -> _Notes:
    """The note of a published cell's row: what the entry says, why it is not judged, caps, tests."""
    entry, split = judged.entry, judged.cell.split
    notes = _Notes()
    if entry.note:
        notes.add(entry.note)
    if entry.tolerance_kind == "rel" and entry.tolerance is not None:
        notes.add(f"tolerance {entry.tolerance:.4g} x |published|")
    if judged.verdict == VERDICT_NOT_RUN:
        notes.add(f"runs lack metric {entry.metric}" if judged.method_ran
                  else f"no run of {entry.method} on {entry.dataset}/{split or '(any split)'}")
    elif judged.verdict == VERDICT_NOT_JUDGED:
        notes.add("no published value: not judged")
    if judged.short_of_seeds(seeds_required):
        notes.add(f"{judged.n_seeds} of {seeds_required} seeds")
    if judged.budget:
        notes.add(judged.budget)
    if entry.deviation:
        notes.add(*deviations.note(entry.deviation))
    alt = judged.alternative
    if alt is not None and alt.n_seeds:  # beside the deviation it may explain; nothing when it has not run
        notes.add(alternative_phrase(alt.label, alt.method, alt.mean, alt.sd, alt.n_seeds))
    for test in judged.tests:
        notes.add(test.describe())
    if judged.tested and not judged.tests:
        notes.add(f"no paired test: no shared seeds or per-user values with {entry.baseline}")
    return notes


def _seeds_required_cell(seeds_required: int | None) -> float | int:
    """The csv's ``seeds_required``: the number, or blank (NaN) when not given."""
    return seeds_required if seeds_required else math.nan


def entry_rows(paper: str, judged: Sequence[Judgement], seeds_required: int | None,
               deviations: DeviationDoc) -> tuple[list[dict[str, Any]], list[list[str]]]:
    """Per published cell, its csv row (:data:`SCORECARD_COLUMNS`) and its Markdown row."""
    csv_rows: list[dict[str, Any]] = []
    md_rows: list[list[str]] = []
    for j in judged:
        entry, notes = j.entry, _entry_notes(j, seeds_required, deviations)
        csv_rows.append({
            "paper": paper, "source": entry.source, "dataset": entry.dataset, "method": entry.method,
            "metric": entry.metric, "published": entry.published, "tolerance": j.tolerance,
            "ours_mean": j.ours_mean, "ours_sd": j.ours_sd, "n_seeds": j.n_seeds,
            "seeds_required": _seeds_required_cell(seeds_required), "budget": j.budget, "diff": j.diff,
            "verdict": j.verdict, "note": notes.plain(), **_alternative_cells(j.alternative),
        })
        md_rows.append([
            md_cell(entry.source), md_cell(entry.dataset), md_cell(j.cell.split or entry.split or ""),
            md_cell(entry.method), md_cell(entry.metric), md_cell(entry.published), md_cell(j.tolerance),
            md_cell(j.ours_mean), md_cell(j.ours_sd), str(j.n_seeds), md_cell(j.diff),
            f"**{j.verdict}**" if j.verdict == VERDICT_DEVIATES else j.verdict, md_cell(notes.markdown()),
        ])
    return csv_rows, md_rows


def unmatched_test_notes(tests_per_row: Iterable[Sequence[PairedTest]]) -> list[str]:
    """The "paired test vs baseline" cell of each unmatched row."""
    return ["; ".join(t.describe() for t in row_tests) for row_tests in tests_per_row]


# ------------------------------------------------------------------ smoke-check rows


def _with_source(text: str, check: SmokeCheck) -> str:
    """``text``, followed by the check's source in brackets when it has one."""
    return text + (f" ({check.source})" if check.source else "")


def _smoke_csv_row(paper: str, check: SmokeCheck, seeds_required: int | None, **fields: Any) -> dict[str, Any]:
    """A smoke check's csv row: a failed row with nothing measured, updated by ``fields``."""
    row = {"paper": paper, "source": _with_source("smoke check", check),
           "dataset": "", "method": "", "metric": "", "published": math.nan, "tolerance": math.nan,
           "ours_mean": math.nan, "ours_sd": math.nan, "n_seeds": 0,
           "seeds_required": _seeds_required_cell(seeds_required), "budget": "", "diff": math.nan,
           "verdict": VERDICT_FAIL, "note": check.claim}
    row.update(fields)
    return row


def _ran_detail(m: MethodRan) -> str:
    if not m.n_runs:
        return "no run"
    if m.passed:
        return f"{m.n_runs} run(s), {m.n_values} metric values, all finite"
    return "non-finite " + ", ".join(m.nonfinite)


def _ran_rows(paper: str, ran: RanCheck, seeds_required: int | None) -> tuple[list[dict[str, Any]], list[str]]:
    """A ``ran`` check: one csv row per method (``metric`` "(all finite)") and one Markdown row."""
    check = ran.check
    csv_rows = [
        _smoke_csv_row(paper, check, seeds_required, dataset=", ".join(m.datasets), method=m.method,
                       metric="(all finite)", n_seeds=m.n_seeds, verdict=smoke_verdict(m.passed),
                       note=f"{check.claim}; {_ran_detail(m)}")
        for m in ran.methods
    ]
    failed = [f"{m.method}: {_ran_detail(m)}" for m in ran.methods if not m.passed]
    md_row = [
        "ran", md_cell(_with_source(check.claim, check)), md_cell(", ".join(ran.datasets) or "–"),
        md_cell(", ".join(f"{m.method} ({m.n_runs})" for m in ran.methods)), "all finite",
        f"{len(check.methods) - len(failed)} of {len(check.methods)} methods (runs)", "",
        f"**{VERDICT_FAIL}**: " + md_cell("; ".join(failed)) if failed else VERDICT_PASS,
    ]
    return csv_rows, md_row


def _ordering_rows(paper: str, o: Ordering, seeds_required: int | None) -> tuple[dict[str, Any], list[str]]:
    """A ``greater`` / ``less`` check: its csv row and its Markdown row."""
    check = o.check
    if check.than is not None:
        other_text = f"{check.than} {o.other:.4f}" if o.n_other else f"{check.than}: no run"
    else:
        other_text = f"{check.value:g}"
    symbol = ">" if check.check == "greater" else "<"
    if o.compared:
        detail = f"{check.method} {o.mean:.4f} {symbol} {other_text}: {'yes' if o.passed else 'no'}"
    else:
        detail = f"no run of {check.method} on {check.dataset}" if not o.n_seeds else other_text
    csv_row = _smoke_csv_row(paper, check, seeds_required, dataset=check.dataset, method=check.method,
                             metric=check.metric, ours_mean=o.mean, ours_sd=o.sd, n_seeds=o.n_seeds,
                             diff=o.mean - o.other if o.compared else math.nan, verdict=smoke_verdict(o.passed),
                             note=f"{check.claim}; {detail}")
    md_row = [
        check.check, md_cell(_with_source(check.claim, check)), md_cell(check.dataset), md_cell(check.method),
        md_cell(check.metric), md_cell(o.mean), md_cell(f"{symbol} {other_text}"),
        VERDICT_PASS if o.passed else f"**{VERDICT_FAIL}**",
    ]
    return csv_row, md_row


def smoke_rows(paper: str, judged: Sequence[RanCheck | Ordering],
               seeds_required: int | None = None) -> tuple[list[dict[str, Any]], list[list[str]]]:
    """The judged smoke checks as csv rows (:data:`SCORECARD_COLUMNS`) and Markdown rows.

    A ``ran`` check gives one csv row per method (``metric`` "(all finite)") and one markdown
    row; an ordering check one row each. Verdict ``pass`` or ``fail`` (a missing run fails).
    ``ours_mean`` is the seed mean of the check's method, ``diff`` its distance to what it is
    compared with (positive: above).
    """
    csv_rows: list[dict[str, Any]] = []
    md_rows: list[list[str]] = []
    for result in judged:
        if isinstance(result, RanCheck):
            ran_csv, md_row = _ran_rows(paper, result, seeds_required)
            csv_rows.extend(ran_csv)
        else:
            csv_row, md_row = _ordering_rows(paper, result, seeds_required)
            csv_rows.append(csv_row)
        md_rows.append(md_row)
    return csv_rows, md_rows


# ------------------------------------------------------------------------- the csv


def scorecard_frame(csv_rows: Sequence[dict[str, Any]], before: pd.DataFrame | None = None) -> pd.DataFrame:
    """The csv rows (after the rows of ``before``) as a frame of :data:`SCORECARD_COLUMNS`, ``n_seeds`` integers.

    ``alt_n_seeds`` is a nullable integer: blank where no alternative ran, not ``1.0`` where one did.
    """
    rows = pd.DataFrame(list(csv_rows), columns=list(SCORECARD_COLUMNS))
    if before is not None:
        rows = pd.concat([before, rows], ignore_index=True)
    rows["n_seeds"] = rows["n_seeds"].astype(np.int64)
    rows["alt_n_seeds"] = rows["alt_n_seeds"].astype("Int64")
    return rows


def csv_text(rows: pd.DataFrame) -> str:
    """``scorecard.csv``: floats to 10 significant digits, NaN blank."""
    return rows.to_csv(index=False, float_format="%.10g", na_rep="", lineterminator="\n")


# ------------------------------------------------------------------------ the page


def _stamp(generated_on: dt.date, commits: Sequence[str], dirty: bool, n_runs: int) -> str:
    """What the page was drawn from: the runs' date and code commits (else the checkout drawing it)."""
    if commits:
        commit = ", ".join(f"`{c}`" for c in commits) + (" (with uncommitted changes)" if dirty else "")
        return f"{n_runs} runs · date: {generated_on.isoformat()} (last run) · commit: {commit}"
    # runs without provenance (tests, hand-made records): the checkout that draws it
    git = git_state()
    commit = "not a git checkout (or no commit yet)" if git["commit"] is None else f"`{git['commit'][:12]}`"
    if git["dirty"]:
        commit += " (uncommitted changes)"
    return f"date: {generated_on.isoformat()} · commit: {commit}"


def _intro_lines(paper: str, tier: str, expected: ExpectedFile, stamp: str) -> list[str]:
    """Title, stamp, the smoke tier's warning, the reference, and how verdicts and tests are read."""
    lines = [f"# Scorecard: {paper}", "", f"paper: `{paper}` · tier: `{tier}` · {stamp}", ""]
    if tier == SMOKE_TIER:
        lines += [
            "**These numbers come from synthetic smoke data and are NOT comparable to the published ones.**",
            "",
            "The published numbers are compared in the reference reproduction's paper-tier scorecard, committed "
            f"in the repository: [results/paper/{paper}/scorecard.md](../../paper/{paper}/scorecard.md) (all "
            "papers: [results/paper/README.md](../../paper/README.md)).",
            "",
        ]
    if expected.reference:
        lines += [f"Reference: {expected.reference}", ""]
    if any(entry.alternative for entry in expected.entries):
        # only on pages that have one, so that the others stay as they were
        lines += [
            "A row whose entry names an `alternative` (another of our methods, e.g. the official code's form of "
            "a model the paper describes otherwise) gives that method's seed mean on the same dataset, split and "
            "metric in its note, once it has run (`alt_*` columns of `scorecard.csv`): it shows what explains a "
            "deviation and is never judged.",
            "",
        ]
    return lines + [
        f"Expected values: `{expected.path.name}`. Verdict `within` when |ours_mean − published| ≤ tolerance "
        "(in metric units), `deviates` otherwise, `not_run` when no run has the metric; an empty verdict means "
        "no published value to judge against. ours_sd is the sample sd (ddof=1) over seeds.",
        "",
        "Paired tests (rows with a baseline): a paired t-test (`scipy.stats.ttest_rel`) over the per-seed values "
        "of the seeds both methods ran, when they share at least 2 seeds; and a Wilcoxon signed-rank test "
        "(`scipy.stats.wilcoxon`, two-sided, zero differences dropped) over the per-user values of the users "
        "both runs evaluated, for the lowest shared seed (not for stratified metrics). Each note names the test "
        "it reports.",
        "",
    ]


def _smoke_lines(expected: ExpectedFile, smoke_md: list[list[str]]) -> list[str]:
    """The "Smoke checks" section."""
    lines = [
        "## Smoke checks",
        "",
        "What the smoke tier can check on synthetic data: that every method ran and wrote finite metrics, and "
        "the paper's qualitative orderings that are expected to hold even here (seed means; `smoke_checks` in "
        f"`{expected.path.name}`). Verdict `pass` or `fail`.",
        "",
    ]
    lines += md_table(_SMOKE_HEADER, smoke_md) if smoke_md else ["(no smoke checks for this paper)"]
    return lines + [""]


def _published_lines(md_rows: list[list[str]], hidden_not_run: int) -> list[str]:
    """The "Published vs ours" section (on the smoke tier, one line for the hidden ``not_run`` rows)."""
    lines = ["## Published vs ours", ""]
    if hidden_not_run:
        lines.append(f"{hidden_not_run} published value(s) are on the papers' datasets, which the smoke tier does "
                     "not run (`not_run`, listed in `scorecard.csv`): the paper-tier scorecard above compares them.")
        if md_rows:
            lines.append("")
    if md_rows:
        lines += md_table(_PUBLISHED_HEADER, md_rows)
    elif not hidden_not_run:
        lines.append("(no expected entries)")
    return lines


def _unmatched_lines(unmatched: pd.DataFrame) -> list[str]:
    """The "Our runs without a published value" section."""
    lines = ["", "## Our runs without a published value", ""]
    if unmatched.empty:
        return lines + ["(none)"]
    return lines + md_table(
        _UNMATCHED_HEADER,
        (
            [md_cell(r.method), md_cell(r.dataset), md_cell(r.split), md_cell(r.metric),
             md_cell(float(r.mean)), md_cell(float(r.sd)), str(int(r.n_seeds)), md_cell(r.paired_test)]
            for r in unmatched.itertuples(index=False)
        ),
    )


def strongest_baselines(table: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, split, metric) of a paper's ``tables/strong_baselines.csv``, the strongest tuned
    simple baseline (the highest mean; Gini: the lowest) beside the paper's method."""
    from recrepro.evaluation.exposure import lower_is_better

    rows = []
    for (dataset, split, metric), g in table.groupby(["dataset", "split", "metric"], sort=True):
        lower = lower_is_better(str(metric))
        rows.append(g.sort_values(["mean", "method"], ascending=[lower, True]).iloc[0].to_dict()
                    | {"lower_is_better": lower})
    return pd.DataFrame(rows)


def _strong_lines(strong: pd.DataFrame | None) -> list[str]:
    """The "Tuned simple baselines" section: the strongest per metric against the paper's method."""
    if strong is None:
        return []
    lines = ["", "## Tuned simple baselines", "",
             "The strongest of the tuned simple baselines per metric (MostPop, ItemKNN, RP3beta, EASE, iALS, each "
             "searched on the split's validation part; every setting and budget in "
             "[tables/strong_baselines.md](tables/strong_baselines.md)) against our run of the paper's method on the "
             "same split, with the same evaluator. Gini: lower is better.", ""]
    if strong.empty:
        return lines + ["(no tuned baseline recorded yet)"]
    rows = []
    for r in strongest_baselines(strong).to_dict("records"):
        ours, theirs = float(r["paper_mean"]), float(r["mean"])
        if not np.isfinite(ours):
            ahead = f"`{r['paper_method']}` not recorded on this split"
        elif (ours < theirs) if r["lower_is_better"] else (ours > theirs):
            ahead = "the paper's method"
        else:
            ahead = "the baseline"
        p = r.get("p_value")
        rows.append([f"{r['dataset']} · {r['split']}", str(r["metric"]), f"`{r['method']}` ({r['settings']})",
                     f"{md_cell(theirs)} ({int(r['n_seeds'])})", f"`{r['paper_method']}`",
                     f"{md_cell(ours)} ({int(r.get('paper_n_seeds', 0) or 0)})" if np.isfinite(ours) else "—",
                     md_cell(ours - theirs) if np.isfinite(ours) else "—",
                     md_cell(float(p)) if isinstance(p, (int, float)) and np.isfinite(p) else "—", ahead])
    return lines + md_table(["dataset · split", "metric", "strongest baseline (pick)", "mean (n)", "paper's method",
                             "mean (n)", "paper − baseline", "p", "ahead"], rows)


def render_markdown(
    *,
    paper: str,
    tier: str,
    expected: ExpectedFile,
    md_rows: list[list[str]],
    unmatched: pd.DataFrame,
    generated_on: dt.date,
    commits: Sequence[str] = (),
    dirty: bool = False,
    n_runs: int = 0,
    smoke_md: list[list[str]] | None = None,
    hidden_not_run: int = 0,
    strong: pd.DataFrame | None = None,
) -> str:
    """``scorecard.md``: header, smoke checks (smoke tier), published vs ours, the tuned simple baselines
    (``strong``: the paper's ``tables/strong_baselines.csv``, if it has any), our runs without a published value."""
    lines = _intro_lines(paper, tier, expected, _stamp(generated_on, commits, dirty, n_runs))
    if smoke_md is not None:
        lines += _smoke_lines(expected, smoke_md)
    lines += _published_lines(md_rows, hidden_not_run)
    lines += _strong_lines(strong)
    lines += _unmatched_lines(unmatched)
    return "\n".join(lines) + "\n"
