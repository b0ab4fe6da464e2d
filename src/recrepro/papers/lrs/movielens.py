"""Figure 6 (OUR OWN DESIGN, not the paper's): users of MovieLens-100K as LRS tasks.

The paper's real-data experiments could not be read. This demonstration asks whether the
low-rank + sparse model helps per-user rating regression when each user has few ratings:

* **data**: ``u.data`` (943 users, 1,682 movies, ratings 1-5); users with at least
  ``max(m_grid) + n_test`` ratings are kept (the others are dropped).
* **split** (per user, seeded): ``n_test`` random ratings are held out; of the rest, the first
  ``m`` of a random order are the training samples (nested over ``m``).
* **item features** ``x`` (a global model, fitted once on the kept users' training pools): the
  top-``d`` right singular vectors of the centred rating matrix scaled by the singular values,
  each column standardised, plus a constant 1 (a per-user bias). Items with no training rating get
  ``x = (0, ..., 0, 1)``.
* **task**: ``y = rating - global training mean``; each method fits ``Theta_i`` and predicts
  ``<x, Theta_i>`` on the held-out ratings; the metric is the held-out MSE (mean over users of the
  per-user mean squared error), and the global mean (``Theta_i = 0``) is a reference.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from recrepro.datasets.parsers import read_movielens_u_data


def load_tasks(raw_dir: str | Path, *, d: int, m_max: int, n_test: int, seed: int):
    """Dense per-user tensors: ``X (t, m_max, d+1)``, ``y (t, m_max)``, ``Xte (t, n_test, d+1)``, ``yte``."""
    frame = read_movielens_u_data(Path(raw_dir) / "u.data")[["user", "item", "rating"]]
    frame["rating"] = frame["rating"].astype(np.float64)
    counts = frame.groupby("user")["item"].transform("size")
    frame = frame[counts >= m_max + n_test].copy()
    rng = np.random.default_rng(seed)
    frame["key"] = rng.random(len(frame))
    frame = frame.sort_values(["user", "key"]).reset_index(drop=True)
    frame["rank"] = frame.groupby("user").cumcount()
    test = frame[frame["rank"] < n_test]
    train = frame[(frame["rank"] >= n_test) & (frame["rank"] < n_test + m_max)]
    users = np.sort(frame["user"].unique())
    items = np.sort(frame["item"].unique())
    u_index = pd.Series(np.arange(len(users)), index=users)
    i_index = pd.Series(np.arange(len(items)), index=items)
    mean = float(train["rating"].mean())
    R = np.zeros((len(users), len(items)))
    R[u_index[train["user"]].to_numpy(), i_index[train["item"]].to_numpy()] = train["rating"].to_numpy() - mean
    _, s, Vt = np.linalg.svd(R, full_matrices=False)
    F = Vt[:d].T * s[:d]
    F = (F - F.mean(0)) / F.std(0).clip(min=1e-12)
    seen = np.zeros(len(items), dtype=bool)
    seen[i_index[train["item"]].to_numpy()] = True
    F[~seen] = 0.0
    F = np.hstack([F, np.ones((len(items), 1))])
    t = len(users)

    def dense(part, n):
        X = np.zeros((t, n, F.shape[1]))
        y = np.zeros((t, n))
        rows = u_index[part["user"]].to_numpy()
        cols = part.groupby("user").cumcount().to_numpy()
        X[rows, cols] = F[i_index[part["item"]].to_numpy()]
        y[rows, cols] = part["rating"].to_numpy() - mean
        return torch.from_numpy(X), torch.from_numpy(y)

    X, y = dense(train, m_max)
    Xte, yte = dense(test, n_test)
    return X, y, Xte, yte, {"users": t, "items": len(items), "global_mean": mean}


def heldout_mse(theta: torch.Tensor, Xte: torch.Tensor, yte: torch.Tensor) -> float:
    pred = (Xte @ theta.unsqueeze(-1)).squeeze(-1)
    return float(((pred - yte) ** 2).mean(dim=1).mean())
