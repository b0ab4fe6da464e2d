"""Implicit alternating least squares (iALS), Rendle-style, as in exADMM's official code.

Loss (Togashi et al., WWW 2024, eq. of iALS; riktor/exADMM-recommender ``include/frecsys/ials.hpp``)::

    L(U, V) = Σ_{(u,i)∈R} (1 − u_uᵀv_i)²  +  α0 Σ_{u,i} (u_uᵀv_i)²
              + Σ_u λ_u ‖u_u‖² + Σ_i λ_i ‖v_i‖²,
    λ_u = l2 · (|I_u| + α0·m)^ν,   λ_i = l2 · (|U_i| + α0·n)^ν          (frequency-scaled L2)

The unobserved term runs over *all* pairs (observed ones included) and is evaluated with
the Gramian trick ``α0 Σ_{u,i}(u_uᵀv_i)² = α0 ⟨UᵀU, VᵀV⟩``.  One epoch solves every user
row exactly, then every item row::

    u_u = (α0 G_V + λ_u I + V_{I_u}ᵀ V_{I_u})⁻¹ V_{I_u}ᵀ 1,      G_V = VᵀV

Rows without a training interaction are never solved.  Users without one (held-out users)
are zero and left out of ``G_U``; items without one are set to zero at initialisation
(:func:`zero_cold_rows`), their exact solution — the official code leaves them at their
random initial values, which adds noise to ``G_V`` and gives them random scores
(docs/deviations.md#exadmm-cold-items).  Initialisation: U, V ~ N(0, (stdev/√d)²).
Held-out users of a strong-generalisation split are *folded in*: one exact user solve with
V fixed (:meth:`IALS.fold_in`).

All row solves are batched: rows are sorted by degree and grouped so that a group's
padded history ``[b, L]`` stays within a memory budget; the group's normal matrices are
``bmm(V[idx]ᵀ, V[idx])`` (padding points at an appended zero row) and are solved with a
batched Cholesky factorisation (:func:`solve_rows`).  There is no Python loop over users
or items, only over groups.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.models.base import TorchFactorModel
from recrepro.records import check_finite

__all__ = ["IALS", "RowGroups", "build_row_groups", "cg_rows", "gather_history", "scatter_rows",
           "solve_rows", "frequency_l2", "zero_cold_rows"]

#: Floats a group's gathered history ``[b, L, d]`` may hold: 1 MiB in float32 on CPU, so that a
#: group's gather, ``bmm`` and factorisation stay in cache (larger groups measured slower on
#: gowalla), and 64 MiB on CUDA, where fewer, larger kernels win.
GROUP_BUDGET = 1 << 18
GROUP_BUDGET_CUDA = 1 << 24


def gather_history(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``table[idx]`` for a padded history ``idx`` ``[b, L]``: ``[b, L, d]``.

    One ``index_select`` of the flattened ids, viewed back: the same rows, copied, as advanced
    indexing, 4–9× faster on CPU (advanced indexing with a 2-D index takes a general
    strided path; 0.8 vs 4.5 ms for a 2,000 × 16 group of 64-dim rows) — on gowalla the gathers
    were a third of an iALS epoch.
    """
    return table.index_select(0, idx.reshape(-1)).view(idx.shape[0], idx.shape[1], table.shape[1])


def scatter_rows(out: torch.Tensor, groups: RowGroups, solved: torch.Tensor) -> torch.Tensor:
    """``out[rows of every group, in order] = solved`` (the rows are distinct): one ``index_copy_``."""
    return out.index_copy_(0, torch.cat(list(groups.rows)), solved)


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
                     budget: int | None = None, max_padding: float = 1.25) -> RowGroups:
    """Group the rows with at least one entry of ``matrix`` into padded batches.

    Rows are sorted by degree; a group takes consecutive rows while ``b · L · d <=
    budget`` (``L`` = largest degree in the group) and ``L <= max_padding ·`` the group's
    smallest degree, at least one row.
    """
    if budget is None:
        budget = GROUP_BUDGET_CUDA if str(device).startswith("cuda") else GROUP_BUDGET
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
        # largest q with (q - p) * deg_sorted[q - 1] <= per_row (increasing in q); the crossing lies
        # within the first per_row // deg_sorted[p] + 1 rows, since every degree there is >= deg_sorted[p]
        window = min(n - p, per_row // int(deg_sorted[p]) + 1)
        span = np.arange(1, window + 1, dtype=np.int64) * deg_sorted[p:p + window]
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


def solve_rows(other: torch.Tensor, groups: RowGroups, constant: torch.Tensor, lam: torch.Tensor,
               out: torch.Tensor, method: str = "auto", workers: int | None = None) -> torch.Tensor:
    """Exact solves ``x_r = (C + λ_r I + X_hᵀ X_h)⁻¹ X_hᵀ 1`` for every grouped row.

    ``constant`` is the shared symmetric PSD ``[d, d]`` part ``C`` (``α0·G`` for iALS,
    ``α0·G + Λ s sᵀ`` for exADMM's V-step), ``lam`` the ``[n_rows]`` per-row L2 weights,
    ``X_h`` the rows of ``other`` in row ``r``'s history (``L`` of them).  Results are
    written into ``out`` (rows not in ``groups`` are left as they are) and ``out`` is
    returned.

    Two exact forms, chosen per group by its padded width ``L`` (``method="auto"``):

    * **primal** (``L ≥ d``): the ``d × d`` normal matrix, one ``bmm``, batched Cholesky and
      two triangular solves — ``O(L d² + d³)`` per row.
    * **dual** (``L < d``, most rows of a sparse matrix): with ``C = Q diag(σ) Qᵀ``
      (one ``eigh`` per call), ``W = X Q`` and ``D_r = diag(σ) + λ_r I``, the push-through
      identity ``(D_r + W_hᵀW_h)⁻¹W_hᵀ = D_r⁻¹W_hᵀ(I_L + W_h D_r⁻¹ W_hᵀ)⁻¹`` gives
      ``x_r = Q D_r⁻¹ W_hᵀ z``, ``z = (I_L + W_h D_r⁻¹ W_hᵀ)⁻¹ 1`` — an ``L × L`` system
      whose eigenvalues are ≥ 1, ``O(L² d + L³)`` per row.  Padding entries are zero rows
      of ``W_h``: they add identity rows to the ``L × L`` matrix and nothing to ``x_r``.

    The dual needs ``σ + λ_r > 0`` (always, for ``l2 > 0``); otherwise every group takes
    the primal form.  ``method`` may force ``"primal"`` or ``"dual"`` (tests, benchmarks).
    A group whose Cholesky factorisation fails falls back to ``torch.linalg.solve``.
    Groups run in parallel over ``workers`` CPU threads (:func:`map_groups`).
    """
    if method not in ("auto", "primal", "dual"):
        raise ValueError(f"solve_rows: method must be auto, primal or dual, got {method!r}")
    if not groups.rows:
        return out
    d = other.shape[1]
    with single_thread():  # a 64 × 64 eigh on 2 OpenMP threads took 75 ms instead of 0.3 ms here
        sigma64, q64 = torch.linalg.eigh(constant.to(torch.float64))
    sigma, q = sigma64.to(other.dtype), q64.to(other.dtype)
    lam_min = float(lam.min()) if lam.numel() else 0.0
    dual_ok = method != "primal" and float(sigma64.min()) + lam_min > 0.0
    # both forms run in the eigenbasis of C, where C is the diagonal σ; a zero row for the padding
    rotated = other.new_empty(other.shape[0] + 1, d)
    torch.mm(other, q, out=rotated[:-1])
    rotated[-1].zero_()

    def solve_group(rows: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        width = idx.shape[1]
        lam_r = lam.index_select(0, rows).unsqueeze(1)
        hist = gather_history(rotated, idx)  # [b, L, d]
        use_dual = dual_ok and (method == "dual" or width < d)
        if use_dual:
            scaled = hist / (sigma.unsqueeze(0) + lam_r).unsqueeze(1)  # W_h D_r⁻¹
            system = torch.bmm(scaled, hist.mT)  # [b, L, L]
            system.diagonal(dim1=1, dim2=2).add_(1.0)
            rhs = system.new_ones(system.shape[0], width, 1)
        else:
            system = torch.bmm(hist.mT, hist)  # [b, d, d]
            system.diagonal(dim1=1, dim2=2).add_(sigma.unsqueeze(0) + lam_r)
            rhs = hist.sum(dim=1).unsqueeze(-1)
        chol, info = torch.linalg.cholesky_ex(system)
        if bool((info != 0).any()):
            sol = torch.linalg.solve(system, rhs)
        else:
            # two batched triangular solves (faster than cholesky_solve for one right-hand side)
            half = torch.linalg.solve_triangular(chol, rhs, upper=False)
            sol = torch.linalg.solve_triangular(chol.mT, half, upper=True)
        return torch.bmm(scaled.mT, sol).squeeze(-1) if use_dual else sol.squeeze(-1)

    solved = map_groups(solve_group, groups, workers)
    return scatter_rows(out, groups, torch.cat(solved) @ q.T)


@contextmanager
def single_thread():
    """Run the enclosed torch calls on one intra-op thread (restored afterwards)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def map_groups(solve_group, groups: RowGroups, workers: int | None = None) -> list[torch.Tensor]:
    """``[solve_group(rows, idx) for each group]``, on CPU spread over ``workers`` threads.

    Row groups are independent, so on CPU they are dealt to ``workers`` Python threads
    (default: torch's intra-op thread count), each running torch on one thread — the
    parallel-over-rows scheme of ``implicit``'s solvers; torch releases the GIL inside its
    kernels.  Small per-group kernels on several OpenMP threads each paid a barrier per call
    and ran 2–4× slower on the loaded 2-core machine.  Groups are dealt largest first to the
    least-loaded worker (by ``b · L``).  On CUDA, or with one worker, the loop is serial.
    """
    pairs = list(zip(groups.rows, groups.idx, strict=True))
    if workers is None:
        workers = torch.get_num_threads()
    on_cuda = bool(pairs) and pairs[0][1].is_cuda
    if workers <= 1 or on_cuda or len(pairs) < 2:
        return [solve_group(rows, idx) for rows, idx in pairs]
    cost = np.array([rows.numel() * idx.shape[1] for rows, idx in pairs], dtype=np.float64)
    shares: list[list[int]] = [[] for _ in range(workers)]
    load = np.zeros(workers)
    for j in np.argsort(-cost, kind="stable"):
        w = int(np.argmin(load))
        load[w] += cost[j]
        shares[w].append(int(j))
    results: list[torch.Tensor | None] = [None] * len(pairs)

    def run(share: list[int]) -> None:
        for j in share:
            results[j] = solve_group(*pairs[j])

    with single_thread(), ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(run, share) for share in shares if share]:
            future.result()
    return results  # type: ignore[return-value]


def cg_rows(other: torch.Tensor, groups: RowGroups, constant: torch.Tensor, lam: torch.Tensor,
            out: torch.Tensor, steps: int = 3, workers: int | None = None) -> torch.Tensor:
    """Approximate row solves by ``steps`` conjugate-gradient iterations, warm-started at ``out``.

    The same systems as :func:`solve_rows`, ``(C + λ_r I + X_hᵀX_h) x_r = X_hᵀ1``, but never
    forming a ``d × d`` matrix per row: each iteration applies the matrix as
    ``C p + λ_r p + X_hᵀ(X_h p)`` (``O(L d + d²)`` per row), as ``implicit``'s CG solver
    does (Takács et al. 2011).  Not exact: ``steps`` iterations from the previous epoch's
    factors (3 in ``implicit``).  Writes into ``out`` and returns it.
    """
    if not groups.rows:
        return out
    d = other.shape[1]
    ext = torch.cat([other, other.new_zeros(1, d)], dim=0)
    tiny = torch.finfo(other.dtype).tiny

    def solve_group(rows: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        hist = gather_history(ext, idx)  # [b, L, d]
        lam_r = lam.index_select(0, rows).unsqueeze(1)

        def apply(v: torch.Tensor) -> torch.Tensor:
            return v @ constant + lam_r * v + torch.bmm(hist.mT, torch.bmm(hist, v.unsqueeze(-1))).squeeze(-1)

        x = out.index_select(0, rows)
        r = hist.sum(dim=1) - apply(x)
        p_dir, rs = r.clone(), (r * r).sum(dim=1, keepdim=True)
        for _ in range(steps):
            ap = apply(p_dir)
            alpha = rs / (p_dir * ap).sum(dim=1, keepdim=True).clamp_min(tiny)
            x += alpha * p_dir
            r -= alpha * ap
            rs_new = (r * r).sum(dim=1, keepdim=True)
            p_dir = r + (rs_new / rs.clamp_min(tiny)) * p_dir
            rs = rs_new
        return x

    solved = map_groups(solve_group, groups, workers)
    return scatter_rows(out, groups, torch.cat(solved))


def _init_factors(n: int, d: int, stdev: float, generator: torch.Generator, dtype, device) -> torch.Tensor:
    return (torch.randn(n, d, generator=generator, dtype=torch.float64) * (stdev / math.sqrt(d))).to(
        dtype=dtype, device=device)


def zero_cold_rows(factors: torch.Tensor, degree: np.ndarray) -> torch.Tensor:
    """Set the rows with ``degree == 0`` (no training interaction) to zero, in place.

    Their exact ALS solution: with no observed term the row's system is
    ``(α0 G + λ I) x = 0``, so ``x = 0`` (``λ > 0``).  The official code never solves those
    rows and leaves them at their random initial values, which then add noise to the Gramian
    of every other row's solve and give the row random scores (docs/deviations.md#exadmm-cold-items).
    """
    cold = np.flatnonzero(np.asarray(degree) == 0)
    if cold.size:
        factors.index_fill_(0, torch.as_tensor(cold, device=factors.device), 0.0)
    return factors


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
    solver:
        ``"cholesky"`` (exact row solves, :func:`solve_rows`; the paper's and the official
        code's iALS) or ``"cg"`` (``cg_steps`` warm-started conjugate-gradient iterations per
        row and epoch, :func:`cg_rows`; approximate — an option of ours).  Which is faster,
        measured on gowalla (29,858 × 40,981, 810k entries; one thread, process CPU seconds
        per epoch with setup, 2 epochs, 2026-11-25):

        ======================  =======  ========
        solver                  d = 64   d = 128
        ======================  =======  ========
        ours, ``cholesky``       0.60     1.32
        ours, ``cg`` (3 steps)   1.17     2.39
        ``implicit`` exact       1.31     4.19
        ``implicit`` CG          0.30     0.50
        ======================  =======  ========

        In this code the exact solve wins (1.8–1.9×): it is a few large batched BLAS/LAPACK
        calls per row length (``bmm``, Cholesky, triangular solves), whereas every CG step
        runs two batched matrix–vector products over each group's gathered ``[b, L, d]``
        history, which are memory-bound.  In row-at-a-time compiled code (``implicit``) CG
        wins by 4–8×, since its per-row work is ``O(L d)`` per step against the exact solve's
        ``O(min(L, d)² max(L, d))``, and the gap grows with d.  ``implicit``'s CG is
        2–2.6× faster than our exact solve; at one thread our exact epoch is bounded below by
        its BLAS/LAPACK kernels alone (~0.45 s at d 64, docs/performance.md#ials-exact-epoch).
    cg_steps:
        CG iterations per row and epoch when ``solver="cg"``.
    """

    def __init__(self, dim: int = 8, alpha0: float = 0.1, l2: float = 0.002, l2_exp: float = 1.0,
                 stdev: float = 0.1, epochs: int = 10, seed: int = 0, device: str = "cpu",
                 dtype: torch.dtype = torch.float32, log_losses: bool = True, solver: str = "cholesky",
                 cg_steps: int = 3) -> None:
        if solver not in ("cholesky", "cg"):
            raise ValueError(f"iALS solver must be 'cholesky' or 'cg', got {solver!r}")
        self.solver, self.cg_steps = solver, int(cg_steps)
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
        self.V = zero_cold_rows(_init_factors(self.n_items, self.dim, self.stdev, gen, self.dtype, self.device),
                                np.bincount(by_user.indices, minlength=self.n_items))
        self.history = []
        for epoch in range(1, self.epochs + 1):
            started = time.perf_counter()
            gram_v = self.V.T @ self.V
            self._solve(self.V, user_groups, self.alpha0 * gram_v, lam_u, self.U)
            ua = self.U[self._active]
            gram_u = ua.T @ ua  # only training users enter the item step
            # item rows index users: solve against the full U (held-out rows never appear)
            self._solve(self.U, item_groups, self.alpha0 * gram_u, lam_i, self.V)
            seconds = time.perf_counter() - started
            check_finite("iALS user factors", self.U, f"epoch {epoch}")
            check_finite("iALS item factors", self.V, f"epoch {epoch}")
            entry = {"epoch": epoch, "seconds": seconds}
            if self.log_losses:
                entry.update(self.loss_terms(by_user, lam_u, lam_i))
            self.history.append(entry)
        return self

    def _solve(self, other, groups, constant, lam, out) -> torch.Tensor:
        if self.solver == "cg":
            return cg_rows(other, groups, constant, lam, out, steps=self.cg_steps)
        return solve_rows(other, groups, constant, lam, out)

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
