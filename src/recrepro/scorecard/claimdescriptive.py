"""The descriptive checks of a paper's claims: a frontier of operating points, a convergence ratio, a
timing ratio or growth, published cells within their tolerance. They compare numbers with no test
(the pages say "descriptive, no test"); :mod:`~recrepro.scorecard.claims` dispatches to them."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.records import read_record_json
from recrepro.scorecard.claimbase import (
    Context,
    Result,
    _fmt,
    _mean,
    _missing,
    _seeds_text,
    _status,
)
from recrepro.scorecard.claimrecords import ClaimsError
from recrepro.scorecard.claimspec import Check


def _check_frontier(check: Check, ctx: Context) -> list[Result]:
    """Each baseline family's points against the method's curve (x lower is better, y higher is better):
    a point whose x lies within the method's range must lie on or below the curve interpolated at its x.

    The range's ends are seed means: a point outside them by no more than the end point's standard
    error over seeds (its x is the same within seed noise) is compared with the end point, never left
    out as not comparable (an iALS point 5e-6 above exADMM's highest Gini is at that Gini)."""
    out = []
    for dataset in check.datasets:
        ran = sorted(ctx.records.methods(dataset))

        def points(patterns: Sequence[str]) -> list[tuple[str, float, float, float]]:
            found = []
            for method in [m for m in ran if any(fnmatch.fnmatchcase(m, p) for p in patterns)]:
                xs = ctx.records.seeds(dataset, check.split, method, check.x or "")
                ys = ctx.records.seeds(dataset, check.split, method, check.y or "")
                if xs and ys:
                    x_se = float(np.std(list(xs.values()), ddof=1) / math.sqrt(len(xs))) if len(xs) > 1 else 0.0
                    found.append((method, _mean(xs), _mean(ys), x_se))
            return found

        curve = sorted(points(check.methods), key=lambda p: p[1])
        for family in check.baselines:
            where = f"{dataset} ({check.label})" if check.label else dataset
            label = f"{where}: `{family}` vs `{' '.join(check.methods)}`"
            others = points([family])
            if len(curve) < 2 or not others:
                out.append(_missing(label, f"two points of {check.methods} and one of `{family}` on {dataset}"))
                continue
            xs, ys = np.array([p[1] for p in curve]), np.array([p[2] for p in curve])
            beaten, above, apart = [], [], []
            for point in others:
                if any(c[1] <= point[1] and c[2] >= point[2] for c in curve):
                    beaten.append(point)  # a curve point has no more inequality and no less accuracy
                elif xs[0] - curve[0][3] <= point[1] <= xs[-1] + curve[-1][3]:  # np.interp holds the ends
                    (beaten if point[2] <= float(np.interp(point[1], xs, ys)) else above).append(point)
                else:
                    apart.append(point)
            if not beaten and not above:
                out.append(_missing(label, f"a `{family}` point comparable with the curve ({check.x} "
                                           f"{_fmt(xs[0])}–{_fmt(xs[-1])}) on {dataset}"))
                continue
            detail = ", ".join(f"`{p[0]}` ({_fmt(p[1])}, {_fmt(p[2])})" for p in above)
            out.append(Result(label=label, status=_status(not above), stand_in=ctx.stand_in(dataset),
                              place=f"{dataset} {family}" + (f", {check.label}" if check.label else ""),
                              numbers=f"{len(beaten)} of {len(beaten) + len(above)} `{family}` points at or below "
                                      f"the curve ({check.x}, {check.y})" + (f"; above it: {detail}" if detail else "")
                                      + (f"; {len(apart)} not comparable" if apart else "")))
    return out


def _check_converges(check: Check, ctx: Context) -> list[Result]:
    out = []
    for dataset in check.datasets:
        method = check.method[0]
        split = ctx.records.split_of(dataset, check.split, method)
        ratios = {}
        for seed, run_dir in sorted(ctx.records.dirs.get((dataset, split or "", method), {}).items()):
            path = run_dir / "history.json"
            if not path.is_file():
                continue
            history = read_record_json(path)
            steps = history.get(check.history or "train") if isinstance(history, dict) else history
            values = [float(s[check.series]) for s in steps or [] if check.series in s]
            if len(values) >= 2 and max(values) > 0:
                ratios[seed] = values[-1] / max(values)
        if not ratios:
            out.append(_missing(dataset, f"`{method}` with a `{check.series}` history on {dataset}"))
            continue
        worst = max(ratios.values())
        out.append(Result(label=f"{dataset}: `{method}`" + (f" ({check.label})" if check.label else ""),
                          place=f"{dataset} {check.label or check.series}",
                          status=_status(worst <= (check.max_ratio or 0.0)),
                          seeds=ctx.seed_pair(len(ratios)), stand_in=ctx.stand_in(dataset),
                          numbers=f"{check.series} of the last epoch / its peak at most {_fmt(worst)} over "
                                  f"{_seeds_text(len(ratios), ctx)} (bound {_fmt(check.max_ratio or 0.0)})"))
    return out


def _cost_points(path: Path, family: str, axis: str) -> list[dict[str, Any]]:
    """The timing record's points of ``family`` along ``axis`` (``{"records": [{"axis", "family",
    "seconds", <sizes>...}]}``, e.g. exADMM's ``scalability/<dataset>.json``), in record order."""
    rows = read_record_json(path).get("records")
    if not isinstance(rows, list):
        raise ClaimsError(f"{path}: no list of timing records under 'records'")
    return [r for r in rows if r.get("family") == family and r.get("axis") == axis and "seconds" in r]


def _cost_key(row: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Where a timing was taken (its sizes: every field but the family and the seconds)."""
    return tuple(sorted((k, v) for k, v in row.items() if k != "family" and not k.endswith("seconds")))


def _check_cost(check: Check, ctx: Context) -> list[Result]:
    """Seconds per epoch from a timing record measured in one process: ``method``'s against ``than``'s
    at every point along ``along`` (the same order: within a factor ``max_ratio`` either way), or the
    growth of ``method``'s along the size ``x`` (the log–log least-squares slope, at most
    ``max_exponent``). Both are ratios of one machine's timings, so they travel between machines as
    the absolute seconds do not."""
    out = []
    for dataset in check.datasets:
        label = f"{dataset}" + (f" ({check.label})" if check.label else "")
        place = f"{dataset} {check.label or check.along}"
        path = ctx.results / (check.file or "").format(dataset=dataset)
        method = check.method[0]
        if not path.is_file():
            out.append(_missing(label, f"the timing record `{ctx.paper}/{path.relative_to(ctx.results)}`"))
            continue
        ours = _cost_points(path, method, check.along or "")
        if check.max_ratio is not None:
            than = check.than[0]
            theirs = {_cost_key(r): float(r["seconds"]) for r in _cost_points(path, than, check.along or "")}
            ratios = [float(r["seconds"]) / theirs[_cost_key(r)] for r in ours if theirs.get(_cost_key(r), 0) > 0]
            if not ratios:
                out.append(_missing(label, f"`{method}` and `{than}` timed at the same points along {check.along}"))
                continue
            bound = check.max_ratio
            holds = all(1 / bound <= r <= bound for r in ratios)
            numbers = (f"`{method}` / `{than}` seconds per epoch {_fmt(min(ratios))}–{_fmt(max(ratios))} at "
                       f"{len(ratios)} points along {check.along} (same order: within a factor {_fmt(bound)})")
        else:
            points = [(float(r[check.x or ""]), float(r["seconds"])) for r in ours
                      if float(r.get(check.x or "", 0) or 0) > 0 and float(r["seconds"]) > 0]
            if len({x for x, _ in points}) < 2:
                out.append(_missing(label, f"`{method}` timed at two or more sizes of {check.x}"))
                continue
            xs, ys = np.log([x for x, _ in points]), np.log([y for _, y in points])
            slope = float(np.polyfit(xs, ys, 1)[0])
            holds = slope <= (check.max_exponent or 0.0)
            low, high = min(x for x, _ in points), max(x for x, _ in points)
            numbers = (f"`{method}` seconds per epoch ∝ {check.x}^{slope:.2f} over {check.x} "
                       f"{low:,.0f}–{high:,.0f} "
                       f"(log–log slope; at most {_fmt(check.max_exponent or 0.0)})")
        out.append(Result(label=label, place=place, status=_status(holds), numbers=numbers,
                          stand_in=ctx.stand_in(dataset)))
    return out


def _check_cells(check: Check, ctx: Context) -> list[Result]:
    card = ctx.table("scorecard.csv")
    if card is None:
        return [_missing(check.label or "scorecard", f"`{ctx.paper}/scorecard.csv`")]
    rows = card[card["published"].notna()] if "published" in card.columns else card.iloc[0:0]
    if check.methods:
        rows = rows[rows["method"].map(lambda m: any(fnmatch.fnmatchcase(str(m), p) for p in check.methods))]
    if check.sources:
        rows = rows[rows["source"].map(lambda s: any(x in str(s) for x in check.sources))]
    out = []
    for row in rows.to_dict("records"):
        label = f"{row['dataset']} `{row['method']}` {row['metric']}"
        if row.get("verdict") not in ("within", "deviates"):
            out.append(_missing(label, f"a run of `{row['method']}` on {row['dataset']}"))
            continue
        n = int(row["n_seeds"])
        required = row.get("seeds_required")
        seeds = (n, int(required)) if isinstance(required, (int, float)) and not pd.isna(required) else None
        out.append(Result(label=label, status=_status(row["verdict"] == "within"), seeds=seeds,
                          stand_in=ctx.stand_in(str(row["dataset"])),
                          numbers=f"{_fmt(float(row['ours_mean']))} vs {_fmt(float(row['published']))} "
                                  f"({row['verdict']})"))
    return out or [_missing(check.label or "scorecard", "a scorecard row matching the check")]
