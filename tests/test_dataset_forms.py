"""Reconstructed forms of a dataset (ML-1M as pairs, Yelp2018's rebuilt training set), the
refusal of a protocol that needs what a form lacks, the published-statistics checks, the reach
counts, and the cap on what an unverified archive may expand to (issue 47, item 8)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import zipfile
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd
import pytest
from conftest import mirror_path

from recrepro.datasets import ChecksumError, DatasetUnavailableError, RawInteractions, fetch_dataset, get_dataset
from recrepro.datasets.download import (
    ExpansionCap,
    dataset_availability,
    reachable,
    verify_raw_files,
)
from recrepro.datasets.errors import ArchiveTooLargeError
from recrepro.datasets.registry import DATASETS, LACKABLE, ReconstructedForm, load_raw
from recrepro.datasets.statistics import published_statistics, statistics_checks
from recrepro.datasets.preprocessing import FormRefusedError, preprocess, resolve_recipe

REPO = Path(__file__).resolve().parents[1]
PROTOCOLS = {
    "prism": {"default": {"positive": None, "filter": {"mode": "none"}},
              "datasets": {"ml-1m": {"positive": {"op": ">=", "threshold": 3}}}},
    "exadmm": {"default": {"positive": {"op": ">", "threshold": 3.5}, "filter": {"mode": "none"}}},
    "fedrap": {"default": {"positive": {"op": ">", "threshold": 0}, "filter": {"mode": "none"}}},
}
PAIRS = b"1\t1193\n1\t661\n2\t1193\n3\t661\n3\t914\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _ml1m_with_pairs(data: bytes = PAIRS):
    """ML-1M's registry entry with its ``pairs`` form pinned to ``data``'s sha256."""
    spec = get_dataset("ml-1m")
    form = dataclasses.replace(spec.forms[0], members=MappingProxyType({"ml1m_user_movie_pairs.tsv": _sha(data)}))
    return dataclasses.replace(spec, forms=(form,))


def _mirror_with_pairs(root: Path, data: bytes = PAIRS) -> Path:
    (root / "ml-1m-pairs").mkdir(parents=True)
    (root / "ml-1m-pairs" / "ml1m_user_movie_pairs.tsv").write_bytes(data)
    return root


# ==================================================================== registry
def test_forms_are_pinned_and_documented():
    deviations = (REPO / "docs" / "deviations.md").read_text()
    forms = {(name, f.name): f for name, spec in DATASETS.items() for f in spec.forms}
    assert set(forms) == {("ml-1m", "pairs"), ("yelp2018", "rebuilt-sorted")}
    for (name, _), form in forms.items():
        assert form.members and all(re.fullmatch(r"[0-9a-f]{64}", sha) for sha in form.members.values()), name
        assert set(form.lacks) <= set(LACKABLE) and form.lacks
        assert f"## {form.deviation}\n" in deviations, form.deviation
    # sha256 of the mirror's copies, copied by hand from their PROVENANCE files
    assert forms["ml-1m", "pairs"].members == {
        "ml1m_user_movie_pairs.tsv": "9dd000a8d217437cda76641dabf92d08c9d6c60be2cb0bd943c115f0e171be96"}
    assert forms["yelp2018", "rebuilt-sorted"].members["train_rebuilt_sorted.txt"] == (
        "5588ebbcbf9ab10cdf7a70aa300f2ef781030daa2a94ef0685598ed051a398da")
    assert forms["ml-1m", "pairs"].lacks == ("rating", "timestamp")


# ==================================================================== fetch
def test_a_form_is_taken_only_when_the_canonical_files_are_missing_and_is_named(tmp_path, caplog):
    spec = _ml1m_with_pairs()
    mirror = _mirror_with_pairs(tmp_path / "mirror")
    raw = tmp_path / "raw"
    record = json.loads(fetch_dataset(spec, raw, mirror=mirror, urls_allowed=False).read_text())
    assert record["form"]["name"] == "pairs" and record["form"]["lacks"] == ["rating", "timestamp"]
    assert record["form"]["instead_of"] == ["ratings.dat"]
    assert list(record["members"]) == ["ml1m_user_movie_pairs.tsv"]
    assert record["members"]["ml1m_user_movie_pairs.tsv"]["sha256"] == _sha(PAIRS)
    assert "reconstructed form 'pairs'" in caplog.text and "rating, timestamp" in caplog.text
    verify_raw_files(spec, raw)  # the form's files are what the record vouches for


def test_a_changed_form_file_is_refused(tmp_path):
    spec = _ml1m_with_pairs()
    mirror = _mirror_with_pairs(tmp_path / "mirror", PAIRS.replace(b"661", b"662", 1))
    with pytest.raises(ChecksumError, match="ml1m_user_movie_pairs.tsv.*sha256 mismatch"):
        fetch_dataset(spec, tmp_path / "raw", mirror=mirror, urls_allowed=False)
    assert not (tmp_path / "raw" / "fetch.json").exists()


def test_no_form_in_the_mirror_still_names_what_was_tried(tmp_path):
    (tmp_path / "mirror").mkdir()
    with pytest.raises(DatasetUnavailableError, match=r"no ml-1m form 'pairs'"):
        fetch_dataset(_ml1m_with_pairs(), tmp_path / "raw", mirror=tmp_path / "mirror", urls_allowed=False)


def test_the_canonical_file_is_preferred_and_replaces_a_form(tmp_path):
    ratings = b"1::1193::5::978300760\n1::661::3::978302109\n"
    spec = dataclasses.replace(_ml1m_with_pairs(), members=MappingProxyType({"ratings.dat": _sha(ratings)}),
                               member_md5=MappingProxyType({}))
    mirror = _mirror_with_pairs(tmp_path / "mirror")
    raw = tmp_path / "raw"
    assert "form" in json.loads(fetch_dataset(spec, raw, mirror=mirror, urls_allowed=False).read_text())
    (mirror / "ml-1m").mkdir()
    (mirror / "ml-1m" / "ratings.dat").write_bytes(ratings)
    record = json.loads(fetch_dataset(spec, raw, mirror=mirror, urls_allowed=False).read_text())
    assert "form" not in record and list(record["members"]) == ["ratings.dat"]


# ==================================================================== refusal
def _pairs_raw() -> RawInteractions:
    form = get_dataset("ml-1m").forms[0]
    frame = pd.DataFrame({"user": [1, 1, 2], "item": [10, 11, 10], "rating": np.ones(3, np.float32),
                          "timestamp": np.arange(3, dtype=np.int64)})
    return RawInteractions("ml-1m", frame, has_timestamps=False, implicit=True,
                           extras={"form": form.name, "lacks": form.lacks})


@pytest.mark.parametrize("protocol, switch, missing", [
    ("prism", "paper", "rating"),               # PRISM's paper: ratings >= 3
    ("exadmm", "paper", "rating"),              # exADMM: rating > 3.5
    ("fedrap", "paper", "rating and no timestamp"),  # FedRAP: rating > 0, time-ordered leave-one-out
])
def test_a_protocol_needing_a_lacking_column_refuses_the_form_in_one_line(protocol, switch, missing):
    recipe = resolve_recipe(PROTOCOLS, protocol, "ml-1m", {"prism_ml1m_ratings": switch})
    with pytest.raises(FormRefusedError) as info:
        preprocess(_pairs_raw(), recipe)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("ml-1m: the reconstructed form 'pairs' has no ")
    assert f"has no {missing} column" in message and f"protocol {protocol!r}" in message


def test_prism_in_the_official_loaders_mode_takes_every_pair():
    recipe = resolve_recipe(PROTOCOLS, "prism", "ml-1m", {"prism_ml1m_ratings": "code"})
    result = preprocess(_pairs_raw(), recipe)
    assert (result.interactions.n_users, result.interactions.n_items, len(result.interactions)) == (2, 2, 3)
    assert result.stats()["raw_form"] == {"name": "pairs", "lacks": ["rating", "timestamp"]}


def test_canonical_data_is_not_refused():
    raw = _pairs_raw()
    canonical = RawInteractions("ml-1m", raw.frame.assign(rating=np.float32(4.0)))
    assert len(preprocess(canonical, resolve_recipe(PROTOCOLS, "fedrap", "ml-1m")).interactions) == 3


def test_load_raw_reads_the_form_fetch_json_names(tmp_path):
    spec = _ml1m_with_pairs()
    raw = tmp_path / "raw"
    fetch_dataset(spec, raw, mirror=_mirror_with_pairs(tmp_path / "mirror"), urls_allowed=False)
    parsed = load_raw("ml-1m", raw)
    assert parsed.extras == {"form": "pairs", "lacks": ("rating", "timestamp")}
    assert parsed.frame["user"].tolist() == [1, 1, 2, 3, 3]
    assert parsed.frame["item"].tolist() == [1193, 661, 1193, 661, 914]


# ==================================================================== statistics
def test_statistics_checks_compare_the_printed_counts():
    stats = {"dataset": "yelp2018", "protocol": "prism", "recipe": {"positive_op": None, "merge_given_parts": True},
             "users": 31668, "items": 38048, "interactions": 1561406}
    [check] = statistics_checks(stats)
    assert check["applies"] and check["match"] and check["source"].endswith("Table 2")
    assert check["interactions"] == {"expected": 1561406, "actual": 1561406, "match": True}
    [short] = statistics_checks({**stats, "interactions": 1561405})
    assert not short["match"] and short["interactions"]["match"] is False and short["users"]["match"]


def test_ml1m_statistics_name_both_modes():
    code = {"dataset": "ml-1m", "protocol": "prism", "recipe": {"positive_op": None, "positive_threshold": None},
            "users": 6040, "items": 3706, "interactions": 1000209}
    paper_row, code_row = statistics_checks(code)
    assert not paper_row["applies"] and paper_row["interactions"] == {"expected": 836478}
    assert code_row["applies"] and code_row["match"]
    paper = {**code, "recipe": {"positive_op": ">=", "positive_threshold": 3.0}, "items": 3629,
             "interactions": 836478}
    assert [c["applies"] for c in statistics_checks(paper)] == [True, False]
    assert statistics_checks(paper)[0]["match"]
    assert statistics_checks({**code, "dataset": "gowalla-x"}) == []


def test_published_statistics_are_well_formed():
    entries = published_statistics()
    assert {(e["paper"], e["dataset"]) for e in entries} >= {("prism", "ml-1m"), ("prism", "yelp2018"),
                                                              ("fedrap", "ml-1m"), ("fedrap", "ml-100k")}
    assert all(e["dataset"] in DATASETS for e in entries)


# ==================================================================== reach
def test_a_form_makes_only_the_papers_it_serves_reachable(tmp_path):
    assert reachable("form:pairs", "ml-1m", "prism")
    assert not reachable("form:pairs", "ml-1m", "fedrap")
    assert not reachable("form:nope", "ml-1m", "prism")
    assert reachable("mirror", "ml-1m", "fedrap") and not reachable("missing", "ml-1m", "prism")
    _mirror_with_pairs(tmp_path)
    assert dataset_availability(tmp_path)["ml-1m"] == "form:pairs"
    assert dataset_availability(tmp_path)["yelp2018"] == "missing"


# ==================================================================== item 8: the expansion cap
def _bomb_spec(tmp_path: Path, zeros: int):
    """An MSD-like entry (archive without digest) and a mirror holding a zip of ``zeros`` zero bytes."""
    spec = dataclasses.replace(get_dataset("msd"), n_interactions=1_000, raw_bytes=None, forms=())
    folder = tmp_path / "mirror" / "msd"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / spec.archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("train_triplets.txt", b"\0" * zeros)
    return spec, tmp_path / "mirror"


def test_an_unverified_archive_expanding_past_the_size_cap_is_stopped(tmp_path):
    # 1,000 rows x 128 bytes expected; x 2 = 256,000 bytes allowed; the zip holds 3 MB of zeros
    spec, mirror = _bomb_spec(tmp_path, 3_000_000)
    raw = tmp_path / "raw"
    with pytest.raises(ArchiveTooLargeError) as info:
        fetch_dataset(spec, raw, mirror=mirror, urls_allowed=False, cap=ExpansionCap(size_factor=2, max_ratio=None))
    message = str(info.value)
    assert "train_triplets.txt.zip" in message and "256.0 KB" in message
    assert "data.unverified_archive.size_factor" in message
    assert not (raw / "train_triplets.txt").exists() and not (raw / "fetch.json").exists()
    assert [p.name for p in raw.iterdir()] == []  # no extraction folder left behind


def test_the_default_ratio_cap_stops_a_bomb_the_size_cap_would_let_through(tmp_path):
    spec, mirror = _bomb_spec(tmp_path, 20_000_000)  # ~20 KB of zip, 1000x: far past 100x its size
    spec = dataclasses.replace(spec, raw_bytes=10**12)
    with pytest.raises(ArchiveTooLargeError, match=r"data\.unverified_archive\.max_ratio"):
        fetch_dataset(spec, tmp_path / "raw", mirror=mirror, urls_allowed=False)


def test_a_genuine_unverified_archive_within_the_caps_is_extracted(tmp_path, caplog):
    spec = dataclasses.replace(get_dataset("msd"), forms=())
    folder = tmp_path / "mirror" / "msd"
    folder.mkdir(parents=True)
    rows = "".join(f"{'%040x' % u}\tSO{'%016X' % i}\t{1 + i % 7}\n" for u in range(40) for i in range(25))
    with zipfile.ZipFile(folder / spec.archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("train_triplets.txt", rows)
    record = json.loads(fetch_dataset(spec, tmp_path / "raw", mirror=tmp_path / "mirror",
                                      urls_allowed=False).read_text())
    assert record["unverified"] == ["train_triplets.txt"] and "was NOT verified" in caplog.text


# ==================================================================== the real mirror
MIRROR = mirror_path()


@pytest.mark.realdata
@pytest.mark.skipif(MIRROR is None, reason="dataset mirror absent")
def test_real_mirror_forms_give_table_2(tmp_path):
    assert dataset_availability(MIRROR)["ml-1m"] == "form:pairs"
    assert dataset_availability(MIRROR)["yelp2018"] == "form:rebuilt-sorted"
    protocols = {**PROTOCOLS, "prism": {**PROTOCOLS["prism"], "default": {"positive": None,
                                                                          "filter": {"mode": "none"},
                                                                          "merge_given_parts": True}}}
    fetch_dataset("ml-1m", tmp_path / "ml-1m", mirror=MIRROR, urls_allowed=False)
    with pytest.raises(FormRefusedError, match="no rating column"):
        preprocess(load_raw("ml-1m", tmp_path / "ml-1m"),
                   resolve_recipe(protocols, "prism", "ml-1m", {"prism_ml1m_ratings": "paper"}))
    ml1m = preprocess(load_raw("ml-1m", tmp_path / "ml-1m"),
                      resolve_recipe(protocols, "prism", "ml-1m", {"prism_ml1m_ratings": "code"})).stats()
    assert (ml1m["users"], ml1m["items"], ml1m["interactions"]) == (6040, 3706, 1000209)
    assert [c["match"] for c in ml1m["published_checks"] if c["applies"]] == [True]
    fetch_dataset("yelp2018", tmp_path / "yelp", mirror=MIRROR, urls_allowed=False)
    yelp = preprocess(load_raw("yelp2018", tmp_path / "yelp"), resolve_recipe(protocols, "prism", "yelp2018")).stats()
    assert (yelp["users"], yelp["items"], yelp["interactions"]) == (31668, 38048, 1561406)  # PRISM Table 2
    [check] = yelp["published_checks"]
    assert check["applies"] and check["match"]


def test_forms_field_is_a_tuple_of_forms():
    assert all(isinstance(f, ReconstructedForm) for spec in DATASETS.values() for f in spec.forms)


# ==================================================================== item 8: what reaches the console
@pytest.mark.workflow
def test_fetch_rule_shows_trust_on_first_use_and_a_stopped_bomb_on_the_console(tmp_path):
    import yaml
    from test_reliability import qb_article_csv
    from test_workflow import snakemake

    mirror = tmp_path / "mirror"
    (mirror / "qb-article").mkdir(parents=True)
    (mirror / "qb-article" / "QB-article.csv").write_bytes(qb_article_csv())
    (mirror / "msd").mkdir()
    with zipfile.ZipFile(mirror / "msd" / "train_triplets.txt.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("train_triplets.txt", b"\0" * 20_000_000)  # ~20 KB expanding 1,000 fold
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["data"].update(mirror=str(mirror), allow_download=False)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    work = tmp_path / "work"
    work.mkdir()
    args = ("--cores", "1", "--directory", str(work), "--configfile", str(tmp_path / "config.yaml"))

    trusted = snakemake("data/raw/qb-article/fetch.json", *args)
    console = trusted.stdout + trusted.stderr
    assert "qb-article/QB-article.csv was NOT verified" in console and "accepted on first use" in console

    bomb = snakemake("data/raw/msd/fetch.json", *args, check=False)
    assert bomb.returncode != 0
    line = next(l for l in (bomb.stdout + bomb.stderr).splitlines() if "ArchiveTooLargeError" in l)
    assert "train_triplets.txt.zip" in line and "data.unverified_archive.max_ratio" in line
    assert not (work / "data/raw/msd/train_triplets.txt").exists()


def test_a_tier_entry_sets_its_own_switches_and_entries_of_one_pair_must_agree():
    from recrepro.datasets.preprocessing import entry_switches

    data = [{"dataset": "ml-1m", "protocol": "prism", "switches": {"prism_ml1m_ratings": "code"}},
            {"dataset": "ml-1m", "protocol": "fedrap"}]
    top = {"prism_ml1m_ratings": "paper"}
    assert entry_switches(top, data, "ml-1m", "prism") == {"prism_ml1m_ratings": "code"}
    assert entry_switches(top, data, "ml-1m", "fedrap") == top
    clash = [*data, {"dataset": "ml-1m", "protocol": "prism", "split": "other"}]
    with pytest.raises(ValueError, match="ml-1m/prism give different switches"):
        entry_switches(top, clash, "ml-1m", "prism")


def test_the_paper_tier_runs_prism_on_the_ml1m_pairs_in_the_official_loaders_mode():
    from recrepro.config import load_config
    from recrepro.datasets.preprocessing import entry_switches

    cfg = load_config(REPO / "config.yaml")
    switches = entry_switches(cfg["switches"], cfg["tiers"]["paper"]["data"], "ml-1m", "prism")
    assert cfg["switches"]["prism_ml1m_ratings"] == "paper"  # the default stays the paper's
    assert switches["prism_ml1m_ratings"] == "code"
    recipe = resolve_recipe(cfg["protocols"], "prism", "ml-1m", switches)
    assert recipe.positive_op is None
    preprocess(_pairs_raw(), recipe)  # accepted
    with pytest.raises(FormRefusedError):
        preprocess(_pairs_raw(), resolve_recipe(cfg["protocols"], "fedrap", "ml-1m",
                                                entry_switches(cfg["switches"], cfg["tiers"]["paper"]["data"],
                                                               "ml-1m", "fedrap")))


def test_the_summary_counts_a_forms_cells_as_reachable_only_for_the_papers_it_serves(tmp_path):
    from recrepro.scorecard.expected import expected_path, load_expected
    from recrepro.scorecard.summary import summarise_scorecards

    def published(paper):
        return sum(1 for e in load_expected(expected_path(paper)).entries
                   if e.dataset == "ml-1m" and e.published is not None)

    for paper, form_serves in (("prism", True), ("fedrap", False)):  # the pairs form lacks FedRAP's timestamps
        missing = summarise_scorecards(tmp_path, {"ml-1m": "missing"}, papers=[paper])["reachable"]
        form = summarise_scorecards(tmp_path, {"ml-1m": "form:pairs"}, papers=[paper])["reachable"]
        canonical = summarise_scorecards(tmp_path, {"ml-1m": "mirror"}, papers=[paper])["reachable"]
        assert missing == 0 and canonical == published(paper)
        assert form == (published(paper) if form_serves else 0)
    assert published("prism") == 12
