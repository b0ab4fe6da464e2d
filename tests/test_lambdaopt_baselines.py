"""λOpt baselines (issue 6): SGDA (Rendle 2012), AMF / APR (He et al. 2018), NeuMF (He et al. 2017)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.papers.lambdaopt.amf import AMF, adversarial_rows
from recrepro.models.mf_bpr import MFBPR
from recrepro.models.neumf import NeuMF
from recrepro.papers.lambdaopt.sgda import SGDA


def _data(n_users=60, n_items=40, seed=0):
    """Rank-3 structured implicit data: train / validation positives."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(n_users, 3)) @ rng.normal(size=(3, n_items))
    pos = s > np.quantile(s, 0.85)
    tr = pos & (rng.random(pos.shape) < 0.7)
    va = pos & ~tr
    return sp.csr_matrix(tr.astype(np.float32)), sp.csr_matrix(va.astype(np.float32))


def _auc(model, train, target):
    scores = model.score(np.arange(train.shape[0]))
    out = []
    for u in range(train.shape[0]):
        pos = target[u].indices
        if pos.size == 0:
            continue
        neg = np.setdiff1d(np.arange(train.shape[1]), np.r_[train[u].indices, pos])
        out.append((scores[u, pos][:, None] > scores[u, neg][None]).mean())
    return float(np.mean(out))


# ----------------------------------------------------------------------------- SGDA
def _sgda(**kw):
    train, val = _data()
    model = SGDA(dict(dim=4, epochs=0, batch_size=16, val_batch_size=8, sgd_lr=0.05, init_std=0.5, **kw), seed=1)
    return model.fit(train, validation=val)


def test_sgda_simulated_step_with_zero_lambda_is_the_real_sgd_step():
    model = _sgda()
    batch = (torch.tensor([0, 1, 1, 5]), torch.tensor([2, 3, 3, 8]), torch.tensor([4, 0, 7, 1]))
    grads = model.assumed_gradient(batch)
    P_bar, Q_bar = model.simulate(batch, grads)
    model.real_step(batch)
    assert model.config.batch_lr == pytest.approx(0.05 * 16)
    assert torch.equal(P_bar.detach(), model.P.detach())
    assert torch.equal(Q_bar.detach(), model.Q.detach())


def test_sgda_hypergradient_hand_checked_and_finite_differences():
    """∂L_val/∂λ through Θ̄ = Θ − αB(g + 2c/B λ⊙Θ) matches finite differences (float64)."""
    torch.set_default_dtype(torch.float64)
    try:
        model = _sgda()
        with torch.no_grad():
            model.lam_user.copy_(torch.tensor([[0.1, 0.2, 0.0, 0.3]]))
            model.lam_item.copy_(torch.tensor([[0.05, 0.0, 0.1, 0.2]]))
        batch = (torch.tensor([0, 1, 2, 5, 5]), torch.tensor([2, 3, 3, 8, 1]), torch.tensor([4, 0, 7, 1, 2]))
        val = (torch.tensor([0, 5, 2, 7]), torch.tensor([1, 3, 8, 2]), torch.tensor([6, 2, 0, 5]))
        # hand check of one simulated row: user 5 appears twice in the batch (c = 2, B = 5)
        gP, gQ, coef = model.assumed_gradient(batch)
        assert float(coef) == 1.0                      # ‖g‖ < 100: no clipping
        P_bar, _ = model.simulate(batch, (gP, gQ, coef), torch.tensor([5]), torch.tensor([0]))
        th = model.P.detach()[5]
        expected = th - 0.05 * 16 * (gP[5] + 2 * 2 / 5 * model.lam_user.detach()[0] * th)
        torch.testing.assert_close(P_bar[0].detach(), expected)
        loss = model.validation_loss(batch, val)
        analytic = torch.autograd.grad(loss, model.lambda_params)
        h = 1e-6
        for p, a in zip(model.lambda_params, analytic):
            assert a.abs().max() > 0
            flat = p.data.view(-1)
            for k in range(flat.numel()):
                old = flat[k].item()
                flat[k] = old + h
                up = model.validation_loss(batch, val).item()
                flat[k] = old - h
                down = model.validation_loss(batch, val).item()
                flat[k] = old
                assert (up - down) / (2 * h) == pytest.approx(a.view(-1)[k].item(), rel=1e-3, abs=1e-10)
    finally:
        torch.set_default_dtype(torch.float32)


def test_sgda_learns_and_keeps_lambda_per_dimension_nonnegative():
    train, val = _data()
    model = SGDA(dict(dim=8, epochs=8, batch_size=64, val_batch_size=64, init_std=1.0, lambda_lr=1.0,
                      lambda_clip=0.0), seed=0).fit(train, validation=val)
    assert [tuple(p.shape) for p in model.lambda_params] == [(1, 8), (1, 8)]
    assert all(float(p.detach().min()) >= 0 for p in model.lambda_params)
    assert float(model.lam_item.detach().max()) > 0                 # N(0,1) init overfits: λ grows
    assert model.history[-1]["loss"] < model.history[0]["loss"]


# ----------------------------------------------------------------------------- AMF
def test_adversarial_rows_hand_checked():
    grads = torch.tensor([[3.0, 0.0], [0.0, 4.0], [0.0, 0.0]])
    delta = adversarial_rows(grads, torch.tensor([0, 0, 1]), 2, eps=0.5)
    # row 0: Γ = (3, 4), ‖Γ‖ = 5 -> 0.5 * (0.6, 0.8); row 1: Γ = 0 -> 0
    torch.testing.assert_close(delta, torch.tensor([[0.3, 0.4], [0.0, 0.0]]))


def test_amf_without_adversary_is_mf_bpr_and_with_it_differs():
    train, _ = _data()
    base = dict(dim=8, epochs=3, batch_size=64, lr=1e-2, init_std=0.1)
    mf = MFBPR(base, seed=0).fit(train)
    off = AMF({**base, "adv_start_fraction": 1.0}, seed=0).fit(train)
    assert torch.equal(mf.P, off.P) and torch.equal(mf.Q, off.Q)
    on = AMF({**base, "adv_start_fraction": 0.0, "adv_eps": 0.5, "adv_reg": 1.0}, seed=0).fit(train)
    assert not torch.equal(mf.P, on.P)


def test_amf_perturbation_increases_the_bpr_loss():
    train, _ = _data()
    model = AMF(dict(dim=8, epochs=2, batch_size=64, lr=1e-2, init_std=0.1, adv_eps=0.5), seed=0).fit(train)
    u, i, j = torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 4]), torch.tensor([5, 6, 7, 8])
    du, di, dj = model.perturbation(u, i, j)
    P, Q = model.P.detach(), model.Q.detach()

    def loss(pu, qi, qj):
        return torch.nn.functional.softplus(-((pu * qi).sum(1) - (pu * qj).sum(1))).mean().item()

    assert loss(P[u] + du, Q[i] + di, Q[j] + dj) > loss(P[u], Q[i], Q[j])
    torch.testing.assert_close(du.norm(dim=1), torch.full((4,), 0.5))


# ----------------------------------------------------------------------------- NeuMF
def test_neumf_scores_match_the_network_and_ignore_chunking():
    train, val = _data()
    model = NeuMF(dict(mf_dim=4, layers=[8, 4, 2], epochs=1, batch_size=64), seed=0).fit(train)
    users = np.array([0, 3, 7])
    scores = model.score(users)
    uu = torch.tensor(users).repeat_interleave(train.shape[1])
    ii = torch.arange(train.shape[1]).repeat(users.size)
    with torch.no_grad():
        direct = model.net(uu, ii).reshape(users.size, -1).numpy()
    np.testing.assert_allclose(scores, direct, rtol=1e-5, atol=1e-6)
    model.config.score_chunk_pairs = 1                 # one user per chunk
    np.testing.assert_allclose(model.score(users), scores, rtol=1e-5, atol=1e-6)


def test_neumf_learns():
    train, val = _data()
    model = NeuMF(dict(mf_dim=8, layers=[16, 8, 4], epochs=15, batch_size=64, lr=1e-2), seed=0).fit(train)
    assert model.history[-1]["loss"] < 0.7 * model.history[0]["loss"]
    assert _auc(model, train, val) > 0.75
