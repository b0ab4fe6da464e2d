"""A claim's verdict, gathered from the results of its checks (:mod:`~recrepro.scorecard.claims`).

First each result's outcome: a result whose runs miss a step of the paper's protocol (a tuned pick
from part of its grid, a ``pending`` run of the claim) is **not testable yet**; the p values of the
claim's tested results are corrected together (Holm) and each result **holds**, is **against** or is
**inconclusive** (:class:`~recrepro.scorecard.evidence.Evidence`). Results under a documented defect
(the check's ``defect``) are corrected among themselves, shown on their own line and never count.
Then the claim's quantifier gathers the rest (``docs/verdicts.md``): **supported**, **contradicted**,
**mixed**, **inconclusive** or **not testable here**; provisional on fewer seeds than the protocol
runs or a win over baselines picked on their grid's edge.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from recrepro.scorecard.claims import (
    AGAINST,
    CONTRADICTED,
    HEADLINE_RESULTS,
    HOLDS,
    INCONCLUSIVE,
    MIXED,
    NOT_TESTABLE,
    SUPPORTED,
    ClaimRecords,
    Context,
    Result,
    evaluate_check,
)
from recrepro.scorecard.claimspec import Check, Claim
from recrepro.scorecard.evidence import Evidence, margin_evidence
from recrepro.scorecard.expected import ExpectedFile
from recrepro.scorecard.inference import Estimate, holm, pooled_estimate

@dataclass(frozen=True)
class ClaimVerdict:
    """A claim with its results and the verdict they give."""

    claim: Claim
    results: tuple[Result, ...]
    verdict: str  # the words shown: "supported (provisional) on ml-100k (a stand-in)", "mixed: ...", ...
    verdict_class: str  # one of VERDICT_CLASSES
    provisional: bool
    waits: tuple[str, ...] = ()
    short: str = ""  # one short sentence for the front page: the counts of the checks' outcomes

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


def _pending(claim: Claim, records: ClaimRecords) -> list[tuple[str, tuple[str, ...]]]:
    """The claim's ``pending`` protocol steps no record's method matches yet: ``(what, check labels)``."""
    methods = {m for _, _, m in records.values}
    return [(p.what, p.checks) for p in claim.pending
            if not any(fnmatch.fnmatchcase(m, pattern) for m in methods for pattern in p.methods)]


def _protocol_met(result: Result, check: Check, waits: Sequence[tuple[str, tuple[str, ...]]]) -> Result:
    """A result whose runs miss a step of the paper's protocol is not testable yet, its numbers kept:
    a tuned pick from part of its grid ("tuned over 1 of 3 learning rates" is no tuning), or a
    ``pending`` step of the claim that covers this check."""
    if result.status == NOT_TESTABLE:
        return result
    missing = [what for what, labels in waits if not labels or (check.label or "") in labels]
    if result.capped:
        missing.append(f"the rest of the tuned grid ({result.capped})")
    if not missing:
        return result
    return dataclasses.replace(result, status=NOT_TESTABLE,
                               numbers=f"waits for {'; '.join(missing)} (so far: {result.numbers})")


def _decide(results: Sequence[Result]) -> list[Result]:
    """Each tested result's outcome at :data:`~recrepro.scorecard.inference.ALPHA` after Holm's
    correction over ``results`` (one family: a claim's counted results, or its results under a defect)."""
    tested = [i for i, r in enumerate(results) if r.evidence is not None and r.status != NOT_TESTABLE
              and r.evidence.p is not None]
    adjusted = holm([results[i].evidence.p for i in tested])  # type: ignore[union-attr]
    out = list(results)
    for i, p_adjusted in zip(tested, adjusted):
        evidence = results[i].evidence
        assert evidence is not None
        p_adjusted = None if not math.isfinite(p_adjusted) else p_adjusted
        out[i] = dataclasses.replace(results[i], status=evidence.outcome(p_adjusted), p_adjusted=p_adjusted)
    return [dataclasses.replace(r, status=INCONCLUSIVE) if r.evidence is not None and r.evidence.p is None
            and r.status != NOT_TESTABLE else r for r in out]


def _with_evidence_text(result: Result) -> Result:
    """The result's numbers followed by its evidence in words (effect, interval, test, n, p, Holm)."""
    if result.evidence is None or result.status == NOT_TESTABLE:
        if result.evidence is None and result.status != NOT_TESTABLE:
            return dataclasses.replace(result, numbers=f"{result.numbers}; descriptive, no test")
        return result
    return dataclasses.replace(result, numbers=f"{result.numbers}; "
                                               f"{result.evidence.text(result.p_adjusted, result.status)}")


def _counts(results: Sequence[Result]) -> dict[str, int]:
    return {o: sum(r.status == o for r in results) for o in (HOLDS, AGAINST, INCONCLUSIVE)}


def _by_quantifier(quantifier: str, counted: Sequence[Result]) -> str:
    """The claim's class from its counted results' outcomes (docs/verdicts.md). "Contradicted" needs a
    tested result against (significantly the other way): a descriptive check (no test) that misses its
    bound leaves the claim inconclusive at most."""
    c = _counts(counted)
    total = len(counted)
    if c[AGAINST] and not any(r.status == AGAINST and r.evidence is not None for r in counted):
        return INCONCLUSIVE if quantifier != "most" or 2 * c[HOLDS] <= total else SUPPORTED
    if quantifier == "any":
        return SUPPORTED if c[HOLDS] else CONTRADICTED if c[AGAINST] == total else INCONCLUSIVE
    if quantifier == "most":
        if 2 * c[HOLDS] > total:
            return SUPPORTED
        if 2 * c[AGAINST] > total:
            return CONTRADICTED
        return MIXED if c[HOLDS] and c[AGAINST] else INCONCLUSIVE
    # all, matches, trend: one check against refutes a claim about every dataset, metric or baseline
    if c[AGAINST]:
        return CONTRADICTED
    return SUPPORTED if c[HOLDS] == total else INCONCLUSIVE


def _pooled(counted: Sequence[Result]) -> tuple[str, str]:
    """``mean``: the unweighted mean of the counted results' effects (:func:`pooled_estimate`), judged as
    each of them is (against the region most of them name): the class and the words."""
    evidence = [r.evidence for r in counted if r.evidence is not None and r.evidence.se is not None]
    units = {e.unit for e in evidence}
    if not evidence or len(units) > 1:
        return INCONCLUSIVE, "no pooled effect: " + ("no result with a standard error" if not evidence
                                                     else f"the results are in different units ({sorted(units)})")
    pooled = pooled_estimate([Estimate(e.effect, e.se or 0.0, e.df, e.n, e.test) for e in evidence])
    if pooled is None:
        return INCONCLUSIVE, "no pooled effect"
    targets = [e.target for e in evidence]
    target = max(set(targets), key=lambda t: (targets.count(t), str(t)))
    low, high = target
    if low == 0.0 and high is None or low is None and high == 0.0:
        p = pooled.p_value()
        claimed = 1.0 if high is None else -1.0
        judged = Evidence(effect=pooled.effect, unit=evidence[0].unit, test=pooled.test, n=pooled.n, p=p,
                          if_significant=HOLDS if pooled.effect * claimed > 0 else AGAINST,
                          ci=pooled.interval(0.95), target=target, se=pooled.se, df=pooled.df)
    else:
        judged = margin_evidence(pooled, low, high, evidence[0].unit)
    outcome = judged.outcome(judged.p)
    cls = {HOLDS: SUPPORTED, AGAINST: CONTRADICTED}.get(outcome, INCONCLUSIVE)
    return cls, f"pooled over {len(evidence)} result{'s' if len(evidence) != 1 else ''}: {judged.text(judged.p, outcome)}"


def _tally(c: dict[str, int], total: int) -> str:
    """"3 of 5 checks hold, 1 against, 1 inconclusive" (the zero counts left out)."""
    text = f"{c[HOLDS]} of {total} check{'s hold' if total != 1 else ' holds'}"
    return text + "".join(f", {c[o]} {o}" for o in (AGAINST, INCONCLUSIVE) if c[o])


def _defect_line(under: Sequence[Result]) -> str:
    if not under:
        return ""
    groups: dict[str, list[Result]] = {}
    for r in under:
        groups.setdefault(r.defect, []).append(r)
    parts = [f"under a documented defect ({anchor}): {_counts(rs)[HOLDS]} of {len(rs)} hold, not counted"
             for anchor, rs in groups.items()]
    return "; " + "; ".join(parts)


def judge_claim(claim: Claim, ctx: Context) -> ClaimVerdict:
    """Evaluate every check of ``claim`` and gather the verdict by its quantifier."""
    waits_steps = _pending(claim, ctx.records)
    raw: list[Result] = []
    for check in claim.checks:
        for result in evaluate_check(check, ctx):
            result = _protocol_met(result, check, waits_steps)
            if check.defect and result.status != NOT_TESTABLE:
                result = dataclasses.replace(result, defect=check.defect)
            raw.append(result)
    counted = _decide([r for r in raw if not r.defect])
    under = _decide([r for r in raw if r.defect])
    decided = iter(counted)
    decided_under = iter(under)
    results = tuple(_with_evidence_text(next(decided_under) if r.defect else next(decided)) for r in raw)
    waits = tuple(what for what, _ in waits_steps)
    counted_tested = [r for r in results if r.status != NOT_TESTABLE and not r.defect]
    untestable = [r for r in results if r.status == NOT_TESTABLE]
    defect_text = _defect_line([r for r in results if r.defect])
    if not counted_tested:
        text = "; ".join(dict.fromkeys(r.numbers for r in untestable)) or "waits for a check"
        short = f"no check testable yet ({len(untestable)} wait for runs or data)"
        return ClaimVerdict(claim, results, f"{NOT_TESTABLE}: {text}{defect_text}", NOT_TESTABLE, False, waits,
                            short)
    # provisional: fewer seeds than the protocol runs, a win over baselines picked on their grid's
    # edge, or checks of the claim that wait for runs (the verdict may change when they land)
    provisional = any(r.seeds is not None and r.seeds[0] < r.seeds[1] for r in counted_tested) \
        or any(r.on_edge for r in counted_tested if r.status == HOLDS) or bool(untestable)
    c = _counts(counted_tested)
    if claim.quantifier == "mean":
        cls, pooled_text = _pooled(counted_tested)
    else:
        cls, pooled_text = _by_quantifier(claim.quantifier, counted_tested), ""
    tally = _tally(c, len(counted_tested))
    if sum(r.evidence is not None and r.evidence.p is not None for r in counted_tested) > 1:
        tally += " (p values Holm-corrected over the claim's checks)"
    if cls == MIXED:
        holds = [r for r in counted_tested if r.status == HOLDS]
        against = [r for r in counted_tested if r.status == AGAINST]
        where = _grouped_mixed(holds, against) or f"holds for {_places(holds)}; against for {_places(against)}"
        text = f"{MIXED}{' (provisional)' if provisional else ''}: {where}; {tally}"
    else:
        text = f"{cls}{' (provisional)' if provisional else ''}: {pooled_text or tally}"
        if cls == INCONCLUSIVE and c[AGAINST]:
            text += " (its checks against are descriptive, with no test: no significant evidence against)"
        if cls == CONTRADICTED and claim.quantifier in ("all", "matches", "trend") and c[HOLDS]:
            against = list(dict.fromkeys(r.place or r.label for r in counted_tested if r.status == AGAINST))
            shown = ", ".join(against[:3]) + (f" and {len(against) - 3} more" if len(against) > 3 else "")
            text += f" (against on {shown})"
    stand_ins = sorted({r.label.split(":")[0].split(" ")[0].rstrip(",") for r in counted_tested if r.stand_in})
    if stand_ins and all(r.stand_in for r in counted_tested):
        text += f"; on {', '.join(stand_ins)} ({'a stand-in' if len(stand_ins) == 1 else 'stand-ins'})"
    short = [r.seeds for r in counted_tested if r.seeds and r.seeds[0] < r.seeds[1]]
    if short:
        fewest = min(short)
        text += f"; {'as few as ' if len(set(short)) > 1 else ''}{fewest[0]} of {fewest[1]} seeds"
    on_edge = list(dict.fromkeys(r.on_edge for r in counted_tested if r.on_edge and r.status == HOLDS))
    if on_edge:
        text += f"; won against baselines picked on their grid's edge ({'; '.join(on_edge)}): a point beyond may do better"
    text += defect_text
    if untestable:
        places = list(dict.fromkeys(r.place or r.label for r in untestable))
        # a long list belongs to the claim's section, not to the one-line verdict
        text += ("; not testable yet: " + ", ".join(places) if len(places) <= 3
                 else f"; {len(places)} more checks not testable yet") + " (claims.md names what they wait for)"
    short = _tally(c, len(counted_tested))
    if untestable:
        short += f"; {len(untestable)} more wait{'s' if len(untestable) == 1 else ''} for runs or data"
    under = [r for r in results if r.defect]
    if under:
        short += f"; under a documented defect {_counts(under)[HOLDS]} of {len(under)} hold (not counted)"
    return ClaimVerdict(claim, results, text, cls, provisional, waits, short)


def paper_datasets(expected: ExpectedFile) -> frozenset[str]:
    """The datasets the paper itself reports on (its entries other than our anchors): any other is a stand-in."""
    return frozenset(e.dataset for e in expected.entries if e.kind != "anchor")


def judge_claims(expected: ExpectedFile, results: str | Path, seeds_required: int | None = None,
                 records: ClaimRecords | None = None, planned: Sequence[str] | None = None) -> list[ClaimVerdict]:
    """Every claim of ``expected`` judged on the records under ``results`` (``results/<tier>/<paper>``).

    ``planned``: the run records the tier's workflow plans (any paper's); given, every method, dataset
    and metric a check names must be known to them, the records or the expected entries
    (:func:`~recrepro.scorecard.claimnames.check_claim_names`), else the claims are refused."""
    from recrepro.scorecard.claimnames import check_claim_names, known_names

    results = Path(results)
    records = records or ClaimRecords.under(results)
    if planned is not None:
        check_claim_names(expected, known_names(expected.paper, records, expected, planned))
    ctx = Context(paper=expected.paper, results=results, records=records,
                  seeds_required=seeds_required, paper_datasets=paper_datasets(expected))
    return [judge_claim(claim, ctx) for claim in expected.claims]


__all__ = ["ClaimVerdict", "judge_claim", "judge_claims", "paper_datasets"]
