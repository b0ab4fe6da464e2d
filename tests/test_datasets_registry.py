"""The dataset registry: names, members, digests (against the mirror's PROVENANCE.md)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from conftest import mirror_path

from recrepro.datasets import DATASETS, DatasetSpec, fetch_dataset, get_dataset, load_raw

EXPECTED_NAMES = {
    "ml-100k",
    "ml-1m",
    "ml-10m",
    "ml-20m",
    "hetrec2011-lastfm-2k",
    "gowalla",
    "yelp2018",
    "amazon-book",
    "epinions",
    "msd",
    "amazon-fine-food",
    "amazon-video",
    "tafeng",
    "qb-article",
    "synthetic",
    "ml-1m-exadmm-split",  # exADMM's official test fixture (issue 4)
}


MIRROR = mirror_path()
requires_mirror = pytest.mark.skipif(
    MIRROR is None, reason="dataset mirror ../shared/datasets (or $RECREPRO_MIRROR) absent"
)


def test_every_expected_name_is_registered_and_nothing_else():
    assert set(DATASETS) == EXPECTED_NAMES


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_spec_is_complete(name):
    spec = get_dataset(name)
    assert isinstance(spec, DatasetSpec)
    assert spec.name == name
    assert spec.members, "a spec must name the files its parser reads"
    assert callable(spec.parser)
    assert spec.description and spec.licence
    for sha in spec.members.values():
        assert sha is None or re.fullmatch(r"[0-9a-f]{64}", sha)
    for md5 in [spec.archive_md5, *spec.member_md5.values()]:
        assert md5 is None or re.fullmatch(r"[0-9a-f]{32}", md5)
    assert set(spec.member_md5) <= set(spec.members)
    # Without an archive, each URL must name the member it provides.
    if spec.archive is None:
        for url in spec.urls:
            assert url.rsplit("/", 1)[-1] in spec.members, url
    # A dataset nobody can download must say how to get it by hand.
    if not spec.urls and not spec.generated:
        assert spec.manual_instructions


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_sizes_are_the_numbers_the_description_states(name):
    """``n_interactions``/``n_users``/``n_items`` restate the description; none is invented."""
    spec = get_dataset(name)
    stated = {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", spec.description)}
    split = re.search(r"([\d,]+) train \+ ([\d,]+) test", spec.description)
    if split:  # a published split: the interactions are train + test
        stated.add(sum(int(n.replace(",", "")) for n in split.groups()))
    for size in (spec.n_interactions, spec.n_users, spec.n_items):
        assert size is None or size in stated, (size, spec.description)
    # only the generated data has no stated size
    assert (spec.n_interactions is None) == spec.generated


def test_sizes_hand_checked():
    assert get_dataset("gowalla").n_interactions == 1_027_370  # 810,128 train + 217,242 test
    assert (get_dataset("ml-1m").n_interactions, get_dataset("ml-1m").n_users, get_dataset("ml-1m").n_items) == \
        (1_000_209, 6_040, 3_706)
    assert get_dataset("synthetic").n_interactions is None
    # the size fields default to None, so a spec built without them still is one
    defaults = {f.name: f.default for f in dataclasses.fields(DatasetSpec)}
    assert defaults["n_interactions"] is defaults["n_users"] is defaults["n_items"] is None


def test_spec_is_frozen():
    spec = get_dataset("ml-100k")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.members["u.data"] = None  # type: ignore[index]


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError) as info:
        get_dataset("ml-1b")
    message = str(info.value)
    assert "ml-1b" in message
    for name in ("ml-100k", "gowalla", "qb-article", "synthetic"):
        assert name in message


def test_flags():
    given = {n for n, s in DATASETS.items() if s.given_split}
    assert given == {"gowalla", "yelp2018", "amazon-book", "ml-1m-exadmm-split"}
    assert not get_dataset("epinions").has_timestamps
    assert get_dataset("ml-1m").has_timestamps and not get_dataset("ml-1m").implicit
    assert get_dataset("gowalla").implicit


def test_manual_instructions_say_which_file_goes_where():
    qb = get_dataset("qb-article")
    assert qb.urls == ()
    assert "QB-article.csv" in qb.manual_instructions
    assert "data/raw/qb-article/" in qb.manual_instructions
    assert "user_id,item_id,click" in qb.manual_instructions
    video = get_dataset("amazon-video")
    assert "ratings.dat" in video.manual_instructions and "data/raw/amazon-video/" in video.manual_instructions


def test_synthetic_is_generated_not_fetched(tmp_path):
    with pytest.raises(ValueError, match="recrepro data synth"):
        fetch_dataset("synthetic", tmp_path)
    assert not (tmp_path / "fetch.json").exists()


def test_load_raw_without_files_says_to_fetch(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"u\.data.*recrepro data fetch ml-100k"):
        load_raw("ml-100k", tmp_path)


# Hand-checked against the PROVENANCE.md tables (sha256 column) and the README md5 list.
PUBLISHED_SHA256 = {
    ("ml-100k", "u.data"): "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490",
    ("hetrec2011-lastfm-2k", "user_artists.dat"): "001400dc3c7d2667fca6e4ea6dc6acc31a9dd28ad5cd0f74cea988c019934d3b",
    ("gowalla", "train.txt"): "7244696fdeb23911319cf7b689f2e15a3c4c92549c873a5677b44e3f13cc3e62",
    ("gowalla", "test.txt"): "099a2a73924e4b754dc6efd730d764f492321b53c38eb93298850c83acf57be3",
    ("yelp2018", "test.txt"): "9cd9b37926cd1447a06625ffa7914527573fb097c10cb0bbdb1d1b8ded3742fe",
    # train.txt of Yelp2018 / Amazon-Book: the sha256 of public Git-LFS pointers (6,904,880 / 14,125,691
    # bytes), copied by hand from shared/datasets/README.md
    ("yelp2018", "train.txt"): "1e9568725a9e833d0ac3bae01c94cd95367f73b3bb6104fd26b5f65ea5054093",
    ("amazon-book", "train.txt"): "529066026085919381acd4ce19f69e9eafa4af3fef1a10119ea5551cc2ef8530",
    ("amazon-book", "test.txt"): "6250754994dd953b91b48dccdd77a73f318e0634b4757c2abfcc9d33a54ab0f5",
    ("epinions", "ratings_data.txt.bz2"): "7ab4ed8c38bddf4a197f9ab60c71ce4b60264e91e2c98644fc129ac1cdff0176",
    ("amazon-video", "ratings.dat"): "a1292e4a4dba6c37be6ae5dc83d4404af96bf3eace4c8954e2f4e8360a3cdd76",
    ("tafeng", "ta_feng_all_months_merged.csv"): "1d575e5d0b7207d7706d22ca56c7535886fff8175ca5537a310333a4ab7a7b67",
}
PUBLISHED_ARCHIVE_MD5 = {
    "ml-100k": "0e33842e24a9c977be4e0107933c0723",
    "ml-1m": "c4d9eecfca2ab87c1945afe126590906",
    "ml-10m": "ce571fd55effeba0271552578f2648bd",
    "ml-20m": "cd245b17a1ae2cc31bb14903e1204af3",
    "hetrec2011-lastfm-2k": "296d61afe4e8632b173fc2dd3be20ce2",
    "tafeng": "9ed2cd3faf63fa23a190557a30e3c216",
}


def test_registry_digests_are_the_published_ones():
    for (name, member), sha in PUBLISHED_SHA256.items():
        assert get_dataset(name).members[member] == sha, (name, member)
    for name, md5 in PUBLISHED_ARCHIVE_MD5.items():
        assert get_dataset(name).archive_md5 == md5, name
    # Files missing from every copy: the md5 is published too (and is checked beside the sha256).
    assert get_dataset("yelp2018").member_md5["train.txt"] == "1b8b5d22a227e01d6de002c53d32b4c4"
    assert get_dataset("amazon-book").member_md5["train.txt"] == "c916ecac04ca72300a016228258b41ed"
    assert get_dataset("ml-1m").member_md5["ratings.dat"] == "a89aa3591bc97d6d4e0c89459ff39362"


@pytest.mark.realdata
@requires_mirror
@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES - {"synthetic"}))
def test_registry_digests_appear_in_provenance(name):
    """Every digest the registry holds is written in the mirror's PROVENANCE.md / README.md."""
    spec = get_dataset(name)
    provenance = MIRROR / name / "PROVENANCE.md"
    text = (MIRROR / "README.md").read_text() + (provenance.read_text() if provenance.is_file() else "")
    digests = [
        d for d in (*spec.members.values(), *spec.member_md5.values(), spec.archive_md5, spec.archive_sha256) if d
    ]
    for digest in digests:
        assert digest in text, f"{name}: {digest} not in PROVENANCE/README"
