"""The :class:`~recrepro.models.base.Recommender` of PRISM's backbones, trained by the PRISM trainer.

Paper code, so it lives with the paper: the backbones themselves (:mod:`recrepro.models.mf`,
:mod:`recrepro.models.lightgcn`) are shared models and never import from ``recrepro.papers``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from recrepro.models.base import Recommender
from recrepro.papers.prism.trainer import TrainSettings, train as run_training

__all__ = ["EmbeddingRecommender"]


class EmbeddingRecommender(Recommender):
    """A PRISM backbone trained by :func:`recrepro.papers.prism.trainer.train`; scores = dot products.

    Parameters
    ----------
    backbone:
        ``mf`` | ``nlmf`` | ``lightgcn``.
    settings:
        :class:`recrepro.papers.prism.trainer.TrainSettings` fields (loss, lr,
        weight decay and its mode, PRISM α, epochs, patience, ...).
    """

    def __init__(self, backbone: str = "mf", **settings: Any) -> None:
        self.backbone = backbone
        self.settings = settings
        self.net: nn.Module | None = None
        self.history: dict[str, Any] = {}
        self._user: np.ndarray | None = None
        self._item: np.ndarray | None = None

    def fit(self, train: sp.csr_matrix, validation: sp.csr_matrix | None = None, *,
            checkpoint: str | Path | None = None, **kwargs: Any) -> EmbeddingRecommender:
        """Train (early-stopping on ``validation``); ``checkpoint``: resume from / save to this
        file after every epoch (:func:`recrepro.papers.prism.trainer.train`); other keyword
        arguments (``on_epoch``, ``checkpoint_min_seconds``) go to the trainer too."""
        if checkpoint is not None:
            kwargs["checkpoint"] = checkpoint

        matrix = self._as_train_matrix(train)
        self.n_users, self.n_items = matrix.shape
        settings = TrainSettings(backbone=self.backbone, **self.settings)
        self.net, self.history = run_training(matrix, validation, settings, **kwargs)
        with torch.no_grad():
            users, items = self.net.final_tables()
            self._user = users.detach().cpu().numpy().astype(np.float32)
            self._item = items.detach().cpu().numpy().astype(np.float32)
        return self

    @property
    def user_factors(self) -> np.ndarray | None:
        return self._user

    @property
    def item_factors(self) -> np.ndarray | None:
        return self._item

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        self._check_fitted()
        return (self._user[np.asarray(user_ids, dtype=np.int64)] @ self._item.T).astype(np.float32)

    def item_magnitudes(self) -> np.ndarray:
        """Row norms of the raw item ID table (the magnitudes of the paper's Fig. 2)."""
        self._check_fitted()
        return self.net.item_emb.detach().norm(dim=1).cpu().numpy()
