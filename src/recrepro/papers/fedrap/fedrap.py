"""FedRAP (Li, Long & Zhou, ICLR 2024), FedMF and PFedRec: one vectorised federated simulation.

Scores (poster, "FedRAP – Two-Way Personalization")::

    r̂_ij = sigmoid(<u_i, (D^(i) + C)_j>)

objective (poster, "FedRAP – Objective"), with a the round::

    min Σ_i ( Σ_(i,j)∈Ω BCE(r_ij, r̂_ij) − λ_(a,v1) ||D^(i) − C||_F² ) + μ_(a,v2) ||C||_1
    λ_(a,v1) = tanh(a/10)·v1,   μ_(a,v2) = tanh(a/10)·v2

Clients are users: client ``i`` holds its own interactions, a private score function
(user vector ``w_i`` and, in the released FedRAP code, a bias ``b_i``), optionally a
private item table, and a local copy of the global item table ``C``.  The official
FedRAP code (mtics/FedRAP ``model/engine.py``) loops over users and deep-copies a model
per user; here **all sampled clients of a round train at once**: their parameters are
stacked tensors and every local SGD step is one batched tensor operation with hand-written
gradients (the round loop, client sampling, aggregation, DP and the storage of the private
tables are the shared core, :mod:`recrepro.models.federated`).  The model holds the state and
each round picks one of three training paths, objects behind one small interface
(:class:`~recrepro.papers.fedrap.training_path.TrainingPath`: ``local_train(model, ...)``):

* **rows** (code mode, FedMF, PFedRec; :class:`~recrepro.papers.fedrap.rows.RowPath`): a step
  only changes the rows of the items in a client's batch, so the round trains on those rows alone.
* **lazy** (paper mode with private tables, the default;
  :class:`~recrepro.papers.fedrap.lazy.path.LazyPath`): the exact lazy form of the paper's
  full-matrix regularisers.
* **dense** (``paper_path: dense``, the reference; also the prox L1 update and the L2 ablation;
  :class:`~recrepro.papers.fedrap.dense.DensePath`): dense ``[B, n_items, d]`` tables per chunk
  of clients.

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
``n_users × n_items × d`` floats, in RAM under ``memory_budget_mb`` or else in a disk-backed
memmap (:mod:`recrepro.models.federated.storage`).  The rows and lazy paths read and write
only the round's rows of them, or stream over them.  The dense path runs on **chunks of
clients**: a chunk holds about six ``[B, n_items, d]`` float32 tensors and ``B`` is chosen
so the chunk stays under the same budget (at least one client); so does DP, which needs
each client's dense upload.  The lazy paper path replays the entries whose ``C`` may cross zero
one by one; where a strong L1 step puts nearly all of them at risk (LastFM at μ = 1: ~10⁹
entries, 22 GB), the list would pass the budget, so that round runs on the dense path instead
(the same draws, exact as well; the run's log says which rounds).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np
import torch

from recrepro.models.base import NotFittedError
from recrepro.models.federated.clients import RoundDraws
from recrepro.models.federated.privacy import RoundNoise, gaussian_epsilon, gaussian_mechanism
from recrepro.models.federated.sampling import sample_clients
from recrepro.models.federated.simulation import FederatedSimulation, check_finite_fast
from recrepro.models.federated.storage import clients_per_chunk
from recrepro.papers.fedrap.config import L1_THRESHOLD, FederatedConfig
from recrepro.papers.fedrap.dense import DensePath
from recrepro.papers.fedrap.lazy.path import LazyPath, ReplayTooLarge
from recrepro.papers.fedrap.rows import RowPath
from recrepro.papers.fedrap.training_path import LocalResult, TrainingPath, UploadTotals

__all__ = ["FedRAP", "FederatedRecommender"]


class FederatedRecommender(FederatedSimulation):
    """FedRAP / FedMF / PFedRec trained by the vectorised simulation (see module docstring).

    ``fit(train, touched=..., eval_fn=...)``: ``touched`` (train ∪ validation ∪ test) is
    what the training negatives avoid; ``eval_fn(model, round)`` (optional) is called
    after each evaluated round and its return value is stored in :attr:`history`.
    After fitting, :meth:`score` gives each user's scores from their own model and the
    server's ``C`` (PFedRec: the client's last fine-tuned copy).

    The model holds the state (:attr:`~recrepro.models.federated.simulation.FederatedSimulation._ROUND_STATE`,
    the private tables) and its three training paths, :attr:`row_path`, :attr:`dense_path` and
    :attr:`lazy_path`; :meth:`training_path` says which one a round runs on.
    """

    def __init__(self, config: FederatedConfig | None = None, **kwargs: Any) -> None:
        self.config = config if config is not None else FederatedConfig(**kwargs)
        self.history: list[dict[str, Any]] = []
        self.w: torch.Tensor | None = None
        self._fitted = False
        self.row_path = RowPath()
        self.dense_path = DensePath()
        self.lazy_path = LazyPath()
        #: a round's replay passed the memory budget: it and the later rounds run dense (a checkpoint
        #: carries this)
        self.replay_over_budget = False

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
            self._init_private(n_users, n_items, d0)
        # lazy SGD weight decay of the private tables: true D[u] = D_scale[u] * stored D[u]
        self.D_scale = torch.ones(n_users, dtype=torch.float64)
        self.lr_network = cfg.lr_network
        self.lr_args = cfg.lr_args
        self.weights_prev: tuple[float, float] | None = None
        self.round = 0

    def checkpoint_config(self) -> dict[str, Any]:
        """The settings a checkpoint must match (see
        :meth:`~recrepro.models.federated.simulation.FederatedSimulation.checkpoint_config`)."""
        config = super().checkpoint_config()
        if not (config["mode"] == "paper" and self.config.has_private_items):
            config.pop("paper_path", None)  # only paper mode with private tables has two paths
        return config

    def round_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The simulation's round state plus the path choice and the statistics the lazy path's last
        pass took for the next round (:meth:`~recrepro.papers.fedrap.lazy.path.LazyPath.carried_state`)."""
        state, arrays = super().round_state()
        # the rounds after one whose replay passed the budget run dense: a resumed run as well
        state["replay_over_budget"] = self.replay_over_budget
        carried = self.lazy_path.carried_state(self.D)
        if carried is not None:
            state["lazy_next"] = carried
        return state, arrays

    def load_round_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`round_state`: the carried statistics belong to the tables just loaded."""
        super().load_round_state(state)
        self.replay_over_budget = bool(state.get("replay_over_budget", False))
        self.lazy_path.load_carried_state(state.get("lazy_next"), self.D, self.device)

    @property
    def dense_update_used(self) -> str | None:
        """How paper mode's dense steps ran (``"fused"``, ``"eager"``; ``None`` where none ran)."""
        return self.dense_path.update_used

    # ------------------------------------------------------------------ training
    def training_path(self) -> TrainingPath:
        """The path this round's local training runs on.

        Paper mode with private tables (FedRAP's full-matrix regularisers touch every row of D⁽ⁱ⁾
        and C at every step) runs the exact lazy form, which covers the paper's objective with the
        L1 subgradient (``fedrap``, ``fedrap_no``), with or without DP (whose clipping needs every
        client's dense upload: the lazy result forms them from its map); the L2 ablation and the
        prox update keep the dense path, as does ``paper_path: dense`` (kept for verification), and
        so do the rounds after one whose replay passed the memory budget.  Everything else (code
        mode, FedMF, PFedRec) only ever changes the rows of the items a client samples in the round,
        so it trains on those rows alone.
        """
        cfg = self.config
        if not (cfg.mode == "paper" and cfg.has_private_items):
            return self.row_path
        if (cfg.paper_path == "lazy" and cfg.method != "fedrap_l2" and cfg.l1_update == "subgradient"
                and not self.replay_over_budget):
            return self.lazy_path
        return self.dense_path

    def train_round(self) -> dict[str, Any]:
        """One federated round: sample clients, local training (chunked), aggregate C."""
        cfg = self.config
        a = self.round
        t0 = time.perf_counter()
        rng = np.random.default_rng([cfg.seed, 1, a])
        participants = sample_clients(self.n_users, cfg.client_ratio, rng)
        lam, mu = cfg.weights(a, self.weights_prev)
        self.weights_prev = (lam, mu)
        state = rng.bit_generator.state
        try:
            totals, loss_sum = self._round_uploads(participants, lam, mu, rng)
        except ReplayTooLarge as err:
            # the lazy path stopped before writing anything: the same round, same draws, dense; the
            # later rounds go dense at once (the start-of-round pass that finds the overflow reads
            # every table, a third of a LastFM round; a checkpoint carries the choice)
            print(f"fedrap: {err}; this round and the later ones run on the dense paper path", file=sys.stderr)
            self.replay_over_budget = True
            rng.bit_generator.state = state
            totals, loss_sum = self._round_uploads(participants, lam, mu, rng)
        new_c = (totals.c_sum / participants.size).to(torch.float32)
        check_finite_fast("global item table C", new_c, f"round {a}")
        self.C = new_c
        sparsity = float((self.C.abs() <= L1_THRESHOLD).float().mean())
        self.lr_network *= cfg.decay_rate
        self.lr_args *= cfg.decay_rate
        self.round += 1
        dense_bytes = participants.size * self.n_items * cfg.dim * 4
        return {
            "round": self.round, "lambda": lam, "mu": mu, "n_participants": int(participants.size),
            "train_loss": loss_sum / participants.size, "c_sparsity": sparsity,
            "upload_bytes_dense": int(dense_bytes), "upload_bytes_sparse": int(totals.nnz * 8),
            "seconds": time.perf_counter() - t0,
            # a clip without noise guarantees nothing: no ε (a record holds finite numbers only)
            "dp_epsilon": (gaussian_epsilon(cfg.dp_noise, self.round, cfg.dp_delta)
                           if cfg.dp_clip is not None and cfg.dp_noise > 0 else None),
        }

    def privatise(self, uploads: torch.Tensor, normals: RoundNoise | np.random.Generator) -> torch.Tensor:
        """Clip each client's update ``C_i − C`` to Frobenius norm ``dp_clip`` and add
        ``N(0, (dp_noise·dp_clip)²)`` noise to every entry (without a clip: ``N(0, dp_noise²)``,
        nothing clipped); the Gaussian mechanism on the upload, per client, before aggregation
        (:func:`~recrepro.models.federated.privacy.gaussian_mechanism`).  ``normals``: the
        round's :class:`~recrepro.models.federated.privacy.RoundNoise`, positioned at these clients."""
        return gaussian_mechanism(uploads, self.C, self.config.dp_clip, self.config.dp_noise, normals)

    def _round_noise(self, participants: np.ndarray, rng: np.random.Generator,
                     draws: RoundDraws) -> RoundNoise | None:
        """The round's DP noise (``None`` without DP), its seeds drawn from ``rng`` once the shuffle
        keys of all ``local_epochs`` epochs are drawn: after the keys, whichever epochs the chunks
        have reached so far (a chunk's clients may all stop early), so that the chunks never move
        the seeds."""
        cfg = self.config
        if not cfg.uses_dp:
            return None
        ahead = draws.draw_all_keys(cfg.local_epochs)
        if ahead:
            # only where the first chunk's clients all stopped early, or none of them shuffles: the
            # one place a round's stream differs from a chunk-by-chunk draw of the seeds (the order
            # the DP records before fixed noise blocks ran in), so say where it happens
            print(f"fedrap: round {self.round}: the shuffle keys of {ahead} local epoch(s) no client had "
                  f"reached yet were drawn before the DP noise's seeds", file=sys.stderr)
        block = clients_per_chunk(self.n_items, cfg.dim, cfg.dp_noise_block_mb, participants.size)
        return RoundNoise(rng, block, self.C.device)

    def _round_uploads(self, participants: np.ndarray, lam: float, mu: float,
                       rng: np.random.Generator) -> tuple[UploadTotals, float]:
        """Local training of the round's ``participants`` (chunked): their summed uploads and losses."""
        cfg = self.config
        path = self.training_path()
        # the dense path forms [B, n_items, d] tables, and so does DP on the row path (each client's
        # upload is clipped); the lazy path forms DP's uploads itself, a slice of clients at a time
        by_budget = path is self.dense_path or (cfg.uses_dp and path is self.row_path)
        chunk = (clients_per_chunk(self.n_items, cfg.dim, cfg.memory_budget_mb, participants.size) if by_budget
                 else max(1, participants.size))
        totals = UploadTotals(torch.zeros_like(self.C, dtype=torch.float64))
        loss_sum = 0.0
        draws = None
        if chunk < participants.size or cfg.uses_dp:
            # several chunks: every client gets the draws one chunk of all would give it, so the
            # memory budget (which sets the chunks) does not change the numbers; under DP always,
            # so that the noise's seeds follow every local epoch's shuffle keys (_round_noise)
            owner, item, label = self.round_samples(participants, rng)
            draws = RoundDraws(owner, item, label, np.bincount(owner, minlength=participants.size),
                               cfg.batch_size, rng)
        noise = None
        for start in range(0, participants.size, chunk):
            users = participants[start:start + chunk]
            if draws is None:
                owner, item, label = self.round_samples(users, rng)
                local_rng = rng
            else:
                owner, item, label = draws.samples(start, start + users.size)
                local_rng = draws.chunk(start, start + users.size)
            result = self.local_train(users, owner, item, label, lam, mu, local_rng)
            if noise is None:
                noise = self._round_noise(participants, rng, draws)
            result.add_uploads(self, totals, noise)
            loss_sum += float(result.loss.sum())
        return totals, loss_sum

    def local_train(self, users: np.ndarray, owner: np.ndarray, item: np.ndarray, label: np.ndarray,
                    lam: float, mu: float, rng: np.random.Generator) -> LocalResult:
        """Local epochs of the clients ``users`` at once on this round's :meth:`training_path`; writes
        back their private state.  ``result.dense_uploads(model)`` gives their uploaded ``C_i`` as
        ``[B, n_items, d]``."""
        return self.training_path().local_train(self, users, owner, item, label, lam, mu, rng)

    # ------------------------------------------------------------------ scoring
    def score(self, user_ids: np.ndarray) -> np.ndarray:
        if self.w is None:
            raise NotFittedError("fit the model first")
        users = np.asarray(user_ids, dtype=np.int64).ravel()
        out = np.empty((users.size, self.n_items), np.float32)
        chunk = clients_per_chunk(self.n_items, self.config.dim, self.config.memory_budget_mb, max(users.size, 1))
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
            rows = self.private_rows(u * self.n_items + i).to(self.device)
            rows = rows * self.D_scale[u].to(self.device, torch.float32)[:, None]
            items = rows + self.C.index_select(0, idev) if cfg.has_private_items else rows
        else:
            items = self.C.index_select(0, idev)
        s = torch.einsum("kd,kd->k", self.w.index_select(0, ud), items)
        if cfg.use_bias:
            s = s + self.b.index_select(0, ud)
        return torch.sigmoid(s).cpu().numpy()


class FedRAP(FederatedRecommender):
    """FedRAP with the paper's defaults (``method='fedrap'``, ``mode='paper'``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("method", "fedrap")
        super().__init__(FederatedConfig(**kwargs))
