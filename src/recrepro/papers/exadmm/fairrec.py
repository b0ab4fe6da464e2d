"""FairRec post-processing (Patro et al., WWW 2020) as run by exADMM's official code.

Official ``include/frecsys/fairrec.hpp`` (``CreateDeterministicRanking``): given the scores
``V u`` of the n users of a population (fold-in items masked), every item gets a stock
``min(⌈⌊n·k/m⌋ · prop⌉, n − #users of the population who interacted with it)``
(``⌊n·k/m⌋`` is the C++ integer division).  Phase 1, greedy round robin over the shuffled
users: the current user takes its best-scoring item that it has not taken and that has
stock left; stop when all stock is used or when the user whose turn it is already has k
items.  Phase 2: every list is filled greedily by score.  Output score ``1/rank`` for the k
chosen items.

Deviations: items no user of the population interacted with get stock ``min(⌈…⌉, n)``
(the formula; the official code leaves them at 0 because it only visits items with
history); switch ``unseen_stock="zero"`` gives the official behaviour.  Below the k chosen
items we rank the remaining items by their original score (the official code leaves them
at score 0, i.e. in arbitrary order), so metrics at cut-offs above k stay defined; they
are not FairRec's.

The round robin is sequential by definition (each pick changes the stock the next user
sees), so it loops over picks (n·k), with one vectorised NumPy search per pick over the
user's precomputed ranking; it is meant for evaluation populations of up to ~10⁴ users.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

__all__ = ["fairrec_rankings", "fairrec_scores"]


def fairrec_rankings(scores: np.ndarray, history: sp.csr_matrix, k: int, prop: float, seed: int = 0,
                     unseen_stock: str = "n") -> np.ndarray:
    """Top-``k`` lists ``[n, k]`` of FairRec's greedy round robin.

    Parameters
    ----------
    scores:
        ``[n, m]`` scores of the population's users (higher is better).
    history:
        ``[n, m]`` fold-in interactions of the same users (masked, and counted in the stock).
    k:
        List length (``--topk_fair``).
    prop:
        ``--min_assignment_prop``.
    seed:
        Seed of the user shuffle.
    unseen_stock:
        ``"n"`` (formula) or ``"zero"`` (official) for items without any interaction.
    """
    n, m = scores.shape
    hist = sp.csr_matrix(history)
    masked = np.array(scores, dtype=np.float64, copy=True)
    masked[hist.nonzero()] = -np.inf
    order = np.argsort(-masked, axis=1, kind="stable")  # best first, ties by item id
    degree = np.bincount(hist.indices, minlength=m)
    max_assign = n - degree
    if unseen_stock == "zero":
        max_assign = np.where(degree > 0, max_assign, 0)
    min_assigned = math.ceil((n * k // m) * prop)
    stock = np.minimum(min_assigned, max_assign).astype(np.int64)
    picked = np.zeros((n, m), dtype=bool)
    lists = np.full((n, k), -1, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    users = np.random.default_rng(seed).permutation(n)
    cur = 0
    while stock.sum() > 0:
        u = users[cur]
        if count[u] == k:
            break
        cand = order[u]
        ok = (~picked[u, cand]) & (stock[cand] > 0)
        item = cand[int(np.argmax(ok))] if ok.any() else cand[-1]
        picked[u, item] = True
        lists[u, count[u]] = item
        count[u] += 1
        stock[item] -= 1
        cur = (cur + 1) % n
    for u in range(n):  # phase 2: fill by score
        need = k - count[u]
        if need > 0:
            cand = order[u]
            rest = cand[~picked[u, cand]][:need]
            lists[u, count[u]:count[u] + rest.size] = rest
            count[u] += rest.size
    return lists


def fairrec_scores(U, V, history: sp.csr_matrix, users: np.ndarray, *, k: int, prop: float, seed: int = 0,
                   unseen_stock: str = "n"):
    """A score callable for the evaluators: FairRec lists of the population ``history``'s users.

    The population is every row of ``history`` with an entry (the fold-in users).  Scores:
    ``2 + 1/rank`` for the k FairRec items, the original score squashed into (−1, 1)
    (order kept) for the others.
    """
    import torch

    U = U.detach().cpu().double().numpy() if isinstance(U, torch.Tensor) else np.asarray(U, dtype=np.float64)
    V = V.detach().cpu().double().numpy() if isinstance(V, torch.Tensor) else np.asarray(V, dtype=np.float64)
    hist = sp.csr_matrix(history)
    pop = np.flatnonzero(np.diff(hist.indptr) > 0)
    raw = U[pop] @ V.T
    lists = fairrec_rankings(raw, hist[pop], k, prop, seed, unseen_stock)
    fair = np.tanh(raw / (np.abs(raw).max() + 1e-12))
    rows = np.repeat(np.arange(pop.size), k)
    valid = lists.ravel() >= 0
    fair[rows[valid], lists.ravel()[valid]] = 2.0 + 1.0 / (np.tile(np.arange(k), pop.size)[valid] + 1.0)
    position = np.full(hist.shape[0], -1, dtype=np.int64)
    position[pop] = np.arange(pop.size)

    def score_batch(user_ids: np.ndarray) -> np.ndarray:
        idx = position[np.asarray(user_ids, dtype=np.int64)]
        if (idx < 0).any():
            raise ValueError("fairrec_scores: user outside the population scored")
        return fair[idx].astype(np.float32)

    return score_batch
