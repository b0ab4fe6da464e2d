"""Write the claims' verdicts: ``results/<tier>/<paper>/claims.md`` and ``claims.csv``, the Claims section
that opens ``results/<tier>/README.md``, and the table of dataset-size checks.

Every word here is filled from the claims of ``expected/<paper>.yaml`` and the verdicts
:mod:`~recrepro.scorecard.verdicts` computed from the records; nothing depends on the day or the machine.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from recrepro.datasets.statistics import recipe_applies
from recrepro.io import write_text
from recrepro.scorecard.claims import CLAIMS_COLUMNS, NOT_TESTABLE, VERDICT_CLASSES
from recrepro.scorecard.expected import ExpectedFile, load_expected
from recrepro.scorecard.verdicts import ClaimVerdict, judge_claims

SMOKE_TIER = "smoke"
_STATUS_WORD = {"supported": "holds", "contradicted": "does not hold", NOT_TESTABLE: "not testable"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _why(verdict: ClaimVerdict) -> str:
    """The claim's explanation: the yaml's ``why`` and ``caveat``, then the first result that decides."""
    parts = [p for p in (verdict.claim.why, verdict.claim.caveat) if p]
    return " ".join(parts)


def claims_rows(paper: str, verdicts: Sequence[ClaimVerdict]) -> list[dict[str, str]]:
    """One csv row per claim (:data:`~recrepro.scorecard.claims.CLAIMS_COLUMNS`)."""
    return [{
        "paper": paper, "id": v.claim.id, "claim": v.claim.claim, "source": v.claim.source, "verdict": v.verdict,
        "verdict_class": v.verdict_class, "provisional": "yes" if v.provisional else "", "headline": v.headline,
        "numbers": v.numbers,
        "why": _why(v), "evidence": v.claim.evidence or "", "deviation": v.claim.deviation or "",
    } for v in verdicts]


def claims_csv_text(rows: Sequence[Mapping[str, str]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(CLAIMS_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def claims_markdown(expected: ExpectedFile, tier: str, verdicts: Sequence[ClaimVerdict],
                    deviations_href: str = "../../../docs/deviations.md") -> str:
    """The page of one paper's claims: a table of verdicts, then each claim with its checks' numbers."""
    lines = [f"# Claims of {expected.paper} ({tier} tier)", ""]
    if expected.reference:
        lines += [f"{expected.reference}.", ""]
    lines += [
        f"Each claim is judged from the run records under `{expected.paper}/runs/` (and the tables drawn from "
        f"them) by `recrepro claims --paper {expected.paper} --tier {tier}`; the claims and their checks are "
        f"data in `src/recrepro/expected/{expected.paper}.yaml`. A verdict is **supported** or **contradicted** "
        "when every testable check agrees, **mixed** (naming where each holds) otherwise, and **not testable "
        "here** (naming what it waits for) when no check can be run. Fewer seeds than the protocol runs, or a "
        "run the protocol needs and the records lack, make it provisional.",
        "",
    ]
    if tier == SMOKE_TIER:
        lines += ["**Smoke tier: synthetic data; these verdicts say nothing about the papers.** The reference "
                  f"verdicts are in `results/paper/{expected.paper}/claims.md`.", ""]
    if not verdicts:
        return "\n".join(lines + ["No claims listed for this paper.", ""])
    lines += ["| id | claim | source | verdict |", "|---|---|---|---|"]
    for v in verdicts:
        lines.append(f"| [{v.claim.id}](#{v.claim.id.lower()}) | {_cell(v.claim.claim)} | {_cell(v.claim.source)} "
                     f"| **{_cell(v.verdict)}** |")
    lines.append("")
    for v in verdicts:
        lines += [f"## {v.claim.id}", "", f"**Claim** ({v.claim.source}): {v.claim.claim}", "",
                  f"**Verdict**: {v.verdict}", ""]
        why = _why(v)
        if why:
            lines += [f"**Why**: {why}", ""]
        links = []
        if v.claim.evidence:
            links.append(f"evidence: [{v.claim.evidence}]({v.claim.evidence})")
        if v.claim.deviation:
            links.append(f"deviation: [{v.claim.deviation}]({deviations_href}#{v.claim.deviation})")
        if links:
            lines += ["; ".join(links) + ".", ""]
        lines += ["Checks:", ""]
        for r in v.results:
            lines.append(f"- {r.label}: *{_STATUS_WORD[r.status]}* — {r.numbers}"
                         + (" (a stand-in dataset)" if r.stand_in and r.status != NOT_TESTABLE else ""))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def write_claims(paper: str, tier: str, expected_file: str | Path, results: str | Path, out_md: str | Path,
                 out_csv: str | Path, seeds_required: int | None = None) -> list[ClaimVerdict]:
    """Judge ``paper``'s claims on the records under ``results`` (``results/<tier>/<paper>``); write both files."""
    expected = load_expected(expected_file)
    if expected.paper != paper:
        raise ValueError(f"{expected.path} is for paper {expected.paper!r}, not {paper!r}")
    verdicts = judge_claims(expected, results, seeds_required)
    write_text(out_csv, claims_csv_text(claims_rows(paper, verdicts)))
    write_text(out_md, claims_markdown(expected, tier, verdicts))
    return verdicts


# ------------------------------------------------------------------------------ over all papers


def _read_claims(results: Path, paper: str) -> pd.DataFrame | None:
    path = results / paper / "claims.csv"
    if not path.is_file():
        return None
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def claims_counts(results: str | Path, papers: Sequence[str]) -> dict[str, int]:
    """Claims by verdict class over ``papers`` (from their ``claims.csv``), plus how many are provisional."""
    counts = {cls.replace(" ", "_"): 0 for cls in VERDICT_CLASSES}
    counts["provisional"] = 0
    for paper in papers:
        frame = _read_claims(Path(results), paper)
        if frame is None:
            continue
        for row in frame.to_dict("records"):
            counts[row["verdict_class"].replace(" ", "_")] += 1
            counts["provisional"] += int(row["provisional"] == "yes")
    return counts


def claims_section(results: str | Path, papers: Sequence[str], deviations_href: str) -> list[str]:
    """The Claims section of ``results/<tier>/README.md``: one row per claim over ``papers``."""
    results = Path(results)
    lines = ["## Claims", "",
             "Does each paper's headline claim hold? One row per claim, the verdict computed from the records "
             "(`<paper>/claims.md` gives each check's numbers and why; the claims are data in "
             "`src/recrepro/expected/<paper>.yaml`). Counts: "
             + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in claims_counts(results, papers).items()) + ".",
             "", "| paper | claim | verdict | numbers behind it | evidence |", "|---|---|---|---|---|"]
    missing = []
    for paper in papers:
        frame = _read_claims(results, paper)
        if frame is None:
            missing.append(paper)
            continue
        for row in frame.to_dict("records"):
            links = [f"[claims]({paper}/claims.md#{row['id'].lower()})"]
            if row["evidence"]:
                links.append(f"[{Path(row['evidence']).stem}]({paper}/{row['evidence']})")
            if row["deviation"]:
                links.append(f"[deviation]({deviations_href}#{row['deviation']})")
            lines.append(f"| [{paper}](#{paper}) | **{row['id']}** {_cell(row['claim'])} | {_cell(row['verdict'])} "
                         f"| {_cell(row['headline']) or '—'} | {' · '.join(links)} |")
    lines.append("")
    if missing:
        lines += [f"No claims page yet for: {', '.join(missing)}.", ""]
    return lines


# ------------------------------------------------------------------------------ dataset statistics


def _our_stats(results: Path, paper: str) -> pd.DataFrame | None:
    """Our counts per dataset: ``<paper>/tables/dataset_stats.csv`` and ``dataset_stats_<dataset>.csv``
    (``recrepro data summary``), else the tier's ``dataset_stats.csv`` (columns dataset, users, items
    and interactions or ratings; ``recipe`` where known); None when there is none."""
    tables = results / paper / "tables"
    paths = [p for p in (tables / "dataset_stats.csv", *sorted(tables.glob("dataset_stats_*.csv"))) if p.is_file()]
    if not paths and (results / "dataset_stats.csv").is_file():
        paths = [results / "dataset_stats.csv"]
    if not paths:
        return None
    frames = []
    for path in paths:
        frame = pd.read_csv(path, keep_default_na=False)
        if "interactions" not in frame.columns and "ratings" in frame.columns:
            frame = frame.rename(columns={"ratings": "interactions"})
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _recipe_text(recipe: Mapping[str, object], keys: Sequence[str]) -> str:
    return ", ".join(f"{k} {recipe.get(k)!s}".replace("None", "none") for k in keys)


def _data_check_row(s: Mapping[str, object], ours: pd.DataFrame | None,
                    availability: Mapping[str, str] | None) -> list[str]:
    """One row of the data checks: a printed size against the processed data it describes."""
    paper, dataset = str(s["paper"]), str(s["dataset"])
    numbers = tuple(int(s[k]) for k in ("users", "items", "interactions"))  # type: ignore[call-overload]
    text = " / ".join(f"{n:,}" for n in numbers)
    found = None if ours is None else ours[ours["dataset"] == dataset]
    if found is not None and "protocol" in found.columns and s.get("protocol"):
        found = found[found["protocol"] == s["protocol"]]
    if found is None or found.empty:
        held = (availability or {}).get(dataset, "missing")
        if held == "missing":
            why = "the data are not here"
        elif held.startswith("form:"):
            why = (f"the mirror holds it only in its `{held.removeprefix('form:')}` form, and no statistics of "
                   "this protocol's processed data are committed (docs/deviations.md says what the form lacks)")
        else:
            why = "no committed statistics of its processed data (the data stage's stats.json checks them)"
        return [paper, str(s["source"]), dataset, text, "—", f"not testable here: {why}"]
    row = found.iloc[0]
    mine = tuple(int(row[k]) for k in ("users", "items", "interactions"))
    ours_text = " / ".join(f"{n:,}" for n in mine)
    wanted = s.get("recipe") or {}
    if "recipe" in found.columns and str(row["recipe"]) and isinstance(wanted, Mapping) and wanted:
        recipe = json.loads(str(row["recipe"]))
        if not recipe_applies(wanted, recipe):
            keys = list(wanted)
            form = f" (the mirror's `{row['form']}` form)" if str(row.get("form", "")) else ""
            return [paper, str(s["source"]), dataset, text, ours_text,
                    f"not testable here: printed for another recipe ({_recipe_text(wanted, keys)}); ours has "
                    f"{_recipe_text(recipe, keys)}{form}"]
    diffs = [f"{name} {m - p:+,}" for name, m, p in zip(("users", "items", "interactions"), mine, numbers,
                                                        strict=True) if m != p]
    return [paper, str(s["source"]), dataset, text, ours_text,
            "matches" if not diffs else "differs: " + ", ".join(diffs)]


def dataset_checks_section(results: str | Path, printed: Sequence[Mapping[str, object]],
                           availability: Mapping[str, str] | None = None) -> list[str]:
    """Data checks: the dataset sizes the papers print (``printed``: source, paper, dataset, users,
    items, interactions; ``protocol`` and ``recipe`` where known) against our processed data's committed
    summary under ``results`` (``availability``: dataset -> generated | mirror | missing, to say why a
    row cannot be checked). A printed row whose recipe our processed data do not follow (e.g. ratings
    >= 3 where the mirror held no ratings) is not testable, and says which recipe each side has."""
    results = Path(results)
    ours_by_paper: dict[str, pd.DataFrame | None] = {}
    rows = []
    for s in printed:
        paper = str(s["paper"])
        if paper not in ours_by_paper:
            ours_by_paper[paper] = _our_stats(results, paper)
        rows.append(_data_check_row(s, ours_by_paper[paper], availability))
    if not rows:
        return []
    lines = ["### Data checks", "", "Dataset sizes the papers print (users / items / interactions) against "
             "our processed data.", "", "| paper | source | dataset | printed | ours | verdict |",
             "|---|---|---|---:|---:|---|"]
    lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return lines + [""]
