"""NCF baselines of FedRAP (issue 7): centralised NeuMF and its federated version FedNCF.

Architecture (NeuMF, He et al. 2017, eq. 9–12), embedding size ``d``::

    φ_GMF = p_u^G ⊙ q_i^G
    φ_MLP = ReLU(W_2ᵀ ReLU(W_1ᵀ [p_u^M; q_i^M] + b_1) + b_2)        (layers 2d → d → d/2)
    r̂_ui  = σ(hᵀ [φ_GMF; φ_MLP] + h_0)

trained with BCE on the positives and ``num_negatives`` fresh negatives per positive.

``CentralNCF`` is the centralised upper bound (all data on the server, Adam).  ``FedNCF``
(Perifanis & Efraimidis 2022, the FedNCF baseline of the FedRAP and PFedRec papers) keeps the
user embeddings ``p_u^G, p_u^M`` on the client and shares the item embeddings and the
network (``W_1, b_1, W_2, b_2, h, h_0``): every round each participant starts from the
server's copy, trains locally with the same loop as the other federated methods
(per-batch learning-rate decay, ``local_epochs`` with the code's early stop), and the server
averages the uploads (FedAvg, unweighted as FedRAP's code).  The client step is
``client_optimizer``: ``sgd`` with weight decay (FedRAP's code, the other federated methods'
step) or ``adam`` (a fresh Adam per client and round; FedNCF's own paper trains its clients
with Adam).  FedRAP's code has no FedNCF, so which one its FedNCF column used is unknown
(docs/deviations.md#fedrap-fedncf-optimiser).

Vectorisation.  All participants train at once: the (client, item) rows a client samples in
the round live in padded per-bucket tensors ``[n_clients_in_bucket, L, d]`` (clients sorted
by their number of rows and cut into a few buckets, so padding stays small); each client's
copy of the network is a stacked tensor and its layers are ``bmm``\\ s; autograd of the sum
of the clients' (separable) losses gives every client its own gradient.  Item rows a client
does not sample only feel weight decay: one scalar per client (as in
:mod:`recrepro.models.federated`).  With Adam they do not move at all (zero gradient, zero
moments), which is why Adam requires ``l2 = 0``: Adam's L2 term would move every row.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.models.base import NotFittedError, Recommender
from recrepro.models.federated import (
    FederatedConfig,
    FederatedRecommender,
    _check_finite,
    client_batches,
    local_convergence,
    pointwise_epoch,
)
from recrepro.records import check_finite

__all__ = ["FedNCF", "CentralNCF", "neumf_logits"]

_NET = ("W1", "b1", "W2", "b2", "h", "h0")


def neumf_logits(pg: torch.Tensor, pm: torch.Tensor, qg: torch.Tensor, qm: torch.Tensor,
                 net: dict[str, torch.Tensor]) -> torch.Tensor:
    """NeuMF logits.  Shared network: ``pg, pm, qg, qm`` are ``[n, d]`` and ``net`` holds
    ``W1 [2d, d]``, ``b1 [d]``, ``W2 [d, d/2]``, ``b2 [d/2]``, ``h [d + d/2]``, ``h0 []``.
    Per-client networks: ``qg, qm`` are ``[B, L, d]``, ``pg, pm`` ``[B, d]`` and every
    ``net`` entry has a leading client axis ``B``."""
    if qg.dim() == 3:
        gmf = pg[:, None, :] * qg
        d = qg.shape[-1]
        z = torch.baddbmm(net["b1"][:, None, :], qm, net["W1"][:, d:, :])
        z = z + torch.bmm(pm[:, None, :], net["W1"][:, :d, :])
        z = torch.relu(z)
        z = torch.relu(torch.baddbmm(net["b2"][:, None, :], z, net["W2"]))
        h = net["h"]
        return (gmf * h[:, None, :d]).sum(-1) + (z * h[:, None, d:]).sum(-1) + net["h0"][:, None]
    gmf = pg * qg
    z = torch.relu(torch.cat([pm, qm], 1) @ net["W1"] + net["b1"])
    z = torch.relu(z @ net["W2"] + net["b2"])
    return torch.cat([gmf, z], 1) @ net["h"] + net["h0"]


def _init_net(d: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """``nn.Linear`` default init (uniform ±1/sqrt(fan_in)) for the three layers."""
    def uni(shape, fan_in):
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(shape, generator=gen) * 2 - 1) * bound

    h2 = max(1, d // 2)
    return {"W1": uni((2 * d, d), 2 * d), "b1": uni((d,), 2 * d), "W2": uni((d, h2), d), "b2": uni((h2,), d),
            "h": uni((d + h2,), d + h2), "h0": uni((), d + h2)}


_ADAM_BETAS, _ADAM_EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults


def _per_client(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``x [B]`` viewed to broadcast over ``like [B, ...]``."""
    return x.view(-1, *([1] * (like.dim() - 1)))


def _adam_step(v: torch.Tensor, g: torch.Tensor, m: torch.Tensor, s: torch.Tensor, lr: torch.Tensor,
               on: torch.Tensor, t: torch.Tensor) -> None:
    """One ``torch.optim.Adam`` step (Kingma & Ba 2015, Alg. 1; no weight decay) for every
    client at once, in place.  ``v, g, m, s`` are ``[B, ...]``; ``lr``, ``on`` (1 where the
    client steps, 0 where it has no batch left: its moments must not decay) and ``t`` (the
    client's step count, from 1, for the bias corrections) are ``[B]``."""
    b1, b2 = _ADAM_BETAS
    on = _per_client(on, v)
    m.add_(on * (1 - b1) * (g - m))
    s.add_(on * (1 - b2) * (g * g - s))
    bc1 = _per_client((1 - b1 ** t).to(v.dtype), v)
    bc2 = _per_client((1 - b2 ** t).sqrt().to(v.dtype), v)
    v.sub_(_per_client(lr, v) / bc1 * m / (s.sqrt() / bc2 + _ADAM_EPS))


def _bce(logit: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """``torch.nn.BCELoss`` on ``σ(logit)`` (logs clamped at −100), elementwise.  Its own
    backward, not autograd through a clamped ``log1p(-p)``: where σ saturates to exactly 1 that
    chain gives 0 · (1 / 0) = NaN, BCELoss's gives 0 (a saturated sample stops learning, as in
    FedRAP's code)."""
    return torch.nn.functional.binary_cross_entropy(torch.sigmoid(logit), label, reduction="none")


def _grid_scores(score_pairs, user_ids: np.ndarray, n_items: int) -> np.ndarray:
    """Full rows ``[len(users), n_items]`` from a pair scorer, in chunks of ~2^20 pairs."""
    users = np.asarray(user_ids, dtype=np.int64).ravel()
    out = np.empty((users.size, n_items), np.float32)
    step = max(1, (1 << 20) // max(n_items, 1))
    for lo in range(0, users.size, step):
        u = users[lo:lo + step]
        out[lo:lo + u.size] = score_pairs(np.repeat(u, n_items), np.tile(np.arange(n_items), u.size)).reshape(
            u.size, n_items)
    return out


class FedNCF(FederatedRecommender):
    """FedNCF: NeuMF with private user embeddings, FedAvg of item embeddings and network.

    Settings are :class:`~recrepro.models.federated.FederatedConfig`'s (``method='fedncf'``):
    ``lr_network`` for the user embeddings and the network, ``lr_args`` for the item
    embeddings (step sizes of SGD or Adam, see ``client_optimizer``), ``init_std`` for the
    embeddings' normal init; ``mode``, ``lam``, ``mu`` are unused.
    """

    #: FedNCF's extra state across rounds: the private MLP-side user embeddings, the server's
    #: MLP-side item table and network (see FederatedRecommender._ROUND_STATE)
    _ROUND_STATE = FederatedRecommender._ROUND_STATE + ("pm", "Cm", "net")

    def __init__(self, config: FederatedConfig | None = None, **kwargs: Any) -> None:
        if config is None:
            kwargs.setdefault("method", "fedncf")
            config = FederatedConfig(**kwargs)
        super().__init__(config)

    def init_state(self, n_users: int, n_items: int) -> None:
        cfg = self.config
        self.n_users, self.n_items = n_users, n_items
        self.device = torch.device(cfg.device)
        d = cfg.dim
        gen = torch.Generator().manual_seed(int(np.random.default_rng([cfg.seed, 0xFED]).integers(2**62)))
        std = cfg.init_std
        self.w = (torch.randn(n_users, d, generator=gen) * std).to(self.device)      # p_u^G (private)
        self.pm = (torch.randn(n_users, d, generator=gen) * std).to(self.device)     # p_u^M (private)
        self.C = (torch.randn(n_items, d, generator=gen) * std).to(self.device)      # q_i^G (server)
        self.Cm = (torch.randn(n_items, d, generator=gen) * std).to(self.device)     # q_i^M (server)
        self.net = {k: v.to(self.device) for k, v in _init_net(d, gen).items()}
        self.b = torch.zeros(n_users, device=self.device)
        self.D = None
        self.D_scale = torch.ones(n_users, dtype=torch.float64)
        self.lr_network, self.lr_args = cfg.lr_network, cfg.lr_args
        self.weights_prev = None
        self.round = 0

    def train_round(self) -> dict[str, Any]:
        cfg, dev = self.config, self.device
        a = self.round
        t0 = time.perf_counter()
        rng = np.random.default_rng([cfg.seed, 1, a])
        n_part = max(1, int(self.n_users * cfg.client_ratio))
        users = (np.arange(self.n_users) if n_part >= self.n_users
                 else np.sort(rng.choice(self.n_users, n_part, replace=False)))
        owner, item, label = self.round_samples(users, rng)
        res = self.local_train(users, owner, item, label, rng)
        B = users.size
        # FedAvg: item tables (untouched rows of client i = shrink_i * server row) and network
        for name, table, rows in (("C", self.C, res["qg"]), ("Cm", self.Cm, res["qm"])):
            total = table * res["shrink"].sum()
            delta = rows - table.index_select(0, res["item"]) * res["shrink"].index_select(0, res["owner"])[:, None]
            new = (total + torch.zeros_like(table).index_add_(0, res["item"], delta)) / B
            _check_finite(f"FedNCF item table {name}", new, f"round {a}")
            setattr(self, name, new)
        self.net = {k: v.mean(0) for k, v in res["net"].items()}
        self.lr_network *= cfg.decay_rate
        self.lr_args *= cfg.decay_rate
        self.round += 1
        n_net = sum(v.numel() for v in self.net.values())
        dense = B * (2 * self.n_items * cfg.dim + n_net) * 4
        return {"round": self.round, "lambda": 0.0, "mu": 0.0, "n_participants": int(B),
                "train_loss": float(res["loss"].sum()) / B,
                "c_sparsity": float((self.C.abs() <= 1e-4).float().mean()),
                "upload_bytes_dense": int(dense), "upload_bytes_sparse": int(dense),
                "seconds": time.perf_counter() - t0, "dp_epsilon": None}

    def local_train(self, users: np.ndarray, owner: np.ndarray, item: np.ndarray, label: np.ndarray,
                    rng: np.random.Generator, n_buckets: int = 8) -> dict[str, Any]:
        """Local epochs of all clients ``users`` at once (see the module docstring)."""
        cfg, dev = self.config, self.device
        B, d, n_items, bs = users.size, cfg.dim, self.n_items, cfg.batch_size
        counts = np.bincount(owner, minlength=B)
        key = owner.astype(np.int64) * n_items + item.astype(np.int64)
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)[:3]
        inv = inv.ravel()
        r_owner = uniq // n_items
        r_item = uniq - r_owner * n_items
        M = uniq.size
        rows_per = np.bincount(r_owner, minlength=B)
        r_start = np.concatenate([[0], np.cumsum(rows_per)[:-1]])
        # buckets of clients with similar numbers of rows; padded row index (M = padding)
        corder = np.argsort(rows_per, kind="stable")
        buckets = []
        for cl in np.array_split(corder, min(n_buckets, max(B, 1))):
            if cl.size == 0:
                continue
            L = max(1, int(rows_per[cl].max()))
            pos = np.arange(L)[None, :]
            idx = np.where(pos < rows_per[cl][:, None], r_start[cl][:, None] + pos, M)
            buckets.append((torch.as_tensor(cl, device=dev), torch.as_tensor(idx, device=dev)))
        item_ext = torch.as_tensor(np.append(r_item, 0), device=dev)
        lab_ext = torch.as_tensor(np.append(label[first], 0).astype(np.float32), device=dev)
        users_t = torch.as_tensor(users, device=dev)
        params = []
        for cl, idx in buckets:
            u = users_t[cl]
            it = item_ext[idx]
            p = {"pg": self.w[u].clone(), "pm": self.pm[u].clone(), "qg": self.C[it].clone(),
                 "qm": self.Cm[it].clone()}
            p.update({k: v.expand(cl.numel(), *v.shape).clone() for k, v in self.net.items()})
            for v in p.values():
                v.requires_grad_(True)
            params.append(p)
        adam = cfg.client_optimizer == "adam"
        # Adam moments per client (fresh every round, as a client's new optimiser)
        moments = ([{k: (torch.zeros_like(v), torch.zeros_like(v)) for k, v in p.items()} for p in params]
                   if adam else [])
        shrink = torch.ones(B, dtype=torch.float64, device=dev)
        steps_done = np.zeros(B, np.int64)
        active = counts > 0
        loss_acc, n_acc = np.zeros(B), np.zeros(B)
        prev_mean = np.full(B, np.nan)
        max_batches = int(-(-counts.max() // bs)) if B and counts.max() > 0 else 0
        for epoch in range(cfg.local_epochs):
            if not active.any():
                break
            batch_of = client_batches(owner, counts, bs, rng)
            for t in range(max_batches):
                n_t = np.clip(counts - t * bs, 0, bs)
                step_on = active & (n_t > 0)
                if not step_on.any():
                    continue
                mask = (batch_of == t) & step_on[owner]
                wt_ext = torch.as_tensor(np.append(np.bincount(inv[mask], minlength=M), 0).astype(np.float32),
                                         device=dev)
                n_safe = torch.as_tensor(np.maximum(n_t, 1), dtype=torch.float32, device=dev)
                lr_scale = torch.as_tensor(np.where(step_on, cfg.batch_decay ** steps_done, 0.0),
                                           dtype=torch.float32, device=dev)
                batch_loss = torch.zeros(B, device=dev)
                if adam:  # which clients step now, and their Adam step counts (from 1)
                    on_t = torch.as_tensor(step_on, dtype=torch.float32, device=dev)
                    step_t = torch.as_tensor(steps_done + 1, dtype=torch.float64, device=dev)
                for b, ((cl, idx), p) in enumerate(zip(buckets, params)):
                    if not step_on[cl.cpu().numpy()].any():
                        continue
                    wt = wt_ext[idx]
                    logit = neumf_logits(p["pg"], p["pm"], p["qg"], p["qm"], {k: p[k] for k in _NET})
                    loss_c = (wt * _bce(logit, lab_ext[idx])).sum(1) / n_safe[cl]
                    grads = torch.autograd.grad(loss_c.sum(), list(p.values()))
                    with torch.no_grad():
                        lr_n = self.lr_network * lr_scale[cl]
                        lr_i = self.lr_args * lr_scale[cl]
                        for (name, v), g in zip(p.items(), grads):
                            lr = lr_i if name in ("qg", "qm") else lr_n
                            if adam:
                                _adam_step(v, g, *moments[b][name], lr, on_t[cl], step_t[cl])
                            else:
                                v.sub_(_per_client(lr, v) * (g + cfg.l2 * v))
                    batch_loss[cl] = loss_c.detach()
                if cfg.l2:
                    shrink.mul_(1 - (self.lr_args * lr_scale).to(torch.float64) * cfg.l2)
                steps_done += step_on
                bl = batch_loss.double().cpu().numpy()
                loss_acc += np.where(step_on, bl * n_t, 0.0)
                n_acc += np.where(step_on, n_t, 0)
            mean, active = local_convergence(loss_acc, n_acc, prev_mean, active, epoch, cfg.tol)
            prev_mean = mean
            check_finite("FedNCF client losses", loss_acc, f"round {self.round} local epoch {epoch}")
        # gather back to flat rows / stacked clients
        qg = torch.empty(M + 1, d, device=dev)
        qm = torch.empty(M + 1, d, device=dev)
        net = {k: torch.empty(B, *v.shape, device=dev) for k, v in self.net.items()}
        with torch.no_grad():
            for (cl, idx), p in zip(buckets, params):
                flat = idx.reshape(-1)
                qg[flat] = p["qg"].reshape(-1, d)
                qm[flat] = p["qm"].reshape(-1, d)
                self.w[users_t[cl]] = p["pg"]
                self.pm[users_t[cl]] = p["pm"]
                for k in _NET:
                    net[k][cl] = p[k]
        _check_finite("FedNCF client item rows", qg[:M], f"round {self.round}")
        return {"owner": torch.as_tensor(r_owner, device=dev), "item": torch.as_tensor(r_item, device=dev),
                "qg": qg[:M], "qm": qm[:M], "net": net, "shrink": shrink.to(torch.float32),
                "loss": torch.as_tensor(np.nan_to_num(prev_mean))}

    def score_pairs(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        if self.w is None:
            raise NotFittedError("fit the model first")
        u = torch.as_tensor(np.asarray(user_ids, dtype=np.int64).ravel(), device=self.device)
        i = torch.as_tensor(np.asarray(item_ids, dtype=np.int64).ravel(), device=self.device)
        with torch.no_grad():
            logit = neumf_logits(self.w[u], self.pm[u], self.C[i], self.Cm[i], self.net)
        return torch.sigmoid(logit).cpu().numpy().astype(np.float32)

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        return _grid_scores(self.score_pairs, user_ids, self.n_items)


class CentralNCF(Recommender):
    """Centralised NeuMF (the NCF upper bound): all users' data on the server, Adam,
    mini-batches, ``num_negatives`` fresh negatives per positive every epoch."""

    def __init__(self, dim: int = 32, epochs: int = 20, lr: float = 1e-3, batch_size: int = 2048,
                 num_negatives: int = 4, l2: float = 0.0, init_std: float = 0.01, seed: int = 0,
                 device: str = "cpu") -> None:
        self.dim, self.epochs, self.lr, self.batch_size = dim, epochs, lr, batch_size
        self.num_negatives, self.l2, self.init_std, self.seed = num_negatives, l2, init_std, seed
        self.device = torch.device(device)
        self.params: dict[str, torch.Tensor] | None = None
        self.history: list[dict[str, Any]] = []

    def fit(self, train: sp.csr_matrix, touched: sp.csr_matrix | None = None, eval_fn=None, *,
            checkpoint: str | Path | None = None, checkpoint_state: Any = None,
            checkpoint_min_seconds: float = 0.0, **_: Any) -> CentralNCF:
        """Train ``epochs`` epochs; ``eval_fn(model, epoch)`` after each; ``checkpoint``: resume
        from / save to this file after every epoch, as :meth:`recrepro.models.fedrap.CentralMF.fit`."""
        from recrepro.models.fedrap import _resume_central, _save_central

        train = sp.csr_matrix(train)
        touched = sp.csr_matrix(touched) if touched is not None else train
        self.n_users, self.n_items = train.shape
        rng = np.random.default_rng([self.seed, 0xC4F])
        gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
        d = self.dim
        p = {"pg": torch.randn(self.n_users, d, generator=gen) * self.init_std,
             "pm": torch.randn(self.n_users, d, generator=gen) * self.init_std,
             "qg": torch.randn(self.n_items, d, generator=gen) * self.init_std,
             "qm": torch.randn(self.n_items, d, generator=gen) * self.init_std}
        p.update(_init_net(d, gen))
        p = {k: v.to(self.device).requires_grad_() for k, v in p.items()}
        self.params = p
        opt = torch.optim.Adam(list(p.values()), lr=self.lr, weight_decay=self.l2)
        coo = train.tocoo()
        users_pos, items_pos = coo.row.astype(np.int64), coo.col.astype(np.int64)
        k = self.num_negatives
        n_rows = users_pos.size * (k + 1)
        ckpt, first = _resume_central(self, p, opt, rng, train, touched, checkpoint, checkpoint_state,
                                      checkpoint_min_seconds)
        for epoch in range(first, self.epochs):
            total = 0.0
            for ut, it, rt in pointwise_epoch(users_pos, items_pos, touched, k, self.batch_size, rng, self.device):
                logit = neumf_logits(p["pg"][ut], p["pm"][ut], p["qg"][it], p["qm"][it], {n: p[n] for n in _NET})
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, rt)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * ut.numel()
            check_finite("NCF item embeddings", p["qg"], f"epoch {epoch}")
            info = {"round": epoch + 1, "train_loss": total / max(n_rows, 1)}
            if eval_fn is not None:
                info.update(eval_fn(self, epoch + 1))
            self.history.append(info)
            _save_central(ckpt, self, p, opt, rng, checkpoint_state, epoch + 1)
        return self

    def score_pairs(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        if self.params is None:
            raise NotFittedError("fit the model first")
        p = self.params
        u = torch.as_tensor(np.asarray(user_ids, dtype=np.int64).ravel(), device=self.device)
        i = torch.as_tensor(np.asarray(item_ids, dtype=np.int64).ravel(), device=self.device)
        with torch.no_grad():
            logit = neumf_logits(p["pg"][u], p["pm"][u], p["qg"][i], p["qm"][i], {n: p[n] for n in _NET})
        return torch.sigmoid(logit).cpu().numpy().astype(np.float32)

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        return _grid_scores(self.score_pairs, user_ids, self.n_items)
