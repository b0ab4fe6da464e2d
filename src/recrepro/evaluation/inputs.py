"""Small converters from split parts (parquet frames) to what the evaluators take."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["interactions_to_csr", "canonical_csr", "negatives_from_frame"]


def interactions_to_csr(user: np.ndarray, item: np.ndarray, n_users: int, n_items: int) -> sp.csr_matrix:
    """Binary user × item CSR matrix from ``(user, item)`` id columns.

    Duplicate pairs collapse to one stored entry with value 1.0 (the evaluators use the
    sparsity structure only; values are ignored).  Indices are sorted within rows.
    """
    user = np.asarray(user, dtype=np.int64)
    item = np.asarray(item, dtype=np.int64)
    if user.shape != item.shape:
        raise ValueError("user and item must have the same length")
    matrix = sp.csr_matrix(
        (np.ones(user.size, dtype=np.float32), (user, item)), shape=(n_users, n_items)
    )
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix


def canonical_csr(matrix: sp.spmatrix | sp.sparray, shape: tuple[int, int] | None = None) -> sp.csr_matrix:
    """CSR copy-if-needed with sorted indices and no duplicate entries.

    The evaluators binary-search the column indices of each row, so they need the
    canonical format; a matrix already in it is returned as is (not copied).
    """
    out = sp.csr_matrix(matrix)
    if shape is not None and out.shape != tuple(shape):
        raise ValueError(f"matrix has shape {out.shape}, expected {tuple(shape)}")
    if not out.has_canonical_format:
        out = out.copy()
        out.sum_duplicates()
    return out


def negatives_from_frame(frame: pd.DataFrame, n_negatives: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``negatives.parquet`` (long format ``user, item``) → ``(users[u], items[u, c])``.

    Users come out sorted ascending; within a user the file order of the negatives is
    kept (the sampled ranking does not depend on it).  Every user must have the same
    number ``c`` of negatives (99 in the FedRAP/NCF protocol); ``n_negatives`` checks it.
    """
    users = frame["user"].to_numpy(dtype=np.int64)
    items = frame["item"].to_numpy(dtype=np.int64)
    order = np.argsort(users, kind="stable")
    users, items = users[order], items[order]
    unique_users, counts = np.unique(users, return_counts=True)
    if unique_users.size == 0:
        return unique_users, np.empty((0, n_negatives or 0), dtype=np.int64)
    if np.any(counts != counts[0]):
        raise ValueError(f"users have different numbers of negatives ({counts.min()}..{counts.max()})")
    if n_negatives is not None and counts[0] != n_negatives:
        raise ValueError(f"expected {n_negatives} negatives per user, found {counts[0]}")
    return unique_users, items.reshape(unique_users.size, counts[0])
