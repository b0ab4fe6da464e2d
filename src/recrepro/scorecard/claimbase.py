"""The shared ground of a paper's claims' checks (:mod:`~recrepro.scorecard.claims`): a check's
:class:`Result`, the :class:`Context` the checks read (records, tables, per-user rows), the outcome and
verdict names, and the helpers every kind of check uses (pairing a method with what it is compared
with, formatting, a paired comparison's evidence)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from recrepro.evaluation.exposure import lower_is_better
from recrepro.scorecard.claimrecords import ClaimRecords, ClaimsError
from recrepro.scorecard.claimspec import Check
from recrepro.scorecard.evidence import AGAINST, HOLDS, INCONCLUSIVE, NOT_TESTABLE, Evidence, PerUser, direction_evidence, paired_comparison, untested
from recrepro.scorecard.inference import ALPHA, Estimate
from recrepro.scorecard.stats import matched_seeds


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
