"""Parsers: real files from the mirror (hand-checked counts) and small files in every format."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mirror_path

from recrepro.datasets import DATASETS, DataFormatError, fetch_dataset, load_raw
from recrepro.datasets import parsers
from recrepro.io import write_parquet


MIRROR = mirror_path()
requires_mirror = pytest.mark.skipif(
    MIRROR is None, reason="dataset mirror ../shared/datasets (or $RECREPRO_MIRROR) absent"
)


def _check_dtypes(frame: pd.DataFrame, id_dtype: str) -> None:
    assert str(frame["user"].dtype) == id_dtype and str(frame["item"].dtype) == id_dtype
    assert frame["rating"].dtype == np.float32 and frame["timestamp"].dtype == np.int64


def _stats(frame: pd.DataFrame) -> tuple[int, int, int]:
    return len(frame), frame["user"].nunique(), frame["item"].nunique()


# --------------------------------------------------------------------------- real files
# Counts from each PROVENANCE.md (and the dataset readmes), checked against the data.
@pytest.mark.realdata
@requires_mirror
def test_ml100k_real():
    raw = load_raw("ml-100k", MIRROR / "ml-100k")
    frame = raw.frame
    assert _stats(frame) == (100_000, 943, 1_682)
    _check_dtypes(frame, "int64")
    assert frame.iloc[0].tolist() == [196, 242, 3.0, 881250949]  # first line of u.data
    assert frame.iloc[-1].tolist() == [12, 203, 3.0, 879959583]  # last line
    assert sorted(frame["rating"].unique().tolist()) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert raw.has_timestamps and not raw.implicit


@pytest.mark.realdata
@requires_mirror
def test_hetrec_user_artists_real():
    raw = load_raw("hetrec2011-lastfm-2k", MIRROR / "hetrec2011-lastfm-2k")
    frame = raw.frame
    assert _stats(frame) == (92_834, 1_892, 17_632)
    _check_dtypes(frame, "int64")
    assert frame.iloc[0].tolist() == [2, 51, 13883.0, 0]  # "2\t51\t13883\r\n" after the header
    assert frame["rating"].astype(np.float64).sum() == 69_183_975  # total listening count, exact in float32
    assert np.array_equal(frame["timestamp"].to_numpy(), np.arange(92_834))
    assert not raw.has_timestamps and raw.implicit


@pytest.mark.realdata
@requires_mirror
def test_amazon_video_real():
    frame = load_raw("amazon-video", MIRROR / "amazon-video").frame
    assert _stats(frame) == (63_836, 8_072, 11_830)
    _check_dtypes(frame, "str")
    assert frame.iloc[0].tolist() == ["AGZ8SM1BGK3CK", "B000GFDAUG", 5.0, 1198195200]
    assert (frame["timestamp"].min(), frame["timestamp"].max()) == (967248000, 1406073600)
    assert not frame.duplicated(["user", "item"]).any()


@pytest.mark.realdata
@requires_mirror
def test_gowalla_real():
    raw = load_raw("gowalla", MIRROR / "gowalla")
    frame = raw.frame
    assert frame["part"].value_counts().to_dict() == {"train": 810_128, "test": 217_242}
    assert _stats(frame) == (1_027_370, 29_858, 40_981)
    _check_dtypes(frame, "int64")
    assert (frame["rating"] == 1.0).all()
    assert np.array_equal(frame["timestamp"].to_numpy(), np.arange(1_027_370))
    assert frame[frame["part"] == "train"].iloc[:3][["user", "item"]].values.tolist() == [[0, 0], [0, 1], [0, 2]]
    assert frame[frame["part"] == "test"].iloc[:2][["user", "item"]].values.tolist() == [[0, 7580], [0, 3730]]
    assert raw.implicit and not raw.has_timestamps


@pytest.mark.realdata
@requires_mirror
def test_amazon_book_test_file_with_item_less_lines(tmp_path):
    # amazon-book/test.txt has 52,643 lines; 4 of them hold a user and no item.
    (tmp_path / "train.txt").write_text("")
    frame = parsers.read_lightgcn_split(tmp_path / "train.txt", MIRROR / "amazon-book" / "test.txt")
    assert _stats(frame) == (603_378, 52_639, 82_629)
    assert set(frame["part"]) == {"test"}


@pytest.mark.realdata
@requires_mirror
def test_epinions_real():
    raw = load_raw("epinions", MIRROR / "epinions")
    frame = raw.frame
    assert _stats(frame) == (664_824, 40_163, 139_738)
    _check_dtypes(frame, "int64")
    assert frame.iloc[:2].values.tolist() == [[1, 100, 4.0, 0], [1, 101, 5.0, 1]]
    assert frame["rating"].value_counts().sort_index().tolist() == [43_228, 50_678, 75_525, 194_340, 301_053]
    assert not raw.has_timestamps


@pytest.mark.realdata
@requires_mirror
def test_tafeng_real(tmp_path):
    fetch_dataset("tafeng", tmp_path, mirror=MIRROR, urls_allowed=False)
    frame = load_raw("tafeng", tmp_path).frame
    assert _stats(frame) == (817_741, 32_266, 23_812)
    _check_dtypes(frame, "int64")
    # First data line: "11/1/2000","01104905",...,"4710199010372",...
    assert frame.iloc[0].tolist() == [1104905, 4710199010372, 1.0, 973036800]
    # 2000-11-01 .. 2001-02-28, 00:00 UTC
    assert (frame["timestamp"].min(), frame["timestamp"].max()) == (973036800, 983318400)
    assert len(frame.drop_duplicates(["user", "item"])) == 743_228


@pytest.mark.realdata
@requires_mirror
def test_ml1m_users_dat_is_not_a_rating_file(tmp_path):
    # users.dat has the ratings.dat separator but other fields: it must be rejected.
    expected = "users\\.dat: line 1: expected 4 fields separated by '::', found 5: \"1::F::1::10::48067\""
    with pytest.raises(DataFormatError, match=expected):
        parsers.read_movielens_dat(MIRROR / "ml-1m" / "users.dat")


# --------------------------------------------------------------------------- small files
def test_ml1m_dat(tmp_path):
    (tmp_path / "ratings.dat").write_text("1::1193::5::978300760\n1::661::3::978302109\n6040::1097::4::956715648\n")
    frame = load_raw("ml-1m", tmp_path).frame
    _check_dtypes(frame, "int64")
    assert frame.values.tolist() == [[1, 1193, 5, 978300760], [1, 661, 3, 978302109], [6040, 1097, 4, 956715648]]


def test_ml10m_half_stars(tmp_path):
    (tmp_path / "ratings.dat").write_text("1::122::5::838985046\n1::185::4.5::838983525\n71567::2107::0.5::912580553\n")
    frame = load_raw("ml-10m", tmp_path).frame
    assert frame["rating"].tolist() == [5.0, 4.5, 0.5]
    assert frame["user"].tolist() == [1, 1, 71567]


def test_ml20m_csv(tmp_path):
    (tmp_path / "ratings.csv").write_bytes(
        b"userId,movieId,rating,timestamp\r\n1,2,3.5,1112486027\r\n1,29,3.5,1112484676\r\n138493,71619,2.5,1255811136\r\n"
    )
    frame = load_raw("ml-20m", tmp_path).frame
    _check_dtypes(frame, "int64")
    assert frame.values.tolist() == [
        [1, 2, 3.5, 1112486027],
        [1, 29, 3.5, 1112484676],
        [138493, 71619, 2.5, 1255811136],
    ]


def test_ml20m_wrong_header(tmp_path):
    (tmp_path / "ratings.csv").write_text("userId,movieId,tag,timestamp\n1,2,funny,1112486027\n")
    with pytest.raises(DataFormatError, match=r"ratings\.csv: line 1: expected header"):
        load_raw("ml-20m", tmp_path)


def test_msd_triplets_keep_string_ids(tmp_path):
    (tmp_path / "train_triplets.txt").write_text(
        "b80344d063b5ccb3212f76538f3d9e43d87dca9e\tSOAKIMP12A8C130995\t1\n"
        "b80344d063b5ccb3212f76538f3d9e43d87dca9e\tSOAPDEY12A81C210A9\t12\n"
        "85c1f87fea955d09b4bec2e36aee110927aab7eb\tSOAKIMP12A8C130995\t2\n"
    )
    raw = load_raw("msd", tmp_path)
    _check_dtypes(raw.frame, "str")
    assert raw.frame["rating"].tolist() == [1.0, 12.0, 2.0]
    assert raw.frame["item"].tolist()[0] == "SOAKIMP12A8C130995"
    assert raw.frame["timestamp"].tolist() == [0, 1, 2]


def test_ids_with_colliding_leading_zeros_stay_strings(tmp_path):
    (tmp_path / "ratings.dat").write_text("01,007,5.0,100\r\n1,8,4.0,200\r\n")
    frame = load_raw("amazon-video", tmp_path).frame
    assert frame["user"].tolist() == ["01", "1"]  # "01" and "1" must stay two users
    assert frame["item"].tolist() == [7, 8]  # numeric and no collision: int64
    assert frame["item"].dtype == np.int64


def test_lightgcn_lines(tmp_path):
    (tmp_path / "train.txt").write_text("0 5 6 7\n1\n2 5\n")
    (tmp_path / "test.txt").write_text("0 8\n1 9 5\n\n2 \n")
    frame = load_raw("yelp2018", tmp_path).frame
    assert frame[["user", "item"]].values.tolist() == [[0, 5], [0, 6], [0, 7], [2, 5], [0, 8], [1, 9], [1, 5]]
    assert frame["part"].tolist() == ["train"] * 4 + ["test"] * 3
    assert frame["timestamp"].tolist() == list(range(7))


def test_trustlet_bz2_tar(tmp_path):
    content = b"1 100 4\n1 101 5\n2 100 1\n"
    info = tarfile.TarInfo("ratings_data.txt")
    info.size = len(content)
    with tarfile.open(tmp_path / "ratings_data.txt.bz2", "w:bz2") as tf:
        tf.addfile(info, io.BytesIO(content))
    frame = load_raw("epinions", tmp_path).frame
    assert frame.values.tolist() == [[1, 100, 4, 0], [1, 101, 5, 1], [2, 100, 1, 2]]


def test_tenrec(tmp_path):
    (tmp_path / "QB-article.csv").write_text("user_id,item_id,click,gender,age\n1,10,1,1,3\n1,11,1,1,3\n2,10,1,2,4\n")
    raw = load_raw("qb-article", tmp_path)
    assert raw.frame[["user", "item", "rating", "timestamp"]].values.tolist() == [
        [1, 10, 1, 0],
        [1, 11, 1, 1],
        [2, 10, 1, 2],
    ]
    assert raw.implicit and not raw.has_timestamps
    (tmp_path / "QB-article.csv").write_text("user_id,item_id,gender\n1,10,1\n")
    with pytest.raises(DataFormatError, match="header must contain user_id,item_id,click"):
        load_raw("qb-article", tmp_path)


FINEFOODS = (
    "product/productId: B001E4KFG0\nreview/userId: A3SGXH7AUHU8GW\nreview/profileName: delmartian\n"
    "review/helpfulness: 1/1\nreview/score: 5.0\nreview/time: 1303862400\nreview/summary: Good Quality Dog Food\n"
    "review/text: I have bought several of the Vitality canned dog food products.\n\n"
    "product/productId: B00813GRG4\nreview/userId: A1D87F6ZCVE5NK\nreview/profileName: dll pa\n"
    "review/helpfulness: 0/0\nreview/score: 1.0\nreview/time: 1346976000\nreview/summary: Not as Advertised\n"
    "review/text: Product arrived labeled as Jumbo Salted Peanuts\xe9.\n\n"
)


def test_snap_finefoods(tmp_path):
    with gzip.open(tmp_path / "finefoods.txt.gz", "wb") as fh:
        fh.write(FINEFOODS.encode("latin-1"))
    frame = load_raw("amazon-fine-food", tmp_path).frame
    _check_dtypes(frame, "str")
    assert frame.values.tolist() == [
        ["A3SGXH7AUHU8GW", "B001E4KFG0", 5.0, 1303862400],
        ["A1D87F6ZCVE5NK", "B00813GRG4", 1.0, 1346976000],
    ]


def test_snap_finefoods_missing_score(tmp_path):
    broken = FINEFOODS.replace("review/score: 1.0\n", "")
    with gzip.open(tmp_path / "finefoods.txt.gz", "wb") as fh:
        fh.write(broken.encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"finefoods\.txt\.gz: line 10: record lacks"):
        load_raw("amazon-fine-food", tmp_path)


def test_tafeng_quoted_csv(tmp_path):
    header = '\ufeff"TRANSACTION_DT","CUSTOMER_ID","AGE_GROUP","PIN_CODE","PRODUCT_SUBCLASS","PRODUCT_ID","AMOUNT","ASSET","SALES_PRICE"'
    rows = [
        '"11/1/2000","01104905","45-49","115","110411","4710199010372","2","24","30"',
        '"2/28/2001","00418683","45-49","Others","120107","4710857472535","1","48","46"',
    ]
    path = tmp_path / "ta_feng_all_months_merged.csv"
    path.write_bytes("\r\n".join([header, *rows, ""]).encode("utf-8"))
    frame = load_raw("tafeng", tmp_path).frame
    assert frame.values.tolist() == [[1104905, 4710199010372, 1.0, 973036800], [418683, 4710857472535, 1.0, 983318400]]
    rows[1] = rows[1].replace("2/28/2001", "2/30/2001")
    path.write_bytes("\r\n".join([header, *rows, ""]).encode("utf-8"))
    with pytest.raises(DataFormatError, match=r"line 3: field 'TRANSACTION_DT': '2/30/2001' is not"):
        load_raw("tafeng", tmp_path)


def test_synthetic_parquet(tmp_path):
    frame = pd.DataFrame(
        {
            "user": np.array([0, 0, 1], np.int64),
            "item": np.array([3, 4, 3], np.int64),
            "rating": np.array([5, 1, 3], np.float32),
            "timestamp": np.array([10, 20, 30], np.int64),
        }
    )
    write_parquet(tmp_path / "interactions.parquet", frame)
    raw = load_raw("synthetic", tmp_path)
    pd.testing.assert_frame_equal(raw.frame, frame)
    assert raw.dataset == "synthetic"


# --------------------------------------------------------------------------- malformed lines
@pytest.mark.parametrize(
    ("bad_line", "problem"),
    [
        ("186\t302\tx\t891717742", "field 'rating': 'x' is not a number"),
        ("186\t302\t3", "expected 4 fields separated by '\\t', found 3"),
        ("186\t302\t3\t89171.5", "field 'timestamp': '89171.5' is not an integer"),
        ("186\t\t3\t891717742", "field 'item': '' is not an integer"),
        ("186\t302\tnan\t891717742", "'nan' is not a finite number"),
    ],
)
def test_u_data_bad_third_line(tmp_path, bad_line, problem):
    lines = ["196\t242\t3\t881250949", "22\t377\t1\t878887116", bad_line, "244\t51\t2\t880606923"]
    (tmp_path / "u.data").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError) as info:
        load_raw("ml-100k", tmp_path)
    message = str(info.value)
    assert str(tmp_path / "u.data") in message
    assert "line 3:" in message
    assert problem in message
    assert f'"{bad_line}"' in message


def test_double_colon_with_single_colon_is_located(tmp_path):
    (tmp_path / "ratings.dat").write_text("1::1193::5::978300760\n1::661::3::978302109\n1::914:3::978301968\n")
    with pytest.raises(DataFormatError, match=r'line 3: expected 4 fields .*"1::914:3::978301968"'):
        load_raw("ml-1m", tmp_path)


def test_lightgcn_bad_token(tmp_path):
    (tmp_path / "train.txt").write_text("0 1 2\n1 3 x4\n")
    (tmp_path / "test.txt").write_text("0 5\n")
    with pytest.raises(DataFormatError, match=r'train\.txt: line 2: .*"1 3 x4"'):
        load_raw("gowalla", tmp_path)


def test_trustlet_bad_line_inside_tar(tmp_path):
    content = b"1 100 4\n1 101 five\n"
    info = tarfile.TarInfo("ratings_data.txt")
    info.size = len(content)
    with tarfile.open(tmp_path / "ratings_data.txt.bz2", "w:bz2") as tf:
        tf.addfile(info, io.BytesIO(content))
    with pytest.raises(DataFormatError, match=r'member ratings_data\.txt\): line 2: .*"1 101 five"'):
        load_raw("epinions", tmp_path)


def test_amazon_empty_user_id(tmp_path):
    (tmp_path / "ratings.dat").write_text("A1,B1,5.0,100\r\n,B2,4.0,200\r\n")
    with pytest.raises(DataFormatError, match=r"line 2: field 'user': empty id"):
        load_raw("amazon-video", tmp_path)


def test_every_registered_parser_reads_its_members():
    for name, spec in DATASETS.items():
        assert spec.parser.files == tuple(spec.members), name
