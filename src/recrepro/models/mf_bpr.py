"""MF-BPR and MF-λFix: matrix factorisation trained with Bayesian Personalised Ranking.

λOpt (Chen et al., KDD 2019, "λOpt: Learn to Regularize Recommender Models in Finer
Levels") builds on this model; its fine-grained variant lives in
:mod:`recrepro.papers.lambdaopt.mf_lambdaopt`.

Model and loss (the paper's slides 12–16, official code ``yihong-chen/lambda-opt@fdaa44d``)
-------------------------------------------------------------------------------------
Score ``x_ui = <P_u, Q_i>`` (no biases).  For a batch ``S`` of ``B`` training triples
``(u, i, j)`` (a positive ``i`` and one uniform negative ``j`` the user has not interacted
with in train)::

    l̃(S)  = Σ_(u,i,j)∈S softplus(−(x_ui − x_uj)) / B                    (BPR, mean)
    Ω(S)  = Σ_(u,i,j)∈S [ Λ^U_u · P_u² + Λ^I_i · Q_i² + Λ^I_j · Q_j² ] / B   (penalty)

where ``Λ · P²`` means ``Σ_k Λ_k P_k²``.  MF-λFix uses one global ``λ`` for every entry.
Training: Adam (lr 1e-3, betas (0.9, 0.999), eps 1e-8) on ``l̃ + Ω``, gradient-norm clip
100, ``N(0, 1)`` initialisation (``nn.Embedding``'s default), one fresh uniform negative
per training positive every epoch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.models.base import ModelConfig, TrainedFactorModel
from recrepro.models.gather import gather_rows
from recrepro.records import check_finite

__all__ = ["BPRConfig", "MFBPR", "bpr_loss", "sample_negatives", "TripleSampler"]


@dataclass
class BPRConfig(ModelConfig):
    """Hyper-parameters of MF-BPR (defaults: the official scripts at ``fdaa44d``)."""

    dim: int = 128
    epochs: int = 10
    batch_size: int = 1024
    lr: float = 1.0e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1.0e-8
    clip: float = 100.0
    init_std: float = 1.0
    lam: float = 0.0                      # MF-λFix: the global λ (0 = plain MF-BPR)
    device: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)

    converters = {"betas": tuple}


def bpr_loss(P: torch.Tensor, Q: torch.Tensor, u: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """Mean BPR loss ``Σ softplus(−(x_ui − x_uj)) / B`` (slide 12; ``BCEWithLogits`` sum / B).

    Rows are gathered by :func:`~recrepro.models.gather.gather_rows`: the gradient is the same
    on any number of CPU threads.
    """
    pu = gather_rows(P, u)
    logit = (pu * gather_rows(Q, i)).sum(1) - (pu * gather_rows(Q, j)).sum(1)
    return torch.nn.functional.softplus(-logit).mean()


def sample_negatives(users: np.ndarray, seen: sp.csr_matrix, rng: np.random.Generator) -> np.ndarray:
    """One uniform item per entry of ``users`` that the user has not interacted with in ``seen``.

    Vectorised rejection sampling: draw for everyone, redraw only the collisions (rounds,
    not a loop over users).  Users who have interacted with every item get an arbitrary item.
    """
    n_items = seen.shape[1]
    seen = seen.tocsr()
    seen.sort_indices()
    keys = (np.repeat(np.arange(seen.shape[0], dtype=np.int64), np.diff(seen.indptr)) * n_items
            + seen.indices.astype(np.int64))
    full = np.diff(seen.indptr)[users] >= n_items
    neg = rng.integers(0, n_items, size=users.size)
    todo = np.flatnonzero(~full)
    for _ in range(1000):
        if todo.size == 0:
            break
        cand = users[todo].astype(np.int64) * n_items + neg[todo]
        pos = np.searchsorted(keys, cand)
        hit = (pos < keys.size) & (keys[np.minimum(pos, keys.size - 1)] == cand)
        todo = todo[hit]
        neg[todo] = rng.integers(0, n_items, size=todo.size)
    return neg


class TripleSampler:
    """Shuffled ``(u, i, j)`` batches over the positives of ``pos``; negatives avoid ``seen``.

    Each pass (epoch) permutes the positives and draws one fresh uniform negative per
    positive.  :meth:`next_batch` cycles forever (a new pass starts when one is exhausted),
    which is what the λ step's validation stream needs.
    """

    def __init__(self, pos: sp.csr_matrix, seen: sp.csr_matrix, batch_size: int, rng: np.random.Generator,
                 device: str | torch.device = "cpu") -> None:
        coo = pos.tocoo()
        self.users = coo.row.astype(np.int64)
        self.items = coo.col.astype(np.int64)
        self.seen = seen
        self.batch_size = int(batch_size)
        self.rng = rng
        self.device = device
        self._queue: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def __len__(self) -> int:
        return max(1, math.ceil(self.users.size / self.batch_size))

    def epoch(self) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """The batches of one pass."""
        order = self.rng.permutation(self.users.size)
        u, i = self.users[order], self.items[order]
        j = sample_negatives(u, self.seen, self.rng)
        tu, ti, tj = (torch.from_numpy(a).to(self.device) for a in (u, i, j))
        return [(tu[s:s + self.batch_size], ti[s:s + self.batch_size], tj[s:s + self.batch_size])
                for s in range(0, u.size, self.batch_size)]

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not self._queue:
            self._queue = self.epoch()[::-1]
        return self._queue.pop()


class MFBPR(TrainedFactorModel):
    """MF-BPR with a global L2 weight λ (MF-λFix; ``lam=0`` is plain MF-BPR).

    Parameters
    ----------
    config:
        :class:`BPRConfig` (or a mapping of its fields).
    seed:
        Seeds the initialisation and the samplers.

    Notes
    -----
    ``fit(train, validation=..., on_epoch=...)``: ``validation`` (a CSR of validation
    positives) is only used by λOpt's λ step; ``on_epoch(model, epoch)`` is called after
    every epoch (learning curves).  ``history`` lists per-epoch training loss and seconds.
    """

    name = "mf_bpr"

    def __init__(self, config: BPRConfig | Mapping[str, Any] | None = None, seed: int = 0) -> None:
        self.config = config = BPRConfig.coerce(config)
        self.seed = int(seed)
        self.device = torch.device(config.device)
        self.history: list[dict[str, float]] = []
        self.P: torch.Tensor | None = None
        self.Q: torch.Tensor | None = None

    # ------------------------------------------------------------------ parameters
    def init_params(self, n_users: int, n_items: int) -> None:
        gen = torch.Generator().manual_seed(self.seed)
        d, std = self.config.dim, self.config.init_std
        self.P = (torch.randn(n_users, d, generator=gen) * std).to(self.device).requires_grad_()
        self.Q = (torch.randn(n_items, d, generator=gen) * std).to(self.device).requires_grad_()
        self.optimizer = torch.optim.Adam([self.P, self.Q], lr=self.config.lr, betas=self.config.betas,
                                          eps=self.config.eps, foreach=False)
        self.n_users, self.n_items = n_users, n_items

    def penalty(self, P: torch.Tensor, Q: torch.Tensor, u: torch.Tensor, i: torch.Tensor,
                j: torch.Tensor) -> torch.Tensor:
        """Ω of the batch with the global λ: ``λ Σ (P_u² + Q_i² + Q_j²) / B``."""
        if self.config.lam == 0:
            return P.new_zeros(())
        B = u.numel()
        return self.config.lam * ((gather_rows(P, u) ** 2).sum() + (gather_rows(Q, i) ** 2).sum()
                                  + (gather_rows(Q, j) ** 2).sum()) / B

    def real_step(self, batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> float:
        """One Adam step of the MF on ``l̃ + Ω`` (after gradient-norm clipping)."""
        u, i, j = batch
        self.optimizer.zero_grad(set_to_none=True)
        loss = bpr_loss(self.P, self.Q, u, i, j)
        total = loss + self.penalty(self.P, self.Q, u, i, j)
        total.backward()
        if self.config.clip and self.config.clip > 0:
            torch.nn.utils.clip_grad_norm_([self.P, self.Q], self.config.clip)
        self.optimizer.step()
        return float(loss.detach())

    # ------------------------------------------------------------------ training
    def before_fit(self, train: sp.csr_matrix, validation: sp.csr_matrix | None, rng: np.random.Generator) -> None:
        """Hook for subclasses (λOpt sets up Λ and the validation stream)."""

    def train_epoch(self, sampler: TripleSampler, epoch: int) -> float:
        losses = [self.real_step(batch) for batch in sampler.epoch()]
        return float(np.mean(losses))

    # ------------------------------------------------------------------ checkpoints
    @property
    def resumable(self) -> bool:
        """Whether ``fit(checkpoint=...)`` is supported: only classes that define their own
        :meth:`checkpoint_state` (a subclass may carry more state across epochs than its
        parent knows of; AMF and SGDA do not declare theirs yet)."""
        return "checkpoint_state" in type(self).__dict__

    def checkpoint_state(self) -> dict[str, Any]:
        """What the next epoch reads besides the samplers' generator: P, Q and Adam's state."""
        return {"P": self.P.detach(), "Q": self.Q.detach(), "optimizer": self.optimizer.state_dict()}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`checkpoint_state` (after :meth:`init_params` / :meth:`before_fit`)."""
        with torch.no_grad():
            self.P.copy_(state["P"])
            self.Q.copy_(state["Q"])
        self.optimizer.load_state_dict(state["optimizer"])

    def checkpoint_key(self, train: sp.csr_matrix, validation: sp.csr_matrix | None,
                       monitor: Any | None = None) -> str:
        from recrepro.runtime.checkpoints import data_fingerprint, settings_key

        key = {"model": type(self).__name__, "config": asdict(self.config), "seed": self.seed,
               "data": data_fingerprint(train, validation)}
        if monitor is not None:     # a stopping rule changes what the run is (the key of a plain run is unchanged)
            key["monitor"] = monitor.settings()
        return settings_key(key)

    def snapshot(self) -> dict[str, torch.Tensor]:
        """Copies of the tables the scores read (a stopping rule keeps the best epoch's)."""
        return {"P": self.P.detach().clone(), "Q": self.Q.detach().clone()}

    def restore(self, snapshot: Mapping[str, torch.Tensor]) -> None:
        """Put the tables of :meth:`snapshot` back (scoring then gives that epoch's scores)."""
        with torch.no_grad():
            self.P.copy_(snapshot["P"])
            self.Q.copy_(snapshot["Q"])

    # ------------------------------------------------------------------ training
    def fit(self, train: sp.csr_matrix, validation: sp.csr_matrix | None = None,
            on_epoch: Callable[[MFBPR, int], None] | None = None, *, checkpoint: str | Path | None = None,
            checkpoint_min_seconds: float = 0.0, monitor: Any | None = None, **kwargs: Any) -> MFBPR:
        """Train ``config.epochs`` epochs, or fewer when ``monitor`` stops the run.

        ``checkpoint`` (:mod:`recrepro.runtime.checkpoints`): after every epoch save
        :meth:`checkpoint_state`, the numpy generator of the samplers (negatives and order),
        torch's global RNG, the epoch, the history and the monitor's state; a rerun resumes
        from it bit for bit.  Only for :attr:`resumable` classes (``NotImplementedError`` otherwise).

        ``monitor``: a stopping rule (e.g. :class:`recrepro.papers.lambdaopt.stopping.ValidationMonitor`)
        with ``update(model, epoch) -> bool`` (True: stop after this epoch), ``stopped``,
        ``settings()``, ``state()`` and ``load_state(state)``; it is updated after each epoch,
        before the checkpoint is written, so a resumed run continues its curve.
        """
        from recrepro.runtime.checkpoints import (Checkpointer, generator_state, global_rng_state, set_generator_state,
                                          set_global_rng_state)

        if checkpoint is not None and not self.resumable:
            raise NotImplementedError(f"{type(self).__name__} does not support checkpoints")
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        train = sp.csr_matrix(train)
        self.init_params(*train.shape)
        self.before_fit(train, validation, rng)
        sampler = TripleSampler(train, train, self.config.batch_size, rng, self.device)
        self.history = []
        first, ckpt = 0, None
        if checkpoint is not None:
            ckpt = Checkpointer(checkpoint, self.checkpoint_key(train, validation, monitor),
                                min_seconds=checkpoint_min_seconds)
            saved = ckpt.load()
            if saved is not None:
                self.load_checkpoint_state(saved["model"])
                set_generator_state(rng, saved["rng"])
                set_global_rng_state(saved["global_rng"])
                self.history = list(saved["history"])
                first = int(saved["epoch"])
                if monitor is not None:
                    monitor.load_state(saved["monitor"])
        for epoch in range(first, self.config.epochs):
            if monitor is not None and monitor.stopped:
                break
            started = time.perf_counter()
            loss = self.train_epoch(sampler, epoch)
            check_finite("training loss", loss, f"epoch {epoch}")
            check_finite("user factors", self.P.detach(), f"epoch {epoch}")
            check_finite("item factors", self.Q.detach(), f"epoch {epoch}")
            self.history.append({"epoch": epoch, "loss": loss, "seconds": time.perf_counter() - started})
            stop = monitor is not None and monitor.update(self, epoch)
            if ckpt is not None:
                ckpt.save(lambda: {"epoch": epoch + 1, "model": self.checkpoint_state(), "rng": generator_state(rng),
                                   "global_rng": global_rng_state(), "history": self.history,
                                   **({} if monitor is None else {"monitor": monitor.state()})},
                          final=stop or epoch + 1 >= self.config.epochs)
            if on_epoch is not None:
                on_epoch(self, epoch)
            if stop:
                break
        return self

    # ------------------------------------------------------------------ scoring
    def score(self, user_ids: np.ndarray) -> np.ndarray:
        self._check_fitted()
        users = torch.as_tensor(np.asarray(user_ids, dtype=np.int64), device=self.device)
        with torch.no_grad():
            return (self.P[users] @ self.Q.T).cpu().numpy().astype(np.float32)

    def _check_fitted(self) -> None:
        if self.P is None:
            from recrepro.models.base import NotFittedError

            raise NotFittedError(f"{type(self).__name__} is not fitted")
