"""Acceptance checks of protocols and splits on the real files of the mirror (../shared/datasets).

Skipped, with the reason, when the mirror is absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recrepro.io import read_json, sha256_file

pytestmark = pytest.mark.realdata


@pytest.mark.parametrize(
    "dataset, users, items, interactions",
    [
        ("ml-100k", 943, 1_682, 100_000),
        ("hetrec2011-lastfm-2k", 1_874, 17_612, 92_780),
        ("amazon-video", 1_372, 7_957, 23_181),
    ],
)
def test_fedrap_protocol_counts(pipeline, dataset, users, items, interactions):
    processed, _ = pipeline
    stats = read_json(processed(dataset, "fedrap") / "stats.json")
    assert (stats["users"], stats["items"], stats["interactions"]) == (users, items, interactions)


def test_epinions_strong_generalization_matches_official_split(pipeline, mirror):
    processed, split = pipeline
    stats = read_json(processed("epinions", "exadmm") / "stats.json")
    assert (stats["interactions"], stats["users"], stats["items"]) == (129_574, 6_287, 3_999)

    out = split("epinions", "exadmm", "strong_generalization", 98765, {"heldout_users": 500})
    train = pd.read_parquet(out / "train.parquet")
    assert len(train) == 108_711 and train["user"].nunique() == 5_287

    # The official item list: raw item ids of the universe, in order.
    item_index = pd.read_parquet(out / "item_index.parquet")
    item_map = pd.read_parquet(processed("epinions", "exadmm") / "item_map.parquet")
    raw_ids = item_map.set_index("item")["raw_id"].loc[item_index["processed_item"]].astype(str).tolist()
    official = (mirror / "epinions" / "unique_sid.txt").read_text().split()
    assert raw_ids == official

    manifest = read_json(out / "manifest.json")
    for name, entry in manifest["files"].items():
        assert sha256_file(out / name) == entry["sha256"]
        assert len(pd.read_parquet(out / name)) == entry["rows"]


def test_gowalla_random_ratio(pipeline):
    processed, split = pipeline
    stats = read_json(processed("gowalla", "prism") / "stats.json")
    assert (stats["users"], stats["items"], stats["interactions"]) == (29_858, 40_981, 1_027_370)

    dirs = {seed: split("gowalla", "prism", "random_ratio", seed) for seed in (123, 246, 492)}
    tests = {}
    for seed, out in dirs.items():
        manifest = read_json(out / "manifest.json")
        rows = {k: v["rows"] for k, v in manifest["files"].items()}
        assert rows == {"train.parquet": 1_027_370 - 2 * 102_737, "validation.parquet": 102_737,
                        "test.parquet": 102_737}
        tests[seed] = manifest["files"]["test.parquet"]["sha256"]
    assert len(set(tests.values())) == 3  # three seeds, three different splits

    again = split("gowalla", "prism", "random_ratio", 123, tag="-again")
    for name in ("train.parquet", "validation.parquet", "test.parquet"):
        assert sha256_file(again / name) == sha256_file(dirs[123] / name)


def test_gowalla_given_split_keeps_published_parts(pipeline):
    _, split = pipeline
    out = split("gowalla", "given", "lightgcn_given", 0)
    manifest = read_json(out / "manifest.json")
    assert manifest["files"]["train.parquet"]["rows"] == 810_128
    assert manifest["files"]["test.parquet"]["rows"] == 217_242


def test_ml100k_leave_one_out(pipeline):
    _, split = pipeline
    out = split("ml-100k", "fedrap", "leave_one_out", 0)
    test = pd.read_parquet(out / "test.parquet")
    val = pd.read_parquet(out / "validation.parquet")
    neg = pd.read_parquet(out / "negatives.parquet")
    assert len(test) == len(val) == 943 and len(neg) == 943 * 99
    everything = pd.concat([pd.read_parquet(out / f"{p}.parquet") for p in ("train", "validation", "test")])
    assert len(everything) == 100_000
    seen = set(zip(everything["user"], everything["item"]))
    assert not any(pair in seen for pair in zip(neg["user"], neg["item"]))
    # the test item is each user's latest interaction
    latest = everything.sort_values(["user", "timestamp"], kind="stable").groupby("user")["timestamp"].max()
    np.testing.assert_array_equal(test.set_index("user").sort_index()["timestamp"].to_numpy(), latest.to_numpy())
