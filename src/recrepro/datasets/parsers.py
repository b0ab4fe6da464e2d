"""One reader per raw file format; each returns the raw interaction frame.

Every reader parses with pyarrow (or numpy) in one vectorised pass. Only when that
pass fails does a slow line-by-line scan run, to find the first malformed line and
raise :class:`DataFormatError` naming the file, the 1-based line number and the
offending text. Each format knows the range of its values (ratings 1-5 for MovieLens
100K/1M, Amazon and Epinions, 0.5-5 for ML-10M/20M, counts >= 1, clicks 0-1): a value
outside it, or not finite, is a malformed line too. The registry (:mod:`recrepro.datasets.registry`) says which reader and
which files each dataset uses; :class:`RawParser` ties the two together.

Frames have columns ``user``, ``item`` (int64 when every id is an integer, else str),
``rating`` (float32), ``timestamp`` (int64; the 0-based row order where the data has
no time) and, for datasets published already split, ``part`` (``"train"``/``"test"``).
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
import math
import re
import tarfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from recrepro.datasets.container import RAW_COLUMNS, DataFormatError, RawInteractions

__all__ = [
    "RawParser",
    "read_amazon_ratings_csv",
    "read_exadmm_given_split",
    "read_lightgcn_split",
    "read_movielens_csv",
    "read_movielens_dat",
    "read_movielens_pairs_tsv",
    "read_movielens_10m_dat",
    "read_movielens_u_data",
    "read_hetrec_user_artists",
    "read_msd_triplets",
    "read_snap_finefoods",
    "read_synthetic_parquet",
    "read_tafeng_csv",
    "read_tenrec_csv",
    "read_trustlet_ratings",
]

Opener = Callable[[], BinaryIO]
_MAX_SHOWN = 200  # characters of an offending line quoted in an error message


# --------------------------------------------------------------------------- parser object
@dataclass(frozen=True)
class RawParser:
    """``parser(raw_dir) -> RawInteractions`` for one dataset.

    Attributes
    ----------
    dataset:
        Registry name (stored in the result).
    read:
        Reader called with ``raw_dir / f`` for each name in ``files``, in order.
    files:
        The member files the reader needs.
    implicit, has_timestamps:
        Copied into the :class:`RawInteractions`.
    form, lacks:
        For a reconstructed form of the dataset (:class:`recrepro.datasets.registry.ReconstructedForm`):
        its name and what it lacks, put into ``extras`` (``form``, ``lacks``) so that a protocol
        needing a lacking column refuses it (:func:`recrepro.datasets.preprocessing.preprocess`).
    """

    dataset: str
    read: Callable[..., pd.DataFrame]
    files: tuple[str, ...]
    implicit: bool
    has_timestamps: bool
    form: str | None = None
    lacks: tuple[str, ...] = ()

    def __call__(self, raw_dir: str | Path) -> RawInteractions:
        raw_dir = Path(raw_dir)
        paths = [raw_dir / name for name in self.files]
        missing = [p.name for p in paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(
                f"{self.dataset}: {', '.join(missing)} not found in {raw_dir}; "
                f"run `recrepro data fetch {self.dataset}` first"
            )
        frame = self.read(*paths)
        extras = {"form": self.form, "lacks": tuple(self.lacks)} if self.form else {}
        return RawInteractions(self.dataset, frame, has_timestamps=self.has_timestamps, implicit=self.implicit,
                               extras=extras)


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
            return f"{number:g} is outside the range {_range_text(self.low, self.high)}"
        return None


def _range_text(low: float | None, high: float | None) -> str:
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


def _field_problem(value: str, kind: str, spec: Field | None = None) -> str | None:
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
        problem = _field_problem(value, spec.kind, spec)
        if problem:
            return f"field {spec.name!r}: {problem}"
    return None


def _shown(text: str) -> str:
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


def _format_error(label: str, opener: Opener, fmt: LineFormat, fallback: str) -> DataFormatError:
    """Locate the first bad line (slow) and build the error; ``fallback`` when none is found."""
    bad = _first_bad_line(opener, fmt)
    if bad is None:
        return DataFormatError(f"{label}: {fallback}")
    line_no, text, problem = bad
    return DataFormatError(f'{label}: line {line_no}: {problem}: "{_shown(text)}"')


def _file_opener(path: Path) -> Opener:
    return lambda: open(path, "rb")


def _read_delimited(opener: Opener, label: str, fmt: LineFormat, types: dict[str, pa.DataType]) -> pa.Table:
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
        raise _format_error(label, opener, fmt, f"cannot parse ({exc})") from None
    if _suspicious(table, fmt, types, fillers):
        raise _format_error(label, opener, fmt, "malformed field (not located)")
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
        raise DataFormatError(f'{label}: line 1: expected header {sep.join(fmt.header)!r}: "{_shown(first)}"')


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


# --------------------------------------------------------------------------- frame helpers
def _ids(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """int64 ids when every id is an integer (and converting merges no two ids), else str."""
    if pa.types.is_integer(column.type):
        return pc.cast(column, pa.int64())
    try:
        as_int = pc.cast(column, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return column
    # "01" and "1" would collide as integers: keep such ids as strings.
    if pc.count_distinct(as_int).as_py() != pc.count_distinct(column).as_py():
        return column
    return as_int


def _frame(user, item, rating, timestamp, part: np.ndarray | None = None) -> pd.DataFrame:
    """Assemble the raw frame with the container's dtypes (ids int64/str, float32, int64)."""
    columns = {
        "user": _ids(user),
        "item": _ids(item),
        "rating": pc.cast(rating, pa.float32()) if not isinstance(rating, np.ndarray) else rating.astype(np.float32),
        "timestamp": (
            pc.cast(timestamp, pa.int64()) if not isinstance(timestamp, np.ndarray) else timestamp.astype(np.int64)
        ),
    }
    table = pa.table(columns)
    frame = table.to_pandas(split_blocks=True, self_destruct=True)
    if part is not None:
        frame["part"] = pd.array(part, dtype="str")
    return frame


def _file_order(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int64)


# --------------------------------------------------------------------------- MovieLens
def _rating_fields(low: float, high: float) -> tuple[Field, ...]:
    return (Field("user", "int"), Field("item", "int"), Field("rating", "float", low, high), Field("timestamp", "int"))


#: whole stars 1-5 (ML-100K, ML-1M) and half stars 0.5-5 (ML-10M, ML-20M; README of each release)
RATING_FIELDS = _rating_fields(1, 5)
HALF_STAR_FIELDS = _rating_fields(0.5, 5)
_RATING_TYPES = {"user": pa.int64(), "item": pa.int64(), "rating": pa.float32(), "timestamp": pa.int64()}

ML100K_U_DATA = LineFormat("\t", RATING_FIELDS)
MOVIELENS_DAT = LineFormat("::", RATING_FIELDS)
MOVIELENS_10M_DAT = LineFormat("::", HALF_STAR_FIELDS)
MOVIELENS_CSV = LineFormat(
    ",",
    (Field("userId", "int"), Field("movieId", "int"), Field("rating", "float", 0.5, 5), Field("timestamp", "int")),
    header=("userId", "movieId", "rating", "timestamp"),
)


def read_movielens_u_data(path: Path) -> pd.DataFrame:
    """ML-100K ``u.data``: ``user \\t item \\t rating \\t unix_time``, no header."""
    t = _read_delimited(_file_opener(path), str(path), ML100K_U_DATA, _RATING_TYPES)
    return _frame(t["user"], t["item"], t["rating"], t["timestamp"])


def read_movielens_dat(path: Path) -> pd.DataFrame:
    """ML-1M ``ratings.dat``: ``UserID::MovieID::Rating::Timestamp``, no header; whole stars 1-5."""
    t = _read_delimited(_file_opener(path), str(path), MOVIELENS_DAT, _RATING_TYPES)
    return _frame(t["user"], t["item"], t["rating"], t["timestamp"])


MOVIELENS_PAIRS_TSV = LineFormat("\t", (Field("UserID", "int", low=1), Field("MovieID", "int", low=1)))


def read_movielens_pairs_tsv(path: Path) -> pd.DataFrame:
    """ML-1M as (UserID, MovieID) pairs: ``UserID \\t MovieID``, no header, in ``ratings.dat`` order.

    The reconstructed ``pairs`` form of ML-1M (no Rating, no Timestamp column): ``rating`` is
    1.0 (every pair is an interaction, the implicit convention) and ``timestamp`` the file order.
    Protocols that need the missing columns refuse this form before reading a rating.
    """
    types = {"UserID": pa.int64(), "MovieID": pa.int64()}
    t = _read_delimited(_file_opener(path), str(path), MOVIELENS_PAIRS_TSV, types)
    return _frame(t["UserID"], t["MovieID"], np.ones(t.num_rows, np.float32), _file_order(t.num_rows))


def read_movielens_10m_dat(path: Path) -> pd.DataFrame:
    """ML-10M ``ratings.dat``: as ML-1M's, with half stars 0.5-5."""
    t = _read_delimited(_file_opener(path), str(path), MOVIELENS_10M_DAT, _RATING_TYPES)
    return _frame(t["user"], t["item"], t["rating"], t["timestamp"])


def read_movielens_csv(path: Path) -> pd.DataFrame:
    """ML-20M ``ratings.csv``: header ``userId,movieId,rating,timestamp``.

    20M rows: read by pyarrow's multi-threaded CSV reader straight into typed columns
    (about 0.6 GB for the frame).
    """
    types = {"userId": pa.int64(), "movieId": pa.int64(), "rating": pa.float32(), "timestamp": pa.int64()}
    t = _read_delimited(_file_opener(path), str(path), MOVIELENS_CSV, types)
    return _frame(t["userId"], t["movieId"], t["rating"], t["timestamp"])


# --------------------------------------------------------------------------- play counts
HETREC_USER_ARTISTS = LineFormat(
    "\t",
    (Field("userID", "int"), Field("artistID", "int"), Field("weight", "float", low=1)),
    header=("userID", "artistID", "weight"),
)
MSD_TRIPLETS = LineFormat("\t", (Field("user", "str"), Field("song", "str"), Field("play_count", "int", low=1)))


def read_hetrec_user_artists(path: Path) -> pd.DataFrame:
    """HetRec 2011 Last.fm ``user_artists.dat``: header ``userID\\tartistID\\tweight``, CRLF.

    ``rating`` is the listening count (``weight``); there is no time, so ``timestamp``
    is the file order.
    """
    types = {"userID": pa.int64(), "artistID": pa.int64(), "weight": pa.float32()}
    t = _read_delimited(_file_opener(path), str(path), HETREC_USER_ARTISTS, types)
    return _frame(t["userID"], t["artistID"], t["weight"], _file_order(t.num_rows))


def read_msd_triplets(path: Path) -> pd.DataFrame:
    """Echo Nest taste profile ``train_triplets.txt``: ``user \\t song \\t play_count``.

    48M rows with string ids (40- and 18-character hex): read by pyarrow, kept as
    Arrow-backed strings (no Python objects). ``rating`` is the play count,
    ``timestamp`` the file order.
    """
    types = {"user": pa.string(), "song": pa.string(), "play_count": pa.float32()}
    t = _read_delimited(_file_opener(path), str(path), MSD_TRIPLETS, types)
    return _frame(t["user"], t["song"], t["play_count"], _file_order(t.num_rows))


# --------------------------------------------------------------------------- explicit ratings
AMAZON_RATINGS = LineFormat(
    ",", (Field("user", "str"), Field("item", "str"), Field("rating", "float", 1, 5), Field("timestamp", "int"))
)
TRUSTLET_RATINGS = LineFormat(" ", (Field("user", "int"), Field("item", "int"), Field("rating", "float", 1, 5)))
TRUSTLET_MEMBER = "ratings_data.txt"


def read_amazon_ratings_csv(path: Path) -> pd.DataFrame:
    """Amazon ratings-only CSV (PFedRec's Amazon-Video ``ratings.dat``):
    ``user,item,rating,unix_time``, no header, CRLF."""
    types = {"user": pa.string(), "item": pa.string(), "rating": pa.float32(), "timestamp": pa.int64()}
    t = _read_delimited(_file_opener(path), str(path), AMAZON_RATINGS, types)
    return _frame(t["user"], t["item"], t["rating"], t["timestamp"])


def read_trustlet_ratings(path: Path) -> pd.DataFrame:
    """Trustlet Epinions ``ratings_data.txt.bz2``: a bz2-compressed *tar* whose member
    ``ratings_data.txt`` holds ``user item rating`` lines (space-separated).

    The .bz2 is kept as the verified member file and streamed (``tarfile`` mode
    ``r:bz2``), never extracted to disk. No time: ``timestamp`` is the file order.
    """
    label = f"{path} (member {TRUSTLET_MEMBER})"
    try:
        with tarfile.open(path, mode="r:bz2") as tf:
            member = tf.getmember(TRUSTLET_MEMBER)
            handle = tf.extractfile(member)
            if handle is None:
                raise KeyError(TRUSTLET_MEMBER)
            data = handle.read()  # 8.6 MB uncompressed
    except (tarfile.TarError, KeyError, OSError, EOFError) as exc:
        raise DataFormatError(f"{path}: not a bz2 tar with member {TRUSTLET_MEMBER!r} ({exc})") from None
    types = {"user": pa.int64(), "item": pa.int64(), "rating": pa.float32()}
    t = _read_delimited(lambda: io.BytesIO(data), label, TRUSTLET_RATINGS, types)
    return _frame(t["user"], t["item"], t["rating"], _file_order(t.num_rows))


# --------------------------------------------------------------------------- LightGCN releases
_ADJACENCY_LINE = re.compile(rb"\s*\d+(\s+\d+)*\s*")


def _read_adjacency_lines(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``user item item ...`` lines -> (user, item) int64 pair arrays, in file order.

    A line with a user and no items contributes no pair; empty lines are skipped.
    """
    data = path.read_bytes()
    lines = data.splitlines()
    rows = [line.split() for line in lines]
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    flat = [token for row in rows for token in row]
    try:
        values = np.array(flat, dtype=np.int64)
    except (ValueError, OverflowError):
        for line_no, line in enumerate(lines, start=1):
            if line.strip() and not _ADJACENCY_LINE.fullmatch(line):
                text = line.decode("utf-8", "replace")
                raise DataFormatError(
                    f'{path}: line {line_no}: expected "user item item ..." (integers): "{_shown(text)}"'
                ) from None
        raise DataFormatError(f"{path}: cannot parse integers") from None
    lengths = lengths[lengths > 0]
    if lengths.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    is_item = np.ones(values.size, dtype=bool)
    is_item[starts] = False
    users = np.repeat(values[starts], lengths - 1)
    return users, values[is_item]


def read_lightgcn_split(train_path: Path, test_path: Path) -> pd.DataFrame:
    """LightGCN/NGCF ``train.txt`` + ``test.txt`` (Gowalla, Yelp2018, Amazon-Book).

    Each line is ``user item item ...`` (0-based remapped ids). Rows come train first,
    then test, with ``part`` saying which; ``rating`` is 1.0 and ``timestamp`` the row
    order over both files.
    """
    train_users, train_items = _read_adjacency_lines(train_path)
    test_users, test_items = _read_adjacency_lines(test_path)
    users = np.concatenate([train_users, test_users])
    items = np.concatenate([train_items, test_items])
    part = np.repeat(np.array(["train", "test"], dtype=object), [train_users.size, test_users.size])
    return _frame(pa.array(users), pa.array(items), np.ones(users.size, np.float32), _file_order(users.size), part)


# --------------------------------------------------------------------------- exADMM fixture
EXADMM_UID_SID = LineFormat(",", (Field("uid", "int"), Field("sid", "int")), header=("uid", "sid"))
EXADMM_GIVEN_PARTS = ("train", "validation_tr", "validation_te", "test_tr", "test_te")


def read_exadmm_given_split(train: Path, validation_tr: Path, validation_te: Path, test_tr: Path,
                            test_te: Path) -> pd.DataFrame:
    """exADMM's already split strong-generalisation files (``uid,sid`` with header; ML-1M fixture).

    Rows come in the order of :data:`EXADMM_GIVEN_PARTS`, with ``part`` naming the file;
    ``rating`` is 1.0 (the files hold positives only) and ``timestamp`` the row order.
    """
    users, items, part = [], [], []
    for name, path in zip(EXADMM_GIVEN_PARTS, (train, validation_tr, validation_te, test_tr, test_te), strict=True):
        tab = _read_delimited(_file_opener(path), str(path), EXADMM_UID_SID, {"uid": pa.int64(), "sid": pa.int64()})
        users.append(tab["uid"].to_numpy())
        items.append(tab["sid"].to_numpy())
        part.append(np.full(tab.num_rows, name, dtype=object))
    u, i, p = np.concatenate(users), np.concatenate(items), np.concatenate(part)
    return _frame(pa.array(u), pa.array(i), np.ones(u.size, np.float32), _file_order(u.size), p)


# --------------------------------------------------------------------------- Ta-Feng
TAFENG_COLUMNS = (
    "TRANSACTION_DT",
    "CUSTOMER_ID",
    "AGE_GROUP",
    "PIN_CODE",
    "PRODUCT_SUBCLASS",
    "PRODUCT_ID",
    "AMOUNT",
    "ASSET",
    "SALES_PRICE",
)
_TAFENG_KINDS = {"TRANSACTION_DT": "mdy_date", "CUSTOMER_ID": "str", "PRODUCT_ID": "str"}
TAFENG_CSV = LineFormat(
    ",", tuple(Field(c, _TAFENG_KINDS.get(c, "any")) for c in TAFENG_COLUMNS), header=TAFENG_COLUMNS, quoted=True
)


def read_tafeng_csv(path: Path) -> pd.DataFrame:
    """Ta-Feng ``ta_feng_all_months_merged.csv`` (Kaggle merge; quoted, UTF-8 BOM, CRLF).

    user = ``CUSTOMER_ID``, item = ``PRODUCT_ID`` (int64: all numeric, no leading-zero
    collisions), rating 1.0 per transaction row, timestamp = ``TRANSACTION_DT``
    (month/day/year) as Unix seconds at 00:00 UTC.
    """
    types = {"TRANSACTION_DT": pa.string(), "CUSTOMER_ID": pa.string(), "PRODUCT_ID": pa.string()}
    opener = _file_opener(path)
    t = _read_delimited(opener, str(path), TAFENG_CSV, types)
    # About 120 distinct days: parse each distinct string once, strictly (pyarrow's
    # strptime would roll 2/30 over into March).
    days = pc.dictionary_encode(t["TRANSACTION_DT"]).combine_chunks()
    distinct = days.dictionary.to_pylist()
    if any(_field_problem(d, "mdy_date") for d in distinct):
        raise _format_error(str(path), opener, TAFENG_CSV, "bad TRANSACTION_DT (not located)")
    epoch = dt.datetime(1970, 1, 1)
    day_seconds = np.array(
        [int((dt.datetime.strptime(d, "%m/%d/%Y") - epoch).total_seconds()) for d in distinct], dtype=np.int64
    )
    seconds = day_seconds[days.indices.to_numpy(zero_copy_only=False)]
    return _frame(t["CUSTOMER_ID"], t["PRODUCT_ID"], np.ones(t.num_rows, np.float32), seconds)


# --------------------------------------------------------------------------- Tenrec QB-article
TENREC_REQUIRED = ("user_id", "item_id", "click")


def read_tenrec_csv(path: Path) -> pd.DataFrame:
    """Tenrec ``QB-article.csv``: comma-separated with a header that includes
    ``user_id,item_id,click`` (other columns, e.g. ``gender,age``, are ignored).

    ``rating`` is ``click`` (the article files hold clicks only); there is no time
    column (Tenrec orders each user's rows by click time), so ``timestamp`` is the file
    order. Note: FedRAP's loader reads this file with ``header=1``, which drops the
    first data row; that quirk belongs to preprocessing, not here.
    """
    with open(path, "rb") as fh:
        first = fh.readline().decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n")
    header = tuple(h.strip() for h in first.split(","))
    if not set(TENREC_REQUIRED) <= set(header):
        raise DataFormatError(f'{path}: line 1: header must contain {",".join(TENREC_REQUIRED)}: "{_shown(first)}"')
    kinds = {"user_id": Field("user_id", "str"), "item_id": Field("item_id", "str"),
             "click": Field("click", "float", 0, 1)}
    fmt = LineFormat(",", tuple(kinds.get(h, Field(h, "any")) for h in header), header=header)
    types = {"user_id": pa.string(), "item_id": pa.string(), "click": pa.float32()}
    t = _read_delimited(_file_opener(path), str(path), fmt, types)
    return _frame(t["user_id"], t["item_id"], t["click"], _file_order(t.num_rows))


# --------------------------------------------------------------------------- SNAP fine foods
_FINEFOODS_KEYS = {
    "item": "product/productId: ",
    "user": "review/userId: ",
    "rating": "review/score: ",
    "timestamp": "review/time: ",
}


FINEFOODS_SCORE = Field("review/score", "float", 1, 5)


def read_snap_finefoods(path: Path) -> pd.DataFrame:
    """SNAP ``finefoods.txt.gz`` (Amazon Fine Food Reviews, McAuley & Leskovec 2013).

    Records are blocks of ``key: value`` lines separated by a blank line; the keys used
    are ``product/productId``, ``review/userId``, ``review/score`` and ``review/time``
    (in that order within a record). Only this SNAP release is supported (the Kaggle
    ``Reviews.csv`` holds the same reviews but needs a Kaggle login). The gzip is
    streamed, never extracted. Latin-1 decoding is used because the review text is not
    guaranteed to be UTF-8; the ids and numbers read are ASCII.
    """
    read_options = pacsv.ReadOptions(column_names=["line"], encoding="latin-1", block_size=1 << 24)
    # One column per line: a delimiter/quote that never splits (text with \x1f is
    # handled by the slow path below).
    parse_options = pacsv.ParseOptions(
        delimiter="\x1f", quote_char=False, escape_char=False, newlines_in_values=False, ignore_empty_lines=False
    )
    convert_options = pacsv.ConvertOptions(
        column_types={"line": pa.string()}, null_values=[], strings_can_be_null=False
    )
    try:
        lines = pacsv.read_csv(
            str(path), read_options=read_options, parse_options=parse_options, convert_options=convert_options
        )["line"]
    except pa.ArrowInvalid:
        return _finefoods_slow(path)
    # Row k of the table is line k+1 of the file (no quoting, empty lines kept).
    positions: dict[str, np.ndarray] = {}
    values: dict[str, pa.ChunkedArray] = {}
    for column, prefix in _FINEFOODS_KEYS.items():
        mask = pc.starts_with(lines, prefix)
        positions[column] = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
        values[column] = pc.utf8_slice_codeunits(lines.filter(mask), start=len(prefix))
    return _finefoods_frame(path, positions, values)


def _finefoods_frame(path: Path, positions: dict[str, np.ndarray], values: dict) -> pd.DataFrame:
    """Check the record structure (each key once per record, in order) and build the frame."""
    item_at, user_at, rating_at, time_at = (positions[k] for k in ("item", "user", "rating", "timestamp"))
    n = item_at.size
    if not (user_at.size == rating_at.size == time_at.size == n):
        for k in range(n):  # locate the first record missing a key
            nxt = item_at[k + 1] if k + 1 < n else np.iinfo(np.int64).max
            if not all(k < a.size and item_at[k] < a[k] < nxt for a in (user_at, rating_at, time_at)):
                raise DataFormatError(
                    f"{path}: line {item_at[k] + 1}: record lacks one of " f"review/userId, review/score, review/time"
                )
        raise DataFormatError(f"{path}: a review/... line comes before the first product/productId")
    following = np.append(item_at[1:], np.iinfo(np.int64).max)
    ordered = (item_at < user_at) & (user_at < rating_at) & (rating_at < time_at) & (time_at < following)
    if not ordered.all():
        k = int(np.flatnonzero(~ordered)[0])
        raise DataFormatError(f"{path}: line {item_at[k] + 1}: record keys out of order")
    for column, pattern, at in (("rating", r"^\d+(\.\d+)?$", rating_at), ("timestamp", r"^-?\d+$", time_at)):
        ok = pc.match_substring_regex(values[column], pattern).to_numpy(zero_copy_only=False)
        if not ok.all():
            k = int(np.flatnonzero(~ok)[0])
            bad = values[column][k].as_py()
            raise DataFormatError(
                f'{path}: line {at[k] + 1}: {_FINEFOODS_KEYS[column]}"{_shown(bad)}" ' f"is not a number"
            )
    scores = pc.cast(values["rating"], pa.float64()).to_numpy(zero_copy_only=False)
    outside = np.flatnonzero((scores < FINEFOODS_SCORE.low) | (scores > FINEFOODS_SCORE.high))
    if outside.size:
        k = int(outside[0])
        raise DataFormatError(f"{path}: line {rating_at[k] + 1}: {_FINEFOODS_KEYS['rating']}"
                              f"{FINEFOODS_SCORE.out_of_range(scores[k])}")
    return _frame(
        values["user"],
        values["item"],
        pc.cast(values["rating"], pa.float32()),
        pc.cast(values["timestamp"], pa.int64()),
    )


def _finefoods_slow(path: Path) -> pd.DataFrame:
    """Line-by-line fallback for :func:`read_snap_finefoods` (text the fast reader cannot split)."""
    positions: dict[str, list[int]] = {k: [] for k in _FINEFOODS_KEYS}
    found: dict[str, list[str]] = {k: [] for k in _FINEFOODS_KEYS}
    with gzip.open(path, "rt", encoding="latin-1", newline="\n") as fh:
        for index, line in enumerate(fh):
            for column, prefix in _FINEFOODS_KEYS.items():
                if line.startswith(prefix):
                    positions[column].append(index)
                    found[column].append(line[len(prefix) :].rstrip("\r\n"))
                    break
    return _finefoods_frame(
        path,
        {k: np.asarray(v, dtype=np.int64) for k, v in positions.items()},
        {k: pa.chunked_array([pa.array(v, pa.string())]) for k, v in found.items()},
    )


# --------------------------------------------------------------------------- synthetic
def read_synthetic_parquet(path: Path) -> pd.DataFrame:
    """``interactions.parquet`` written by ``recrepro data synth`` (already typed)."""
    frame = pd.read_parquet(path)
    missing = [c for c in RAW_COLUMNS if c not in frame.columns]
    if missing:
        raise DataFormatError(f"{path}: lacks columns {missing}")
    rating = frame["rating"].to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(rating) | (rating < SYNTHETIC_RATING.low) | (rating > SYNTHETIC_RATING.high))
    if bad.size:
        k = int(bad[0])
        raise DataFormatError(f"{path}: row {k}: rating {rating[k]:g} is not a finite number in the range "
                              f"{_range_text(SYNTHETIC_RATING.low, SYNTHETIC_RATING.high)}")
    return frame


SYNTHETIC_RATING = Field("rating", "float", 1, 5)  # recrepro.datasets.synthetic draws 1-5
