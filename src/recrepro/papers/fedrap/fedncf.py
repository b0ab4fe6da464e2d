"""FedNCF, an NCF baseline of FedRAP (issue 7): NeuMF trained federatedly.

Architecture (NeuMF, He et al. 2017, eq. 9–12), embedding size ``d``::

    φ_GMF = p_u^G ⊙ q_i^G
    φ_MLP = ReLU(W_2ᵀ ReLU(W_1ᵀ [p_u^M; q_i^M] + b_1) + b_2)        (layers 2d → d → d/2)
    r̂_ui  = σ(hᵀ [φ_GMF; φ_MLP] + h_0)

trained with BCE on the positives and ``num_negatives`` fresh negatives per positive.

The centralised NeuMF upper bound is :class:`recrepro.papers.fedrap.central.CentralNCF`.  ``FedNCF``
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
:mod:`recrepro.papers.fedrap.rows`).  With Adam they do not move at all (zero gradient, zero
moments), which is why Adam requires ``l2 = 0``: Adam's L2 term would move every row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from recrepro.models.base import NotFittedError
from recrepro.models.federated.clients import LocalEpochs, client_batches
from recrepro.models.federated.sampling import sample_clients
from recrepro.models.federated.simulation import FederatedSimulation, check_finite_fast
from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.ncf import NET, bce, grid_scores, init_net, neumf_logits, pair_probabilities
from recrepro.records import check_finite

__all__ = ["ClientUploads", "FedNCF", "RoundRows"]


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
    # The same operations, in the same order, as m += on(1-b1)(g-m); s += on(1-b2)(g²-s);
    # v -= (lr/bc1)·m / (√s/bc2 + eps) — bit for bit — but in one scratch tensor: the
    # [clients, rows, d] temporaries of the plain expressions cost more than the arithmetic
    # (2-4x the step's time; docs/performance.md#fedncf-adam-step).
    scratch = torch.sub(g, m)
    m.add_(scratch.mul_(on * (1 - b1)))
    torch.mul(g, g, out=scratch)
    s.add_(scratch.sub_(s).mul_(on * (1 - b2)))
    bc1 = _per_client((1 - b1 ** t).to(v.dtype), v)
    bc2 = _per_client((1 - b2 ** t).sqrt().to(v.dtype), v)
    denominator = torch.sqrt(s, out=scratch).div_(bc2).add_(_ADAM_EPS)
    v.sub_(torch.mul(_per_client(lr, v) / bc1, m).div_(denominator))


@dataclass
class RoundRows:
    """A round's distinct (client, item) rows of FedNCF's samples (:meth:`FedNCF._client_buckets`)."""

    r_owner: np.ndarray        #: row -> client (an index into the round's clients)
    r_item: np.ndarray         #: row -> item
    inv: np.ndarray            #: sample -> row
    M: int                     #: rows
    lab_ext: torch.Tensor      #: the rows' labels plus a padding row (index ``M``)


@dataclass
class ClientUploads:
    """What FedNCF's clients upload after their local epochs (:meth:`FedNCF.local_train`)."""

    owner: torch.Tensor        #: ``[M]`` the client of each trained item row
    item: torch.Tensor         #: ``[M]`` its item
    qg: torch.Tensor           #: ``[M, d]`` trained GMF-side item rows
    qm: torch.Tensor           #: ``[M, d]`` trained MLP-side item rows
    net: dict[str, torch.Tensor]   #: each client's network (stacked, a leading client axis)
    shrink: torch.Tensor       #: ``[B]`` each client's weight-decay factor of the rows it did not train
    loss: torch.Tensor         #: ``[B]`` each client's last mean local loss


class FedNCF(FederatedSimulation):
    """FedNCF: NeuMF with private user embeddings, FedAvg of item embeddings and network.

    A federated simulation of its own on the shared core (:mod:`recrepro.models.federated`: the
    round loop and checkpoints, client sampling, the local-epoch schedule), with FedRAP's settings:
    :class:`~recrepro.papers.fedrap.config.FederatedConfig` (``method='fedncf'``):
    ``lr_network`` for the user embeddings and the network, ``lr_args`` for the item
    embeddings (step sizes of SGD or Adam, see ``client_optimizer``), ``init_std`` for the
    embeddings' normal init; ``mode``, ``lam``, ``mu`` are unused.
    """

    #: FedNCF's extra state across rounds: the private MLP-side user embeddings, the server's
    #: MLP-side item table and network (see FederatedSimulation._ROUND_STATE)
    _ROUND_STATE = FederatedSimulation._ROUND_STATE + ("pm", "Cm", "net")

    def __init__(self, config: FederatedConfig | None = None, **kwargs: Any) -> None:
        if config is None:
            kwargs.setdefault("method", "fedncf")
            config = FederatedConfig(**kwargs)
        self.config = config
        self.history: list[dict[str, Any]] = []
        self.w: torch.Tensor | None = None
        self._fitted = False

    def checkpoint_config(self) -> dict[str, Any]:
        """The settings a checkpoint must match, less ``paper_path`` (FedNCF has one way to train)."""
        config = super().checkpoint_config()
        config.pop("paper_path", None)
        return config

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
        self.net = {k: v.to(self.device) for k, v in init_net(d, gen).items()}
        self.b = torch.zeros(n_users, device=self.device)
        self.D = None
        self.D_scale = torch.ones(n_users, dtype=torch.float64)
        self.lr_network, self.lr_args = cfg.lr_network, cfg.lr_args
        self.weights_prev = None
        self.round = 0

    def train_round(self) -> dict[str, Any]:
        cfg = self.config
        a = self.round
        t0 = time.perf_counter()
        rng = np.random.default_rng([cfg.seed, 1, a])
        users = sample_clients(self.n_users, cfg.client_ratio, rng)
        owner, item, label = self.round_samples(users, rng)
        res = self.local_train(users, owner, item, label, rng)
        B = users.size
        # FedAvg: item tables (untouched rows of client i = shrink_i * server row) and network
        for name, table, rows in (("C", self.C, res.qg), ("Cm", self.Cm, res.qm)):
            total = table * res.shrink.sum()
            delta = rows - table.index_select(0, res.item) * res.shrink.index_select(0, res.owner)[:, None]
            new = (total + torch.zeros_like(table).index_add_(0, res.item, delta)) / B
            check_finite_fast(f"FedNCF item table {name}", new, f"round {a}")
            setattr(self, name, new)
        self.net = {k: v.mean(0) for k, v in res.net.items()}
        self.lr_network *= cfg.decay_rate
        self.lr_args *= cfg.decay_rate
        self.round += 1
        n_net = sum(v.numel() for v in self.net.values())
        dense = B * (2 * self.n_items * cfg.dim + n_net) * 4
        return {"round": self.round, "lambda": 0.0, "mu": 0.0, "n_participants": int(B),
                "train_loss": float(res.loss.sum()) / B,
                "c_sparsity": float((self.C.abs() <= 1e-4).float().mean()),
                "upload_bytes_dense": int(dense), "upload_bytes_sparse": int(dense),
                "seconds": time.perf_counter() - t0, "dp_epsilon": None}

    def local_train(self, users: np.ndarray, owner: np.ndarray, item: np.ndarray, label: np.ndarray,
                    rng: np.random.Generator, n_buckets: int = 8) -> ClientUploads:
        """Local epochs of all clients ``users`` at once (see the module docstring)."""
        cfg, dev = self.config, self.device
        B, bs = users.size, cfg.batch_size
        counts = np.bincount(owner, minlength=B)
        lay, buckets, params = self._client_buckets(users, owner, item, label, n_buckets)
        M, inv = lay.M, lay.inv
        adam = cfg.client_optimizer == "adam"
        # Adam moments per client (fresh every round, as a client's new optimiser)
        moments = ([{k: (torch.zeros_like(v), torch.zeros_like(v)) for k, v in p.items()} for p in params]
                   if adam else None)
        shrink = torch.ones(B, dtype=torch.float64, device=dev)
        schedule = LocalEpochs(counts, bs, cfg.local_epochs, cfg.tol, cfg.batch_decay)
        for epoch in schedule.epochs():
            batch_of = client_batches(owner, counts, bs, rng)
            for t, n_t, step_on in schedule.steps():
                mask = (batch_of == t) & step_on[owner]
                wt_ext = torch.as_tensor(np.append(np.bincount(inv[mask], minlength=M), 0).astype(np.float32),
                                         device=dev)
                n_safe = torch.as_tensor(np.maximum(n_t, 1), dtype=torch.float32, device=dev)
                lr_scale = torch.as_tensor(schedule.lr_scale(step_on), dtype=torch.float32, device=dev)
                batch_loss = self._bucket_steps(buckets, params, moments, step_on, schedule.steps_done, wt_ext,
                                                lay.lab_ext, n_safe, lr_scale)
                if cfg.l2:
                    shrink.mul_(1 - (self.lr_args * lr_scale).to(torch.float64) * cfg.l2)
                schedule.record(step_on, batch_loss.double().cpu().numpy(), n_t)
            check_finite("FedNCF client losses", schedule.loss_acc, f"round {self.round} local epoch {epoch}")
        qg, qm, net = self._gather_clients(users, buckets, params, M)
        check_finite_fast("FedNCF client item rows", qg[:M], f"round {self.round}")
        return ClientUploads(owner=torch.as_tensor(lay.r_owner, device=dev),
                             item=torch.as_tensor(lay.r_item, device=dev),
                             qg=qg[:M], qm=qm[:M], net=net, shrink=shrink.to(torch.float32),
                             loss=torch.as_tensor(np.nan_to_num(schedule.prev_mean)))

    def _client_buckets(self, users: np.ndarray, owner: np.ndarray, item: np.ndarray, label: np.ndarray,
                        n_buckets: int) -> tuple[RoundRows, list, list]:
        """The round's distinct (client, item) rows and the clients' parameters, in padded buckets.

        Returns the rows, the buckets ``(clients, padded row index [n, L])``
        (clients with similar numbers of rows; index ``M`` = padding) and each bucket's parameters
        (client copies of the embeddings, item rows and network, requiring grad).
        """
        dev, n_items, B = self.device, self.n_items, users.size
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
        return RoundRows(r_owner, r_item, inv, M, lab_ext), buckets, params

    def _bucket_steps(self, buckets: list, params: list, moments: list | None, step_on: np.ndarray,
                      steps_done: np.ndarray, wt_ext: torch.Tensor, lab_ext: torch.Tensor, n_safe: torch.Tensor,
                      lr_scale: torch.Tensor) -> torch.Tensor:
        """One local step (SGD, or Adam with ``moments``) of the stepping clients, bucket by bucket,
        in place; returns every client's batch loss ``[B]`` (0 where it does not step)."""
        cfg, dev = self.config, self.device
        adam = moments is not None
        batch_loss = torch.zeros(step_on.size, device=dev)
        if adam:  # which clients step now, and their Adam step counts (from 1)
            on_t = torch.as_tensor(step_on, dtype=torch.float32, device=dev)
            step_t = torch.as_tensor(steps_done + 1, dtype=torch.float64, device=dev)
        for b, ((cl, idx), p) in enumerate(zip(buckets, params)):
            if not step_on[cl.cpu().numpy()].any():
                continue
            wt = wt_ext[idx]
            logit = neumf_logits(p["pg"], p["pm"], p["qg"], p["qm"], {k: p[k] for k in NET})
            loss_c = (wt * bce(logit, lab_ext[idx])).sum(1) / n_safe[cl]
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
        return batch_loss

    def _gather_clients(self, users: np.ndarray, buckets: list, params: list,
                        M: int) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Back from the buckets: the trained item rows (``qg``, ``qm`` ``[M + 1, d]``, the last a
        padding row) and networks (stacked per client); the private user embeddings are written."""
        dev, d, B = self.device, self.config.dim, users.size
        users_t = torch.as_tensor(users, device=dev)
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
                for k in NET:
                    net[k][cl] = p[k]
        return qg, qm, net

    def score_pairs(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        if self.w is None:
            raise NotFittedError("fit the model first")
        return pair_probabilities(lambda u, i: neumf_logits(self.w[u], self.pm[u], self.C[i], self.Cm[i], self.net),
                                  user_ids, item_ids, self.device)

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        return grid_scores(self.score_pairs, user_ids, self.n_items)
