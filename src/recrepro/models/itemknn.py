"""ItemKNN: item-based nearest neighbours with shrunk cosine similarity.

Sarwar, Karypis, Konstan & Riedl, "Item-based collaborative filtering recommendation
algorithms" (WWW 2001), §3.1.1 (cosine similarity) and §3.2.1 (weighted sum), with the
shrinkage term and the neighbourhood size ``k`` of the tuned ItemKNN-CF baseline in Ferrari
Dacrema, Cremonesi & Jannach, "Are we really making much progress?" (RecSys 2019), §3:

    s_ij = x_iᵀ x_j / (‖x_i‖ ‖x_j‖ + h),      x_i = column i of the binary matrix X,

``s_ii = 0``; for every item ``j`` only its ``k`` most similar items ``i`` are kept
(``W[:, j]``), and a user's score of ``j`` is ``Σ_i x_ui W_ij`` (``X W``).

The similarity is computed here with ``scipy.sparse`` on the stored entries of ``XᵀX`` only
(top-``k`` by :func:`~recrepro.models.itemitem.sparse_topk_rows`), not with ``implicit``'s ``CosineRecommender``: that one has no shrinkage term ``h`` (its
cosine is ``h = 0``), which is one of the two parameters the tuned baseline searches.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from recrepro.models.itemitem import ItemItemRecommender, sparse_topk_rows

__all__ = ["ItemKNN"]


class ItemKNN(ItemItemRecommender):
    """Cosine ItemKNN with shrinkage (see the module docstring for the equations).

    Parameters
    ----------
    k:
        Neighbours kept per item (``topK``).
    shrink:
        Shrinkage ``h >= 0`` added to the cosine's denominator.
    """

    #: Settings' smallest allowed values: a tuning pick there has no point beyond it.
    SETTING_FLOORS: ClassVar[dict[str, float]] = {"shrink": 0.0}

    def __init__(self, k: int = 100, shrink: float = 0.0) -> None:
        if int(k) < 1 or float(shrink) < 0:
            raise ValueError(f"ItemKNN needs k >= 1 and shrink >= 0, got k={k}, shrink={shrink}")
        self.k, self.shrink = int(k), float(shrink)

    def similarity(self) -> sp.csr_matrix:
        """The shrunk cosine ``S`` on the stored entries of ``XᵀX`` (float32 CSR, diagonal kept)."""
        gram = (self.history.T @ self.history).tocsr().astype(np.float64)
        rows = np.repeat(np.arange(self.n_items), np.diff(gram.indptr))
        denom = self._norm[rows] * self._norm[gram.indices] + self.shrink
        gram.data = np.where(denom > 0, gram.data / np.where(denom > 0, denom, 1.0), 0.0)
        return gram.astype(np.float32)

    def fit(self, train: sp.csr_matrix, **kwargs: Any) -> ItemKNN:
        matrix = self._set_history(train)
        self._norm = np.sqrt(np.asarray(matrix.sum(axis=0)).ravel()).astype(np.float64)
        # S is symmetric: row j of S is column j, so the top-k of row j are item j's neighbours
        self.W = sparse_topk_rows(self.similarity(), self.k).T.tocsr()
        return self
