"""MF-λOpt: MF-BPR whose fine-grained L2 weights Λ are learned on validation data.

Chen et al., "λOpt: Learn to Regularize Recommender Models in Finer Levels", KDD 2019
(slides 14–17; official code ``yihong-chen/lambda-opt@fdaa44d``).

Granularities (shapes of the user / item Λ, as the official ``lambda_network_mf``):

=====  ====================  ====================
name   Λ^U                   Λ^I
=====  ====================  ====================
d      ``[d]`` shared with Λ^I (one vector)
du     ``[n_users, d]``      ``[d]``
di     ``[d]``               ``[n_items, d]``
dui    ``[n_users, d]``      ``[n_items, d]``
=====  ====================  ====================

Alternating optimisation (slide 15: ``min_Λ Σ_{S_V} l(Θ̄(Λ))``, ``Θ̄ = argmin_Θ Σ_{S_T} l(Θ, Λ)``
approximated greedily by one step).  At every step ``t > 0``:

1. **λ step** (Θ fixed).  On a training batch ``S`` take the unregularised gradient
   ``g = ∂l̃_S/∂Θ_t`` (norm-clipped like the real step) and form, with Λ as the variable,
   ``g̃(Λ) = g + ∂Ω_S(Λ)/∂Θ_t`` (slide 16, eq. "∂l_ST/∂Θ_t = ∂l̃/∂Θ_t + ∂Ω/∂Θ_t").
   Simulate the next Adam update ``Θ̄_{t+1} = f(Θ_t, g̃)`` with the real optimiser's
   moments ``(m, v)`` and step count::

       m' = β1 m + (1 − β1) g̃ ;   v' = β2 v + (1 − β2) g̃²
       Θ̄  = Θ_t − lr / (1 − β1^t) · m' / (√v' / √(1 − β2^t) + eps)

   (exactly ``torch.optim.Adam``'s arithmetic, so with Λ = 0 it reproduces the real step
   bit for bit).  Evaluate the BPR loss of a validation batch ``(u', i', j')`` with Θ̄,
   back-propagate to Λ (Θ_t, g, m, v are constants), clip the norm of ∂L_val/∂Λ, take an
   Adam (amsgrad) step on Λ and project onto ``Λ ≥ 0``.
2. **Θ step**: one real Adam step of the MF on ``l̃_S + Ω_S(Λ)`` (Λ fixed).

Only the rows of Θ̄ that the validation batch reads are simulated (each row of Adam's
update depends only on its own row), which makes the λ step cost ``O(B_val · d)``.

Switches (docs/deviations.md), defaults follow the paper:

``assumed_grad``  ``unregularised`` (paper: g without penalty) | ``current_lambda``
                  (official ``init_lambda()``: g already holds the batch penalty Ω_S(Λ_t)).
``sim_penalty``   ``batch`` (paper: ∂Ω_S/∂Θ, i.e. ``2·c_r/B·Λ_r ⊙ Θ_r`` with ``c_r`` the row's
                  count in the batch) | ``full_table`` (official: ``2·Λ ⊙ Θ`` on every row,
                  no 1/B).
``assumed_batch`` ``shared`` (paper: the λ step simulates the batch the real step then
                  takes) | ``separate`` (official: the simulation consumes its own batch, so
                  the real MF sees every other batch of the sampler).

Notes
-----
* ``√v'`` at ``v' = 0`` (rows never touched, with g̃ = 0) has an infinite derivative; we
  use the subgradient 0 there (the official code instead puts eps inside the root).
* The clip of ``g`` is computed on the unregularised gradient and treated as a constant
  (as in the official code); with Λ = 0 it equals the real step's clip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.models.gather import add_rows_into_zeros, gather_rows
from recrepro.models.mf_bpr import BPRConfig, MFBPR, TripleSampler, bpr_loss
from recrepro.records import check_finite

__all__ = ["LambdaOptConfig", "MFLambdaOpt", "GRANULARITIES", "simulate_adam_rows", "batch_counts",
           "bpr_loss_and_gradient", "clip_grad_norm_", "unique_rows"]

GRANULARITIES = ("d", "du", "di", "dui")


@dataclass
class LambdaOptConfig(BPRConfig):
    """MF-BPR settings plus the λ network's (defaults: official Amazon alter script)."""

    granularity: str = "dui"
    lambda_init: float = 0.0
    lambda_lr: float = 1.0e-2
    lambda_clip: float = 1.0e-3
    lambda_amsgrad: bool = True
    val_batch_size: int = 1024
    assumed_grad: str = "unregularised"
    sim_penalty: str = "batch"
    assumed_batch: str = "shared"
    lambda_fused: bool = True     # fused Adam kernel for Λ (same algorithm; one pass over the tables)
    trajectory_every: int = 1     # keep the per-row mean λ after epochs 0, k, 2k, … (long runs: the checkpoint stays small)

    def __post_init__(self) -> None:
        checks = {"granularity": GRANULARITIES, "assumed_grad": ("unregularised", "current_lambda"),
                  "sim_penalty": ("batch", "full_table"), "assumed_batch": ("shared", "separate")}
        for key, allowed in checks.items():
            if getattr(self, key) not in allowed:
                raise ValueError(f"lambdaopt: {key}={getattr(self, key)!r}; allowed: {allowed}")


def bpr_loss_and_gradient(P: torch.Tensor, Q: torch.Tensor, u: torch.Tensor, i: torch.Tensor,
                          j: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`~recrepro.models.mf_bpr.bpr_loss` and its gradients ``(loss, ∂/∂P, ∂/∂Q)`` without autograd.

    The operations autograd runs for ``torch.autograd.grad(bpr_loss(P, Q, u, i, j), [P, Q])``,
    one for one: ``MeanBackward`` (``1 / B`` per entry), ``softplus_backward``, the two ``neg`` of
    ``NegBackward`` and ``SubBackward``, ``SumBackward``'s broadcast, ``MulBackward``'s products with
    the other factor, the two gradients of the shared ``P_u`` rows summed, and
    :func:`~recrepro.models.gather.gather_rows`'s backward (rows added into a zero table in batch
    order; the ``i`` and ``j`` tables summed).  The additions that autograd orders by its graph
    (``P_u``'s two terms, the two ``Q`` tables) are of two terms, which IEEE addition gives the same
    result in either order.  Against autograd it saves the graph and, per table, the copy of the
    zero table that the out-of-place ``index_add`` of ``index_select``'s backward makes
    (tests/test_lambdaopt_model.py checks the result bit for bit).
    """
    pu, qi, qj = gather_rows(P, u), gather_rows(Q, i), gather_rows(Q, j)
    neg_logit = -((pu * qi).sum(1) - (pu * qj).sum(1))
    loss = torch.nn.functional.softplus(neg_logit).mean()
    per_triple = loss.new_ones(()).expand(u.numel()) / u.numel()
    d_logit = -torch.ops.aten.softplus_backward(per_triple, neg_logit, 1.0, 20.0)
    d_pos = d_logit.unsqueeze(1).expand_as(pu)
    d_neg = (-d_logit).unsqueeze(1).expand_as(pu)
    gP = add_rows_into_zeros(P, u, d_pos * qi + d_neg * qj)
    gQ = add_rows_into_zeros(Q, i, d_pos * pu).add_(add_rows_into_zeros(Q, j, d_neg * pu))
    return loss, gP, gQ


def unique_rows(index: torch.Tensor, n_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(index, return_inverse=True)`` for an index into ``n_rows`` rows.

    The same two tensors (rows ascending, the position of each entry's row), from a presence
    table over the ``n_rows`` rows instead of a sort of ``index``.
    """
    present = torch.zeros(n_rows, dtype=torch.bool, device=index.device).index_fill_(0, index, True)
    rows = present.nonzero().squeeze(1)
    position = torch.empty(n_rows, dtype=index.dtype, device=index.device)
    position.index_copy_(0, rows, torch.arange(rows.numel(), dtype=index.dtype, device=index.device))
    return rows, position.index_select(0, index)


def batch_counts(idx: tuple[torch.Tensor, ...], n_rows: int, rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """How often each of ``rows`` occurs in the index lists ``idx`` (together), as ``dtype``.

    ``Σ_x bincount(x)[rows]``: integer counts, so summing the lists' counts first and
    converting the selected ones after gives the same floats as converting the whole table."""
    counts = torch.bincount(idx[0], minlength=n_rows)
    for x in idx[1:]:
        counts = counts + torch.bincount(x, minlength=n_rows)
    return counts.index_select(0, rows).to(dtype)


def clip_grad_norm_(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_(params, max_norm)``, without the product by a factor of exactly 1.

    The same total norm and clip factor ``min(max_norm / (‖g‖ + 1e-6), 1)``; torch multiplies every
    gradient by it even when it is 1 (to spare a GPU a synchronisation), which leaves the gradients
    as they are (``x · 1.0 = x``) after a read and a write of every table.  On CPU, where reading the
    factor costs nothing, that pass is skipped; the Θ step's clip (100 at the paper's settings) is
    almost never active.  Returns the total norm, as torch's does.
    """
    grads = [p.grad for p in params if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads)
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    if grads and not (coef.device.type == "cpu" and float(coef) == 1.0):
        torch._foreach_mul_(grads, coef.to(grads[0].device))
    return total


def _sqrt_zero_subgradient(v: torch.Tensor) -> torch.Tensor:
    """``√v`` for ``v ≥ 0`` with the subgradient 0 at ``v = 0`` (where ``d√v/dv`` is infinite).

    The masked form ``where(v > 0, where(v > 0, v, 1).sqrt(), 0)`` is what defines the values;
    its two selects (and the two of its backward) run unvectorised in torch on CPU, 0.2–0.4 ms
    each on a λ step's ~600 × 128 rows, about a quarter of the step.
    When every entry is positive (every row the simulation reads has had a gradient: all of
    them after the first steps) both selects pass ``v`` and the incoming gradient through
    unchanged, so the plain ``v.sqrt()`` computes the same values in the forward and, through
    autograd's ``SqrtBackward`` (``grad / (2·√v)``), in the backward, bit for bit.  The masked
    form remains for tables with a zero (or a NaN, which fails ``min > 0``).
    """
    if v.device.type == "cpu" and v.numel() and bool(v.min() > 0):     # (the test syncs a GPU)
        return v.sqrt()
    positive = v > 0
    return torch.where(positive, torch.where(positive, v, torch.ones_like(v)).sqrt(), torch.zeros_like(v))


def simulate_adam_rows(theta: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                       step: int, lr: float, betas: tuple[float, float], eps: float) -> torch.Tensor:
    """One Adam update of ``theta`` with gradient ``grad``, differentiable in ``grad``.

    Same operations, in the same order, as ``torch.optim.adam._single_tensor_adam``
    (no amsgrad, no weight decay); ``step`` is the count *after* the increment.
    """
    beta1, beta2 = betas
    m = torch.lerp(exp_avg, grad, 1 - beta1)
    v = exp_avg_sq.mul(beta2).addcmul(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = lr / bias_correction1
    bias_correction2_sqrt = bias_correction2 ** 0.5
    denom = (_sqrt_zero_subgradient(v) / bias_correction2_sqrt).add(eps)
    return theta.addcdiv(m, denom, value=-step_size)


class MFLambdaOpt(MFBPR):
    """MF-BPR with Λ learned by λOpt (see the module docstring for the algorithm).

    ``fit(train, validation=...)`` needs the validation positives (CSR).  After fitting,
    ``lambda_trajectory`` holds, per epoch (every ``trajectory_every``-th), the mean over dimensions of each user's and
    each item's λ (``{"epoch", "user", "item"}``), and ``history`` the mean λ per epoch.
    """

    name = "mf_lambdaopt"
    #: its λ step descends the validation loss: a stopping rule must not score on the same interactions
    #: (recrepro.papers.lambdaopt.run.held_out_validation)
    learns_on_validation = True

    def __init__(self, config: LambdaOptConfig | Mapping[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(LambdaOptConfig.coerce(config), seed)
        self.lambda_trajectory: list[dict[str, Any]] = []
        self._cache = None

    # ------------------------------------------------------------------ Λ
    def init_lambda(self, n_users: int, n_items: int) -> None:
        c, d, dev = self.config, self.config.dim, self.device
        rows_u = n_users if c.granularity in ("du", "dui") else 1
        rows_i = n_items if c.granularity in ("di", "dui") else 1
        self.lam_user = torch.full((rows_u, d), float(c.lambda_init), device=dev, requires_grad=True)
        if c.granularity == "d":
            self.lam_item = self.lam_user
            self.lambda_params = [self.lam_user]
        else:
            self.lam_item = torch.full((rows_i, d), float(c.lambda_init), device=dev, requires_grad=True)
            self.lambda_params = [self.lam_user, self.lam_item]
        # Λ^U, Λ^I are dense tables updated every step (Adam moves rows with zero hypergradient
        # too), so the λ step's optimiser touches n·d entries; the fused kernel does that in one
        # pass instead of ~10 (docs/performance.md#lambdaopt).
        self.lambda_optimizer = torch.optim.Adam(self.lambda_params, lr=c.lambda_lr, amsgrad=c.lambda_amsgrad,
                                                 fused=bool(c.lambda_fused) or None)

    @staticmethod
    def _rows(lam: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return gather_rows(lam, idx) if lam.shape[0] > 1 else lam.expand(idx.numel(), -1)

    def penalty(self, P, Q, u, i, j, lam_user=None, lam_item=None):
        """Ω_S = Σ [Λ^U_u·P_u² + Λ^I_i·Q_i² + Λ^I_j·Q_j²] / B with Λ detached (the Θ step)."""
        lu = (self.lam_user if lam_user is None else lam_user).detach()
        li = (self.lam_item if lam_item is None else lam_item).detach()
        B = u.numel()
        return ((self._rows(lu, u) * gather_rows(P, u) ** 2).sum() + (self._rows(li, i) * gather_rows(Q, i) ** 2).sum()
                + (self._rows(li, j) * gather_rows(Q, j) ** 2).sum()) / B

    @torch.no_grad()
    def penalty_gradient(self, u: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``∂Ω_S/∂P``, ``∂Ω_S/∂Q`` (Λ fixed) without building the graph of :meth:`penalty`.

        The arithmetic autograd runs for ``penalty(P, Q, u, i, j).backward()``, operation for
        operation: ``DivBackward`` gives ``1/B``; ``SumBackward`` broadcasts it; ``MulBackward``
        multiplies by the Λ rows; ``PowBackward`` (``θ²``) multiplies by ``2·θ`` (``2·θ¹``);
        the gather's backward adds the rows into a zero table in batch order; the two item
        terms (``i``, ``j``) meet in autograd's input buffer as one sum of two tables.  The
        forward (``θ²``, products, sums: unused by the Θ step) is skipped.
        """
        lam_user, lam_item = self.lam_user.detach(), self.lam_item.detach()
        grad_per_triple = self.P.new_ones(()) / u.numel()

        def per_row(theta: torch.Tensor, lam: torch.Tensor, n_gathered: int):
            """``idx -> (1/B · Λ_idx) · (2 θ_idx)``: the rows' penalty gradients before they are added.

            The product is elementwise, so one row's value does not depend on where it is computed:
            over the whole table, then gathered (one product pass over ``n_rows`` rows and a gather
            per index list), or over the gathered rows (two gathers and three products per index
            list), whichever touches fewer rows — the same floats either way."""
            if theta.shape[0] <= n_gathered:
                full = (grad_per_triple * lam) * (2.0 * theta.detach())
                return lambda idx: gather_rows(full, idx)
            return lambda idx: (grad_per_triple * self._rows(lam, idx)) * (2.0 * gather_rows(theta.detach(), idx))

        rows_p = per_row(self.P, lam_user, u.numel())
        rows_q = per_row(self.Q, lam_item, i.numel() + j.numel())
        return (add_rows_into_zeros(self.P, u, rows_p(u)),
                add_rows_into_zeros(self.Q, i, rows_q(i)).add_(add_rows_into_zeros(self.Q, j, rows_q(j))))

    # ------------------------------------------------------------------ λ step
    def assumed_gradient(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``g`` of step 1: ∂l̃_S/∂Θ_t (plus Ω_S(Λ_t) under ``assumed_grad=current_lambda``).

        Returns ``(g_P, g_Q, c)``: the unclipped full-table gradients and the clip factor
        ``c = min(clip / (‖g‖ + 1e-6), 1)`` of ``torch.nn.utils.clip_grad_norm_`` (``None``
        without clipping).  :meth:`simulate` multiplies only the rows it needs by ``c`` (the
        same elementwise product the in-place clip does, so the result is bit for bit the
        same), which saves two full-table copies per step.
        """
        u, i, j = batch
        if self.config.assumed_grad == "current_lambda":
            P0 = self.P.detach().requires_grad_()     # shares storage with Θ_t; only read here
            Q0 = self.Q.detach().requires_grad_()
            loss = bpr_loss(P0, Q0, u, i, j) + self.penalty(P0, Q0, u, i, j)
            gP, gQ = torch.autograd.grad(loss, [P0, Q0])
        else:
            loss, gP, gQ = bpr_loss_and_gradient(self.P.detach(), self.Q.detach(), u, i, j)
        self._cache = (batch, float(loss.detach()), gP, gQ)
        coef = None
        if self.config.clip and self.config.clip > 0:
            total = torch.nn.utils.get_total_norm([gP, gQ])
            coef = torch.clamp(self.config.clip / (total + 1e-6), max=1.0)
        return gP, gQ, coef

    def real_step_reusing(self, batch) -> float:
        """The Θ step on the batch the λ step just simulated, reusing its unregularised gradient.

        ``∇(l̃_S + Ω_S(Λ)) = g + ∂Ω_S(Λ)/∂Θ`` with ``g`` from :meth:`assumed_gradient` (same Θ_t, same
        batch), then the same clip and Adam step as :meth:`real_step`: one forward/backward per
        step fewer.  Only valid under ``assumed_batch=shared`` and ``assumed_grad=unregularised``.
        """
        cached_batch, loss, gP, gQ = self._cache
        self._cache = None
        assert cached_batch is batch
        u, i, j = batch
        penalty_P, penalty_Q = self.penalty_gradient(u, i, j)
        self.optimizer.zero_grad(set_to_none=True)
        # what `P.grad = g; penalty(...).backward()` leaves in P.grad (AccumulateGrad adds the new table)
        self.P.grad, self.Q.grad = gP.add_(penalty_P), gQ.add_(penalty_Q)
        if self.config.clip and self.config.clip > 0:
            clip_grad_norm_([self.P, self.Q], self.config.clip)
        self.optimizer.step()
        return loss

    def simulated_tables(self, batch, grads, user_rows: torch.Tensor | None = None,
                         item_rows: torch.Tensor | None = None) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """What a simulation of the next step works on, for ``P`` and then ``Q``: ``(θ, g, Λ, rows, idx)``.

        ``g`` is the table's part of :meth:`assumed_gradient`'s ``grads`` (unclipped), ``rows`` the
        rows to simulate (``user_rows`` / ``item_rows``; all rows when ``None``), ``idx`` the
        batch's index lists into the table (``(u,)``; ``(i, j)``)."""
        u, i, j = batch
        if user_rows is None:
            user_rows = torch.arange(self.n_users, device=self.device)
        if item_rows is None:
            item_rows = torch.arange(self.n_items, device=self.device)
        return ((self.P, grads[0], self.lam_user, user_rows, (u,)),
                (self.Q, grads[1], self.lam_item, item_rows, (i, j)))

    def simulate(self, batch, grads, user_rows: torch.Tensor | None = None,
                 item_rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Θ̄_{t+1}(Λ) on ``user_rows`` / ``item_rows`` (all rows when ``None``), differentiable in Λ."""
        c, u, coef = self.config, batch[0], grads[2]
        out = []
        for theta, g, lam, rows, idx in self.simulated_tables(batch, grads, user_rows, item_rows):
            g = gather_rows(g, rows)
            if coef is not None and not (g.device.type == "cpu" and float(coef) == 1.0):
                g = g * coef    # the clipped rows (x · 1.0 = x: skipped on CPU, where reading c costs nothing)
            state = self.optimizer.state[theta]
            th = gather_rows(theta.detach(), rows)
            if c.sim_penalty == "full_table":
                scale = torch.full((rows.numel(), 1), 2.0, device=self.device)
            else:
                scale = (2.0 * batch_counts(idx, theta.shape[0], rows, th.dtype) / u.numel()).unsqueeze(1)
            g_tilde = g + scale * self._rows(lam, rows) * th
            step = int(state["step"]) + 1
            out.append(simulate_adam_rows(th, g_tilde, gather_rows(state["exp_avg"], rows),
                                          gather_rows(state["exp_avg_sq"], rows), step, c.lr, c.betas, c.eps))
        return out[0], out[1]

    def validation_loss(self, batch, val_batch) -> torch.Tensor:
        """L_val(Θ̄(Λ)) on one validation batch (simulating only the rows it reads)."""
        vu, vi, vj = val_batch
        urows, uinv = unique_rows(vu, self.n_users)
        irows, iinv = unique_rows(torch.cat([vi, vj]), self.n_items)
        grads = self.assumed_gradient(batch)
        P_bar, Q_bar = self.simulate(batch, grads, urows, irows)
        n = vi.numel()
        return bpr_loss(P_bar, Q_bar, uinv, iinv[:n], iinv[n:])

    def lambda_step(self, batch, val_batch) -> float:
        """Step 1: hypergradient of L_val w.r.t. Λ, clip, Adam(amsgrad), project Λ ≥ 0."""
        if not self.optimizer.state.get(self.P):      # t = 0: no moments yet (official: skip)
            return float("nan")
        return self.descend_lambda(self.validation_loss(batch, val_batch))

    def descend_lambda(self, loss: torch.Tensor) -> float:
        """One step of Λ's optimiser on ``∂loss/∂Λ`` (0 where the loss does not reach Λ), norm-clipped
        to ``lambda_clip`` (when > 0), then the projection onto ``Λ ≥ 0``.  Returns the loss."""
        grads = torch.autograd.grad(loss, self.lambda_params, allow_unused=True)
        for p, g in zip(self.lambda_params, grads):
            p.grad = torch.zeros_like(p) if g is None else g
        if self.config.lambda_clip and self.config.lambda_clip > 0:
            clip_grad_norm_(self.lambda_params, self.config.lambda_clip)
        self.lambda_optimizer.step()
        with torch.no_grad():
            for p in self.lambda_params:
                p.clamp_(min=0)
        return float(loss.detach())

    # ------------------------------------------------------------------ training
    def before_fit(self, train: sp.csr_matrix, validation: sp.csr_matrix | None, rng: np.random.Generator) -> None:
        if validation is None or validation.nnz == 0:
            raise ValueError("MF-λOpt needs validation positives (fit(train, validation=...))")
        self.init_lambda(*train.shape)
        seen = (sp.csr_matrix(train) + sp.csr_matrix(validation)).tocsr()
        self.val_sampler = TripleSampler(sp.csr_matrix(validation), seen, self.config.val_batch_size, rng,
                                         self.device)
        self.lambda_trajectory = []

    def train_epoch(self, sampler: TripleSampler, epoch: int) -> float:
        batches = sampler.epoch()
        losses, val_losses = [], []
        if self.config.assumed_batch == "shared":
            pairs = [(b, b) for b in batches]
        else:   # official: the simulation consumes a batch of its own
            pairs = [(batches[k], batches[k + 1]) for k in range(0, len(batches) - 1, 2)]
            if len(batches) % 2:
                pairs.append((None, batches[-1]))
        reuse = self.config.assumed_batch == "shared" and self.config.assumed_grad == "unregularised"
        for sim_batch, real_batch in pairs:
            self._cache = None
            if sim_batch is not None:
                val_losses.append(self.lambda_step(sim_batch, self.val_sampler.next_batch()))
            if reuse and self._cache is not None:
                losses.append(self.real_step_reusing(real_batch))
            else:
                losses.append(self.real_step(real_batch))
        for p in self.lambda_params:
            check_finite("lambda", p.detach(), f"epoch {epoch}")
        if epoch % max(1, int(self.config.trajectory_every)) == 0:
            self.record_trajectory(epoch)
        self._last_val_loss = float(np.nanmean(val_losses)) if val_losses and not np.all(np.isnan(val_losses)) \
            else float("nan")
        return float(np.mean(losses))

    def record_trajectory(self, epoch: int) -> None:
        """Append the mean over dimensions of each user's and each item's λ after ``epoch``."""
        self.lambda_trajectory.append({
            "epoch": epoch,
            "user": self._rows(self.lam_user.detach(), torch.arange(self.n_users, device=self.device))
            .mean(1).cpu().numpy(),
            "item": self._rows(self.lam_item.detach(), torch.arange(self.n_items, device=self.device))
            .mean(1).cpu().numpy(),
        })

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict[str, Any]:
        """MF-BPR's state plus Λ, its Adam(amsgrad) state, the validation stream's pending
        batches (the λ step cycles through validation passes across epochs) and the λ
        trajectory; the numpy generator the validation sampler shares with the training
        sampler is saved by :meth:`MFBPR.fit`."""
        return {**MFBPR.checkpoint_state(self), "lam_user": self.lam_user.detach(),
                "lam_item": self.lam_item.detach(), "lambda_optimizer": self.lambda_optimizer.state_dict(),
                "val_queue": list(self.val_sampler._queue), "lambda_trajectory": self.lambda_trajectory}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        MFBPR.load_checkpoint_state(self, state)
        with torch.no_grad():
            self.lam_user.copy_(state["lam_user"])
            if self.lam_item is not self.lam_user:
                self.lam_item.copy_(state["lam_item"])
        self.lambda_optimizer.load_state_dict(state["lambda_optimizer"])
        self.val_sampler._queue = [tuple(t.to(self.device) for t in batch) for batch in state["val_queue"]]
        self.lambda_trajectory = list(state["lambda_trajectory"])

    def fit(self, train, validation=None, on_epoch=None, **kwargs):
        super().fit(train, validation=validation, on_epoch=on_epoch, **kwargs)
        recorded = {int(traj["epoch"]): traj for traj in self.lambda_trajectory}
        for row in self.history:
            traj = recorded.get(int(row["epoch"]))
            row["lambda_user_mean"] = float("nan") if traj is None else float(traj["user"].mean())
            row["lambda_item_mean"] = float("nan") if traj is None else float(traj["item"].mean())
        return self
