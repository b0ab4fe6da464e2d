"""The base of a vectorised federated recommender: rounds, evaluation, resumable checkpoints.

Clients are users.  Client ``i`` holds its own interactions and private parameters (a user
vector ``w_i``, a bias ``b_i``, optionally private item tables ``D``,
:mod:`recrepro.models.federated.storage`); the server holds the global item table ``C``.  A
subclass implements one round (:meth:`FederatedSimulation.train_round`: sample clients, train
them locally, aggregate their uploads) and scoring; this base runs the rounds, calls the
evaluation after each and saves / restores the state across rounds
(:mod:`recrepro.runtime.checkpoints`).

Determinism
-----------
Everything random (initialisation, client sampling, negatives, shuffling, DP noise) comes
from ``numpy.random.Generator`` streams seeded by ``(seed, round)``; CPU torch ops used here
are deterministic, so a seed gives identical rounds, and the round counter is the whole RNG
state a checkpoint needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.runtime.checkpoints import Checkpointer, data_fingerprint, settings_key
from recrepro.models.base import Recommender
from recrepro.models.federated.sampling import round_samples
from recrepro.models.federated.storage import PrivateItemTables
from recrepro.records import check_finite

__all__ = ["FederatedSimulation", "check_finite_fast"]


def check_finite_fast(name: str, values: torch.Tensor, where: str) -> None:
    """:func:`recrepro.records.check_finite` with a one-pass fast path for big tensors."""
    if not bool(torch.isfinite(values).all()):
        check_finite(name, values, where)


class FederatedSimulation(PrivateItemTables, Recommender):
    """A federated recommender trained round by round (see the module docstring).

    Subclasses set ``config`` (a dataclass with at least ``rounds``, ``eval_every``,
    ``num_negatives``), ``history = []`` and ``w = None`` in ``__init__``, and implement
    :meth:`init_state` (sets the attributes of :attr:`_ROUND_STATE`, ``D``, ``n_users``,
    ``n_items``, ``device``) and :meth:`train_round` (returns the round's history entry).
    """

    # ------------------------------------------------------------------ checkpoints
    #: attributes carried from one round to the next (besides the private tables ``D``):
    #: client parameters, the server's tables, the lazy weight-decay scales, the decayed
    #: learning rates, the previous round's (λ, μ) (the ``square`` curriculum reads it) and
    #: the round counter.  Every random draw of round ``a`` comes from streams seeded by
    #: ``(seed, a)`` (DP noise included), so the round counter *is* the RNG state, and the
    #: DP accountant is a function of it too.
    _ROUND_STATE: tuple[str, ...] = ("w", "b", "C", "D_scale", "lr_network", "lr_args", "weights_prev", "round")

    def init_state(self, n_users: int, n_items: int) -> None:
        """Initial parameters of every client and of the server."""
        raise NotImplementedError

    def train_round(self) -> dict[str, Any]:
        """One round; increments ``round`` and returns its history entry."""
        raise NotImplementedError

    def checkpoint_config(self) -> dict[str, Any]:
        """The settings a checkpoint must match: ``config`` less what does not change the run."""
        config = asdict(self.config)
        config.pop("scratch_dir", None)  # where the memmap lives does not change the run
        return config

    def checkpoint_key(self, train: sp.csr_matrix, touched: sp.csr_matrix, target_round: int) -> str:
        """:func:`~recrepro.runtime.checkpoints.settings_key` of a fit: class, config, rounds, data."""
        config = self.checkpoint_config()
        return settings_key({"model": type(self).__name__, "config": config, "target_round": int(target_round),
                             "data": data_fingerprint(train, touched)})

    def round_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Everything a later round reads, plus the history: ``(state, side arrays)``.

        The private tables ``D`` (FedRAP's ``D⁽ⁱ⁾``, PFedRec's copies) go into the state when
        they are held in RAM; a disk-backed ``numpy.memmap`` is copied to a side ``.npy`` file
        instead (:func:`recrepro.runtime.checkpoints.save_checkpoint`), written in one streaming pass.
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

    def fit(self, train: sp.csr_matrix, touched: sp.csr_matrix | None = None,
            eval_fn: Callable[[FederatedSimulation, int], dict[str, Any]] | None = None,
            rounds: int | None = None, *, checkpoint: str | Path | None = None,
            checkpoint_state: Any = None, checkpoint_min_seconds: float = 0.0) -> FederatedSimulation:
        """Train ``rounds`` rounds (default ``config.rounds``).

        Parameters
        ----------
        checkpoint:
            Resume from / save to this file after every round (:mod:`recrepro.runtime.checkpoints`):
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
        """Training samples of ``users`` for a round: positives then ``config.num_negatives`` fresh
        negatives each (:func:`~recrepro.models.federated.sampling.round_samples`).

        Returns ``(owner[m], item[m], label[m])`` sorted by owner (index into ``users``).
        """
        return round_samples(self.train_csr, self.touched, users, self.config.num_negatives, rng)
