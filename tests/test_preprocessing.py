"""Preprocessing recipes on tiny hand-made tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recrepro.config import load_config
from recrepro.datasets.container import RawInteractions
from recrepro.datasets.synthetic import SyntheticSpec, generate_synthetic
from recrepro.datasets.preprocessing import gini, preprocess, read_interactions, resolve_recipe, write_preprocessed


def raw(rows, part=None):
    u, i, r = zip(*rows)
    frame = pd.DataFrame({"user": np.array(u, np.int64), "item": np.array(i, np.int64),
                          "rating": np.array(r, np.float32), "timestamp": np.arange(len(u), dtype=np.int64)})
    if part is not None:
        frame["part"] = part
    return RawInteractions("toy", frame)


# users a(=10): items 1,2,3 ; b(=20): items 1,2 ; c(=30): item 1
ROWS = [(10, 1, 5), (10, 2, 4), (10, 3, 2), (20, 1, 4), (20, 2, 1), (30, 1, 3)]


def recipe(**kw):
    protocols = {"p": {"default": kw}}
    return resolve_recipe(protocols, "p", "toy")


def test_positive_threshold_strict_and_inclusive():
    # > 3.5 keeps ratings 5, 4, 4 -> 3 rows; >= 3 keeps 5, 4, 4, 3 -> 4 rows
    assert len(preprocess(raw(ROWS), recipe(positive={"op": ">", "threshold": 3.5})).interactions) == 3
    assert len(preprocess(raw(ROWS), recipe(positive={"op": ">=", "threshold": 3})).interactions) == 4


def test_items_then_users_is_one_pass_not_a_k_core():
    # item counts: 1->3, 2->2, 3->1. item_min 2 drops item 3 -> a:{1,2} b:{1,2} c:{1};
    # then user_min 2 drops c -> 4 rows; item 1 now has 2 users (not re-checked: one pass)
    r = recipe(filter={"mode": "items_then_users", "item_min": 2, "user_min": 2})
    out = preprocess(raw(ROWS), r)
    assert len(out.interactions) == 4 and out.interactions.n_users == 2 and out.interactions.n_items == 2


def test_simultaneous_counts_on_the_same_table():
    # counted on the full table: users a(3) b(2) c(1); items 1(3) 2(2) 3(1).
    # user_min 2, item_min 2 -> keep rows whose user in {a,b} and item in {1,2}: 4 rows.
    # (items_then_users with item_min 3 then user_min 2 would keep only item 1 rows of a,b -> and
    #  then drop both users; the simultaneous filter with item_min 3 keeps (a,1),(b,1).)
    r = recipe(filter={"mode": "simultaneous", "item_min": 3, "user_min": 2})
    assert sorted(zip(*[preprocess(raw(ROWS), r).interactions.frame[c] for c in ("user", "item")])) == [(0, 0), (1, 0)]
    r2 = recipe(filter={"mode": "items_then_users", "item_min": 3, "user_min": 2})
    assert len(preprocess(raw(ROWS), r2).interactions) == 0


def test_ids_are_contiguous_in_sorted_raw_order_and_file_order_is_kept():
    rows = [(30, 9, 1), (10, 7, 1), (20, 9, 1), (10, 8, 1)]
    out = preprocess(raw(rows), recipe())
    f = out.interactions.frame
    assert f["user"].tolist() == [2, 0, 1, 0]          # 10->0, 20->1, 30->2
    assert f["item"].tolist() == [2, 0, 2, 1]          # 7->0, 8->1, 9->2
    assert out.user_ids.tolist() == [10, 20, 30]


def test_given_parts_kept_or_merged():
    r_keep = recipe(merge_given_parts=False)
    out = preprocess(raw(ROWS, part=["train"] * 5 + ["test"]), r_keep)
    assert out.stats()["parts"] == {"test": 1, "train": 5}
    assert "part" not in preprocess(raw(ROWS, part=["train"] * 6), recipe()).interactions.frame


def test_gini_hand_values():
    assert gini(np.array([5, 5, 5, 5])) == 0.0
    assert gini(np.array([0, 0, 0, 8])) == pytest.approx(3 / 4)
    # x = 1, 2, 3: sum (2i-4) x_i = -2*1 + 0*2 + 2*3 = 4 ; / (3 * 6) = 2/9
    assert gini(np.array([3, 1, 2])) == pytest.approx(2 / 9)


def test_prism_ml1m_switch(repo_root):
    cfg = load_config(repo_root / "config.yaml")
    paper = resolve_recipe(cfg["protocols"], "prism", "ml-1m", {"prism_ml1m_ratings": "paper"})
    code = resolve_recipe(cfg["protocols"], "prism", "ml-1m", {"prism_ml1m_ratings": "code"})
    assert (paper.positive_op, paper.positive_threshold) == (">=", 3.0)
    assert code.positive_op is None
    # gowalla under prism is unaffected by the switch
    assert resolve_recipe(cfg["protocols"], "prism", "gowalla", {"prism_ml1m_ratings": "code"}).positive_op is None


def test_unknown_protocol():
    with pytest.raises(ValueError, match="unknown protocol 'nope'"):
        resolve_recipe({"p": {"default": {}}}, "nope", "toy")


def test_write_and_read_round_trip(tmp_path):
    frame = generate_synthetic(SyntheticSpec(users=50, items=40, seed=3))
    out = preprocess(RawInteractions("synthetic", frame), recipe(positive={"op": ">", "threshold": 3.5}))
    write_preprocessed(out, tmp_path)
    back = read_interactions(tmp_path)
    pd.testing.assert_frame_equal(back.frame, out.interactions.frame)
    stats = out.stats()
    assert {"users", "items", "interactions", "density", "item_popularity_gini"} <= set(stats)
    assert stats["density"] == pytest.approx(stats["interactions"] / (stats["users"] * stats["items"]))


def test_synthetic_is_deterministic_long_tailed_and_has_enough_per_user():
    a = generate_synthetic(SyntheticSpec())
    b = generate_synthetic(SyntheticSpec())
    pd.testing.assert_frame_equal(a, b)
    degree = np.sort(a["item"].value_counts().to_numpy())[::-1]
    # long tail: the top 5% of items hold several times their share of interactions
    assert degree[: len(degree) // 20].sum() / degree.sum() > 0.15
    assert a.groupby("user").size().min() >= 12
    assert not a.duplicated(["user", "item"]).any()
