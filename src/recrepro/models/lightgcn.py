"""LightGCN backbone (He et al., SIGIR 2020) as PRISM uses it (Appendix D.1; notes B3).

Propagation over the user–item bipartite graph with the symmetric normalisation
``Â = D^{-1/2} A D^{-1/2}`` (``A`` = [[0, R], [Rᵀ, 0]]), ``K`` layers
``E^{(k+1)} = Â E^{(k)}`` and the layer mean ``E = (1/(K+1)) Σ_k E^{(k)}``.
Plain torch sparse matmuls (no torch-geometric).  The official code normalises each
sampled training subgraph anew; here every step propagates over the full training graph
(see docs/deviations.md, ``prism-lightgcn-full-graph``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.models.gather import gather_rows
from recrepro.models.mf import Encoder, _IDTables

__all__ = ["LightGCNNet", "normalized_adjacency", "propagate"]


def normalized_adjacency(train: sp.csr_matrix) -> torch.Tensor:
    """``D^{-1/2} A D^{-1/2}`` of the bipartite graph of ``train`` as a coalesced torch sparse COO tensor.

    Nodes ``0..n_users-1`` are users, ``n_users..`` items; isolated nodes get a zero row.
    """
    r = sp.csr_matrix(train, dtype=np.float32)
    r.data[:] = 1.0
    n_users, n_items = r.shape
    a = sp.bmat([[None, r], [r.T, None]], format="csr", dtype=np.float32)
    a.sum_duplicates()
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv_sqrt = np.zeros_like(deg)
    nz = deg > 0
    inv_sqrt[nz] = deg[nz] ** -0.5
    norm = sp.diags(inv_sqrt) @ a @ sp.diags(inv_sqrt)
    coo = sp.coo_matrix(norm, dtype=np.float32)
    indices = torch.from_numpy(np.vstack([coo.row, coo.col]).astype(np.int64))
    return torch.sparse_coo_tensor(indices, torch.from_numpy(coo.data), size=coo.shape,
                                   check_invariants=True).coalesce()


def propagate(adj: torch.Tensor, emb: torch.Tensor, layers: int) -> torch.Tensor:
    """Layer mean ``(1/(K+1)) Σ_{k=0..K} Â^k E`` (LightGCN Eq. 4 with α_k = 1/(K+1))."""
    out = emb
    current = emb
    for _ in range(layers):
        current = adj @ current
        out = out + current
    return out / (layers + 1)


class LightGCNNet(_IDTables):
    """LightGCN with ``layers`` propagation steps (3 in the paper) on the training graph."""

    def __init__(self, n_users: int, n_items: int, dim: int, seed: int, *, train: sp.csr_matrix,
                 layers: int = 3) -> None:
        super().__init__(n_users, n_items, dim, seed)
        self.layers = int(layers)
        self.register_buffer("adj", normalized_adjacency(train), persistent=False)

    def final_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        emb = torch.cat([self.user_emb, self.item_emb], dim=0)
        out = propagate(self.adj, emb, self.layers)
        return out[: self.n_users], out[self.n_users:]

    def encoders(self) -> tuple[Encoder, Encoder]:
        users, items = self.final_tables()
        return (lambda idx: gather_rows(users, idx)), (lambda idx: gather_rows(items, idx))
