"""The leak audit (recrepro.papers.leaks) on hand-built splits whose leaks are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recrepro.papers.leaks import audit_split, leak_table, paper_of, training_pools, write_audit
from recrepro.datasets.splits import Split, write_split


def _frame(pairs):
    users, items = zip(*pairs) if pairs else ((), ())
    return pd.DataFrame({"user": np.array(users, np.int32), "item": np.array(items, np.int32)})


def _split(tmp_path, name, parts, n_users=3, n_items=6):
    split = Split("leave_one_out", {k: _frame(v) for k, v in parts.items()}, n_users, n_items, params={"seed": 0})
    write_split(split, tmp_path / name, {"dataset": "toy", "protocol": "fedrap", "seed": 0})
    return tmp_path / name


def test_a_clean_split_under_a_pool_that_excludes_the_held_out_items_leaks(tmp_path):
    # users 0-2; training, then one validation and one test pair each; 2 shared evaluation negatives each
    clean = _split(tmp_path, "clean", {
        "train": [(0, 0), (0, 1), (1, 2), (2, 3)],
        "validation": [(0, 2), (1, 3), (2, 4)],
        "test": [(0, 3), (1, 4), (2, 5)],
        "negatives": [(0, 4), (0, 5), (1, 0), (1, 1), (2, 0), (2, 1)],
    })
    pools = {"negative_pool: train": ("train",), "negative_pool: all_interactions": ("train", "validation", "test")}
    audit = audit_split(clean, pools)
    by_pool = {r["pool"]: r for r in audit["rows"]}
    train_pool, leaky = by_pool["negative_pool: train"], by_pool["negative_pool: all_interactions"]
    assert train_pool["held_out_pairs"] == 6 and train_pool["held_out_in_training"] == 0
    assert train_pool["held_out_excluded_from_negatives"] == 0 and train_pool["validation_test_overlap"] == 0
    # the released code's pool: all 6 held-out pairs are never drawn as training negatives
    assert leaky["held_out_excluded_from_negatives"] == 6
    assert train_pool["shared_eval_negatives"] == "yes" and train_pool["eval_negatives_that_are_positives"] == 0


def test_held_out_pairs_in_training_and_overlaps_are_counted(tmp_path):
    leaky = _split(tmp_path, "leaky", {
        "train": [(0, 0), (0, 2), (1, 2)],       # (0, 2) is also validation
        "validation": [(0, 2), (1, 3)],
        "test": [(1, 3), (2, 5)],                # (1, 3) is also validation
        "negatives": [(0, 0), (1, 1), (2, 1)],   # (0, 0) is a training positive
    })
    [row] = audit_split(leaky, {"uniform": ()})["rows"]
    assert (row["held_out_pairs"], row["held_out_in_training"], row["validation_test_overlap"]) == (3, 1, 1)
    assert row["eval_negatives_that_are_positives"] == 1 and row["held_out_excluded_from_negatives"] == 0


def test_the_table_gives_each_pool_a_verdict(tmp_path):
    clean = _split(tmp_path, "clean", {"train": [(0, 0), (1, 1)], "validation": [(0, 1)], "test": [(1, 0)],
                                       "negatives": [(0, 2), (1, 2)]})
    write_audit(clean, "fedrap", tmp_path / "a.json",
                variants={"fedrap": {"negative_pool": "train"}, "fedrap_pool": {"negative_pool": "all_interactions"}})
    rows = leak_table([tmp_path / "a.json"], tmp_path / "t.csv", tmp_path / "t.md")
    verdicts = {r["pool"]: r["verdict"] for r in rows}
    assert verdicts["negative_pool: all_interactions"].startswith("leak: held-out pairs never drawn as training negatives")
    assert verdicts["negative_pool: train"].startswith("no leak; validation and test rank against the same sampled")
    text = (tmp_path / "t.md").read_text()
    assert "| fedrap | toy | leave_one_out (seed 0) | negative_pool: all_interactions | 2 | 0 | 0 | 2 | yes | 0 |" in text
    first = (tmp_path / "t.csv").read_bytes()
    leak_table([tmp_path / "a.json"], tmp_path / "t.csv", tmp_path / "t.md")
    assert (tmp_path / "t.csv").read_bytes() == first


def test_pools_come_from_the_trainers_own_tables():
    from recrepro.papers.fedrap.run import NEGATIVE_POOL_PARTS

    assert training_pools("fedrap", {"a": {"negative_pool": "all_interactions"}}) == {
        "negative_pool: all_interactions": tuple(NEGATIVE_POOL_PARTS["all_interactions"])}
    assert training_pools("prism") == {"uniform over all items (none excluded)": ()}
    assert paper_of("gowalla", "given") == "prism" and paper_of("ml-100k", "fedrap") == "fedrap"
    assert paper_of("synthetic", "lrs") is None
    with pytest.raises(ValueError, match="no training pools known"):
        training_pools("lrs")
