"""SGDA: per-dimension L2 weights adapted by SGD on validation data (Rendle, WSDM 2012).

Rendle, "Learning Recommender Systems with Adaptive Regularization", WSDM 2012, Algorithm 1
(a λOpt baseline: Chen et al., KDD 2019, slide 19 "SGDA: per-dimension λ with an SGD MF update").

The model is MF-BPR (:mod:`recrepro.models.mf_bpr`) trained with plain SGD; the regulariser
has one weight per latent dimension for the user factors, ``λ^P ∈ R^d``, and one for the item
factors, ``λ^Q ∈ R^d`` (Rendle's ``λ_{P,f}``, ``λ_{Q,f}``; no biases here).  Each step:

1. **Θ step** (Rendle eq. 7): ``Θ_{t+1} = Θ_t − α B (∂l̃_S/∂Θ + ∂Ω_S(λ)/∂Θ)`` on a training batch
   ``S`` of ``B`` cases (α per case, as Rendle's per-case SGD: the batch-mean gradient times
   ``B``; the norm clip acts on the batch-mean gradient like the other MF runs), with ``Ω_S = Σ_(u,i,j)∈S [λ^P·P_u² + λ^Q·Q_i² + λ^Q·Q_j²] / B``.
2. **λ step** (Rendle eq. 8–10): the next SGD update written as a function of λ,
   ``Θ̄(λ) = Θ_t − α B (g + ∂Ω_S(λ)/∂Θ_t)`` with ``g = ∂l̃_S/∂Θ_t``; the validation BPR loss
   of a validation batch evaluated at ``Θ̄(λ)`` is differentiated w.r.t. λ, and
   ``λ ← max(0, λ − α_λ ∂L_val/∂λ)``.

Rendle alternates single training and validation cases; we use mini-batches of the same size
as the other MF runs (vectorised; docs/deviations.md#lambdaopt-baselines).  The λ step is
done before the Θ step on the same batch (as in :class:`~recrepro.papers.lambdaopt.mf_lambdaopt.MFLambdaOpt`,
whose machinery this class reuses with an SGD simulation instead of Adam's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from recrepro.papers.lambdaopt.mf_lambdaopt import LambdaOptConfig, MFLambdaOpt

__all__ = ["SGDAConfig", "SGDA"]


@dataclass
class SGDAConfig(LambdaOptConfig):
    """MF-BPR with SGD (``sgd_lr`` per case) and per-dimension user / item λ learned by SGD (``lambda_lr``)."""

    granularity: str = "d"
    sgd_lr: float = 0.05          # per training case (Rendle's α; MyMediaLite BPRMF's default learn_rate)
    lambda_lr: float = 1.0e-2

    @property
    def batch_lr(self) -> float:
        """The step on the batch-mean loss equal to ``sgd_lr`` per case: ``α · B``."""
        return self.sgd_lr * self.batch_size


class SGDA(MFLambdaOpt):
    """SGDA (Rendle 2012) behind the shared :class:`~recrepro.models.base.Recommender` base.

    Notes
    -----
    ``lambda_clip`` (norm clip of the hypergradient, as λOpt's) applies when > 0; the
    switches ``assumed_grad`` / ``sim_penalty`` / ``assumed_batch`` keep their λOpt meaning
    (defaults: the paper's form of the simulated step).
    """

    name = "sgda"

    def __init__(self, config: SGDAConfig | Mapping[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(SGDAConfig.coerce(config), seed)

    def init_params(self, n_users: int, n_items: int) -> None:
        super().init_params(n_users, n_items)
        self.optimizer = torch.optim.SGD([self.P, self.Q], lr=self.config.batch_lr)

    def init_lambda(self, n_users: int, n_items: int) -> None:
        """``λ^P``, ``λ^Q``: one ``[1, d]`` vector each (Rendle's per-dimension weights)."""
        c, d, dev = self.config, self.config.dim, self.device
        self.lam_user = torch.full((1, d), float(c.lambda_init), device=dev, requires_grad=True)
        self.lam_item = torch.full((1, d), float(c.lambda_init), device=dev, requires_grad=True)
        self.lambda_params = [self.lam_user, self.lam_item]
        self.lambda_optimizer = torch.optim.SGD(self.lambda_params, lr=c.lambda_lr)
        self._steps = 0

    def checkpoint_state(self) -> dict:
        """λOpt's state (Θ, SGD's and Λ's optimisers, the validation stream, the trajectory) plus
        the step count that skips the first λ step."""
        return {**MFLambdaOpt.checkpoint_state(self), "steps": self._steps}

    def load_checkpoint_state(self, state: dict) -> None:
        MFLambdaOpt.load_checkpoint_state(self, state)
        self._steps = int(state["steps"])

    def lambda_step(self, batch, val_batch) -> float:
        """Rendle's λ update; skipped at the very first step (as λOpt's, for a like-for-like schedule)."""
        self._steps += 1
        if self._steps == 1:
            return float("nan")
        return self.descend_lambda(self.validation_loss(batch, val_batch))

    def simulate(self, batch, grads, user_rows: torch.Tensor | None = None,
                 item_rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``Θ̄(λ) = Θ_t − α B (g + ∂Ω_S(λ)/∂Θ_t)`` on the requested rows (Rendle eq. 8)."""
        c, u, coef = self.config, batch[0], grads[2]
        out = []
        for theta, g, lam, rows, idx in self.simulated_tables(batch, grads, user_rows, item_rows):
            th = theta.detach()[rows]
            g = g[rows] if coef is None else g[rows] * coef        # the clipped rows
            if c.sim_penalty == "full_table":
                scale = torch.full((rows.numel(), 1), 2.0, device=self.device)
            else:
                counts = sum(torch.bincount(x, minlength=theta.shape[0]) for x in idx).to(th.dtype)
                scale = (2.0 * counts[rows] / u.numel()).unsqueeze(1)
            out.append(th.add(g + scale * self._rows(lam, rows) * th, alpha=-c.batch_lr))   # torch.optim.SGD's op
        return out[0], out[1]
