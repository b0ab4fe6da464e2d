"""exADMM: iALS with an exposure-fairness regulariser, optimised by ADMM (Togashi et al., WWW 2024).

Problem (paper §3; official ``include/frecsys/exadmm.hpp``)::

    min_{U,V,s}  L_iALS(U, V) + Λ ‖V s‖²   s.t.  s = ū := Uᵀ1 / n

with the scaled augmented Lagrangian ``L_iALS + Λ‖Vs‖² + ρ‖ū − s + w‖²`` (w: scaled dual).
``Λ‖Vū‖² = Λ Σ_i (mean_u u_uᵀv_i)²`` penalises the squared mean exposure score of every
item.  One epoch, in the official order V → U → s → w:

V-step (exact)
    ``v_i = (α0 G_U + Λ s sᵀ + λ_i I + U_{U_i}ᵀU_{U_i})⁻¹ U_{U_i}ᵀ 1`` (uses ``s``, not ū).
U-step (one linearised proximal-gradient step)
    ``Û_u = u_u − η (H_u u_u − b_u) + (ηρ/n)(s − w)`` with ``H_u = α0 G_V + λ_u I +
    V_{I_u}ᵀV_{I_u}``, ``b_u = V_{I_u}ᵀ1`` (half the iALS gradient; computed as
    ``α0 U G_V + λ⊙U + P V − B`` with the sparse residual matrix ``P``, O(|R|d + nd²)),
    then the global prox ``U = (I + (ηρ/n²) 11ᵀ)⁻¹ Û`` via Sherman–Morrison:
    ``U = Û − (ηρ/n)/(1 + ηρ/n) · 1 mean(Û)ᵀ`` — O(nd), no per-user d×d solve.
s-step (exact)
    ``s = ρ (Λ G_V + ρ I)⁻¹ (ū + w)``.
w-step
    ``w ← w + ū − s``.

Strength scaling (switch ``strength_scaling``, docs/deviations.md#exadmm-strength-scaling):
the official code uses ``Λ = exposure_reg · n²`` and ``ρ = admm_penalty · n²`` with n the
number of users of the phase (training users while training, held-out users at fold-in);
``"n2"`` reproduces that (the units of every published hyperparameter), ``"none"`` uses
the values as given.

Step size (switch ``u_step_size``, docs/deviations.md#exadmm-u-step-size): the linearised
U-step is a gradient step on a quadratic whose curvature for user u is ``L_u = λ_max(H_u)``;
it is stable only while ``η L_u < 2``, and the convergence argument of the linearised
(proximal) ADMM asks ``η L_u ≤ 1``.  ``L_u`` grows with ``‖V‖``, which the official code does
not control, so with one fixed η the iteration diverges for heavy users whenever ``V`` is
large — at fold-in, ``pred_iterations`` steps with V fixed then blow those users up along the
popular direction (the seed-dependent collapse of issue 23).  ``"fixed"`` (official) uses η
for every user; ``"lipschitz"`` uses ``η_u = min(η, 1/L̂_u)`` with the O(|R|) upper bound
``L̂_u = α0 λ_max(G_V) + λ_u + Σ_{i∈I_u} ‖v_i‖² ≥ ‖H_u‖₂`` (:func:`u_step_curvature_bound`),
``"lipschitz_exact"`` the exact ``L_u = ‖H_u‖₂`` (:func:`u_step_curvature`, batched ``d × d``
eigenvalues), and both the global prox generalised to per-user steps (:func:`prox_mean_penalty`).

Items without a training interaction start (and stay) at 0, their exact V-step solution, as in
:class:`~recrepro.models.ials.IALS` (docs/deviations.md#exadmm-cold-items).

Fold-in (:meth:`ExADMM.fold_in`): held-out users start at U = 0, s = 0, w = 0 and run
``pred_iterations`` rounds of U-, s- and w-steps with V fixed, so the fairness term also
acts on the held-out population.

Finiteness: the hyperparameters and the input matrix are checked before the first step,
and every step's operands before its solve (:func:`_check_operands`), so a NaN or inf
stops with :class:`~recrepro.records.NonFiniteError` naming the epoch, the step (V, U, s,
w) and the quantity, instead of surfacing as a ``LinAlgError`` from the solver.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.models.ials import (
    RowGroups,
    _init_factors,
    build_row_groups,
    gather_history,
    map_groups,
    frequency_l2,
    observed_predictions,
    scatter_rows,
    solve_rows,
    zero_cold_rows,
)
from recrepro.models.base import TorchFactorModel
from recrepro.records import check_finite

__all__ = ["ExADMM", "observed_hessian_product", "prox_mean_penalty", "prox_sherman_morrison", "u_step",
           "u_step_curvature", "u_step_curvature_bound", "u_step_sizes", "s_step"]


def _check_operands(step: str, where: str, **operands: Any) -> None:
    """Stop before a step whose operands hold NaN/inf (the message names step, quantity, where).

    O(size) per operand, next to the step's O(|R| d + n d²) solve.
    """
    for quantity, value in operands.items():
        check_finite(f"exADMM {step}-step operand {quantity}", value, where)


def _check_inputs(phase: str, matrix: sp.spmatrix, **hyper: float) -> None:
    """Finite hyperparameters and matrix values before ``phase`` starts."""
    for name, value in hyper.items():
        check_finite(f"exADMM hyperparameter {name}", value, phase)
    check_finite("exADMM input matrix values", matrix.data, phase)


def prox_sherman_morrison(u_hat: torch.Tensor, eta: float, rho: float) -> torch.Tensor:
    """``(I + (ηρ/n²) 11ᵀ)⁻¹ Û`` in O(nd) (Sherman–Morrison; official ``Prox``)."""
    n = u_hat.shape[0]
    c = (rho / n) / (rho / n + 1.0 / eta) if rho > 0 else 0.0
    return u_hat - c * u_hat.mean(dim=0, keepdim=True)


def prox_mean_penalty(u_tilde: torch.Tensor, step: torch.Tensor, rho: float, s: torch.Tensor,
                      w: torch.Tensor) -> torch.Tensor:
    """Global prox of the U-step with a step size per user, in O(nd).

    Minimises ``Σ_u ‖u_u − ũ_u‖² / (2η_u) + (ρ/2) ‖ū − s + w‖²`` over U (``ū = Uᵀ1/n``),
    the linearised U-subproblem of the scaled augmented Lagrangian with ``Ũ = U − η⊙∇``.
    Its optimality condition ``u_u = ũ_u − (ρ/n) η_u (ū − s + w)`` averaged over users gives
    ``ū = (mean(Ũ) + κ (s − w)) / (1 + κ)`` with ``κ = ρ Σ_u η_u / n²``; with every
    ``η_u = η`` this is :func:`prox_sherman_morrison` applied to ``Ũ + (ηρ/n)(s − w)``.

    Parameters
    ----------
    u_tilde:
        ``[n, d]`` users after the gradient part, ``U − η ⊙ (H U − b)``.
    step:
        ``[n]`` step sizes ``η_u``.
    rho:
        ADMM penalty ρ (after strength scaling).
    s, w:
        ``[d]`` auxiliary mean and scaled dual.
    """
    n = u_tilde.shape[0]
    if rho <= 0:
        return u_tilde
    kappa = rho * float(step.sum()) / n ** 2
    ubar = (u_tilde.mean(dim=0) + kappa * (s - w)) / (1.0 + kappa)
    return u_tilde - (rho / n) * step.view(-1, 1) * (ubar - s + w).view(1, -1)


def u_step_curvature_bound(V: torch.Tensor, by_user: sp.csr_matrix | RowGroups, lam_u: torch.Tensor,
                           gram_v: torch.Tensor, alpha0: float) -> torch.Tensor:
    """``L̂_u = α0 λ_max(G_V) + λ_u + Σ_{i∈I_u} ‖v_i‖²`` for every row of ``by_user``.

    An upper bound of the U-step's curvature ``‖H_u‖₂ = λ_max(α0 G_V + λ_u I + Σ_{i∈I_u}
    v_i v_iᵀ)`` (the trace bounds the observed part), and of ``‖·‖₂`` of the official
    variant with ``tril(Σ v_i v_iᵀ)`` (``‖tril(S)‖₂ ≤ ‖tril(S)‖_F ≤ ‖S‖_F ≤ tr S`` for PSD S).
    One ``d × d`` eigenvalue problem and a gather of squared item norms: O(|R| + d³), so the
    safeguard keeps the U-step free of per-user ``d × d`` work.
    """
    groups = by_user if isinstance(by_user, RowGroups) else build_row_groups(by_user, V.shape[1], str(V.device))
    top = float(torch.linalg.eigvalsh(gram_v.to(torch.float64))[-1])
    squared_norms = torch.cat([(V ** 2).sum(dim=1), V.new_zeros(1)])  # padding points at the zero
    observed = torch.zeros(lam_u.shape[0], dtype=V.dtype, device=V.device)
    for rows, idx in zip(groups.rows, groups.idx, strict=True):
        observed[rows] = squared_norms.index_select(0, idx.reshape(-1)).view(idx.shape).sum(dim=1)
    return alpha0 * top + lam_u + observed


def u_step_curvature(V: torch.Tensor, by_user: sp.csr_matrix | RowGroups, lam_u: torch.Tensor,
                     gram_v: torch.Tensor, alpha0: float, block: int = 1024) -> torch.Tensor:
    """``L_u = λ_max(H_u) = λ_max(α0 G_V + Σ_{i∈I_u} v_i v_iᵀ) + λ_u`` for every row of ``by_user``, exact.

    The curvature the linearised ADMM's step condition ``η_u L_u ≤ 1`` names.  Per row group, the
    users' ``d × d`` matrices ``α0 G_V + V_hᵀV_h`` in one batched product and their largest
    eigenvalues in one batched ``eigvalsh`` (float64): O(|R| d² + n d³) an epoch, the order of an
    iALS user solve.  :func:`u_step_curvature_bound`'s trace bound costs less but can exceed this
    up to ``d`` times, and steps that small kept the ADMM residuals oscillating on epinions where
    these converge (docs/deviations.md#exadmm-u-step-size).
    """
    groups = by_user if isinstance(by_user, RowGroups) else build_row_groups(by_user, V.shape[1], str(V.device))
    d = V.shape[1]
    ext = torch.cat([V, V.new_zeros(1, d)]).to(torch.float64)   # padding points at the zero row
    base = alpha0 * gram_v.to(torch.float64)
    # a row without entries (no group holds it) has H_u = α0 G_V + λ_u I
    top = torch.full((lam_u.shape[0],), float(torch.linalg.eigvalsh(base)[-1]), dtype=torch.float64, device=V.device)
    for rows, idx in zip(groups.rows, groups.idx, strict=True):
        for lo in range(0, rows.numel(), block):
            hist = gather_history(ext, idx[lo:lo + block])                 # [b, L, d]
            gram = torch.baddbmm(base.expand(hist.shape[0], d, d), hist.mT, hist)
            top[rows[lo:lo + block]] = torch.linalg.eigvalsh(gram)[:, -1]
    return top.to(V.dtype) + lam_u


def u_step_sizes(eta: float, curvature: torch.Tensor) -> torch.Tensor:
    """``η_u = min(η, 1/L̂_u)``: the given step, capped where the user's curvature needs it."""
    return torch.clamp(1.0 / curvature, max=eta)


def observed_hessian_product(U: torch.Tensor, V: torch.Tensor, by_user: sp.csr_matrix | RowGroups,
                             hessian: str = "full", workers: int | None = None) -> torch.Tensor:
    """``Σ_{i∈I_u} (M_ui u_u − v_i)`` for every row u: the observed part of ``H_u u_u − b_u``.

    ``hessian="full"``: ``M_ui = v_i v_iᵀ`` (the paper's gradient): per row group, one
    gather ``V_h`` ``[b, L, d]`` and two batched matrix-vector products
    ``V_hᵀ(V_h u_u − 1)``.  ``hessian="lower"``: ``M_ui = tril(v_i v_iᵀ)``, what the
    official ``ProjectU`` multiplies with (its ``rankUpdate`` fills only the lower triangle
    of H_u, but the product uses the whole matrix; docs/deviations.md#exadmm-u-step-hessian):
    ``(tril(v vᵀ) u)_a = v_a Σ_{b≤a} v_b u_b``.  ``by_user`` is the CSR matrix or its
    :func:`~recrepro.models.ials.build_row_groups` (built once per fit); padding points at a
    zero row and contributes nothing.  O(|R| d); groups run in parallel as in
    :func:`~recrepro.models.ials.solve_rows`.
    """
    groups = by_user if isinstance(by_user, RowGroups) else build_row_groups(by_user, U.shape[1], str(U.device))
    n, d = U.shape
    out = torch.zeros(n, d, dtype=U.dtype, device=U.device)
    if not groups.rows:
        return out
    ext = torch.cat([V, V.new_zeros(1, d)], dim=0)

    def group_product(rows: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        hist = gather_history(ext, idx)  # [b, L, d]
        u = U.index_select(0, rows).unsqueeze(-1)  # [b, d, 1]
        if hessian == "full":
            residual = torch.bmm(hist, u) - 1.0  # [b, L, 1]; padding rows of hist are zero
            return torch.bmm(hist.mT, residual).squeeze(-1)
        return (hist * torch.cumsum(hist * u.mT, dim=2)).sum(dim=1) - hist.sum(dim=1)

    parts = map_groups(group_product, groups, workers)
    return scatter_rows(out, groups, torch.cat(parts))


def u_step(U: torch.Tensor, V: torch.Tensor, by_user: sp.csr_matrix | RowGroups, lam_u: torch.Tensor, gram_v: torch.Tensor,
           alpha0: float, eta: float | torch.Tensor, rho: float, s: torch.Tensor, w: torch.Tensor,
           hessian: str = "full") -> torch.Tensor:
    """One linearised proximal-gradient U-step (gradient part, then the global prox).

    ``U`` holds only the phase's users (rows of ``by_user``, each with >= 1 entry);
    ``n = U.shape[0]``.  With ``rho = 0`` and ``hessian="full"`` this is ``U − η·∇(L_iALS/2)``.
    ``eta`` is one step size (the official code) or ``[n]`` per-user steps
    (:func:`u_step_sizes`; prox by :func:`prox_mean_penalty`).
    """
    n = U.shape[0]
    grad = alpha0 * (U @ gram_v) + lam_u.view(-1, 1) * U + observed_hessian_product(U, V, by_user, hessian)
    if isinstance(eta, torch.Tensor):
        return prox_mean_penalty(U - eta.view(-1, 1) * grad, eta, rho, s, w)
    u_hat = U - eta * grad
    if rho > 0:
        u_hat = u_hat + (eta * rho / n) * (s - w).view(1, -1)
    return prox_sherman_morrison(u_hat, eta, rho)


def s_step(ubar: torch.Tensor, w: torch.Tensor, gram_v: torch.Tensor, lam_expo: float, rho: float) -> torch.Tensor:
    """``s = ρ (Λ G_V + ρ I)⁻¹ (ū + w)`` (official ``StepAvgU``)."""
    d = gram_v.shape[0]
    a = lam_expo * gram_v + rho * torch.eye(d, dtype=gram_v.dtype, device=gram_v.device)
    return rho * torch.linalg.solve(a, (ubar + w).unsqueeze(-1)).squeeze(-1)


class ExADMM(TorchFactorModel):
    """exADMM (iALS + exposure regulariser Λ‖Vs‖², ADMM with a linearised U-step).

    Parameters
    ----------
    dim, alpha0, l2, l2_exp, stdev, epochs, seed, device, dtype:
        As :class:`recrepro.models.ials.IALS`.
    exposure_reg:
        ``exposure_reg`` (Λ before scaling).
    admm_penalty:
        ``admm_penalty`` (ρ before scaling).
    learning_rate:
        Step size η of the U-step.
    pred_iterations:
        U/s/w rounds when folding in held-out users.
    strength_scaling:
        ``"n2"`` (official: Λ, ρ multiplied by n²) or ``"none"``.
    u_step_hessian:
        ``"full"`` (the paper's gradient) or ``"lower"`` (the official code's product with
        a lower-triangle-only ``Σ v vᵀ``); see :func:`observed_hessian_product`.
    u_step_size:
        ``"lipschitz"`` (default: per-user ``η_u = min(η, 1/L̂_u)`` with the trace bound
        ``L̂_u ≥ L_u``, the step the linearised ADMM's convergence needs, cheaply),
        ``"lipschitz_exact"`` (the same with the exact ``L_u``: larger steps that converge faster
        and a batched ``d × d`` eigenvalue problem an epoch) or ``"fixed"``
        (the official code: η for every user, which diverges at fold-in whenever ``η L_u > 2`` for
        some user); see the module docstring.
    """

    def __init__(self, dim: int = 8, alpha0: float = 0.1, l2: float = 0.002, l2_exp: float = 1.0,
                 exposure_reg: float = 1e-3, admm_penalty: float = 0.01, learning_rate: float = 0.01,
                 pred_iterations: int = 50, stdev: float = 0.1, epochs: int = 10, seed: int = 0,
                 strength_scaling: str = "n2", u_step_hessian: str = "full", u_step_size: str = "lipschitz",
                 device: str = "cpu", dtype: torch.dtype = torch.float32, log_losses: bool = True) -> None:
        if strength_scaling not in ("n2", "none"):
            raise ValueError(f"strength_scaling must be 'n2' or 'none', got {strength_scaling!r}")
        if u_step_hessian not in ("full", "lower"):
            raise ValueError(f"u_step_hessian must be 'full' or 'lower', got {u_step_hessian!r}")
        if u_step_size not in ("lipschitz", "lipschitz_exact", "fixed"):
            raise ValueError(f"u_step_size must be 'lipschitz', 'lipschitz_exact' or 'fixed', got {u_step_size!r}")
        self.u_step_hessian, self.u_step_size = u_step_hessian, u_step_size
        self.dim, self.alpha0, self.l2, self.l2_exp = int(dim), float(alpha0), float(l2), float(l2_exp)
        self.exposure_reg, self.admm_penalty = float(exposure_reg), float(admm_penalty)
        self.learning_rate, self.pred_iterations = float(learning_rate), int(pred_iterations)
        self.stdev, self.epochs, self.seed = float(stdev), int(epochs), int(seed)
        self.strength_scaling, self.device, self.dtype, self.log_losses = strength_scaling, device, dtype, log_losses
        self.U: torch.Tensor | None = None
        self.V: torch.Tensor | None = None
        self.history: list[dict[str, float]] = []
        self.fold_in_history: list[dict[str, float]] = []

    def strengths(self, n: int) -> tuple[float, float]:
        """``(Λ, ρ)`` for a phase with ``n`` users."""
        scale = float(n) ** 2 if self.strength_scaling == "n2" else 1.0
        return self.exposure_reg * scale, self.admm_penalty * scale

    def _steps(self, V: torch.Tensor, groups: RowGroups, lam_u: torch.Tensor,
               gram_v: torch.Tensor) -> tuple[float | torch.Tensor, float]:
        """The U-step's step size(s) and the largest ``η_u L̂_u`` (logged; > 1 means unsafe).

        ``lipschitz`` caps each user's step by the trace bound (:func:`u_step_curvature_bound`);
        ``lipschitz_exact`` with the paper's gradient (``u_step_hessian: full``) by the exact
        curvature (:func:`u_step_curvature`; with the official ``tril`` product, whose norm only the
        trace bound covers, by the bound); ``fixed`` logs the bound and steps η for every user."""
        exact = self.u_step_size == "lipschitz_exact" and self.u_step_hessian == "full"
        curvature = (u_step_curvature if exact else u_step_curvature_bound)(V, groups, lam_u, gram_v, self.alpha0)
        worst = self.learning_rate * float(curvature.max())
        if self.u_step_size == "fixed":
            return self.learning_rate, worst
        return u_step_sizes(self.learning_rate, curvature), min(worst, 1.0)

    def _t(self, a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=self.dtype, device=self.device)

    def _hyperparameters(self) -> dict[str, float]:
        return {"alpha0": self.alpha0, "l2": self.l2, "l2_exp": self.l2_exp, "exposure_reg": self.exposure_reg,
                "admm_penalty": self.admm_penalty, "learning_rate": self.learning_rate, "stdev": self.stdev}

    def fit(self, train: sp.csr_matrix, **kwargs: Any) -> ExADMM:
        """Fit on a binary ``[n_users, n_items]`` CSR; rows without entries are not training users."""
        full = self._as_train_matrix(train)
        _check_inputs("fit (before epoch 1)", full, **self._hyperparameters())
        full.data[:] = 1.0
        self.n_users, self.n_items = full.shape
        active = np.flatnonzero(np.diff(full.indptr) > 0)
        by_user = full[active]  # the phase's users only
        n = active.size
        lam_expo, rho = self.strengths(n)
        deg_u = np.diff(by_user.indptr)
        deg_i = np.bincount(by_user.indices, minlength=self.n_items)
        lam_u = self._t(frequency_l2(deg_u, self.l2, self.alpha0, self.n_items, self.l2_exp))
        lam_i = self._t(frequency_l2(deg_i, self.l2, self.alpha0, n, self.l2_exp))
        item_groups = build_row_groups(by_user.T.tocsr(), self.dim, self.device)
        user_groups = build_row_groups(by_user, self.dim, self.device)
        gen = torch.Generator().manual_seed(self.seed)
        U = _init_factors(n, self.dim, self.stdev, gen, self.dtype, self.device)
        V = zero_cold_rows(_init_factors(self.n_items, self.dim, self.stdev, gen, self.dtype, self.device), deg_i)
        s = U.mean(dim=0)
        w = torch.zeros_like(s)
        self.history = []
        for epoch in range(1, self.epochs + 1):
            started = time.perf_counter()
            where = f"epoch {epoch}"
            V_prev, U_prev, s_prev, w_prev = V.clone(), U.clone(), s.clone(), w.clone()
            constant = self.alpha0 * (U.T @ U) + lam_expo * torch.outer(s, s)
            _check_operands("V", where, **{"user factors U": U, "s": s, "α0·UᵀU + Λ·ssᵀ": constant,
                                            "item L2 weights": lam_i})
            solve_rows(U, item_groups, constant, lam_i, V)
            gram_v = V.T @ V
            _check_operands("U", where, **{"item factors V": V, "VᵀV": gram_v, "user L2 weights": lam_u,
                                            "s": s, "w": w})
            step, step_curvature = self._steps(V, user_groups, lam_u, gram_v)
            U = u_step(U, V, user_groups, lam_u, gram_v, self.alpha0, step, rho, s, w, self.u_step_hessian)
            ubar = U.mean(dim=0)
            _check_operands("s", where, **{"user factors U": U, "mean user factor ū": ubar, "w": w})
            s = s_step(ubar, w, gram_v, lam_expo, rho)
            _check_operands("w", where, **{"s": s})
            w = w + ubar - s
            seconds = time.perf_counter() - started
            for name, value in (("user factors", U), ("item factors", V), ("s", s), ("w", w)):
                check_finite(f"exADMM {name}", value, f"epoch {epoch}")
            entry = {"epoch": epoch, "seconds": seconds,
                     "residual_V": float(torch.linalg.norm(V - V_prev)),
                     "residual_U": float(torch.linalg.norm(U - U_prev)),
                     "residual_s": float(torch.linalg.norm(s - s_prev)),
                     "residual_w": float(torch.linalg.norm(w - w_prev)),
                     "primal_residual": float(torch.linalg.norm(ubar - s)),
                     "max_step_curvature": step_curvature}
            if self.log_losses:
                entry.update(self._loss_terms(by_user, U, V, lam_u, lam_i, deg_i, lam_expo, rho, s, w))
            self.history.append(entry)
        self.U = torch.zeros(self.n_users, self.dim, dtype=self.dtype, device=self.device)
        self.U[torch.as_tensor(active, device=self.device)] = U
        self.V, self.s, self.w = V, s, w
        return self

    def _loss_terms(self, by_user, U, V, lam_u, lam_i, deg_i, lam_expo, rho, s, w) -> dict[str, float]:
        pred = observed_predictions(by_user, U, V)
        observed = float(((pred - 1.0) ** 2).sum())
        unobserved = self.alpha0 * float(((U.T @ U) * (V.T @ V)).sum())
        has = self._t((deg_i > 0).astype(np.float32))
        reg = float((lam_u * (U ** 2).sum(1)).sum() + (lam_i * has * (V ** 2).sum(1)).sum())
        ubar = U.mean(dim=0)
        expo = lam_expo * float(((V @ ubar) ** 2).sum())
        augmented = rho * float(((ubar - s + w) ** 2).sum())
        return {"loss_observed": observed, "loss_unobserved": unobserved, "loss_reg": reg, "loss_expo": expo,
                "loss": observed + unobserved + reg + expo, "augmented_penalty": augmented}

    def fold_in(self, history: sp.csr_matrix) -> torch.Tensor:
        """Fold in the users with entries in ``history`` (``[n_rows, n_items]``), V fixed.

        Runs ``pred_iterations`` rounds of U-, s- and w-steps over those users (n = their
        number, which sets Λ and ρ).  Returns ``[n_rows, d]`` (zeros for rows without entries).
        """
        self._check_fitted()
        hist = self._as_train_matrix(history)
        _check_inputs("fold-in (before iteration 1)", hist, **self._hyperparameters())
        check_finite("exADMM item factors V", self.V, "fold-in (before iteration 1)")
        hist.data[:] = 1.0
        active = np.flatnonzero(np.diff(hist.indptr) > 0)
        sub = hist[active]
        n = active.size
        lam_expo, rho = self.strengths(n)
        lam_u = self._t(frequency_l2(np.diff(sub.indptr), self.l2, self.alpha0, self.n_items, self.l2_exp))
        gram_v = self.V.T @ self.V
        user_groups = build_row_groups(sub, self.dim, self.device)
        U = torch.zeros(n, self.dim, dtype=self.dtype, device=self.device)
        s = torch.zeros(self.dim, dtype=self.dtype, device=self.device)
        w = torch.zeros_like(s)
        self.fold_in_history = []
        # V is fixed here, so the step sizes are too (the unsafe case of the official code)
        step, step_curvature = self._steps(self.V, user_groups, lam_u, gram_v)
        for it in range(1, self.pred_iterations + 1):
            U_prev = U
            where = f"fold-in iteration {it}"
            _check_operands("U", where, **{"user factors U": U, "s": s, "w": w})
            U = u_step(U, self.V, user_groups, lam_u, gram_v, self.alpha0, step, rho, s, w, self.u_step_hessian)
            ubar = U.mean(dim=0)
            _check_operands("s", where, **{"user factors U": U, "mean user factor ū": ubar, "w": w})
            s = s_step(ubar, w, gram_v, lam_expo, rho)
            _check_operands("w", where, **{"s": s})
            w = w + ubar - s
            check_finite("exADMM fold-in user factors", U, f"fold-in iteration {it}")
            self.fold_in_history.append({"iteration": it, "residual_U": float(torch.linalg.norm(U - U_prev)),
                                         "primal_residual": float(torch.linalg.norm(ubar - s)),
                                         "max_step_curvature": step_curvature})
        out = torch.zeros(hist.shape[0], self.dim, dtype=self.dtype, device=self.device)
        out[torch.as_tensor(active, device=self.device)] = U
        return out

