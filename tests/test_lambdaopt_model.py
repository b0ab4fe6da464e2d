"""λOpt (issue 6, acceptance 1): simulated Adam step, hypergradient, BPR loss, sampling."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.papers.lambdaopt.mf_lambdaopt import LambdaOptConfig, MFLambdaOpt, simulate_adam_rows
from recrepro.models.mf_bpr import MFBPR, bpr_loss, sample_negatives


def _tiny(granularity="dui", **kw):
    rng = np.random.default_rng(0)
    train = sp.random(12, 9, density=0.4, random_state=1, format="csr")
    train.data[:] = 1
    val = sp.random(12, 9, density=0.15, random_state=2, format="csr")
    val.data[:] = 1
    val = val - val.multiply(train)
    val.eliminate_zeros()
    cfg = dict(dim=4, epochs=0, batch_size=16, val_batch_size=8, granularity=granularity, **kw)
    model = MFLambdaOpt(cfg, seed=3)
    model.fit(train, validation=sp.csr_matrix(val))
    return model, rng


def _warm(model, steps=3):
    """A few real Adam steps so the optimiser has moments (t > 0)."""
    g = torch.Generator().manual_seed(7)
    for _ in range(steps):
        u = torch.randint(0, model.n_users, (16,), generator=g)
        i = torch.randint(0, model.n_items, (16,), generator=g)
        j = torch.randint(0, model.n_items, (16,), generator=g)
        model.real_step((u, i, j))


def test_bpr_loss_hand_checked():
    P = torch.tensor([[1.0, 0.0], [0.5, 2.0]])
    Q = torch.tensor([[1.0, 1.0], [0.0, -1.0], [2.0, 0.0]])
    u, i, j = torch.tensor([0, 1]), torch.tensor([0, 2]), torch.tensor([1, 1])
    # x_00 - x_01 = 1 - 0 = 1 ; x_12 - x_11 = 1 - (-2) = 3
    expected = (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(-3.0))) / 2
    assert bpr_loss(P, Q, u, i, j).item() == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx((0.313262 + 0.048587) / 2, abs=1e-5)


def test_lambdafix_penalty_hand_checked():
    model = MFBPR({"dim": 2, "lam": 0.5})
    P = torch.tensor([[1.0, 2.0], [0.0, 1.0]])
    Q = torch.tensor([[1.0, 0.0], [3.0, 0.0]])
    u, i, j = torch.tensor([0, 1]), torch.tensor([0, 0]), torch.tensor([1, 1])
    # 0.5 * ((1+4) + (0+1) + 2*1 + 2*9) / 2 = 0.5 * 26 / 2 = 6.5
    assert model.penalty(P, Q, u, i, j).item() == pytest.approx(6.5)


def test_negatives_avoid_seen_items():
    seen = sp.csr_matrix(np.array([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=np.float32))
    users = np.repeat(np.arange(3), 200)
    neg = sample_negatives(users, seen, np.random.default_rng(0))
    assert not seen[users, neg].A1.any()
    assert set(neg[users == 1]) == {0}
    assert set(neg[users == 0]) == {3, 4}


@pytest.mark.parametrize("clip", [100.0, 1e-3])        # 1e-3: the clip is active (factor < 1)
def test_simulated_adam_equals_torch_adam_bit_for_bit(clip):
    model, _ = _tiny("dui", clip=clip)
    _warm(model)
    u, i, j = torch.tensor([0, 1, 1, 5]), torch.tensor([2, 3, 3, 8]), torch.tensor([4, 0, 7, 1])
    batch = (u, i, j)
    grads = model.assumed_gradient(batch)            # Λ = 0 (init)
    assert (float(grads[2]) < 1.0) == (clip < 1)
    P_bar, Q_bar = model.simulate(batch, grads)     # all rows
    model.real_step(batch)
    assert torch.equal(P_bar.detach(), model.P.detach())
    assert torch.equal(Q_bar.detach(), model.Q.detach())


def test_simulate_adam_rows_matches_optimizer_on_random_tensor():
    torch.manual_seed(0)
    p = torch.randn(5, 3, requires_grad=True)
    opt = torch.optim.Adam([p], lr=1e-3, foreach=False)
    for k in range(4):
        p.grad = torch.randn(5, 3)
        if k < 3:
            opt.step()
    st = opt.state[p]
    g = p.grad.clone()
    sim = simulate_adam_rows(p.detach().clone(), g, st["exp_avg"].clone(), st["exp_avg_sq"].clone(),
                             int(st["step"]) + 1, 1e-3, (0.9, 0.999), 1e-8)
    opt.step()
    assert torch.equal(sim, p.detach())


@pytest.mark.parametrize("granularity,sim_penalty", [("dui", "batch"), ("dui", "full_table"), ("d", "batch"),
                                                     ("du", "full_table"), ("di", "batch")])
def test_hypergradient_matches_finite_differences(granularity, sim_penalty):
    torch.set_default_dtype(torch.float64)
    try:
        model, _ = _tiny(granularity, sim_penalty=sim_penalty, init_std=0.5)
        _warm(model, 4)
        with torch.no_grad():
            for p in model.lambda_params:
                p.copy_(torch.rand(p.shape, generator=torch.Generator().manual_seed(1)) * 0.5)
        batch = (torch.tensor([0, 1, 2, 5, 5]), torch.tensor([2, 3, 3, 8, 1]), torch.tensor([4, 0, 7, 1, 2]))
        val = (torch.tensor([0, 5, 2, 7]), torch.tensor([1, 3, 8, 2]), torch.tensor([6, 2, 0, 5]))
        loss = model.validation_loss(batch, val)
        analytic = torch.autograd.grad(loss, model.lambda_params)
        h = 1e-6
        for p, a in zip(model.lambda_params, analytic):
            flat = p.data.view(-1)
            # the entries with the largest analytic gradient (others are ~0 or exactly 0)
            picks = torch.argsort(a.view(-1).abs(), descending=True)[:5]
            assert a.abs().max() > 0
            for k in picks.tolist():
                old = flat[k].item()
                flat[k] = old + h
                up = model.validation_loss(batch, val).item()
                flat[k] = old - h
                down = model.validation_loss(batch, val).item()
                flat[k] = old
                fd = (up - down) / (2 * h)
                assert fd == pytest.approx(a.view(-1)[k].item(), rel=1e-3, abs=1e-10)
    finally:
        torch.set_default_dtype(torch.float32)


def test_lambda_step_projects_nonnegative_and_moves():
    model, _ = _tiny("dui", lambda_lr=0.1, lambda_clip=0.0)
    _warm(model)
    batch = (torch.tensor([0, 1, 2]), torch.tensor([2, 3, 3]), torch.tensor([4, 0, 7]))
    val = (torch.tensor([0, 1]), torch.tensor([1, 3]), torch.tensor([6, 2]))
    before = [p.detach().clone() for p in model.lambda_params]
    model.lambda_step(batch, val)
    after = [p.detach() for p in model.lambda_params]
    assert all((a >= 0).all() for a in after)
    assert any(not torch.equal(a, b) for a, b in zip(after, before))


def test_granularity_shapes():
    for gran, shapes in {"d": [(1, 4)], "du": [(12, 4), (1, 4)], "di": [(1, 4), (9, 4)],
                         "dui": [(12, 4), (9, 4)]}.items():
        model, _ = _tiny(gran)
        assert [tuple(p.shape) for p in model.lambda_params] == shapes


def test_fit_trains_and_records_trajectory():
    train = sp.random(40, 30, density=0.3, random_state=1, format="csr")
    train.data[:] = 1
    val = sp.random(40, 30, density=0.1, random_state=2, format="csr")
    val.data[:] = 1
    val = sp.csr_matrix(val - val.multiply(train))
    val.eliminate_zeros()
    model = MFLambdaOpt(dict(dim=8, epochs=3, batch_size=32, val_batch_size=32, lambda_lr=1e-2), seed=0)
    model.fit(train, validation=val)
    assert len(model.lambda_trajectory) == 3
    assert model.lambda_trajectory[0]["user"].shape == (40,)
    assert model.history[-1]["lambda_user_mean"] > 0
    assert model.history[-1]["loss"] < model.history[0]["loss"]
    code = MFLambdaOpt(dict(dim=8, epochs=1, batch_size=32, assumed_batch="separate", sim_penalty="full_table",
                            assumed_grad="current_lambda"), seed=0).fit(train, validation=val)
    assert code.score(np.array([0, 1])).shape == (2, 30)


def test_reused_gradient_step_equals_real_step():
    """The training loop's Θ step (reusing g of the λ step) is the real Adam step on l̃ + Ω(Λ)."""
    model, _ = _tiny("dui")
    _warm(model)
    with torch.no_grad():
        for p in model.lambda_params:
            p.copy_(torch.rand(p.shape, generator=torch.Generator().manual_seed(2)))
    batch = (torch.tensor([0, 1, 1, 5]), torch.tensor([2, 3, 3, 8]), torch.tensor([4, 0, 7, 1]))
    twin, _ = _tiny("dui")
    twin.P.data.copy_(model.P.data)
    twin.Q.data.copy_(model.Q.data)
    twin.optimizer.load_state_dict(copy.deepcopy(model.optimizer.state_dict()))
    with torch.no_grad():
        for a, b in zip(twin.lambda_params, model.lambda_params):
            a.copy_(b)
    model.assumed_gradient(batch)
    model.real_step_reusing(batch)
    twin.real_step(batch)
    torch.testing.assert_close(model.P.detach(), twin.P.detach(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(model.Q.detach(), twin.Q.detach(), rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------------------- optimised step vs reference
def _reference_penalty(model, P, Q, u, i, j):
    """Ω_S with advanced indexing (the form the optimised Θ step must reproduce)."""
    def rows(lam, idx):
        lam = lam.detach()
        return lam[idx] if lam.shape[0] > 1 else lam.expand(idx.numel(), -1)
    return ((rows(model.lam_user, u) * P[u] ** 2).sum() + (rows(model.lam_item, i) * Q[i] ** 2).sum()
            + (rows(model.lam_item, j) * Q[j] ** 2).sum()) / u.numel()


def _reference_theta_step(model, batch, grads=None):
    """The Θ step written out: autograd through advanced indexing, clip, Adam."""
    u, i, j = batch
    model.optimizer.zero_grad(set_to_none=True)
    if grads is None:       # a fresh forward/backward (real_step)
        (bpr_loss(model.P, model.Q, u, i, j) + _reference_penalty(model, model.P, model.Q, u, i, j)).backward()
    else:                   # the λ step's g reused, the penalty's gradient added by autograd
        model.P.grad, model.Q.grad = grads
        _reference_penalty(model, model.P, model.Q, u, i, j).backward()
    if model.config.clip and model.config.clip > 0:
        torch.nn.utils.clip_grad_norm_([model.P, model.Q], model.config.clip)
    model.optimizer.step()


def _reference_lambda_step(model, batch, val_batch):
    """The λ step written out plainly: advanced indexing, ``torch.unique``, the masked √, full Θ̄ rows."""
    c = model.config
    if not model.optimizer.state.get(model.P):
        return None
    u, i, j = batch
    P0, Q0 = model.P.detach().requires_grad_(), model.Q.detach().requires_grad_()
    loss = bpr_loss(P0, Q0, u, i, j)
    if c.assumed_grad == "current_lambda":
        loss = loss + _reference_penalty(model, P0, Q0, u, i, j)
    gP, gQ = torch.autograd.grad(loss, [P0, Q0])
    coef = torch.clamp(c.clip / (torch.nn.utils.get_total_norm([gP, gQ]) + 1e-6), max=1.0)
    vu, vi, vj = val_batch
    urows, uinv = torch.unique(vu, return_inverse=True)
    irows, iinv = torch.unique(torch.cat([vi, vj]), return_inverse=True)
    beta1, beta2 = c.betas
    bars = []
    for theta, g, lam, rows, idx in ((model.P, gP, model.lam_user, urows, (u,)),
                                     (model.Q, gQ, model.lam_item, irows, (i, j))):
        g = g[rows] * coef
        state = model.optimizer.state[theta]
        th = theta.detach()[rows]
        if c.sim_penalty == "full_table":
            scale = torch.full((rows.numel(), 1), 2.0)
        else:
            counts = sum(torch.bincount(x, minlength=theta.shape[0]) for x in idx).to(th.dtype)
            scale = (2.0 * counts[rows] / u.numel()).unsqueeze(1)
        lam_rows = lam[rows] if lam.shape[0] > 1 else lam.expand(rows.numel(), -1)
        g_tilde = g + scale * lam_rows * th
        step = int(state["step"]) + 1
        m = torch.lerp(state["exp_avg"][rows], g_tilde, 1 - beta1)
        v = state["exp_avg_sq"][rows].mul(beta2).addcmul(g_tilde, g_tilde, value=1 - beta2)
        positive = v > 0
        root = torch.where(positive, torch.where(positive, v, torch.ones_like(v)).sqrt(), torch.zeros_like(v))
        denom = (root / (1 - beta2 ** step) ** 0.5).add(c.eps)
        bars.append(th.addcdiv(m, denom, value=-c.lr / (1 - beta1 ** step)))
    n = vi.numel()
    val_loss = bpr_loss(bars[0], bars[1], uinv, iinv[:n], iinv[n:])
    hyper = torch.autograd.grad(val_loss, model.lambda_params, allow_unused=True)
    for p, g in zip(model.lambda_params, hyper):
        p.grad = torch.zeros_like(p) if g is None else g
    if c.lambda_clip and c.lambda_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.lambda_params, c.lambda_clip)
    model.lambda_optimizer.step()
    with torch.no_grad():
        for p in model.lambda_params:
            p.clamp_(min=0)
    return gP, gQ


@pytest.mark.parametrize("granularity,switches,batch_size", [
    ("dui", {}, 16), ("d", {}, 16), ("du", {}, 16), ("di", {}, 16), ("dui", {"clip": 1e-3}, 16),
    ("dui", {"lambda_clip": 0.0}, 16),
    ("dui", {"assumed_grad": "current_lambda", "sim_penalty": "full_table", "assumed_batch": "separate"}, 16),
    ("dui", {}, 4), ("d", {}, 4),       # batches smaller than the tables: the penalty's per-row form
])
def test_optimised_steps_bit_identical_to_reference(granularity, switches, batch_size):
    """A few λ and Θ steps of the model (gathers by ``index_select``, the unmasked √ once every ``v > 0``,
    the penalty's gradient without autograd, ``unique_rows``) equal, bit for bit, the same steps written
    plainly; the first steps cover the rows with ``v = 0`` (masked √), the batches repeat rows.  Batches
    of 16 (≥ the 12 users and 9 items) take the penalty's table form, batches of 4 its per-row form."""
    model, _ = _tiny(granularity, lambda_lr=0.05, **switches)
    reference = copy.deepcopy(model)
    reuse = model.config.assumed_batch == "shared" and model.config.assumed_grad == "unregularised"
    gen = torch.Generator().manual_seed(11)
    for _ in range(8):
        batch = tuple(torch.randint(0, n, (batch_size,), generator=gen) for n in (12, 9, 9))
        val_batch = tuple(torch.randint(0, n, (8,), generator=gen) for n in (12, 9, 9))
        real_batch = batch if model.config.assumed_batch == "shared" else \
            tuple(torch.randint(0, n, (batch_size,), generator=gen) for n in (12, 9, 9))
        model._cache = None
        model.lambda_step(batch, val_batch)
        if reuse and model._cache is not None:
            model.real_step_reusing(batch)
        else:
            model.real_step(real_batch)
        grads = _reference_lambda_step(reference, batch, val_batch)
        _reference_theta_step(reference, real_batch, grads if reuse and grads is not None else None)
        for name in ("P", "Q", "lam_user", "lam_item"):
            assert torch.equal(getattr(model, name).detach(), getattr(reference, name).detach()), name
        for a, b in zip(model.optimizer.state.values(), reference.optimizer.state.values()):
            assert all(torch.equal(a[k], b[k]) for k in a)
    assert (model.lam_user > 0).any() and (model.lam_item > 0).any()      # Λ moved: the penalty took part


def _bpr_loss_by_advanced_indexing(P, Q, u, i, j):
    """``bpr_loss`` as written with ``table[idx]`` (the reference its gathers must match on one thread)."""
    pu = P[u]
    return torch.nn.functional.softplus(-((pu * Q[i]).sum(1) - (pu * Q[j]).sum(1))).mean()


def test_unique_rows_and_gather_match_torch(one_torch_thread):
    from recrepro.papers.lambdaopt.mf_lambdaopt import unique_rows

    idx = torch.tensor([5, 2, 5, 0, 7, 2, 2])
    rows, inverse = unique_rows(idx, 9)
    expected_rows, expected_inverse = torch.unique(idx, return_inverse=True)
    assert torch.equal(rows, expected_rows) and torch.equal(inverse, expected_inverse)
    P = torch.randn(9, 3, requires_grad=True)
    Q = torch.randn(8, 3, requires_grad=True)
    i, j = torch.tensor([1, 1, 3, 1, 0, 7, 1]), torch.tensor([2, 1, 1, 4, 4, 4, 1])
    ours = torch.autograd.grad(bpr_loss(P, Q, idx, i, j), [P, Q])
    plain = torch.autograd.grad(_bpr_loss_by_advanced_indexing(P, Q, idx, i, j), [P, Q])
    assert all(torch.equal(a, b) for a, b in zip(ours, plain))


def test_bpr_loss_and_gradient_equal_autograd_bit_for_bit(one_torch_thread):
    """The hand-written BPR backward of the assumed gradient is autograd's, bit for bit (rows repeat)."""
    from recrepro.papers.lambdaopt.mf_lambdaopt import bpr_loss_and_gradient

    gen = torch.Generator().manual_seed(3)
    P, Q = torch.randn(30, 16, generator=gen), torch.randn(20, 16, generator=gen)
    u, i, j = (torch.randint(0, n, (200,), generator=gen) for n in (30, 20, 20))
    loss, gP, gQ = bpr_loss_and_gradient(P, Q, u, i, j)
    P0, Q0 = P.clone().requires_grad_(), Q.clone().requires_grad_()
    ref = bpr_loss(P0, Q0, u, i, j)
    rP, rQ = torch.autograd.grad(ref, [P0, Q0])
    assert torch.equal(loss, ref.detach()) and torch.equal(gP, rP) and torch.equal(gQ, rQ)
    plain = torch.autograd.grad(_bpr_loss_by_advanced_indexing(P0, Q0, u, i, j), [P0, Q0])
    assert torch.equal(gP, plain[0]) and torch.equal(gQ, plain[1])
