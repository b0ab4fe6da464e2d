"""Who trains in a round and on what: client sampling, training samples, negatives.

Everything random comes from the ``numpy.random.Generator`` the caller passes (seeded by
``(seed, round)`` in :class:`~recrepro.models.federated.simulation.FederatedSimulation`), so a
seed gives identical rounds.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

__all__ = ["pointwise_epoch", "round_samples", "sample_clients", "sample_negatives"]


def sample_clients(n_users: int, client_ratio: float, rng: np.random.Generator) -> np.ndarray:
    """The round's participants, sorted: ``max(1, int(n_users · client_ratio))`` users drawn
    without replacement, or every user (no draw) when that is all of them."""
    n_part = max(1, int(n_users * client_ratio))
    if n_part >= n_users:
        return np.arange(n_users)
    return np.sort(rng.choice(n_users, n_part, replace=False))


def round_samples(train: sp.csr_matrix, touched: sp.csr_matrix, users: np.ndarray, k: int,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training samples of ``users`` for a round: their positives in ``train``, then ``k`` fresh
    negatives each (:func:`sample_negatives`, avoiding ``touched``).

    Returns ``(owner[m], item[m], label[m])`` sorted by owner (index into ``users``).
    """
    sub = train[users]
    counts = np.diff(sub.indptr)
    owner_pos = np.repeat(np.arange(users.size), counts)
    items_pos = sub.indices.astype(np.int64)
    neg = sample_negatives(users[owner_pos], touched, k, rng) if k else np.zeros((owner_pos.size, 0), np.int64)
    owner = np.concatenate([owner_pos, np.repeat(owner_pos, k)])
    item = np.concatenate([items_pos, neg.ravel()])
    label = np.concatenate([np.ones(owner_pos.size, np.float32), np.zeros(owner_pos.size * k, np.float32)])
    order = np.argsort(owner, kind="stable")
    return owner[order], item[order], label[order]


def sample_negatives(users: np.ndarray, touched: sp.csr_matrix, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` negatives per entry of ``users``, uniform over items the user never touched.

    Rejection sampling against the sorted keys ``user·n_items + item`` of ``touched``
    (train ∪ validation ∪ test, as the code's ``negative_items``); vectorised, a few
    passes.  Draws within one row may repeat (the code draws ``k`` distinct items; at
    ``k = 4`` out of thousands the difference is negligible).

    Returns
    -------
    numpy.ndarray
        int64 ``[len(users), k]``.
    """
    n_items = touched.shape[1]
    out = rng.integers(0, n_items, size=(users.size, k), dtype=np.int64)
    if touched.shape[0] * n_items <= 200_000_000:  # a dense bitmap lookup (same draws, faster)
        bitmap = np.zeros(touched.shape[0] * n_items, dtype=bool)
        coo = touched.tocoo()
        bitmap[coo.row.astype(np.int64) * n_items + coo.col.astype(np.int64)] = True
        base = users.astype(np.int64)[:, None] * n_items
        for _ in range(1000):
            bad = bitmap[base + out]
            n_bad = int(np.count_nonzero(bad))
            if n_bad == 0:
                return out
            out[bad] = rng.integers(0, n_items, size=n_bad, dtype=np.int64)
        raise RuntimeError("negative sampling did not converge: a user touched (almost) every item")
    coo = touched.tocoo()
    keys = np.sort(coo.row.astype(np.int64) * n_items + coo.col.astype(np.int64))
    bad = np.ones(out.shape, dtype=bool)
    base = users.astype(np.int64)[:, None] * n_items
    for _ in range(1000):
        cand = base + out
        pos = np.searchsorted(keys, cand)
        pos = np.minimum(pos, max(keys.size - 1, 0))
        bad = keys[pos] == cand if keys.size else np.zeros(out.shape, bool)
        n_bad = int(bad.sum())
        if n_bad == 0:
            return out
        out[bad] = rng.integers(0, n_items, size=n_bad, dtype=np.int64)
    raise RuntimeError("negative sampling did not converge: a user touched (almost) every item")


def pointwise_epoch(users_pos: np.ndarray, items_pos: np.ndarray, touched: sp.csr_matrix, k: int,
                    batch_size: int, rng: np.random.Generator, device: torch.device):
    """One epoch of pointwise BCE training data (He et al. 2017), in shuffled mini-batches.

    Every positive ``(users_pos[j], items_pos[j])`` with label 1 plus ``k`` fresh negatives per
    positive (:func:`sample_negatives`) with label 0, permuted once; yields ``(users, items,
    labels)`` tensors on ``device`` of at most ``batch_size`` rows.  Used by the centralised
    MF and NCF upper bounds so that both see the same data stream for the same ``rng``.
    """
    neg = sample_negatives(users_pos, touched, k, rng)
    u = np.concatenate([users_pos, np.repeat(users_pos, k)])
    i = np.concatenate([items_pos, neg.ravel()])
    r = np.concatenate([np.ones(users_pos.size, np.float32), np.zeros(users_pos.size * k, np.float32)])
    order = rng.permutation(u.size)
    for lo in range(0, u.size, batch_size):
        sel = order[lo:lo + batch_size]
        yield (torch.as_tensor(u[sel], device=device), torch.as_tensor(i[sel], device=device),
               torch.as_tensor(r[sel], device=device))
