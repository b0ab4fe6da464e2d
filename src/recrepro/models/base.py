"""Shared interface of the recommenders, in the style of ``benfred/implicit``.

A recommender is fitted on a ``users × items`` CSR matrix of training interactions and
then scores users against every item.  Dot-product models also expose their factor
matrices, which the evaluators use directly (one float64 matmul per batch instead of a
Python call per batch).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse as sp

__all__ = ["ModelConfig", "NotFittedError", "Recommender", "TorchFactorModel", "TrainedFactorModel"]


class ModelConfig:
    """Base of a model's hyper-parameter dataclass (``BPRConfig``, ``NeuMFConfig``, ...).

    The dataclass has a field ``extra`` (a dict) for the settings that are none of its
    fields; ``converters`` maps a field to how a settings value becomes its value (a YAML
    list to a tuple).  :meth:`coerce` gives the model's constructor one way to accept a
    config, a mapping or nothing.
    """

    converters: Mapping[str, Callable[[Any], Any]] = {}

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> Self:
        """The config of a settings mapping (the config file's): its fields, the rest in ``extra``."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in settings.items() if k in names}
        for name, convert in cls.converters.items():
            if name in known:
                known[name] = convert(known[name])
        return cls(**known, extra={k: v for k, v in settings.items() if k not in names})

    @classmethod
    def coerce(cls, config: ModelConfig | Mapping[str, Any] | None) -> Self:
        """``config`` as a ``cls``: the defaults for ``None``, an instance of ``cls`` unchanged, a
        mapping through :meth:`from_mapping`."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        return cls.from_mapping(config)


class NotFittedError(RuntimeError):
    """``score`` or ``recommend`` was called before ``fit``."""


class Recommender(ABC):
    """Base class of every model.

    Subclasses implement :meth:`fit` and :meth:`score`.  Dot-product models override
    :attr:`user_factors` / :attr:`item_factors` (``score(u) == user_factors[u] @
    item_factors.T``); the evaluators then use the factors instead of :meth:`score`.

    Attributes
    ----------
    n_users, n_items:
        Shape of the training matrix, set by :meth:`fit`.
    SETTING_FLOORS:
        Settings' smallest allowed values (inclusive), e.g. a shrinkage of 0: a tuning grid's pick
        at one has no better point beyond it, so it is not reported as a pick on the grid's edge.
    """

    n_users: int | None = None
    n_items: int | None = None
    SETTING_FLOORS: ClassVar[dict[str, float]] = {}

    @abstractmethod
    def fit(self, train: sp.csr_matrix, **kwargs: Any) -> Recommender:
        """Fit on a ``[n_users, n_items]`` CSR matrix of training interactions; return ``self``."""

    @abstractmethod
    def score(self, user_ids: np.ndarray) -> np.ndarray:
        """Scores of ``user_ids`` against all items: float32 ``[len(user_ids), n_items]``.

        Higher is better.  Implementations must not depend on how users are batched
        (the evaluators call this with batches of any size).
        """

    @property
    def user_factors(self) -> np.ndarray | None:
        """``[n_users, d]`` user factors of a dot-product model, else ``None``."""
        return None

    @property
    def item_factors(self) -> np.ndarray | None:
        """``[n_items, d]`` item factors of a dot-product model, else ``None``."""
        return None

    def recommend(
        self, user_ids: np.ndarray, k: int, exclude: sp.spmatrix | None = None, batch_size: int = 2048
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` items and scores for ``user_ids`` (items ``-1``-padded if fewer than ``k``).

        ``exclude`` is a ``[n_users, n_items]`` sparse matrix of items not to recommend
        (typically the training matrix).  Ties follow the evaluators' rule: score desc,
        then item id asc.
        """
        from recrepro.evaluation.ranking import full_ranking_topk  # evaluation does not import models

        self._check_fitted()
        users = np.asarray(user_ids, dtype=np.int64).ravel()
        if exclude is None:
            exclude = sp.csr_matrix((self.n_users, self.n_items), dtype=np.float32)
        result = full_ranking_topk(self, k, exclude=exclude, users=users, batch_size=batch_size)
        return result.items, result.scores

    def _check_fitted(self) -> None:
        if self.n_items is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit(train) first")

    @staticmethod
    def _as_train_matrix(train: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
        matrix = sp.csr_matrix(train)
        if not matrix.has_canonical_format:
            matrix = matrix.copy()
            matrix.sum_duplicates()
        return matrix


class TorchFactorModel(Recommender):
    """A dot-product model whose factors are torch tensors ``U [n_users, d]`` and ``V [n_items, d]``.

    Subclasses set ``self.U``, ``self.V`` and ``self.device`` in :meth:`fit` and implement
    :meth:`fold_in` (factors for the rows of a history matrix with ``V`` fixed); scoring,
    the factor properties and :meth:`fold_in_users` are shared.
    """

    U: Any = None
    V: Any = None
    device: Any = "cpu"

    def fold_in(self, history: sp.csr_matrix) -> Any:  # pragma: no cover - abstract in practice
        raise NotImplementedError

    def fold_in_users(self, history: sp.csr_matrix) -> None:
        """Replace the factors of the users with entries in ``history`` by their fold-in solution."""
        import torch

        rows = torch.as_tensor(np.flatnonzero(np.diff(sp.csr_matrix(history).indptr) > 0), device=self.device)
        folded = self.fold_in(history)
        self.U[rows] = folded[rows]

    def score(self, user_ids: np.ndarray) -> np.ndarray:
        import torch

        self._check_fitted()
        users = torch.as_tensor(np.asarray(user_ids, dtype=np.int64), device=self.device)
        return (self.U[users] @ self.V.T).float().cpu().numpy()

    @property
    def user_factors(self) -> np.ndarray | None:
        return None if self.U is None else self.U.cpu().numpy()

    @property
    def item_factors(self) -> np.ndarray | None:
        return None if self.V is None else self.V.cpu().numpy()


class TrainedFactorModel(Recommender):
    """A dot-product model trained by autograd on torch factors ``P [n_users, d]`` and ``Q [n_items, d]``.

    Subclasses set ``self.P``, ``self.Q`` in :meth:`fit` (tensors that require grad) and
    implement :meth:`score`; the factor properties (detached NumPy copies) are shared.
    """

    P: Any = None
    Q: Any = None

    @property
    def user_factors(self) -> np.ndarray | None:
        return None if self.P is None else self.P.detach().cpu().numpy()

    @property
    def item_factors(self) -> np.ndarray | None:
        return None if self.Q is None else self.Q.detach().cpu().numpy()
