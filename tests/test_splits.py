"""Split protocols on tiny hand-made tables (expected parts worked out by hand)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recrepro.datasets.container import Interactions
from recrepro.datasets.splits import (
    make_split,
    sample_unseen_items,
    split_leave_one_out,
    split_lightgcn_given,
    split_random_ratio,
    split_strong_generalization,
    split_temporal_user_ratio,
    write_split,
)
from recrepro.io import sha256_file


def table(rows, n_users=None, n_items=None, part=None):
    u, i, t = zip(*rows)
    frame = pd.DataFrame({
        "user": np.array(u, np.int32), "item": np.array(i, np.int32),
        "rating": np.ones(len(u), np.float32), "timestamp": np.array(t, np.int64),
    })
    if part is not None:
        frame["part"] = part
    return Interactions(frame, n_users or max(u) + 1, n_items or max(i) + 1)


def pairs(frame):
    return sorted(zip(frame["user"].tolist(), frame["item"].tolist()))


def test_leave_one_out_latest_is_test_second_latest_is_validation():
    # user 0: items 0..3 at times 10, 40, 20, 30 -> test item 1 (t=40), validation item 3 (t=30)
    # user 1: items 4,5,6 at equal times 7 -> file order breaks the tie: item 6 latest, item 5 second
    # user 2: two rows only -> everything stays in train
    data = table([(0, 0, 10), (0, 1, 40), (0, 2, 20), (0, 3, 30),
                  (1, 4, 7), (1, 5, 7), (1, 6, 7), (2, 0, 1), (2, 1, 2)], n_items=120)
    s = split_leave_one_out(data, seed=0, n_negatives=99)
    assert pairs(s.parts["test"]) == [(0, 1), (1, 6)]
    assert pairs(s.parts["validation"]) == [(0, 3), (1, 5)]
    assert pairs(s.parts["train"]) == [(0, 0), (0, 2), (1, 4), (2, 0), (2, 1)]
    neg = s.parts["negatives"]
    assert len(neg) == 3 * 99
    for user, items in neg.groupby("user")["item"]:
        seen = set(data.frame.loc[data.frame.user == user, "item"])
        assert len(set(items)) == 99 and not seen & set(items)


def test_negatives_are_uniform_over_unseen_items():
    # one user who saw items 0..4 of 10: each of the 5 unseen items should be drawn
    # with probability 2/5 when 2 negatives are drawn; check over many users.
    n_users = 4000
    seen = pd.DataFrame({"user": np.repeat(np.arange(n_users), 5).astype(np.int32),
                         "item": np.tile(np.arange(5), n_users).astype(np.int32)})
    neg = sample_unseen_items(seen, n_users, 10, 2, seed=1, batch_users=512)
    assert neg.min() >= 5
    freq = np.bincount(neg.ravel(), minlength=10)[5:] / n_users
    np.testing.assert_allclose(freq, 0.4, atol=0.03)


def test_negatives_fail_clearly_when_too_few_unseen_items():
    seen = pd.DataFrame({"user": np.zeros(8, np.int32), "item": np.arange(8, dtype=np.int32)})
    with pytest.raises(ValueError, match="only 2 unseen items"):
        sample_unseen_items(seen, 1, 10, 5, seed=0)


def test_temporal_user_ratio_floor_counts():
    # user 0 has 10 rows at times 0..9: floor(0.2*10)=2 latest -> test (t=8,9);
    # of the remaining 8, floor(0.25*8)=2 latest -> validation (t=6,7); 6 train.
    # user 1 has 4 rows: floor(0.8)=0 test, floor(0.25*4)=1 validation (its latest).
    rows = [(0, k, k) for k in range(10)] + [(1, k, k) for k in range(4)]
    s = split_temporal_user_ratio(table(rows))
    assert pairs(s.parts["test"]) == [(0, 8), (0, 9)]
    assert pairs(s.parts["validation"]) == [(0, 6), (0, 7), (1, 3)]
    assert len(s.parts["train"]) == 6 + 3


def test_random_ratio_sizes_and_determinism():
    rows = [(u, i, 0) for u in range(30) for i in range(7)]  # 210 rows
    data = table(rows)
    a = split_random_ratio(data, seed=123)
    b = split_random_ratio(data, seed=123)
    c = split_random_ratio(data, seed=246)
    assert [len(a.parts[p]) for p in ("train", "validation", "test")] == [210 - 21 - 21, 21, 21]
    for p in a.parts:
        pd.testing.assert_frame_equal(a.parts[p], b.parts[p])
    assert pairs(a.parts["test"]) != pairs(c.parts["test"])
    all_pairs = pairs(pd.concat(list(a.parts.values())))
    assert all_pairs == sorted((u, i) for u, i, _ in rows)


def test_strong_generalization_matches_liang_reference_loop():
    # Reference: the steps of Liang et al.'s generate_data written out naively with
    # pandas on a small random table, compared part by part.
    rng = np.random.default_rng(5)
    rows = [(u, int(i), int(rng.integers(0, 100))) for u in range(40)
            for i in rng.choice(30, size=int(rng.integers(2, 15)), replace=False)]
    data = table(rows, n_items=30)
    s = split_strong_generalization(data, heldout_users=5, seed=98765)

    df = data.frame
    np.random.seed(98765)
    unique_uid = np.arange(40)[np.random.permutation(40)]
    tr_users, vd_users, te_users = unique_uid[:30], unique_uid[30:35], unique_uid[35:]
    train = df[df.user.isin(tr_users)]
    unique_sid = pd.unique(train["item"])
    show2id = {sid: i for i, sid in enumerate(unique_sid)}
    profile2id = {pid: i for i, pid in enumerate(unique_uid)}

    def proportion(d):
        np.random.seed(98765)
        tr, te = [], []
        for _, g in d.groupby("user"):
            n = len(g)
            if n >= 5:
                idx = np.zeros(n, dtype=bool)
                idx[np.random.choice(n, size=int(0.2 * n), replace=False).astype("int64")] = True
                tr.append(g[~idx]); te.append(g[idx])
            else:
                tr.append(g)
        return pd.concat(tr), pd.concat(te)

    def numerize(d):
        return sorted(zip([profile2id[x] for x in d["user"]], [show2id[x] for x in d["item"]]))

    assert pairs(s.parts["train"]) == numerize(train)
    for name, users in (("validation", vd_users), ("test", te_users)):
        plays = df[df.user.isin(users) & df.item.isin(unique_sid)]
        tr, te = proportion(plays)
        assert pairs(s.parts[f"{name}_tr"]) == numerize(tr)
        assert pairs(s.parts[f"{name}_te"]) == numerize(te)
    assert s.parts["item_index"]["processed_item"].tolist() == list(unique_sid)
    assert s.info["n_train_users"] == 30 and s.n_items == len(unique_sid)


def test_lightgcn_given_keeps_parts():
    data = table([(0, 0, 0), (0, 1, 1), (1, 1, 2)], part=["train", "test", "train"])
    s = split_lightgcn_given(data)
    assert pairs(s.parts["train"]) == [(0, 0), (1, 1)] and pairs(s.parts["test"]) == [(0, 1)]
    with pytest.raises(ValueError, match="merge_given_parts"):
        split_lightgcn_given(table([(0, 0, 0)]))


def test_lightgcn_given_val_carves_a_per_user_tenth_of_the_published_train():
    # user 0: 25 train rows -> 2 to validation; user 1: 9 -> none; user 2: 10 -> 1; one test row each
    rows, part = [], []
    for user, n in ((0, 25), (1, 9), (2, 10)):
        rows += [(user, item, item) for item in range(n)] + [(user, 40 + user, 99)]
        part += ["train"] * n + ["test"]
    data = table(rows, part=part)
    s = make_split(data, "lightgcn_given_val", {}, 7)
    given = split_lightgcn_given(data)
    assert s.name == "lightgcn_given_val" and s.params == {"seed": 7, "validation": 0.1}
    assert s.parts["validation"]["user"].value_counts().sort_index().to_dict() == {0: 2, 2: 1}
    assert pairs(s.parts["test"]) == pairs(given.parts["test"])
    assert pairs(pd.concat([s.parts["train"], s.parts["validation"]])) == pairs(given.parts["train"])
    assert not set(pairs(s.parts["train"])) & set(pairs(s.parts["validation"]))
    again, other = make_split(data, "lightgcn_given_val", {}, 7), make_split(data, "lightgcn_given_val", {}, 8)
    assert pairs(again.parts["validation"]) == pairs(s.parts["validation"])
    assert pairs(other.parts["validation"]) != pairs(s.parts["validation"])


def test_write_split_manifest_and_byte_identical_rewrite(tmp_path):
    rows = [(u, i, u + i) for u in range(20) for i in range(6)]
    data = table(rows)
    for out in (tmp_path / "a", tmp_path / "b"):
        write_split(make_split(data, "random_ratio", {}, 7), out, {"dataset": "toy"})
    import json
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert set(manifest["files"]) == {"train.parquet", "validation.parquet", "test.parquet"}
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == sha256_file(tmp_path / "a" / name) == sha256_file(tmp_path / "b" / name)
    assert manifest["files"]["test.parquet"]["rows"] == 12


def test_a_parts_content_digest_outlives_the_parquet_writers_settings(tmp_path, monkeypatch):
    """The file sha256 follows the writer (zstd level, encodings); ``content_sha256`` only the values:
    gowalla's splits were rewritten byte-differently with the same pairs when the writer changed."""
    import json

    import pyarrow.parquet as pq

    from recrepro.io import frame_digest
    from recrepro.records.provenance import split_file_hashes

    data = table([(u, i, u + i) for u in range(20) for i in range(6)])
    made = make_split(data, "random_ratio", {}, 7)
    write_split(made, tmp_path / "a", {"dataset": "toy"})
    real = pq.write_table
    monkeypatch.setattr(pq, "write_table", lambda t, p, **kw: real(t, p, **{**kw, "compression": "snappy", "compression_level": None}))
    write_split(made, tmp_path / "b", {"dataset": "toy"})
    a, b = (json.loads((tmp_path / d / "manifest.json").read_text())["files"] for d in "ab")
    for name in a:
        assert a[name]["sha256"] != b[name]["sha256"]
        assert a[name]["content_sha256"] == b[name]["content_sha256"] == frame_digest(pd.read_parquet(tmp_path / "a" / name))
    test = made.parts["test"]
    changed = test.copy()
    changed.iloc[0, 1] += 1
    assert frame_digest(changed) != frame_digest(test)
    assert frame_digest(test.iloc[::-1].reset_index(drop=True)) != frame_digest(test)  # row order counts
    # a run record's provenance carries it beside the file's sha256
    recorded = split_file_hashes(tmp_path / "b" / "manifest.json")["files"]["test.parquet"]
    assert recorded["content_sha256"] == a["test.parquet"]["content_sha256"]


def test_unknown_split_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown split 'split2'.*random_ratio"):
        make_split(table([(0, 0, 0)]), "split2", {}, 0)
