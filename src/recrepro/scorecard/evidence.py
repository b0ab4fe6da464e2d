"""The evidence of one check's result: its effect, interval, test and n, and the outcome a significant
test would give (:mod:`~recrepro.scorecard.verdicts` corrects the p values of a claim's checks together
and decides). Also where a comparison finds its pairs: per user where both sides kept per-user rows,
else per seed.

The outcomes (``docs/verdicts.md``):

- **holds**: significant (after Holm) in the claimed direction; for a check against a margin
  ("matches", "within 15 points"), the interval lies inside the region (TOST or non-inferiority);
- **against**: significant the other way, or the interval lies wholly outside the region;
- **inconclusive**: neither, with the effect, its interval and the smallest effect the data could
  have detected, or no test possible (one seed and no per-user rows);
- **not testable**: data or a protocol step missing, named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from recrepro.records import PER_USER_FILE
from recrepro.scorecard.inference import ALPHA, Estimate, margin_test, paired_estimate

HOLDS, AGAINST, INCONCLUSIVE, NOT_TESTABLE = "holds", "against", "inconclusive", "not testable here"
#: Outcomes a check's result can have, in the order the pages count them.
OUTCOMES = (HOLDS, AGAINST, INCONCLUSIVE, NOT_TESTABLE)


@dataclass(frozen=True)
class Evidence:
    """A tested result: the effect in ``unit`` with its interval, the region the claim asks for, the
    test (named, with its n) and its p before correction; ``if_significant`` is the outcome a
    significant p gives (:data:`HOLDS` or :data:`AGAINST`; :data:`INCONCLUSIVE` when a guard, such as
    a significant step against a trend, keeps it from holding). ``p`` None: no test was possible
    (``note`` says why)."""

    effect: float
    unit: str  # relative | difference | rho | tau
    test: str
    n: int
    p: float | None
    if_significant: str
    ci: tuple[float, float] | None = None
    ci_level: float = 0.95
    target: tuple[float | None, float | None] = (None, None)
    detectable: float | None = None
    se: float | None = None  # the effect's standard error (where an estimate gave one): pooling reads it
    df: float = math.inf  # the degrees of freedom of ``se``'s t distribution (inf: normal): pooling reads it
    note: str = ""  # a second line (the seed-level test beside a per-user one), or why no test

    def outcome(self, p_adjusted: float | None) -> str:
        """The outcome at :data:`~recrepro.scorecard.inference.ALPHA` of the corrected p."""
        if p_adjusted is None or not math.isfinite(p_adjusted) or p_adjusted >= ALPHA:
            return INCONCLUSIVE
        return self.if_significant

    def text(self, p_adjusted: float | None, outcome: str) -> str:
        """The effect, interval, test, n and p in words, for the claims page."""
        parts = [f"effect {_fmt_unit(self.effect, self.unit)}"]
        if self.ci is not None:
            parts.append(f"{self.ci_level:.0%} CI {_fmt_unit(self.ci[0], self.unit)} to {_fmt_unit(self.ci[1], self.unit)}")
        if self.p is None:
            parts.append(f"no test: {self.note}" if self.note else "no test")
            return "; ".join(parts)
        p_text = "undefined (differences constant)" if not math.isfinite(self.p) else _fmt_p(self.p)
        parts.append(f"{self.test}, p {p_text}")
        if p_adjusted is not None and math.isfinite(p_adjusted) and p_adjusted != self.p:
            parts.append(f"Holm-adjusted p {_fmt_p(p_adjusted)}")
        if outcome == INCONCLUSIVE and self.detectable is not None and math.isfinite(self.detectable):
            parts.append(f"smallest effect detectable (80 % power) ±{_fmt_unit(self.detectable, self.unit, sign=False)}")
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)


def _fmt_p(p: float) -> str:
    """``= 0.0123`` or ``< 1e-300`` (a p that underflows)."""
    return "< 1e-300" if p <= 0 else f"= {p:.3g}"


def _fmt_unit(value: float, unit: str, sign: bool = True) -> str:
    if not math.isfinite(value):
        return str(value)
    if unit == "relative":
        return f"{value:+.1%}" if sign else f"{value:.1%}"
    if unit in ("rho", "tau"):
        return f"{value:+.3f}" if sign else f"{value:.3f}"
    text = f"{value:+.4g}" if sign else f"{value:.4g}"
    return text


def direction_evidence(estimate: Estimate | None, reference: float, lower_is_better: bool, *,
                       no_test: str = "", note: str = "") -> Evidence | None:
    """A "better" comparison: the paired difference relative to ``reference`` (the compared side's
    mean), holding when significant in the claimed direction."""
    if estimate is None:
        return None
    scaled = estimate.scaled(1.0 / abs(reference)) if reference else estimate
    unit = "relative" if reference else "difference"
    claimed = -1.0 if lower_is_better else 1.0
    p = scaled.p_value()
    return Evidence(effect=scaled.effect, unit=unit, test=scaled.test, n=scaled.n, p=p,
                    if_significant=HOLDS if scaled.effect * claimed > 0 else AGAINST,
                    ci=scaled.interval(0.95), target=(0.0, None) if claimed > 0 else (None, 0.0),
                    detectable=scaled.detectable(), se=scaled.se, df=scaled.df, note=note or no_test)


def margin_evidence(estimate: Estimate, low: float | None, high: float | None, unit: str, *,
                    note: str = "") -> Evidence:
    """A check against a region (equivalence, non-inferiority): TOST / one-sided tests, read on the
    90 % interval (its ends are the one-sided 95 % bounds). The p kept is the smaller of "inside" and
    "outside", and the outcome a significant one gives."""
    tested = margin_test(estimate, low, high)
    inside = tested.p_inside <= tested.p_outside
    return Evidence(effect=estimate.effect, unit=unit, test=f"{'TOST' if low is not None and high is not None else 'one-sided test'} "
                    f"against the region ({estimate.test})", n=estimate.n,
                    p=tested.p_inside if inside else tested.p_outside,
                    if_significant=HOLDS if inside else AGAINST, ci=estimate.interval(0.90), ci_level=0.90,
                    target=(low, high), detectable=None, se=estimate.se, df=estimate.df, note=note)


def untested(effect: float, unit: str, why: str, target: tuple[float | None, float | None] = (None, None)) -> Evidence:
    """A comparison no test can judge (one seed and no per-user rows): its effect, and why."""
    return Evidence(effect=effect, unit=unit, test="", n=1, p=None, if_significant=INCONCLUSIVE, target=target,
                    note=why)


class PerUser:
    """The per-user rows of the runs a paper's claims compare, read once each."""

    def __init__(self) -> None:
        self._frames: dict[Path, pd.DataFrame | None] = {}

    def frame(self, run_dir: Path) -> pd.DataFrame | None:
        if run_dir not in self._frames:
            path = run_dir / PER_USER_FILE
            self._frames[run_dir] = pd.read_parquet(path) if path.is_file() else None
        return self._frames[run_dir]

    def pairs(self, ours: Mapping[int, Path], theirs: Mapping[int, Path], seeds: Sequence[int],
              metric: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Each user's ``metric`` averaged over ``seeds`` on both sides, over the users every run of
        both sides evaluated; None unless every run has per-user rows holding ``metric``."""
        merged: pd.DataFrame | None = None
        ours_columns, theirs_columns = [], []
        for seed in seeds:
            frames = [self.frame(side[seed]) if seed in side else None for side in (ours, theirs)]
            if any(f is None or metric not in f.columns or "user" not in f.columns for f in frames):
                return None
            ours_columns.append(f"ours {seed}")
            theirs_columns.append(f"theirs {seed}")
            pair = frames[0][["user", metric]].rename(columns={metric: ours_columns[-1]}).merge(
                frames[1][["user", metric]].rename(columns={metric: theirs_columns[-1]}), on="user")
            merged = pair if merged is None else merged.merge(pair, on="user")
        if merged is None or len(merged) < 2:
            return None
        merged = merged.dropna()
        a = merged[ours_columns].to_numpy(np.float64).mean(axis=1)
        b = merged[theirs_columns].to_numpy(np.float64).mean(axis=1)
        return a, b


def paired_comparison(a: Mapping[int, float], b: Mapping[int, float], metric: str, per_user: PerUser | None,
                      ours_dirs: Mapping[int, Path] | None, theirs_dirs: Mapping[int, Path] | None
                      ) -> tuple[Estimate | None, str]:
    """The difference ``a - b`` on the seeds both ran, as an estimate: per user (a user's metric
    averaged over the seeds, then a paired t-test over users) where both sides kept per-user rows,
    the seed-level paired t-test then given as a second line; else the paired t-test over seeds."""
    seeds = sorted(set(a) & set(b))
    seed_estimate = paired_estimate([a[s] for s in seeds], [b[s] for s in seeds],
                                    f"paired t-test over {len(seeds)} seeds")
    users = (per_user.pairs(ours_dirs, theirs_dirs, seeds, metric)
             if per_user is not None and ours_dirs and theirs_dirs and seeds else None)
    if users is not None:
        k = len(seeds)
        user_estimate = paired_estimate(users[0], users[1], f"paired t-test over {len(users[0]):,} users "
                                        f"({metric} averaged over {k} seed{'s' if k != 1 else ''})")
        if user_estimate is not None:
            second = ""
            if seed_estimate is not None:
                p = seed_estimate.p_value()
                second = f"over seeds: {seed_estimate.test}, p {_fmt_p(p) if math.isfinite(p) else 'undefined'}"
            return user_estimate, second
    return seed_estimate, ""


__all__ = ["AGAINST", "HOLDS", "INCONCLUSIVE", "NOT_TESTABLE", "OUTCOMES", "Evidence", "PerUser",
           "direction_evidence", "margin_evidence", "paired_comparison", "untested"]
