"""A claim's verdict, gathered from the results of its checks (:mod:`~recrepro.scorecard.claims`).

**supported** / **contradicted** when every testable result agrees, **mixed** (naming where each
holds, or counting along the factor that splits them best) otherwise, **not testable here** when none
is testable; provisional on fewer seeds than the protocol runs, on a tuned pick from part of its grid,
or while a ``pending`` run the claim's protocol needs has no record.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from recrepro.scorecard.claims import (
    CONTRADICTED,
    HEADLINE_RESULTS,
    MIXED,
    NOT_TESTABLE,
    SUPPORTED,
    ClaimRecords,
    Context,
    Result,
    evaluate_check,
)
from recrepro.scorecard.claimspec import Claim
from recrepro.scorecard.expected import ExpectedFile, load_expected

@dataclass(frozen=True)
class ClaimVerdict:
    """A claim with its results and the verdict they give."""

    claim: Claim
    results: tuple[Result, ...]
    verdict: str  # the words shown: "supported (provisional) on ml-100k (a stand-in)", "mixed: ...", ...
    verdict_class: str  # one of VERDICT_CLASSES
    provisional: bool
    waits: tuple[str, ...] = ()

    @property
    def numbers(self) -> str:
        """The numbers of the testable results (else what the claim waits for)."""
        testable = [r for r in self.results if r.status != NOT_TESTABLE]
        shown = testable or list(self.results)
        return "; ".join(f"{r.label}: {r.numbers}" for r in shown)

    @property
    def headline(self) -> str:
        """The first :data:`HEADLINE_RESULTS` testable results and how many more (empty when none is testable)."""
        testable = [r for r in self.results if r.status != NOT_TESTABLE]
        text = "; ".join(f"{r.place or r.label}: {r.numbers}" for r in testable[:HEADLINE_RESULTS])
        more = len(testable) - HEADLINE_RESULTS
        return text + (f"; … {more} more" if more > 0 else "")


def _places(results: Sequence[Result]) -> str:
    return ", ".join(dict.fromkeys(r.place or r.label for r in results))


#: a mixed verdict with more places than this is summarised by the factor that splits it best
MIXED_LIST_MAX = 6
#: past this many places a list is not read (FedRAP's F1 has 29): the counts along the best factor
#: stand in for it even where no factor splits the checks cleanly (claims.md lists every check)
MIXED_LIST_UNREAD = 12


def _grouped_mixed(supported: Sequence[Result], contradicted: Sequence[Result]) -> str | None:
    """A long mixed verdict as counts along the factor that best separates where the claim holds
    from where it does not: the places' first word (the dataset) or their last comma-separated part
    (e.g. the negative pool, the metric).  "holds in 6 of 16 checks — train pool: 0 of 8; released-code
    pool: 6 of 8".  None when the list is short, or when no factor has unanimous groups covering at
    least half of the checks (the list then says more than the counts), unless the list is longer
    than :data:`MIXED_LIST_UNREAD` places."""
    checks = [(r.place or r.label, True) for r in supported] + [(r.place or r.label, False) for r in contradicted]
    n_places = len(dict.fromkeys(place for place, _ in checks))
    if n_places <= MIXED_LIST_MAX:
        return None
    factors = {
        "first": lambda place: place.split(" ")[0].rstrip(",:"),
        "last": lambda place: place.rsplit(", ", 1)[1] if ", " in place else None,
        # all but the dataset: the check's label ("released code, train pool"), when few
        "rest": lambda place: place.split(" ", 1)[1] if " " in place else None,
    }
    best: tuple[int, int, dict[str, list[bool]]] | None = None
    for key_of in factors.values():
        keys = [key_of(place) for place, _ in checks]
        if any(k is None for k in keys) or not 2 <= len(set(keys)) <= MIXED_LIST_MAX:
            continue
        groups: dict[str, list[bool]] = {}
        for k, (_, held) in zip(keys, checks):
            groups.setdefault(str(k), []).append(held)
        unanimous = sum(len(v) for v in groups.values() if len(set(v)) == 1)
        # the most checks in unanimous groups; of equals, the fewest groups
        if best is None or (unanimous, -len(groups)) > (best[0], best[1]):
            best = (unanimous, -len(groups), groups)
    if best is None or (2 * best[0] < len(checks) and n_places <= MIXED_LIST_UNREAD):
        return None
    parts = "; ".join(f"{k}: {sum(v)} of {len(v)}" for k, v in best[2].items())
    return f"holds in {len(supported)} of {len(checks)} checks — {parts}"


def _pending(claim: Claim, records: ClaimRecords) -> list[str]:
    """What the claim's ``pending`` runs wait for, for each pattern no record's method matches."""
    methods = {m for _, _, m in records.values}
    return [p.what for p in claim.pending
            if not any(fnmatch.fnmatchcase(m, pattern) for m in methods for pattern in p.methods)]


def judge_claim(claim: Claim, ctx: Context) -> ClaimVerdict:
    """Evaluate every check of ``claim`` and gather the verdict."""
    results = tuple(r for check in claim.checks for r in evaluate_check(check, ctx))
    testable = [r for r in results if r.status != NOT_TESTABLE]
    untestable = [r for r in results if r.status == NOT_TESTABLE]
    waits = tuple(_pending(claim, ctx.records))
    if not testable:
        text = "; ".join(dict.fromkeys(r.numbers for r in untestable)) or "waits for a check"
        return ClaimVerdict(claim, results, f"{NOT_TESTABLE}: {text}", NOT_TESTABLE, False, waits)
    provisional = any(r.provisional for r in testable) or bool(waits)
    supported = [r for r in testable if r.status == SUPPORTED]
    contradicted = [r for r in testable if r.status == CONTRADICTED]
    if supported and contradicted:
        cls = MIXED
        where = (_grouped_mixed(supported, contradicted)
                 or f"holds for {_places(supported)}; not for {_places(contradicted)}")
        text = f"{MIXED}{' (provisional)' if provisional else ''}: {where}"
    else:
        cls = SUPPORTED if supported else CONTRADICTED
        text = cls + (" (provisional)" if provisional else "")
    stand_ins = sorted({r.label.split(":")[0].split(" ")[0].rstrip(",") for r in testable if r.stand_in})
    if stand_ins and all(r.stand_in for r in testable):
        text += f"; on {', '.join(stand_ins)} ({'a stand-in' if len(stand_ins) == 1 else 'stand-ins'})"
    short = [r.seeds for r in testable if r.seeds and r.seeds[0] < r.seeds[1]]
    if short:
        fewest = min(short)
        text += f"; {'as few as ' if len(set(short)) > 1 else ''}{fewest[0]} of {fewest[1]} seeds"
    capped = [r for r in testable if r.capped]
    if capped:
        text += f"; {len(capped)} check{'s' if len(capped) > 1 else ''} on a tuned pick from part of its grid"
    on_edge = list(dict.fromkeys(r.on_edge for r in testable if r.on_edge))
    if on_edge:
        text += f"; won against baselines picked on their grid's edge ({'; '.join(on_edge)}): a point beyond may do better"
    if waits:
        text += "; waits for " + "; ".join(waits)
    if untestable:
        places = list(dict.fromkeys(r.place or r.label for r in untestable))
        # a long list belongs to the claim's section, not to the one-line verdict
        text += ("; not testable yet: " + ", ".join(places) if len(places) <= 3
                 else f"; {len(places)} more checks not testable yet") + " (claims.md names the runs)"
    return ClaimVerdict(claim, results, text, cls, provisional, waits)


def paper_datasets(expected: ExpectedFile) -> frozenset[str]:
    """The datasets the paper itself reports on (its entries other than our anchors): any other is a stand-in."""
    return frozenset(e.dataset for e in expected.entries if e.kind != "anchor")


def judge_claims(expected: ExpectedFile, results: str | Path, seeds_required: int | None = None,
                 records: ClaimRecords | None = None) -> list[ClaimVerdict]:
    """Every claim of ``expected`` judged on the records under ``results`` (``results/<tier>/<paper>``)."""
    results = Path(results)
    ctx = Context(paper=expected.paper, results=results, records=records or ClaimRecords.under(results),
                  seeds_required=seeds_required, paper_datasets=paper_datasets(expected))
    return [judge_claim(claim, ctx) for claim in expected.claims]


def load_claims_verdicts(expected_file: str | Path, results: str | Path,
                         seeds_required: int | None = None) -> list[ClaimVerdict]:
    """:func:`judge_claims` of the expected file at ``expected_file``."""
    return judge_claims(load_expected(expected_file), results, seeds_required)


__all__ = ["ClaimVerdict", "judge_claim", "judge_claims", "load_claims_verdicts", "paper_datasets"]
