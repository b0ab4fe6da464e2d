"""Implicit alternating least squares (iALS), Rendle-style, as in exADMM's official code.

Loss (Togashi et al., WWW 2024, eq. of iALS; riktor/exADMM-recommender ``include/frecsys/ials.hpp``)::

    L(U, V) = Σ_{(u,i)∈R} (1 − u_uᵀv_i)²  +  α0 Σ_{u,i} (u_uᵀv_i)²
              + Σ_u λ_u ‖u_u‖² + Σ_i λ_i ‖v_i‖²,
    λ_u = l2 · (|I_u| + α0·m)^ν,   λ_i = l2 · (|U_i| + α0·n)^ν          (frequency-scaled L2)

The unobserved term runs over *all* pairs (observed ones included) and is evaluated with
the Gramian trick ``α0 Σ_{u,i}(u_uᵀv_i)² = α0 ⟨UᵀU, VᵀV⟩``.  One epoch solves every user
row exactly, then every item row::

    u_u = (α0 G_V + λ_u I + V_{I_u}ᵀ V_{I_u})⁻¹ V_{I_u}ᵀ 1,      G_V = VᵀV

Rows without a training interaction are not updated (they keep their initial values, as
in the official code).  Initialisation: U, V ~ N(0, (stdev/√d)²).  Held-out users of a
strong-generalisation split are *folded in*: one exact user solve with V fixed
(:meth:`IALS.fold_in`).

All row solves are batched: rows are sorted by degree and grouped so that a group's
padded history ``[b, L]`` stays within a memory budget; the group's normal matrices are
``bmm(V[idx]ᵀ, V[idx])`` (padding points at an appended zero row) and are solved with a
batched Cholesky factorisation (:func:`solve_rows`).  There is no Python loop over users
or items, only over groups.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.models.base import TorchFactorModel
from recrepro.records import check_finite

__all__ = ["IALS", "RowGroups", "build_row_groups", "normal_equations", "solve_rows", "frequency_l2"]

#: Floats a group's gathered history ``[b, L, d]`` may hold (64 MiB in float32).
GROUP_BUDGET = 1 << 24


@dataclass
class RowGroups:
    """Rows of a sparse matrix grouped by degree for batched normal equations.

    Attributes
    ----------
    rows:
        Per group, the row ids ``[b]`` (torch int64).
    idx:
        Per group, the padded column ids ``[b, L]``; padding holds ``n_cols`` (the index of
        an appended zero row).
    degree:
        ``[n_rows]`` row degrees (float64 numpy).
    n_cols:
        Number of columns (the padding index).
    """

    rows: list[torch.Tensor]
    idx: list[torch.Tensor]
    degree: np.ndarray
    n_cols: int
    active: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def build_row_groups(matrix: sp.csr_matrix, d: int, device: str = "cpu",
                     budget: int = GROUP_BUDGET, max_padding: float = 1.25) -> RowGroups:
    """Group the rows with at least one entry of ``matrix`` into padded batches.

    Rows are sorted by degree; a group takes consecutive rows while ``b · L · d <=
    budget`` (``L`` = largest degree in the group) and ``L <= max_padding ·`` the group's
    smallest degree, at least one row.
    """
    matrix = sp.csr_matrix(matrix)
    matrix.sum_duplicates()
    indptr = matrix.indptr.astype(np.int64)
    indices = matrix.indices.astype(np.int64)
    degree = np.diff(indptr)
    active = np.flatnonzero(degree > 0)
    order = active[np.argsort(degree[active], kind="stable")]
    deg_sorted = degree[order]
    per_row = max(1, budget // max(d, 1))
    rows_out: list[torch.Tensor] = []
    idx_out: list[torch.Tensor] = []
    p, n = 0, order.size
    while p < n:
        # largest q with (q - p) * deg_sorted[q - 1] <= per_row (monotone in q)
        span = np.arange(1, n - p + 1, dtype=np.int64) * deg_sorted[p:]
        q = p + max(1, int(np.searchsorted(span, per_row, side="right")))
        # geometric degree buckets keep the padding below ``max_padding``
        q = min(q, max(p + 1, int(np.searchsorted(deg_sorted, max_padding * deg_sorted[p], side="right"))))
        rows = order[p:q]
        lens = degree[rows]
        width = int(lens.max())
        total = int(lens.sum())
        row_of = np.repeat(np.arange(rows.size), lens)
        offs = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
        src = np.repeat(indptr[rows], lens) + offs
        idx = np.full((rows.size, width), matrix.shape[1], dtype=np.int64)
        idx[row_of, offs] = indices[src]
        rows_out.append(torch.as_tensor(rows, device=device))
        idx_out.append(torch.as_tensor(idx, device=device))
        p = q
    return RowGroups(rows_out, idx_out, degree.astype(np.float64), int(matrix.shape[1]), active)


def frequency_l2(degree: np.ndarray, l2: float, alpha0: float, n_other: int, nu: float) -> np.ndarray:
    """``λ = l2 · (degree + α0 · n_other)^ν`` (the official ``RegularizationValue``)."""
    return l2 * np.power(np.asarray(degree, dtype=np.float64) + alpha0 * n_other, nu)


def normal_equations(other: torch.Tensor, idx: torch.Tensor, padded: bool = False
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Σ_{j∈h} x_j x_jᵀ, Σ_{j∈h} x_j)`` for each padded history row of ``idx``.

    ``other`` is ``[n_cols, d]`` (or ``[n_cols + 1, d]`` with a zero last row when
    ``padded``); ``idx`` ``[b, L]`` with padding ``n_cols``.  Returns ``A [b, d, d]`` and
    ``rhs [b, d]``.
    """
    ext = other if padded else torch.cat([other, other.new_zeros(1, other.shape[1])], dim=0)
    gathered = ext[idx]  # [b, L, d]
    return torch.bmm(gathered.transpose(1, 2), gathered), gathered.sum(dim=1)


def solve_rows(other: torch.Tensor, groups: RowGroups, constant: torch.Tensor, lam: torch.Tensor,
               out: torch.Tensor) -> torch.Tensor:
    """Exact solves ``x_r = (constant + λ_r I + X_{h_r}ᵀ X_{h_r})⁻¹ X_{h_r}ᵀ 1`` for every grouped row.

    ``constant`` is the shared ``[d, d]`` part (``α0·G`` for iALS, ``α0·G + Λ s sᵀ`` for
    exADMM's V-step), ``lam`` the ``[n_rows]`` per-row L2 weights.  Results are written
    into ``out`` (rows not in ``groups`` are left as they are) and ``out`` is returned.
    Each group: one gather, one ``bmm``, a batched Cholesky factorisation and solve
    (``torch.linalg.solve`` for a group whose factorisation fails).
    """
    ext = torch.cat([other, other.new_zeros(1, other.shape[1])], dim=0)
    for rows, idx in zip(groups.rows, groups.idx, strict=True):
        a, rhs = normal_equations(ext, idx, padded=True)
        a += constant
        a.diagonal(dim1=1, dim2=2).add_(lam[rows].unsqueeze(1))
        chol, info = torch.linalg.cholesky_ex(a)
        if bool((info != 0).any()):
            x = torch.linalg.solve(a, rhs)
        else:
            # two batched triangular solves (faster than cholesky_solve for one right-hand side)
            y = torch.linalg.solve_triangular(chol, rhs.unsqueeze(-1), upper=False)
            x = torch.linalg.solve_triangular(chol.mT, y, upper=True).squeeze(-1)
        out[rows] = x
    return out


def _init_factors(n: int, d: int, stdev: float, generator: torch.Generator, dtype, device) -> torch.Tensor:
    return (torch.randn(n, d, generator=generator, dtype=torch.float64) * (stdev / math.sqrt(d))).to(
        dtype=dtype, device=device)


def observed_predictions(matrix: sp.csr_matrix, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
    """``u_uᵀ v_i`` for every stored entry of ``matrix`` (COO order)."""
    coo = matrix.tocoo()
    r = torch.as_tensor(coo.row.astype(np.int64), device=users.device)
    c = torch.as_tensor(coo.col.astype(np.int64), device=users.device)
    return (users[r] * items[c]).sum(dim=1)


class IALS(TorchFactorModel):
    """Rendle-style iALS with frequency-scaled L2 and batched exact solves.

    Parameters
    ----------
    dim:
        Embedding size ``d``.
    alpha0:
        Unobserved weight ``α0``.
    l2:
        Base L2 weight (``--l2_reg``).
    l2_exp:
        Frequency exponent ``ν`` (``--l2_reg_exp``; 1.0 in the official runs).
    stdev:
        Initial scale: factors ~ N(0, (stdev/√d)²).
    epochs:
        Epochs (user solves then item solves).
    seed:
        Seed of the initialisation.
    device, dtype:
        Torch device (``"cpu"`` / ``"cuda"``) and float type (float32 as in the C++ code).
    log_losses:
        Record the loss terms per epoch in :attr:`history`.
    """

    def __init__(self, dim: int = 8, alpha0: float = 0.1, l2: float = 0.002, l2_exp: float = 1.0,
                 stdev: float = 0.1, epochs: int = 10, seed: int = 0, device: str = "cpu",
                 dtype: torch.dtype = torch.float32, log_losses: bool = True) -> None:
        self.dim, self.alpha0, self.l2, self.l2_exp = int(dim), float(alpha0), float(l2), float(l2_exp)
        self.stdev, self.epochs, self.seed = float(stdev), int(epochs), int(seed)
        self.device, self.dtype, self.log_losses = device, dtype, log_losses
        self.U: torch.Tensor | None = None
        self.V: torch.Tensor | None = None
        self.history: list[dict[str, float]] = []

    # ------------------------------------------------------------------ training
    def _lambdas(self, by_user: sp.csr_matrix) -> tuple[torch.Tensor, torch.Tensor]:
        n_users, n_items = by_user.shape
        n_active_users = int((np.diff(by_user.indptr) > 0).sum())
        deg_u = np.diff(by_user.indptr)
        deg_i = np.bincount(by_user.indices, minlength=n_items)
        lam_u = frequency_l2(deg_u, self.l2, self.alpha0, n_items, self.l2_exp)
        # the official num_users is the number of user rows of the training data
        lam_i = frequency_l2(deg_i, self.l2, self.alpha0, n_active_users, self.l2_exp)
        as_t = lambda a: torch.as_tensor(a, dtype=self.dtype, device=self.device)  # noqa: E731
        return as_t(lam_u), as_t(lam_i)

    def fit(self, train: sp.csr_matrix, **kwargs: Any) -> IALS:
        """Fit on a binary ``[n_users, n_items]`` CSR matrix (rows without entries are held-out users)."""
        by_user = self._as_train_matrix(train)
        by_user.data[:] = 1.0
        self.n_users, self.n_items = by_user.shape
        self._train = by_user
        active = np.flatnonzero(np.diff(by_user.indptr) > 0)
        self._active = torch.as_tensor(active, device=self.device)
        user_groups = build_row_groups(by_user, self.dim, self.device)
        item_groups = build_row_groups(by_user.T.tocsr(), self.dim, self.device)
        lam_u, lam_i = self._lambdas(by_user)
        gen = torch.Generator().manual_seed(self.seed)
        self.U = torch.zeros(self.n_users, self.dim, dtype=self.dtype, device=self.device)
        self.U[self._active] = _init_factors(active.size, self.dim, self.stdev, gen, self.dtype, self.device)
        self.V = _init_factors(self.n_items, self.dim, self.stdev, gen, self.dtype, self.device)
        self.history = []
        for epoch in range(1, self.epochs + 1):
            started = time.perf_counter()
            gram_v = self.V.T @ self.V
            solve_rows(self.V, user_groups, self.alpha0 * gram_v, lam_u, self.U)
            ua = self.U[self._active]
            gram_u = ua.T @ ua  # only training users enter the item step
            # item rows index users: solve against the full U (held-out rows never appear)
            solve_rows(self.U, item_groups, self.alpha0 * gram_u, lam_i, self.V)
            seconds = time.perf_counter() - started
            check_finite("iALS user factors", self.U, f"epoch {epoch}")
            check_finite("iALS item factors", self.V, f"epoch {epoch}")
            entry = {"epoch": epoch, "seconds": seconds}
            if self.log_losses:
                entry.update(self.loss_terms(by_user, lam_u, lam_i))
            self.history.append(entry)
        return self

    def loss_terms(self, by_user: sp.csr_matrix, lam_u: torch.Tensor, lam_i: torch.Tensor) -> dict[str, float]:
        """Observed, unobserved (Gramian trick), L2 and total loss of the current factors."""
        pred = observed_predictions(by_user, self.U, self.V)
        observed = float(((pred - 1.0) ** 2).sum())
        ua = self.U[self._active]
        unobserved = self.alpha0 * float(((ua.T @ ua) * (self.V.T @ self.V)).sum())
        deg_i = torch.as_tensor(np.bincount(by_user.indices, minlength=self.n_items) > 0, device=self.device)
        reg = float((lam_u * (self.U ** 2).sum(1)).sum() + (lam_i * (self.V ** 2).sum(1) * deg_i).sum())
        return {"loss_observed": observed, "loss_unobserved": unobserved, "loss_reg": reg,
                "loss": observed + unobserved + reg}

    # ------------------------------------------------------------------ fold-in
    def fold_in(self, history: sp.csr_matrix) -> torch.Tensor:
        """One exact solve per row of ``history`` (``[n_rows, n_items]``) with V fixed.

        Rows without entries get zero factors.  Returns ``[n_rows, d]``.
        """
        self._check_fitted()
        hist = self._as_train_matrix(history)
        deg = np.diff(hist.indptr)
        lam = torch.as_tensor(frequency_l2(deg, self.l2, self.alpha0, self.n_items, self.l2_exp),
                              dtype=self.dtype, device=self.device)
        out = torch.zeros(hist.shape[0], self.dim, dtype=self.dtype, device=self.device)
        groups = build_row_groups(hist, self.dim, self.device)
        return solve_rows(self.V, groups, self.alpha0 * (self.V.T @ self.V), lam, out)
