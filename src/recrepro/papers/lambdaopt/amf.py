"""AMF: adversarially trained MF-BPR (APR; He, He, Du & Chua, SIGIR 2018).

A λOpt baseline (Chen et al., KDD 2019, slide 19).  APR (He et al. 2018, eq. 5–9) trains
MF-BPR on the BPR loss plus the BPR loss under a worst-case perturbation of the embeddings::

    L_APR(Θ) = l̃(Θ) + λ_adv · l̃(Θ + Δ_adv),
    Δ_adv    = ε · Γ / ‖Γ‖,   Γ = ∂l̃(Θ + Δ)/∂Δ at Δ = 0             (eq. 9, fast gradient)

with the normalisation per embedding row (the official ``hexiangnan/adversarial_personalized_ranking``
normalises the gradient of each looked-up row).  Δ_adv is a constant in the Θ step.  APR starts
the adversarial term from a BPR-trained MF ("pre-training", sect. 4): here the first
``adv_start_fraction · epochs`` epochs are plain MF-BPR (with the global ``lam``), the rest
APR; under a stopping rule (:mod:`recrepro.papers.lambdaopt.stopping`) the pre-training ends
earlier when its validation score plateaus, and the rule then selects within the APR phase.  The rest (N(0, 1) init, Adam, grad-norm clip, one uniform negative per positive) is the
MF-BPR of :mod:`recrepro.models.mf_bpr`, so AMF differs from MF-λFix only by the adversarial term.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from recrepro.models.mf_bpr import BPRConfig, MFBPR, TripleSampler, bpr_loss

__all__ = ["AMFConfig", "AMF", "adversarial_rows"]


@dataclass
class AMFConfig(BPRConfig):
    """MF-BPR settings plus APR's ``adv_eps`` (ε), ``adv_reg`` (λ_adv) and the pre-training share."""

    adv_eps: float = 0.5
    adv_reg: float = 1.0
    adv_start_fraction: float = 0.5


def adversarial_rows(grad_rows: torch.Tensor, inverse: torch.Tensor, n_rows: int, eps: float) -> torch.Tensor:
    """``ε Γ_r / ‖Γ_r‖`` per unique row ``r`` (Γ_r: sum of the gradients of the row's occurrences).

    ``grad_rows`` is ``[occurrences, d]``, ``inverse`` maps each occurrence to its unique row.
    Rows with a zero gradient get a zero perturbation.
    """
    gamma = torch.zeros(n_rows, grad_rows.shape[1], dtype=grad_rows.dtype, device=grad_rows.device)
    gamma.index_add_(0, inverse, grad_rows)
    norm = gamma.norm(dim=1, keepdim=True)
    return eps * gamma / torch.where(norm > 0, norm, torch.ones_like(norm))


class AMF(MFBPR):
    """Adversarial MF (APR) behind the shared :class:`~recrepro.models.base.Recommender` base."""

    name = "amf"

    def __init__(self, config: AMFConfig | Mapping[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(AMFConfig.coerce(config), seed)

    def perturbation(self, u: torch.Tensor, i: torch.Tensor, j: torch.Tensor):
        """Δ_adv on the batch's rows (eq. 9), as per-occurrence tensors ``(Δ_u, Δ_i, Δ_j)``."""
        pu = self.P.detach()[u].requires_grad_()
        qi = self.Q.detach()[i].requires_grad_()
        qj = self.Q.detach()[j].requires_grad_()
        logit = (pu * qi).sum(1) - (pu * qj).sum(1)
        torch.nn.functional.softplus(-logit).mean().backward()
        uu, uinv = torch.unique(u, return_inverse=True)
        ii, iinv = torch.unique(torch.cat([i, j]), return_inverse=True)
        du = adversarial_rows(pu.grad, uinv, uu.numel(), self.config.adv_eps)
        dq = adversarial_rows(torch.cat([qi.grad, qj.grad]), iinv, ii.numel(), self.config.adv_eps)
        n = i.numel()
        return du[uinv], dq[iinv[:n]], dq[iinv[n:]]

    def real_step(self, batch) -> float:
        if not self._adversarial:
            return super().real_step(batch)
        u, i, j = batch
        du, di, dj = self.perturbation(u, i, j)
        self.optimizer.zero_grad(set_to_none=True)
        loss = bpr_loss(self.P, self.Q, u, i, j)
        pu, qi, qj = self.P[u] + du, self.Q[i] + di, self.Q[j] + dj
        adv = torch.nn.functional.softplus(-((pu * qi).sum(1) - (pu * qj).sum(1))).mean()
        total = loss + self.config.adv_reg * adv + self.penalty(self.P, self.Q, u, i, j)
        total.backward()
        if self.config.clip and self.config.clip > 0:
            torch.nn.utils.clip_grad_norm_([self.P, self.Q], self.config.clip)
        self.optimizer.step()
        return float(loss.detach())

    def before_fit(self, train, validation, rng) -> None:
        self._adv_from = int(self.config.adv_start_fraction * self.config.epochs)
        self._adversarial = False

    def train_epoch(self, sampler: TripleSampler, epoch: int) -> float:
        self._adversarial = epoch >= self._adv_from
        return super().train_epoch(sampler, epoch)

    @property
    def training_phase(self) -> int:
        """0 while pre-training with BPR, 1 once APR's adversarial term is on (a stopping rule's phases)."""
        return int(getattr(self, "_adversarial", False))

    def on_plateau(self, epoch: int) -> bool:
        """A stopping rule saw the validation score plateau after 0-based ``epoch``: during the BPR
        pre-training the adversarial phase then starts with the next epoch (APR starts from a
        converged BPR model; ``adv_start_fraction`` of the cap remains the latest start).  True when
        that happened, False in the adversarial phase (the run then stops)."""
        if self._adversarial:
            return False
        self._adv_from = min(self._adv_from, epoch + 1)
        return True

    def checkpoint_state(self) -> dict:
        """MF-BPR's state plus the epoch at which the adversarial phase starts."""
        return {**MFBPR.checkpoint_state(self), "adv_from": self._adv_from}

    def load_checkpoint_state(self, state: dict) -> None:
        MFBPR.load_checkpoint_state(self, state)
        self._adv_from = int(state["adv_from"])
