"""Results of a paper's claims' checks, computed from the run records.

Each claim of ``expected/<paper>.yaml`` (:mod:`~recrepro.scorecard.claimspec`) has checks; each check
gives one result per dataset (or per point, row or group). A result carries its evidence
(:mod:`~recrepro.scorecard.evidence`: the effect, its interval, the test named with its n, the p
before correction) or, for a descriptive check (a frontier, a convergence ratio, a timing ratio, a
published cell), an outcome read off the numbers. :mod:`~recrepro.scorecard.verdicts` corrects the p
values of one claim together (Holm), decides each result's outcome (holds, against, inconclusive, not
testable) and gathers them by the claim's quantifier; :mod:`~recrepro.scorecard.claimpage` writes
``claims.md``, ``claims.csv`` and ``checks.csv``. Nothing here depends on the day or the machine, so a
redraw is byte-identical. ``docs/verdicts.md`` gives the rules and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from recrepro.records import rank_correlation
from recrepro.scorecard.claimbase import (
    CLAIMS_COLUMNS,
    CONTRADICTED,
    Context,
    HEADLINE_RESULTS,
    MIXED,
    Result,
    SIGNIFICANCE,
    STRONG_BASELINES,
    SUPPORTED,
    VERDICT_CLASSES,
    _better_evidence,
    _comparison,
    _fmt,
    _fmt_vs,
    _matched_pair,
    _mean,
    _missing,
    _one_run,
    _pair,
    _pair_missing,
    _place,
    _seeds_text,
    _table_rows,
    _table_seeds,
    _tested,
)
from recrepro.scorecard.claimdescriptive import _check_cells, _check_converges, _check_cost, _check_frontier
from recrepro.scorecard.claimrecords import ClaimRecords, ClaimsError, never_left_initialisation
from recrepro.scorecard.claimspec import Check
from recrepro.scorecard.evidence import AGAINST, HOLDS, INCONCLUSIVE, NOT_TESTABLE, Evidence, margin_evidence, untested
from recrepro.scorecard.inference import (
    ALPHA,
    paired_estimate,
    spearman_difference,
    spearman_estimate,
    to_rho,
    trend_test,
)
from recrepro.scorecard.stats import matched_seeds, table_seed_counts
from recrepro.scorecard.claimstrong import _check_strong_baseline


def _matched_or_result(check: Check, ctx: Context, dataset: str):
    """``(method, than, a, b, left_out)``: the dataset's two sides, matched by seed or user; or the
    :class:`Result` that stands for the dataset when a side has no runs, or each side one run."""
    method, than = _pair(check, ctx, dataset)
    if method is None or than is None:
        return _pair_missing(check, dataset, method, than, ctx.records)
    if ctx.records.one_run(dataset, method, than):
        return _one_run(check, ctx, dataset, method, than)
    a, b, left_out = _matched_pair(ctx, check, dataset, method, than)
    return method, than, a, b, left_out


def _pair_result(check: Check, ctx: Context, dataset: str, method: str, than: str, n: int,
                 evidence: Evidence, numbers: str) -> Result:
    """The result of one dataset's comparison of two run-record methods; ``numbers`` without the
    capped runs' note, which this adds."""
    capped = ctx.records.capped(dataset, method, than)
    return Result(label=f"{dataset}: `{method}` vs `{than}`" + (f" ({check.label})" if check.label else ""),
                  status=_tested(INCONCLUSIVE, evidence), seeds=ctx.seed_pair(n),
                  stand_in=ctx.stand_in(dataset), evidence=evidence,
                  numbers=numbers[:-1] + (f"; {capped})" if capped else ")"),
                  place=_place(dataset, check, method, than), capped=capped)


def _per_dataset_pair(check: Check, ctx: Context, judge: Callable[..., Result]) -> list[Result]:
    """One result per dataset: ``judge(check, ctx, dataset, method, than, a, b, left_out)`` on the dataset's two
    sides matched by seed or user, or the result that stands for it when a side is missing or has one run."""
    out = []
    for dataset in check.datasets:
        matched = _matched_or_result(check, ctx, dataset)
        out.append(matched if isinstance(matched, Result) else judge(check, ctx, dataset, *matched))
    return out


def _check_better(check: Check, ctx: Context) -> list[Result]:
    if check.table:
        return _table_better(check, ctx)
    return _per_dataset_pair(check, ctx, _better_pair)


def _better_pair(check: Check, ctx: Context, dataset: str, method: str, than: str, a: dict, b: dict,
                 left_out: str) -> Result:
    ma, mb, n = _mean(a), _mean(b), min(len(a), len(b))
    estimate, second = _comparison(ctx, check, dataset, method, than, a, b)
    evidence = _better_evidence(estimate, second, ma, mb, n, check.lower_is_better)
    return _pair_result(check, ctx, dataset, method, than, n, evidence,
                        f"{check.metric} {_fmt_vs(ma, mb)} ({_seeds_text(n, ctx)}{left_out})")


def _table_better(check: Check, ctx: Context) -> list[Result]:
    out = []
    for dataset in check.datasets:
        rows = _table_rows(check, ctx, dataset)
        if rows is None:
            out.append(_missing(check.label or dataset, f"`{check.table}` for {dataset}"))
            continue
        groups = [(None, rows)] if not check.per else [(g, r) for g, r in rows.groupby(check.per, sort=True)]
        for group, part in groups:
            method = next((m for m in check.method if _table_seeds(part, check.metric or "", m)), None)
            than = next((m for m in check.than if _table_seeds(part, check.metric or "", m)), None)
            where = dataset if group is None else f"{dataset}, {check.per} {group}"
            if method is None or than is None:
                out.append(_pair_missing(check, where, method, than, ctx.records))
                continue
            a, b = _table_seeds(part, check.metric or "", method), _table_seeds(part, check.metric or "", than)
            seeded = "seed" in part.columns
            left_out = ""
            if seeded:
                a, b, left_out = matched_seeds(a, b, method, than)
            ma, mb = _mean(a), _mean(b)
            n = min(len(a), len(b))
            # as a run-record check: a paired test over the seeds where the table keeps them
            common = sorted(set(a) & set(b)) if seeded else []
            estimate = paired_estimate([a[s] for s in common], [b[s] for s in common],
                                       f"paired t-test over {len(common)} seeds") if seeded else None
            evidence = _better_evidence(estimate, "", ma, mb, n if seeded else 1, check.lower_is_better)
            detail = f" ({_seeds_text(n, ctx)}{left_out})" if seeded else table_seed_counts(part, method, than)
            out.append(Result(label=f"{where}: `{method}` vs `{than}`" + (f" ({check.label})" if check.label else ""),
                              status=_tested(INCONCLUSIVE, evidence),
                              place=f"{where} {check.label}" if check.label else where,
                              numbers=f"{check.metric} {_fmt_vs(ma, mb)}{detail}", evidence=evidence,
                              seeds=ctx.seed_pair(n) if seeded else None,
                              stand_in=ctx.stand_in(dataset)))
    return out


def _check_relative_change(check: Check, ctx: Context) -> list[Result]:
    return _per_dataset_pair(check, ctx, _relative_change_pair)


def _relative_change_pair(check: Check, ctx: Context, dataset: str, method: str, than: str, a: dict, b: dict,
                          left_out: str) -> Result:
    ma, mb, n = _mean(a), _mean(b), min(len(a), len(b))
    denominator = mb if check.denominator == "than" else ma
    change = (ma - mb) / denominator
    published, tolerance = check.published or 0.0, check.tolerance or 0.0
    direction = math.copysign(1.0, published) if published else (-1.0 if check.lower_is_better else 1.0)
    # the region the claim asks for: within the tolerance of the published change, or beyond it
    # in the claimed direction where a larger change is as good (or_better)
    low = None if check.or_better and direction < 0 else published - tolerance
    high = None if check.or_better and direction > 0 else published + tolerance
    estimate, second = _comparison(ctx, check, dataset, method, than, a, b)
    if estimate is None:
        evidence = untested(change, "relative", f"{n} seed{'s' if n != 1 else ''} and no per-user rows on both sides",
                            (low, high))
    else:
        # the difference's interval over the denominator's mean (its own noise left out)
        evidence = margin_evidence(estimate.scaled(1.0 / abs(denominator)), low, high, "relative", note=second)
    bound = f"± {tolerance:.0%}" + (" or beyond" if check.or_better else "")
    return _pair_result(check, ctx, dataset, method, than, n, evidence,
                        f"{check.metric} {_fmt_vs(ma, mb)}: {change:+.1%} against the paper's "
                        f"{published:+.2%} {bound} ({_seeds_text(n, ctx)}{left_out})")


def _series(check: Check, ctx: Context, dataset: str
            ) -> tuple[list[str], list[dict[int, float]], list[str], int] | None:
    """Names, ``{seed: value}`` per point, missing points and fewest seeds along a monotone check's
    sweep; None without a table."""
    names, points, missing, fewest = [], [], [], 10**9
    if check.along:
        rows = _table_rows(check, ctx, dataset)
        if rows is None:
            return None
        rows = rows[rows["method"].isin(check.method)]
        if rows.empty or check.metric not in rows.columns:
            return [], [], [f"`{check.method[0]}` in `{check.table}`"], 0
        for value, part in rows.groupby(check.along, sort=True):
            seeds = _table_seeds(part, check.metric or "", str(part["method"].iloc[0]))
            names.append(f"{check.along} {value:g}" if isinstance(value, (int, float)) else str(value))
            points.append(seeds)
            fewest = min(fewest, len(seeds))
        # a sweep point with no row is a missing point, not a shorter sweep
        ran = pd.to_numeric(rows[check.along], errors="coerce").dropna().to_numpy(float)
        missing += [f"{check.along} {v:g} of `{check.method[0]}` in `{check.table}`" for v in check.at
                    if not np.isclose(ran, v).any()]
        return names, points, missing, fewest
    for method in check.methods:
        seeds = ctx.records.seeds(dataset, check.split, method, check.metric or "")
        if not seeds:
            missing.append(f"`{method}`")
            continue
        names.append(f"`{method}`")
        points.append(seeds)
        fewest = min(fewest, len(seeds))
    return names, points, missing, fewest


def _against_in_seeds(before: Mapping[int, float], after: Mapping[int, float], sign: float) -> str:
    """" (against in 1 of 3 seeds)": how many of the seeds both points ran move against the direction
    (a mean's break may be one seed's outlier; the verdict stays the mean's), "" without two such seeds."""
    common = sorted(set(before) & set(after))
    if len(common) < 2:
        return ""
    against = sum((after[s] - before[s]) * sign <= 0 for s in common)
    return f" (against in {against} of {len(common)} seeds)"


def _trend_evidence(points: Sequence[Mapping[int, float]], names: Sequence[str], sign: float,
                    direction: str, min_step: float = 0.0) -> Evidence:
    """Kendall's τ of position against value over every seed's value of every point (a Mann–Kendall
    trend test); a trend in the claimed direction holds unless a step goes significantly the other
    way (a paired t-test over the seeds both points ran, uncorrected: a guard, so the stricter reading)
    by at least the claim's ``min_step`` (a smaller step is flat)."""
    trend = trend_test([[p[k] for k in sorted(p)] for p in points])
    against_steps = []
    for i in range(len(points) - 1):
        common = sorted(set(points[i]) & set(points[i + 1]))
        step = paired_estimate([points[i + 1][k] for k in common], [points[i][k] for k in common], "")
        if step is not None and step.effect * sign < 0 and step.p_value() < ALPHA and abs(step.effect) >= min_step:
            against_steps.append(f"{names[i]} → {names[i + 1]} (paired t-test over {step.n} seeds, "
                                 f"p = {step.p_value():.3g})")
    seeds = len(points[0]) if points else 0
    claimed = trend.tau * sign > 0 if math.isfinite(trend.tau) else False
    if_significant = (HOLDS if not against_steps else INCONCLUSIVE) if claimed else AGAINST
    note = (f"a step goes significantly against the trend at {', '.join(against_steps)}" if against_steps else "")
    return Evidence(effect=trend.tau, unit="tau",
                    test=f"Kendall's τ of position against value over {trend.n} values "
                         f"({len(points)} points × {seeds} seed{'s' if seeds != 1 else ''})",
                    n=trend.n, p=trend.p_value if math.isfinite(trend.p_value) else None,
                    if_significant=if_significant, target=(0.0, None) if sign > 0 else (None, 0.0),
                    note=note or ("" if math.isfinite(trend.p_value) else f"too few values for a trend test "
                                  f"({direction})"))


def _check_monotone(check: Check, ctx: Context) -> list[Result]:
    out = []
    for dataset in check.datasets:
        series = _series(check, ctx, dataset)
        label = f"{dataset}" + (f" ({check.label})" if check.label else "")
        if series is None:
            out.append(_missing(label, f"`{check.table}` for {dataset}"))
            continue
        names, points, missing, fewest = series
        if missing or len(points) < 2:
            out.append(_missing(label, ", ".join(missing or ["a second point"]) + f" on {dataset} ({check.metric})"))
            continue
        # the trend rests on the seeds every point ran (a point's extra seed would move its mean alone)
        common = set.intersection(*(set(p) for p in points))
        left_out = ""
        if common and any(set(p) != common for p in points):
            extra = sorted({k for p in points for k in p} - common)
            left_out = (f"; on the seed{'s' if len(common) > 1 else ''} every point ran "
                        f"({', '.join(map(str, sorted(common)))}), seed{'s' if len(extra) > 1 else ''} "
                        f"{', '.join(map(str, extra))} left out")
            points = [{k: p[k] for k in sorted(common)} for p in points]
            fewest = len(common)
        means = [_mean(p) for p in points]
        sign = -1.0 if check.direction == "decreasing" else 1.0
        flat = check.min_step or 0.0
        steps = [means[i + 1] - means[i] for i in range(len(means) - 1)]
        breaks = [f"{names[i]} → {names[i + 1]}" + _against_in_seeds(points[i], points[i + 1], sign)
                  for i, step in enumerate(steps) if step * sign <= 0 and abs(step) >= flat]
        flats = [f"{names[i]} → {names[i + 1]}" for i, step in enumerate(steps) if flat and abs(step) < flat]
        arrow = " > " if check.direction == "decreasing" else " < "
        numbers = f"{check.metric}: " + arrow.join(f"{_fmt(m)}" for m in means) + f" along {', '.join(names)}"
        if breaks:
            numbers += f"; not {check.direction} at {', '.join(breaks)}"
        if flats:
            numbers += f"; flat (a step under {_fmt(flat)}) at {', '.join(flats)}"
        numbers += left_out
        table = ctx.table((check.table or "").replace("{dataset}", dataset)) if check.along else None
        n = fewest if table is None or "seed" in table.columns else None
        evidence = _trend_evidence(points, names, sign, check.direction or "", flat)
        out.append(Result(label=label, status=_tested(INCONCLUSIVE, evidence), numbers=numbers, evidence=evidence,
                          place=f"{dataset} {check.label or ('along ' + check.along if check.along else check.metric)}",
                          seeds=ctx.seed_pair(n) if n is not None else None, stand_in=ctx.stand_in(dataset)))
    return out


def _correlations(ctx: Context, dataset: str, check: Check, method: str) -> dict[int, tuple[float, int]]:
    """Each seed's Spearman ρ of ``check.x`` and ``check.y`` and the rows behind it: from the record's
    table where it is kept, else from its ``metrics.json`` (:mod:`recrepro.records.correlations`)."""
    split = ctx.records.split_of(dataset, check.split, method)
    out = {}
    for seed, run_dir in sorted(ctx.records.dirs.get((dataset, split or "", method), {}).items()):
        found = rank_correlation(run_dir, check.file or "", check.x or "", check.y or "")
        if found is not None:
            out[seed] = found
    return out


def _correlation_evidence(check: Check, than: str | None, rho: Mapping[int, float], n_items: int,
                          other: Mapping[int, float] | None, other_items: int) -> Evidence:
    """ρ at least ``min`` and above ``than``'s, on Fisher's z scale: inside when both one-sided tests
    reject (the larger p), outside when either does the other way (the smaller p). Each test takes the
    larger of the items' sampling error and the seeds' spread (:func:`spearman_estimate`); ``n_items``
    are the rows behind each seed's ρ (the first seed's)."""
    seeds = sorted(rho)
    ours = spearman_estimate([rho[k] for k in seeds], n_items)
    floor = math.atanh(check.min or 0.0)
    inside, outside = [ours.p_above(floor)], [ours.p_below(floor)]
    test = ours.test
    if than is not None and other:
        diff = spearman_difference([rho[k] for k in seeds], [other[k] for k in seeds], n_items, other_items,
                                   f"`{than}`")
        inside.append(diff.p_above(0.0))
        outside.append(diff.p_below(0.0))
        # a finite df: the seeds' paired t, which names itself; else the items' normal test
        test += f"; {diff.test}" if math.isfinite(diff.df) else f", against `{than}`'s by the difference of z"
    p_in, p_out = max(inside), min(outside)
    low, high = ours.interval(0.90)
    return Evidence(effect=to_rho(ours.effect), unit="rho", test=test, n=ours.n,
                    p=p_in if p_in <= p_out else p_out, if_significant=HOLDS if p_in <= p_out else AGAINST,
                    ci=(to_rho(low), to_rho(high)), ci_level=0.90, target=(check.min, None))


def _check_correlation(check: Check, ctx: Context) -> list[Result]:
    out = []
    for dataset in check.datasets:
        found: dict[str, dict[int, tuple[float, int]]] = {}  # each method's records read once

        def first_with_records(methods: Sequence[str]) -> str | None:
            for m in methods:
                if m not in found:
                    found[m] = _correlations(ctx, dataset, check, m)
                if found[m]:
                    return m
            return None

        method = first_with_records(check.method)
        than = first_with_records(check.than) if check.than else None
        if method is None or (check.than and than is None):
            lacking = [g for ran, g in ((method, check.method), (than, check.than)) if ran is None and g]
            what = " and ".join(" or ".join(f"`{m}`" for m in g) for g in lacking)
            out.append(_missing(check.label or dataset, f"{check.file} of {what} on {dataset}"))
            continue
        rho = {seed: r for seed, (r, _) in found[method].items()}
        rows = found[method][min(found[method])][1]
        left_out, other_rho, other_rows = "", None, 0
        if than is not None:
            rho, other_rho, left_out = matched_seeds(rho, {seed: r for seed, (r, _) in found[than].items()},
                                                     method, than)
            other_rows = found[than][min(found[than])][1]
        numbers = f"Spearman ρ({check.x}, {check.y}) of `{method}` {_mean(rho):+.3f} (at least {check.min:+.2f})"
        if other_rho is not None:
            numbers += f", `{than}` {_mean(other_rho):+.3f}"
        n = len(rho)
        evidence = _correlation_evidence(check, than, rho, rows, other_rho, other_rows)
        out.append(Result(label=f"{dataset}" + (f" ({check.label})" if check.label else ""),
                          status=_tested(INCONCLUSIVE, evidence), evidence=evidence,
                          numbers=numbers + f" ({_seeds_text(n, ctx)} with the file or its ρ{left_out})",
                          seeds=ctx.seed_pair(n), stand_in=ctx.stand_in(dataset)))
    return out


def _check_waits(check: Check, ctx: Context) -> list[Result]:
    return [_missing(check.label or "protocol", check.waits_for or "")]


_CHECKS = {
    "better": _check_better, "relative_change": _check_relative_change, "monotone": _check_monotone,
    "correlation": _check_correlation, "frontier": _check_frontier, "converges": _check_converges,
    "cells": _check_cells, "beats_strongest_baseline": _check_strong_baseline, "cost": _check_cost,
    "waits": _check_waits,
}


def evaluate_check(check: Check, ctx: Context) -> list[Result]:
    """The results of one check (one per dataset, point, row or group)."""
    return _CHECKS[check.kind](check, ctx)


__all__ = ["AGAINST", "CLAIMS_COLUMNS", "CONTRADICTED", "HEADLINE_RESULTS", "HOLDS", "INCONCLUSIVE", "MIXED",
           "NOT_TESTABLE", "SIGNIFICANCE", "STRONG_BASELINES", "SUPPORTED", "VERDICT_CLASSES", "ClaimRecords",
           "ClaimsError", "Context", "Result", "evaluate_check", "never_left_initialisation"]
