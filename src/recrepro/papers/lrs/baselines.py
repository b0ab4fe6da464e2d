"""Baselines of the LRS figures, all vectorised over users.

``per_user_ls``     each user alone: ``Theta_i = argmin ||y_i - X_i theta||^2`` (minimum norm when ``m < d``);
``altmin``          low rank only, ``Theta_i = U w_i`` (AltMin as in Thekumparampil et al. 2021): AMHT-LRS with ``k = 0``;
``sparse_iht``      sparse only, ``Theta_i`` ``k``-sparse, per-user IHT (AMHT-LRS's local step with ``r = 0``);
``lowrank_ridge``   low rank + dense ridge, ``Theta_i = U w_i + v_i`` with ``lambda ||v_i||^2`` on the dense part.

Each returns the ``(t, d)`` matrix of estimated ``Theta_i`` (and AltMin / ridge also their ``U``).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from recrepro.papers.lrs.amht_lrs import (
    AMHTConfig, AMHTResult, amht_lrs, batched_lstsq, init_subspace, local_step, orthonormalise, u_step_lstsq,
    u_step_gradient,
)
from recrepro.records import check_finite


def per_user_ls(X: torch.Tensor, y: torch.Tensor, ridge: float = 0.0) -> torch.Tensor:
    """Per-user least squares (``np.linalg.lstsq`` semantics: minimum norm for ``m < d``; optional ridge).

    Cost ``O(t m d min(m, d))``."""
    return batched_lstsq(X, y, ridge)


def altmin(X: torch.Tensor, y: torch.Tensor, cfg: AMHTConfig, **kwargs) -> AMHTResult:
    """Low-rank-only AltMin: AMHT-LRS with ``k = 0`` (same initialisation and global step)."""
    return amht_lrs(X, y, replace(cfg, k=0), **kwargs)


def sparse_iht(X: torch.Tensor, y: torch.Tensor, cfg: AMHTConfig, iterations: int | None = None) -> torch.Tensor:
    """Sparse only: per-user IHT/HTP for a ``k``-sparse ``Theta_i`` (``cfg.sparse_step``), from 0.

    Runs ``iterations`` (default ``cfg.iterations``) x ``cfg.inner_steps`` IHT steps.
    """
    t, m, d = X.shape
    U = torch.zeros(d, 0, dtype=X.dtype, device=X.device)
    n = (iterations or cfg.iterations) * cfg.inner_steps
    _, B = local_step(X, y, U, torch.zeros(t, d, dtype=X.dtype, device=X.device), replace(cfg, inner_steps=max(n, 1)))
    return B


def lowrank_ridge(X: torch.Tensor, y: torch.Tensor, cfg: AMHTConfig, ridge: float) -> AMHTResult:
    """Low rank + dense ridge: ``min sum_i ||y_i - X_i (U w_i + v_i)||^2 + ridge ||v_i||^2``, ``U^T U = I``.

    Alternates the exact per-user solve of ``(w_i, v_i)`` (an ``(r+d)``-dimensional ridge system with no
    penalty on ``w_i``; ``O(t (m (r+d)^2 + (r+d)^3))``) with the global step of AMHT-LRS on ``y_i - X_i v_i``.
    ``AMHTResult.B`` holds the dense ``v_i``.
    """
    t, m, d = X.shape
    r = cfg.r
    U = init_subspace(X, y, cfg)
    pen = torch.cat([torch.full((r,), float(cfg.local_ridge)), torch.full((d,), float(ridge))]).to(X)

    def local(U):
        design = torch.cat([X @ U, X], dim=2)                      # (t, m, r + d)
        G = design.transpose(1, 2) @ design + torch.diag(pen)
        rhs = design.transpose(1, 2) @ y.unsqueeze(-1)
        try:
            coef = torch.linalg.solve(G, rhs).squeeze(-1)
        except torch.linalg.LinAlgError:  # X_i U rank-deficient (real data): minimum-norm solution
            coef = (torch.linalg.pinv(G) @ rhs).squeeze(-1)
        return coef[:, :r], coef[:, r:]

    W, V = local(U)
    u_step = cfg.resolved_u_step(d)
    for it in range(1, cfg.iterations + 1):
        R = y - (X @ V.unsqueeze(-1)).squeeze(-1)
        U_new = u_step_lstsq(X, R, W, cfg.chunk_users) if u_step == "lstsq" else u_step_gradient(X, R, U, W)
        check_finite("U", U_new, f"low-rank + ridge iteration {it}")
        U = orthonormalise(U_new)
        W, V = local(U)
    return AMHTResult(U, W, V, [])


def oracle_ls(X: torch.Tensor, y: torch.Tensor, U: torch.Tensor, B_true: torch.Tensor) -> torch.Tensor:
    """Noise-floor reference: least squares on ``[X_i U*, X_i|supp(b*_i)]`` knowing ``U*`` and the supports.

    Needs every user to have the same support size ``k`` (the generator's). Returns ``(t, d)``.
    """
    t, m, d = X.shape
    k = int((B_true[0] != 0).sum())
    A = X @ U
    r = A.shape[2]
    if k == 0:
        return batched_lstsq(A, y) @ U.T
    S = torch.topk((B_true != 0).to(X.dtype), k, dim=1).indices
    Xs = X.gather(2, S.unsqueeze(1).expand(t, m, k))
    coef = batched_lstsq(torch.cat([A, Xs], dim=2), y)
    return coef[:, :r] @ U.T + torch.zeros_like(B_true).scatter_(1, S, coef[:, r:])
