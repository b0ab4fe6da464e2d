"""Item–item models: a user's scores are her history row times an item–item matrix.

``score(u) = h_u W`` with ``h_u`` the user's binary history (the training row, or the fold-in
row of a held-out user of a strong-generalisation split) and ``W`` an ``[n_items, n_items]``
matrix (sparse for the neighbourhood models, dense for EASE).  Held-out users fold in
naturally: :meth:`ItemItemRecommender.fold_in_users` replaces their history rows; ``W`` is
unchanged.

:func:`sparse_topk_rows` keeps the top ``k`` entries per row of a sparse item–item matrix
without forming a dense ``n_items²`` block (gowalla: 40,981 items); :func:`topk_per_row` is the
same rule on a dense block.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from recrepro.models.base import Recommender

__all__ = ["ItemItemRecommender", "sparse_topk_rows", "topk_per_row"]


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


def sparse_topk_rows(matrix: sp.csr_matrix, k: int, drop_diagonal: bool = True,
                     block_nnz: int = 1 << 23) -> sp.csr_matrix:
    """The ``k`` largest positive entries of every row of a sparse ``matrix``, as float32 CSR.

    The same rule as :func:`topk_per_row` (value descending, then the lower column id), on the
    stored entries only: an entry that is not stored is 0 and never kept.  ``drop_diagonal``
    removes ``(i, i)`` first.  Rows are taken in blocks of about ``block_nnz`` stored entries,
    each sorted once (``np.lexsort`` by row, −value, column), so the work is ``O(nnz log nnz)``
    and no dense ``n_items²`` block is ever formed.
    """
    matrix = sp.csr_matrix(matrix)
    n_rows, n_cols = matrix.shape
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    indptr = matrix.indptr.astype(np.int64)
    rows, cols, vals = [], [], []
    lo = 0
    while lo < n_rows:
        hi = int(np.searchsorted(indptr, indptr[lo] + block_nnz, side="right")) - 1
        hi = min(max(hi, lo + 1), n_rows)
        start, stop = indptr[lo], indptr[hi]
        r = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(indptr[lo:hi + 1]))
        c = matrix.indices[start:stop].astype(np.int64)
        v = matrix.data[start:stop].astype(np.float32)
        keep = v > 0
        if drop_diagonal:
            keep &= r != c
        r, c, v = r[keep], c[keep], v[keep]
        order = np.lexsort((c, -v, r))
        r, c, v = r[order], c[order], v[order]
        first = np.searchsorted(r, np.arange(lo, hi), side="left")  # each row's first sorted entry
        rank = np.arange(r.size) - first[r - lo]
        top = rank < k
        rows.append(r[top])
        cols.append(c[top])
        vals.append(v[top])
        lo = hi
    cat = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)  # noqa: E731
    return sp.csr_matrix((cat(vals, np.float32), (cat(rows, np.int64), cat(cols, np.int64))), shape=(n_rows, n_cols))


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
