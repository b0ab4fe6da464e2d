"""Paper-vs-ours scorecard: expected-number files, run aggregation and paired tests.

``src/recrepro/expected/<paper>.yaml`` lists the numbers a paper publishes (schema in
``src/recrepro/expected/README.md``; validated by :func:`load_expected`).
:func:`build_scorecard` reads the runs' ``metrics.json``/``per_user.parquet``, averages
each (dataset, split, method) over seeds, compares with the published numbers and
writes ``scorecard.csv`` and ``scorecard.md``.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from recrepro.io import read_json, write_text
from recrepro.records import METRICS_FILE, PROVENANCE_FILE, git_state, read_metrics, read_per_user

#: Columns of scorecard.csv, in order.
SCORECARD_COLUMNS = (
    "paper", "source", "dataset", "method", "metric", "published", "tolerance",
    "ours_mean", "ours_sd", "n_seeds", "seeds_required", "budget", "diff", "verdict", "note",
)
VERDICT_WITHIN = "within"
VERDICT_DEVIATES = "deviates"
VERDICT_NOT_RUN = "not_run"
#: Verdict of a row whose published value is null but which has runs: no comparison.
VERDICT_NOT_JUDGED = ""

#: Baseline each method is paired-tested against in "Our runs without a published value".
DEFAULT_BASELINES: Mapping[str, str] = {"mostpop": "random"}

#: Slack on the |diff| <= tolerance comparison so that a diff equal to the tolerance in
#: decimal (0.1234 - 0.1134 vs 0.01) is not lost to binary rounding.
TOLERANCE_SLACK = 1e-12

TOLERANCE_KINDS = ("abs", "rel")
ENTRY_REQUIRED_KEYS = ("source", "dataset", "method", "metric", "published")
ENTRY_OPTIONAL_KEYS = ("split", "tolerance", "tolerance_kind", "baseline", "deviation", "note")
FILE_KEYS = ("paper", "reference", "entries", "smoke_checks", "figure_points")

#: Kinds of smoke check (``smoke_checks`` in an expected file; only the smoke tier runs them).
SMOKE_CHECK_KINDS = ("ran", "greater", "less")
SMOKE_CHECK_KEYS = ("check", "claim", "source", "methods", "dataset", "split", "method", "metric", "than", "value")
VERDICT_PASS = "pass"
VERDICT_FAIL = "fail"
#: ``figure_points``: published points a figure draws whose position the entries do not give
#: (an x stated in the text, e.g. epochs to early stop).
FIGURE_POINT_REQUIRED_KEYS = ("figure", "dataset", "series", "x", "y", "source")
FIGURE_POINT_KEYS = (*FIGURE_POINT_REQUIRED_KEYS, "note")

_METRIC_KEY = re.compile(r"^(?P<base>[a-z][a-z0-9_]*(@[0-9]+)?)(\[(?P<stratum>[a-z][a-z0-9_]*)\])?$")
_ANCHOR = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")

EXPECTED_DIR = Path(__file__).resolve().parent / "expected"


class ExpectedFileError(ValueError):
    """An expected-numbers file is malformed; the message names the file and the entry."""


class ScorecardError(ValueError):
    """Runs and expected entries cannot be matched unambiguously (or a run is malformed)."""


# ---------------------------------------------------------------- expected numbers


@dataclass(frozen=True)
class ExpectedEntry:
    """One published number (see ``expected/README.md`` for the meaning of each field)."""

    source: str
    dataset: str
    method: str
    metric: str
    published: float | None
    tolerance: float | None = None
    tolerance_kind: str = "abs"
    split: str | None = None
    baseline: str | None = None
    deviation: str | None = None
    note: str | None = None

    def absolute_tolerance(self) -> float | None:
        """Tolerance in metric units (``rel`` tolerances are scaled by |published|)."""
        if self.tolerance is None or self.published is None:
            return None
        if self.tolerance_kind == "rel":
            return self.tolerance * abs(self.published)
        return self.tolerance


@dataclass(frozen=True)
class SmokeCheck:
    """What the smoke tier can check on synthetic data (``smoke_checks`` in ``expected/<paper>.yaml``).

    ``ran``: every method of ``methods`` has a run whose metrics are all finite.
    ``greater`` / ``less``: the seed mean of ``method``'s ``metric`` on ``dataset`` is above /
    below that of method ``than`` (or the number ``value``): a qualitative ordering of the paper
    that is expected to hold even on the smoke tier's synthetic data.
    """

    check: str
    claim: str
    source: str | None = None
    methods: tuple[str, ...] = ()
    dataset: str | None = None
    split: str | None = None
    method: str | None = None
    metric: str | None = None
    than: str | None = None
    value: float | None = None


@dataclass(frozen=True)
class FigurePoint:
    """A published point a figure draws (``figure_points``): its x comes from the paper's text."""

    figure: str
    dataset: str
    series: str
    x: float
    y: float
    source: str
    note: str | None = None


@dataclass(frozen=True)
class ExpectedFile:
    """A validated ``expected/<paper>.yaml``."""

    path: Path
    paper: str
    reference: str | None
    entries: tuple[ExpectedEntry, ...]
    smoke_checks: tuple[SmokeCheck, ...] = ()
    figure_points: tuple[FigurePoint, ...] = ()


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (PyYAML silently keeps the last)."""


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def parse_metric_key(metric: str) -> tuple[str, str | None]:
    """Split ``"ndcg@20[popular]"`` into ``("ndcg@20", "popular")``; ``("auc", None)`` for ``"auc"``.

    Raises
    ------
    ValueError
        If the key is not ``name``, ``name@k`` or either followed by ``[stratum]``.
    """
    match = _METRIC_KEY.match(metric)
    if match is None:
        raise ValueError(f"metric key {metric!r} is not of the form name@k or name@k[stratum]")
    return match.group("base"), match.group("stratum")


def _number(value: Any, what: str) -> float:
    if isinstance(value, str):
        hint = ""
        if re.fullmatch(r"[-+]?\d+[eE][-+]?\d+", value.strip()):
            hint = " (YAML 1.1 reads an exponent without a decimal point as text: write e.g. 1.0e-4)"
        raise ValueError(f"{what} must be a number, got the string {value!r}{hint}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return float(value)


def _entry_from_mapping(raw: Any) -> ExpectedEntry:
    if not isinstance(raw, dict):
        raise ValueError(f"must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(ENTRY_REQUIRED_KEYS) - set(ENTRY_OPTIONAL_KEYS))
    if unknown:
        raise ValueError(f"unknown keys {unknown} (allowed: {sorted(ENTRY_REQUIRED_KEYS + ENTRY_OPTIONAL_KEYS)})")
    missing = [key for key in ENTRY_REQUIRED_KEYS if key not in raw]
    if missing:
        raise ValueError(f"missing keys {missing} (published may be null, but must be present)")
    for key in ("source", "dataset", "method", "metric", "split", "baseline", "deviation", "note"):
        if key in raw and raw[key] is not None and not isinstance(raw[key], str):
            raise ValueError(f"{key} must be a string, got {type(raw[key]).__name__} {raw[key]!r}")
    for key in ("source", "dataset", "method", "metric"):
        if not raw[key].strip():
            raise ValueError(f"{key} must not be empty")
    for key in ("dataset", "method", "split", "baseline"):
        if raw.get(key) is not None and not _NAME.match(raw[key]):
            raise ValueError(f"{key} {raw[key]!r} is not a plain name (letters, digits, _ . + -)")
    parse_metric_key(raw["metric"])

    published = None if raw["published"] is None else _number(raw["published"], "published")
    tolerance = None if raw.get("tolerance") is None else _number(raw["tolerance"], "tolerance")
    if tolerance is not None and tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    if published is not None and tolerance is None:
        raise ValueError("a published value needs a tolerance")
    tolerance_kind = raw.get("tolerance_kind", "abs")
    if tolerance_kind not in TOLERANCE_KINDS:
        raise ValueError(f"tolerance_kind must be one of {list(TOLERANCE_KINDS)}, got {tolerance_kind!r}")
    if raw.get("baseline") is not None and raw["baseline"] == raw["method"]:
        raise ValueError("baseline must differ from method")
    deviation = raw.get("deviation")
    if deviation is not None:
        deviation = deviation.removeprefix("#")
        if not _ANCHOR.match(deviation):
            raise ValueError(f"deviation {raw['deviation']!r} is not a markdown anchor (lower-case, digits, - _)")
    return ExpectedEntry(
        source=raw["source"], dataset=raw["dataset"], method=raw["method"], metric=raw["metric"],
        published=published, tolerance=tolerance, tolerance_kind=tolerance_kind, split=raw.get("split"),
        baseline=raw.get("baseline"), deviation=deviation, note=raw.get("note"),
    )


def _smoke_check_from_mapping(raw: Any) -> SmokeCheck:
    if not isinstance(raw, dict):
        raise ValueError(f"must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(SMOKE_CHECK_KEYS))
    if unknown:
        raise ValueError(f"unknown keys {unknown} (allowed: {sorted(SMOKE_CHECK_KEYS)})")
    kind = raw.get("check")
    if kind not in SMOKE_CHECK_KINDS:
        raise ValueError(f"check must be one of {list(SMOKE_CHECK_KINDS)}, got {kind!r}")
    if not isinstance(raw.get("claim"), str) or not raw["claim"].strip():
        raise ValueError("claim (what the check shows, in words) must be a non-empty string")
    for key in ("source", "dataset", "split", "method", "metric", "than"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise ValueError(f"{key} must be a string, got {type(raw[key]).__name__} {raw[key]!r}")
    for key in ("dataset", "split", "method", "than"):
        if raw.get(key) is not None and not _NAME.match(raw[key]):
            raise ValueError(f"{key} {raw[key]!r} is not a plain name (letters, digits, _ . + -)")
    if kind == "ran":
        methods = raw.get("methods")
        if not isinstance(methods, list) or not methods or not all(isinstance(m, str) and _NAME.match(m)
                                                                    for m in methods):
            raise ValueError("a 'ran' check needs methods: a non-empty list of method names")
        extra = sorted(k for k in ("dataset", "split", "method", "metric", "than", "value") if k in raw)
        if extra:
            raise ValueError(f"a 'ran' check takes no {extra}")
        return SmokeCheck(check=kind, claim=raw["claim"], source=raw.get("source"), methods=tuple(methods))
    missing = [k for k in ("dataset", "method", "metric") if not raw.get(k)]
    if missing:
        raise ValueError(f"a '{kind}' check needs {missing}")
    if "methods" in raw:
        raise ValueError(f"a '{kind}' check takes method (one), not methods")
    parse_metric_key(raw["metric"])
    if (raw.get("than") is None) == (raw.get("value") is None):
        raise ValueError(f"a '{kind}' check compares with either than (a method) or value (a number)")
    if raw.get("than") == raw["method"]:
        raise ValueError("than must differ from method")
    value = None if raw.get("value") is None else _number(raw["value"], "value")
    return SmokeCheck(check=kind, claim=raw["claim"], source=raw.get("source"), dataset=raw["dataset"],
                      split=raw.get("split"), method=raw["method"], metric=raw["metric"], than=raw.get("than"),
                      value=value)


def _figure_point_from_mapping(raw: Any) -> FigurePoint:
    if not isinstance(raw, dict):
        raise ValueError(f"must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(FIGURE_POINT_KEYS))
    if unknown:
        raise ValueError(f"unknown keys {unknown} (allowed: {sorted(FIGURE_POINT_KEYS)})")
    missing = [key for key in FIGURE_POINT_REQUIRED_KEYS if key not in raw]
    if missing:
        raise ValueError(f"missing keys {missing}")
    for key in ("figure", "dataset", "series", "source", "note"):
        if raw.get(key) is not None and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise ValueError(f"{key} must be a non-empty string")
    return FigurePoint(figure=raw["figure"], dataset=raw["dataset"], series=raw["series"],
                       x=_number(raw["x"], "x"), y=_number(raw["y"], "y"), source=raw["source"], note=raw.get("note"))


def _validated_list(path: Path, document: Mapping[str, Any], key: str, parse) -> tuple:
    raw_items = document.get(key, [])
    if not isinstance(raw_items, list):
        raise ExpectedFileError(f"{path}: '{key}' must be a list (leave it out for none)")
    items = []
    for index, raw in enumerate(raw_items):
        try:
            items.append(parse(raw))
        except ValueError as error:
            raise ExpectedFileError(f"{path}: {key}[{index}]: {error}") from error
    return tuple(items)


def load_expected(path: str | Path) -> ExpectedFile:
    """Load and validate an expected-numbers file.

    Parameters
    ----------
    path:
        ``expected/<paper>.yaml``: a mapping with ``paper`` (str), optional
        ``reference`` (str), ``entries`` (a list; may be empty), and optional
        ``smoke_checks`` (:class:`SmokeCheck`) and ``figure_points`` (:class:`FigurePoint`).

    Raises
    ------
    ExpectedFileError
        Naming the file and, for a bad entry, its 0-based index (``entries[3]``) with its
        source/method/metric when readable, and what is wrong.
    """
    path = Path(path)
    try:
        document = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except OSError as error:
        raise ExpectedFileError(f"{path}: cannot read ({error})") from error
    except yaml.YAMLError as error:
        raise ExpectedFileError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(document, dict):
        raise ExpectedFileError(f"{path}: top level must be a mapping with keys {list(FILE_KEYS)}")
    unknown = sorted(set(document) - set(FILE_KEYS))
    if unknown:
        raise ExpectedFileError(f"{path}: unknown top-level keys {unknown} (allowed: {list(FILE_KEYS)})")
    paper = document.get("paper")
    if not isinstance(paper, str) or not paper:
        raise ExpectedFileError(f"{path}: 'paper' must be a non-empty string")
    reference = document.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise ExpectedFileError(f"{path}: 'reference' must be a string")
    raw_entries = document.get("entries")
    if not isinstance(raw_entries, list):
        raise ExpectedFileError(f"{path}: 'entries' must be a list (use [] for none)")

    entries: list[ExpectedEntry] = []
    seen: dict[tuple, int] = {}
    for index, raw in enumerate(raw_entries):
        label = _entry_label(index, raw)
        try:
            entry = _entry_from_mapping(raw)
        except ValueError as error:
            raise ExpectedFileError(f"{path}: {label}: {error}") from error
        identity = (entry.source, entry.dataset, entry.split, entry.method, entry.metric)
        if identity in seen:
            raise ExpectedFileError(
                f"{path}: {label}: duplicates entries[{seen[identity]}] "
                "(same source, dataset, split, method and metric)"
            )
        seen[identity] = index
        entries.append(entry)
    smoke_checks = _validated_list(path, document, "smoke_checks", _smoke_check_from_mapping)
    figure_points = _validated_list(path, document, "figure_points", _figure_point_from_mapping)
    return ExpectedFile(path=path, paper=paper, reference=reference, entries=tuple(entries),
                        smoke_checks=smoke_checks, figure_points=figure_points)


def _entry_label(index: int, raw: Any) -> str:
    if isinstance(raw, dict):
        described = ", ".join(f"{key}={raw[key]!r}" for key in ("source", "method", "metric") if key in raw)
        if described:
            return f"entries[{index}] ({described})"
    return f"entries[{index}]"


def expected_path(paper: str) -> Path:
    """Path of the packaged expected-numbers file of ``paper``."""
    return EXPECTED_DIR / f"{paper}.yaml"


def published_values(paper: str, path: str | Path | None = None) -> dict[tuple[str, str | None, str, str], float]:
    """The published numbers of ``paper`` for figures to overlay: ``{(dataset, split, method, metric): value}``.

    Only entries with a published value (anchors without one and ``null`` rows are left out).
    ``path`` defaults to the packaged ``expected/<paper>.yaml``.
    """
    expected = load_expected(path if path is not None else expected_path(paper))
    return {(e.dataset, e.split, e.method, e.metric): float(e.published)
            for e in expected.entries if e.published is not None}


def published_value(values: Mapping[tuple[str, str | None, str, str], float], dataset: str, method: str,
                    metric: str) -> float | None:
    """The one published value of (dataset, method, metric) in :func:`published_values`, any split; else None."""
    found = [v for (d, _, m, k), v in values.items() if (d, m, k) == (dataset, method, metric)]
    return found[0] if len(found) == 1 else None


def figure_points(paper: str, figure: str, dataset: str, path: str | Path | None = None) -> list[FigurePoint]:
    """The ``figure_points`` of ``paper`` for one figure (e.g. ``fig4_epochs``) on one dataset."""
    expected = load_expected(path if path is not None else expected_path(paper))
    return [p for p in expected.figure_points if p.figure == figure and p.dataset == dataset]


# --------------------------------------------------------------------------- runs


def find_run_dirs(runs_root: str | Path) -> list[Path]:
    """Run directories (those holding metrics.json) under ``runs_root``, sorted."""
    return sorted(path.parent for path in Path(runs_root).rglob(METRICS_FILE))


def load_runs(run_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy table of all metric values of the given runs.

    Returns
    -------
    DataFrame
        Columns ``dataset, split, method, seed, metric, value, tier, run_dir``; one row
        per run and metric, stratified metrics as ``"ndcg@20[popular]"``.

    Raises
    ------
    ScorecardError
        A metrics.json lacks identity keys, or two runs claim the same
        (dataset, split, method, seed).
    """
    rows: list[dict[str, Any]] = []
    owners: dict[tuple, Path] = {}
    for run_dir in map(Path, run_dirs):
        metrics = read_metrics(run_dir)
        missing = [key for key in ("dataset", "split", "method", "seed", "tier", "overall") if key not in metrics]
        if missing:
            raise ScorecardError(f"{run_dir / METRICS_FILE}: lacks {missing}")
        identity = (metrics["dataset"], metrics["split"], metrics["method"], int(metrics["seed"]))
        if identity in owners:
            raise ScorecardError(f"{run_dir} and {owners[identity]} are both {identity}")
        owners[identity] = run_dir
        values = dict(metrics["overall"])
        for stratum, stratum_metrics in (metrics.get("strata") or {}).items():
            values.update({f"{key}[{stratum}]": value for key, value in stratum_metrics.items()})
        for metric, value in values.items():
            rows.append({
                "dataset": identity[0], "split": identity[1], "method": identity[2], "seed": identity[3],
                "metric": metric, "value": float(value), "tier": metrics["tier"],
                "paper": metrics.get("paper"), "run_dir": str(run_dir), "budget": run_budget(metrics),
            })
    columns = ["dataset", "split", "method", "seed", "metric", "value", "tier", "paper", "run_dir", "budget"]
    return pd.DataFrame(rows, columns=columns)


def run_budget(metrics: Mapping[str, Any]) -> str:
    """How a run's compute budget was cut, in words (``""``: the protocol's full budget).

    A run says so itself: a ``budget`` string, or the ``round_cap`` / ``epoch_cap`` its
    settings applied (FedRAP, λOpt), with the rounds or epochs it trained.
    """
    if metrics.get("budget"):
        return str(metrics["budget"])
    for cap_key, done_key, unit in (("round_cap", "rounds_trained", "rounds"), ("epoch_cap", "epochs_run", "epochs")):
        cap = metrics.get(cap_key)
        if cap:
            done = metrics.get(done_key) or (metrics.get("counts") or {}).get(done_key)
            return f"capped at {int(cap)} {unit}" + (f" ({int(done)} trained)" if done else "")
    return ""


def records_stamp(run_dirs: Iterable[str | Path]) -> tuple[str | None, list[str], bool]:
    """(latest finish date, code commits, any dirty) of the runs' ``provenance.json``.

    A scorecard built from the same records is then the same file on every machine and
    day: its header names the records, not the moment it was drawn.
    """
    dates, commits, dirty = [], set(), False
    for run_dir in map(Path, run_dirs):
        path = run_dir / PROVENANCE_FILE
        if not path.is_file():
            continue
        prov = read_json(path)
        if prov.get("finished_at"):
            dates.append(str(prov["finished_at"])[:10])
        git = prov.get("git") or {}
        if git.get("commit"):
            commits.add(str(git["commit"])[:12])
        dirty = dirty or bool(git.get("dirty"))
    return (max(dates) if dates else None), sorted(commits), dirty


def summarise_runs(tidy: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample sd (ddof=1; NaN for one seed) and seed count per (dataset, split, method, metric)."""
    keys = ["dataset", "split", "method", "metric"]
    if tidy.empty:
        return pd.DataFrame(columns=[*keys, "mean", "sd", "n_seeds"])
    grouped = tidy.groupby(keys, sort=True)["value"]
    summary = grouped.agg(mean="mean", sd=lambda v: v.std(ddof=1) if len(v) > 1 else np.nan, n_seeds="count")
    return summary.reset_index()


# -------------------------------------------------------------------- paired tests


@dataclass(frozen=True)
class PairedTest:
    """Result of one paired significance test of ``method`` against ``baseline``."""

    kind: str  # "ttest_seeds" or "wilcoxon_users"
    dataset: str
    split: str
    method: str
    baseline: str
    metric: str
    n_pairs: int
    statistic: float
    p_value: float
    mean_diff: float
    seed: int | None = None  # the seed whose per-user values were paired (Wilcoxon)

    def describe(self) -> str:
        """One-line description for the scorecard note."""
        p_text = "undefined (differences constant)" if math.isnan(self.p_value) else f"{self.p_value:.3g}"
        if self.kind == "ttest_seeds":
            what = f"paired t-test over {self.n_pairs} seeds vs {self.baseline}"
        else:
            what = f"Wilcoxon signed-rank over {self.n_pairs} users (seed {self.seed}) vs {self.baseline}"
        return f"{what}: p={p_text}, mean diff {self.mean_diff:+.4g}"


def paired_seed_ttest(ours: Mapping[int, float], baseline: Mapping[int, float]) -> tuple[int, float, float, float] | None:
    """``scipy.stats.ttest_rel`` over the seeds both methods ran (needs >= 2).

    Returns
    -------
    tuple or None
        ``(n_pairs, statistic, p_value, mean_diff)``; ``None`` with fewer than 2 shared seeds.
    """
    from scipy import stats

    seeds = sorted(set(ours) & set(baseline))
    if len(seeds) < 2:
        return None
    ours_values = np.array([ours[s] for s in seeds], dtype=np.float64)
    baseline_values = np.array([baseline[s] for s in seeds], dtype=np.float64)
    with warnings.catch_warnings():
        # Constant differences give nan (reported as undefined), not an exception.
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.ttest_rel(ours_values, baseline_values)
    return len(seeds), float(result.statistic), float(result.pvalue), float(np.mean(ours_values - baseline_values))


def paired_user_wilcoxon(ours: pd.DataFrame, baseline: pd.DataFrame, metric: str) -> tuple[int, float, float, float] | None:
    """``scipy.stats.wilcoxon`` (two-sided, zero differences dropped) over shared users.

    Returns
    -------
    tuple or None
        ``(n_pairs, statistic, p_value, mean_diff)``; ``None`` when either frame lacks
        the metric or they share no user with finite values.
    """
    from scipy import stats

    if metric not in ours.columns or metric not in baseline.columns:
        return None
    paired = ours[["user", metric]].merge(baseline[["user", metric]], on="user", suffixes=("_ours", "_base"))
    paired = paired.dropna().sort_values("user")
    if paired.empty:
        return None
    ours_values = paired[f"{metric}_ours"].to_numpy(np.float64)
    baseline_values = paired[f"{metric}_base"].to_numpy(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            result = stats.wilcoxon(ours_values, baseline_values)
            statistic, p_value = float(result.statistic), float(result.pvalue)
        except ValueError:  # all differences zero in some scipy versions
            statistic, p_value = math.nan, math.nan
    return len(paired), statistic, p_value, float(np.mean(ours_values - baseline_values))


class _RunIndex:
    """Seeds, values and per-user frames of the loaded runs, looked up by identity."""

    def __init__(self, tidy: pd.DataFrame) -> None:
        self.tidy = tidy
        self._per_user: dict[str, pd.DataFrame | None] = {}
        self._values: dict[tuple[str, str, str, str], dict[int, float]] = {}
        self._run_dirs: dict[tuple[str, str, str, int], str] = {}
        self._budgets: dict[tuple[str, str, str], set[str]] = {}
        for row in tidy.itertuples(index=False):
            self._values.setdefault((row.dataset, row.split, row.method, row.metric), {})[row.seed] = row.value
            self._run_dirs[(row.dataset, row.split, row.method, row.seed)] = row.run_dir
            if row.budget:
                self._budgets.setdefault((row.dataset, row.split, row.method), set()).add(row.budget)

    def budget(self, dataset: str, split: str, method: str) -> str:
        """The caps of the cell's runs in words (``""``: every run had the full budget)."""
        return "; ".join(sorted(self._budgets.get((dataset, split, method), ())))

    def splits_of(self, dataset: str, method: str) -> list[str]:
        rows = self.tidy[(self.tidy["dataset"] == dataset) & (self.tidy["method"] == method)]
        return sorted(rows["split"].unique())

    def has_runs(self, dataset: str, split: str, method: str) -> bool:
        return any(key[:3] == (dataset, split, method) for key in self._run_dirs)

    def values(self, dataset: str, split: str, method: str, metric: str) -> dict[int, float]:
        return self._values.get((dataset, split, method, metric), {})

    def per_user(self, dataset: str, split: str, method: str, seed: int) -> pd.DataFrame | None:
        run_dir = self._run_dirs.get((dataset, split, method, seed))
        if run_dir is None:
            return None
        if run_dir not in self._per_user:
            self._per_user[run_dir] = read_per_user(run_dir)
        return self._per_user[run_dir]

    def paired_tests(self, dataset: str, split: str, method: str, baseline: str, metric: str) -> list[PairedTest]:
        ours = self.values(dataset, split, method, metric)
        base = self.values(dataset, split, baseline, metric)
        common = dict(dataset=dataset, split=split, method=method, baseline=baseline, metric=metric)
        tests: list[PairedTest] = []
        seed_test = paired_seed_ttest(ours, base)
        if seed_test is not None:
            n, statistic, p_value, mean_diff = seed_test
            tests.append(PairedTest("ttest_seeds", n_pairs=n, statistic=statistic, p_value=p_value,
                                    mean_diff=mean_diff, **common))
        _, stratum = parse_metric_key(metric)
        if stratum is None:  # per_user.parquet has no stratified columns
            for seed in sorted(set(ours) & set(base)):
                ours_frame = self.per_user(dataset, split, method, seed)
                base_frame = self.per_user(dataset, split, baseline, seed)
                if ours_frame is None or base_frame is None:
                    continue
                user_test = paired_user_wilcoxon(ours_frame, base_frame, metric)
                if user_test is not None:
                    n, statistic, p_value, mean_diff = user_test
                    tests.append(PairedTest("wilcoxon_users", n_pairs=n, statistic=statistic, p_value=p_value,
                                            mean_diff=mean_diff, seed=seed, **common))
                    break  # the lowest shared seed stands for all; one line per row is enough
        return tests


# ----------------------------------------------------------------------- scorecard


@dataclass(frozen=True)
class Scorecard:
    """What :func:`build_scorecard` computed (also written to csv/md)."""

    rows: pd.DataFrame  # exactly SCORECARD_COLUMNS
    unmatched: pd.DataFrame  # our runs without an expected entry
    tests: list[PairedTest] = field(default_factory=list)


def _markdown_anchors(doc: Path) -> set[str] | None:
    """Anchors of a markdown file: GitHub heading slugs and explicit ``<a id=...>``/``{#...}``."""
    if not doc.is_file():
        return None
    anchors: set[str] = set()
    for line in doc.read_text().splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            text = re.sub(r"\{#([^}]+)\}\s*$", "", heading.group(1)).strip()
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            anchors.add(slug)
        anchors.update(re.findall(r"""<a\s+(?:id|name)=["']([^"']+)["']""", line))
        anchors.update(re.findall(r"\{#([^}]+)\}", line))
    return anchors


def _resolve_split(entry: ExpectedEntry, runs: _RunIndex) -> str | None:
    if entry.split is not None:
        return entry.split
    splits = runs.splits_of(entry.dataset, entry.method)
    if len(splits) > 1:
        raise ScorecardError(
            f"expected entry {entry.source}/{entry.dataset}/{entry.method}/{entry.metric} has no split, "
            f"but runs exist for splits {splits}; give the entry a split"
        )
    return splits[0] if splits else None


def _md_cell(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


SMOKE_TIER = "smoke"


def _seed_stats(values: Mapping[int, float]) -> tuple[float, float, int]:
    array = np.array([values[s] for s in sorted(values)], dtype=np.float64)
    if not array.size:
        return math.nan, math.nan, 0
    return float(array.mean()), float(array.std(ddof=1)) if array.size > 1 else math.nan, int(array.size)


def smoke_check_rows(paper: str, checks: Sequence[SmokeCheck], runs: _RunIndex,
                     seeds_required: int | None = None) -> tuple[list[dict[str, Any]], list[list[str]]]:
    """Evaluate the smoke checks on the runs: csv rows (:data:`SCORECARD_COLUMNS`) and markdown rows.

    A ``ran`` check gives one csv row per method (``metric`` "(all finite)") and one markdown
    row; an ordering check one row each. Verdict ``pass`` or ``fail`` (a missing run fails).
    ``ours_mean`` is the seed mean of the check's method, ``diff`` its distance to what it is
    compared with (positive: above).
    """
    csv_rows: list[dict[str, Any]] = []
    md_rows: list[list[str]] = []
    tidy = runs.tidy

    def csv_row(check: SmokeCheck, **fields: Any) -> dict[str, Any]:
        row = {"paper": paper, "source": "smoke check" + (f" ({check.source})" if check.source else ""),
               "dataset": "", "method": "", "metric": "", "published": math.nan, "tolerance": math.nan,
               "ours_mean": math.nan, "ours_sd": math.nan, "n_seeds": 0,
               "seeds_required": seeds_required if seeds_required else math.nan, "budget": "", "diff": math.nan,
               "verdict": VERDICT_FAIL, "note": check.claim}
        row.update(fields)
        return row

    for check in checks:
        if check.check == "ran":
            cells, failed = [], []
            for method in check.methods:
                sub = tidy[tidy["method"] == method]
                values = sub["value"].to_numpy(dtype=np.float64)
                n_runs = int(sub["run_dir"].nunique())
                finite = bool(n_runs) and bool(np.isfinite(values).all())
                if not n_runs:
                    detail = "no run"
                elif finite:
                    detail = f"{n_runs} run(s), {len(sub)} metric values, all finite"
                else:
                    detail = "non-finite " + ", ".join(sorted(set(sub.loc[~np.isfinite(values), "metric"])))
                csv_rows.append(csv_row(check, dataset=", ".join(sorted(set(sub["dataset"]))), method=method,
                                        metric="(all finite)", n_seeds=int(sub["seed"].nunique()),
                                        verdict=VERDICT_PASS if finite else VERDICT_FAIL,
                                        note=f"{check.claim}; {detail}"))
                cells.append(f"{method} ({n_runs})")
                if not finite:
                    failed.append(f"{method}: {detail}")
            datasets = ", ".join(sorted(set(tidy[tidy["method"].isin(check.methods)]["dataset"]))) or "–"
            md_rows.append([
                "ran", _md_cell(check.claim + (f" ({check.source})" if check.source else "")), _md_cell(datasets),
                _md_cell(", ".join(cells)), "all finite", f"{len(check.methods) - len(failed)} of "
                f"{len(check.methods)} methods (runs)", "",
                f"**{VERDICT_FAIL}**: " + _md_cell("; ".join(failed)) if failed else VERDICT_PASS,
            ])
            continue
        split = check.split
        if split is None:
            splits = runs.splits_of(check.dataset, check.method)
            split = splits[0] if len(splits) == 1 else None
        mean, sd, n_seeds = _seed_stats(runs.values(check.dataset, split, check.method, check.metric) if split else {})
        if check.than is not None:
            other, _, n_other = _seed_stats(runs.values(check.dataset, split, check.than, check.metric)
                                            if split else {})
            other_text = f"{check.than} {other:.4f}" if n_other else f"{check.than}: no run"
        else:
            other, n_other = float(check.value), 1
            other_text = f"{check.value:g}"
        symbol = ">" if check.check == "greater" else "<"
        passed = bool(n_seeds and n_other) and (mean > other if check.check == "greater" else mean < other)
        if n_seeds and n_other:
            detail = f"{check.method} {mean:.4f} {symbol} {other_text}: {'yes' if passed else 'no'}"
        else:
            detail = f"no run of {check.method} on {check.dataset}" if not n_seeds else other_text
        verdict = VERDICT_PASS if passed else VERDICT_FAIL
        csv_rows.append(csv_row(check, dataset=check.dataset, method=check.method, metric=check.metric,
                                ours_mean=mean, ours_sd=sd, n_seeds=n_seeds,
                                diff=mean - other if (n_seeds and n_other) else math.nan, verdict=verdict,
                                note=f"{check.claim}; {detail}"))
        md_rows.append([
            check.check, _md_cell(check.claim + (f" ({check.source})" if check.source else "")),
            _md_cell(check.dataset), _md_cell(check.method), _md_cell(check.metric), _md_cell(mean),
            _md_cell(f"{symbol} {other_text}"), VERDICT_PASS if passed else f"**{VERDICT_FAIL}**",
        ])
    return csv_rows, md_rows


def build_scorecard(
    paper: str,
    tier: str,
    expected_path: str | Path,
    run_dirs: Sequence[str | Path],
    out_md: str | Path,
    out_csv: str | Path,
    deviations_doc: str | Path = "docs/deviations.md",
    *,
    default_baselines: Mapping[str, str] = DEFAULT_BASELINES,
    generated_on: dt.date | None = None,
    seeds_required: int | None = None,
) -> Scorecard:
    """Compare our runs with a paper's published numbers; write scorecard.csv and .md.

    Parameters
    ----------
    paper:
        Paper key (``exadmm``, ..., or ``baselines``); must match the expected file.
    tier:
        Tier of the runs (``smoke``, ...); every run must carry it. For ``smoke`` the
        markdown says in bold that the numbers are not comparable to the paper's, points to
        the committed paper-tier scorecard, shows the paper's smoke checks
        (:func:`smoke_check_rows`, also appended to the csv) and collapses the ``not_run``
        rows of the published values into one line (the csv keeps them). Other tiers are
        unchanged by all of this.
    expected_path:
        ``expected/<paper>.yaml`` (see :func:`load_expected`).
    run_dirs:
        Run directories (each with metrics.json, optionally per_user.parquet).
    out_md, out_csv:
        Output paths, written atomically.
    deviations_doc:
        Markdown file holding the deviation anchors; the md links to it relative to
        ``out_md``, and flags anchors it does not contain (when the file exists).
    default_baselines:
        Baseline to paired-test each method against in the table of our runs without a
        published value (``mostpop`` vs ``random`` by default).
    generated_on:
        Date in the header (default: the latest ``finished_at`` of the runs' provenance,
        else today); the commit in the header is the runs' code commit(s), so that the
        scorecard of the same records is byte-identical wherever it is drawn.
    seeds_required:
        Seeds the protocol runs per cell (the tier's seed list); a row with fewer says
        ``n of N seeds`` in its note and counts as capped in :func:`summarise_scorecards`.

    Returns
    -------
    Scorecard
        The csv rows, the unmatched-runs table and all paired tests computed.

    Notes
    -----
    * Runs are grouped by (dataset, split, method); ``ours_mean`` is the mean over seeds,
      ``ours_sd`` the sample sd (ddof=1, blank for one seed), ``diff = ours_mean -
      published``.
    * ``verdict``: ``within`` if ``|diff| <= tolerance`` (the csv's tolerance is in metric
      units; relative tolerances are converted), ``deviates`` otherwise, ``not_run`` if
      no run has the metric. A null published value with runs gets an empty verdict.
    * With a ``baseline``, the note reports a paired t-test over shared seeds (>= 2) and a
      Wilcoxon signed-rank test over the shared users of the lowest shared seed.
    """
    expected = load_expected(expected_path)
    if expected.paper != paper:
        raise ScorecardError(f"{expected.path} is for paper {expected.paper!r}, not {paper!r}")
    tidy = load_runs(run_dirs)
    wrong_tier = sorted(set(tidy["tier"]) - {tier})
    if wrong_tier:
        raise ScorecardError(f"runs of tier {wrong_tier} were given to the {tier!r} scorecard of {paper}")
    wrong_paper = sorted(set(tidy["paper"].dropna()) - {paper})
    if wrong_paper:
        raise ScorecardError(f"runs of paper {wrong_paper} were given to the scorecard of {paper!r}")
    runs = _RunIndex(tidy)

    out_md = Path(out_md)
    deviations_doc = Path(deviations_doc)
    known_anchors = _markdown_anchors(deviations_doc)
    deviation_href = Path(os.path.relpath(deviations_doc.resolve(), out_md.resolve().parent)).as_posix()
    # the doc's name as the reader knows it, never the machine's folders (scorecards are shared)
    doc_label = f"{deviations_doc.parent.name}/{deviations_doc.name}" if deviations_doc.parent.name else deviations_doc.name

    csv_rows: list[dict[str, Any]] = []
    md_rows: list[list[str]] = []
    tests: list[PairedTest] = []
    matched: set[tuple[str, str, str, str]] = set()
    for entry in expected.entries:
        split = _resolve_split(entry, runs)
        values = runs.values(entry.dataset, split, entry.method, entry.metric) if split is not None else {}
        if split is not None:
            matched.add((entry.dataset, split, entry.method, entry.metric))
        seeds_values = np.array([values[s] for s in sorted(values)], dtype=np.float64)
        n_seeds = len(seeds_values)
        ours_mean = float(seeds_values.mean()) if n_seeds else math.nan
        ours_sd = float(seeds_values.std(ddof=1)) if n_seeds > 1 else math.nan
        tolerance = entry.absolute_tolerance()
        diff = ours_mean - entry.published if (n_seeds and entry.published is not None) else math.nan
        budget = runs.budget(entry.dataset, split, entry.method) if (split is not None and n_seeds) else ""

        # Each note part has a plain form (csv) and a markdown form (md, with links).
        note_parts: list[tuple[str, str]] = [(entry.note, entry.note)] if entry.note else []
        if entry.tolerance_kind == "rel" and entry.tolerance is not None:
            text = f"tolerance {entry.tolerance:.4g} x |published|"
            note_parts.append((text, text))
        if n_seeds == 0:
            verdict = VERDICT_NOT_RUN
            if split is None or not runs.has_runs(entry.dataset, split, entry.method):
                text = f"no run of {entry.method} on {entry.dataset}/{split or '(any split)'}"
            else:
                text = f"runs lack metric {entry.metric}"
            note_parts.append((text, text))
        elif entry.published is None:
            verdict = VERDICT_NOT_JUDGED
            note_parts.append(("no published value: not judged",) * 2)
        else:
            verdict = VERDICT_WITHIN if abs(diff) <= tolerance + TOLERANCE_SLACK else VERDICT_DEVIATES
        if n_seeds and seeds_required and n_seeds < seeds_required:
            text = f"{n_seeds} of {seeds_required} seeds"
            note_parts.append((text, text))
        if budget:
            note_parts.append((budget, budget))
        if entry.deviation:
            missing = known_anchors is not None and entry.deviation not in known_anchors
            flag = f" (anchor missing in {doc_label})" if missing else ""
            target = f"{doc_label}#{entry.deviation}"
            note_parts.append((f"deviation: {target}{flag}",
                               f"deviation: [{target}]({deviation_href}#{entry.deviation}){flag}"))
        if entry.baseline and n_seeds and split is not None:
            row_tests = runs.paired_tests(entry.dataset, split, entry.method, entry.baseline, entry.metric)
            tests.extend(row_tests)
            note_parts.extend((t.describe(), t.describe()) for t in row_tests)
            if not row_tests:
                text = f"no paired test: no shared seeds or per-user values with {entry.baseline}"
                note_parts.append((text, text))

        csv_rows.append({
            "paper": paper, "source": entry.source, "dataset": entry.dataset, "method": entry.method,
            "metric": entry.metric, "published": entry.published, "tolerance": tolerance,
            "ours_mean": ours_mean, "ours_sd": ours_sd, "n_seeds": n_seeds,
            "seeds_required": seeds_required if seeds_required else math.nan, "budget": budget, "diff": diff,
            "verdict": verdict, "note": "; ".join(plain for plain, _ in note_parts),
        })
        md_rows.append([
            _md_cell(entry.source), _md_cell(entry.dataset), _md_cell(split or entry.split or ""),
            _md_cell(entry.method), _md_cell(entry.metric), _md_cell(entry.published), _md_cell(tolerance),
            _md_cell(ours_mean), _md_cell(ours_sd), str(n_seeds), _md_cell(diff),
            f"**{verdict}**" if verdict == VERDICT_DEVIATES else verdict, _md_cell("; ".join(md for _, md in note_parts)),
        ])
    rows = pd.DataFrame(csv_rows, columns=list(SCORECARD_COLUMNS))
    rows["n_seeds"] = rows["n_seeds"].astype(np.int64)

    summary = summarise_runs(tidy)
    unmatched_mask = [
        (r.dataset, r.split, r.method, r.metric) not in matched for r in summary.itertuples(index=False)
    ]
    unmatched = summary[unmatched_mask].reset_index(drop=True)
    unmatched_tests: list[str] = []
    for r in unmatched.itertuples(index=False):
        baseline = default_baselines.get(r.method)
        row_tests = (
            runs.paired_tests(r.dataset, r.split, r.method, baseline, r.metric)
            if baseline and runs.has_runs(r.dataset, r.split, baseline) else []
        )
        tests.extend(row_tests)
        unmatched_tests.append("; ".join(t.describe() for t in row_tests))
    unmatched = unmatched.assign(paired_test=unmatched_tests)

    smoke_md: list[list[str]] | None = None
    hidden_not_run = 0
    if tier == SMOKE_TIER:
        # Published values are on the papers' datasets, which the smoke tier does not run: their
        # not_run rows stay in the csv but the page shows what the smoke tier can check instead.
        hidden_not_run = sum(row["verdict"] == VERDICT_NOT_RUN for row in csv_rows)
        md_rows = [md for md, row in zip(md_rows, csv_rows, strict=True) if row["verdict"] != VERDICT_NOT_RUN]
        smoke_csv, smoke_md = smoke_check_rows(paper, expected.smoke_checks, runs, seeds_required)
        if smoke_csv:
            smoke_frame = pd.DataFrame(smoke_csv, columns=list(SCORECARD_COLUMNS))
            rows = pd.concat([rows, smoke_frame], ignore_index=True)
            rows["n_seeds"] = rows["n_seeds"].astype(np.int64)

    csv_text = rows.to_csv(index=False, float_format="%.10g", na_rep="", lineterminator="\n")
    last_date, commits, dirty = records_stamp(sorted(set(tidy["run_dir"])))
    if generated_on is None:
        generated_on = dt.date.fromisoformat(last_date) if last_date else dt.date.today()
    md_text = _render_markdown(
        paper=paper, tier=tier, expected=expected, md_rows=md_rows, unmatched=unmatched,
        generated_on=generated_on, commits=commits, dirty=dirty, n_runs=int(tidy["run_dir"].nunique()),
        smoke_md=smoke_md, hidden_not_run=hidden_not_run,
    )
    write_text(out_csv, csv_text)
    write_text(out_md, md_text)
    return Scorecard(rows=rows, unmatched=unmatched, tests=tests)


def _render_markdown(
    *,
    paper: str,
    tier: str,
    expected: ExpectedFile,
    md_rows: list[list[str]],
    unmatched: pd.DataFrame,
    generated_on: dt.date,
    commits: Sequence[str] = (),
    dirty: bool = False,
    n_runs: int = 0,
    smoke_md: list[list[str]] | None = None,
    hidden_not_run: int = 0,
) -> str:
    if commits:
        commit = ", ".join(f"`{c}`" for c in commits) + (" (with uncommitted changes)" if dirty else "")
        stamp = f"{n_runs} runs · date: {generated_on.isoformat()} (last run) · commit: {commit}"
    else:  # runs without provenance (tests, hand-made records): the checkout that draws it
        git = git_state()
        commit = "not a git checkout (or no commit yet)" if git["commit"] is None else f"`{git['commit'][:12]}`"
        if git["dirty"]:
            commit += " (uncommitted changes)"
        stamp = f"date: {generated_on.isoformat()} · commit: {commit}"
    lines = [
        f"# Scorecard: {paper}",
        "",
        f"paper: `{paper}` · tier: `{tier}` · {stamp}",
        "",
    ]
    if tier == "smoke":
        lines += [
            "**These numbers come from synthetic smoke data and are NOT comparable to the published ones.**",
            "",
            "The published numbers are compared in the reference reproduction's paper-tier scorecard, committed "
            f"in the repository: [results/paper/{paper}/scorecard.md](../../paper/{paper}/scorecard.md) (all "
            "papers: [results/paper/README.md](../../paper/README.md)).",
            "",
        ]
    if expected.reference:
        lines += [f"Reference: {expected.reference}", ""]
    lines += [
        f"Expected values: `{expected.path.name}`. Verdict `within` when |ours_mean − published| ≤ tolerance "
        "(in metric units), `deviates` otherwise, `not_run` when no run has the metric; an empty verdict means "
        "no published value to judge against. ours_sd is the sample sd (ddof=1) over seeds.",
        "",
        "Paired tests (rows with a baseline): a paired t-test (`scipy.stats.ttest_rel`) over the per-seed values "
        "of the seeds both methods ran, when they share at least 2 seeds; and a Wilcoxon signed-rank test "
        "(`scipy.stats.wilcoxon`, two-sided, zero differences dropped) over the per-user values of the users "
        "both runs evaluated, for the lowest shared seed (not for stratified metrics). Each note names the test "
        "it reports.",
        "",
    ]
    if smoke_md is not None:
        lines += [
            "## Smoke checks",
            "",
            "What the smoke tier can check on synthetic data: that every method ran and wrote finite metrics, and "
            "the paper's qualitative orderings that are expected to hold even here (seed means; `smoke_checks` in "
            f"`{expected.path.name}`). Verdict `pass` or `fail`.",
            "",
        ]
        lines += (_md_table(["check", "claim", "dataset", "method", "metric", "ours", "compared with", "verdict"],
                            smoke_md) if smoke_md else ["(no smoke checks for this paper)"])
        lines.append("")
    lines += [
        "## Published vs ours",
        "",
    ]
    if hidden_not_run:
        lines.append(f"{hidden_not_run} published value(s) are on the papers' datasets, which the smoke tier does "
                     "not run (`not_run`, listed in `scorecard.csv`): the paper-tier scorecard above compares them.")
        if md_rows:
            lines.append("")
    header = ["source", "dataset", "split", "method", "metric", "published", "tolerance",
              "ours_mean", "ours_sd", "n_seeds", "diff", "verdict", "note"]
    # md_rows carry the note last; seeds_required and budget are in the csv and in the note
    if md_rows:
        lines += _md_table(header, md_rows)
    elif not hidden_not_run:
        lines.append("(no expected entries)")
    lines += ["", "## Our runs without a published value", ""]
    if unmatched.empty:
        lines.append("(none)")
    else:
        lines += _md_table(
            ["method", "dataset", "split", "metric", "mean", "sd", "n_seeds", "paired test vs baseline"],
            (
                [_md_cell(r.method), _md_cell(r.dataset), _md_cell(r.split), _md_cell(r.metric),
                 _md_cell(float(r.mean)), _md_cell(float(r.sd)), str(int(r.n_seeds)), _md_cell(r.paired_test)]
                for r in unmatched.itertuples(index=False)
            ),
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- summary over papers

#: Papers whose published numbers the summary counts, in the README's order.
SUMMARY_PAPERS = ("exadmm", "prism", "lambdaopt", "fedrap", "lrs")


def summarise_scorecards(results_dir: str | Path, availability: Mapping[str, str],
                         papers: Sequence[str] = SUMMARY_PAPERS) -> dict[str, int]:
    """Count the published cells of every paper against the committed scorecards.

    Parameters
    ----------
    results_dir:
        ``results/<tier>/``: ``<paper>/scorecard.csv`` is read where it exists (a paper
        without one counts as not run).
    availability:
        Dataset -> ``generated`` | ``mirror`` | ``missing``
        (:func:`recrepro.datasets.download.dataset_availability`, kept in
        ``results/<tier>/datasets.json``).

    Returns
    -------
    dict
        ``published`` (entries with a published value), ``reachable`` (of those, whose
        dataset was generated or in the mirror), ``run`` (reachable with at least one
        seed), ``full_budget_all_seeds`` (run with every required seed and no cap),
        ``within_tolerance`` and ``capped`` (run, but short of seeds or budget).
    """
    counts = dict.fromkeys(("published", "reachable", "run", "full_budget_all_seeds", "within_tolerance",
                            "capped"), 0)
    results_dir = Path(results_dir)
    for paper in papers:
        expected = load_expected(expected_path(paper))
        card_path = results_dir / paper / "scorecard.csv"
        card = pd.read_csv(card_path, keep_default_na=False, na_values=[""]) if card_path.is_file() else None
        for index, entry in enumerate(expected.entries):
            if entry.published is None:
                continue
            counts["published"] += 1
            if availability.get(entry.dataset, "missing") == "missing":
                continue
            counts["reachable"] += 1
            row = _card_row(card, entry, index)
            if row is None or not row.get("n_seeds"):
                continue
            counts["run"] += 1
            required = row.get("seeds_required")
            short = required is not None and not pd.isna(required) and int(row["n_seeds"]) < int(required)
            capped = short or bool(row.get("budget") if isinstance(row.get("budget"), str) else False)
            counts["capped" if capped else "full_budget_all_seeds"] += 1
            counts["within_tolerance"] += int(row.get("verdict") == VERDICT_WITHIN)
    return counts


def _card_row(card: pd.DataFrame | None, entry: ExpectedEntry, index: int) -> dict[str, Any] | None:
    """The scorecard row of ``entry``: rows are written in the expected file's order."""
    if card is None or index >= len(card):
        return None
    row = card.iloc[index].to_dict()
    if (row.get("dataset"), row.get("method"), row.get("metric")) != (entry.dataset, entry.method, entry.metric):
        return None  # a scorecard of another expected file: treat the cell as not run
    return row

