"""Load the published numbers: ``src/recrepro/expected/<paper>.yaml``, validated.

The schema is in ``src/recrepro/expected/README.md``. :func:`load_expected` reads a file into an
:class:`ExpectedFile` (entries, smoke checks, figure points) or raises :class:`ExpectedFileError`
naming the file, the item and what is wrong; the helpers below it give figures the published
values they overlay.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from recrepro.scorecard.claimspec import Claim, claim_from_mapping, claim_label

TOLERANCE_KINDS = ("abs", "rel")
ENTRY_REQUIRED_KEYS = ("source", "dataset", "method", "metric", "published", "kind")
#: What an entry's number is: a value the paper prints, or another target (counted apart).
ENTRY_KINDS = ("printed", "official_code", "maintainer_log", "our_threshold", "anchor")
ENTRY_OPTIONAL_KEYS = ("split", "tolerance", "tolerance_kind", "baseline", "alternative", "deviation", "note")
#: Keys of an entry's ``alternative`` (both required).
ALTERNATIVE_KEYS = ("method", "label")
FILE_KEYS = ("paper", "reference", "counts", "entries", "smoke_checks", "figure_points", "claims")

#: Kinds of smoke check (``smoke_checks`` in an expected file; only the smoke tier runs them).
SMOKE_CHECK_KINDS = ("ran", "greater", "less")
SMOKE_CHECK_KEYS = ("check", "claim", "source", "methods", "dataset", "split", "method", "metric", "than", "value")
#: ``figure_points``: published points a figure draws whose position the entries do not give
#: (an x stated in the text, e.g. epochs to early stop).
FIGURE_POINT_REQUIRED_KEYS = ("figure", "dataset", "series", "x", "y", "source")
FIGURE_POINT_KEYS = (*FIGURE_POINT_REQUIRED_KEYS, "note")

_METRIC_KEY = re.compile(r"^(?P<base>[a-z][a-z0-9_]*(@[0-9]+)?)(\[(?P<stratum>[a-z][a-z0-9_]*)\])?$")
_ANCHOR = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")

EXPECTED_DIR = Path(__file__).resolve().parent.parent / "expected"


class ExpectedFileError(ValueError):
    """An expected-numbers file is malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class Alternative:
    """Another of our methods whose value on the entry's cell is shown beside it, never judged.

    It tells the reader what explains a deviation (e.g. the official code's form of a model
    whose paper describes another), so it is our method name and a few words saying what it is.
    """

    method: str
    label: str


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
    kind: str = "printed"
    split: str | None = None
    baseline: str | None = None
    alternative: Alternative | None = None
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
    claims: tuple[Claim, ...] = ()


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


# ------------------------------------------------------------ field checks of one item


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


def _check_mapping_keys(raw: Any, allowed: Sequence[str]) -> None:
    """``raw`` is a mapping whose keys are all in ``allowed`` (else ValueError naming the unknown ones)."""
    if not isinstance(raw, dict):
        raise ValueError(f"must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise ValueError(f"unknown keys {unknown} (allowed: {sorted(allowed)})")


def _check_strings(raw: Mapping[str, Any], keys: Iterable[str]) -> None:
    """Each of ``keys`` that ``raw`` gives a non-null value is a string (else ValueError)."""
    for key in keys:
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise ValueError(f"{key} must be a string, got {type(raw[key]).__name__} {raw[key]!r}")


def _check_names(raw: Mapping[str, Any], keys: Iterable[str]) -> None:
    """Each of ``keys`` that ``raw`` gives a non-null value is a plain name (else ValueError)."""
    for key in keys:
        if raw.get(key) is not None and not _NAME.match(raw[key]):
            raise ValueError(f"{key} {raw[key]!r} is not a plain name (letters, digits, _ . + -)")


# ------------------------------------------------------------------ one item of a list


def _alternative_from_mapping(raw: Any, method: str) -> Alternative:
    """An entry's ``alternative``: ``{method: <our method>, label: "<short words>"}`` (else ValueError)."""
    try:
        _check_mapping_keys(raw, ALTERNATIVE_KEYS)
        missing = [key for key in ALTERNATIVE_KEYS if key not in raw]
        if missing:
            raise ValueError(f"missing keys {missing}")
        for key in ALTERNATIVE_KEYS:
            if not isinstance(raw[key], str) or not raw[key].strip():
                raise ValueError(f"{key} must be a non-empty string, got {raw[key]!r}")
        _check_names(raw, ("method",))
    except ValueError as error:
        raise ValueError(f"alternative: {error}") from error
    if raw["method"] == method:
        # the row's own value is already beside it: the alternative must be another run
        raise ValueError("alternative method must differ from method")
    return Alternative(method=raw["method"], label=raw["label"].strip())


def _entry_from_mapping(raw: Any) -> ExpectedEntry:
    _check_mapping_keys(raw, ENTRY_REQUIRED_KEYS + ENTRY_OPTIONAL_KEYS)
    missing = [key for key in ENTRY_REQUIRED_KEYS if key not in raw]
    if missing:
        raise ValueError(f"missing keys {missing} (published may be null, but must be present)")
    _check_strings(raw, ("source", "dataset", "method", "metric", "split", "baseline", "deviation", "note", "kind"))
    if raw["kind"] not in ENTRY_KINDS:
        raise ValueError(f"kind must be one of {list(ENTRY_KINDS)} (what the number is), got {raw['kind']!r}")
    for key in ("source", "dataset", "method", "metric"):
        if not raw[key].strip():
            raise ValueError(f"{key} must not be empty")
    _check_names(raw, ("dataset", "method", "split", "baseline"))
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
    alternative = None if raw.get("alternative") is None else _alternative_from_mapping(raw["alternative"],
                                                                                        raw["method"])
    deviation = raw.get("deviation")
    if deviation is not None:
        deviation = deviation.removeprefix("#")
        if not _ANCHOR.match(deviation):
            raise ValueError(f"deviation {raw['deviation']!r} is not a markdown anchor (lower-case, digits, - _)")
    return ExpectedEntry(
        source=raw["source"], dataset=raw["dataset"], method=raw["method"], metric=raw["metric"],
        published=published, tolerance=tolerance, tolerance_kind=tolerance_kind, kind=raw["kind"], split=raw.get("split"),
        baseline=raw.get("baseline"), alternative=alternative, deviation=deviation, note=raw.get("note"),
    )


def _smoke_check_from_mapping(raw: Any) -> SmokeCheck:
    _check_mapping_keys(raw, SMOKE_CHECK_KEYS)
    kind = raw.get("check")
    if kind not in SMOKE_CHECK_KINDS:
        raise ValueError(f"check must be one of {list(SMOKE_CHECK_KINDS)}, got {kind!r}")
    if not isinstance(raw.get("claim"), str) or not raw["claim"].strip():
        raise ValueError("claim (what the check shows, in words) must be a non-empty string")
    _check_strings(raw, ("source", "dataset", "split", "method", "metric", "than"))
    _check_names(raw, ("dataset", "split", "method", "than"))
    if kind == "ran":
        return _ran_check(raw)
    return _ordering_check(kind, raw)


def _ran_check(raw: Mapping[str, Any]) -> SmokeCheck:
    """A ``ran`` check: a non-empty list of methods, nothing to compare."""
    methods = raw.get("methods")
    if not isinstance(methods, list) or not methods or not all(isinstance(m, str) and _NAME.match(m)
                                                                for m in methods):
        raise ValueError("a 'ran' check needs methods: a non-empty list of method names")
    extra = sorted(k for k in ("dataset", "split", "method", "metric", "than", "value") if k in raw)
    if extra:
        raise ValueError(f"a 'ran' check takes no {extra}")
    return SmokeCheck(check="ran", claim=raw["claim"], source=raw.get("source"), methods=tuple(methods))


def _ordering_check(kind: str, raw: Mapping[str, Any]) -> SmokeCheck:
    """A ``greater`` / ``less`` check: one method's metric against a method ``than`` or a ``value``."""
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
    _check_mapping_keys(raw, FIGURE_POINT_KEYS)
    missing = [key for key in FIGURE_POINT_REQUIRED_KEYS if key not in raw]
    if missing:
        raise ValueError(f"missing keys {missing}")
    for key in ("figure", "dataset", "series", "source", "note"):
        if raw.get(key) is not None and (not isinstance(raw[key], str) or not raw[key].strip()):
            raise ValueError(f"{key} must be a non-empty string")
    return FigurePoint(figure=raw["figure"], dataset=raw["dataset"], series=raw["series"],
                       x=_number(raw["x"], "x"), y=_number(raw["y"], "y"), source=raw["source"], note=raw.get("note"))


# ------------------------------------------------------------------------ the file


def _validated_list(path: Path, document: Mapping[str, Any], key: str, parse: Callable[[Any], Any]) -> tuple:
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


def _read_document(path: Path) -> dict[str, Any]:
    """The YAML mapping of ``path`` with only :data:`FILE_KEYS` at the top (else ExpectedFileError)."""
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
    return document


def entry_counts(entries: Sequence[ExpectedEntry]) -> dict[str, int]:
    """``{"printed": n, "other": m}``: the entries with a published number that the paper prints, and
    the others with one (official code, a maintainer's log, our thresholds, anchors)."""
    counts = {"printed": 0, "other": 0}
    for entry in entries:
        if entry.published is not None:
            counts["printed" if entry.kind == "printed" else "other"] += 1
    return counts


def _check_counts(path: Path, declared: Any, entries: Sequence[ExpectedEntry]) -> None:
    """A file's ``counts`` (optional) must be what its entries hold: an entry lost in an edit fails."""
    if declared is None:
        return
    try:
        _check_mapping_keys(declared, ("printed", "other"))
    except ValueError as error:
        raise ExpectedFileError(f"{path}: counts: {error}") from error
    found = entry_counts(entries)
    if {k: declared.get(k, 0) for k in found} != found:
        raise ExpectedFileError(f"{path}: counts says {declared}, the entries hold {found}")


def _validated_entries(path: Path, raw_entries: list) -> tuple[ExpectedEntry, ...]:
    """The ``entries`` of ``path``, each validated, no two for the same cell (else ExpectedFileError)."""
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
    return tuple(entries)


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
    document = _read_document(path)
    paper = document.get("paper")
    if not isinstance(paper, str) or not paper:
        raise ExpectedFileError(f"{path}: 'paper' must be a non-empty string")
    reference = document.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise ExpectedFileError(f"{path}: 'reference' must be a string")
    raw_entries = document.get("entries")
    if not isinstance(raw_entries, list):
        raise ExpectedFileError(f"{path}: 'entries' must be a list (use [] for none)")
    entries = _validated_entries(path, raw_entries)
    _check_counts(path, document.get("counts"), entries)
    smoke_checks = _validated_list(path, document, "smoke_checks", _smoke_check_from_mapping)
    figure_points = _validated_list(path, document, "figure_points", _figure_point_from_mapping)
    claims = _validated_claims(path, document.get("claims", []))
    return ExpectedFile(path=path, paper=paper, reference=reference, entries=entries,
                        smoke_checks=smoke_checks, figure_points=figure_points, claims=claims)


def _validated_claims(path: Path, raw_claims: Any) -> tuple[Claim, ...]:
    """The ``claims`` of ``path``, each validated, ids unique (else ExpectedFileError)."""
    if not isinstance(raw_claims, list):
        raise ExpectedFileError(f"{path}: 'claims' must be a list (leave it out for none)")
    claims: list[Claim] = []
    for index, raw in enumerate(raw_claims):
        try:
            claim = claim_from_mapping(raw)
        except ValueError as error:
            raise ExpectedFileError(f"{path}: {claim_label(index, raw)}: {error}") from error
        if any(c.id == claim.id for c in claims):
            raise ExpectedFileError(f"{path}: {claim_label(index, raw)}: duplicates the id of an earlier claim")
        claims.append(claim)
    return tuple(claims)


def _entry_label(index: int, raw: Any) -> str:
    if isinstance(raw, dict):
        described = ", ".join(f"{key}={raw[key]!r}" for key in ("source", "method", "metric") if key in raw)
        if described:
            return f"entries[{index}] ({described})"
    return f"entries[{index}]"


# ------------------------------------------------------- published values for figures


def expected_path(paper: str) -> Path:
    """Path of the packaged expected-numbers file of ``paper``."""
    return EXPECTED_DIR / f"{paper}.yaml"


def _paper_expected(paper: str, path: str | Path | None) -> ExpectedFile:
    """``path`` loaded, or the packaged ``expected/<paper>.yaml`` when ``path`` is None."""
    return load_expected(path if path is not None else expected_path(paper))


def published_values(paper: str, path: str | Path | None = None) -> dict[tuple[str, str | None, str, str], float]:
    """The published numbers of ``paper`` for figures to overlay: ``{(dataset, split, method, metric): value}``.

    Only entries with a published value (anchors without one and ``null`` rows are left out).
    ``path`` defaults to the packaged ``expected/<paper>.yaml``.
    """
    expected = _paper_expected(paper, path)
    return {(e.dataset, e.split, e.method, e.metric): float(e.published)
            for e in expected.entries if e.published is not None}


def published_value(values: Mapping[tuple[str, str | None, str, str], float], dataset: str, method: str,
                    metric: str) -> float | None:
    """The one published value of (dataset, method, metric) in :func:`published_values`, any split; else None."""
    found = [v for (d, _, m, k), v in values.items() if (d, m, k) == (dataset, method, metric)]
    return found[0] if len(found) == 1 else None


def figure_points(paper: str, figure: str, dataset: str, path: str | Path | None = None) -> list[FigurePoint]:
    """The ``figure_points`` of ``paper`` for one figure (e.g. ``fig4_epochs``) on one dataset."""
    expected = _paper_expected(paper, path)
    return [p for p in expected.figure_points if p.figure == figure and p.dataset == dataset]
