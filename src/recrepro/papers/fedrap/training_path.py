"""What FedRAP's three local training paths share: the interface the model chooses them by.

:class:`~recrepro.papers.fedrap.fedrap.FederatedRecommender` holds the state (every client's
parameters, the private tables, the server's ``C``, the learning rates) and, each round, hands one
chunk of clients at a time to a :class:`TrainingPath`: the row path
(:class:`~recrepro.papers.fedrap.rows.RowPath`), the dense path
(:class:`~recrepro.papers.fedrap.dense.DensePath`) or the lazy paper path
(:class:`~recrepro.papers.fedrap.lazy.path.LazyPath`).  A path trains the clients, writes their
private state back into the model and returns a :class:`LocalResult`: the clients' losses and their
uploads ``C_i``, in whatever compact form the path has them, which the round adds up
(:meth:`LocalResult.add_uploads`) or forms densely (:meth:`LocalResult.dense_uploads`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.models.federated.privacy import RoundNoise
from recrepro.papers.fedrap.config import L1_THRESHOLD, FederatedConfig

__all__ = ["FedRAPModel", "LocalResult", "TrainingPath", "UploadTotals", "add_dense_uploads"]


class FedRAPModel(Protocol):
    """What a training path reads and writes of the model (its state; see
    :class:`~recrepro.papers.fedrap.fedrap.FederatedRecommender`)."""

    config: FederatedConfig
    device: torch.device
    n_users: int
    n_items: int
    round: int
    w: torch.Tensor            #: ``[n_users, d]`` the clients' user vectors
    b: torch.Tensor            #: ``[n_users]`` their biases
    C: torch.Tensor            #: ``[n_items, d]`` the server's item table
    D: torch.Tensor | None     #: ``[n_users, n_items, d]`` the private tables, stored units
    D_scale: torch.Tensor      #: ``[n_users]`` float64: true ``D[u] = D_scale[u] × stored D[u]``
    private_storage: str       #: ``"dense"`` (RAM) or ``"memmap"`` (disk)
    lr_network: float
    lr_args: float
    train_csr: sp.csr_matrix

    def private_rows(self, index: torch.Tensor) -> torch.Tensor: ...

    def write_private_rows(self, index: torch.Tensor, values: torch.Tensor, width: int | None = None) -> None: ...

    def private_blocks(self, users: np.ndarray, block_bytes: int = ...) -> Iterator: ...

    def read_private_blocks(self, users: np.ndarray, block_bytes: int) -> Iterator: ...

    def materialise_private(self, users: np.ndarray | None = None) -> None: ...

    def privatise(self, uploads: torch.Tensor, normals: RoundNoise) -> torch.Tensor: ...


@dataclass
class UploadTotals:
    """A round's uploads summed over its clients so far."""

    c_sum: torch.Tensor  #: ``Σ_i C_i`` (float64 ``[n_items, d]``)
    nnz: int = 0         #: uploaded entries with ``|C_i| > 1e-4``, summed over the clients


class LocalResult(Protocol):
    """What a path hands back for a chunk of clients (in the caller's client order)."""

    loss: torch.Tensor  #: ``[B]`` each client's last mean local loss (0: no batch)

    def add_uploads(self, model: FedRAPModel, totals: UploadTotals, noise: RoundNoise | None) -> None:
        """Add the clients' uploads ``C_i`` to ``totals``; with ``noise`` (DP), each privatised first
        (:meth:`~recrepro.papers.fedrap.fedrap.FederatedRecommender.privatise`)."""

    def dense_uploads(self, model: FedRAPModel) -> torch.Tensor:
        """The uploads ``C_i`` as ``[B, n_items, d]``."""


class TrainingPath(Protocol):
    """One way to run the local epochs of a chunk of clients (see the module docstring)."""

    def local_train(self, model: FedRAPModel, users: np.ndarray, owner: np.ndarray, item: np.ndarray,
                    label: np.ndarray, lam: float, mu: float, rng: np.random.Generator) -> LocalResult:
        """Local epochs of the clients ``users`` at once on their samples ``(owner, item, label)``
        (``owner`` sorted, an index into ``users``) with the round's weights ``lam``, ``mu``; writes
        back their private state."""


def add_dense_uploads(model: FedRAPModel, totals: UploadTotals, uploads: torch.Tensor,
                      noise: RoundNoise | None) -> None:
    """Add dense uploads ``[B, n_items, d]`` to ``totals``, privatised first with ``noise`` (DP)."""
    if noise is not None:
        uploads = model.privatise(uploads, noise)
    totals.c_sum += uploads.sum(0, dtype=torch.float64)
    totals.nnz += int((uploads.abs() > L1_THRESHOLD).sum())
