"""Count the published cells of every paper from the written scorecards.

:func:`summarise_scorecards` is what ``recrepro scorecard --tier paper --summary`` prints (one
JSON line per paper, then the total) and what ``results/<tier>/README.md`` shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.datasets.download import reachable
from recrepro.paperlist import summary_keys
from recrepro.scorecard.claimpage import claims_counts
from recrepro.scorecard.expected import ExpectedEntry, expected_path, load_expected
from recrepro.scorecard.judge import VERDICT_WITHIN

#: Papers whose published numbers the summary counts, in the README's order (:mod:`recrepro.paperlist`).
SUMMARY_PAPERS = summary_keys()

#: The counts :func:`summarise_scorecards` returns, in order (then ``claims``, a count by verdict).
SUMMARY_COUNTS = ("published", "reachable", "run", "full_budget_all_seeds", "within_tolerance", "capped",
                  "printed", "printed_reachable", "printed_run", "printed_within_tolerance", "other_targets")
#: Entry kinds that are numbers the paper itself prints (the others: official code, a maintainer's log,
#: our thresholds, anchors).
PRINTED_KINDS = ("printed",)


def summarise_scorecards(results_dir: str | Path, availability: Mapping[str, str],
                         papers: Sequence[str] = SUMMARY_PAPERS) -> dict[str, Any]:
    """Count the published cells of every paper against the committed scorecards.

    Parameters
    ----------
    results_dir:
        ``results/<tier>/``: ``<paper>/scorecard.csv`` is read where it exists (a paper
        without one counts as not run).
    availability:
        Dataset -> ``generated`` | ``mirror`` | ``form:<name>`` | ``missing``
        (:func:`recrepro.datasets.download.dataset_availability`, kept in
        ``results/<tier>/datasets.json``).

    Returns
    -------
    dict
        ``published`` (entries with a published value), ``reachable`` (of those, whose
        dataset was generated or in the mirror, or whose mirror form serves the paper:
        :func:`recrepro.datasets.download.reachable`), ``run`` (reachable with at least one
        seed), ``full_budget_all_seeds`` (run with every required seed and no cap),
        ``within_tolerance`` and ``capped`` (run, but short of seeds or budget); then the same
        for the numbers the papers print (``printed``, ``printed_reachable``, ``printed_run``,
        ``printed_within_tolerance``; an entry's ``kind``) and ``other_targets`` (official-code
        measurements, maintainers' logs, our thresholds); and ``claims``: the claims by verdict
        (``<paper>/claims.csv``, :func:`~recrepro.scorecard.claimpage.claims_counts`).
    """
    counts = dict.fromkeys(SUMMARY_COUNTS, 0)
    results_dir = Path(results_dir)
    for paper in papers:
        expected = load_expected(expected_path(paper))
        card_path = results_dir / paper / "scorecard.csv"
        card = pd.read_csv(card_path, keep_default_na=False, na_values=[""]) if card_path.is_file() else None
        for index, entry in enumerate(expected.entries):
            if entry.published is None:
                continue
            printed = entry.kind in PRINTED_KINDS
            counts["published"] += 1
            counts["printed" if printed else "other_targets"] += 1
            if not reachable(availability.get(entry.dataset, "missing"), entry.dataset, paper):
                continue
            counts["reachable"] += 1
            counts["printed_reachable"] += int(printed)
            row = _card_row(card, entry, index)
            if row is None or not row.get("n_seeds"):
                continue
            counts["run"] += 1
            counts["printed_run"] += int(printed)
            counts["capped" if _capped(row) else "full_budget_all_seeds"] += 1
            within = int(row.get("verdict") == VERDICT_WITHIN)
            counts["within_tolerance"] += within
            counts["printed_within_tolerance"] += within * int(printed)
    return {**counts, "claims": claims_counts(results_dir, papers)}


def _capped(row: Mapping[str, Any]) -> bool:
    """The row ran short of its required seeds, or under a budget cap."""
    required = row.get("seeds_required")
    short = required is not None and not pd.isna(required) and int(row["n_seeds"]) < int(required)
    return short or bool(row.get("budget") if isinstance(row.get("budget"), str) else False)


def _card_row(card: pd.DataFrame | None, entry: ExpectedEntry, index: int) -> dict[str, Any] | None:
    """The scorecard row of ``entry``: rows are written in the expected file's order."""
    if card is None or index >= len(card):
        return None
    row = card.iloc[index].to_dict()
    if (row.get("dataset"), row.get("method"), row.get("metric")) != (entry.dataset, entry.method, entry.metric):
        return None  # a scorecard of another expected file: treat the cell as not run
    return row
