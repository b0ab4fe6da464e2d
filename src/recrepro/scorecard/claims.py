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

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.evaluation.exposure import lower_is_better
from recrepro.records import read_record_json
from recrepro.scorecard.claimrecords import ClaimRecords, ClaimsError, never_left_initialisation
from recrepro.scorecard.claimspec import Check
from recrepro.scorecard.evidence import (
    AGAINST,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    Evidence,
    PerUser,
    direction_evidence,
    margin_evidence,
    paired_comparison,
    untested,
)
from recrepro.scorecard.inference import ALPHA, Estimate, paired_estimate, spearman_estimate, to_rho, trend_test
from recrepro.scorecard.stats import matched_seeds, seed_ttest_against_summary, table_seed_counts

SUPPORTED, CONTRADICTED, MIXED = "supported", "contradicted", "mixed"
#: The verdict classes the summary counts, in order.
VERDICT_CLASSES = (SUPPORTED, CONTRADICTED, MIXED, INCONCLUSIVE, NOT_TESTABLE)
CLAIMS_COLUMNS = ("paper", "id", "claim", "source", "quantifier", "verdict", "verdict_class", "provisional",
                  "short", "headline", "numbers", "why", "evidence", "deviation")
#: The level a result's (Holm-corrected) p is read at.
SIGNIFICANCE = ALPHA
#: Results the front page shows per claim (the rest are in ``claims.md``).
HEADLINE_RESULTS = 2
STRONG_BASELINES = "tables/strong_baselines.csv"


# ------------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class Result:
    """One testable unit of a check: a dataset, a point or a scorecard row."""

    label: str
    status: str  # HOLDS | AGAINST | INCONCLUSIVE | NOT_TESTABLE (a tested result's is decided after Holm)
    numbers: str = ""
    seeds: tuple[int, int] | None = None  # (seeds the result rests on, seeds the protocol runs)
    stand_in: bool = False
    place: str = ""  # a short name for a mixed verdict ("gowalla MF + SSM"); the label when empty
    capped: str = ""  # a compared run's budget note (ClaimRecords.capped): its tuned pick saw part of its grid
    on_edge: str = ""  # a win over tuned baselines of which some were picked on their grid's edge (named)
    evidence: Evidence | None = None  # a tested result's effect, interval, test and p; None: descriptive
    defect: str = ""  # the documented defect its runs are under (never support): the check's ``defect``
    p_adjusted: float | None = None  # Holm over the claim's tested results (set by the verdict)

    @property
    def provisional(self) -> bool:
        return bool(self.capped) or bool(self.on_edge) or (self.seeds is not None and self.seeds[0] < self.seeds[1])


@dataclass
class Context:
    """What the checks of one paper read: its records, files, datasets and the protocol's seed count."""

    paper: str
    results: Path  # results/<tier>/<paper>
    records: ClaimRecords
    seeds_required: int | None = None
    paper_datasets: frozenset[str] = frozenset()
    per_user: PerUser = field(default_factory=PerUser)
    _tables: dict[str, pd.DataFrame | None] = field(default_factory=dict)

    def table(self, relative: str) -> pd.DataFrame | None:
        if relative not in self._tables:
            path = self.results / relative
            if not path.is_file():
                self._tables[relative] = None
            elif path.suffix == ".parquet":
                self._tables[relative] = pd.read_parquet(path)
            else:
                self._tables[relative] = pd.read_csv(path, keep_default_na=False, na_values=[""])
        return self._tables[relative]

    def stand_in(self, dataset: str) -> bool:
        return bool(self.paper_datasets) and dataset not in self.paper_datasets

    def seed_pair(self, n: int) -> tuple[int, int] | None:
        return None if not self.seeds_required else (n, self.seeds_required)


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude != 0 and (magnitude >= 1000 or magnitude < 1e-3):
        return f"{value:.3g}"
    return f"{value:.4g}" if magnitude >= 1 else f"{value:.4f}"


def _fmt_vs(a: float, b: float) -> str:
    """``a vs b`` with both sides at one precision: a share of 1 beside 0.5387 reads ``1.0000``, not ``1``."""
    both = (a, b)
    if all(math.isfinite(v) and abs(v) < 10 for v in both) and any(abs(v) < 1 for v in both) \
            and all(v == 0 or abs(v) >= 1e-3 for v in both):
        return f"{a:.4f} vs {b:.4f}"
    return f"{_fmt(a)} vs {_fmt(b)}"


def _mean(values: Mapping[int, float]) -> float:
    return float(np.mean([values[s] for s in sorted(values)]))


def _seeds_text(n: int, ctx: Context) -> str:
    if ctx.seeds_required and n < ctx.seeds_required:
        return f"{n} of {ctx.seeds_required} seeds"
    return f"{n} seed{'s' if n != 1 else ''}"


def _status(holds: bool) -> str:
    """A descriptive check's outcome (no test): the numbers hold the claim or they do not."""
    return HOLDS if holds else AGAINST


def _tested(status_if_untested: str, evidence: Evidence | None) -> str:
    """A tested result's provisional status before the claim's correction (the verdict decides)."""
    if evidence is None:
        return status_if_untested
    return evidence.outcome(evidence.p)


def _missing(label: str, what: str) -> Result:
    return Result(label=label, status=NOT_TESTABLE, numbers=f"waits for {what}")


def _pair(check: Check, ctx: Context, dataset: str) -> tuple[str | None, str | None]:
    if check.paired:
        if len(check.method) != len(check.than):
            raise ClaimsError(f"a paired check needs method and than lists of one length: {check.method}, {check.than}")
        for method, than in zip(check.method, check.than):
            if (ctx.records.first_ran(dataset, check.split, (method,), check.metric or "")
                    and ctx.records.first_ran(dataset, check.split, (than,), check.metric or "")):
                return method, than
        return None, None  # no position has both (_pair_missing names the pairs)
    method = ctx.records.first_ran(dataset, check.split, check.method, check.metric or "")
    than = ctx.records.first_ran(dataset, check.split, check.than, check.metric or "")
    return method, than


def _pair_missing(check: Check, dataset: str, method: str | None, than: str | None,
                  records: ClaimRecords | None = None) -> Result:
    label = f"{dataset} {check.label}" if check.label else dataset
    untrained = sorted(m for m in (*check.method, *check.than)
                       if records is not None and (dataset.split(",")[0].split(" · ")[0], m) in records.untrained)
    why = (f"; {', '.join(f'`{m}`' for m in untrained)} stopped at {'its' if len(untrained) == 1 else 'their'} "
           "first evaluation, never leaving its initialisation" if untrained else "")
    if check.paired:
        pairs = " or ".join(f"`{m}` with `{t}`" for m, t in zip(check.method, check.than))
        return _missing(label, f"{pairs} on {dataset} ({check.metric}){why}")
    lacking = [" or ".join(f"`{m}`" for m in group) for ran, group in ((method, check.method), (than, check.than))
               if ran is None]
    return _missing(label, " and ".join(lacking) + f" on {dataset} ({check.metric}){why}")


def _one_run(check: Check, ctx: Context, dataset: str, method: str, than: str) -> Result:
    """Not testable: one side is a tuned pick of the other side's own run (one run, not two)."""
    picked = than if ctx.records.selected.get((dataset, method)) == than else method
    capped = ctx.records.capped(dataset, method, than)
    return _missing(f"{dataset}: `{method}` vs `{than}`" + (f" ({check.label})" if check.label else ""),
                    f"the rest of the tuned grid on {dataset}: its pick is `{picked}` itself"
                    + (f" ({capped})" if capped else ""))


def _place(dataset: str, check: Check, method: str, than: str) -> str:
    """Where a result holds, in a few words: the dataset and the check's label, else the two methods."""
    return f"{dataset} {check.label}" if check.label else f"{dataset} `{method}` vs `{than}`"


def _matched_pair(ctx: Context, check: Check, dataset: str, method: str,
                  than: str) -> tuple[dict[int, float], dict[int, float], str]:
    """Both methods' per-seed values of the check's metric on ``dataset``, over the seeds both ran
    (:func:`~recrepro.scorecard.stats.matched_seeds`)."""
    metric = check.metric or ""
    return matched_seeds(ctx.records.seeds(dataset, check.split, method, metric),
                         ctx.records.seeds(dataset, check.split, than, metric), method, than)


def _run_dirs(ctx: Context, dataset: str, split: str | None, method: str) -> dict[int, Path]:
    """``{seed: run folder}`` of ``method`` on ``dataset`` (its split as :meth:`ClaimRecords.split_of`)."""
    ran = ctx.records.split_of(dataset, split, method)
    return dict(ctx.records.dirs.get((dataset, ran or "", method), {})) if ran is not None else {}


def _comparison(ctx: Context, check: Check, dataset: str, method: str, than: str, a: Mapping[int, float],
                b: Mapping[int, float]) -> tuple[Estimate | None, str]:
    """The paired difference ``method - than`` (per user where both kept per-user rows, else per seed)."""
    return paired_comparison(a, b, check.metric or "", ctx.per_user, _run_dirs(ctx, dataset, check.split, method),
                             _run_dirs(ctx, dataset, check.split, than))


def _better_evidence(estimate: Estimate | None, second: str, ma: float, mb: float, n: int,
                     lower_is_better: bool) -> Evidence:
    if estimate is None:
        effect = (ma - mb) / abs(mb) if mb else ma - mb
        return untested(effect, "relative" if mb else "difference",
                        f"{n} seed{'s' if n != 1 else ''} and no per-user rows on both sides",
                        (None, 0.0) if lower_is_better else (0.0, None))
    return direction_evidence(estimate, mb, lower_is_better, note=second)  # type: ignore[return-value]


def _check_better(check: Check, ctx: Context) -> list[Result]:
    if check.table:
        return _table_better(check, ctx)
    out = []
    for dataset in check.datasets:
        method, than = _pair(check, ctx, dataset)
        if method is None or than is None:
            out.append(_pair_missing(check, dataset, method, than, ctx.records))
            continue
        if ctx.records.one_run(dataset, method, than):
            out.append(_one_run(check, ctx, dataset, method, than))
            continue
        a, b, left_out = _matched_pair(ctx, check, dataset, method, than)
        ma, mb = _mean(a), _mean(b)
        n = min(len(a), len(b))
        estimate, second = _comparison(ctx, check, dataset, method, than, a, b)
        evidence = _better_evidence(estimate, second, ma, mb, n, check.lower_is_better)
        label = f"{dataset}: `{method}` vs `{than}`" + (f" ({check.label})" if check.label else "")
        capped = ctx.records.capped(dataset, method, than)
        out.append(Result(label=label, status=_tested(INCONCLUSIVE, evidence), seeds=ctx.seed_pair(n),
                          stand_in=ctx.stand_in(dataset), evidence=evidence,
                          numbers=f"{check.metric} {_fmt_vs(ma, mb)} ({_seeds_text(n, ctx)}{left_out}"
                                  f"{'; ' + capped if capped else ''})",
                          place=_place(dataset, check, method, than), capped=capped))
    return out


def _table_rows(check: Check, ctx: Context, dataset: str) -> pd.DataFrame | None:
    """The rows of the check's table for ``dataset`` (``{dataset}`` in the path), filtered by ``where``."""
    table = ctx.table((check.table or "").replace("{dataset}", dataset))
    if table is None:
        return None
    for column, value in check.where:
        if column not in table.columns:
            raise ClaimsError(f"{ctx.results / (check.table or '')}: no column {column!r} for where")
        table = table[table[column] == value]
    if "dataset" in table.columns and "{dataset}" not in (check.table or ""):
        table = table[table["dataset"] == dataset]
    return table


def _table_seeds(rows: pd.DataFrame, metric: str, method: str) -> dict[int, float]:
    """``{seed: value}`` of ``method``'s ``metric`` column (a table without seeds: its mean as seed 0)."""
    rows = rows[rows["method"] == method]
    if metric not in rows.columns or rows.empty:
        return {}
    if "seed" in rows.columns:
        return {int(s): float(v) for s, v in rows.groupby("seed")[metric].mean().items()}
    return {0: float(rows[metric].mean())}


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
    out = []
    for dataset in check.datasets:
        method, than = _pair(check, ctx, dataset)
        if method is None or than is None:
            out.append(_pair_missing(check, dataset, method, than, ctx.records))
            continue
        if ctx.records.one_run(dataset, method, than):
            out.append(_one_run(check, ctx, dataset, method, than))
            continue
        a, b, left_out = _matched_pair(ctx, check, dataset, method, than)
        ma, mb = _mean(a), _mean(b)
        denominator = mb if check.denominator == "than" else ma
        change = (ma - mb) / denominator
        published, tolerance = check.published or 0.0, check.tolerance or 0.0
        direction = math.copysign(1.0, published) if published else (-1.0 if check.lower_is_better else 1.0)
        # the region the claim asks for: within the tolerance of the published change, or beyond it
        # in the claimed direction where a larger change is as good (or_better)
        low = None if check.or_better and direction < 0 else published - tolerance
        high = None if check.or_better and direction > 0 else published + tolerance
        n = min(len(a), len(b))
        estimate, second = _comparison(ctx, check, dataset, method, than, a, b)
        if estimate is None:
            evidence = untested(change, "relative", f"{n} seed{'s' if n != 1 else ''} and no per-user rows on both sides",
                                (low, high))
        else:
            # the difference's interval over the denominator's mean (its own noise left out)
            evidence = margin_evidence(estimate.scaled(1.0 / abs(denominator)), low, high, "relative", note=second)
        label = f"{dataset}: `{method}` vs `{than}`" + (f" ({check.label})" if check.label else "")
        bound = f"± {tolerance:.0%}" + (" or beyond" if check.or_better else "")
        capped = ctx.records.capped(dataset, method, than)
        out.append(Result(label=label, status=_tested(INCONCLUSIVE, evidence), seeds=ctx.seed_pair(n),
                          stand_in=ctx.stand_in(dataset), evidence=evidence,
                          place=_place(dataset, check, method, than), capped=capped,
                          numbers=f"{check.metric} {_fmt_vs(ma, mb)}: {change:+.1%} against the paper's "
                                  f"{published:+.2%} {bound} ({_seeds_text(n, ctx)}{left_out}"
                                  f"{'; ' + capped if capped else ''})"))
    return out


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


def _spearman(ctx: Context, dataset: str, check: Check, method: str) -> dict[int, float]:
    from scipy import stats

    split = ctx.records.split_of(dataset, check.split, method)
    out = {}
    for seed, run_dir in sorted(ctx.records.dirs.get((dataset, split or "", method), {}).items()):
        path = run_dir / (check.file or "")
        if path.is_file():
            frame = pd.read_parquet(path, columns=[check.x or "", check.y or ""])
            out[seed] = float(stats.spearmanr(frame[check.x], frame[check.y]).statistic)
    return out


def _items(ctx: Context, dataset: str, check: Check, method: str) -> int:
    """The rows of ``method``'s first seed's correlation file: the n of each seed's ρ."""
    split = ctx.records.split_of(dataset, check.split, method)
    dirs = ctx.records.dirs.get((dataset, split or "", method), {})
    first = next(iter(sorted(dirs.items())), None)
    return len(pd.read_parquet(first[1] / (check.file or ""), columns=[check.x or ""])) if first else 0


def _correlation_evidence(ctx: Context, dataset: str, check: Check, method: str, than: str | None,
                          rho: Mapping[int, float], other: Mapping[int, float] | None) -> Evidence:
    """ρ at least ``min`` and above ``than``'s, on Fisher's z scale: inside when both one-sided tests
    reject (the larger p), outside when either does the other way (the smaller p)."""
    from scipy import stats

    ours = spearman_estimate([rho[k] for k in sorted(rho)], _items(ctx, dataset, check, method))
    floor = math.atanh(check.min or 0.0)
    inside, outside = [ours.p_above(floor)], [ours.p_below(floor)]
    test = ours.test
    if than is not None and other:
        theirs = spearman_estimate([other[k] for k in sorted(other)], _items(ctx, dataset, check, than))
        z = (ours.effect - theirs.effect) / math.hypot(ours.se, theirs.se)
        inside.append(float(stats.norm.sf(z)))
        outside.append(float(stats.norm.cdf(z)))
        test += f", against `{than}`'s by the difference of z"
    p_in, p_out = max(inside), min(outside)
    low, high = ours.interval(0.90)
    return Evidence(effect=to_rho(ours.effect), unit="rho", test=test, n=ours.n,
                    p=p_in if p_in <= p_out else p_out, if_significant=HOLDS if p_in <= p_out else AGAINST,
                    ci=(to_rho(low), to_rho(high)), ci_level=0.90, target=(check.min, None))


def _check_correlation(check: Check, ctx: Context) -> list[Result]:
    out = []
    for dataset in check.datasets:
        method = next((m for m in check.method if _spearman(ctx, dataset, check, m)), None)
        than = next((m for m in check.than if _spearman(ctx, dataset, check, m)), None) if check.than else None
        if method is None or (check.than and than is None):
            lacking = [g for ran, g in ((method, check.method), (than, check.than)) if ran is None and g]
            what = " and ".join(" or ".join(f"`{m}`" for m in g) for g in lacking)
            out.append(_missing(check.label or dataset, f"{check.file} of {what} on {dataset}"))
            continue
        rho = _spearman(ctx, dataset, check, method)
        left_out = ""
        if than is not None:
            rho, other_rho, left_out = matched_seeds(rho, _spearman(ctx, dataset, check, than), method, than)
        value = _mean(rho)
        numbers = f"Spearman ρ({check.x}, {check.y}) of `{method}` {value:+.3f} (at least {check.min:+.2f})"
        n = len(rho)
        other = _mean(other_rho) if than is not None else None
        if other is not None:
            numbers += f", `{than}` {other:+.3f}"
        evidence = _correlation_evidence(ctx, dataset, check, method, than, rho, other_rho if than else None)
        out.append(Result(label=f"{dataset}" + (f" ({check.label})" if check.label else ""),
                          status=_tested(INCONCLUSIVE, evidence), evidence=evidence,
                          numbers=numbers + f" ({_seeds_text(n, ctx)} with the file{left_out})", seeds=ctx.seed_pair(n),
                          stand_in=ctx.stand_in(dataset)))
    return out


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


def _strong_from_records(check: Check, ctx: Context) -> list[Result]:
    """``beats_strongest_baseline`` with ``baselines``: the protocol's own simple baselines, read from
    the run records (a protocol the ranking baselines of tables/strong_baselines.csv do not fit)."""
    out = []
    metric, method = check.metric or "", check.method[0]
    for dataset in check.datasets:
        label = f"{dataset} {metric}"
        ours = ctx.records.seeds(dataset, check.split, method, metric)
        ran = {b: v for b in check.baselines if (v := ctx.records.seeds(dataset, check.split, b, metric))}
        not_run = [b for b in check.baselines if b not in ran]
        if not ours or not ran:
            what = [method] if not ours else not_run
            out.append(_missing(label, f"`{'`, `'.join(what)}` on {dataset} ({metric})"))
            continue
        sign = 1.0 if check.lower_is_better else -1.0
        best = min(ran, key=lambda b: (sign * _mean(ran[b]), b))
        ours_matched, theirs, left_out = matched_seeds(ours, ran[best], method, best)
        mo, mb = _mean(ours_matched), _mean(theirs)
        beats = mo < mb if check.lower_is_better else mo > mb
        if beats and not_run:
            out.append(_missing(label, f"`{'`, `'.join(not_run)}` on {dataset} (not run; `{method}` {_fmt(mo)} "
                                       f"beats the strongest of those run, `{best}` {_fmt(mb)})"))
            continue
        n = min(len(ours_matched), len(theirs))
        estimate, second = paired_comparison(ours_matched, theirs, metric, ctx.per_user,
                                             _run_dirs(ctx, dataset, check.split, method),
                                             _run_dirs(ctx, dataset, check.split, best))
        evidence = _better_evidence(estimate, second, mo, mb, n, check.lower_is_better)
        out.append(Result(label=label, status=_tested(INCONCLUSIVE, evidence), seeds=ctx.seed_pair(n),
                          stand_in=ctx.stand_in(dataset), evidence=evidence,
                          numbers=f"`{method}` {_fmt(mo)} vs strongest `{best}` {_fmt(mb)} "
                                  f"({_seeds_text(n, ctx)}{left_out})"))
    return out


def _arm_against_row(method: str, best: pd.Series, ctx: Context, dataset: str, split: str | None,
                     covers: bool) -> tuple[float, int, float | None, str, str] | None:
    """``method``'s seed mean on ``dataset`` from the run records, against the strongest baseline's
    table row ``best``: ``(mean, n_seeds, p_value, test name, method)``; None when it has no record."""
    seeds = ctx.records.seeds(dataset, split or None, method, str(best["metric"]))
    if not seeds:
        return None
    test = seed_ttest_against_summary(seeds, float(best["mean"]), float(best["sd"]), int(best["n_seeds"]), covers)
    n = len(seeds) if covers else min(len(seeds), int(best["n_seeds"]))
    if test is None:
        return _mean(seeds), n, None, "", method
    return _mean(seeds), n, test[0], f"{test[1]}: ", method


def _summary_evidence(ours: float, theirs: float, lower: bool, p_value: float | None, test: str, n: int,
                      note: str) -> Evidence:
    """Against a table row known by its mean (and the table's own paired test's p): the relative
    difference, no interval (the table keeps no standard error of the difference)."""
    effect = (ours - theirs) / abs(theirs) if theirs else ours - theirs
    unit = "relative" if theirs else "difference"
    target = (None, 0.0) if lower else (0.0, None)
    if p_value is None:
        return untested(effect, unit, note or f"{n} seed{'s' if n != 1 else ''}: no paired test", target)
    claimed = -1.0 if lower else 1.0
    return Evidence(effect=effect, unit=unit, test=test, n=n, p=p_value,
                    if_significant=HOLDS if effect * claimed > 0 else AGAINST, target=target)


def _check_strong_baseline(check: Check, ctx: Context) -> list[Result]:
    if check.baselines:
        return _strong_from_records(check, ctx)
    table = ctx.table(STRONG_BASELINES)
    if table is None:
        return [_missing(check.label or "every dataset",
                         f"the tuned simple baselines (`{ctx.paper}/{STRONG_BASELINES}`)")]
    need = {"dataset", "method", "metric", "mean", "n_seeds", "paper_method", "paper_mean"}
    if not need <= set(table.columns):
        raise ClaimsError(f"{ctx.results / STRONG_BASELINES}: lacks columns {sorted(need - set(table.columns))}")
    if check.datasets:
        table = table[table["dataset"].isin(check.datasets)]
    if check.split and "split" in table:
        table = table[table["split"] == check.split]
    if check.metric:
        table = table[table["metric"] == check.metric]
    if "split" not in table:
        table = table.assign(split="")
    out = []
    for (dataset, split, metric), rows in table.groupby(["dataset", "split", "metric"], sort=True):
        # a dataset with two protocols (gowalla: PRISM's random split, LightGCN's release) names its split
        where = f"{dataset} · {split}" if table.loc[table["dataset"] == dataset, "split"].nunique() > 1 else dataset
        # a labelled check (one arm of the paper's method) names its arm in the label and the verdict's groups
        label = f"{where} {metric}" + (f" ({check.label})" if check.label else "")
        place = f"{where} {check.label}" if check.label else ""
        lower = lower_is_better(str(metric))  # Gini: the strongest baseline exposes items most evenly
        ran = rows[np.isfinite(pd.to_numeric(rows["mean"], errors="coerce"))]
        # a configured baseline with no record (`not run`) may be the strongest: it can still contradict
        # the claim through another baseline, but never let it pass
        not_run = sorted(set(rows["method"]) - set(ran["method"]))
        if ran.empty:
            out.append(_missing(label, f"the tuned simple baselines on {where} ({metric})"))
            continue
        best = ran.sort_values(["mean", "method"], ascending=[lower, True]).iloc[0]
        covers = str(best.get("covers_seeds", False)).lower() == "true"
        if check.method:
            # another arm of the paper's method (e.g. the released code's switches) than the table's:
            # its run records against the strongest baseline's row, by a t-test over seeds
            arm = _arm_against_row(check.method[0], best, ctx, str(dataset), str(split) or check.split, covers)
            if arm is None:
                out.append(_missing(label, f"`{check.method[0]}` on {where} ({metric})"))
                continue
            ours, n, p_value, p_name, method = arm
        else:
            ours, method, p_name = float(best["paper_mean"]), str(best["paper_method"]), ""
            p_value = best.get("p_value")
            # the comparison rests on the fewer seeds of the two; a deterministic baseline's one run per
            # split stands for every seed (tables written before `covers_seeds` count its runs)
            theirs = int(best.get("paper_n_seeds", best["n_seeds"]))
            n = theirs if covers else min(int(best["n_seeds"]), theirs)
        if not np.isfinite(ours) or not np.isfinite(float(best["mean"])):
            # the paper's method (or the baseline) has no record on this split: nothing to compare
            out.append(_missing(label, f"`{method}` on {where} ({metric})"))
            continue
        p_text = "" if not isinstance(p_value, (int, float)) or pd.isna(p_value) else \
            (f", {p_name}p={float(p_value):.3g}" if p_value > 0 else f", {p_name}p<1e-300")
        beats = ours < float(best["mean"]) if lower else ours > float(best["mean"])
        if beats and not_run:
            out.append(_missing(label, f"`{'`, `'.join(not_run)}` on {where} (not run; "
                                f"`{method}` {_fmt(ours)} beats the strongest of those run, "
                                f"`{best['method']}` {_fmt(float(best['mean']))})"))
            continue
        test_name = p_name.rstrip(": ") or str(best.get("p_note") or "") or "the table's paired test"
        evidence = _summary_evidence(ours, float(best["mean"]), lower, float(p_value) if p_text else None,
                                     test_name, n, str(best.get("p_note") or ""))
        # a pick on its grid's edge may not be the baseline's best: the reader sees where. A loss to
        # such a baseline stands (a better point only widens it); a win over the baselines is
        # provisional while any of them was picked on an edge, since a point beyond may beat ours
        edges = best.get("pick_edges")
        edge_text = (f"; `{best['method']}`'s pick sits on its grid's edge in {edges}"
                     if isinstance(edges, str) and edges else "")
        on_edge = [f"`{r['method']}`" for _, r in ran.iterrows()
                   if isinstance(r.get("pick_edges"), str) and r["pick_edges"]] if beats else []
        out.append(Result(label=label, status=_tested(INCONCLUSIVE, evidence), place=place,
                          seeds=ctx.seed_pair(n), stand_in=ctx.stand_in(str(dataset)),
                          on_edge=", ".join(on_edge), evidence=evidence,
                          numbers=f"`{method}` {_fmt(ours)} vs strongest `{best['method']}` "
                                  f"{_fmt(float(best['mean']))} ({_seeds_text(n, ctx)}"
                                  f"{'; the baseline is deterministic: one run per split' if covers else ''}"
                                  f"{edge_text})"))
    return out or [_missing(check.label or "every dataset", f"rows of `{STRONG_BASELINES}` for this check")]


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


__all__ = ["CLAIMS_COLUMNS", "CONTRADICTED", "MIXED", "NOT_TESTABLE", "SUPPORTED", "VERDICT_CLASSES",
           "ClaimRecords", "ClaimsError", "Context", "Result", "evaluate_check", "never_left_initialisation"]
