"""Vectorised simulation of horizontal federated recommendation (FedRAP, FedMF, PFedRec).

Clients are users: client ``i`` holds its own interactions, a private score function
(user vector ``w_i`` and, in the released FedRAP code, a bias ``b_i``), optionally a
private item table, and a local copy of the global item table ``C``.  The official
FedRAP code (mtics/FedRAP ``model/engine.py``) loops over users and deep-copies a model
per user; here **all sampled clients of a round train at once**: their parameters are
stacked tensors and every local SGD step is one batched tensor operation with hand-written
gradients.  Two paths:

* **rows** (code mode, FedMF, PFedRec; :meth:`FederatedRecommender._local_train_rows`): a
  step only changes the rows of the items in a client's batch (plus a per-client weight-decay
  shrink), so the round's distinct (client, item) rows are gathered once into compact
  ``[M, d]`` tables (``M`` ≈ the round's samples) and trained there; nothing of size
  ``B × n_items × d`` is formed.  About 1.4 CPU-seconds per ML-100K round (docs/performance.md).
* **lazy** (paper mode with private tables, the default; :meth:`FederatedRecommender._local_train_lazy`):
  the paper's full-matrix regularisers touch every entry of every client's ``D_i`` and ``C_i``
  at every step, but between two BCE touches an entry follows a per-client affine map as
  long as ``sign(C)`` is constant.  The sampled rows train as in the row path, entries whose
  ``C`` may cross zero are replayed step by step, all others get the composed map once per
  round; exact up to float rounding, two streaming passes over the private tables per round.
* **dense** (``paper_path: dense``, the reference; also DP, the prox L1 update and the L2
  ablation; :meth:`FederatedRecommender._local_train_dense`): the chunk's ``D[B, n_items, d]``
  and ``C[B, n_items, d]`` are dense and every step updates all of them.

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
``scratch_dir``.  Their SGD weight decay is a lazy per-user scale (``D_scale``).  The rows
path reads and writes only the round's rows of them.  The dense path runs on **chunks of
clients**: a chunk holds about six ``[B, n_items, d]`` float32 tensors and ``B`` is chosen
so the chunk stays under the same budget (at least one client); so does DP, which needs
each client's dense upload.  ML-100K (943 × 1,682 × 32) needs 203 MB per table, Video
1.4 GB, ML-1M 2.9 GB, LastFM 4.2 GB, QB-article 23 GB.

Determinism
-----------
Everything random (initialisation, client sampling, negatives, shuffling) comes from
``numpy.random.Generator`` streams seeded by ``(seed, round)``; CPU torch ops used here
are deterministic, so a seed gives identical rounds.
"""

from __future__ import annotations

import math
import mmap
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.checkpoints import Checkpointer, data_fingerprint, settings_key
from recrepro.models.base import NotFittedError, Recommender
from recrepro.records import check_finite

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


def _check_finite(name: str, values: torch.Tensor, where: str) -> None:
    """:func:`recrepro.records.check_finite` with a one-pass fast path for big tensors."""
    if not bool(torch.isfinite(values).all()):
        check_finite(name, values, where)

__all__ = [
    "FederatedConfig",
    "FederatedRecommender",
    "client_batches",
    "curriculum_weight",
    "gaussian_epsilon",
    "sample_negatives",
    "CURRICULA",
    "METHODS",
]

CURRICULA = ("fixed", "tanh", "sin", "square", "frac")
METHODS = ("fedrap", "fedrap_no", "fedrap_l2", "fedmf", "pfedrec", "fedncf")  # fedncf: models.fedncf
_L1_THRESHOLD = 1e-4  # the code's sparsity definition: |C| <= 1e-4 counts as zero
_MEMMAP_PIECE_BYTES = 256 << 20  # file span of one piece of a scattered read/write of a disk-backed table


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
    out = rng.integers(0, n_items, size=(users.size, k), dtype=np.int64)
    if touched.shape[0] * n_items <= 200_000_000:  # a dense bitmap lookup (same draws, faster)
        bitmap = np.zeros(touched.shape[0] * n_items, dtype=bool)
        coo = touched.tocoo()
        bitmap[coo.row.astype(np.int64) * n_items + coo.col.astype(np.int64)] = True
        base = users.astype(np.int64)[:, None] * n_items
        for _ in range(1000):
            bad = bitmap[base + out]
            n_bad = int(np.count_nonzero(bad))
            if n_bad == 0:
                return out
            out[bad] = rng.integers(0, n_items, size=n_bad, dtype=np.int64)
        raise RuntimeError("negative sampling did not converge: a user touched (almost) every item")
    coo = touched.tocoo()
    keys = np.sort(coo.row.astype(np.int64) * n_items + coo.col.astype(np.int64))
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


def pointwise_epoch(users_pos: np.ndarray, items_pos: np.ndarray, touched: sp.csr_matrix, k: int,
                    batch_size: int, rng: np.random.Generator, device: torch.device):
    """One epoch of pointwise BCE training data (He et al. 2017), in shuffled mini-batches.

    Every positive ``(users_pos[j], items_pos[j])`` with label 1 plus ``k`` fresh negatives per
    positive (:func:`sample_negatives`) with label 0, permuted once; yields ``(users, items,
    labels)`` tensors on ``device`` of at most ``batch_size`` rows.  Used by the centralised
    MF and NCF upper bounds so that both see the same data stream for the same ``rng``.
    """
    neg = sample_negatives(users_pos, touched, k, rng)
    u = np.concatenate([users_pos, np.repeat(users_pos, k)])
    i = np.concatenate([items_pos, neg.ravel()])
    r = np.concatenate([np.ones(users_pos.size, np.float32), np.zeros(users_pos.size * k, np.float32)])
    order = rng.permutation(u.size)
    for lo in range(0, u.size, batch_size):
        sel = order[lo:lo + batch_size]
        yield (torch.as_tensor(u[sel], device=device), torch.as_tensor(i[sel], device=device),
               torch.as_tensor(r[sel], device=device))


def local_convergence(loss_acc: np.ndarray, n_acc: np.ndarray, prev_mean: np.ndarray | None,
                      active: np.ndarray, epoch: int, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-client mean local loss of this epoch and the clients still training.

    The official client loop stops a client's local epochs once its mean loss changes by less
    than ``tol`` relative to the previous epoch; clients without batches this epoch get NaN
    (never "converged").  Returns ``(mean, active)``.
    """
    mean = np.divide(loss_acc, n_acc, out=np.full(loss_acc.shape[0], np.nan), where=n_acc > 0)
    if epoch > 0:
        with np.errstate(invalid="ignore", divide="ignore"):
            converged = np.abs(mean - prev_mean) / np.abs(prev_mean) < tol
        active = active & ~converged
    return mean, active


def client_batches(owner: np.ndarray, counts: np.ndarray, batch_size: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Mini-batch index of every sample for one local epoch (``DataLoader(shuffle=True)``).

    ``owner`` is sorted (samples grouped by client), ``counts`` the samples per client.
    A client with at most ``batch_size`` samples has a single batch, whose order does not
    change an SGD step (no random draw); the samples of the other clients are shuffled
    within the client and cut into batches of ``batch_size``.
    """
    batch_of = np.zeros(owner.size, np.int64)
    multi = counts > batch_size
    if multi.any():
        S = np.flatnonzero(multi[owner])
        o = owner[S]
        perm = np.lexsort((rng.random(S.size), o))
        first = np.searchsorted(o, o, side="left")  # o sorted: start of each client's block
        batch_of[S[perm]] = (np.arange(S.size) - first) // batch_size
    return batch_of


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
    form, :meth:`FederatedRecommender._local_train_lazy`) | ``dense`` (the dense reference
    path, kept for verification; equal up to float rounding).
    ``client_optimizer``: ``sgd`` (FedRAP's code: SGD with weight decay ``l2``) | ``adam``
    (FedNCF only: a fresh ``torch.optim.Adam`` per client and round, as FedNCF's own paper
    trains its clients; needs ``l2 = 0``, see :mod:`recrepro.models.fedncf`).
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

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown federated method {self.method!r}; known: {METHODS}")
        if self.mode not in ("paper", "code"):
            raise ValueError(f"mode must be 'paper' or 'code', got {self.mode!r}")
        if self.curriculum not in CURRICULA:
            raise ValueError(f"unknown curriculum {self.curriculum!r}; known: {CURRICULA}")
        if self.l1_update == "prox" and self.mode != "paper":
            raise ValueError("l1_update='prox' needs mode='paper' (the code's L1 is a batch-row mean)")
        if self.paper_path not in ("lazy", "dense"):
            raise ValueError(f"paper_path must be 'lazy' or 'dense', got {self.paper_path!r}")
        if not 0.0 < self.client_ratio <= 1.0:
            raise ValueError("client_ratio must be in (0, 1]")
        if self.client_optimizer not in ("sgd", "adam"):
            raise ValueError(f"client_optimizer must be 'sgd' or 'adam', got {self.client_optimizer!r}")
        if self.client_optimizer == "adam" and (self.method != "fedncf" or self.l2 != 0):
            # item rows a client never samples stay put only when nothing but the loss moves
            # them; Adam's L2 would move every row by ~lr per step
            raise ValueError("client_optimizer='adam' is implemented for method='fedncf' with l2=0 only")

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


def _chunk_size(n_items: int, dim: int, budget_mb: float, n_clients: int) -> int:
    per_client = n_items * dim * 4 * 6
    return int(max(1, min(n_clients, (budget_mb * 2**20) // per_client)))


def _row_layout(owner: np.ndarray, item: np.ndarray, label: np.ndarray, B: int, n_items: int,
                batch_size: int) -> dict[str, Any]:
    """The compact row layout of a round's samples (:meth:`FederatedRecommender._local_train_rows`).

    The distinct (client, item) pairs of the samples become rows; clients with a single
    mini-batch are ordered first (``cperm``: permuted position -> caller's client index), so
    the later batches of the big clients are a contiguous tail ``[M1, M)`` of rows and
    ``[B1, B)`` of clients.  Returns ``s_row`` (sample -> row), ``s_owner`` (sample ->
    permuted client), ``r_owner``/``r_item``/``r_label``/``r_mult`` (per row; ``r_mult`` =
    samples of the row), ``counts`` (samples per permuted client), ``cperm``, ``rows_per``,
    ``M``, ``B1``, ``M1``, ``max_batches``, ``s_sorted``/``s_owner_sorted`` (samples grouped
    by permuted client, for :func:`client_batches`).
    """
    counts = np.bincount(owner, minlength=B)           # samples per client
    key = owner.astype(np.int64) * n_items + item.astype(np.int64)
    uniq, first, inv, mult = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    multi = counts > batch_size
    cperm = np.argsort(multi, kind="stable")          # single-batch clients first
    crank = np.empty(B, np.int64)
    crank[cperm] = np.arange(B)
    r_owner0 = uniq // n_items
    order = np.argsort(crank[r_owner0], kind="stable")
    new_pos = np.empty(order.size, np.int64)
    new_pos[order] = np.arange(order.size)
    s_row = new_pos[inv.ravel()]                      # sample -> row
    s_owner = crank[owner]                            # sample -> client (permuted order)
    r_owner = crank[r_owner0[order]]                  # row -> client (permuted order)
    r_item = (uniq - r_owner0 * n_items)[order]
    r_label = label[first[order]].astype(np.float32)
    r_mult = mult[order].astype(np.float32)
    counts = counts[cperm]
    rows_per = np.bincount(r_owner, minlength=B)
    B1 = int((~multi).sum())
    M1 = int(rows_per[:B1].sum())
    max_batches = int(-(-counts.max() // batch_size)) if B and counts.max() > 0 else 0
    s_sorted = np.argsort(s_owner, kind="stable")     # samples grouped by permuted client
    return {"s_row": s_row, "s_owner": s_owner, "r_owner": r_owner, "r_item": r_item, "r_label": r_label,
            "r_mult": r_mult, "counts": counts, "cperm": cperm, "rows_per": rows_per, "M": int(r_owner.size),
            "B1": B1, "M1": M1, "max_batches": max_batches, "s_sorted": s_sorted,
            "s_owner_sorted": s_owner[s_sorted]}


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
            step = max(1, min(4096, (256 << 20) // max(1, n_items * d * 4)))  # ≤ 256 MB at a time
            for start in range(0, n_users, step):
                stop = min(n_users, start + step)
                self.D[start:stop] = torch.as_tensor(d0, device=self.D.device).expand(stop - start, -1, -1)
                self._drop_private_pages(start, stop)
        # lazy SGD weight decay of the private tables: true D[u] = D_scale[u] * stored D[u]
        self.D_scale = torch.ones(n_users, dtype=torch.float64)
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
        self._memmap_array = array  # its mmap: resident pages are released after streaming passes
        return torch.from_numpy(array)

    # ------------------------------------------------------------------ checkpoints
    #: attributes carried from one round to the next (besides the private tables ``D``):
    #: client parameters, the server's tables, the lazy weight-decay scales, the decayed
    #: learning rates, the previous round's (λ, μ) (the ``square`` curriculum reads it) and
    #: the round counter.  Every random draw of round ``a`` comes from streams seeded by
    #: ``(seed, a)`` (DP noise included), so the round counter *is* the RNG state, and the
    #: DP accountant is a function of it too.
    _ROUND_STATE: tuple[str, ...] = ("w", "b", "C", "D_scale", "lr_network", "lr_args", "weights_prev", "round")

    def checkpoint_key(self, train: sp.csr_matrix, touched: sp.csr_matrix, target_round: int) -> str:
        """:func:`~recrepro.checkpoints.settings_key` of a fit: class, config, rounds, data."""
        config = asdict(self.config)
        config.pop("scratch_dir", None)  # where the memmap lives does not change the run
        if not (config["mode"] == "paper" and self.config.has_private_items):
            config.pop("paper_path", None)  # only paper mode with private tables has two paths
        return settings_key({"model": type(self).__name__, "config": config, "target_round": int(target_round),
                             "data": data_fingerprint(train, touched)})

    def round_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Everything a later round reads, plus the history: ``(state, side arrays)``.

        The private tables ``D`` (FedRAP's ``D⁽ⁱ⁾``, PFedRec's copies) go into the state when
        they are held in RAM; a disk-backed ``numpy.memmap`` is copied to a side ``.npy`` file
        instead (:func:`recrepro.checkpoints.save_checkpoint`), written in one streaming pass.
        """
        state = {name: getattr(self, name) for name in self._ROUND_STATE}
        state["history"] = self.history
        arrays: dict[str, np.ndarray] = {}
        if self.D is not None:
            if getattr(self, "private_storage", "dense") == "memmap":
                arrays["D"] = self.D.numpy()
            else:
                state["D"] = self.D
        return state, arrays

    def load_round_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`round_state` on a model set up by :meth:`init_state` (same shapes)."""
        for name in self._ROUND_STATE:
            value = state[name]
            if isinstance(value, torch.Tensor):
                value = value.to(getattr(self, name).device)
            elif isinstance(value, dict):  # FedNCF's network: a dict of tensors
                value = {k: v.to(self.device) for k, v in value.items()}
            setattr(self, name, value)
        self.history = list(state["history"])
        if self.D is not None:
            saved = state["D"]
            for lo in range(0, self.n_users, 256):  # chunked: the saved table may be a disk memmap
                hi = min(self.n_users, lo + 256)
                rows = saved[lo:hi]
                self.D[lo:hi] = (torch.from_numpy(np.array(rows)) if isinstance(rows, np.ndarray)
                                 else rows).to(self.D.device)

    # ------------------------------------------------------------------ training
    def fit(self, train: sp.csr_matrix, touched: sp.csr_matrix | None = None,
            eval_fn: Callable[[FederatedRecommender, int], dict[str, Any]] | None = None,
            rounds: int | None = None, *, checkpoint: str | Path | None = None,
            checkpoint_state: Any = None, checkpoint_min_seconds: float = 0.0) -> FederatedRecommender:
        """Train ``rounds`` rounds (default ``config.rounds``).

        Parameters
        ----------
        checkpoint:
            Resume from / save to this file after every round (:mod:`recrepro.checkpoints`):
            :meth:`round_state` plus the history; ``None``: no checkpointing.  Needs a fresh
            model (no earlier ``fit``).  A file of other settings or data, or an unreadable
            one, is ignored with a warning.  The caller deletes it when done.
        checkpoint_state:
            The caller's own state across rounds (e.g. what ``eval_fn`` accumulates): an
            object with ``state_dict()`` / ``load_state_dict(state)``, saved and restored
            with the model's.
        checkpoint_min_seconds:
            Write at most every this many seconds (default 0: every round; the last round is
            always written).
        """
        train = sp.csr_matrix(train)
        n_users, n_items = train.shape
        self.train_csr = train
        self.touched = sp.csr_matrix(touched) if touched is not None else train
        if self.w is None:
            self.init_state(n_users, n_items)
        elif checkpoint is not None:
            raise ValueError("checkpointing needs a fresh model (fit was called before)")
        target = self.round + (self.config.rounds if rounds is None else rounds)
        ckpt = None
        if checkpoint is not None:
            ckpt = Checkpointer(checkpoint, self.checkpoint_key(train, self.touched, target),
                                min_seconds=checkpoint_min_seconds)
            saved = ckpt.load()
            if saved is not None:
                self.load_round_state(saved)
                if checkpoint_state is not None:
                    checkpoint_state.load_state_dict(saved["caller"])
        while self.round < target:
            info = self.train_round()
            if eval_fn is not None and ((self.round % self.config.eval_every == 0)
                                        or self.round == self.config.rounds):
                info.update(eval_fn(self, self.round))
            self.history.append(info)
            if ckpt is not None:
                state, arrays = self.round_state()
                if checkpoint_state is not None:
                    state["caller"] = checkpoint_state.state_dict()
                ckpt.save(state, arrays=arrays, final=self.round >= target)
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
        dense = ((cfg.mode == "paper" and cfg.has_private_items and not self._uses_lazy_paper())
                 or cfg.dp_clip is not None)
        # the row path forms nothing of size B x n_items x d: all participants in one chunk
        chunk = (_chunk_size(self.n_items, cfg.dim, cfg.memory_budget_mb, participants.size) if dense
                 else max(1, participants.size))
        c_sum = torch.zeros_like(self.C, dtype=torch.float64)
        loss_sum, nnz_upload = 0.0, 0
        abs_sorted = None
        for start in range(0, participants.size, chunk):
            users = participants[start:start + chunk]
            owner, item, label = self.round_samples(users, rng)
            result = self.local_train(users, owner, item, label, lam, mu, rng)
            if "c_sum" in result:  # the lazy paper path sums its uploads itself
                c_sum += result["c_sum"]
                nnz_upload += result["nnz"]
            elif cfg.dp_clip is not None or "C" in result:
                up = self.dense_uploads(result)
                if cfg.dp_clip is not None:
                    up = self.privatise(up, rng)
                c_sum += up.sum(0, dtype=torch.float64)
                nnz_upload += int((up.abs() > _L1_THRESHOLD).sum())
                del up
            else:
                if abs_sorted is None:
                    abs_sorted = np.sort(self.C.abs().cpu().numpy().astype(np.float64).ravel())
                c_sum += self._row_upload_sum(result)
                nnz_upload += self._row_upload_nnz(result, abs_sorted)
            loss_sum += float(result["loss"].sum())
        new_c = (c_sum / participants.size).to(torch.float32)
        _check_finite("global item table C", new_c, f"round {a}")
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
                    lam: float, mu: float, rng: np.random.Generator) -> dict[str, Any]:
        """Local epochs of the clients ``users`` at once; writes back their private state.

        ``mode: paper`` with private tables (FedRAP's full-matrix regularisers touch every
        row of D⁽ⁱ⁾ and C at every step) runs the exact lazy form (:meth:`_local_train_lazy`),
        or, with ``paper_path: dense`` (and for DP, ``l1_update: prox``, ``fedrap_l2``), dense
        ``[B, n_items, d]`` tables (:meth:`_local_train_dense`); everything else (code mode, FedMF, PFedRec) only ever
        changes the rows of the items a client samples in the round, so it trains on those
        rows alone (:meth:`_local_train_rows`).  Use :meth:`dense_uploads` for the uploaded
        ``C_i`` as ``[B, n_items, d]``.
        """
        cfg = self.config
        if self._uses_lazy_paper():
            return self._local_train_lazy(users, owner, item, label, lam, mu, rng)
        if cfg.mode == "paper" and cfg.has_private_items:
            return self._local_train_dense(users, owner, item, label, lam, mu, rng)
        return self._local_train_rows(users, owner, item, label, lam, mu, rng)

    def _local_train_dense(self, users: np.ndarray, owner: np.ndarray, item: np.ndarray, label: np.ndarray,
                           lam: float, mu: float, rng: np.random.Generator) -> dict[str, Any]:
        """Local epochs of the clients ``users`` at once on dense per-client tables.

        Samples are kept flat (no padding to the busiest client): each epoch draws a
        random order inside every client (``DataLoader(shuffle=True)``), mini-batch ``t``
        of all clients is one step, per-client sums are ``index_add_`` segment sums.

        Returns ``{"C": uploaded [B, n_items, d], "loss": last running mean loss [B]}``.
        """
        cfg, dev = self.config, self.device
        B = users.size
        users_t = torch.as_tensor(users, device=dev)
        counts = np.bincount(owner, minlength=B)
        bs = cfg.batch_size
        max_batches = int(-(-counts.max() // bs)) if counts.size and counts.max() > 0 else 0

        w = self.w[users_t].clone()
        b = self.b[users_t].clone()
        if cfg.has_private_items:
            self._materialise_private(users)
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
            batch_of = client_batches(owner, counts, bs, rng)
            for t in range(max_batches):
                n_t = np.clip(counts - t * bs, 0, bs)
                step_on = active & (n_t > 0)
                if not step_on.any():
                    continue
                sel = np.flatnonzero((batch_of == t) & step_on[owner])
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
            mean, active = local_convergence(loss_acc, n_acc, prev_mean, active, epoch, cfg.tol)
            prev_mean = mean
            check_finite("client parameters", w, f"round {self.round} local epoch {epoch}")
            check_finite("client losses", loss_acc, f"round {self.round} local epoch {epoch}")
        self._materialise(C, D)
        self._dense_bufs = None
        # write back private state
        self.w[users_t] = w
        self.b[users_t] = b
        if D is not None and not in_place:
            self.D[users_t.cpu()] = D.to(self.D.device)
        elif cfg.keeps_personal_copy:
            self.D[users_t.cpu()] = C.to(self.D.device)
        return {"C": C, "loss": torch.as_tensor(np.nan_to_num(prev_mean))}

    def _uses_lazy_paper(self) -> bool:
        """Whether paper mode runs on :meth:`_local_train_lazy` (else :meth:`_local_train_dense`).

        The lazy form covers the paper's objective with the L1 subgradient (``fedrap``,
        ``fedrap_no``); the L2 ablation, the prox update and DP (which clips every client's
        dense upload) keep the dense path, as does ``paper_path: dense`` (kept for verification).
        """
        cfg = self.config
        return (cfg.mode == "paper" and cfg.has_private_items and cfg.paper_path == "lazy"
                and cfg.method != "fedrap_l2" and cfg.l1_update == "subgradient" and cfg.dp_clip is None)

    def _lazy_schedule(self, n_steps: int, lam: float, mu: float) -> dict[str, np.ndarray]:
        """Composite regulariser map after ``k = 0..n_steps`` steps of a client (float64).

        Between BCE touches an entry of client i follows (``X = D + C``, ``E = D − C``,
        ``s = sign C``, ``lr_k`` the client's k-th learning rate, ``sh = 1 − lr·l2``,
        ``g = sh + 4 lr λ/(n d)``, ``ν = μ/(n d)``)::

            X ← sh X − lr ν s,      E ← g E + lr ν s

        so, while s is constant, ``X_k = PX_k X_0 − s QX_k`` and ``E_k = PE_k E_0 + s QE_k``.
        Returns ``PX, PE, QX, QE`` of length ``n_steps + 1`` for the learning-rate schedule
        ``lr_k = lr_args · batch_decay^k`` (as float32, like the steps themselves).
        """
        cfg = self.config
        nd = float(self.n_items * cfg.dim)
        k = np.arange(n_steps)
        lr = (self.lr_args * cfg.batch_decay ** k).astype(np.float32).astype(np.float64)
        sh = 1.0 - lr * cfg.l2
        g = sh + 4.0 * lr * lam / nd
        m = lr * mu / nd
        out = {name: np.empty(n_steps + 1) for name in ("PX", "PE", "QX", "QE")}
        px, pe, qx, qe = 1.0, 1.0, 0.0, 0.0
        for step in range(n_steps + 1):  # a loop over local steps (≤ local_epochs × batches), not entries
            out["PX"][step], out["PE"][step], out["QX"][step], out["QE"][step] = px, pe, qx, qe
            if step < n_steps:
                px, qx = sh[step] * px, sh[step] * qx + m[step]
                pe, qe = g[step] * pe, g[step] * qe + m[step]
        return out

    def _private_blocks(self, users: np.ndarray, block_bytes: int = 4 << 20):
        """Yield ``(lo, hi, table)`` over cache-sized blocks of the stored private tables of ``users``.

        ``table`` is ``[hi − lo, n_items, d]`` in stored units (true = ``D_scale`` × stored):
        a view (written in place) when ``users`` are consecutive, else a copy written back
        after the consumer's turn.  Pages of a disk-backed table are released after each
        block, so streaming over it does not grow the resident set.
        """
        per = self.n_items * self.config.dim * 4
        step = max(1, block_bytes // per)
        consecutive = users.size > 0 and bool(np.all(np.diff(users) == 1))
        for lo in range(0, users.size, step):
            hi = min(users.size, lo + step)
            if consecutive:
                first = int(users[0])
                yield lo, hi, self.D[first + lo:first + hi]
                self._drop_private_pages(first + lo, first + hi)
            else:
                idx = torch.as_tensor(users[lo:hi])
                table = self.D[idx]
                yield lo, hi, table
                self.D[idx] = table
                self._drop_private_pages()

    def _private_rows(self, index: torch.Tensor) -> torch.Tensor:
        """Rows ``index`` of the stored private tables viewed as ``[-1, d]``.

        A disk-backed table is read in address order, in pieces that span at most
        :data:`_MEMMAP_PIECE_BYTES` of the file, releasing the mapped pages after each piece:
        a page fault maps a whole (up to 2 MB) folio of the file, so one scattered gather
        (1,874 rows, one per LastFM user) would otherwise make the whole 4 GB file resident.
        """
        table = self.D.view(-1, self.config.dim)
        index = index.to(self.D.device)
        if getattr(self, "private_storage", "dense") != "memmap":
            return table.index_select(0, index)
        out = torch.empty((index.numel(), table.shape[1]), dtype=table.dtype)
        for order, rows in self._memmap_pieces(index, table.shape[1]):
            out[order] = table.index_select(0, rows)
            self._drop_private_pages()
        return out

    def _write_private_rows(self, index: torch.Tensor, values: torch.Tensor, width: int | None = None) -> None:
        """``stored[index] = values`` on the private tables viewed as ``[-1, width]`` (default
        ``d``; ``width = 1``: single entries), in pieces as :meth:`_private_rows`."""
        width = width or self.config.dim
        table = self.D.view(-1, width) if width != 1 else self.D.view(-1)
        index, values = index.to(self.D.device), values.to(self.D.device)
        if getattr(self, "private_storage", "dense") != "memmap":
            table.index_copy_(0, index, values)
            return
        for order, rows in self._memmap_pieces(index, width):
            table.index_copy_(0, rows, values[order])
            self._drop_private_pages()

    @staticmethod
    def _memmap_pieces(index: torch.Tensor, width: int):
        """Yield ``(positions in index, sorted row ids)`` per piece of at most
        :data:`_MEMMAP_PIECE_BYTES` of distinct 2 MB file regions (rows of ``width`` floats)."""
        if index.numel() == 0:
            return
        order = torch.argsort(index)
        rows = index[order]
        region = (rows * (width * 4)) >> 21
        first = torch.ones_like(region, dtype=torch.bool)
        first[1:] = region[1:] != region[:-1]
        piece = (torch.cumsum(first, 0) - 1) // (_MEMMAP_PIECE_BYTES >> 21)
        bounds = torch.searchsorted(piece, torch.arange(int(piece[-1]) + 2)).tolist()
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            yield order[lo:hi], rows[lo:hi]

    def _drop_private_pages(self, lo: int | None = None, hi: int | None = None) -> None:
        """Release the resident pages of a disk-backed private table (users ``lo:hi``, or all).

        ``MADV_DONTNEED`` on a shared file mapping keeps the data (dirty pages go to the page
        cache); it only stops them counting in this process's RSS.  No-op for RAM tables.
        """
        array = getattr(self, "_memmap_array", None)
        handle = getattr(array, "_mmap", None)
        if (getattr(self, "private_storage", "dense") != "memmap" or handle is None
                or not hasattr(mmap, "MADV_DONTNEED")):
            return
        per = self.n_items * self.config.dim * 4
        start = 0 if lo is None else (lo * per) // mmap.PAGESIZE * mmap.PAGESIZE
        stop = len(handle) if hi is None else min(len(handle), hi * per)
        if stop > start:
            handle.madvise(mmap.MADV_DONTNEED, start, stop - start)

    def _local_train_lazy(self, users: np.ndarray, owner: np.ndarray, item: np.ndarray, label: np.ndarray,
                          lam: float, mu: float, rng: np.random.Generator) -> dict[str, Any]:
        """Paper mode (full-matrix regularisers) without dense per-step passes; exact.

        Paper-mode gradients of client i at every local step (poster objective, normalised by
        ``n d`` = n_items·d; ``a_k = wt_k(σ(s_k) − r_k)/n_batch`` on the batch rows, 0 elsewhere)::

            ∂L/∂D = a w − 2λ(D − C)/(n d),   ∂L/∂C = a w + 2λ(D − C)/(n d) + μ sign(C)/(n d)

        i.e. with ``X = D + C``, ``E = D − C``, ``s = sign C``, ``sh = 1 − lr·l2``,
        ``g = sh + 4 lr λ/(n d)``, ``ν = μ/(n d)``::

            X ← sh X − 2 lr a w − lr ν s,      E ← g E + lr ν s.

        Three kinds of entries:

        * the **rows the client samples** this round (compact ``[M, d]`` tables as in the
          row path): stepped exactly, every step of the client, by :meth:`_paper_row_step`;
        * **entries that may change sign** (``C`` can cross zero during the round) in the
          other rows: found once per round by a conservative bound and replayed step by step
          as a flat list (:meth:`_paper_entry_step`);
        * **all other entries**: ``a = 0`` and ``s`` constant, so the map is affine with
          per-client scalars (:meth:`_lazy_schedule`), applied once at the end of the round;
          their share of the loss (``−λ‖D − C‖²``, ``μ‖C‖₁``, needed by the early stop) is a
          closed form in per-client sums taken at the start of the round.

        The sign bound: after k steps ``C_k = u_k C_0 − v_k D_0 − s q_k`` (``u = (PX+PE)/2``,
        ``v = (PE−PX)/2 ≥ 0``, ``q = (QX+QE)/2``), so ``s·C_k ≥ |C_0| u_k − |D_0| v_k − q_k``;
        an entry is replayed unless this is positive (with a margin for rounding) for every
        ``k < K_i``, ``K_i`` = the client's most steps this round (early stop only shortens).
        Only two streaming passes over the private tables per round remain (start: sums and
        the bound; end: apply the map, sum the uploads), in cache-sized blocks.

        Returns ``{"c_sum": Σ_i C_i (float64 [n_items, d]), "nnz": entries with |C_i| > 1e-4,
        "loss": [B], "lazy": what :meth:`dense_uploads` needs}``.
        """
        cfg, dev = self.config, self.device
        B, d, n_items = users.size, cfg.dim, self.n_items
        nd = n_items * d
        bs = cfg.batch_size
        lay = _row_layout(owner, item, label, B, n_items, bs)
        s_row, s_owner, r_owner, r_item, r_label, r_mult = (lay[k] for k in (
            "s_row", "s_owner", "r_owner", "r_item", "r_label", "r_mult"))
        counts, cperm, rows_per, M, B1, M1, max_batches = (lay[k] for k in (
            "counts", "cperm", "rows_per", "M", "B1", "M1", "max_batches"))
        s_sorted, s_owner_sorted = lay["s_sorted"], lay["s_owner_sorted"]
        users_p = users[cperm]
        crank = np.empty(B, np.int64)
        crank[cperm] = np.arange(B)

        own_t = torch.as_tensor(r_owner, device=dev)
        item_t = torch.as_tensor(r_item, device=dev)
        lab_t = torch.as_tensor(r_label, device=dev)
        crow = torch.as_tensor(np.concatenate([[0], np.cumsum(rows_per)]), device=dev)
        users_t = torch.as_tensor(users_p, device=dev)
        w = self.w[users_t].clone()
        C0 = self.C
        S0 = torch.sign(C0)
        C0f, S0f = C0.reshape(-1), S0.reshape(-1)
        scale_p = self.D_scale[torch.as_tensor(users_p)].clone()          # float64, permuted order
        store_idx = torch.as_tensor(users_p[r_owner] * n_items + r_item)
        Dr0 = self._private_rows(store_idx).to(dev)
        Dr0.mul_(scale_p.to(dev, torch.float32)[own_t][:, None])
        Cr0 = C0.index_select(0, item_t)
        X, E = Dr0 + Cr0, Dr0 - Cr0

        # ---- the bound on sign changes, over each client's longest possible schedule
        K = cfg.local_epochs * (-(-counts // bs))                         # most steps per client
        n_max = int(K.max()) if B else 0
        sched = self._lazy_schedule(n_max, lam, mu)
        can_flip = mu > 0 and n_max >= 2
        U = np.full(B, np.inf)
        V = np.zeros(B)
        Q = np.full(B, -1.0)                                              # -1: never at risk
        if can_flip:
            u = (sched["PX"] + sched["PE"]) / 2
            v = (sched["PE"] - sched["PX"]) / 2
            q = (sched["QX"] + sched["QE"]) / 2
            u_min = np.minimum.accumulate(u[1:])                          # over k = 1..K-1
            v_max, q_max = np.maximum.accumulate(v[1:]), np.maximum.accumulate(q[1:])
            multi_step = K >= 2
            last = np.maximum(K - 2, 0)
            # margins: the replayed/dense float32 values differ from exact ones by rounding
            U = np.where(multi_step, u_min[last] * (1 - 1e-5), np.inf)
            V = np.where(multi_step, v_max[last] * (1 + 1e-5) * scale_p.numpy(), 0.0)
            Q = np.where(multi_step, q_max[last] * (1 + 1e-5) + 1e-6, -1.0)

        def to_orig(values: np.ndarray) -> np.ndarray:
            out = np.empty_like(values)
            out[cperm] = values
            return out

        U_o, V_o, Q_o = (torch.as_tensor(to_orig(a), dtype=torch.float32, device=dev) for a in (U, V, Q))
        touched = torch.zeros((B, n_items), dtype=torch.bool, device=dev)
        touched[torch.as_tensor(cperm[r_owner], device=dev), item_t] = True
        absC0 = C0.abs()
        CS = torch.stack([C0f, S0f])                                      # [2, n d]
        absC0f = absC0.reshape(-1)
        # columns by |C0|: a block's candidate columns are a prefix / a slice of this order
        abs_sorted, abs_order = torch.sort(absC0f)
        n_zero = int(torch.count_nonzero(absC0f == 0))
        sq = torch.empty(B, dtype=torch.float64)
        dots = torch.empty((B, 2), dtype=torch.float64)
        amax = torch.empty(B, dtype=torch.float64)                        # max |stored| per client
        risk_client, risk_pos, risk_val = [], [], []
        for lo, hi, table in self._private_blocks(users):                 # start-of-round pass
            flat = table.to(dev).reshape(hi - lo, nd)
            sq[lo:hi] = torch.linalg.vector_norm(flat, dim=1).double().cpu() ** 2
            dots[lo:hi] = torch.mm(CS, flat.T).T.double().cpu()
            top = torch.maximum(flat.amax(1), flat.amin(1).neg_())  # (aminmax is ~15x slower here)
            amax[lo:hi] = top.double().cpu()
            if can_flip:
                # screen: only columns whose |C0| is below the block's largest threshold can fail
                # the bound (|D0| v + q ≥ |C0| u); the exact test runs on those columns alone
                reach = ((top * V_o[lo:hi] + Q_o[lo:hi]) / U_o[lo:hi]).max().reshape(1)
                cand = abs_order[:int(torch.searchsorted(abs_sorted, reach, right=True))]
                if cand.numel():
                    sub = flat.index_select(1, cand)
                    lhs = torch.abs(sub).mul_(V_o[lo:hi, None]).add_(Q_o[lo:hi, None])
                    risky = lhs >= absC0f[cand] * U_o[lo:hi, None]
                    risky &= ~touched[lo:hi].index_select(1, cand // d)
                    rows, cols = torch.nonzero(risky, as_tuple=True)
                    if rows.numel():
                        risk_client.append(rows + lo)
                        risk_pos.append(cand[cols])
                        risk_val.append(sub[rows, cols])
        # the replayed entries, grouped by permuted client
        if risk_client:
            e_client = torch.as_tensor(crank, device=dev)[torch.cat(risk_client)]
            order = torch.argsort(e_client, stable=True)
            e_own, e_pos = e_client[order], torch.cat(risk_pos)[order]
            e_D0 = torch.cat(risk_val)[order] * scale_p.to(dev, torch.float32)[e_own]
        else:
            e_own = torch.zeros(0, dtype=torch.int64, device=dev)
            e_pos = torch.zeros(0, dtype=torch.int64, device=dev)
            e_D0 = torch.zeros(0, device=dev)
        e_C0 = C0f.index_select(0, e_pos)
        Xe, Ee = e_D0 + e_C0, e_D0 - e_C0
        e_crow = torch.as_tensor(np.concatenate([[0], np.cumsum(np.bincount(e_own.cpu().numpy(), minlength=B))]),
                                 device=dev)

        # ---- per-client sums over the lazily mapped entries (all − sampled rows − replayed)
        sc = scale_p.numpy()
        sq_p, dots_p = sq.numpy()[cperm], dots.numpy()[cperm]
        sumC2, sumAbsC = float((C0.double() ** 2).sum()), float(C0.double().abs().sum())
        n_sign = float(torch.count_nonzero(S0f))
        sD0S = sc * dots_p[:, 1]
        lazy_E2 = sc ** 2 * sq_p - 2 * sc * dots_p[:, 0] + sumC2
        lazy_sE = sD0S - sumAbsC
        lazy_sX = sD0S + sumAbsC
        lazy_n = np.full(B, n_sign)

        def per_client(own, values):  # per-client sums (float64) of per-row or per-entry values
            values = values if values.dim() == 1 else values.sum(1)
            return torch.zeros(B, dtype=torch.float64).index_add_(0, own.cpu(), values.double().cpu()).numpy()

        for own, D0v, C0v in ((own_t, Dr0, Cr0), (e_own, e_D0, e_C0)):
            if own.numel() == 0:
                continue
            S0v, E0v = torch.sign(C0v), D0v - C0v
            lazy_E2 -= per_client(own, E0v * E0v)
            lazy_sE -= per_client(own, S0v * E0v)
            lazy_sX -= per_client(own, S0v * (D0v + C0v))
            lazy_n -= per_client(own, S0v * S0v)
        PX, PE, QX, QE = np.ones(B), np.ones(B), np.zeros(B), np.zeros(B)

        # ---- local epochs (as the row path; every step also maps the client's non-batch rows)
        bufs = {"wf": torch.empty_like(X), "t": torch.empty_like(X), "s": torch.empty_like(X)}
        steps_done = np.zeros(B, np.int64)
        active = counts > 0
        loss_acc, n_acc = np.zeros(B), np.zeros(B)
        prev_mean = np.full(B, np.nan)
        for epoch in range(cfg.local_epochs):
            if not active.any():
                break
            batch_of = np.empty(owner.size, np.int64)
            batch_of[s_sorted] = client_batches(s_owner_sorted, counts, bs, rng)
            for t in range(max_batches):
                n_t = np.clip(counts - t * bs, 0, bs)
                step_on = active & (n_t > 0)
                if not step_on.any():
                    continue
                lo, c0 = (0, 0) if t == 0 else (M1, B1)   # later batches: big clients only (the tail)
                el = int(e_crow[c0])
                mask = (batch_of == t) & step_on[s_owner]
                wt = r_mult if mask.all() else np.bincount(s_row[mask], minlength=M).astype(np.float32)
                n_c = np.where(step_on, n_t, 0)[c0:]
                lr_scale = torch.as_tensor(np.where(step_on, cfg.batch_decay ** steps_done, 0.0)[c0:], device=dev)
                lr_arg = (self.lr_args * lr_scale).to(torch.float32)
                sl = slice(lo, M)
                bce, e2, l1 = self._paper_row_step(
                    w[c0:], X[sl], E[sl], own_t[sl] - c0, lab_t[sl], torch.as_tensor(wt[lo:], device=dev),
                    torch.as_tensor(n_c, dtype=torch.float32, device=dev), crow[c0:] - lo, lam, mu,
                    lr_scale, lr_arg, {k: v[:M - lo] for k, v in bufs.items()})
                e2, l1 = e2.double().cpu().numpy(), l1.double().cpu().numpy()
                if Xe.numel() > el:
                    re2, rl1 = self._paper_entry_step(Xe[el:], Ee[el:], e_own[el:] - c0, e_crow[c0:] - el,
                                                      lam, mu, lr_arg)
                    e2, l1 = e2 + re2.double().cpu().numpy(), l1 + rl1.double().cpu().numpy()
                # lazily mapped entries: their sums at the pre-step values, then advance the map
                cs = slice(c0, B)
                e2 += PE[cs] ** 2 * lazy_E2[cs] + 2 * PE[cs] * QE[cs] * lazy_sE[cs] + QE[cs] ** 2 * lazy_n[cs]
                l1 += (PX[cs] * lazy_sX[cs] - PE[cs] * lazy_sE[cs] - (QX[cs] + QE[cs]) * lazy_n[cs]) / 2
                lr64 = lr_arg.double().cpu().numpy()
                sh = 1.0 - lr64 * cfg.l2
                g = sh + 4.0 * lr64 * lam / nd
                m = lr64 * mu / nd
                PX[cs], QX[cs] = sh * PX[cs], sh * QX[cs] + m
                PE[cs], QE[cs] = g * PE[cs], g * QE[cs] + m
                batch_loss = bce.double().cpu().numpy() - lam * e2 / nd + mu * l1 / nd
                on = step_on[c0:]
                loss_acc[c0:] += np.where(on, batch_loss * n_c, 0.0)
                n_acc[c0:] += np.where(on, n_c, 0)
                steps_done += step_on
            mean, active = local_convergence(loss_acc, n_acc, prev_mean, active, epoch, cfg.tol)
            prev_mean = mean
            check_finite("client parameters", w, f"round {self.round} local epoch {epoch}")
            check_finite("client losses", loss_acc, f"round {self.round} local epoch {epoch}")
        del bufs

        # ---- end of round: the lazy map on every entry, then the exact rows/entries over it
        alpha, beta = (PX + PE) / 2, (PX - PE) / 2            # C_T = α C0 + β D0 − γ s
        gamma, delta = (QX + QE) / 2, (QE - QX) / 2           # D_T = α D0 + β C0 + δ s
        new_scale = scale_p.numpy() * alpha
        alpha_o, gamma_o = to_orig(alpha), to_orig(gamma)
        def f32(values):
            return torch.as_tensor(values, dtype=torch.float32, device=dev)

        beta_st = f32(to_orig(beta * sc))                     # β D0 = (β·scale) stored
        up_coef = f32(np.stack([alpha_o, -gamma_o], 1))
        d_coef = f32(to_orig(np.stack([beta, delta], 1) / new_scale[:, None]))
        c_acc = torch.zeros(nd, device=dev)  # Σ_i β_i D0_i: a small correction, float32 suffices
        # entries with |C_i| > 1e-4 among the lazily mapped uploads C = s(α|C0| − γ) + β D0: certain
        # from |C0| alone unless |α|C0| − γ| is within |β|·max|D0| of the threshold (then exact)
        thr = _L1_THRESHOLD
        abs_sorted64 = abs_sorted.double()
        ag = torch.as_tensor(np.stack([alpha_o, gamma_o], 1), device=dev)  # float64
        hi_cut = torch.as_tensor((gamma_o + thr) / alpha_o, device=dev)
        lo_cut = torch.as_tensor((gamma_o - thr) / alpha_o, device=dev)
        nnz = int((abs_sorted64.numel() - torch.searchsorted(abs_sorted64, hi_cut, right=True)).sum()
                  + torch.searchsorted(abs_sorted64, lo_cut, right=False).sum())
        reach_all = torch.as_tensor(np.abs(to_orig(beta)) * to_orig(sc), device=dev) * amax.to(dev)
        for lo, hi, table in self._private_blocks(users):     # end-of-round pass
            flat = table.to(dev).view(hi - lo, nd)
            c_acc.addmv_(flat.T, beta_st[lo:hi])
            w_blk = reach_all[lo:hi]
            band = torch.stack([((ag[lo:hi, 1] - thr - w_blk) / ag[lo:hi, 0]).min() * (1 - 1e-6) - 1e-12,
                                ((ag[lo:hi, 1] + thr + w_blk) / ag[lo:hi, 0]).max() * (1 + 1e-6) + 1e-12])
            k_lo, k_hi = torch.searchsorted(abs_sorted64, band, right=True).tolist()
            # C0 = 0 entries (lazy C = β D0, not the sign formula) are always evaluated
            cand = (abs_order[:k_hi] if k_lo == 0
                    else torch.cat([abs_order[:n_zero], abs_order[max(k_lo, n_zero):k_hi]]))
            if cand.numel():
                a_blk, g_blk = up_coef[lo:hi, 0:1], -up_coef[lo:hi, 1:2]
                abs_cand = absC0f[cand].double()
                certain = (abs_cand > hi_cut[lo:hi, None]) | (abs_cand < lo_cut[lo:hi, None])  # counted above
                exact = (flat.index_select(1, cand) * beta_st[lo:hi, None]
                         + a_blk * C0f[cand] - g_blk * S0f[cand]).abs() > thr
                nnz += int(torch.count_nonzero(exact)) - int(torch.count_nonzero(certain))
            flat.addmm_(d_coef[lo:hi], CS)                    # stored' = stored + (β C0 + δ s)/(α scale)
            if flat.data_ptr() != table.data_ptr():           # a table on another device
                table.copy_(flat.view_as(table))
        c_sum = (C0.double() * alpha.sum() - S0.double() * gamma.sum()).add_(c_acc.view(n_items, d).double())

        def lazy_value(own, C0v, D0v):                        # the lazy map's C where exact values replace it
            col = (lambda a: f32(a)[own]) if D0v.dim() == 1 else (lambda a: f32(a)[own][:, None])
            return col(alpha) * C0v + col(beta) * D0v - col(gamma) * torch.sign(C0v)

        Cr = torch.sub(X, E).mul_(0.5)
        Dr = X.add_(E).mul_(0.5)
        Ce, De = torch.sub(Xe, Ee).mul_(0.5), Xe.add_(Ee).mul_(0.5)
        del E, Ee
        _check_finite("client item rows", Cr, f"round {self.round}")

        def n_up(values):
            return int(torch.count_nonzero(values.abs() > _L1_THRESHOLD))

        lazy_r = lazy_value(own_t, Cr0, Dr0)
        c_sum.index_add_(0, item_t, (Cr - lazy_r).double())
        nnz += n_up(Cr) - n_up(lazy_r)
        if Ce.numel():
            lazy_e = lazy_value(e_own, e_C0, e_D0)
            c_sum.view(-1).index_add_(0, e_pos, (Ce - lazy_e).double())
            nnz += n_up(Ce) - n_up(lazy_e)
        ns = f32(new_scale)
        self._write_private_rows(store_idx, Dr.div_(ns[own_t][:, None]))
        e_store = torch.as_tensor(users_p, device=dev)[e_own] * nd + e_pos
        self._write_private_rows(e_store, De.div_(ns[e_own]), width=1)
        users_cpu = torch.as_tensor(users_p)
        self.D_scale[users_cpu] = torch.as_tensor(new_scale)
        drift = users_p[(new_scale < 1e-3) | (new_scale > 1e3)]
        if drift.size:
            self._materialise_private(drift)
        self.w[users_t] = w
        loss_out = np.empty(B)
        loss_out[cperm] = np.nan_to_num(prev_mean)
        orig = torch.as_tensor(cperm, device=dev)
        return {"c_sum": c_sum, "nnz": nnz, "loss": torch.as_tensor(loss_out),
                "lazy": {"users": users, "C0": C0, "alpha": alpha_o, "beta": to_orig(beta), "gamma": gamma_o,
                         "delta": to_orig(delta), "rows": (orig[own_t], item_t, Cr),
                         "entries": (orig[e_own], e_pos, Ce)}}

    def _paper_row_step(self, w, X, E, own, lab, wt, n_c, crow, lam, mu, lr_scale, lr_arg,
                        bufs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One paper-mode SGD step of clients ``0..len(w)`` on their sampled rows, in place.

        As :meth:`_row_step`, but the full-matrix regularisers act on every row of a stepping
        client (not only its batch rows): ``X ← sh X − 2 lr a_k w_i − lr ν s``,
        ``E ← g E + lr ν s`` (``g = sh + 4 lr λ/(n d)``, ``ν = μ/(n d)``, ``s = sign C``;
        see :meth:`_local_train_lazy`).  Returns per client the batch BCE, and ``Σ (D − C)²``
        and ``Σ |C|`` over these rows at the pre-step values (the caller adds the other
        entries' shares and forms the loss).
        """
        cfg = self.config
        nd = float(self.n_items * cfg.dim)
        Bc = w.shape[0]
        M = X.shape[0]
        wf = torch.index_select(w, 0, own, out=bufs["wf"])

        def seg(values):  # per-client sums of a row vector
            return torch.segment_reduce(values, "sum", offsets=crow, axis=0)

        s = torch.einsum("kd,kd->k", X, wf)
        p = torch.sigmoid(s)
        bce = -(lab * torch.clamp(torch.log(p), min=-100) + (1 - lab) * torch.clamp(torch.log1p(-p), min=-100))
        n_safe = torch.clamp(n_c, min=1.0)
        nk = n_safe.index_select(0, own)
        loss = seg(wt * bce) / n_safe
        a_k = wt * (p - lab) / nk
        A = torch.sparse_csr_tensor(crow, torch.arange(M, device=X.device), a_k, size=(Bc, M),
                                    check_invariants=False)
        g_w = A @ X
        lr_net = (self.lr_network * lr_scale).to(torch.float32)
        lr_k = lr_arg.index_select(0, own)
        e2 = seg(torch.einsum("kd,kd->k", E, E))
        T = torch.sub(X, E, out=bufs["t"])                    # 2C
        S = torch.sign(T, out=bufs["s"])
        l1 = seg(torch.einsum("kd,kd->k", T, S)) / 2
        sh = 1 - lr_k * cfg.l2
        X.mul_(sh[:, None])
        X.addcmul_(wf, (-2 * lr_k * a_k)[:, None])
        E.mul_((sh + 4 * lam / nd * lr_k)[:, None])
        if mu:
            m_k = lr_k * (mu / nd)
            X.addcmul_(S, (-m_k)[:, None])
            E.addcmul_(S, m_k[:, None])
        w.sub_(lr_net[:, None] * (g_w + cfg.l2 * w))
        return loss, e2, l1

    def _paper_entry_step(self, Xe, Ee, own, crow, lam, mu, lr_arg) -> tuple[torch.Tensor, torch.Tensor]:
        """One paper-mode step of the replayed entries (``C`` may cross zero), in place.

        Flat entries of unsampled rows, grouped by client (``crow``): the regulariser map
        ``X ← sh X − lr ν s``, ``E ← g E + lr ν s`` with ``s = sign C`` read at this step.
        Returns per client ``Σ (D − C)²`` and ``Σ |C|`` at the pre-step values.
        """
        cfg = self.config
        nd = float(self.n_items * cfg.dim)
        lr_k = lr_arg.index_select(0, own)

        def seg(values):
            return torch.segment_reduce(values, "sum", offsets=crow, axis=0)

        T = Xe - Ee
        S = torch.sign(T)
        e2, l1 = seg(Ee * Ee), seg(T * S) / 2
        sh = 1 - lr_k * cfg.l2
        m_k = lr_k * (mu / nd)
        Xe.mul_(sh).addcmul_(S, -m_k)
        Ee.mul_(sh + 4 * lam / nd * lr_k).addcmul_(S, m_k)
        return e2, l1

    def _local_train_rows(self, users: np.ndarray, owner: np.ndarray, item: np.ndarray, label: np.ndarray,
                          lam: float, mu: float, rng: np.random.Generator) -> dict[str, Any]:
        """Local epochs of the clients ``users`` at once, on the rows they sample (code mode).

        Without the paper's full-matrix regularisers a client's step changes only the rows
        of its batch items (BCE, the code's batch-row ``mse``/``abs`` terms) and shrinks all
        its parameters by ``1 − lr·l2`` (SGD weight decay).  So each round gathers the
        ``M`` distinct (client, item) rows of the round's samples once into compact
        ``[M, d]`` tables (every client's local C starts from the server's C; private D
        rows come from storage) and runs every step on them; the weight decay of the
        untouched rows is one scalar per client (``shrink``): the uploaded ``C_i`` is
        ``shrink_i · C`` with the compact rows written over it, and the private tables
        fold ``shrink_i`` into the lazy ``D_scale``.  Nothing of size ``B × n_items × d``
        is formed.

        Implementation.  An item a client samples twice (a repeated negative) is one row;
        mini-batches are cut from the client's *samples* (as its ``DataLoader``), and a
        row enters a step with the number of its samples in the client's batch as weight.
        A client's samples all carry the same label per item (positives are never drawn
        as negatives).  Clients with a single batch are ordered first, so the later
        batches of the big clients are a contiguous tail of the row tables.  FedRAP trains ``X = D + C`` and
        ``E = D − C`` (the score needs ``X``, the code's regulariser ``E``), which turns
        a step into a few in-place passes over preallocated buffers (see :meth:`_row_step`).

        Returns ``{"rows": (owner[M], item[M], C rows [M, d]), "shrink": [B], "loss": [B]}``.
        """
        cfg, dev = self.config, self.device
        B, d, n_items = users.size, cfg.dim, self.n_items
        bs = cfg.batch_size
        lay = _row_layout(owner, item, label, B, n_items, bs)
        s_row, s_owner, r_owner, r_item, r_label, r_mult = (lay[k] for k in (
            "s_row", "s_owner", "r_owner", "r_item", "r_label", "r_mult"))
        counts, cperm, rows_per, M, B1, M1, max_batches = (lay[k] for k in (
            "counts", "cperm", "rows_per", "M", "B1", "M1", "max_batches"))
        s_sorted, s_owner_sorted = lay["s_sorted"], lay["s_owner_sorted"]
        users_p = users[cperm]

        own_t = torch.as_tensor(r_owner, device=dev)
        item_t = torch.as_tensor(r_item, device=dev)
        lab_t = torch.as_tensor(r_label, device=dev)
        crow = torch.as_tensor(np.concatenate([[0], np.cumsum(rows_per)]), device=dev)
        users_t = torch.as_tensor(users_p, device=dev)
        w = self.w[users_t].clone()
        b = self.b[users_t].clone()
        X = self.C.index_select(0, item_t)                # C rows; X = D + C below
        E = None
        store_idx = None
        if cfg.has_private_items:
            store_idx = torch.as_tensor(users_p[r_owner] * n_items + r_item)
            Dc = self._private_rows(store_idx).to(dev)
            scale = self.D_scale[torch.as_tensor(users_p)].to(dev, torch.float32)
            if bool((scale != 1).any()):
                Dc.mul_(scale[own_t][:, None])
            E = Dc - X
            X.add_(Dc)
            del Dc
        bufs = {"wf": torch.empty_like(X), "t": torch.empty_like(X) if E is not None else None,
                "s": torch.empty_like(X) if E is not None else None}
        shrink_c = torch.ones(B, dtype=torch.float64, device=dev)
        steps_done = np.zeros(B, np.int64)
        active = counts > 0
        loss_acc, n_acc = np.zeros(B), np.zeros(B)
        prev_mean = np.full(B, np.nan)
        for epoch in range(cfg.local_epochs):
            if not active.any():
                break
            # mini-batches of samples (as the per-client DataLoader); a row's weight in a step
            # is the number of its samples in the client's batch
            batch_of = np.empty(owner.size, np.int64)
            batch_of[s_sorted] = client_batches(s_owner_sorted, counts, bs, rng)
            for t in range(max_batches):
                n_t = np.clip(counts - t * bs, 0, bs)
                step_on = active & (n_t > 0)
                if not step_on.any():
                    continue
                lo, c0 = (0, 0) if t == 0 else (M1, B1)   # later batches: big clients only (the tail)
                mask = (batch_of == t) & step_on[s_owner]
                if mask.all():
                    wt = r_mult
                else:
                    wt = np.bincount(s_row[mask], minlength=M).astype(np.float32)
                wt = wt[lo:]
                n_c = np.where(step_on, n_t, 0)[c0:]
                lr_scale = np.where(step_on, cfg.batch_decay ** steps_done, 0.0)[c0:]
                sl = slice(lo, M)
                out = self._row_step(
                    w[c0:], b[c0:], X[sl], None if E is None else E[sl], own_t[sl] - c0, lab_t[sl],
                    torch.as_tensor(wt, device=dev), torch.as_tensor(n_c, dtype=torch.float32, device=dev),
                    crow[c0:] - lo, lam, mu, torch.as_tensor(lr_scale, device=dev), shrink_c[c0:],
                    {k: (v[:M - lo] if v is not None else None) for k, v in bufs.items()})
                on = step_on[c0:]
                batch_loss = out.double().cpu().numpy()
                loss_acc[c0:] += np.where(on, batch_loss * n_c, 0.0)
                n_acc[c0:] += np.where(on, n_c, 0)
                steps_done += step_on
            mean, active = local_convergence(loss_acc, n_acc, prev_mean, active, epoch, cfg.tol)
            prev_mean = mean
            check_finite("client parameters", w, f"round {self.round} local epoch {epoch}")
            check_finite("client losses", loss_acc, f"round {self.round} local epoch {epoch}")
        del bufs
        if E is not None:
            Dc = (X + E).mul_(0.5)
            Cc = X.sub_(E).mul_(0.5)
            del E
        else:
            Dc, Cc = None, X
        _check_finite("client item rows", Cc, f"round {self.round}")
        self.w[users_t] = w
        self.b[users_t] = b
        users_cpu = torch.as_tensor(users_p)
        shrink_cpu = shrink_c.cpu()
        if Dc is not None:
            # D and C of a client share the learning rate and weight decay: same shrink
            new_scale = self.D_scale[users_cpu] * shrink_cpu
            self.D_scale[users_cpu] = new_scale
            stored = Dc.div_(new_scale.to(dev, torch.float32)[own_t][:, None])
            self._write_private_rows(store_idx, stored)
            small = users_p[(new_scale < 1e-3).numpy()]
            if small.size:
                self._materialise_private(small)
        elif cfg.keeps_personal_copy:
            # PFedRec: the client keeps its fine-tuned copy: shrink_i · C with its rows written over
            self.D[users_cpu] = self.C.to(self.D.device)[None]
            self.D_scale[users_cpu] = shrink_cpu
            stored = Cc / shrink_c.to(torch.float32)[own_t][:, None]
            store = torch.as_tensor(users_p[r_owner] * n_items + r_item)
            self.D.view(-1, d).index_copy_(0, store.to(self.D.device), stored.to(self.D.device))
        # back to the caller's client order
        orig = torch.as_tensor(cperm, device=dev)
        shrink_out = torch.empty_like(shrink_c)
        shrink_out[orig] = shrink_c
        loss_out = np.empty(B)
        loss_out[cperm] = np.nan_to_num(prev_mean)
        return {"rows": (orig[own_t], item_t, Cc), "shrink": shrink_out, "B": B,
                "loss": torch.as_tensor(loss_out)}

    def _row_step(self, w, b, X, E, own, lab, wt, n_c, crow, lam, mu, lr_scale, shrink_c, bufs) -> torch.Tensor:
        """One SGD step of clients ``0..len(w)`` on their rows ``X`` (``E``), in place.

        Row k belongs to client ``own[k]`` (rows sorted by client, ``crow`` the CSR row
        pointer); ``wt[k]`` is its multiplicity in the client's current batch (0 if not in
        it), ``n_c`` the batch size of each client, ``lr_scale`` the per-client learning-rate
        factor (0: client not stepping).  With ``a_k = wt_k (σ(s_k) − r_k)/n``,
        ``c_k = 2λ wt_k/(n d)``, ``m_k = μ wt_k/(n d)`` and ``sh = 1 − lr·l2`` the code's
        gradients (``∂/∂D = a w − c (D−C)``, ``∂/∂C = a w + c (D−C) + m sign C``) give::

            X ← sh X − lr (2 a_k w_i + m_k sign C)        (X = D + C; without D: X ← sh X − lr a_k w_i)
            E ← (sh + 2 lr c_k) E + lr m_k sign C          (E = D − C)
            (L2 ablation: 2 m_k C in place of m_k sign C)
            w_i ← w_i − lr_net (Σ_k a_k X_k + l2 w_i),   b_i ← b_i − lr_net (Σ_k a_k + l2 b_i)

        Returns the clients' batch losses (the code's BCE + batch-row regularisers).
        """
        cfg = self.config
        d = cfg.dim
        Bc = w.shape[0]
        M = X.shape[0]
        wf = torch.index_select(w, 0, own, out=bufs["wf"])

        def seg(values):  # per-client sums of a row vector
            return torch.segment_reduce(values, "sum", offsets=crow, axis=0)

        s = torch.einsum("kd,kd->k", X, wf)
        if cfg.use_bias:
            s = s + b.index_select(0, own)
        p = torch.sigmoid(s)
        bce = -(lab * torch.clamp(torch.log(p), min=-100) + (1 - lab) * torch.clamp(torch.log1p(-p), min=-100))
        n_safe = torch.clamp(n_c, min=1.0)
        nk = n_safe.index_select(0, own)
        loss = seg(wt * bce) / n_safe
        a_k = wt * (p - lab) / nk
        A = torch.sparse_csr_tensor(crow, torch.arange(M, device=X.device), a_k, size=(Bc, M),
                                    check_invariants=False)
        g_w = A @ X
        g_b = seg(a_k)
        lr_arg = (self.lr_args * lr_scale).to(torch.float32)
        lr_net = (self.lr_network * lr_scale).to(torch.float32)
        lr_k = lr_arg.index_select(0, own)
        sh = (1 - lr_arg * cfg.l2).index_select(0, own) if cfg.l2 else None
        if E is not None:
            c_k = 2 * lam * wt / (nk * d)
            m_k = mu * wt / (nk * d)
            loss = loss - lam * seg(wt * torch.einsum("kd,kd->k", E, E)) / (n_safe * d)
            T = torch.sub(X, E, out=bufs["t"])            # 2C
            if cfg.method == "fedrap_l2":
                loss = loss + mu * seg(wt * torch.einsum("kd,kd->k", T, T) / 4) / (n_safe * d)
                reg, reg_scale = T, lr_k * m_k            # 2 m C = m T
            elif mu:
                S = torch.sign(T, out=bufs["s"])
                loss = loss + mu * seg(wt * torch.einsum("kd,kd->k", T, S) / 2) / (n_safe * d)
                reg, reg_scale = S, lr_k * m_k
            else:
                reg = None
            e_fac = 1 + 2 * lr_k * c_k if sh is None else sh + 2 * lr_k * c_k
            if sh is not None:
                X.mul_(sh[:, None])
            X.addcmul_(wf, (-2 * lr_k * a_k)[:, None])
            E.mul_(e_fac[:, None])
            if reg is not None:
                X.addcmul_(reg, (-reg_scale)[:, None])
                E.addcmul_(reg, reg_scale[:, None])
        else:
            if sh is not None:
                X.mul_(sh[:, None])
            X.addcmul_(wf, (-lr_k * a_k)[:, None])
        if cfg.l2:
            shrink_c.mul_(1 - lr_arg.to(torch.float64) * cfg.l2)
        w.sub_(lr_net[:, None] * (g_w + cfg.l2 * w))
        if cfg.use_bias:
            b.sub_(lr_net * (g_b + cfg.l2 * b))
        return loss

    def dense_uploads(self, result: dict[str, Any]) -> torch.Tensor:
        """The uploaded ``C_i`` of a :meth:`local_train` result as ``[B, n_items, d]``."""
        if "C" in result:
            return result["C"]
        if "lazy" in result:
            # lazy paper path: C_T = α C0 + β D0 − γ s with D0 recovered from the stored
            # D_T = α D0 + β C0 + δ s (valid until the private tables change), exact entries over it
            lazy = result["lazy"]
            C0 = lazy["C0"]
            S0 = torch.sign(C0)
            col = {k: torch.as_tensor(lazy[k], dtype=torch.float32, device=C0.device)[:, None, None]
                   for k in ("alpha", "beta", "gamma", "delta")}
            D0 = (self.private_items(lazy["users"]) - col["beta"] * C0 - col["delta"] * S0) / col["alpha"]
            up = col["alpha"] * C0 + col["beta"] * D0 - col["gamma"] * S0
            owner, item, rows = lazy["rows"]
            up[owner, item] = rows
            owner, pos, values = lazy["entries"]
            up.view(up.shape[0], -1)[owner, pos] = values
            return up
        p_owner, p_item, rows = result["rows"]
        shrink = result["shrink"].to(torch.float32)
        up = self.C[None].mul(shrink[:, None, None]).contiguous()
        up.view(-1, self.config.dim).index_copy_(0, p_owner * self.n_items + p_item, rows)
        return up

    def _row_upload_sum(self, result: dict[str, Any]) -> torch.Tensor:
        """``Σ_i C_i`` (float64) of a row result without forming the dense uploads."""
        p_owner, p_item, rows = result["rows"]
        shrink = result["shrink"]
        total = self.C.to(torch.float64) * shrink.sum()
        delta = rows - self.C.index_select(0, p_item) * shrink.to(torch.float32).index_select(0, p_owner)[:, None]
        return total.add_(torch.zeros_like(self.C).index_add_(0, p_item, delta))

    def _row_upload_nnz(self, result: dict[str, Any], abs_sorted: np.ndarray) -> int:
        """Entries with ``|C_i| > 1e-4`` summed over the clients of a row result.

        Untouched rows of client i hold ``shrink_i · C``: counted from the sorted ``|C|``
        (``abs_sorted``) by binary search, minus the touched rows' share, plus the touched rows.
        """
        p_owner, p_item, rows = result["rows"]
        shrink = result["shrink"].cpu().numpy()
        thr = _L1_THRESHOLD / np.maximum(shrink, 1e-300)
        untouched_all = abs_sorted.size - np.searchsorted(abs_sorted, thr, side="right")
        thr_rows = torch.as_tensor(thr, dtype=torch.float32, device=rows.device).index_select(0, p_owner)
        base = torch.count_nonzero(self.C.index_select(0, p_item).abs_() > thr_rows[:, None])
        touched = torch.count_nonzero(rows.abs() > _L1_THRESHOLD)
        return int(untouched_all.sum() - int(base) + int(touched))

    def _materialise_private(self, users: np.ndarray | None = None) -> None:
        """Fold the lazy weight-decay scale ``D_scale`` into the stored private tables."""
        if self.D is None:
            return
        idx = np.arange(self.n_users) if users is None else np.asarray(users, np.int64)
        todo = idx[(self.D_scale[torch.as_tensor(idx)] != 1).numpy()]
        for lo in range(0, todo.size, 256):
            u = torch.as_tensor(todo[lo:lo + 256])
            self.D[u] = self.D[u] * self.D_scale[u].to(self.D.device, torch.float32)[:, None, None]
            self.D_scale[u] = 1.0

    def private_items(self, users: np.ndarray) -> torch.Tensor:
        """True private item tables ``[len(users), n_items, d]`` (D⁽ⁱ⁾, or PFedRec's copy)."""
        u = torch.as_tensor(np.asarray(users, np.int64))
        return self.D[u].to(self.device) * self.D_scale[u].to(self.device, torch.float32)[:, None, None]

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
            # two preallocated [B, n_items, d] buffers (a fresh 200 MB tensor per step costs
            # more in page faults than the arithmetic)
            bufs = getattr(self, "_dense_bufs", None)
            if bufs is None or bufs[0].shape != D.shape:
                bufs = (torch.empty_like(D), torch.empty_like(D))
                self._dense_bufs = bufs
            diffall = torch.sub(D, C, out=bufs[0])
            loss = loss - lam * torch.linalg.vector_norm(diffall, dim=(1, 2)) ** 2 / nd
            coef = lr3 * (2 * lam / nd)
            shrink_c = 1 - lr3 * cfg.l2
            sign_c = None
            if cfg.method == "fedrap_l2":
                loss = loss + mu * torch.linalg.vector_norm(C, dim=(1, 2)) ** 2 / nd
                shrink_c = shrink_c - lr3 * (2 * mu / nd)
            else:
                loss = loss + mu * torch.linalg.vector_norm(C, ord=1, dim=(1, 2)) / nd
                sign_c = torch.sign(C, out=bufs[1])
                if cfg.l1_update == "prox":
                    l1_prox = True
                    sign_c = None
                elif not mu:
                    sign_c = None
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
                items = self.private_items(u.cpu().numpy()) + self.C[None]
            elif self.config.keeps_personal_copy:
                items = self.private_items(u.cpu().numpy())
            else:
                items = self.C[None].expand(u.numel(), -1, -1)
            s = torch.einsum("bd,bnd->bn", w, items)
            if self.config.use_bias:
                s = s + self.b[u][:, None]
            # r̂ = sigmoid(s) in float32, as the code compares them: saturated scores tie
            out[start:start + chunk] = torch.sigmoid(s).cpu().numpy()
        return out

    def score_pairs(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        """``r̂`` of the (user, item) pairs only (float32), equal to the entries of :meth:`score`."""
        if self.w is None:
            raise NotFittedError("fit the model first")
        cfg = self.config
        u = torch.as_tensor(np.asarray(user_ids, dtype=np.int64).ravel())
        i = torch.as_tensor(np.asarray(item_ids, dtype=np.int64).ravel())
        ud, idev = u.to(self.device), i.to(self.device)
        if cfg.has_private_items or cfg.keeps_personal_copy:
            rows = self._private_rows(u * self.n_items + i).to(self.device)
            rows = rows * self.D_scale[u].to(self.device, torch.float32)[:, None]
            items = rows + self.C.index_select(0, idev) if cfg.has_private_items else rows
        else:
            items = self.C.index_select(0, idev)
        s = torch.einsum("kd,kd->k", self.w.index_select(0, ud), items)
        if cfg.use_bias:
            s = s + self.b.index_select(0, ud)
        return torch.sigmoid(s).cpu().numpy()

    def describe(self) -> dict[str, Any]:
        return asdict(self.config)
