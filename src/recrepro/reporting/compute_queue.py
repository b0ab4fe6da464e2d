"""In what order to run a tier's jobs not run yet (``docs/compute.md``'s Queue): what a claim's verdict
waits for first, then the published cells' first seeds, their other seeds, and the figures' sweeps."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

import pandas as pd

from recrepro.reporting.compute_records import SEED_PATTERN, STRONG

__all__ = ["claimed_runs", "published_cells", "queue_priority"]


def published_cells(papers: Sequence[str]) -> set[tuple[str, str, str]]:
    """(paper, dataset, method) of every expected entry with a published value."""
    from recrepro.scorecard import expected_path, load_expected

    cells = set()
    for paper in papers:
        try:
            expected = load_expected(expected_path(paper))
        except (FileNotFoundError, ValueError):
            continue
        cells |= {(paper, e.dataset, e.method) for e in expected.entries if e.published is not None}
    return cells


def queue_priority(frame: pd.DataFrame, published: set[tuple[str, str, str]],
                   picked: set[tuple[str, str, str]] | frozenset = frozenset(),
                   claimed: set[tuple[str, str, str]] | frozenset = frozenset()) -> pd.Series:
    """0: a validation-grid point (``<method>-gNN``), a tuned simple baseline's job (paper :data:`STRONG`),
    a comparison at a grid's pick (``<method>_tuned``)
    or, on its first seed, a run that a claim's check names (``claimed``: (paper, dataset, method
    pattern), dataset ``*`` for any; the runs a claim's verdict waits for); 1: a run of a published cell
    on its first seed; 2: its other seeds, and a claimed run's other seeds; 3: everything else (figure
    sweeps).

    A tuned-weight-decay cell (``<backbone>_<loss>_tunedwd``) needs its grid runs
    (``<backbone>_<loss>_wd*``) on the first seed; its other seeds follow the pick: a grid run
    on another seed is 2 when ``picked`` (paper, dataset, method) names its method as the
    cell's pick, else 3 (a figure's sweep).
    """
    seeds = frame["run_dir"].str.extract(SEED_PATTERN)[0].astype(int)
    first_seed = seeds.groupby([frame["paper"], frame["dataset"]]).transform("min")
    tuned = frame["method"].str.replace(r"_wd[0-9a-z]+$", "_tunedwd", regex=True)
    is_published = pd.Series([(p, d, m) in published or (p, d, t) in published
                              for p, d, m, t in zip(frame["paper"], frame["dataset"], frame["method"], tuned)],
                             index=frame.index)
    is_picked = pd.Series([(p, d, m) in picked for p, d, m in zip(frame["paper"], frame["dataset"], frame["method"])],
                          index=frame.index)
    grid_other_seed = (frame["method"] != tuned) & (seeds != first_seed) & ~is_picked
    priority = pd.Series(3, index=frame.index)
    priority[is_published & (seeds == first_seed)] = 1
    priority[is_published & (seeds != first_seed) & ~grid_other_seed] = 2
    is_claimed = pd.Series([_claimed(claimed, p, d, m) for p, d, m in
                            zip(frame["paper"], frame["dataset"], frame["method"])], index=frame.index, dtype=bool)
    priority[is_claimed & (seeds != first_seed) & (priority > 2)] = 2
    priority[is_claimed & (seeds == first_seed)] = 0
    priority[frame["method"].str.contains(r"(?:-g\d{2,}|_tuned)$", regex=True)] = 0
    priority[frame["paper"] == STRONG] = 0  # a tuned baseline's grid: what a "beats the strongest" claim waits for
    return priority


def _claimed(claimed: set[tuple[str, str, str]] | frozenset, paper: str, dataset: str, method: str) -> bool:
    return any(p == paper and d in ("*", dataset) and fnmatch.fnmatchcase(method, pattern)
               for p, d, pattern in claimed)


def claimed_runs(papers: Sequence[str]) -> set[tuple[str, str, str]]:
    """(paper, dataset, method pattern) of every method a claim's check compares (``method``, ``than``,
    ``methods``, ``baselines``) or a claim's pending protocol names; dataset ``*`` where the check names
    none.  Patterns are the checks' own (``ials*``).  Of ``method`` and ``than`` only the first: the
    rest are stand-ins a check reads when the first has no records (FedRAP's default-flag runs for its
    runs at the validation pick), so the queue asks for the run the check wants, not for its stand-in."""
    from recrepro.scorecard import expected_path, load_expected

    out: set[tuple[str, str, str]] = set()
    for paper in papers:
        try:
            expected = load_expected(expected_path(paper))
        except (FileNotFoundError, ValueError):
            continue
        for claim in expected.claims:
            for check in claim.checks:
                names = (*check.method[:1], *check.than[:1], *check.methods, *check.baselines)
                out |= {(paper, d, n) for d in (check.datasets or ("*",)) for n in names}
            out |= {(paper, "*", n) for pending in claim.pending for n in pending.methods}
    return out

