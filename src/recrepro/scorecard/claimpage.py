"""Write the claims' verdicts: ``results/<tier>/<paper>/claims.md`` and ``claims.csv``, the Claims section
that opens ``results/<tier>/README.md``, and the table of dataset-size checks.

Every word here is filled from the claims of ``expected/<paper>.yaml`` and the verdicts
:mod:`~recrepro.scorecard.verdicts` computed from the records; nothing depends on the day or the machine.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from recrepro.datasets.statistics import recipe_applies
from recrepro.io import write_text
from recrepro.scorecard.claims import CLAIMS_COLUMNS, NOT_TESTABLE, VERDICT_CLASSES
from recrepro.scorecard.evidence import AGAINST, HOLDS, INCONCLUSIVE
from recrepro.scorecard.expected import ExpectedFile, load_expected
from recrepro.scorecard.verdicts import ClaimVerdict, judge_claims

SMOKE_TIER = "smoke"
_STATUS_WORD = {HOLDS: "holds", AGAINST: "against", INCONCLUSIVE: "inconclusive", NOT_TESTABLE: "not testable"}
#: One row per check result: what ``figures/claims.png`` (the forest plot) draws.
CHECKS_COLUMNS = ("paper", "claim", "check", "outcome", "effect", "ci_low", "ci_high", "ci_level", "unit",
                  "target_low", "target_high", "test", "n", "p", "p_holm", "defect")
#: The quantifiers in words, for the claims table.
QUANTIFIER_WORDS = {"all": "every check", "any": "any check", "most": "most checks", "mean": "on average",
                    "matches": "matches (every check)", "trend": "a trend (every check)"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _why(verdict: ClaimVerdict) -> str:
    """The claim's explanation: the yaml's ``why`` and ``caveat``, then the first result that decides."""
    parts = [p for p in (verdict.claim.why, verdict.claim.caveat) if p]
    return " ".join(parts)


def claims_rows(paper: str, verdicts: Sequence[ClaimVerdict]) -> list[dict[str, str]]:
    """One csv row per claim (:data:`~recrepro.scorecard.claims.CLAIMS_COLUMNS`)."""
    return [{
        "paper": paper, "id": v.claim.id, "claim": v.claim.claim, "source": v.claim.source,
        "quantifier": v.claim.quantifier, "verdict": v.verdict,
        "verdict_class": v.verdict_class, "provisional": "yes" if v.provisional else "", "short": v.short,
        "headline": v.headline,
        "numbers": v.numbers,
        "why": _why(v), "evidence": v.claim.evidence or "", "deviation": v.claim.deviation or "",
    } for v in verdicts]


def _number(value: float | None, digits: int = 6) -> str:
    if value is None or not math.isfinite(value):
        return ""
    return f"{value:.{digits}g}"


def checks_rows(paper: str, verdicts: Sequence[ClaimVerdict]) -> list[dict[str, str]]:
    """One csv row per check result (:data:`CHECKS_COLUMNS`): the forest plot's input."""
    rows = []
    for v in verdicts:
        for r in v.results:
            e = r.evidence if r.status != NOT_TESTABLE else None
            rows.append({
                "paper": paper, "claim": v.claim.id, "check": r.label,
                "outcome": _STATUS_WORD[r.status], "effect": _number(e.effect) if e else "",
                "ci_low": _number(e.ci[0]) if e and e.ci else "", "ci_high": _number(e.ci[1]) if e and e.ci else "",
                "ci_level": f"{e.ci_level:g}" if e and e.ci else "", "unit": e.unit if e else "",
                "target_low": _number(e.target[0]) if e else "", "target_high": _number(e.target[1]) if e else "",
                "test": e.test if e else "", "n": str(e.n) if e and e.p is not None else "",
                "p": _number(e.p, 4) if e and e.p is not None else "",
                "p_holm": _number(r.p_adjusted, 4) if e and r.p_adjusted is not None else "",
                "defect": r.defect,
            })
    return rows


def claims_csv_text(rows: Sequence[Mapping[str, str]], columns: Sequence[str] = CLAIMS_COLUMNS) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _audit_lines(audit: pd.DataFrame, paper: str) -> list[str]:
    """The leak audit's rows of ``paper`` (``results/<tier>/leak_audit.csv``, recrepro.papers.leaks)."""
    rows = audit[audit["paper"] == paper]
    lines = ["## Leak audit", "",
             "Can a held-out (validation or test) pair reach training on the splits this paper's runs use? Counted "
             "on the split files, per training negative pool (`../leak_audit.md` has every paper's and what each "
             "column counts). A check whose runs train under a leaking pool carries `defect:` and never counts.", ""]
    if rows.empty:
        return lines + ["No split of this paper audited yet (the audit runs where its data are here).", ""]
    lines += ["| dataset | split | pool | held-out pairs | in training | never a negative | shared eval negatives "
              "| verdict |", "|---|---|---|---:|---:|---:|---|---|"]
    for r in rows.to_dict("records"):
        lines.append(f"| {r['dataset']} | {r['split']} (seed {r['seed']}) | {_cell(r['pool'])} "
                     f"| {int(r['held_out_pairs']):,} | {int(r['held_out_in_training']):,} "
                     f"| {int(r['held_out_excluded_from_negatives']):,} | {r['shared_eval_negatives']} "
                     f"| {_cell(r['verdict'])} |")
    return lines + [""]


def claims_markdown(expected: ExpectedFile, tier: str, verdicts: Sequence[ClaimVerdict],
                    deviations_href: str = "../../../docs/deviations.md", audit: pd.DataFrame | None = None) -> str:
    """The page of one paper's claims: a table of verdicts, then each claim with its checks' numbers."""
    lines = [f"# Claims of {expected.paper} ({tier} tier)", ""]
    if expected.reference:
        lines += [f"{expected.reference}.", ""]
    lines += [
        f"Each claim is judged from the run records under `{expected.paper}/runs/` (and the tables drawn from "
        f"them) by `recrepro claims --paper {expected.paper} --tier {tier}`; the claims, their quantifiers and "
        f"their checks are data in `src/recrepro/expected/{expected.paper}.yaml`. Each check **holds** "
        "(significant in the claimed direction, or its interval inside the claimed margin), is **against** "
        "(significant the other way, or its interval wholly outside the margin), **inconclusive** (neither: "
        "the effect, its interval and the smallest effect the data could have detected are given) or **not "
        "testable** (data or a step of the paper's protocol missing, named). Every p names its test and n: a "
        "paired t-test over users (a user's metric averaged over the seeds) where both sides kept per-user "
        "rows, else over seeds or splits; the p values of one claim's checks are corrected together (Holm), "
        "read at 0.05. The claim's quantifier (every dataset, any, most, on average, matches, a trend) "
        "gathers its checks into **supported**, **contradicted**, **mixed**, **inconclusive** or **not "
        "testable here**; a check run under a documented defect (a leaking negative pool) is shown on its "
        "own and never counts. Fewer seeds than the protocol runs make a verdict provisional. "
        "[docs/verdicts.md](../../../docs/verdicts.md) gives the rules and why; `checks.csv` every check's "
        "effect, interval, test and p, and `figures/claims.png` draws them.",
        "",
    ]
    if tier == SMOKE_TIER:
        lines += ["**Smoke tier: synthetic data; these verdicts say nothing about the papers.** The reference "
                  f"verdicts are in `results/paper/{expected.paper}/claims.md`.", ""]
    if audit is not None:
        lines += _audit_lines(audit, expected.paper)
    if not verdicts:
        return "\n".join(lines + ["No claims listed for this paper.", ""])
    lines += ["| id | claim | source | quantifier | verdict |", "|---|---|---|---|---|"]
    for v in verdicts:
        lines.append(f"| [{v.claim.id}](#{v.claim.id.lower()}) | {_cell(v.claim.claim)} | {_cell(v.claim.source)} "
                     f"| {QUANTIFIER_WORDS[v.claim.quantifier]} | **{_cell(v.verdict)}** |")
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
            lines.append(f"- {r.label}: *{_STATUS_WORD[r.status]}*"
                         + (f" (under a documented defect: [{r.defect}]({deviations_href}#{r.defect}); not counted)"
                            if r.defect else "")
                         + f" — {r.numbers}"
                         + (" (a stand-in dataset)" if r.stand_in and r.status != NOT_TESTABLE else ""))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def write_claims(paper: str, tier: str, expected_file: str | Path, results: str | Path, out_md: str | Path,
                 out_csv: str | Path, seeds_required: int | None = None,
                 out_checks: str | Path | None = None, planned: Sequence[str] | None = None,
                 leak_audit: str | Path | None = None) -> list[ClaimVerdict]:
    """Judge ``paper``'s claims on the records under ``results`` (``results/<tier>/<paper>``); write both files."""
    expected = load_expected(expected_file)
    if expected.paper != paper:
        raise ValueError(f"{expected.path} is for paper {expected.paper!r}, not {paper!r}")
    verdicts = judge_claims(expected, results, seeds_required, planned=planned)
    write_text(out_csv, claims_csv_text(claims_rows(paper, verdicts)))
    if out_checks is not None:
        write_text(out_checks, claims_csv_text(checks_rows(paper, verdicts), CHECKS_COLUMNS))
    audit = pd.read_csv(leak_audit, keep_default_na=False) if leak_audit and Path(leak_audit).is_file() else None
    write_text(out_md, claims_markdown(expected, tier, verdicts, audit=audit))
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
             "Does each paper's headline claim hold? One row per claim, the verdict computed from the records by "
             "the rules of [docs/verdicts.md](../../docs/verdicts.md): each check holds, is against or is "
             "inconclusive by its named test (Holm-corrected within the claim), and the claim's quantifier (every "
             "dataset, on average, matches, a trend) gathers them; a check under a documented defect never counts. "
             "`<paper>/claims.md` gives each check's effect, interval, test and n, and `<paper>/figures/claims.png` "
             "draws them; the claims are data in `src/recrepro/expected/<paper>.yaml`. Counts: "
             + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in claims_counts(results, papers).items()) + ".",
             "", "| paper | claim | verdict | in short | evidence |", "|---|---|---|---|---|"]
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
            verdict = f"**{row['verdict_class']}**" + (" (provisional)" if row["provisional"] == "yes" else "")
            short = str(row.get("short") or "") or "—"
            lines.append(f"| [{paper}](#{paper}) | **{row['id']}** {_cell(row['claim'])} | {verdict} "
                         f"| {_cell(short)} | {' · '.join(links)} |")
    lines.append("")
    forests = [f"[{paper}]({paper}/figures/claims.png)" for paper in papers
               if (results / paper / "figures" / "claims.png").is_file()]
    if forests:
        lines += ["Every check's effect and interval against the claim's target, per paper (forest plots): "
                  + " · ".join(forests) + ".", ""]
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
