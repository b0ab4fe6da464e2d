"""PRISM App. D.2 debiasing baselines (IPL, ReSN, MACR) and Theorem 3.1 (Fig. 7): values by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.papers.prism import debias as D
from recrepro.models.mf import MFNet
from recrepro.papers.prism import trainer as T
from recrepro.papers.prism.figures import theorem31_change
from recrepro.papers.prism.methods import method_name, parse_method


def t(x):
    return torch.tensor(x, dtype=torch.float64)


# ------------------------------------------------------------------------------- IPL


def test_ipl_by_hand():
    # positives: item 0 twice with score 0 (σ = 1/2 each), item 1 once with score ln 3 (σ = 3/4)
    scores, items = t([0.0, 0.0, math.log(3.0)]), torch.tensor([0, 0, 1])
    degree = t([4.0, 1.0, 7.0])  # item 2 is not in the batch: it does not enter the std
    # β = 1: r = C / Q^1 = [1/4, 3/4]; sample sd = |3/4 - 1/4| / √2 = √0.125
    assert D.ipl_regulariser(scores, items, degree, 1.0).item() == pytest.approx(math.sqrt(0.125))
    # β = 0: r = C / Q^2 = [1/16, 3/4]; sd = 0.6875 / √2
    assert D.ipl_regulariser(scores, items, degree, 0.0).item() == pytest.approx(0.6875 / math.sqrt(2))
    # β = 2: r = C = [1, 3/4]; sd = 0.25 / √2
    assert D.ipl_regulariser(scores, items, degree, 2.0).item() == pytest.approx(0.25 / math.sqrt(2))
    # one distinct item: nothing to equalise
    assert D.ipl_regulariser(t([1.0, 2.0]), torch.tensor([3, 3]), degree.new_ones(4), 1.0).item() == 0.0


def test_ipl_gradient_pushes_ratios_together():
    scores = t([0.0, 0.0, math.log(3.0)]).requires_grad_(True)
    D.ipl_regulariser(scores, torch.tensor([0, 0, 1]), t([4.0, 1.0]), 1.0).backward()
    # r_0 < r_1: descending the std raises item 0's scores and lowers item 1's
    assert scores.grad[0] < 0 and scores.grad[1] < 0 and scores.grad[2] > 0


# ------------------------------------------------------------------------------ ReSN


def test_resn_by_hand_and_bounded_by_top_singular_value():
    users, items = t([[1.0, 0.0], [0.0, 1.0]]), t([[1.0, 0.0], [1.0, 1.0]])
    # Y = U Vᵀ = [[1, 1], [0, 1]]; Yᵀe = [1, 2]; Y Yᵀ e = [3, 2] -> 13 / 5
    assert D.resn_regulariser(users, items).item() == pytest.approx(13.0 / 5.0)
    # one power step from e never exceeds σ₁² ((3 + √5) / 2 here) ...
    assert 13.0 / 5.0 <= (3.0 + math.sqrt(5.0)) / 2.0
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        u = torch.randn(7, 3, generator=gen, dtype=torch.float64)
        v = torch.randn(5, 3, generator=gen, dtype=torch.float64)
        sigma1 = torch.linalg.matrix_norm(u @ v.T, ord=2).item()
        assert D.resn_regulariser(u, v).item() <= sigma1 ** 2 * (1 + 1e-9)
    # ... and equals it when e is a singular direction: Y = e aᵀ (rank one), σ₁² = n_u ‖a‖²
    u = torch.ones(4, 1, dtype=torch.float64)
    v = t([[1.0], [2.0], [2.0]])
    assert D.resn_regulariser(u, v).item() == pytest.approx(4 * 9.0)


# ------------------------------------------------------------------------------ MACR


def test_macr_loss_by_hand():
    user, pos, neg = t([[1.0, 0.0]]), t([[2.0, 0.0]]), t([[0.0, 1.0]])
    w_user, w_item = t([0.0, 0.0]), t([math.log(3.0), 0.0])
    fused, y_i, y_u = D.macr_fused(user, pos, w_user, w_item)
    # ŷ_k = 2, σ(ŷ_i) = σ(2 ln 3) = 9/10, σ(ŷ_u) = 1/2 -> 0.9
    assert fused.item() == pytest.approx(0.9) and y_i.item() == pytest.approx(2 * math.log(3.0))
    sp_ = lambda x: math.log1p(math.exp(x))  # noqa: E731  softplus
    l_o = sp_(-0.9) + sp_(0.0)              # negative: ŷ_k = 0
    l_i = sp_(-2 * math.log(3.0)) + sp_(0.0)
    l_u = 2 * sp_(0.0)
    got = D.macr_loss(user, pos, neg, w_user, w_item, alpha=0.5, beta=0.25).item()
    assert got == pytest.approx(l_o + 0.5 * l_i + 0.25 * l_u)


def test_macr_tables_rank_by_counterfactual_score():
    net = D.MACRNet(MFNet(3, 4, 2, seed=0), 2, c=0.7, seed=0)
    with torch.no_grad():
        users, items = net.final_tables()
        u, i = net.matching_tables()
        s_u = torch.sigmoid(u @ net.w_user)
        s_i = torch.sigmoid(i @ net.w_item)
        expected = (u @ i.T - 0.7) * s_u[:, None] * s_i[None, :]
    torch.testing.assert_close(users @ items.T, expected)
    assert users.shape == (3, 3) and items.shape == (4, 3)
    assert net.item_emb is net.backbone.item_emb


def _planted(n_users=50, n_items=30, seed=0):
    rng = np.random.default_rng(seed)
    dense = (rng.integers(0, 3, n_users)[:, None] == (np.arange(n_items) % 3)[None, :]) & (
        rng.random((n_users, n_items)) < 0.7)
    rows, cols = np.nonzero(dense)
    perm = rng.permutation(rows.size)
    cut = int(0.8 * rows.size)
    mk = lambda idx: sp.csr_matrix((np.ones(idx.size, np.float32), (rows[idx], cols[idx])),  # noqa: E731
                                   shape=(n_users, n_items))
    return mk(perm[:cut]), mk(perm[cut:])


@pytest.mark.parametrize("loss", ["ipl", "resn", "macr"])
def test_debias_losses_train(loss):
    train, val = _planted()
    settings = T.TrainSettings(loss=loss, dim=8, lr=0.05, epochs=8, patience=8, batch_size=128, seed=0,
                               fused_adam=False, ipl_weight=1.0, resn_weight=1e-2, record_cosine=True)
    net, history = T.train(train, val, settings)
    assert history["epochs_run"] == 8 and all(np.isfinite(history["loss"]))
    assert len(history["val_ndcg_cosine"]) == 8
    # planted 3 blocks over 30 items: a trained model ranks well above random (~0.29 after no training)
    assert history["best_val_ndcg"] > 0.5
    if loss == "macr":
        assert isinstance(net, D.MACRNet) and net.final_tables()[1].shape[1] == 9


def test_ipl_and_resn_add_their_penalty_to_bpr():
    train, _ = _planted()
    net = MFNet(*train.shape, 4, seed=0)
    users, items = torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1])
    negs = torch.tensor([[3], [4], [5]])
    deg = torch.as_tensor(np.bincount(train.indices, minlength=train.shape[1]), dtype=torch.float32)
    base = T.batch_loss(net, users, items, negs, T.TrainSettings(loss="bpr")).item()
    ipl = T.batch_loss(net, users, items, negs, T.TrainSettings(loss="ipl", ipl_weight=2.0, ipl_exponent=1.2),
                       item_degree=deg).item()
    u, p = net.user_emb[users], net.item_emb[items]
    reg = D.ipl_regulariser((u * p).sum(-1), items, deg, 1.2).item()
    assert ipl == pytest.approx(base + 2.0 * reg, rel=1e-6)
    resn = T.batch_loss(net, users, items, negs, T.TrainSettings(loss="resn", resn_weight=0.5)).item()
    reg = D.resn_regulariser(net.user_emb[torch.tensor([0, 1, 2])], net.item_emb[torch.tensor([0, 1, 3, 4, 5])])
    assert resn == pytest.approx(base + 0.5 * reg.item(), rel=1e-6)


def test_debias_method_names():
    assert parse_method("mf_ipl_wd0") == {"backbone": "mf", "loss": "ipl", "alpha": None, "weight_decay": 0.0,
                                          "wd_mode": "none", "lr": None}
    assert parse_method("mf_macr_wd1em6")["wd_mode"] == "coupled"
    # λ = 0 is one setting in both modes: Fig. 3 reuses Fig. 1's run
    assert method_name("mf", "directau", weight_decay=0.0, batched=True) == "mf_directau_wd0"


# ------------------------------------------------------------------------ Theorem 3.1


def test_theorem31_by_hand():
    # η = 0.1, λ = 0.5: ηλ(ηλ − 2) = 0.05 × (−1.95) = −0.0975 (‖i‖ = 1)
    # ranking term: P(i ∈ B) η² (1 − 0.81) = P × 0.0019
    got = theorem31_change(np.array([0.0, 1.0, 2.0]), 0.5, lr=0.1, weight_decay=0.5, norm=1.0, cosine=0.9)
    np.testing.assert_allclose(got, [-0.0975, -0.0975 + 0.5 * 0.0019, -0.0975 + 0.75 * 0.0019])
    # ‖i‖ = 2 scales the decay by 4 and the ranking term by 1/4
    got = theorem31_change(1.0, 1.0, lr=0.1, weight_decay=0.5, norm=2.0, cosine=0.0)
    assert got == pytest.approx(4 * -0.0975 + 0.01 / 4)
    # monotone in degree for a fixed batch fraction: more popular items grow more
    grid = theorem31_change(np.arange(1, 100), 0.01, lr=1e-3, weight_decay=1e-6)
    assert np.all(np.diff(grid) > 0)
