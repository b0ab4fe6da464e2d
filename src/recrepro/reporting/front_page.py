"""The reference reproduction's front page, ``results/<tier>/README.md``, drawn from the records.

Per paper: the summary counts (:func:`recrepro.scorecard.summarise_scorecards`), the
published-vs-ours table of its ``scorecard.csv`` (each deviation linked to
``docs/deviations.md``), and its committed tables and figures. Every number comes from the
scorecards, which come from the run records: nothing is typed in by hand, so the page is
redrawn with the figures (``from_records=true``) and changes only when a record does.

    recrepro report reference --results results/paper --out results/paper/README.md
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import read_json, write_text
from recrepro.paperlist import PAPERS
from recrepro.scorecard import ALTERNATIVE_PREFIX, SUMMARY_PAPERS, alternative_phrase, summarise_scorecards
from recrepro.datasets.statistics import published_statistics
from recrepro.scorecard.claimpage import claims_section, dataset_checks_section

__all__ = ["reference_readme"]

#: Each paper's section heading (the registry's long title, :mod:`recrepro.paperlist`).
PAPER_TITLES: Mapping[str, str] = {paper.key: paper.title for paper in PAPERS}

_DEVIATION = re.compile(r"deviation: docs/deviations\.md#([a-z0-9][a-z0-9_-]*)")


def figure_order(path: Path) -> list[Any]:
    """Sort key reading the numbers in a figure's name as numbers: fig2 before fig10, as in the paper."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", path.stem)]


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _cell(text: str) -> str:
    """Markdown table cell: pipes escaped; metric names in code spans so no renderer links them."""
    return text.replace("|", "\\|").replace("\n", " ")


def _ours(row: Mapping[str, Any]) -> str:
    mean, sd, n = row.get("ours_mean"), row.get("ours_sd"), row.get("n_seeds")
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    text = _fmt(mean)
    if sd is not None and not (isinstance(sd, float) and math.isnan(sd)):
        text += f" ± {_fmt(sd)}"
    required = row.get("seeds_required")
    seeds = f"{int(n)}" if required is None or (isinstance(required, float) and math.isnan(required)) \
        else f"{int(n)}/{int(required)}"
    return f"{text} ({seeds} seeds)"


def _note(row: Mapping[str, Any], deviations_href: str) -> str:
    """The row's last column: its cap in words, its deviation links, and, for a deviating row that
    links no deviation, the expected file's note (what the gap is known to come from); then the
    value of the entry's alternative when it ran (``alt_*`` columns), which shows what explains a gap."""
    parts = []
    budget = row.get("budget")
    if isinstance(budget, str) and budget:
        parts.append(budget)
    n, required = row.get("n_seeds"), row.get("seeds_required")
    if _finite(n) and _finite(required) and 0 < n < required and f"of {int(required)} seeds" not in " ".join(parts):
        parts.append(f"{int(n)} of {int(required)} seeds")
    note = row.get("note") if isinstance(row.get("note"), str) else ""
    anchors = list(dict.fromkeys(_DEVIATION.findall(note)))
    for anchor in anchors:
        parts.append(f"[deviation: {anchor}]({deviations_href}#{anchor})")
    note_shown = row.get("verdict") == "deviates" and not anchors and bool(note)
    if note_shown:
        parts.append(note)
    alternative = _alternative(row)
    if alternative and not (note_shown and ALTERNATIVE_PREFIX in note):  # a shown note already says it
        parts.append(alternative)
    return "; ".join(parts)


def _alternative(row: Mapping[str, Any]) -> str:
    """The alternative's phrase (as the scorecard's note words it) from the csv's ``alt_*`` cells; "" when
    the row names none, it has not run, or the csv predates those columns."""
    method, label, mean, n = (row.get(key) for key in ("alt_method", "alt_label", "alt_mean", "alt_n_seeds"))
    if not (isinstance(method, str) and method and isinstance(label, str) and _finite(mean) and _finite(n) and n > 0):
        return ""
    sd = row.get("alt_sd")
    return alternative_phrase(label, method, float(mean), float(sd) if _finite(sd) else math.nan, int(n))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


def _paper_section(paper: str, results: Path, availability: Mapping[str, str], deviations_href: str,
                   undrawn: Sequence[str] = ()) -> list[str]:
    lines = [f"## {PAPER_TITLES.get(paper, paper)}", "", f"<a id=\"{paper}\"></a>", ""]
    counts = summarise_scorecards(results, availability, papers=[paper])
    lines += [
        f"Published cells: **{counts['published']}** ({counts['printed']} printed in the paper, "
        f"{counts['other_targets']} other targets: official-code measurements, maintainers' logs, our thresholds); "
        f"with data here: **{counts['reachable']}** ({counts['printed_reachable']} printed); run: "
        f"**{counts['run']}** (full budget, every seed: {counts['full_budget_all_seeds']}; capped: "
        f"{counts['capped']}); within tolerance: **{counts['within_tolerance']}** "
        f"({counts['printed_within_tolerance']} printed). Claims: [{paper}/claims.md]({paper}/claims.md).",
        "",
    ]
    card_path = results / paper / "scorecard.csv"
    if card_path.is_file():
        card = pd.read_csv(card_path, keep_default_na=False, na_values=[""])
        shown = card[card["published"].notna() | card["n_seeds"].gt(0)]
        shown = shown[shown["n_seeds"].gt(0)]
        not_run = card[card["published"].notna() & card["n_seeds"].eq(0)]
        if len(shown):
            lines += ["| dataset | method | metric | published | ours (mean ± sd) | diff | verdict | budget / deviation |",
                      "|---|---|---|---:|---:|---:|---|---|"]
            for row in shown.to_dict("records"):
                verdict = row.get("verdict") if isinstance(row.get("verdict"), str) else ""
                lines.append("| " + " | ".join(_cell(x) for x in [
                    row["dataset"], f"`{row['method']}`", f"`{row['metric']}`", _fmt(row.get("published")),
                    _ours(row), _fmt(row.get("diff")), f"**{verdict}**" if verdict == "deviates" else verdict,
                    _note(row, deviations_href)]) + " |")
            lines.append("")
        if len(not_run):
            by_dataset = not_run.groupby("dataset").size().to_dict()
            missing = [d for d in by_dataset if availability.get(d, "missing") == "missing"]
            pending = {d: n for d, n in by_dataset.items() if d not in missing}
            text = []
            if missing:
                text.append("no data here for " + ", ".join(f"{d} ({by_dataset[d]} cells)" for d in sorted(missing)))
            if pending:
                text.append("not run yet: " + ", ".join(f"{d} ({n} cells)" for d, n in sorted(pending.items())))
            lines += ["Published cells without a run: " + "; ".join(text) + ".", ""]
        lines += [f"Full scorecard: [{paper}/scorecard.md]({paper}/scorecard.md).", ""]
    else:
        lines += ["No scorecard yet: none of this paper's cells has a committed run record.", ""]
    tables = sorted(p for p in (results / paper).rglob("*.md") if p.name != "scorecard.md" and "runs" not in p.parts)
    if tables:
        lines += ["Tables: " + ", ".join(f"[{p.relative_to(results / paper).as_posix()}]({p.relative_to(results).as_posix()})"
                                         for p in tables) + ".", ""]
    figures = sorted((results / paper / "figures").glob("*.png"), key=figure_order) \
        if (results / paper / "figures").is_dir() else []
    for fig in figures:
        rel = fig.relative_to(results).as_posix()
        lines += [f"![{paper}: {fig.stem}]({rel})", ""]
    if undrawn:
        lines += [_undrawn_line(undrawn, availability), ""]
    return lines


def _figure_dataset(name: str, datasets: Sequence[str]) -> str | None:
    """The dataset a figure's name ends with (``fig1_weight_decay_ml-1m`` → ``ml-1m``), if any."""
    for dataset in sorted(datasets, key=len, reverse=True):  # ml-1m-exadmm-split before ml-1m
        if name.endswith("_" + dataset):
            return dataset
    return None


def _undrawn_line(undrawn: Sequence[str], availability: Mapping[str, str]) -> str:
    """One sentence on a paper's figures that are not drawn: for want of data, or not run or drawn yet."""
    no_data: dict[str, int] = {}
    pending = []
    for name in undrawn:
        dataset = _figure_dataset(name, list(availability))
        if dataset is not None and availability[dataset] == "missing":
            no_data[dataset] = no_data.get(dataset, 0) + 1
        else:
            pending.append(name)
    text = []
    if no_data:
        text.append("no data here for " + ", ".join(
            f"{d} ({n} figure{'s' if n > 1 else ''})" for d, n in sorted(no_data.items())))
    if pending:
        text.append("not run or not drawn yet: " + ", ".join(f"`{name}`" for name in pending))
    line = "Figures not drawn: " + "; ".join(text) + "."
    if pending:  # a redraw redraws what was drawn before: a figure whose runs came since is asked for by name
        line += (" A figure whose runs are recorded is drawn by asking for it: `snakemake --cores 1 "
                 "results/<tier>/<paper>/figures/<name>.pdf --config tier=<tier> from_records=true`.")
    return line


def undrawn_figures(results: Path, expected: Sequence[str | Path]) -> dict[str, list[str]]:
    """Per paper, the names of the ``expected`` figures (``<results>/<paper>/figures/<name>.pdf``)
    with neither their PDF nor their PNG under ``results``, in the paper's order."""
    out: dict[str, list[str]] = {}
    for target in sorted((Path(t) for t in expected), key=figure_order):
        try:
            paper, folder, _ = target.relative_to(results).parts
        except ValueError:  # not a figure of this tier: another folder, or nested deeper
            continue
        if folder == "figures" and not (target.exists() or target.with_suffix(".png").exists()):
            out.setdefault(paper, []).append(target.stem)
    return out


def reference_readme(results: str | Path, out: str | Path, *, deviations_href: str = "../../docs/deviations.md",
                     papers: Sequence[str] = SUMMARY_PAPERS, expected_figures: Sequence[str | Path] = ()) -> str:
    """Write ``results/<tier>/README.md`` from the scorecards, tables and figures under ``results``.

    ``expected_figures``: every figure the tier's workflow draws (PDF paths under ``results``);
    a paper's section names those not on disk, so a figure with no record yet is not silently
    absent.
    """
    results = Path(results)
    undrawn = undrawn_figures(results, expected_figures)
    availability_file = results / "datasets.json"
    availability = read_json(availability_file)["datasets"] if availability_file.is_file() else {}
    total = summarise_scorecards(results, availability, papers=papers)
    lines = [
        "# Reference reproduction",
        "",
        *claims_section(results, papers, deviations_href),
        *dataset_checks_section(results, [s for s in published_statistics() if s["paper"] in papers], availability),
        "## Published numbers",
        "",
        "The paper tier of recrepro, run on the public datasets that were at hand, at the papers' protocols. "
        "Every number below is read from the run records in this folder (`<paper>/runs/`), through each "
        "paper's `scorecard.csv`; published values and tolerances come from `src/recrepro/expected/`. "
        "Redraw every table, figure and this page from the records, with no data and no training:",
        "",
        "```bash",
        "snakemake --cores 2 --config tier=paper from_records=true",
        "```",
        "",
        "Summary over all papers (`recrepro scorecard --tier paper --summary`):",
        "",
        "```json",
        json.dumps(total),
        "```",
        "",
        "`published`: cells with a published value; `reachable`: of those, the ones whose dataset the data "
        "mirror held (`datasets.json`); `run`: with at least one seed; `full_budget_all_seeds`: every seed of "
        "the protocol at its full budget; `capped`: run with fewer seeds or a cut budget, said in the row. "
        "`printed`, `printed_reachable`, `printed_run`, `printed_within_tolerance`: the same for the values a "
        "paper prints (an entry's `kind`); `other_targets`: official-code measurements, a maintainer's log and "
        "our own thresholds, counted apart; `claims`: the claims above by verdict.",
        "",
        "A run record (`<paper>/runs/<dataset>/.../<method>/seed<k>/`) holds `metrics.json` (test metrics), "
        "its history (per-epoch or per-round curves), `provenance.json` (code commit, config hash, split "
        "manifest sha256, seed, device, threads, wall time, peak memory, and under `timings` the per-epoch or "
        "per-round seconds); never weights, "
        "data, splits or recommendation lists. Per-user metrics and per-item magnitudes are kept only where a "
        "table or figure here reads them (every PRISM run keeps its magnitudes' Spearman ρ in `metrics.json`); "
        "the HTML views of the scorecards, claims and tables are not kept, and the redraw writes them. Deviations from the papers are explained in "
        "[docs/deviations.md](../../docs/deviations.md); the cost of every job and the queue of what remains "
        "are in [docs/compute.md](../../docs/compute.md).",
        "",
        "| paper | published (printed + other) | reachable (printed) | run | full budget, all seeds "
        "| within tolerance (printed) | capped |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for paper in papers:
        c = summarise_scorecards(results, availability, papers=[paper])
        lines.append(f"| [{paper}](#{paper}) | {c['published']} ({c['printed']} + {c['other_targets']}) | "
                     f"{c['reachable']} ({c['printed_reachable']}) | {c['run']} | {c['full_budget_all_seeds']} | "
                     f"{c['within_tolerance']} ({c['printed_within_tolerance']}) | {c['capped']} |")
    lines.append("")
    for paper in papers:
        lines += _paper_section(paper, results, availability, deviations_href, undrawn.get(paper, []))
    text = "\n".join(lines).rstrip("\n") + "\n"
    write_text(out, text)
    return text
