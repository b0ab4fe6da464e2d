"""The centralised upper bounds of FedRAP's table: MF and NeuMF trained on all users' data at once.

Both train on the same BCE-with-negatives objective as the federated methods
(:func:`recrepro.models.federated.sampling.pointwise_epoch`: every positive plus
``num_negatives`` fresh negatives per positive each epoch, He et al. 2017), with Adam on
mini-batches, and resume exactly from a checkpoint (:mod:`recrepro.runtime.checkpoints`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.runtime.checkpoints import Checkpointer, data_fingerprint, generator_state, set_generator_state, settings_key
from recrepro.models.base import NotFittedError, Recommender, TrainedFactorModel
from recrepro.models.federated.sampling import pointwise_epoch
from recrepro.papers.fedrap.ncf import NET, grid_scores, init_net, neumf_logits, pair_probabilities
from recrepro.records import check_finite

__all__ = ["MF_KEYS", "CentralMF", "CentralNCF", "CentralUpperBound"]

MF_KEYS = ("dim", "epochs", "lr", "batch_size", "num_negatives", "l2", "init_std")  # the settings of an upper bound


class CentralUpperBound(Recommender):
    """What the centralised upper bounds share: their settings and their training loop.

    ``epochs`` epochs over all users' data at once: every positive plus ``num_negatives``
    fresh negatives per positive each epoch (:func:`pointwise_epoch`, He et al. 2017), BCE on
    :meth:`logits`, Adam (``weight_decay=l2``) on mini-batches, resumable from a checkpoint.
    A subclass draws its parameters (:meth:`init_params`) and computes :meth:`logits`;
    ``stream`` (its generator stream) and ``watched`` (the message and the parameter checked
    finite after every epoch) are its class attributes, ``default_init_std`` its init scale.
    """

    stream: int
    watched: tuple[str, str]
    default_init_std: float

    def __init__(self, dim: int = 32, epochs: int = 20, lr: float = 1e-3, batch_size: int = 2048,
                 num_negatives: int = 4, l2: float = 0.0, init_std: float | None = None, seed: int = 0,
                 device: str = "cpu") -> None:
        self.dim, self.epochs, self.lr, self.batch_size = dim, epochs, lr, batch_size
        self.num_negatives, self.l2, self.seed = num_negatives, l2, seed
        self.init_std = self.default_init_std if init_std is None else init_std
        self.device = torch.device(device)
        self.history: list[dict[str, Any]] = []

    def init_params(self, gen: torch.Generator) -> dict[str, torch.Tensor]:  # pragma: no cover - abstract
        """The trained parameters, drawn from ``gen``, on the device and requiring grad (also kept on ``self``)."""
        raise NotImplementedError

    def logits(self, params: dict[str, torch.Tensor], users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover - abstract

    def fit(self, train: sp.csr_matrix, touched: sp.csr_matrix | None = None, eval_fn=None, *,
            checkpoint: str | Path | None = None, checkpoint_state: Any = None,
            checkpoint_min_seconds: float = 0.0, **_: Any) -> CentralUpperBound:
        """Train ``epochs`` epochs; ``eval_fn(model, epoch)`` after each.

        ``checkpoint`` (:mod:`recrepro.runtime.checkpoints`): after every epoch save the parameters,
        Adam's state, the numpy generator that draws negatives and orders the data, the history
        and ``checkpoint_state.state_dict()`` (the caller's); a rerun resumes from it bit for bit.
        See :meth:`recrepro.models.federated.simulation.FederatedSimulation.fit`.
        """
        train = sp.csr_matrix(train)
        touched = sp.csr_matrix(touched) if touched is not None else train
        self.n_users, self.n_items = train.shape
        rng = np.random.default_rng([self.seed, self.stream])
        gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
        params = self.init_params(gen)
        opt = torch.optim.Adam(list(params.values()), lr=self.lr, weight_decay=self.l2)
        coo = train.tocoo()
        users_pos, items_pos = coo.row.astype(np.int64), coo.col.astype(np.int64)
        k = self.num_negatives
        n_rows = users_pos.size * (k + 1)
        ckpt, first = _resume_central(self, params, opt, rng, train, touched, checkpoint, checkpoint_state,
                                      checkpoint_min_seconds)
        what, watched = self.watched
        for epoch in range(first, self.epochs):
            total = 0.0
            for ut, it, rt in pointwise_epoch(users_pos, items_pos, touched, k, self.batch_size, rng, self.device):
                loss = torch.nn.functional.binary_cross_entropy_with_logits(self.logits(params, ut, it), rt)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * ut.numel()
            check_finite(what, params[watched], f"epoch {epoch}")
            info = {"round": epoch + 1, "train_loss": total / max(n_rows, 1)}
            if eval_fn is not None:
                info.update(eval_fn(self, epoch + 1))
            self.history.append(info)
            _save_central(ckpt, self, params, opt, rng, checkpoint_state, epoch + 1)
        return self


class CentralMF(TrainedFactorModel, CentralUpperBound):
    """Centralised MF (GMF without the output layer): ``r̂ = sigmoid(<p_u, q_i>)``.

    Trained on all users' data at once with the same BCE objective and ``num_negatives``
    fresh negatives per positive every epoch (He et al. 2017), Adam, mini-batches.
    The upper bound the federated methods are compared with.
    """

    stream = 0xC3F
    watched = ("MF embeddings", "Q")
    default_init_std = 0.1

    def init_params(self, gen: torch.Generator) -> dict[str, torch.Tensor]:
        P = (torch.randn(self.n_users, self.dim, generator=gen) * self.init_std).to(self.device).requires_grad_()
        Q = (torch.randn(self.n_items, self.dim, generator=gen) * self.init_std).to(self.device).requires_grad_()
        self.P, self.Q = P, Q
        return {"P": P, "Q": Q}

    def logits(self, params: dict[str, torch.Tensor], users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        return (params["P"][users] * params["Q"][items]).sum(-1)

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        if self.P is None:
            raise NotFittedError("fit the model first")
        u = torch.as_tensor(np.asarray(user_ids, dtype=np.int64), device=self.device)
        with torch.no_grad():
            return torch.sigmoid(self.P[u] @ self.Q.T).cpu().numpy().astype(np.float32)


def _resume_central(model: Any, params: dict[str, torch.Tensor], opt: torch.optim.Optimizer,
                    rng: np.random.Generator, train: sp.csr_matrix, touched: sp.csr_matrix,
                    checkpoint: str | Path | None, caller: Any,
                    min_seconds: float) -> tuple[Checkpointer | None, int]:
    """Restore a centralised upper bound (CentralMF, CentralNCF) from its checkpoint.

    Its state across epochs: the parameters, Adam's moments, the numpy generator (negatives
    and the order of the data are drawn from it every epoch), the history and the caller's
    state.  Returns the :class:`~recrepro.runtime.checkpoints.Checkpointer` (``None`` without a
    path) and the number of epochs already done.
    """
    if checkpoint is None:
        return None, 0
    settings = {name: getattr(model, name) for name in (*MF_KEYS, "seed")}
    key = settings_key({"model": type(model).__name__, "settings": settings, "device": str(model.device),
                        "data": data_fingerprint(train, touched)})
    ckpt = Checkpointer(checkpoint, key, min_seconds=min_seconds)
    saved = ckpt.load()
    if saved is None:
        return ckpt, 0
    with torch.no_grad():
        for name, tensor in params.items():
            tensor.copy_(saved["params"][name])
    opt.load_state_dict(saved["optimizer"])
    set_generator_state(rng, saved["rng"])
    model.history = list(saved["history"])
    if caller is not None:
        caller.load_state_dict(saved["caller"])
    return ckpt, int(saved["epoch"])


def _save_central(ckpt: Checkpointer | None, model: Any, params: dict[str, torch.Tensor],
                  opt: torch.optim.Optimizer, rng: np.random.Generator, caller: Any, epoch: int) -> None:
    """The checkpoint of :func:`_resume_central` after ``epoch`` epochs (if any)."""
    if ckpt is None:
        return
    ckpt.save(lambda: {"epoch": epoch, "params": params, "optimizer": opt.state_dict(),
                       "rng": generator_state(rng), "history": model.history,
                       "caller": None if caller is None else caller.state_dict()},
              final=epoch >= model.epochs)


class CentralNCF(CentralUpperBound):
    """Centralised NeuMF (the NCF upper bound): all users' data on the server, Adam,
    mini-batches, ``num_negatives`` fresh negatives per positive every epoch."""

    stream = 0xC4F
    watched = ("NCF item embeddings", "qg")
    default_init_std = 0.01
    params: dict[str, torch.Tensor] | None = None

    def init_params(self, gen: torch.Generator) -> dict[str, torch.Tensor]:
        d = self.dim
        p = {"pg": torch.randn(self.n_users, d, generator=gen) * self.init_std,
             "pm": torch.randn(self.n_users, d, generator=gen) * self.init_std,
             "qg": torch.randn(self.n_items, d, generator=gen) * self.init_std,
             "qm": torch.randn(self.n_items, d, generator=gen) * self.init_std}
        p.update(init_net(d, gen))
        self.params = {k: v.to(self.device).requires_grad_() for k, v in p.items()}
        return self.params

    def logits(self, params: dict[str, torch.Tensor], users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        return neumf_logits(params["pg"][users], params["pm"][users], params["qg"][items], params["qm"][items],
                            {n: params[n] for n in NET})

    def score_pairs(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        if self.params is None:
            raise NotFittedError("fit the model first")
        return pair_probabilities(lambda u, i: self.logits(self.params, u, i), user_ids, item_ids, self.device)

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        return grid_scores(self.score_pairs, user_ids, self.n_items)
