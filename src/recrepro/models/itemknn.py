"""ItemKNN: item-based nearest neighbours with shrunk cosine similarity.

Sarwar, Karypis, Konstan & Riedl, "Item-based collaborative filtering recommendation
algorithms" (WWW 2001), §3.1.1 (cosine similarity) and §3.2.1 (weighted sum), with the
shrinkage term and the neighbourhood size ``k`` of the tuned ItemKNN-CF baseline in Ferrari
Dacrema, Cremonesi & Jannach, "Are we really making much progress?" (RecSys 2019), §3:

    s_ij = x_iᵀ x_j / (‖x_i‖ ‖x_j‖ + h),      x_i = column i of the binary matrix X,

``s_ii = 0``; for every item ``j`` only its ``k`` most similar items ``i`` are kept
(``W[:, j]``), and a user's score of ``j`` is ``Σ_i x_ui W_ij`` (``X W``).

The similarity is computed here with ``scipy.sparse`` in row blocks (``X[:, block]ᵀ X`` as
a dense ``block × n_items`` array, top-``k`` by :func:`~recrepro.models.itemitem.blocked_topk_rows`),
not with ``implicit``'s ``CosineRecommender``: that one has no shrinkage term ``h`` (its
cosine is ``h = 0``), which is one of the two parameters the tuned baseline searches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from recrepro.models.itemitem import ItemItemRecommender, blocked_topk_rows

__all__ = ["ItemKNN"]


class ItemKNN(ItemItemRecommender):
    """Cosine ItemKNN with shrinkage (see the module docstring for the equations).

    Parameters
    ----------
    k:
        Neighbours kept per item (``topK``).
    shrink:
        Shrinkage ``h >= 0`` added to the cosine's denominator.
    block_size:
        Items per dense row block while computing the similarities.
    """

    def __init__(self, k: int = 100, shrink: float = 0.0, block_size: int = 1024) -> None:
        if int(k) < 1 or float(shrink) < 0:
            raise ValueError(f"ItemKNN needs k >= 1 and shrink >= 0, got k={k}, shrink={shrink}")
        self.k, self.shrink, self.block_size = int(k), float(shrink), int(block_size)

    def similarity_rows(self, lo: int, hi: int) -> np.ndarray:
        """Dense rows ``lo:hi`` of the shrunk cosine ``S`` (diagonal zero), float32."""
        co = (self._by_item[lo:hi] @ self.history).toarray()
        denom = self._norm[lo:hi, None] * self._norm[None, :] + self.shrink
        with np.errstate(invalid="ignore", divide="ignore"):
            sim = np.where(denom > 0, co / np.where(denom > 0, denom, 1.0), 0.0).astype(np.float32)
        sim[np.arange(hi - lo), np.arange(lo, hi)] = 0.0
        return sim

    def fit(self, train: sp.csr_matrix, **kwargs: Any) -> ItemKNN:
        matrix = self._set_history(train)
        self._by_item = matrix.T.tocsr()
        self._norm = np.sqrt(np.asarray(matrix.sum(axis=0)).ravel()).astype(np.float64)
        # S is symmetric: row j of S is column j, so the top-k of row j are item j's neighbours
        top = blocked_topk_rows(self.similarity_rows, self.n_items, self.n_items, self.k, self.block_size)
        self.W = top.T.tocsr()
        del self._by_item
        return self
