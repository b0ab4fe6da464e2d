"""FedRAP (Li, Long & Zhou, ICLR 2024) and the centralised MF upper bound.

FedRAP's federated training lives in :mod:`recrepro.models.federated` (one vectorised
simulation for FedRAP, FedMF and PFedRec); this module names the variants and adds the
centralised matrix factorisation trained on the same BCE-with-negatives objective.

Scores (poster, "FedRAP – Two-Way Personalization")::

    r̂_ij = sigmoid(<u_i, (D^(i) + C)_j>)

objective (poster, "FedRAP – Objective"), with a the round::

    min Σ_i ( Σ_(i,j)∈Ω BCE(r_ij, r̂_ij) − λ_(a,v1) ||D^(i) − C||_F² ) + μ_(a,v2) ||C||_1
    λ_(a,v1) = tanh(a/10)·v1,   μ_(a,v2) = tanh(a/10)·v2
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.checkpoints import Checkpointer, data_fingerprint, generator_state, set_generator_state, settings_key
from recrepro.models.base import NotFittedError, Recommender
from recrepro.models.federated import FederatedConfig, FederatedRecommender, pointwise_epoch
from recrepro.records import check_finite

__all__ = ["FedRAP", "CentralMF", "make_variant"]


class FedRAP(FederatedRecommender):
    """FedRAP with the paper's defaults (``method='fedrap'``, ``mode='paper'``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("method", "fedrap")
        super().__init__(FederatedConfig(**kwargs))


class CentralMF(Recommender):
    """Centralised MF (GMF without the output layer): ``r̂ = sigmoid(<p_u, q_i>)``.

    Trained on all users' data at once with the same BCE objective and ``num_negatives``
    fresh negatives per positive every epoch (He et al. 2017), Adam, mini-batches.
    The upper bound the federated methods are compared with.
    """

    def __init__(self, dim: int = 32, epochs: int = 20, lr: float = 1e-3, batch_size: int = 2048,
                 num_negatives: int = 4, l2: float = 0.0, init_std: float = 0.1, seed: int = 0,
                 device: str = "cpu") -> None:
        self.dim, self.epochs, self.lr, self.batch_size = dim, epochs, lr, batch_size
        self.num_negatives, self.l2, self.init_std, self.seed = num_negatives, l2, init_std, seed
        self.device = torch.device(device)
        self.P: torch.Tensor | None = None
        self.history: list[dict[str, Any]] = []

    def fit(self, train: sp.csr_matrix, touched: sp.csr_matrix | None = None, eval_fn=None, *,
            checkpoint: str | Path | None = None, checkpoint_state: Any = None,
            checkpoint_min_seconds: float = 0.0, **_: Any) -> CentralMF:
        """Train ``epochs`` epochs; ``eval_fn(model, epoch)`` after each.

        ``checkpoint`` (:mod:`recrepro.checkpoints`): after every epoch save P, Q, Adam's
        state, the numpy generator that draws negatives and orders the data, the history and
        ``checkpoint_state.state_dict()`` (the caller's); a rerun resumes from it bit for bit.
        See :meth:`recrepro.models.federated.FederatedRecommender.fit`.
        """
        train = sp.csr_matrix(train)
        touched = sp.csr_matrix(touched) if touched is not None else train
        self.n_users, self.n_items = train.shape
        rng = np.random.default_rng([self.seed, 0xC3F])
        gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
        P = (torch.randn(self.n_users, self.dim, generator=gen) * self.init_std).to(self.device).requires_grad_()
        Q = (torch.randn(self.n_items, self.dim, generator=gen) * self.init_std).to(self.device).requires_grad_()
        opt = torch.optim.Adam([P, Q], lr=self.lr, weight_decay=self.l2)
        coo = train.tocoo()
        users_pos, items_pos = coo.row.astype(np.int64), coo.col.astype(np.int64)
        k = self.num_negatives
        self.P, self.Q = P, Q
        n_rows = users_pos.size * (k + 1)
        ckpt, first = _resume_central(self, {"P": P, "Q": Q}, opt, rng, train, touched, checkpoint,
                                      checkpoint_state, checkpoint_min_seconds)
        for epoch in range(first, self.epochs):
            total = 0.0
            for ut, it, rt in pointwise_epoch(users_pos, items_pos, touched, k, self.batch_size, rng, self.device):
                logit = (P[ut] * Q[it]).sum(-1)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, rt)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss) * ut.numel()
            check_finite("MF embeddings", Q, f"epoch {epoch}")
            info = {"round": epoch + 1, "train_loss": total / max(n_rows, 1)}
            if eval_fn is not None:
                info.update(eval_fn(self, epoch + 1))
            self.history.append(info)
            _save_central(ckpt, self, {"P": P, "Q": Q}, opt, rng, checkpoint_state, epoch + 1)
        return self

    @property
    def user_factors(self) -> np.ndarray | None:
        return None if self.P is None else self.P.detach().cpu().numpy()

    @property
    def item_factors(self) -> np.ndarray | None:
        return None if self.P is None else self.Q.detach().cpu().numpy()

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        if self.P is None:
            raise NotFittedError("fit the model first")
        u = torch.as_tensor(np.asarray(user_ids, dtype=np.int64), device=self.device)
        with torch.no_grad():
            return torch.sigmoid(self.P[u] @ self.Q.T).cpu().numpy().astype(np.float32)


_MF_KEYS = ("dim", "epochs", "lr", "batch_size", "num_negatives", "l2", "init_std")


def _resume_central(model: Any, params: dict[str, torch.Tensor], opt: torch.optim.Optimizer,
                    rng: np.random.Generator, train: sp.csr_matrix, touched: sp.csr_matrix,
                    checkpoint: str | Path | None, caller: Any,
                    min_seconds: float) -> tuple[Checkpointer | None, int]:
    """Restore a centralised upper bound (CentralMF, CentralNCF) from its checkpoint.

    Its state across epochs: the parameters, Adam's moments, the numpy generator (negatives
    and the order of the data are drawn from it every epoch), the history and the caller's
    state.  Returns the :class:`~recrepro.checkpoints.Checkpointer` (``None`` without a
    path) and the number of epochs already done.
    """
    if checkpoint is None:
        return None, 0
    settings = {name: getattr(model, name) for name in (*_MF_KEYS, "seed")}
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


def make_variant(settings: dict[str, Any], *, seed: int, device: str = "cpu",
                 memory_budget_mb: float | None = None) -> Recommender:
    """A model from a variant's settings (``method`` plus FederatedConfig / CentralMF keys)."""
    settings = dict(settings)
    settings.pop("round_cap", None)  # already applied to rounds/epochs (papers.fedrap.rule_settings)
    method = settings.pop("method")
    if method == "mf":
        kw = {k: settings[k] for k in _MF_KEYS if k in settings}
        if "rounds" in settings and "epochs" not in kw:
            kw["epochs"] = settings["rounds"]
        if "lr_mf" in settings:
            kw["lr"] = settings["lr_mf"]
        return CentralMF(seed=seed, device=device, **kw)
    if method == "ncf":
        from recrepro.models.fedncf import CentralNCF

        kw = {k: settings[k] for k in _MF_KEYS if k in settings and k != "init_std"}
        if "rounds" in settings and "epochs" not in kw:
            kw["epochs"] = settings["rounds"]
        if "lr_mf" in settings:
            kw["lr"] = settings["lr_mf"]
        return CentralNCF(seed=seed, device=device, **kw)
    settings.pop("lr_mf", None)
    settings.pop("epochs", None)
    if memory_budget_mb is not None:
        settings.setdefault("memory_budget_mb", memory_budget_mb)
    config = FederatedConfig(method=method, seed=seed, device=device, **settings)
    if method == "fedncf":
        from recrepro.models.fedncf import FedNCF

        return FedNCF(config)
    return FederatedRecommender(config)
