"""PRISM backbones, losses, init and weight-decay modes: values checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.models import losses as L
from recrepro.models.backbones import build_net
from recrepro.models.lightgcn import LightGCNNet, normalized_adjacency, propagate
from recrepro.models.mf import MFNet, NLMFNet, prism_init
from recrepro.papers.prism.methods import method_name, parse_method, wd_tag
from recrepro.papers.prism.trainer import TrainSettings, _make_optimizer, batch_loss


def t(x):
    return torch.tensor(x, dtype=torch.float64)


# ------------------------------------------------------------------------------ losses


def test_bpr_by_hand():
    # u·p = 1, u·n = 0 -> -ln σ(1) = ln(1 + e^-1) = 0.31326...; second row: u·p = 0, u·n = 2 -> ln(1+e^2) = 2.12693
    u = t([[1.0, 0.0], [0.0, 1.0]])
    p = t([[1.0, 5.0], [3.0, 0.0]])
    n = t([[0.0, 1.0], [0.0, 2.0]])
    expected = (math.log(1 + math.exp(-1)) + math.log(1 + math.exp(2))) / 2
    assert L.bpr_loss(u, p, n).item() == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx((0.3132616875 + 2.1269280110) / 2, rel=1e-9)


def test_ssm_by_hand_cosine_over_tau():
    # cos(u,p) = 1, cos(u,n1) = 0, cos(u,n2) = -1; τ = 0.5 -> logits 2, 0, -2
    u = t([[2.0, 0.0]])
    p = t([[5.0, 0.0]])
    n = t([[[0.0, 3.0], [-1.0, 0.0]]])
    expected = -math.log(math.exp(2) / (math.exp(2) + 1 + math.exp(-2)))
    assert L.ssm_loss(u, p, n, tau=0.5).item() == pytest.approx(expected, rel=1e-12)
    # magnitude invariance (angle-based loss, Definition 2.1)
    assert L.ssm_loss(7 * u, 0.1 * p, 3 * n, tau=0.5).item() == pytest.approx(expected, rel=1e-12)


def test_alignment_and_uniformity_by_hand():
    u = t([[3.0, 0.0], [0.0, 2.0]])
    i = t([[0.0, 1.0], [0.0, 5.0]])
    # normalised: (1,0) vs (0,1): ‖·‖² = 2; (0,1) vs (0,1): 0 -> mean 1
    assert L.alignment(u, i).item() == pytest.approx(1.0)
    # three unit vectors at 0°, 90°, 180°: pair distances² 2, 4, 2 -> log mean exp(-2 d²)
    x = t([[1.0, 0.0], [0.0, 4.0], [-2.0, 0.0]])
    expected = math.log((math.exp(-4) + math.exp(-8) + math.exp(-4)) / 3)
    assert L.uniformity(x).item() == pytest.approx(expected, rel=1e-12)
    # equals the torch.pdist formulation
    z = torch.nn.functional.normalize(x, dim=-1)
    assert L.uniformity(x).item() == pytest.approx(torch.pdist(z).pow(2).mul(-2).exp().mean().log().item(), rel=1e-12)
    # DirectAU = align + γ (unif(U) + unif(I)) / 2; unif of 2 orthogonal rows = -4
    assert L.directau_loss(u, i, gamma=2.0).item() == pytest.approx(1.0 + 2.0 * (-4.0 + math.log(1.0)) / 2)


def test_mawu_margin_shifts_angle():
    u = t([[1.0, 0.0], [1.0, 0.0]])
    i = t([[1.0, 1.0], [0.0, 2.0]])  # angles 45°, 90°
    mu, mi = t([0.1, 0.0]), t([0.2, 0.0])
    align = -(math.cos(math.pi / 4 + 0.3) + math.cos(math.pi / 2)) / 2
    got = L.mawu_loss(u, i, mu, mi, gamma_user=0.0, gamma_item=0.0).item()
    assert got == pytest.approx(align, abs=1e-6)


# ------------------------------------------------------------------------------- PRISM


@pytest.mark.parametrize("alpha", [0.0, 0.25, 1.0])
def test_prism_init_norms_exact(alpha):
    gen = torch.Generator().manual_seed(0)
    table = torch.rand(5, 8, generator=gen) - 0.5
    degree = np.array([0, 1, 10, 100, 7])
    out = prism_init(table, degree, alpha)
    expected = alpha * np.log(degree + 2.0) + 1.0 - alpha
    np.testing.assert_allclose(out.norm(dim=1).numpy(), expected, rtol=1e-6)
    # direction kept
    cos = torch.nn.functional.cosine_similarity(out, table, dim=1)
    np.testing.assert_allclose(cos.numpy(), 1.0, rtol=1e-6)
    # degree 0 at α = 1 is ln 2
    if alpha == 1.0:
        assert out[0].norm().item() == pytest.approx(math.log(2.0), rel=1e-6)


def test_prism_rejects_alpha_outside_unit_interval():
    with pytest.raises(ValueError):
        prism_init(torch.ones(2, 2), np.array([1, 2]), 1.5)


def test_mfnet_prism_uses_both_tables():
    net = MFNet(3, 2, 4, seed=1)
    net.apply_prism(np.array([0, 1, 2]), np.array([5, 0]), 1.0)
    np.testing.assert_allclose(net.user_emb.norm(dim=1).detach().numpy(), np.log([2, 3, 4]), rtol=1e-6)
    np.testing.assert_allclose(net.item_emb.norm(dim=1).detach().numpy(), np.log([7, 2]), rtol=1e-6)


def test_xavier_bound():
    net = MFNet(100, 50, 64, seed=0)
    bound = math.sqrt(6 / (100 + 64))
    assert net.user_emb.abs().max().item() <= bound
    assert net.user_emb.abs().max().item() > 0.9 * bound


def test_nlmf_relu_switch():
    with_relu = NLMFNet(4, 3, 8, seed=0, relu=True)
    linear = NLMFNet(4, 3, 8, seed=0, relu=False)
    idx = torch.arange(4)
    x = with_relu.user_emb[idx]
    l0, l1 = with_relu.user_tower
    torch.testing.assert_close(with_relu.encoders()[0](idx), l1(torch.relu(l0(x))))
    torch.testing.assert_close(linear.encoders()[0](idx), l1(l0(x)))  # same seed -> same weights


def test_nlmflinear_backbone_is_the_code_form_whatever_the_switch():
    idx = torch.arange(4)
    code = build_net("nlmflinear", 4, 3, 8, seed=0, nlmf_relu=True)
    x = code.user_emb[idx]
    l0, l1 = code.user_tower
    torch.testing.assert_close(code.encoders()[0](idx), l1(l0(x)))
    paper = build_net("nlmf", 4, 3, 8, seed=0, nlmf_relu=True)
    assert not torch.allclose(paper.encoders()[0](idx), code.encoders()[0](idx))
    assert parse_method("nlmflinear_directau_prism")["backbone"] == "nlmflinear"
    assert method_name("nlmflinear", "mawu", alpha=1.0) == "nlmflinear_mawu_prism"


# ------------------------------------------------------------------------------ LightGCN


def test_lightgcn_propagation_2x2_by_hand():
    # users 0,1; items 0,1; edges (0,0), (0,1), (1,1). Degrees: u0 2, u1 1, i0 1, i1 2.
    r = sp.csr_matrix(np.array([[1, 1], [0, 1]], dtype=np.float32))
    adj = normalized_adjacency(r).to_dense().numpy()
    s = 1 / math.sqrt(2)
    expected = np.array([
        [0, 0, s, 0.5],   # u0 - i0: 1/sqrt(2*1), u0 - i1: 1/sqrt(2*2)
        [0, 0, 0, s],     # u1 - i1: 1/sqrt(1*2)
        [s, 0, 0, 0],
        [0.5, s, 0, 0],
    ])
    np.testing.assert_allclose(adj, expected, rtol=1e-6)
    emb = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    # layer 1: u0 = s*3 + 0.5*4, u1 = s*4, i0 = s*1, i1 = 0.5*1 + s*2
    e1 = np.array([s * 3 + 2, s * 4, s, 0.5 + 2 * s])
    e2 = expected @ e1
    e3 = expected @ e2
    mean = (np.array([1, 2, 3, 4]) + e1 + e2 + e3) / 4
    got = propagate(normalized_adjacency(r), emb, 3).numpy().ravel()
    np.testing.assert_allclose(got, mean, rtol=1e-5)
    net = LightGCNNet(2, 2, 1, seed=0, train=r)
    with torch.no_grad():
        net.user_emb.copy_(emb[:2])
        net.item_emb.copy_(emb[2:])
    users, items = net.final_tables()
    np.testing.assert_allclose(torch.cat([users, items]).detach().numpy().ravel(), mean, rtol=1e-5)


# ------------------------------------------------------------------- weight decay modes


def _one_step(wd_mode: str, weight_decay: float):
    net = MFNet(6, 5, 4, seed=3)
    before_u = net.user_emb.detach().clone()
    before_i = net.item_emb.detach().clone()
    settings = TrainSettings(loss="directau", wd_mode=wd_mode, weight_decay=weight_decay, lr=0.01,
                             fused_adam=False)
    opt = _make_optimizer(list(net.parameters()), settings)
    users, items = torch.tensor([0, 1]), torch.tensor([2, 3])
    loss = batch_loss(net, users, items, None, settings)
    opt.zero_grad()
    loss.backward()
    grads = (net.user_emb.grad.clone(), net.item_emb.grad.clone())
    opt.step()
    changed_u = (net.user_emb.detach() != before_u).any(dim=1).numpy()
    changed_i = (net.item_emb.detach() != before_i).any(dim=1).numpy()
    return changed_u, changed_i, grads


def test_batched_weight_decay_touches_only_batch_rows():
    changed_u, changed_i, _ = _one_step("batched", 1e-2)
    assert changed_u.tolist() == [True, True, False, False, False, False]
    assert changed_i.tolist() == [False, False, True, True, False]


def test_coupled_weight_decay_touches_every_row():
    changed_u, changed_i, _ = _one_step("coupled", 1e-2)
    assert changed_u.all() and changed_i.all()


def test_no_weight_decay_touches_only_batch_rows():
    changed_u, changed_i, _ = _one_step("none", 1e-2)
    assert changed_u.tolist() == [True, True, False, False, False, False]
    assert changed_i.tolist() == [False, False, True, True, False]


def test_batched_penalty_gradient_is_lambda_times_row():
    # DirectAU is scale invariant, so the radial part of the gradient comes only from the penalty:
    # (g · e) / ‖e‖² = λ for each in-batch row.
    _, _, (gu, gi) = _one_step("batched", 0.5)
    net = MFNet(6, 5, 4, seed=3)
    for g, e in ((gu[0], net.user_emb[0]), (gi[2], net.item_emb[2])):
        assert (g @ e).item() / (e @ e).item() == pytest.approx(0.5, rel=1e-4)


# ------------------------------------------------------------------------------- names


def test_method_names_round_trip():
    assert wd_tag(1e-6) == "1em6" and wd_tag(0.0) == "0" and wd_tag(5e-4) == "5em4"
    assert parse_method("mf_directau_wd1em6") == {"backbone": "mf", "loss": "directau", "alpha": None,
                                                   "weight_decay": 1e-6, "wd_mode": "coupled", "lr": None}
    # Table 1's learning-rate search: the lr rides on the name, None is the tier's
    assert method_name("mf", "ssm", weight_decay=1e-6, lr=1e-2) == "mf_ssm_wd1em6_lr1em2"
    assert method_name("mf", "ssm", alpha=0.25, lr=0.1) == "mf_ssm_prism_a025_lr1em1"
    assert parse_method("mf_ssm_wd1em6_lr1em2") == {**parse_method("mf_ssm_wd1em6"), "lr": 1e-2}
    assert parse_method("mf_ssm_prism_lr1em1") == {**parse_method("mf_ssm_prism"), "lr": 0.1}
    for alias in ("mf_ssm_tunedprism", "mf_ssm_tunedwd_lr1em2"):
        with pytest.raises(ValueError):
            parse_method(alias)
    assert parse_method("nlmf_ssm_bwd1em8")["wd_mode"] == "batched"
    assert parse_method("mf_bpr_wd0")["wd_mode"] == "none"
    assert parse_method("lightgcn_directau_prism_a025")["alpha"] == 0.25
    assert parse_method("mf_mawu_prism")["alpha"] == 1.0
    assert method_name("mf", "ssm", alpha=0.5) == "mf_ssm_prism_a050"
    assert method_name("mf", "ssm", weight_decay=1e-4, batched=True) == "mf_ssm_bwd1em4"
    with pytest.raises(ValueError):
        parse_method("mf_directau_tunedwd")
    with pytest.raises(ValueError):
        wd_tag(3.3e-6)


def test_uniformity_custom_backward_matches_pdist_autograd():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(9, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(L.uniformity, (x,))
    y = x.detach().clone().requires_grad_(True)
    ref = torch.pdist(torch.nn.functional.normalize(y, dim=-1)).pow(2).mul(-2).exp().mean().log()
    ref.backward()
    L.uniformity(x).backward()
    torch.testing.assert_close(x.grad, y.grad)


@pytest.mark.parametrize("block", [1, 3, 4, 9, 512])
def test_uniformity_panels_cover_every_pair_once(monkeypatch, block):
    # The forward walks the upper triangle in panels of `block` rows; any panel size
    # (one row, uneven last panel, exactly n, larger than n) must give pdist's value and gradient.
    monkeypatch.setattr(L._UnitUniformity, "block", block)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(10, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    ref = torch.pdist(torch.nn.functional.normalize(y, dim=-1)).pow(2).mul(-3).exp().mean().log()
    ref.backward()
    value = L.uniformity(x, t=3.0)
    value.backward()
    assert value.item() == pytest.approx(ref.item(), rel=1e-12)
    torch.testing.assert_close(x.grad, y.grad)
