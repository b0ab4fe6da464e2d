"""Sampled ranking (leave-one-out with fixed negatives): NCF / FedRAP protocol.

Each held-out positive is ranked among itself and the user's fixed sampled negatives
(99 in FedRAP, drawn once and shared by validation and test).  HR@K = 1[rank <= K] and
NDCG@K = 1/log2(rank + 1) if rank <= K else 0 (He et al. 2017; FedRAP
``utils/metrics.py``), averaged over the positives (one per user in leave-one-out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from recrepro.evaluation import metrics as M
from recrepro.evaluation.inputs import negatives_from_frame
from recrepro.evaluation.results import SampledResult
from recrepro.evaluation.scoring import _to_numpy, embedding_pair
from recrepro.records import NonFiniteError  # a ValueError: NaN scores mean a diverged model

__all__ = ["evaluate_sampled", "sampled_ranks"]

SampledTies = Literal["pessimistic", "optimistic"]


def sampled_ranks(positive_scores: np.ndarray, negative_scores: np.ndarray, ties: SampledTies = "pessimistic") -> np.ndarray:
    """1-based rank of each positive among itself and its negatives.

    ``"pessimistic"``: ``rank = 1 + #{negatives with score >= positive}`` — a tie counts
    against the positive.  This is FedRAP's code (pandas ``rank(method='first')`` with the
    negatives listed before the positive).

    ``"optimistic"``: ``rank = 1 + #{negatives with score > positive}`` — ties favour the
    positive (λOpt's code).

    Parameters
    ----------
    positive_scores:
        ``[m]``.
    negative_scores:
        ``[m, c]``.

    Returns
    -------
    numpy.ndarray
        int64 ``[m]`` ranks in ``1..c+1``.
    """
    positive_scores = np.asarray(positive_scores)
    negative_scores = np.asarray(negative_scores)
    if np.isnan(positive_scores).any() or np.isnan(negative_scores).any():
        raise NonFiniteError("scores contain NaN: the model diverged or its input holds NaN")
    if ties == "pessimistic":
        above = negative_scores >= positive_scores[:, None]
    elif ties == "optimistic":
        above = negative_scores > positive_scores[:, None]
    else:
        raise ValueError(f"ties must be 'pessimistic' or 'optimistic', got {ties!r}")
    return 1 + above.sum(axis=1, dtype=np.int64)


def _pairs(positives: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(positives, pd.DataFrame):
        return positives["user"].to_numpy(np.int64), positives["item"].to_numpy(np.int64)
    users, items = positives
    return np.asarray(users, dtype=np.int64).ravel(), np.asarray(items, dtype=np.int64).ravel()


def _negative_table(negatives: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(negatives, pd.DataFrame):
        return negatives_from_frame(negatives)
    users, items = negatives
    users = np.asarray(users, dtype=np.int64).ravel()
    items = np.asarray(items, dtype=np.int64)
    if items.ndim != 2 or items.shape[0] != users.size:
        raise ValueError("negatives must be (users[u], items[u, c])")
    order = np.argsort(users, kind="stable")
    users, items = users[order], items[order]
    if np.unique(users).size != users.size:
        raise ValueError("negatives has more than one row for some user")
    return users, items


def _candidate_scores(score_source: Any, users: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """float32 ``[b, c]`` scores of ``candidates[b, c]`` for ``users[b]``."""
    embeddings = embedding_pair(score_source)
    if embeddings is not None:
        # float64 accumulation rounded to float32, as in full ranking (see scoring.py).
        user_emb = _to_numpy(embeddings[0])[users].astype(np.float64)
        item_emb = _to_numpy(embeddings[1])[candidates].astype(np.float64)
        return np.einsum("bd,bcd->bc", user_emb, item_emb).astype(np.float32)
    fn = getattr(score_source, "score", None)
    if not callable(fn):
        fn = score_source
    if not callable(fn):
        raise TypeError("score_source must be (user_emb, item_emb), a Recommender or a callable")
    rows = fn(users)
    if isinstance(rows, torch.Tensor):
        index = torch.as_tensor(candidates, device=rows.device, dtype=torch.long)
        return rows.detach().gather(1, index).to(torch.float32).cpu().numpy()
    return np.take_along_axis(np.asarray(rows), candidates, axis=1).astype(np.float32)


def evaluate_sampled(
    score_source: Any,
    positives: tuple[np.ndarray, np.ndarray] | pd.DataFrame,
    negatives: tuple[np.ndarray, np.ndarray] | pd.DataFrame,
    ks: Sequence[int],
    ties: SampledTies = "pessimistic",
    *,
    batch_size: int = 4096,
) -> SampledResult:
    """HR@K and NDCG@K of held-out positives ranked against fixed sampled negatives.

    Parameters
    ----------
    score_source:
        ``(user_emb, item_emb)`` (dot product), a
        :class:`~recrepro.models.base.Recommender`, or a callable
        ``score_batch(user_ids) -> [b, n_items]`` (full rows; only the candidates are read).
        FedRAP's per-client models fit the callable form.
    positives:
        ``(users[m], items[m])`` or a frame with ``user``/``item`` (the validation or test
        part).  A user may have several positives; each is ranked separately against the
        same negatives.
    negatives:
        ``(users[u], items[u, c])`` or the long ``negatives.parquet`` frame.
    ks:
        Cut-offs (FedRAP: 10).
    ties:
        ``"pessimistic"`` (FedRAP code, default) or ``"optimistic"`` (λOpt code), see
        :func:`sampled_ranks`.
    batch_size:
        Positives per scoring batch.

    Returns
    -------
    SampledResult
        ``overall`` = {``hr@K``, ``ndcg@K``} means over the positives; ``per_user`` rows
        ``user, item, rank, hr@K, ndcg@K``.
    """
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError("ks must be a non-empty list of positive integers")
    pos_users, pos_items = _pairs(positives)
    neg_users, neg_items = _negative_table(negatives)
    row = np.searchsorted(neg_users, pos_users)
    found = (row < neg_users.size) & (neg_users[np.minimum(row, max(neg_users.size - 1, 0))] == pos_users) \
        if neg_users.size else np.zeros(pos_users.size, bool)
    if not found.all():
        raise ValueError(f"{int((~found).sum())} positives have no negatives row")
    candidates = np.concatenate([pos_items[:, None], neg_items[row]], axis=1)
    if (candidates[:, 1:] == candidates[:, :1]).any():
        raise ValueError("a positive item is also among its user's negatives")
    ranks = np.empty(pos_users.size, dtype=np.int64)
    for start in range(0, pos_users.size, batch_size):
        stop = min(pos_users.size, start + batch_size)
        scores = _candidate_scores(score_source, pos_users[start:stop], candidates[start:stop])
        ranks[start:stop] = sampled_ranks(scores[:, 0], scores[:, 1:], ties)
    per_user: dict[str, np.ndarray] = {"user": pos_users, "item": pos_items, "rank": ranks}
    for k in ks:
        per_user[f"hr@{k}"] = M.rank_hit(ranks, k)
        per_user[f"ndcg@{k}"] = M.rank_ndcg(ranks, k)
    frame = pd.DataFrame(per_user)
    overall = {
        key: (float(frame[key].mean()) if len(frame) else float("nan"))
        for k in ks for key in (f"hr@{k}", f"ndcg@{k}")
    }
    counts = {
        "n_positives": int(pos_users.size),
        # same key as EvaluationResult.counts: distinct users with a held-out positive
        "n_users_evaluated": int(np.unique(pos_users).size),
        "n_negatives_per_user": int(neg_items.shape[1]),
    }
    settings = {"ks": ks, "ties": ties, "protocol": "sampled (1 positive + fixed negatives)"}
    return SampledResult(overall=overall, per_user=frame, counts=counts, settings=settings)
