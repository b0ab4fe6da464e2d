"""PRISM's three backbones by name: linear MF, non-linear MF and LightGCN (Loveland et al., KDD 2025).

A module of its own because it names both :mod:`recrepro.models.mf` and
:mod:`recrepro.models.lightgcn`, and LightGCN builds on MF's ID tables: kept in ``mf.py``
the factory made ``mf`` and ``lightgcn`` import each other.
"""

from __future__ import annotations

import scipy.sparse as sp
from torch import nn

from recrepro.models.lightgcn import LightGCNNet
from recrepro.models.mf import MFNet, NLMFNet

__all__ = ["build_net"]


def build_net(backbone: str, n_users: int, n_items: int, dim: int, seed: int, *, train: sp.csr_matrix | None = None,
              nlmf_relu: bool = True, layers: int = 3) -> nn.Module:
    """The backbone network by name: ``mf``, ``nlmf``, ``nlmflinear`` or ``lightgcn``.

    ``nlmflinear`` is non-linear MF as the official code builds it (the towers' ReLU output is
    discarded, so each tower is one affine map) whatever ``nlmf_relu`` says: a run name of its
    own, so that both forms can be recorded side by side (docs/deviations.md#prism-nlmf-relu).
    """
    if backbone == "mf":
        return MFNet(n_users, n_items, dim, seed)
    if backbone == "nlmf":
        return NLMFNet(n_users, n_items, dim, seed, relu=nlmf_relu)
    if backbone == "nlmflinear":
        return NLMFNet(n_users, n_items, dim, seed, relu=False)
    if backbone == "lightgcn":
        if train is None:
            raise ValueError("LightGCN needs the training matrix")
        return LightGCNNet(n_users, n_items, dim, seed, train=train, layers=layers)
    raise ValueError(f"unknown backbone {backbone!r}; known: mf, nlmf, nlmflinear, lightgcn")
