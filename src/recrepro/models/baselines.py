"""Reference baselines: most-popular and random."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from recrepro.models.base import Recommender

__all__ = ["MostPopular", "RandomRecommender"]


class MostPopular(Recommender):
    """Score of item ``i`` = its training popularity, the same for every user.

    Popularity is the number of distinct training users who interacted with the item
    (stored entries per column of the training matrix; values are ignored).  Equal
    popularities tie, and the evaluators break ties by the lower item id.

    Attributes
    ----------
    popularity:
        float32 ``[n_items]`` after :meth:`fit` (exact: counts below 2**24).
    """

    def __init__(self) -> None:
        self.popularity: np.ndarray | None = None

    def fit(self, train: sp.csr_matrix, **kwargs: Any) -> MostPopular:
        matrix = self._as_train_matrix(train)
        self.n_users, self.n_items = matrix.shape
        self.popularity = np.bincount(matrix.indices, minlength=self.n_items).astype(np.float32)
        return self

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        self._check_fitted()
        b = len(np.asarray(user_ids).ravel())
        return np.repeat(self.popularity[None, :], b, axis=0)


# splitmix64 constants (Steele, Lea & Flood 2014): a well-mixed 64-bit hash.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


class RandomRecommender(Recommender):
    """Uniform random scores, a fixed function of ``(seed, user, item)``.

    ``score[u, i] = (h(h(u ^ h(seed)) ^ h(i)) >> 40) / 2**24`` with ``h`` = splitmix64 — a
    hash, not a random stream, so a user's scores do not depend on the batch it is scored in,
    on the order of calls, or on other users.  The top 24 bits are used, so scores are
    exact float32 values in ``[0, 1)`` (equal values are possible and then tie by item id).
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def fit(self, train: sp.csr_matrix, **kwargs: Any) -> RandomRecommender:
        matrix = self._as_train_matrix(train)
        self.n_users, self.n_items = matrix.shape
        return self

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        self._check_fitted()
        users = np.asarray(user_ids, dtype=np.uint64).ravel()
        items = np.arange(self.n_items, dtype=np.uint64)
        with np.errstate(over="ignore"):
            seed_hash = _splitmix64(np.array([self.seed % (1 << 64)], dtype=np.uint64))
            user_hash = _splitmix64(users ^ seed_hash)
            mixed = _splitmix64(user_hash[:, None] ^ _splitmix64(items)[None, :])
        return ((mixed >> np.uint64(40)).astype(np.float32)) / np.float32(1 << 24)
