"""Settings of a federated FedRAP-paper run: :class:`FederatedConfig`, the curricula of λ and μ.

The methods (``FederatedConfig.method``) are FedRAP and its ablations, FedMF and PFedRec
(:mod:`recrepro.papers.fedrap.fedrap`), and FedNCF (:mod:`recrepro.papers.fedrap.fedncf`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["CURRICULA", "L1_THRESHOLD", "METHODS", "FederatedConfig", "curriculum_weight"]

CURRICULA = ("fixed", "tanh", "sin", "square", "frac")
METHODS = ("fedrap", "fedrap_no", "fedrap_l2", "fedmf", "pfedrec", "fedncf")  # fedncf: papers.fedrap.fedncf
L1_THRESHOLD = 1e-4  # the code's sparsity definition: |C| <= 1e-4 counts as zero


def curriculum_weight(kind: str, a: int, value: float, previous: float | None = None) -> float:
    """Regularisation weight at round ``a`` (FedRAP's λ_(a,v1), μ_(a,v2)).

    ``tanh``: ``tanh(a/10)·v`` (the paper); ``sin``: ``(sin(a/10)+1)/2·v``; ``frac``:
    ``v/(a+1)``; ``square``: toggles between ``0`` and ``v`` every 5 rounds starting at 0
    for round 0 (``previous`` is the weight of round ``a-1``; engine.py ``square``);
    ``fixed``: ``v``.
    """
    if kind == "fixed":
        return float(value)
    if kind == "tanh":
        return math.tanh(a / 10.0) * value
    if kind == "sin":
        return (math.sin(a / 10.0) + 1.0) / 2.0 * value
    if kind == "frac":
        return value / (a + 1.0)
    if kind == "square":
        prev = 0.0 if previous is None else previous
        if a % 5 == 0:
            return 0.0 if prev == value else float(value)
        return prev
    raise ValueError(f"unknown curriculum {kind!r}; known: {CURRICULA}")


@dataclass
class FederatedConfig:
    """Settings of one federated run (defaults: the official FedRAP code's ``train.py``).

    ``method``: ``fedrap`` | ``fedrap_no`` (μ = 0) | ``fedrap_l2`` (L2 instead of L1 on
    C) | ``fedmf`` (global item table only, FedAvg) | ``pfedrec`` (global item table
    fine-tuned per client, the fine-tuned copy kept for the client's predictions).
    ``mode``: ``paper`` (curriculum λ_a, μ_a; Frobenius/L1 norms of the full matrices,
    normalised by n_items·d; no user bias) | ``code`` (constant λ, μ; batch-row means;
    a user bias), see docs/deviations.md#fedrap-mode.  ``code_curriculum``: code mode with
    the paper's curriculum λ_a, μ_a (an ablation isolating the curriculum; cheap, row path).
    ``paper_path``: ``lazy`` (default: paper mode's full-matrix regularisers in the exact lazy
    form, :mod:`recrepro.papers.fedrap.lazy`) | ``dense`` (the dense reference path,
    :mod:`recrepro.papers.fedrap.dense`, kept for verification; equal up to float rounding).
    ``dense_update``: how the dense path applies the full-matrix regularisers at each step:
    ``fused`` (default: one ``torch.compile``'d pass over ``D`` and ``C``, about 3× faster on
    LastFM's tables; falls back to ``eager`` where it cannot compile, saying so) | ``eager``
    (one torch operation a pass, the reference); equal up to float rounding
    (:func:`recrepro.papers.fedrap.dense.full_matrix_step`, docs/performance.md#fedrap-fused-dense).
    ``client_optimizer``: ``sgd`` (FedRAP's code: SGD with weight decay ``l2``) | ``adam``
    (FedNCF only: a fresh ``torch.optim.Adam`` per client and round, as FedNCF's own paper
    trains its clients; needs ``l2 = 0``, see :mod:`recrepro.papers.fedrap.fedncf`).
    ``dp_clip``, ``dp_noise``: Gaussian noise on each client's upload of C
    (:func:`~recrepro.models.federated.privacy.gaussian_mechanism`). With a clip, the update is
    clipped to norm ``dp_clip`` and ``dp_noise`` is the noise multiplier (std ``dp_noise·dp_clip``,
    an ε is reported); without one (``None``), ``dp_noise`` is the std itself and nothing is
    clipped (the pre-release code's noise on the uploaded C; no ε: the sensitivity is unbounded).
    ``dp_noise_block_mb``: the noise of a round's clients is seeded in fixed blocks of as many
    clients as this budget's dense chunk holds (:class:`~recrepro.models.federated.privacy.RoundNoise`);
    a fixed grouping, apart from ``memory_budget_mb``, so the memory budget never moves the noise
    (the default, the default budget, is the grouping every DP record ran with).
    """

    method: str = "fedrap"
    mode: Literal["paper", "code"] = "paper"
    dim: int = 32
    rounds: int = 100
    local_epochs: int = 10
    batch_size: int = 2048
    num_negatives: int = 4
    client_ratio: float = 1.0
    lr_network: float = 0.5
    lr_args: float = 200.0
    decay_rate: float = 0.97
    batch_decay: float = 0.95
    l2: float = 1e-4
    lam: float = 0.1
    mu: float = 0.1
    curriculum: str = "tanh"
    code_curriculum: bool = False
    l1_update: Literal["subgradient", "prox"] = "subgradient"
    paper_path: Literal["lazy", "dense"] = "lazy"
    dense_update: Literal["fused", "eager"] = "fused"
    client_optimizer: Literal["sgd", "adam"] = "sgd"
    tol: float = 1e-4
    init_std: float = 1.0
    memory_budget_mb: float = 2048.0
    scratch_dir: str | None = None
    eval_every: int = 1
    seed: int = 0
    device: str = "cpu"
    dp_clip: float | None = None
    dp_noise: float = 0.0
    dp_delta: float = 1e-5
    dp_noise_block_mb: float = 2048.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown federated method {self.method!r}; known: {METHODS}")
        if self.mode not in ("paper", "code"):
            raise ValueError(f"mode must be 'paper' or 'code', got {self.mode!r}")
        if self.curriculum not in CURRICULA:
            raise ValueError(f"unknown curriculum {self.curriculum!r}; known: {CURRICULA}")
        if self.mode == "code" and not self.code_curriculum and self.curriculum != "tanh":
            # code mode keeps λ, μ constant: the schedule would be dropped without a word
            raise ValueError(f"curriculum={self.curriculum!r} acts in mode='paper' or with code_curriculum=true only")
        if self.l1_update == "prox" and self.mode != "paper":
            raise ValueError("l1_update='prox' needs mode='paper' (the code's L1 is a batch-row mean)")
        if self.paper_path not in ("lazy", "dense"):
            raise ValueError(f"paper_path must be 'lazy' or 'dense', got {self.paper_path!r}")
        if self.dense_update not in ("fused", "eager"):
            raise ValueError(f"dense_update must be 'fused' or 'eager', got {self.dense_update!r}")
        if not 0.0 < self.client_ratio <= 1.0:
            raise ValueError("client_ratio must be in (0, 1]")
        if self.dp_noise < 0 or (self.dp_clip is not None and not self.dp_clip > 0):
            raise ValueError(f"dp_noise must be >= 0 and dp_clip None or > 0, got {self.dp_noise}, {self.dp_clip}")
        if self.client_optimizer not in ("sgd", "adam"):
            raise ValueError(f"client_optimizer must be 'sgd' or 'adam', got {self.client_optimizer!r}")
        if self.client_optimizer == "adam" and (self.method != "fedncf" or self.l2 != 0):
            # item rows a client never samples stay put only when nothing but the loss moves
            # them; Adam's L2 would move every row by ~lr per step
            raise ValueError("client_optimizer='adam' is implemented for method='fedncf' with l2=0 only")

    @property
    def uses_dp(self) -> bool:
        """Whether uploads pass the Gaussian mechanism (a clip, noise, or both)."""
        return self.dp_clip is not None or self.dp_noise > 0

    @property
    def has_private_items(self) -> bool:
        return self.method in ("fedrap", "fedrap_no", "fedrap_l2")

    @property
    def keeps_personal_copy(self) -> bool:
        return self.method == "pfedrec"

    @property
    def use_bias(self) -> bool:
        return self.mode == "code"

    def weights(self, a: int, prev: tuple[float, float] | None = None) -> tuple[float, float]:
        """(λ, μ) used in round ``a``: curriculum in paper mode (or with ``code_curriculum``),
        constants in code mode."""
        if not self.has_private_items:
            return 0.0, 0.0
        mu = 0.0 if self.method == "fedrap_no" else self.mu
        if self.mode == "code" and not self.code_curriculum:
            return float(self.lam), float(mu)
        p_lam, p_mu = prev if prev is not None else (None, None)
        return (curriculum_weight(self.curriculum, a, self.lam, p_lam),
                curriculum_weight(self.curriculum, a, mu, p_mu))
