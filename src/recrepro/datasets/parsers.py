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

The line formats and the reading of a delimited file (:mod:`recrepro.datasets.text_formats`) are a
module of their own.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import re
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from recrepro.datasets.container import RAW_COLUMNS, DataFormatError, RawInteractions
from recrepro.datasets.text_formats import (
    Field,
    LineFormat,
    field_problem,
    file_opener,
    format_error,
    range_text,
    read_delimited,
    shown,
)

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
    t = read_delimited(file_opener(path), str(path), ML100K_U_DATA, _RATING_TYPES)
    return _frame(t["user"], t["item"], t["rating"], t["timestamp"])


def read_movielens_dat(path: Path) -> pd.DataFrame:
    """ML-1M ``ratings.dat``: ``UserID::MovieID::Rating::Timestamp``, no header; whole stars 1-5."""
    t = read_delimited(file_opener(path), str(path), MOVIELENS_DAT, _RATING_TYPES)
    return _frame(t["user"], t["item"], t["rating"], t["timestamp"])


MOVIELENS_PAIRS_TSV = LineFormat("\t", (Field("UserID", "int", low=1), Field("MovieID", "int", low=1)))


def read_movielens_pairs_tsv(path: Path) -> pd.DataFrame:
    """ML-1M as (UserID, MovieID) pairs: ``UserID \\t MovieID``, no header, in ``ratings.dat`` order.

    The reconstructed ``pairs`` form of ML-1M (no Rating, no Timestamp column): ``rating`` is
    1.0 (every pair is an interaction, the implicit convention) and ``timestamp`` the file order.
    Protocols that need the missing columns refuse this form before reading a rating.
    """
    types = {"UserID": pa.int64(), "MovieID": pa.int64()}
    t = read_delimited(file_opener(path), str(path), MOVIELENS_PAIRS_TSV, types)
    return _frame(t["UserID"], t["MovieID"], np.ones(t.num_rows, np.float32), _file_order(t.num_rows))


def read_movielens_10m_dat(path: Path) -> pd.DataFrame:
    """ML-10M ``ratings.dat``: as ML-1M's, with half stars 0.5-5."""
    t = read_delimited(file_opener(path), str(path), MOVIELENS_10M_DAT, _RATING_TYPES)
    return _frame(t["user"], t["item"], t["rating"], t["timestamp"])


def read_movielens_csv(path: Path) -> pd.DataFrame:
    """ML-20M ``ratings.csv``: header ``userId,movieId,rating,timestamp``.

    20M rows: read by pyarrow's multi-threaded CSV reader straight into typed columns
    (about 0.6 GB for the frame).
    """
    types = {"userId": pa.int64(), "movieId": pa.int64(), "rating": pa.float32(), "timestamp": pa.int64()}
    t = read_delimited(file_opener(path), str(path), MOVIELENS_CSV, types)
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
    t = read_delimited(file_opener(path), str(path), HETREC_USER_ARTISTS, types)
    return _frame(t["userID"], t["artistID"], t["weight"], _file_order(t.num_rows))


def read_msd_triplets(path: Path) -> pd.DataFrame:
    """Echo Nest taste profile ``train_triplets.txt``: ``user \\t song \\t play_count``.

    48M rows with string ids (40- and 18-character hex): read by pyarrow, kept as
    Arrow-backed strings (no Python objects). ``rating`` is the play count,
    ``timestamp`` the file order.
    """
    types = {"user": pa.string(), "song": pa.string(), "play_count": pa.float32()}
    t = read_delimited(file_opener(path), str(path), MSD_TRIPLETS, types)
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
    t = read_delimited(file_opener(path), str(path), AMAZON_RATINGS, types)
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
    t = read_delimited(lambda: io.BytesIO(data), label, TRUSTLET_RATINGS, types)
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
                    f'{path}: line {line_no}: expected "user item item ..." (integers): "{shown(text)}"'
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
        tab = read_delimited(file_opener(path), str(path), EXADMM_UID_SID, {"uid": pa.int64(), "sid": pa.int64()})
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
    opener = file_opener(path)
    t = read_delimited(opener, str(path), TAFENG_CSV, types)
    # About 120 distinct days: parse each distinct string once, strictly (pyarrow's
    # strptime would roll 2/30 over into March).
    days = pc.dictionary_encode(t["TRANSACTION_DT"]).combine_chunks()
    distinct = days.dictionary.to_pylist()
    if any(field_problem(d, "mdy_date") for d in distinct):
        raise format_error(str(path), opener, TAFENG_CSV, "bad TRANSACTION_DT (not located)")
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
        raise DataFormatError(f'{path}: line 1: header must contain {",".join(TENREC_REQUIRED)}: "{shown(first)}"')
    kinds = {"user_id": Field("user_id", "str"), "item_id": Field("item_id", "str"),
             "click": Field("click", "float", 0, 1)}
    fmt = LineFormat(",", tuple(kinds.get(h, Field(h, "any")) for h in header), header=header)
    types = {"user_id": pa.string(), "item_id": pa.string(), "click": pa.float32()}
    t = read_delimited(file_opener(path), str(path), fmt, types)
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
                f'{path}: line {at[k] + 1}: {_FINEFOODS_KEYS[column]}"{shown(bad)}" ' f"is not a number"
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
                              f"{range_text(SYNTHETIC_RATING.low, SYNTHETIC_RATING.high)}")
    return frame


SYNTHETIC_RATING = Field("rating", "float", 1, 5)  # recrepro.datasets.synthetic draws 1-5
