"""The ``claims:`` of an expected file: each paper's headline claims and the checks that judge them.

The schema is in ``src/recrepro/expected/README.md`` ("Claims"). :func:`claim_from_mapping` validates
one item of the list (``ValueError`` naming what is wrong; the loader,
:func:`recrepro.scorecard.expected.load_expected`, adds the file and the claim's index and id).
:mod:`recrepro.scorecard.claims` evaluates the checks on the run records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Check kinds and what each needs; see the README for their meaning.
CHECK_KINDS = ("better", "relative_change", "monotone", "correlation", "frontier", "converges", "cells",
               "beats_strongest_baseline", "cost", "waits")
_COMMON = ("kind", "label", "datasets", "split", "defect")
CHECK_KEYS: Mapping[str, tuple[str, ...]] = {
    "better": (*_COMMON, "metric", "method", "than", "lower_is_better", "table", "per", "where", "paired"),
    "relative_change": (*_COMMON, "metric", "method", "than", "published", "tolerance", "denominator",
                        "or_better", "lower_is_better"),
    "monotone": (*_COMMON, "metric", "methods", "direction", "table", "along", "method", "where", "min_step", "at"),
    "correlation": (*_COMMON, "method", "file", "x", "y", "min", "than"),
    "frontier": (*_COMMON, "x", "y", "methods", "baselines"),
    "converges": (*_COMMON, "method", "series", "history", "max_ratio"),
    "cells": ("kind", "label", "methods", "sources", "defect"),
    "beats_strongest_baseline": ("kind", "label", "datasets", "split", "metric", "method", "baselines",
                                 "lower_is_better", "defect"),
    "cost": ("kind", "label", "datasets", "file", "method", "than", "along", "x", "max_ratio", "max_exponent",
             "defect"),
    "waits": ("kind", "label", "waits_for"),
}
CHECK_REQUIRED: Mapping[str, tuple[str, ...]] = {
    "better": ("datasets", "metric", "method", "than"),
    "relative_change": ("datasets", "metric", "method", "than", "published", "tolerance"),
    "monotone": ("datasets", "metric", "direction"),
    "correlation": ("datasets", "method", "file", "x", "y", "min"),
    "frontier": ("datasets", "x", "y", "methods", "baselines"),
    "converges": ("datasets", "method", "series", "max_ratio"),
    "cells": (),
    "beats_strongest_baseline": (),
    "cost": ("datasets", "file", "method", "along"),
    "waits": ("waits_for",),
}
CLAIM_REQUIRED_KEYS = ("id", "claim", "source", "quantifier", "checks")
CLAIM_OPTIONAL_KEYS = ("why", "evidence", "deviation", "caveat", "pending")
PENDING_KEYS = ("what", "methods", "checks")
#: How a claim's checks make its verdict (docs/verdicts.md): ``all`` (every dataset, metric or
#: baseline: one check against contradicts, support needs every check to hold), ``any`` (one holding
#: check supports), ``most`` (more than half), ``mean`` (one effect pooled over the checks, with its
#: interval), ``matches`` (every check an equivalence or non-inferiority test against its margin),
#: ``trend`` (every check a trend along a sweep).
QUANTIFIERS = ("all", "any", "most", "mean", "matches", "trend")
_ID = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_NAME = re.compile(r"^[A-Za-z0-9*?][A-Za-z0-9_.+*?-]*$")
_ANCHOR = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class Check:
    """One check of a claim. ``method`` / ``than`` are candidate lists: the first that ran is used
    (so a tuned variant is preferred to a fixed-flag one while both exist); with ``paired``, the lists
    go in step: the first position at which both ran (tuned against tuned, else the fixed flags against
    the fixed flags, never one against the other)."""

    kind: str
    label: str | None = None
    datasets: tuple[str, ...] = ()
    split: str | None = None
    metric: str | None = None
    method: tuple[str, ...] = ()
    than: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    baselines: tuple[str, ...] = ()
    lower_is_better: bool = False
    paired: bool = False
    published: float | None = None
    tolerance: float | None = None
    denominator: str = "than"
    or_better: bool = False
    direction: str | None = None
    table: str | None = None
    per: str | None = None
    along: str | None = None
    where: tuple[tuple[str, Any], ...] = ()
    file: str | None = None
    x: str | None = None
    y: str | None = None
    min: float | None = None
    series: str | None = None
    history: str | None = None
    max_ratio: float | None = None
    max_exponent: float | None = None
    sources: tuple[str, ...] = ()
    waits_for: str | None = None
    min_step: float | None = None  # a monotone step smaller than this is flat, not a break
    at: tuple[float, ...] = ()  # the points a monotone check along a column expects (a missing one: not testable)
    defect: str | None = None  # a documented defect its runs are under (a markdown anchor): never support


@dataclass(frozen=True)
class Pending:
    """Runs a claim's protocol needs that the records may lack (e.g. a learning-rate search): while no
    run's method matches ``methods`` (shell patterns), the verdict is provisional and names ``what``."""

    what: str
    methods: tuple[str, ...]
    checks: tuple[str, ...] = ()  # the labels of the checks that wait for it (none: every check)


@dataclass(frozen=True)
class Claim:
    """A headline claim of a paper, where it is made, and the checks that judge it."""

    id: str
    claim: str
    source: str
    checks: tuple[Check, ...]
    why: str | None = None
    evidence: str | None = None
    deviation: str | None = None
    caveat: str | None = None
    pending: tuple[Pending, ...] = field(default_factory=tuple)
    quantifier: str = "all"


def _text(raw: Mapping[str, Any], key: str, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise ValueError(f"{key} must be a non-empty string")
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} must be a non-empty string, got {value!r}")
    return value.strip()


def _names(raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A name or a list of names (methods, datasets) as a tuple; () when absent."""
    value = raw.get(key)
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and _NAME.match(v) for v in items):
        raise ValueError(f"{key} must be a name or a non-empty list of names, got {value!r}")
    return tuple(items)


def _float(raw: Mapping[str, Any], key: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        raise ValueError(f"{key} must be a number, got the string {value!r} (write e.g. 1.0e-4)")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} must be a number, got {value!r}")
    return float(value)


def _check_from_mapping(raw: Any) -> Check:
    if not isinstance(raw, dict):
        raise ValueError(f"a check must be a mapping, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in CHECK_KINDS:
        raise ValueError(f"kind must be one of {list(CHECK_KINDS)}, got {kind!r}")
    unknown = sorted(set(raw) - set(CHECK_KEYS[kind]))
    if unknown:
        raise ValueError(f"a {kind!r} check takes no {unknown} (allowed: {sorted(CHECK_KEYS[kind])})")
    missing = [key for key in CHECK_REQUIRED[kind] if raw.get(key) is None]
    if missing:
        raise ValueError(f"a {kind!r} check needs {missing}")
    where = raw.get("where") or {}
    if not isinstance(where, dict):
        raise ValueError(f"where must be a mapping of column: value, got {where!r}")
    direction = raw.get("direction")
    if kind == "monotone":
        if direction not in ("increasing", "decreasing"):
            raise ValueError(f"direction must be increasing or decreasing, got {direction!r}")
        if bool(raw.get("methods")) == bool(raw.get("along")):
            raise ValueError("a 'monotone' check runs along either methods (a list) or along (a table column)")
        if raw.get("along") and not (raw.get("table") and raw.get("method")):
            raise ValueError("a 'monotone' check along a column needs table and method")
        if raw.get("at") is not None and not raw.get("along"):
            raise ValueError("a 'monotone' check takes at (the points it expects) only along a column")
    if kind == "beats_strongest_baseline" and raw.get("baselines") and not raw.get("method"):
        raise ValueError("a 'beats_strongest_baseline' check from run records needs both method and baselines "
                         "(without baselines, it reads tables/strong_baselines.csv; method then names another "
                         "arm of the paper's method than the table's)")
    if kind == "beats_strongest_baseline" and raw.get("baselines") and not (raw.get("datasets") and raw.get("metric")):
        raise ValueError("a 'beats_strongest_baseline' check from run records needs datasets and metric")
    if kind == "cost" and (raw.get("max_ratio") is None) == (raw.get("max_exponent") is None):
        raise ValueError("a 'cost' check bounds either max_ratio (against than) or max_exponent (along x)")
    if kind == "cost" and raw.get("max_ratio") is not None and not raw.get("than"):
        raise ValueError("a 'cost' check with max_ratio needs than (the method whose cost it is set against)")
    if kind == "cost" and raw.get("max_exponent") is not None and not raw.get("x"):
        raise ValueError("a 'cost' check with max_exponent needs x (the size the cost grows with)")
    denominator = raw.get("denominator", "than")
    if denominator not in ("than", "method"):
        raise ValueError(f"denominator must be than or method, got {denominator!r}")
    for flag in ("lower_is_better", "or_better", "paired"):
        if flag in raw and not isinstance(raw[flag], bool):
            raise ValueError(f"{flag} must be true or false, got {raw[flag]!r}")
    check = Check(
        kind=kind, label=_text(raw, "label"), datasets=_names(raw, "datasets"), split=_text(raw, "split"),
        metric=_text(raw, "metric"), method=_names(raw, "method"), than=_names(raw, "than"),
        methods=_names(raw, "methods"), baselines=_names(raw, "baselines"),
        lower_is_better=bool(raw.get("lower_is_better", False)), paired=bool(raw.get("paired", False)),
        published=_float(raw, "published"),
        tolerance=_float(raw, "tolerance"), denominator=denominator, or_better=bool(raw.get("or_better", False)),
        direction=direction, table=_text(raw, "table"), per=_text(raw, "per"), along=_text(raw, "along"),
        where=tuple(sorted(where.items())), file=_text(raw, "file"), x=_text(raw, "x"), y=_text(raw, "y"),
        min=_float(raw, "min"), series=_text(raw, "series"), history=_text(raw, "history"),
        max_ratio=_float(raw, "max_ratio"), max_exponent=_float(raw, "max_exponent"), sources=_names_or_text(raw, "sources"),
        waits_for=_text(raw, "waits_for"), min_step=_float(raw, "min_step"), defect=_anchor(raw, "defect"),
        at=_floats(raw, "at"),
    )
    if check.tolerance is not None and check.tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {check.tolerance}")
    if kind == "monotone" and check.methods and len(check.methods) < 2:
        raise ValueError("a 'monotone' check needs at least two methods")
    if set(check.method) & set(check.than):
        raise ValueError("than must differ from method")
    return check


def _floats(raw: Mapping[str, Any], key: str) -> tuple[float, ...]:
    """A non-empty list of numbers as a tuple; () when absent."""
    value = raw.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not value or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                                       for v in value):
        raise ValueError(f"{key} must be a non-empty list of numbers, got {value!r}")
    return tuple(float(v) for v in value)


def _anchor(raw: Mapping[str, Any], key: str) -> str | None:
    """A ``docs/deviations.md`` anchor (``#`` optional), validated."""
    value = _text(raw, key)
    if value is None:
        return None
    value = value.removeprefix("#")
    if not _ANCHOR.match(value):
        raise ValueError(f"{key} {raw[key]!r} is not a markdown anchor of docs/deviations.md (lower-case, digits, - _)")
    return value


def _names_or_text(raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key)
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v.strip() for v in items):
        raise ValueError(f"{key} must be a string or a list of strings, got {value!r}")
    return tuple(items)


def _pending_from_mapping(raw: Any) -> Pending:
    if not isinstance(raw, dict):
        raise ValueError(f"pending items must be mappings, got {raw!r}")
    unknown = sorted(set(raw) - set(PENDING_KEYS))
    if unknown:
        raise ValueError(f"pending takes no {unknown} (allowed: {list(PENDING_KEYS)})")
    methods = _names(raw, "methods")
    if not methods:
        raise ValueError("pending needs methods (the run names, shell patterns allowed, that would settle it)")
    checks = raw.get("checks") or []
    if not isinstance(checks, list) or not all(isinstance(c, str) and c.strip() for c in checks):
        raise ValueError(f"pending checks must be a list of check labels, got {checks!r}")
    return Pending(what=_text(raw, "what", required=True) or "", methods=methods, checks=tuple(checks))


def claim_from_mapping(raw: Any) -> Claim:
    """Validate one item of ``claims:`` (ValueError naming what is wrong)."""
    if not isinstance(raw, dict):
        raise ValueError(f"must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(CLAIM_REQUIRED_KEYS + CLAIM_OPTIONAL_KEYS))
    if unknown:
        raise ValueError(f"unknown keys {unknown} (allowed: {sorted(CLAIM_REQUIRED_KEYS + CLAIM_OPTIONAL_KEYS)})")
    missing = [key for key in CLAIM_REQUIRED_KEYS if key not in raw]
    if missing:
        raise ValueError(f"missing keys {missing}")
    claim_id = raw["id"]
    if not isinstance(claim_id, str) or not _ID.match(claim_id):
        raise ValueError(f"id must be a short name such as P1, got {claim_id!r}")
    checks = raw["checks"]
    if not isinstance(checks, list) or not checks:
        raise ValueError("checks must be a non-empty list")
    parsed = []
    for index, check in enumerate(checks):
        try:
            parsed.append(_check_from_mapping(check))
        except ValueError as error:
            raise ValueError(f"checks[{index}]: {error}") from error
    deviation = _anchor(raw, "deviation")
    quantifier = raw.get("quantifier")
    if quantifier not in QUANTIFIERS:
        raise ValueError(f"quantifier must be one of {list(QUANTIFIERS)} (the claim's own: 'every dataset' is all, "
                         f"'on average' mean), got {quantifier!r}")
    pending = raw.get("pending") or []
    if not isinstance(pending, list):
        raise ValueError("pending must be a list")
    return Claim(id=claim_id, claim=_text(raw, "claim", required=True) or "",
                 source=_text(raw, "source", required=True) or "", checks=tuple(parsed), why=_text(raw, "why"),
                 evidence=_text(raw, "evidence"), deviation=deviation, caveat=_text(raw, "caveat"),
                 pending=tuple(_pending_from_mapping(p) for p in pending), quantifier=quantifier)


def claim_label(index: int, raw: Any) -> str:
    """``claims[2] (id='P3')`` for an error message."""
    if isinstance(raw, dict) and "id" in raw:
        return f"claims[{index}] (id={raw['id']!r})"
    return f"claims[{index}]"

