"""Figure 6's ML-100K tasks (our own design) on the real file (skipped without the mirror)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.realdata


def test_ml100k_tasks(mirror, tmp_path):
    from recrepro.datasets import fetch_dataset
    from recrepro.papers.lrs.movielens import heldout_mse, load_tasks

    raw = tmp_path / "raw"
    fetch_dataset("ml-100k", raw, mirror=mirror, urls_allowed=False)
    X, y, Xte, yte, info = load_tasks(raw, d=20, m_max=40, n_test=10, seed=0)
    # 568 of the 943 users have at least 40 + 10 ratings
    assert info["users"] == 568 and X.shape == (568, 40, 21) and Xte.shape == (568, 10, 21)
    assert torch.all(X[..., -1] == 1) and torch.all(Xte[..., -1] == 1)  # the bias feature
    assert abs(float(y.mean())) < 1e-9  # centred by the training mean
    assert set((y + info["global_mean"]).round().unique().tolist()) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    # the global-mean predictor's held-out MSE is the variance around the training mean
    zero = torch.zeros(568, 21, dtype=torch.float64)
    assert heldout_mse(zero, Xte, yte) == pytest.approx(float((yte ** 2).mean()))
    again = load_tasks(raw, d=20, m_max=40, n_test=10, seed=0)
    assert torch.equal(again[0], X) and torch.equal(again[3], yte)
