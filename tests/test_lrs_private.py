"""zCDP accountant (hand-computed values) and the private AMHT-LRS."""

from __future__ import annotations

import math

import pytest

from recrepro.papers.lrs.amht_lrs import AMHTConfig, amht_lrs
from recrepro.papers.lrs.generator import LRSSpec, generate, parameter_error
from recrepro.papers.lrs.private import (
    Accountant, PrivateConfig, clip_rows, gaussian_zcdp, noise_multiplier, private_amht_lrs, rho_for_epsilon,
    zcdp_to_dp,
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_accountant_hand_computed():
    # T = 10 steps, Delta = 1, sigma = 5: rho = 10 * 1 / (2 * 25) = 0.2
    acct = Accountant(delta=1e-5)
    for _ in range(10):
        acct.spend(1.0, 5.0)
    assert acct.rho == pytest.approx(0.2)
    # eps = 0.2 + 2 sqrt(0.2 ln 1e5) = 0.2 + 2 sqrt(2.302585...) = 0.2 + 3.034854... = 3.234854...
    assert acct.epsilon == pytest.approx(3.2348542, abs=1e-6)
    assert gaussian_zcdp(2.0, 4.0) == pytest.approx(0.125)
    assert zcdp_to_dp(0.5, math.exp(-2)) == pytest.approx(0.5 + 2.0)


def test_budget_inversion_round_trips():
    rho = rho_for_epsilon(1.0, 1e-5)
    assert zcdp_to_dp(rho, 1e-5) == pytest.approx(1.0)
    z = noise_multiplier(1.0, 1e-5, 7)
    assert 7 * gaussian_zcdp(1.0, z) == pytest.approx(rho)


def test_clip_rows():
    import torch

    G = torch.tensor([[[3.0, 4.0]], [[0.3, 0.4]]])
    out = clip_rows(G, 1.0)
    assert torch.allclose(out, torch.tensor([[[0.6, 0.8]], [[0.3, 0.4]]]))


def test_private_error_falls_with_epsilon_and_reports_the_spend():
    data = generate(LRSSpec(d=20, r=2, k=2, t=500, m=30, sigma=0.1, seed=0))
    cfg = AMHTConfig(r=2, k=2, iterations=8)
    errs, eps = [], []
    for target in (0.3, 3.0, math.inf):
        res, acct = private_amht_lrs(data.X, data.y, cfg, PrivateConfig(epsilon=target), seed=1)
        errs.append(float(parameter_error(res.theta, data.theta).mean()))
        eps.append(acct.epsilon)
        assert len(acct.mechanisms) == cfg.iterations + 1  # init + one per global step
    assert eps[0] == pytest.approx(0.3) and eps[1] == pytest.approx(3.0) and math.isinf(eps[2])
    assert errs[0] > errs[1] > errs[2] * 0.999
    nonprivate = float(parameter_error(amht_lrs(data.X, data.y, cfg).theta, data.theta).mean())
    assert errs[2] < 1.5 * nonprivate
