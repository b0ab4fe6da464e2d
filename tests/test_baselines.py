"""Baselines (MostPopular, RandomRecommender), the Recommender interface, real-data anchors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mirror_path
import scipy.sparse as sp

from recrepro.evaluation import evaluate_full_ranking, evaluate_sampled, interactions_to_csr
from recrepro.models import MostPopular, NotFittedError, RandomRecommender, Recommender


def tiny_train() -> sp.csr_matrix:
    # u0: 0, 1 | u1: 1, 2 | u2: 1, 3 | u3: 3
    # popularity: item0 1, item1 3, item2 1, item3 2, item4 0
    return interactions_to_csr(np.array([0, 0, 1, 1, 2, 2, 3]), np.array([0, 1, 1, 2, 1, 3, 3]), 4, 5)


def test_most_popular_tiny():
    model = MostPopular().fit(tiny_train())
    assert model.popularity.tolist() == [1, 3, 1, 2, 0]
    assert model.user_factors is None and model.item_factors is None
    scores = model.score(np.array([2, 0]))
    assert scores.shape == (2, 5) and scores.dtype == np.float32
    # Without exclusion every user gets 1 (3), 3 (2), then 0 and 2 tie at 1 -> lower id 0 first.
    items, _ = model.recommend(np.arange(4), 4)
    assert items.tolist() == [[1, 3, 0, 2]] * 4
    # Excluding training items: u0 {2, 3, 4} -> 3 (2), 2 (1); u1 {0, 3, 4} -> 3, 0;
    # u2 {0, 2, 4} -> 0 (1), 2 (1) tie -> id order; u3 {0, 1, 2, 4} -> 1, 0
    items, _ = model.recommend(np.arange(4), 2, exclude=tiny_train())
    assert items.tolist() == [[3, 2], [3, 0], [0, 2], [1, 0]]


def test_most_popular_evaluation_tiny():
    train = tiny_train()
    # targets: u0 {3}, u1 {4}, u3 {2}; u2 none
    test = interactions_to_csr(np.array([0, 1, 3]), np.array([3, 4, 2]), 4, 5)
    result = evaluate_full_ranking(MostPopular().fit(train), train, test, ks=[2])
    # top-2 lists as above: u0 [3, 2] hit at rank 1; u1 [3, 0] miss; u3 [1, 0] miss
    assert result.per_user["recall_lgcn@2"].tolist() == [1.0, 0.0, 0.0]
    assert result["recall_lgcn@2"] == pytest.approx(1 / 3)
    assert result.counts["n_users_skipped_no_targets"] == 1


def test_random_recommender_deterministic_and_batch_free():
    train = tiny_train()
    model = RandomRecommender(seed=3).fit(sp.csr_matrix((50, 200)))
    all_users = model.score(np.arange(50))
    assert all_users.dtype == np.float32 and (all_users >= 0).all() and (all_users < 1).all()
    one_by_one = np.concatenate([model.score(np.array([u])) for u in range(50)])
    assert (all_users == one_by_one).all()
    reversed_order = model.score(np.arange(50)[::-1])[::-1]
    assert (all_users == reversed_order).all()
    # a score is a function of (seed, user, item) only, not of the matrix size
    assert (RandomRecommender(seed=3).fit(train).score(np.arange(4)) == all_users[:4, :5]).all()
    assert not (RandomRecommender(seed=4).fit(sp.csr_matrix((50, 200))).score(np.arange(50)) == all_users).all()
    # roughly uniform: mean 0.5 over 10,000 scores
    assert abs(all_users.mean() - 0.5) < 0.02


def test_unfitted_and_interface():
    with pytest.raises(NotFittedError):
        MostPopular().score(np.array([0]))
    with pytest.raises(TypeError):
        Recommender()  # abstract

    class DotModel(Recommender):
        def fit(self, train, **kwargs):
            self.n_users, self.n_items = train.shape
            rng = np.random.default_rng(0)
            self._u = rng.standard_normal((self.n_users, 3)).astype(np.float32)
            self._v = rng.standard_normal((self.n_items, 3)).astype(np.float32)
            return self

        def score(self, user_ids):
            return self._u[user_ids] @ self._v.T

        @property
        def user_factors(self):
            return self._u

        @property
        def item_factors(self):
            return self._v

    train = tiny_train()
    model = DotModel().fit(train)
    test = interactions_to_csr(np.array([0, 1, 3]), np.array([3, 4, 2]), 4, 5)
    via_factors = evaluate_full_ranking(model, train, test, [2], return_topk=True)
    via_callable = evaluate_full_ranking(model.score, train, test, [2], return_topk=True)
    assert (via_factors.topk == via_callable.topk).all()


# --------------------------------------------------------------------- real data anchors


def mirror() -> Path:
    return mirror_path() or Path("/nonexistent-mirror")


def read_lightgcn_gowalla(root: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train users, train items, test users, test items) through the registry's parser."""
    from recrepro.datasets.parsers import read_lightgcn_split

    frame = read_lightgcn_split(root / "train.txt", root / "test.txt")
    is_train = (frame["part"] == "train").to_numpy()
    users, items = frame["user"].to_numpy(np.int64), frame["item"].to_numpy(np.int64)
    return users[is_train], items[is_train], users[~is_train], items[~is_train]


@pytest.mark.realdata
def test_gowalla_most_popular_anchor():
    root = mirror() / "gowalla"
    if not (root / "train.txt").exists():
        pytest.skip(f"dataset mirror not found at {root}")
    train_u, train_i, test_u, test_i = read_lightgcn_gowalla(root)
    n_users = int(max(train_u.max(), test_u.max())) + 1
    n_items = int(max(train_i.max(), test_i.max())) + 1
    assert (n_users, n_items, train_u.size, test_u.size) == (29858, 40981, 810128, 217242)
    train = interactions_to_csr(train_u, train_i, n_users, n_items)
    test = interactions_to_csr(test_u, test_i, n_users, n_items)
    result = evaluate_full_ranking(MostPopular().fit(train), train, test, ks=[20])
    assert result.counts["n_users_evaluated"] == 29858
    # Computed once with this code (MostPopular = training degree, train masked, ties by item id).
    assert result["recall_lgcn@20"] == pytest.approx(0.0416, abs=5e-5)  # 0.041631
    assert result["ndcg@20"] == pytest.approx(0.0317, abs=5e-5)  # 0.031690


@pytest.mark.realdata
def test_ml100k_most_popular_sampled_anchor():
    path = mirror() / "ml-100k" / "u.data"
    if not path.exists():
        pytest.skip(f"dataset mirror not found at {path}")
    frame = pd.read_csv(path, sep="\t", header=None, names=["raw_user", "raw_item", "rating", "timestamp"])
    frame["row"] = np.arange(len(frame))
    raw_users, frame["user"] = np.unique(frame["raw_user"].to_numpy(), return_inverse=True)
    raw_items, frame["item"] = np.unique(frame["raw_item"].to_numpy(), return_inverse=True)
    n_users, n_items = raw_users.size, raw_items.size
    # Leave-one-out: latest timestamp -> test, second latest -> validation; equal timestamps are
    # ordered by file position, so the later row is the "later" interaction.
    frame = frame.sort_values(["user", "timestamp", "row"])
    from_end = frame.groupby("user").cumcount(ascending=False).to_numpy()
    test, train = frame[from_end == 0], frame[from_end >= 2]
    assert (n_users, n_items, len(test), len(train)) == (943, 1682, 943, 98114)
    # 99 negatives per user, uniform without replacement over never-interacted items:
    # random keys from default_rng(0), interacted items pushed to +inf, 99 smallest keys.
    interacted = interactions_to_csr(frame["user"], frame["item"], n_users, n_items).toarray() > 0
    keys = np.random.default_rng(0).random((n_users, n_items))
    keys[interacted] = np.inf
    negatives = np.argsort(keys, axis=1, kind="stable")[:, :99]
    assert not np.take_along_axis(interacted, negatives, axis=1).any()
    model = MostPopular().fit(interactions_to_csr(train["user"], train["item"], n_users, n_items))
    result = evaluate_sampled(model, (test["user"].to_numpy(), test["item"].to_numpy()),
                              (np.arange(n_users), negatives), ks=[10], ties="pessimistic")
    assert result.counts["n_positives"] == result.counts["n_users_evaluated"] == 943
    assert result["hr@10"] == pytest.approx(0.4115, abs=5e-5)  # 0.411453 (= 388 / 943)
    assert result["ndcg@10"] == pytest.approx(0.2269, abs=5e-5)  # 0.226897
