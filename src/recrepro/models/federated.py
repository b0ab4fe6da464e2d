"""Vectorised simulation of horizontal federated recommendation (FedRAP, FedMF, PFedRec).

Clients are users: client ``i`` holds its own interactions, a private score function
(user vector ``w_i`` and, in the released FedRAP code, a bias ``b_i``), optionally a
private item table, and a local copy of the global item table ``C``.  The official
FedRAP code (mtics/FedRAP ``model/engine.py``) loops over users and deep-copies a model
per user; here **all sampled clients of a round train at once**: their parameters are
stacked tensors (``w[B, d]``, ``b[B]``, ``D[B, n_items, d]``, ``C[B, n_items, d]``) and
every local SGD step is one batched tensor operation with hand-written gradients.

One local step of client ``i`` on its mini-batch ``(j_k, r_k)_{k=1..n}`` (FedRAP,
Li et al. 2024, the poster's objective)::

    x_k   = D_i[j_k] + C_i[j_k]                  # additive personalisation
    s_k   = <w_i, x_k> (+ b_i in code mode)      # r̂ = sigmoid(s)
    BCE   = mean_k -(r_k log r̂_k + (1-r_k) log(1-r̂_k))
    paper : L = BCE - λ_a ||D_i - C_i||_F² / (n_items d) + μ_a ||C_i||_1 / (n_items d)
    code  : L = BCE - λ mean_k,f (D_i[j_k]-C_i[j_k])_f² + μ mean_k,f |C_i[j_k]|_f

followed by plain SGD with weight decay ``l2`` on every parameter (as
``torch.optim.SGD(weight_decay=l2)``), per-client learning rates decayed by
``batch_decay`` after every mini-batch (the code's ``ExponentialLR(0.95)`` stepped per
batch), ``local_epochs`` passes over the client's samples with the code's early stop
(relative change of the running mean loss < ``tol``).  Clients have different numbers of
mini-batches; a client whose batches are exhausted (or that stopped) is masked out of a
step (learning rate 0), so the batched run equals the per-client loop
(``tests/test_fedrap_model.py`` checks this to 1e-6).

The server averages the uploaded ``C_i`` of the round's participants (unweighted mean,
as the code), then both learning rates are multiplied by ``decay_rate``.

Memory
------
The private tables ``D`` (FedRAP) or personalised item copies (PFedRec) need
``n_users × n_items × d`` floats.  They are kept **dense** in RAM when that fits under
``memory_budget_mb``; otherwise they live in a disk-backed ``numpy.memmap`` under
``scratch_dir`` (still dense, read and written per chunk).  Local training always runs on
**chunks of clients**: a chunk holds at most about six ``[B, n_items, d]`` float32 tensors
(the chunk's D and local C copies, and in paper mode the D − C and sign(C) temporaries of
the full-matrix regularisers), and ``B`` is chosen so the chunk stays under the same budget
(at least one client).  Per step only the batch rows are gathered and scattered; SGD weight
decay (a per-client scalar shrink of D and C) is kept lazily as a scale and applied once at
the end of local training, so code mode touches the dense tables a few times per round.  ML-100K (943 × 1,682 × 32) needs 203 MB per table,
ML-1M 2.9 GB, LastFM 4.2 GB, QB-article 23 GB (memmap).

Determinism
-----------
Everything random (initialisation, client sampling, negatives, shuffling) comes from
``numpy.random.Generator`` streams seeded by ``(seed, round)``; CPU torch ops used here
are deterministic, so a seed gives identical rounds.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.models.base import NotFittedError, Recommender
from recrepro.records import check_finite

__all__ = [
    "FederatedConfig",
    "FederatedRecommender",
    "curriculum_weight",
    "gaussian_epsilon",
    "sample_negatives",
    "CURRICULA",
    "METHODS",
]

CURRICULA = ("fixed", "tanh", "sin", "square", "frac")
METHODS = ("fedrap", "fedrap_no", "fedrap_l2", "fedmf", "pfedrec")
_L1_THRESHOLD = 1e-4  # the code's sparsity definition: |C| <= 1e-4 counts as zero


def gaussian_epsilon(noise_multiplier: float, rounds: int, delta: float) -> float:
    """(ε, δ) of ``rounds`` adaptive compositions of the Gaussian mechanism (Rényi DP).

    Each round releases a client's clipped upload plus Gaussian noise of
    ``noise_multiplier × clip``: RDP ``ε_α = α / (2σ²)`` per round (Mironov 2017), summed
    over rounds, converted with ``ε = min_α  R·α/(2σ²) + log(1/δ)/(α − 1)``.  No subsampling
    amplification is claimed (conservative when ``client_ratio < 1``).  ``inf`` without noise.
    """
    if noise_multiplier <= 0 or rounds <= 0:
        return float("inf") if rounds > 0 else 0.0
    alphas = np.concatenate([np.linspace(1.001, 10, 9000), np.linspace(10, 10000, 99901)])
    eps = rounds * alphas / (2 * noise_multiplier**2) + math.log(1 / delta) / (alphas - 1)
    return float(eps.min())


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


def sample_negatives(users: np.ndarray, touched: sp.csr_matrix, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` negatives per entry of ``users``, uniform over items the user never touched.

    Rejection sampling against the sorted keys ``user·n_items + item`` of ``touched``
    (train ∪ validation ∪ test, as the code's ``negative_items``); vectorised, a few
    passes.  Draws within one row may repeat (the code draws ``k`` distinct items; at
    ``k = 4`` out of thousands the difference is negligible).

    Returns
    -------
    numpy.ndarray
        int64 ``[len(users), k]``.
    """
    n_items = touched.shape[1]
    coo = touched.tocoo()
    keys = np.sort(coo.row.astype(np.int64) * n_items + coo.col.astype(np.int64))
    out = rng.integers(0, n_items, size=(users.size, k), dtype=np.int64)
    bad = np.ones(out.shape, dtype=bool)
    base = users.astype(np.int64)[:, None] * n_items
    for _ in range(1000):
        cand = base + out
        pos = np.searchsorted(keys, cand)
        pos = np.minimum(pos, max(keys.size - 1, 0))
        bad = keys[pos] == cand if keys.size else np.zeros(out.shape, bool)
        n_bad = int(bad.sum())
        if n_bad == 0:
            return out
        out[bad] = rng.integers(0, n_items, size=n_bad, dtype=np.int64)
    raise RuntimeError("negative sampling did not converge: a user touched (almost) every item")


@dataclass
class FederatedConfig:
    """Settings of one federated run (defaults: the official FedRAP code's ``train.py``).

    ``method``: ``fedrap`` | ``fedrap_no`` (μ = 0) | ``fedrap_l2`` (L2 instead of L1 on
    C) | ``fedmf`` (global item table only, FedAvg) | ``pfedrec`` (global item table
    fine-tuned per client, the fine-tuned copy kept for the client's predictions).
    ``mode``: ``paper`` (curriculum λ_a, μ_a; Frobenius/L1 norms of the full matrices,
    normalised by n_items·d; no user bias) | ``code`` (constant λ, μ; batch-row means;
    a user bias), see docs/deviations.md#fedrap-mode.
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
    l1_update: Literal["subgradient", "prox"] = "subgradient"
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

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown federated method {self.method!r}; known: {METHODS}")
        if self.mode not in ("paper", "code"):
            raise ValueError(f"mode must be 'paper' or 'code', got {self.mode!r}")
        if self.curriculum not in CURRICULA:
            raise ValueError(f"unknown curriculum {self.curriculum!r}; known: {CURRICULA}")
        if self.l1_update == "prox" and self.mode != "paper":
            raise ValueError("l1_update='prox' needs mode='paper' (the code's L1 is a batch-row mean)")
        if not 0.0 < self.client_ratio <= 1.0:
            raise ValueError("client_ratio must be in (0, 1]")

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
        """(λ, μ) used in round ``a``: curriculum in paper mode, constants in code mode."""
        if not self.has_private_items:
            return 0.0, 0.0
        mu = 0.0 if self.method == "fedrap_no" else self.mu
        if self.mode == "code":
            return float(self.lam), float(mu)
        p_lam, p_mu = prev if prev is not None else (None, None)
        return (curriculum_weight(self.curriculum, a, self.lam, p_lam),
                curriculum_weight(self.curriculum, a, mu, p_mu))


def _chunk_size(n_items: int, dim: int, budget_mb: float, n_clients: int) -> int:
    per_client = n_items * dim * 4 * 6
    return int(max(1, min(n_clients, (budget_mb * 2**20) // per_client)))


class FederatedRecommender(Recommender):
    """FedRAP / FedMF / PFedRec trained by the vectorised simulation (see module docstring).

    ``fit(train, touched=..., eval_fn=...)``: ``touched`` (train ∪ validation ∪ test) is
    what the training negatives avoid; ``eval_fn(model, round)`` (optional) is called
    after each evaluated round and its return value is stored in :attr:`history`.
    After fitting, :meth:`score` gives each user's scores from their own model and the
    server's ``C`` (PFedRec: the client's last fine-tuned copy).
    """

    def __init__(self, config: FederatedConfig | None = None, **kwargs: Any) -> None:
        self.config = config if config is not None else FederatedConfig(**kwargs)
        self.history: list[dict[str, Any]] = []
        self.w: torch.Tensor | None = None
        self._fitted = False

    # ------------------------------------------------------------------ state
    def init_state(self, n_users: int, n_items: int) -> None:
        cfg = self.config
        self.n_users, self.n_items = n_users, n_items
        self.device = torch.device(cfg.device)
        rng = np.random.default_rng([cfg.seed, 0xFED])
        d = cfg.dim
        bound = 1.0 / math.sqrt(d)
        # nn.Linear(d, 1) default init, one copy for every client (the code deep-copies it)
        w0 = rng.uniform(-bound, bound, size=d).astype(np.float32)
        b0 = np.float32(rng.uniform(-bound, bound)) if cfg.use_bias else np.float32(0.0)
        self.w = torch.as_tensor(np.tile(w0, (n_users, 1)), device=self.device)
        self.b = torch.full((n_users,), float(b0), device=self.device)
        # nn.Embedding default init N(0, 1): C on the server, D shared initial copy
        self.C = torch.as_tensor(rng.standard_normal((n_items, d)).astype(np.float32) * cfg.init_std,
                                 device=self.device)
        self.D = None
        if cfg.has_private_items or cfg.keeps_personal_copy:
            d0 = (rng.standard_normal((n_items, d)).astype(np.float32) * cfg.init_std
                  if cfg.has_private_items else self.C.cpu().numpy())
            self.D = self._alloc_private(n_users, n_items, d)
            for start in range(0, n_users, 4096):
                stop = min(n_users, start + 4096)
                self.D[start:stop] = torch.as_tensor(d0, device=self.D.device).expand(stop - start, -1, -1)
        self.lr_network = cfg.lr_network
        self.lr_args = cfg.lr_args
        self.weights_prev: tuple[float, float] | None = None
        self.round = 0

    def _alloc_private(self, n_users: int, n_items: int, d: int) -> torch.Tensor:
        nbytes = n_users * n_items * d * 4
        if nbytes <= self.config.memory_budget_mb * 2**20:
            self.private_storage = "dense"
            return torch.zeros((n_users, n_items, d), dtype=torch.float32, device=self.device)
        self.private_storage = "memmap"
        folder = Path(self.config.scratch_dir or tempfile.gettempdir())
        folder.mkdir(parents=True, exist_ok=True)
        self._memmap_file = tempfile.NamedTemporaryFile(dir=folder, suffix=".fedrap-D.f32")
        array = np.memmap(self._memmap_file.name, dtype=np.float32, mode="w+", shape=(n_users, n_items, d))
        return torch.from_numpy(array)

    # ------------------------------------------------------------------ training
    def fit(self, train: sp.csr_matrix, touched: sp.csr_matrix | None = None,
            eval_fn: Callable[[FederatedRecommender, int], dict[str, Any]] | None = None,
            rounds: int | None = None) -> FederatedRecommender:
        train = sp.csr_matrix(train)
        n_users, n_items = train.shape
        self.train_csr = train
        self.touched = sp.csr_matrix(touched) if touched is not None else train
        if self.w is None:
            self.init_state(n_users, n_items)
        for _ in range(self.config.rounds if rounds is None else rounds):
            info = self.train_round()
            if eval_fn is not None and ((self.round % self.config.eval_every == 0)
                                        or self.round == self.config.rounds):
                info.update(eval_fn(self, self.round))
            self.history.append(info)
        self._fitted = True
        return self

    def round_samples(self, users: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Training samples of ``users`` for a round: positives then ``k`` fresh negatives each.

        Returns ``(owner[m], item[m], label[m])`` sorted by owner (index into ``users``).
        """
        sub = self.train_csr[users]
        counts = np.diff(sub.indptr)
        owner_pos = np.repeat(np.arange(users.size), counts)
        items_pos = sub.indices.astype(np.int64)
        k = self.config.num_negatives
        neg = sample_negatives(users[owner_pos], self.touched, k, rng) if k else np.zeros((owner_pos.size, 0), np.int64)
        owner = np.concatenate([owner_pos, np.repeat(owner_pos, k)])
        item = np.concatenate([items_pos, neg.ravel()])
        label = np.concatenate([np.ones(owner_pos.size, np.float32), np.zeros(owner_pos.size * k, np.float32)])
        order = np.argsort(owner, kind="stable")
        return owner[order], item[order], label[order]

    def train_round(self) -> dict[str, Any]:
        """One federated round: sample clients, local training (chunked), aggregate C."""
        cfg = self.config
        a = self.round
        t0 = time.perf_counter()
        rng = np.random.default_rng([cfg.seed, 1, a])
        n_part = max(1, int(self.n_users * cfg.client_ratio))
        if n_part >= self.n_users:
            participants = np.arange(self.n_users)
        else:
            participants = np.sort(rng.choice(self.n_users, n_part, replace=False))
        lam, mu = cfg.weights(a, self.weights_prev)
        self.weights_prev = (lam, mu)
        chunk = _chunk_size(self.n_items, cfg.dim, cfg.memory_budget_mb, participants.size)
        c_sum = torch.zeros_like(self.C, dtype=torch.float64)
        loss_sum, nnz_upload = 0.0, 0
        for start in range(0, participants.size, chunk):
            users = participants[start:start + chunk]
            owner, item, label = self.round_samples(users, rng)
            result = self.local_train(users, owner, item, label, lam, mu, rng)
            if cfg.dp_clip is not None:
                result["C"] = self.privatise(result["C"], rng)
            c_sum += result["C"].sum(0, dtype=torch.float64)
            loss_sum += float(result["loss"].sum())
            nnz_upload += int((result["C"].abs() > _L1_THRESHOLD).sum())
        new_c = (c_sum / participants.size).to(torch.float32)
        check_finite("global item table C", new_c, f"round {a}")
        self.C = new_c
        sparsity = float((self.C.abs() <= _L1_THRESHOLD).float().mean())
        self.lr_network *= cfg.decay_rate
        self.lr_args *= cfg.decay_rate
        self.round += 1
        dense_bytes = participants.size * self.n_items * cfg.dim * 4
        return {
            "round": self.round, "lambda": lam, "mu": mu, "n_participants": int(participants.size),
            "train_loss": loss_sum / participants.size, "c_sparsity": sparsity,
            "upload_bytes_dense": int(dense_bytes), "upload_bytes_sparse": int(nnz_upload * 8),
            "seconds": time.perf_counter() - t0,
            "dp_epsilon": (gaussian_epsilon(cfg.dp_noise, self.round, cfg.dp_delta)
                           if cfg.dp_clip is not None else None),
        }

    def privatise(self, uploads: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        """Clip each client's update ``C_i − C`` to Frobenius norm ``dp_clip`` and add
        ``N(0, (dp_noise·dp_clip)²)`` noise to every entry (Gaussian mechanism on the upload,
        per client, before aggregation)."""
        cfg = self.config
        delta = uploads - self.C[None]
        norms = torch.linalg.vector_norm(delta, dim=(1, 2))
        delta.mul_(torch.clamp(cfg.dp_clip / torch.clamp(norms, min=1e-12), max=1.0)[:, None, None])
        if cfg.dp_noise > 0:
            gen = torch.Generator(device=delta.device).manual_seed(int(rng.integers(2**62)))
            delta.add_(torch.randn(delta.shape, generator=gen, device=delta.device), alpha=cfg.dp_noise * cfg.dp_clip)
        return delta.add_(self.C[None])

    def local_train(self, users: np.ndarray, owner: np.ndarray, item: np.ndarray, label: np.ndarray,
                    lam: float, mu: float, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        """Local epochs of the clients ``users`` at once; writes back their private state.

        Samples are kept flat (no padding to the busiest client): each epoch draws a
        random order inside every client (``DataLoader(shuffle=True)``), mini-batch ``t``
        of all clients is one step, per-client sums are ``index_add_`` segment sums.

        Returns ``{"C": uploaded [B, n_items, d], "loss": last running mean loss [B]}``.
        """
        cfg, dev = self.config, self.device
        B = users.size
        users_t = torch.as_tensor(users, device=dev)
        counts = np.bincount(owner, minlength=B)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        bs = cfg.batch_size
        max_batches = int(-(-counts.max() // bs)) if counts.size and counts.max() > 0 else 0

        w = self.w[users_t].clone()
        b = self.b[users_t].clone()
        C = self.C.unsqueeze(0).expand(B, -1, -1).clone()
        # contiguous, in-memory, same-device chunk: train D in place (no copy, no write-back)
        in_place = (cfg.has_private_items and self.private_storage == "dense" and self.D.device == dev
                    and B > 0 and np.array_equal(users, np.arange(users[0], users[0] + B)))
        if in_place:
            D = self.D[int(users[0]):int(users[0]) + B]
        else:
            D = self.D[users_t.cpu()].to(dev) if cfg.has_private_items else None
        # weight decay is a per-client scalar shrink: kept lazily (true = scale * stored)
        self._scale = {"C": torch.ones(B, dtype=torch.float64, device=dev),
                       "D": torch.ones(B, dtype=torch.float64, device=dev)}

        steps_done = np.zeros(B, np.int64)
        active = counts > 0
        loss_acc = np.zeros(B)
        n_acc = np.zeros(B)
        prev_mean = np.full(B, np.nan)
        owner_t = torch.as_tensor(owner, device=dev)
        item_t = torch.as_tensor(item, device=dev)
        label_t = torch.as_tensor(label, device=dev)
        for epoch in range(cfg.local_epochs):
            if not active.any():
                break
            # per-client shuffle: order by (owner, random key); position inside the client
            order = np.lexsort((rng.random(owner.size), owner))
            pos_in = np.arange(owner.size) - starts[owner[order]]
            batch_of = pos_in // bs
            for t in range(max_batches):
                n_t = np.clip(counts - t * bs, 0, bs)
                step_on = active & (n_t > 0)
                if not step_on.any():
                    continue
                sel = order[(batch_of == t) & step_on[owner[order]]]
                sel_t = torch.as_tensor(sel, device=dev)
                fr, fi, lab = owner_t[sel_t], item_t[sel_t], label_t[sel_t]
                n_f = torch.as_tensor(np.maximum(n_t, 1), dtype=torch.float32, device=dev)
                lr_scale = torch.as_tensor(np.where(step_on, cfg.batch_decay ** steps_done, 0.0),
                                           dtype=torch.float32, device=dev)
                self._lengths = torch.as_tensor(np.where(step_on, n_t, 0), device=dev)
                out = self._step(w, b, D, C, fr, fi, lab, n_f, lam, mu, lr_scale)
                steps_done += step_on
                batch_loss = out.double().cpu().numpy()
                loss_acc += np.where(step_on, batch_loss * n_t, 0.0)
                n_acc += np.where(step_on, n_t, 0)
            mean = np.divide(loss_acc, n_acc, out=np.full(B, np.nan), where=n_acc > 0)
            if epoch > 0:
                with np.errstate(invalid="ignore", divide="ignore"):
                    converged = np.abs(mean - prev_mean) / np.abs(prev_mean) < cfg.tol
                active = active & ~converged
            prev_mean = mean
            check_finite("client parameters", w, f"round {self.round} local epoch {epoch}")
            check_finite("client losses", loss_acc, f"round {self.round} local epoch {epoch}")
        self._materialise(C, D)
        # write back private state
        self.w[users_t] = w
        self.b[users_t] = b
        if D is not None and not in_place:
            self.D[users_t.cpu()] = D.to(self.D.device)
        elif cfg.keeps_personal_copy:
            self.D[users_t.cpu()] = C.to(self.D.device)
        return {"C": C, "loss": torch.as_tensor(np.nan_to_num(prev_mean))}

    def _materialise(self, C: torch.Tensor, D: torch.Tensor | None) -> None:
        """Apply the lazy weight-decay scales to the stored tables and reset them to 1."""
        for name, table in (("C", C), ("D", D)):
            scale = self._scale[name]
            if table is not None and bool((scale != 1).any()):
                table.mul_(scale.to(table.dtype)[:, None, None])
            scale.fill_(1.0)

    def _step(self, w, b, D, C, fr, fi, lab, n_f, lam, mu, lr_scale) -> torch.Tensor:
        """One SGD step of every client (in place) on the flat batch ``(fr, fi, lab)``.

        ``fr`` is the client (row of the stacked tensors) of each sample, ``fi`` its item,
        ``n_f[B]`` the clients' batch sizes, ``lr_scale[B]`` the per-client learning-rate
        factor (0 = client not stepping).  Returns each client's batch loss ``[B]``.

        Per sample k (client i, item j, n = the client's batch size), with
        ``a_k = (σ(s_k) − r_k)/n`` and, in code mode, ``c = 2λ/(n d)``, ``m = μ/(n d)``::

            ∂L/∂D_ij += a_k w_i − c (D_ij − C_ij)
            ∂L/∂C_ij += a_k w_i + c (D_ij − C_ij) + m sign(C_ij)     (L2 ablation: 2m C_ij)
            ∂L/∂w_i  += a_k (D_ij + C_ij),   ∂L/∂b_i += a_k

        The per-sample updates are formed with per-sample scalars (few passes) and
        scattered with one ``index_add_`` per table (duplicates accumulate).
        """
        cfg = self.config
        d = cfg.dim
        B = w.shape[0]
        n_items = self.n_items
        sC, sD = self._scale["C"], self._scale["D"]
        key = fr * n_items + fi
        C2, D2 = C.view(-1, d), (D.view(-1, d) if D is not None else None)
        sC_k = sC[fr].to(C.dtype)
        Cg = C2.index_select(0, key).mul_(sC_k[:, None])
        if D is not None:
            sD_k = sD[fr].to(D.dtype)
            Dg = D2.index_select(0, key).mul_(sD_k[:, None])
            x = Cg + Dg
        else:
            Dg = None
            x = Cg
        wf = w.index_select(0, fr)
        lengths = self._lengths  # samples per client in this step; ``fr`` is sorted by client

        def seg(values):  # per-client sums of per-sample values (fr sorted)
            return torch.segment_reduce(values, "sum", lengths=lengths, axis=0)

        s = torch.einsum("kd,kd->k", x, wf)
        if cfg.use_bias:
            s = s + b[fr]
        p = torch.sigmoid(s)
        # BCE as torch.nn.BCELoss (log clamped at -100)
        bce = -(lab * torch.clamp(torch.log(p), min=-100) + (1 - lab) * torch.clamp(torch.log1p(-p), min=-100))
        nf = n_f[fr]
        loss = seg(bce) / n_f
        a_k = (p - lab) / nf                                     # dBCE/ds
        g_w = seg(torch.einsum("kd,k->kd", x, a_k))
        g_b = seg(a_k)
        del x
        lr_net = self.lr_network * lr_scale
        lr_arg = self.lr_args * lr_scale
        lr_k = lr_arg[fr]
        # ΔC = -lr/sC (a w + c diff + m sign C),  ΔD = -lr/sD (a w - c diff)
        fC = lr_k / sC_k
        delta_c = torch.einsum("kd,k->kd", wf, -(fC * a_k))
        delta_d = None
        if Dg is not None:
            fD = lr_k / sD_k
            delta_d = torch.einsum("kd,k->kd", wf, -(fD * a_k))
            if cfg.mode == "code":
                diff = Dg.sub_(Cg)                               # Dg no longer needed
                denom = nf * d
                loss = loss - lam * seg(torch.einsum("kd,kd->k", diff, diff)) / (n_f * d)
                c_k = 2 * lam / denom
                delta_d.add_(torch.einsum("kd,k->kd", diff, fD * c_k))
                delta_c.sub_(torch.einsum("kd,k->kd", diff, fC * c_k))
                m_k = mu / denom
                if cfg.method == "fedrap_l2":
                    loss = loss + mu * seg(torch.einsum("kd,kd->k", Cg, Cg)) / (n_f * d)
                    delta_c.sub_(torch.einsum("kd,k->kd", Cg, fC * 2 * m_k))
                elif mu:
                    sign = torch.sign(Cg)
                    loss = loss + mu * seg(torch.einsum("kd,kd->k", Cg, sign)) / (n_f * d)  # Σ|C|
                    delta_c.sub_(torch.einsum("kd,k->kd", sign, fC * m_k))
                del diff
        del Cg, Dg
        l1_prox = False
        # dense part: weight decay (and, paper mode, the full-matrix regularisers)
        lr3 = lr_arg[:, None, None]
        if D is not None and cfg.mode == "paper":
            # gradients of the full-matrix terms at the pre-step values, then in-place updates
            nd = float(n_items * d)
            diffall = D - C
            loss = loss - lam * torch.linalg.vector_norm(diffall, dim=(1, 2)) ** 2 / nd
            coef = lr3 * (2 * lam / nd)
            shrink_c = 1 - lr3 * cfg.l2
            sign_c = None
            if cfg.method == "fedrap_l2":
                loss = loss + mu * torch.linalg.vector_norm(C, dim=(1, 2)) ** 2 / nd
                shrink_c = shrink_c - lr3 * (2 * mu / nd)
            else:
                loss = loss + mu * torch.linalg.vector_norm(C, ord=1, dim=(1, 2)) / nd
                if cfg.l1_update == "prox":
                    l1_prox = True
                elif mu:
                    sign_c = torch.sign(C)
            D.mul_(1 - lr3 * cfg.l2).addcmul_(diffall, coef)       # D -= lr(l2 D - 2λ(D-C)/nd)
            C.mul_(shrink_c).addcmul_(diffall, -coef)              # C -= lr(l2 C + 2λ(D-C)/nd [+2μC/nd])
            if sign_c is not None:
                C.addcmul_(sign_c, -lr3 * (mu / nd))               # C -= lr μ sign(C)/nd
            del diffall, sign_c
        elif cfg.l2:
            # p <- p (1 - lr l2) - lr g, with p = s * stored: s <- s (1 - lr l2), stored -= lr g / s
            shrink = 1 - lr_arg.to(torch.float64) * cfg.l2
            sC.mul_(shrink)
            if D is not None:
                sD.mul_(shrink)
            # the deltas were divided by the pre-step scale: rescale to the new one
            ratio = (1 / shrink).to(C.dtype)[fr][:, None]
            delta_c.mul_(ratio)
            if delta_d is not None:
                delta_d.mul_(ratio)
        # sparse part: the batch rows (duplicates accumulate, as embedding backward)
        C2.index_add_(0, key, delta_c)
        if D is not None:
            D2.index_add_(0, key, delta_d)
        if bool((sC < 1e-3).any()):  # keep the lazy scales away from underflow
            self._materialise(C, D)
        if l1_prox:
            thr = (lr_arg * mu / float(n_items * d))[:, None, None]
            C.copy_(torch.sign(C) * torch.clamp(C.abs() - thr, min=0.0))
        w.sub_(lr_net[:, None] * (g_w + cfg.l2 * w))
        if cfg.use_bias:
            b.sub_(lr_net * (g_b + cfg.l2 * b))
        return loss

    # ------------------------------------------------------------------ scoring
    def score(self, user_ids: np.ndarray) -> np.ndarray:
        if self.w is None:
            raise NotFittedError("fit the model first")
        users = np.asarray(user_ids, dtype=np.int64).ravel()
        out = np.empty((users.size, self.n_items), np.float32)
        chunk = _chunk_size(self.n_items, self.config.dim, self.config.memory_budget_mb, max(users.size, 1))
        for start in range(0, users.size, chunk):
            u = torch.as_tensor(users[start:start + chunk], device=self.device)
            w = self.w[u]
            if self.config.has_private_items:
                items = self.D[u.cpu()].to(self.device) + self.C[None]
            elif self.config.keeps_personal_copy:
                items = self.D[u.cpu()].to(self.device)
            else:
                items = self.C[None].expand(u.numel(), -1, -1)
            s = torch.einsum("bd,bnd->bn", w, items)
            if self.config.use_bias:
                s = s + self.b[u][:, None]
            # r̂ = sigmoid(s) in float32, as the code compares them: saturated scores tie
            out[start:start + chunk] = torch.sigmoid(s).cpu().numpy()
        return out

    def describe(self) -> dict[str, Any]:
        return asdict(self.config)
