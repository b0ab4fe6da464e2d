"""The NeuMF network (He et al. 2017, eq. 9–12) as FedRAP's NCF baselines use it.

Shared by the federated FedNCF (:mod:`recrepro.papers.fedrap.fedncf`) and the centralised
NCF upper bound (:class:`recrepro.papers.fedrap.central.CentralNCF`): the logits, for one
shared network or a stacked network per client, the network's init, the BCE they train on
and full-row scoring from a pair scorer.  (:mod:`recrepro.models.neumf` is λOpt's NeuMF
baseline, with its own init and layers.)
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["NET", "bce", "grid_scores", "init_net", "neumf_logits", "pair_probabilities"]

NET = ("W1", "b1", "W2", "b2", "h", "h0")  # the network's parameters (the rest are embeddings)


def neumf_logits(pg: torch.Tensor, pm: torch.Tensor, qg: torch.Tensor, qm: torch.Tensor,
                 net: dict[str, torch.Tensor]) -> torch.Tensor:
    """NeuMF logits.  Shared network: ``pg, pm, qg, qm`` are ``[n, d]`` and ``net`` holds
    ``W1 [2d, d]``, ``b1 [d]``, ``W2 [d, d/2]``, ``b2 [d/2]``, ``h [d + d/2]``, ``h0 []``.
    Per-client networks: ``qg, qm`` are ``[B, L, d]``, ``pg, pm`` ``[B, d]`` and every
    ``net`` entry has a leading client axis ``B``."""
    if qg.dim() == 3:
        gmf = pg[:, None, :] * qg
        d = qg.shape[-1]
        z = torch.baddbmm(net["b1"][:, None, :], qm, net["W1"][:, d:, :])
        z = z + torch.bmm(pm[:, None, :], net["W1"][:, :d, :])
        z = torch.relu(z)
        z = torch.relu(torch.baddbmm(net["b2"][:, None, :], z, net["W2"]))
        h = net["h"]
        return (gmf * h[:, None, :d]).sum(-1) + (z * h[:, None, d:]).sum(-1) + net["h0"][:, None]
    gmf = pg * qg
    z = torch.relu(torch.cat([pm, qm], 1) @ net["W1"] + net["b1"])
    z = torch.relu(z @ net["W2"] + net["b2"])
    return torch.cat([gmf, z], 1) @ net["h"] + net["h0"]


def init_net(d: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """``nn.Linear`` default init (uniform ±1/sqrt(fan_in)) for the three layers."""
    def uni(shape, fan_in):
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(shape, generator=gen) * 2 - 1) * bound

    h2 = max(1, d // 2)
    return {"W1": uni((2 * d, d), 2 * d), "b1": uni((d,), 2 * d), "W2": uni((d, h2), d), "b2": uni((h2,), d),
            "h": uni((d + h2,), d + h2), "h0": uni((), d + h2)}


def bce(logit: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """``torch.nn.BCELoss`` on ``σ(logit)`` (logs clamped at −100), elementwise.  Its own
    backward, not autograd through a clamped ``log1p(-p)``: where σ saturates to exactly 1 that
    chain gives 0 · (1 / 0) = NaN, BCELoss's gives 0 (a saturated sample stops learning, as in
    FedRAP's code)."""
    return torch.nn.functional.binary_cross_entropy(torch.sigmoid(logit), label, reduction="none")


def pair_probabilities(logits, user_ids: np.ndarray, item_ids: np.ndarray, device: torch.device) -> np.ndarray:
    """``σ(logits(u, i))`` of the pairs ``(user_ids[k], item_ids[k])`` as float32, without a graph.

    ``logits(users, items)`` takes the pairs as int64 tensors on ``device``."""
    u = torch.as_tensor(np.asarray(user_ids, dtype=np.int64).ravel(), device=device)
    i = torch.as_tensor(np.asarray(item_ids, dtype=np.int64).ravel(), device=device)
    with torch.no_grad():
        logit = logits(u, i)
    return torch.sigmoid(logit).cpu().numpy().astype(np.float32)


def grid_scores(score_pairs, user_ids: np.ndarray, n_items: int) -> np.ndarray:
    """Full rows ``[len(users), n_items]`` from a pair scorer, in chunks of ~2^20 pairs."""
    users = np.asarray(user_ids, dtype=np.int64).ravel()
    out = np.empty((users.size, n_items), np.float32)
    step = max(1, (1 << 20) // max(n_items, 1))
    for lo in range(0, users.size, step):
        u = users[lo:lo + step]
        out[lo:lo + u.size] = score_pairs(np.repeat(u, n_items), np.tile(np.arange(n_items), u.size)).reshape(
            u.size, n_items)
    return out
