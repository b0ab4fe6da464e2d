"""Matrix factorisation backbones of PRISM (Loveland et al., KDD 2025) and the PRISM init.

- :class:`MFNet` — linear MF: ID embeddings, score = dot product (paper §3.1, d = 64).
- :class:`NLMFNet` — non-linear MF: ID embeddings passed through a user tower and an item
  tower of two ``Linear(d, d)`` layers with a ReLU between them (Appendix B.1).  The
  official code computes the ReLU but discards its result (notes B7.1), so its
  "non-linear" MF is linear; ``relu=False`` reproduces that (switch ``nlmf_relu``).
- :func:`prism_init` — Eq. (4): ``x = (α·ln(d_x + 2) + 1 − α) · x_init / ‖x_init‖``.

The backbones by name are :func:`recrepro.models.backbones.build_net`; the
:class:`~recrepro.models.base.Recommender` that trains them with the PRISM trainer is
:class:`recrepro.papers.prism.recommender.EmbeddingRecommender` (paper code, so it lives with
the paper: shared models never import from ``recrepro.papers``).

Every network exposes ``user_emb`` / ``item_emb`` (the raw ID tables, whose row norms
are the "magnitudes" of the paper's Fig. 2) and ``encoders()``, returning two functions
mapping index tensors to final embeddings (LightGCN propagates once per call), gathered by
:func:`~recrepro.models.gather.gather_rows` so that a training's gradients do not depend on the
number of CPU threads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from recrepro.models.gather import gather_rows

__all__ = ["MFNet", "NLMFNet", "prism_init", "prism_magnitude", "xavier_table"]

Encoder = Callable[[torch.Tensor], torch.Tensor]


def xavier_table(n: int, d: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """An ``[n, d]`` table drawn like ``nn.init.xavier_uniform_``: U(−a, a), a = √(6/(n+d))."""
    bound = float(np.sqrt(6.0 / (n + d)))
    return (torch.rand(n, d, generator=generator, dtype=torch.float32) * 2.0 - 1.0) * bound


def prism_magnitude(degree: np.ndarray | torch.Tensor, alpha: float) -> torch.Tensor:
    """Target norms of Eq. (4): ``α·ln(deg + 2) + (1 − α)`` (natural log)."""
    deg = torch.as_tensor(np.asarray(degree), dtype=torch.float64)
    return (alpha * torch.log(deg + 2.0) + (1.0 - alpha)).to(torch.float32)


def prism_init(table: torch.Tensor, degree: np.ndarray | torch.Tensor, alpha: float) -> torch.Tensor:
    """PRISM, Eq. (4): rescale each row of ``table`` to norm ``α·ln(deg + 2) + 1 − α``.

    Parameters
    ----------
    table:
        ``[n, d]`` initial embeddings ``x_init`` (Xavier-uniform in the paper).
    degree:
        ``[n]`` training degrees (0 for nodes without training interactions).
    alpha:
        Encoding strength in [0, 1]; α = 0 gives unit-norm rows (not the Xavier baseline).

    Returns
    -------
    torch.Tensor
        A new ``[n, d]`` tensor.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"PRISM alpha must be in [0, 1], got {alpha}")
    norms = table.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return table / norms * prism_magnitude(degree, alpha).unsqueeze(1).to(table.device)


class _IDTables(nn.Module):
    def __init__(self, n_users: int, n_items: int, dim: int, seed: int) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(int(seed))
        self.user_emb = nn.Parameter(xavier_table(n_users, dim, gen))
        self.item_emb = nn.Parameter(xavier_table(n_items, dim, gen))
        self.n_users, self.n_items, self.dim = n_users, n_items, dim

    def apply_prism(self, user_degree: np.ndarray, item_degree: np.ndarray, alpha: float) -> None:
        with torch.no_grad():
            self.user_emb.copy_(prism_init(self.user_emb, user_degree, alpha))
            self.item_emb.copy_(prism_init(self.item_emb, item_degree, alpha))


class MFNet(_IDTables):
    """Linear MF: final embeddings are the ID embeddings; score = ``u · i``."""

    def encoders(self) -> tuple[Encoder, Encoder]:
        return (lambda idx: gather_rows(self.user_emb, idx)), (lambda idx: gather_rows(self.item_emb, idx))

    def final_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.user_emb, self.item_emb


class NLMFNet(_IDTables):
    """Non-linear MF: per-side towers ``Linear(d,d) → ReLU → Linear(d,d)`` on the ID embeddings.

    Parameters
    ----------
    relu:
        ``True`` (paper, Appendix B.1) applies the ReLU; ``False`` reproduces the
        official code, whose ReLU result is discarded (two stacked linear layers).
    """

    def __init__(self, n_users: int, n_items: int, dim: int, seed: int, relu: bool = True) -> None:
        super().__init__(n_users, n_items, dim, seed)
        torch.manual_seed(int(seed))
        self.user_tower = nn.ModuleList([nn.Linear(dim, dim), nn.Linear(dim, dim)])
        self.item_tower = nn.ModuleList([nn.Linear(dim, dim), nn.Linear(dim, dim)])
        self.relu = bool(relu)

    def _tower(self, layers: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
        x = layers[0](x)
        if self.relu:
            x = torch.relu(x)
        return layers[1](x)

    def encoders(self) -> tuple[Encoder, Encoder]:
        return (lambda idx: self._tower(self.user_tower, gather_rows(self.user_emb, idx))), \
            (lambda idx: self._tower(self.item_tower, gather_rows(self.item_emb, idx)))

    def final_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._tower(self.user_tower, self.user_emb), self._tower(self.item_tower, self.item_emb)
