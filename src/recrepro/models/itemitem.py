"""Item–item models: a user's scores are her history row times an item–item matrix.

``score(u) = h_u W`` with ``h_u`` the user's binary history (the training row, or the fold-in
row of a held-out user of a strong-generalisation split) and ``W`` an ``[n_items, n_items]``
matrix (sparse for the neighbourhood models, dense for EASE).  Held-out users fold in
naturally: :meth:`ItemItemRecommender.fold_in_users` replaces their history rows; ``W`` is
unchanged.

:func:`blocked_topk_rows` builds a sparse top-``k``-per-row matrix from a dense row-block
function, so no ``n_items²`` dense matrix is ever held (gowalla: 40,981 items).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from recrepro.models.base import Recommender

__all__ = ["ItemItemRecommender", "blocked_topk_rows", "topk_per_row"]


def topk_per_row(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row ids, column ids and values of the ``k`` largest entries per row of ``block`` ``[b, n]``.

    Entries ``<= 0`` are dropped (a zero similarity is no neighbour).  Entries equal to a row's
    ``k``-th largest value fill the remaining places in the order of their column id (lower
    first), so the result does not depend on a sort's tie order.  Returns COO triplets
    relative to the block, in row-major order.
    """
    b, n = block.shape
    k = min(int(k), n)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    kth = -np.partition(-block, k - 1, axis=1)[:, k - 1]
    above = block > kth[:, None]
    equal = block == kth[:, None]
    need = k - above.sum(axis=1)
    keep = above | (equal & (np.cumsum(equal, axis=1) <= need[:, None]))
    keep &= block > 0
    rows, cols = np.nonzero(keep)
    return rows, cols, block[rows, cols]


def blocked_topk_rows(row_block: Callable[[int, int], np.ndarray], n_rows: int, n_cols: int, k: int,
                      block_size: int = 1024) -> sp.csr_matrix:
    """Sparse ``[n_rows, n_cols]`` matrix of the top-``k`` positive entries per row.

    ``row_block(lo, hi)`` returns the dense rows ``lo:hi`` (float32).  One dense block of
    ``block_size × n_cols`` floats is held at a time.
    """
    rows, cols, vals = [], [], []
    for lo in range(0, n_rows, block_size):
        hi = min(lo + block_size, n_rows)
        r, c, v = topk_per_row(np.asarray(row_block(lo, hi), dtype=np.float32), k)
        rows.append(r + lo)
        cols.append(c)
        vals.append(v)
    cat = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)  # noqa: E731
    return sp.csr_matrix((cat(vals, np.float32), (cat(rows, np.int64), cat(cols, np.int64))),
                         shape=(n_rows, n_cols))


class ItemItemRecommender(Recommender):
    """Base of the item–item models: ``score(u) = h_u W``.

    Subclasses compute :attr:`W` in :meth:`fit` (via :meth:`_set_history` first).

    Attributes
    ----------
    W:
        ``[n_items, n_items]`` item–item matrix (scipy sparse or dense ndarray); ``W[i, j]``
        is what item ``i`` in a history adds to the score of item ``j``.
    history:
        ``[n_users, n_items]`` binary CSR rows that are scored (training rows, with held-out
        users' rows replaced by :meth:`fold_in_users`).
    """

    W: Any = None
    history: sp.csr_matrix | None = None

    def _set_history(self, train: sp.csr_matrix) -> sp.csr_matrix:
        matrix = self._as_train_matrix(train).astype(np.float32)
        matrix.data[:] = 1.0
        self.n_users, self.n_items = matrix.shape
        self.history = matrix
        return matrix

    def fold_in_users(self, history: sp.csr_matrix) -> None:
        """Score the users with entries in ``history`` from those rows (``W`` unchanged)."""
        self._check_fitted()
        hist = self._as_train_matrix(history).astype(np.float32)
        hist.data[:] = 1.0
        has = np.diff(hist.indptr) > 0
        keep = sp.diags((~has).astype(np.float32))
        self.history = (keep @ self.history + sp.diags(has.astype(np.float32)) @ hist).tocsr()

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        self._check_fitted()
        rows = self.history[np.asarray(user_ids, dtype=np.int64).ravel()]
        out = rows @ self.W
        out = out.toarray() if sp.issparse(out) else np.asarray(out)
        return out.astype(np.float32, copy=False)
