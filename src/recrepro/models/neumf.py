"""NeuMF: neural matrix factorisation (He, Liao, Zhang, Nie, Hu & Chua, WWW 2017).

A λOpt baseline (Chen et al., KDD 2019, slide 19).  NeuMF (He et al. eq. 11–12) fuses a GMF
branch and an MLP branch with separate embeddings::

    φ^GMF = p^G_u ⊙ q^G_i
    φ^MLP = a_L(W_L … a_1(W_1 [p^M_u; q^M_i] + b_1) … + b_L)          (ReLU towers)
    ŷ_ui  = σ(hᵀ [φ^GMF; φ^MLP])

trained on the pointwise log loss (eq. 7) with ``num_negatives`` uniform negatives per
positive (the paper's 4), resampled every epoch, Adam.  Initialisation as the official code
(``hexiangnan/neural_collaborative_filtering``): embeddings N(0, 0.01²), Glorot-uniform layers,
no pre-training (the paper's "NeuMF without pre-training" row).

Scoring all items: the first MLP layer is split as ``W_1 [p; q] = W_1^U p + W_1^I q``, so its
user and item halves are computed once per user / item and only the (small) upper layers run
per (user, item) pair, in chunks bounded by ``score_chunk_pairs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from recrepro.models.base import ModelConfig, NotFittedError, Recommender
from recrepro.models.mf_bpr import sample_negatives
from recrepro.records import check_finite

__all__ = ["NeuMFConfig", "NeuMF"]


@dataclass
class NeuMFConfig(ModelConfig):
    """Hyper-parameters (defaults: predictive factors 32; the λOpt paper gives none)."""

    mf_dim: int = 32
    layers: Sequence[int] = (64, 32, 16)     # layers[0] = 2 × MLP embedding size (official convention)
    epochs: int = 10
    batch_size: int = 1024                   # positives per batch (each with num_negatives negatives)
    num_negatives: int = 4
    lr: float = 1.0e-3
    init_std: float = 0.01
    score_chunk_pairs: int = 4_000_000
    device: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)

    converters = {"layers": lambda layers: tuple(int(x) for x in layers)}


class _NeuMFNet(nn.Module):
    def __init__(self, n_users: int, n_items: int, c: NeuMFConfig) -> None:
        super().__init__()
        half = c.layers[0] // 2
        self.user_gmf, self.item_gmf = nn.Embedding(n_users, c.mf_dim), nn.Embedding(n_items, c.mf_dim)
        self.user_mlp, self.item_mlp = nn.Embedding(n_users, half), nn.Embedding(n_items, half)
        for emb in (self.user_gmf, self.item_gmf, self.user_mlp, self.item_mlp):
            nn.init.normal_(emb.weight, std=c.init_std)
        self.first = nn.Linear(2 * half, c.layers[1] if len(c.layers) > 1 else c.layers[0])
        sizes = list(c.layers[1:])
        self.tower = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.out = nn.Linear(c.mf_dim + (sizes[-1] if sizes else c.layers[0]), 1)
        for lin in (self.first, *self.tower, self.out):
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)
        self.half = half

    def first_halves(self, users: torch.Tensor | None, items: torch.Tensor | None):
        """``W_1^U p^M_u`` (+ b_1) and ``W_1^I q^M_i`` (the split first layer)."""
        w = self.first.weight
        hu = None if users is None else self.user_mlp(users) @ w[:, :self.half].T + self.first.bias
        hi = None if items is None else self.item_mlp(items) @ w[:, self.half:].T
        return hu, hi

    def head(self, gmf: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        h = torch.relu(h)
        for lin in self.tower:
            h = torch.relu(lin(h))
        return self.out(torch.cat([gmf, h], dim=-1)).squeeze(-1)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """Logits ``hᵀ[φ^GMF; φ^MLP]`` of (user, item) pairs."""
        hu, hi = self.first_halves(users, items)
        return self.head(self.user_gmf(users) * self.item_gmf(items), hu + hi)


class NeuMF(Recommender):
    """NeuMF behind the shared :class:`~recrepro.models.base.Recommender` base (no factor matrices)."""

    name = "neumf"

    def __init__(self, config: NeuMFConfig | Mapping[str, Any] | None = None, seed: int = 0) -> None:
        self.config = config = NeuMFConfig.coerce(config)
        self.seed = int(seed)
        self.device = torch.device(config.device)
        self.net: _NeuMFNet | None = None
        self.history: list[dict[str, float]] = []

    def fit(self, train: sp.csr_matrix, validation: sp.csr_matrix | None = None,
            on_epoch: Callable[[NeuMF, int], None] | None = None, *, monitor: Any | None = None,
            **kwargs: Any) -> NeuMF:
        """Train ``config.epochs`` epochs, or fewer when ``monitor`` (a stopping rule with
        ``update(model, epoch) -> bool``, as :meth:`recrepro.models.mf_bpr.MFBPR.fit` takes) stops the run."""
        c = self.config
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        train = self._as_train_matrix(train)
        self.n_users, self.n_items = train.shape
        self.net = _NeuMFNet(self.n_users, self.n_items, c).to(self.device)
        opt = torch.optim.Adam(self.net.parameters(), lr=c.lr)
        coo = train.tocoo()
        users, items = coo.row.astype(np.int64), coo.col.astype(np.int64)
        k = int(c.num_negatives)
        self.history = []
        for epoch in range(c.epochs):
            started = time.perf_counter()
            order = rng.permutation(users.size)
            pu, pi = users[order], items[order]
            neg = sample_negatives(np.repeat(pu, k), train, rng).reshape(-1, k)
            losses = []
            for s in range(0, pu.size, c.batch_size):
                bu = torch.from_numpy(pu[s:s + c.batch_size]).to(self.device)
                bi = torch.from_numpy(pi[s:s + c.batch_size]).to(self.device)
                bn = torch.from_numpy(neg[s:s + c.batch_size]).to(self.device)
                u_all = torch.cat([bu, bu.repeat_interleave(k)])
                i_all = torch.cat([bi, bn.reshape(-1)])
                y = torch.cat([torch.ones_like(bu, dtype=torch.float32),
                               torch.zeros(bn.numel(), device=self.device)])
                logits = self.net(u_all, i_all)
                loss = nn.functional.binary_cross_entropy_with_logits(logits, y)   # eq. 7, mean
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
            mean = float(np.mean(losses))
            check_finite("training loss", mean, f"epoch {epoch}")
            self.history.append({"epoch": epoch, "loss": mean, "seconds": time.perf_counter() - started})
            if on_epoch is not None:
                on_epoch(self, epoch)
            if monitor is not None and monitor.update(self, epoch):
                break
        return self

    def snapshot(self) -> dict[str, torch.Tensor]:
        """Copies of the network's parameters (a stopping rule keeps the best epoch's)."""
        return {k: v.detach().clone() for k, v in self.net.state_dict().items()}

    def restore(self, snapshot: Mapping[str, torch.Tensor]) -> None:
        """Put the parameters of :meth:`snapshot` back."""
        self.net.load_state_dict(dict(snapshot))

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        if self.net is None:
            raise NotFittedError("NeuMF is not fitted; call fit(train) first")
        users = torch.as_tensor(np.asarray(user_ids, dtype=np.int64), device=self.device)
        out = np.empty((users.numel(), self.n_items), dtype=np.float32)
        net = self.net
        with torch.no_grad():
            items = torch.arange(self.n_items, device=self.device)
            _, hi = net.first_halves(None, items)                     # [n_items, h1]
            qg = net.item_gmf(items)                                  # [n_items, mf_dim]
            rows = max(1, int(self.config.score_chunk_pairs) // max(1, self.n_items))
            for s in range(0, users.numel(), rows):
                u = users[s:s + rows]
                hu, _ = net.first_halves(u, None)                     # [b, h1]
                gmf = net.user_gmf(u)[:, None, :] * qg[None]          # [b, n_items, mf_dim]
                out[s:s + u.numel()] = net.head(gmf, hu[:, None, :] + hi[None]).cpu().numpy()
        return out
