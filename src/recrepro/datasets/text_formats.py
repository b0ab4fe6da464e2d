"""Delimited text formats and how a file of one is read: each field's kind and range (:class:`Field`,
:class:`LineFormat`), the fast vectorised read with pyarrow (:func:`read_delimited`) and, only when
that fails or finds a value the format forbids, the slow line-by-line scan that names the first
malformed line (:func:`format_error`)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from recrepro.datasets.container import DataFormatError

__all__ = ["Field", "LineFormat", "Opener", "field_problem", "file_opener", "format_error", "range_text",
           "read_delimited", "shown"]

Opener = Callable[[], BinaryIO]
_MAX_SHOWN = 200  # characters of an offending line quoted in an error message


# --------------------------------------------------------------------------- line formats
@dataclass(frozen=True)
class Field:
    """One field of a delimited line: ``kind`` is int, float, str (non-empty), mdy_date or any.

    ``low``/``high`` bound a numeric field (inclusive; None: unbounded on that side).
    """

    name: str
    kind: str
    low: float | None = None
    high: float | None = None

    def out_of_range(self, number: float) -> str | None:
        """Why ``number`` is outside this field's range, or None."""
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            return f"{number:g} is outside the range {range_text(self.low, self.high)}"
        return None


def range_text(low: float | None, high: float | None) -> str:
    """``"1-5"``, ``">= 1"`` or ``"<= 5"``: a field's range as error messages write it."""
    if high is None:
        return f">= {low:g}"
    if low is None:
        return f"<= {high:g}"
    return f"{low:g}-{high:g}"


@dataclass(frozen=True)
class LineFormat:
    """A delimited text format: what the fast reader is told and what the slow scan checks.

    ``delimiter`` may be several characters (MovieLens ``::``); ``header`` is the exact
    first line expected (None: no header); ``quoted`` enables CSV double-quote rules.
    """

    delimiter: str
    fields: tuple[Field, ...]
    header: tuple[str, ...] | None = None
    quoted: bool = False

    def describe(self) -> str:
        return f"{len(self.fields)} fields separated by {self.delimiter!r}"


_INT_RE = re.compile(r"-?\d+")
_MDY_RE = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")


def field_problem(value: str, kind: str, spec: Field | None = None) -> str | None:
    """Why ``value`` is not a valid ``kind`` field (within ``spec``'s range), or None when it is."""
    if kind == "any":
        return None
    if kind == "str":
        return None if value else "empty id"
    if kind == "int":
        if _INT_RE.fullmatch(value) and -(2**63) <= int(value) < 2**63:
            return spec.out_of_range(int(value)) if spec is not None else None
        return f"{value!r} is not an integer"
    if kind == "float":
        try:
            number = float(value)
        except ValueError:
            return f"{value!r} is not a number"
        if value != value.strip() or not math.isfinite(number):
            return f"{value!r} is not a finite number"
        return spec.out_of_range(number) if spec is not None else None
    if kind == "mdy_date":
        match = _MDY_RE.fullmatch(value)
        if match:
            month, day, year = (int(g) for g in match.groups())
            try:
                dt.date(year, month, day)
                return None
            except ValueError:
                pass
        return f"{value!r} is not a month/day/year date"
    raise ValueError(f"unknown field kind {kind!r}")


def _line_problem(fields: Sequence[str], fmt: LineFormat) -> str | None:
    if len(fields) != len(fmt.fields):
        return f"expected {fmt.describe()}, found {len(fields)}"
    for value, spec in zip(fields, fmt.fields):
        problem = field_problem(value, spec.kind, spec)
        if problem:
            return f"field {spec.name!r}: {problem}"
    return None


def shown(text: str) -> str:
    """``text`` as an error message quotes it: at most ``_MAX_SHOWN`` characters."""
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."


def _iter_records(opener: Opener, fmt: LineFormat) -> Iterator[tuple[int, str, list[str] | None, str | None]]:
    """Yield ``(line_no, text, fields, decode_problem)`` for every non-empty record."""
    with opener() as fh:
        if fmt.quoted:
            text_stream = io.TextIOWrapper(fh, encoding="utf-8-sig", errors="replace", newline="")
            reader = csv.reader(text_stream, delimiter=fmt.delimiter, quotechar='"', doublequote=True, strict=True)
            line_no = 1
            while True:
                try:
                    fields = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    yield line_no, "", None, f"CSV quoting error: {exc}"
                    return
                if fields:
                    yield line_no, fmt.delimiter.join(fields), fields, None
                line_no = reader.line_num + 1
        else:
            for line_no, raw in enumerate(fh, start=1):
                raw = raw.rstrip(b"\r\n")
                if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                if not raw:
                    continue  # the fast reader skips empty lines too
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    yield line_no, raw.decode("utf-8", "replace"), None, "not valid UTF-8"
                    continue
                yield line_no, text, text.split(fmt.delimiter), None


def _first_bad_line(opener: Opener, fmt: LineFormat) -> tuple[int, str, str] | None:
    """The slow scan: ``(line_no, text, problem)`` of the first malformed line, or None."""
    for line_no, text, fields, decode_problem in _iter_records(opener, fmt):
        if decode_problem:
            return line_no, text, decode_problem
        assert fields is not None
        if fmt.header is not None and line_no == 1:
            if tuple(f.strip() for f in fields) != fmt.header:
                return line_no, text, f"expected header {fmt.delimiter.join(fmt.header)!r}"
            continue
        problem = _line_problem(fields, fmt)
        if problem:
            return line_no, text, problem
    return None


def format_error(label: str, opener: Opener, fmt: LineFormat, fallback: str) -> DataFormatError:
    """Locate the first bad line (slow) and build the error; ``fallback`` when none is found."""
    bad = _first_bad_line(opener, fmt)
    if bad is None:
        return DataFormatError(f"{label}: {fallback}")
    line_no, text, problem = bad
    return DataFormatError(f'{label}: line {line_no}: {problem}: "{shown(text)}"')


def file_opener(path: Path) -> Opener:
    """Opens ``path`` for binary reading, as often as the fast read and the slow scan need."""
    return lambda: open(path, "rb")


def read_delimited(opener: Opener, label: str, fmt: LineFormat, types: dict[str, pa.DataType]) -> pa.Table:
    """Read the ``types`` columns of a delimited file with pyarrow; malformed input raises
    :class:`DataFormatError` naming the first bad line.

    A multi-character delimiter made of one repeated character (``::``) is read as that
    character with empty filler columns in between, which are then checked to be empty.
    """
    sep = fmt.delimiter
    if len(sep) > 1 and sep != sep[0] * len(sep):
        raise ValueError(f"unsupported delimiter {sep!r}")
    names, fillers = _column_names(fmt)
    column_types = {**types, **{f: pa.string() for f in fillers}}
    # Check the header ourselves (exact names), then let pyarrow skip it.
    if fmt.header is not None:
        _check_header(opener, label, fmt)
    read_options = pacsv.ReadOptions(column_names=names, skip_rows=1 if fmt.header is not None else 0)
    parse_options = pacsv.ParseOptions(
        delimiter=sep[0],
        quote_char='"' if fmt.quoted else False,
        double_quote=fmt.quoted,
        escape_char=False,
        newlines_in_values=fmt.quoted,
        ignore_empty_lines=True,
    )
    # No null markers: an empty numeric field must fail conversion, not become null.
    convert_options = pacsv.ConvertOptions(
        column_types=column_types,
        include_columns=list(types) + fillers,
        null_values=[],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    try:
        with opener() as fh:
            table = pacsv.read_csv(
                fh, read_options=read_options, parse_options=parse_options, convert_options=convert_options
            )
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise format_error(label, opener, fmt, f"cannot parse ({exc})") from None
    if _suspicious(table, fmt, types, fillers):
        raise format_error(label, opener, fmt, "malformed field (not located)")
    return table.select(list(types))


def _column_names(fmt: LineFormat) -> tuple[list[str], list[str]]:
    """The column names pyarrow reads (fields and the filler columns of a repeated delimiter), and the fillers."""
    sep = fmt.delimiter
    names: list[str] = []
    fillers: list[str] = []
    for i, spec in enumerate(fmt.fields):
        if i:
            for j in range(len(sep) - 1):
                fillers.append(f"__gap{i}_{j}")
                names.append(fillers[-1])
        names.append(spec.name)
    return names, fillers


def _check_header(opener: Opener, label: str, fmt: LineFormat) -> None:
    """Raise :class:`DataFormatError` unless the first line is exactly ``fmt.header``."""
    sep = fmt.delimiter
    with opener() as fh:
        first = fh.readline().decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n")
    got = tuple(next(csv.reader([first], delimiter=sep[0])) if fmt.quoted else first.split(sep))
    if tuple(g.strip().strip('"') for g in got) != fmt.header:
        raise DataFormatError(f'{label}: line 1: expected header {sep.join(fmt.header)!r}: "{shown(first)}"')


def _suspicious(table: pa.Table, fmt: LineFormat, types: dict[str, pa.DataType], fillers: list[str]) -> bool:
    """Whether ``table`` holds what pyarrow accepts but the format forbids (the bad line is then searched for)."""
    # Conditions pyarrow accepts but the format forbids: text between the ':' of '::',
    # empty string ids, NaN/inf ratings, values outside the field's range.
    suspicious = any(pc.max(pc.utf8_length(table[f])).as_py() for f in fillers)
    specs = {spec.name: spec for spec in fmt.fields}
    for name in types:
        column = table[name]
        spec = specs[name]
        if spec.kind == "str" and len(column) and pc.min(pc.utf8_length(column)).as_py() == 0:
            suspicious = True
        if pa.types.is_floating(column.type) and len(column) and not pc.all(pc.is_finite(column)).as_py():
            suspicious = True
        if (spec.low is not None or spec.high is not None) and len(column) and not suspicious:
            extremes = pc.min_max(column)
            low, high = extremes["min"].as_py(), extremes["max"].as_py()
            if spec.out_of_range(low) or spec.out_of_range(high):
                suspicious = True
    return suspicious
