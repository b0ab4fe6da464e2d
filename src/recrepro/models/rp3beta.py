"""RP3beta: three-step random walks on the user–item graph, divided by popularity^β.

Paudel, Christoffel, Newell & Bernstein, "Updatable, accurate, diverse, and scalable
recommendations for interactive applications" (ACM TiiS 7(1), 2017), §4 (P³ and its
popularity-penalised variant RP³_β): with ``P_ui = X / deg(u)`` (user → item) and
``P_iu = Xᵀ / deg(i)`` (item → user) the transition matrices, the item–item step is

    W_ij = Σ_u (P_iu)_{iu}^α (P_ui)_{uj}^α / deg(j)^β,

and a user's score of ``j`` is ``Σ_i (P_ui)_{ui}^α W_ij``.  ``α`` raises every transition
probability elementwise (the P³_α of Cooper et al. 2014, used by the tuned RP3beta of Ferrari
Dacrema et al., RecSys 2019); for a binary ``X`` the user's first step ``(1/deg(u))^α`` is the
same for all her items and does not change her ranking, so the scores are ``X W``.  As in
the tuned baseline, ``W_ii = 0`` (an item's walk back to itself only scores items the user
already has, and would take one of the ``k`` places) and each row of ``W`` keeps its ``k``
largest entries; no row normalisation is applied (the paper's ranking is ``P³`` divided by
``deg(j)^β``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from recrepro.models.itemitem import ItemItemRecommender, sparse_topk_rows

__all__ = ["RP3beta"]


class RP3beta(ItemItemRecommender):
    """RP³_β (see the module docstring for the equations).

    Parameters
    ----------
    alpha:
        Exponent ``α > 0`` of the transition probabilities.
    beta:
        Popularity exponent ``β >= 0`` (``β = 0``: P³_α).
    k:
        Entries kept per row of ``W``.
    """

    #: Settings' smallest allowed values: a tuning pick there has no point beyond it (``β = 0`` is
    #: P³_α; a negative ``β`` would favour popular items, outside the model).
    SETTING_FLOORS: ClassVar[dict[str, float]] = {"beta": 0.0}

    def __init__(self, alpha: float = 1.0, beta: float = 0.5, k: int = 100) -> None:
        if float(alpha) <= 0 or float(beta) < 0 or int(k) < 1:
            raise ValueError(f"RP3beta needs alpha > 0, beta >= 0, k >= 1; got {alpha}, {beta}, {k}")
        self.alpha, self.beta, self.k = float(alpha), float(beta), int(k)

    @staticmethod
    def _row_stochastic(matrix: sp.csr_matrix, alpha: float) -> sp.csr_matrix:
        deg = np.diff(matrix.indptr).astype(np.float64)
        out = matrix.astype(np.float64, copy=True)
        out.data = np.power(np.repeat(1.0 / np.maximum(deg, 1.0), np.diff(matrix.indptr)), alpha)
        return out

    def transitions(self) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """``(P_iu^α, P_ui^α)``: item → user and user → item transition probabilities to the power α."""
        return (self._row_stochastic(self.history.T.tocsr(), self.alpha),
                self._row_stochastic(self.history, self.alpha))

    def fit(self, train: sp.csr_matrix, **kwargs: Any) -> RP3beta:
        matrix = self._set_history(train)
        p_iu, p_ui = self.transitions()
        pop = np.asarray(matrix.sum(axis=0)).ravel()
        with np.errstate(divide="ignore"):
            penalty = np.where(pop > 0, np.power(np.maximum(pop, 1.0), -self.beta), 0.0)

        walk = (p_iu @ p_ui).tocsr()  # stored entries only: items two steps apart
        walk.data = walk.data * penalty[walk.indices]
        self.W = sparse_topk_rows(walk, self.k)  # W_ii = 0: drop_diagonal
        return self
