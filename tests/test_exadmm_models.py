"""Unit tests of iALS and exADMM (issue 4, acceptance 3): hand-built normal equations,
Sherman–Morrison prox, the U-step as a gradient step, s-step, fold-in."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.papers.exadmm.exadmm import ExADMM, prox_sherman_morrison, s_step, u_step
from recrepro.models.ials import IALS, build_row_groups, cg_rows, frequency_l2, solve_rows


def _random_csr(n: int, m: int, density: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = (rng.random((n, m)) < density).astype(np.float64)
    dense[np.arange(n), rng.integers(0, m, n)] = 1.0  # every row has an entry
    return sp.csr_matrix(dense)


def _ials_loss(U, V, R, alpha0, lam_u, lam_i):
    pred = U @ V.T
    observed = (((pred - 1.0) ** 2) * R).sum()
    unobserved = alpha0 * (pred ** 2).sum()
    return observed + unobserved + (lam_u * (U ** 2).sum(1)).sum() + (lam_i * (V ** 2).sum(1)).sum()


def test_frequency_l2_hand_value():
    # l2 (|I_u| + α0 m)^ν = 0.5 * (3 + 0.1*20)^2 = 0.5 * 25
    assert frequency_l2(np.array([3]), 0.5, 0.1, 20, 2.0)[0] == pytest.approx(12.5)


def test_row_groups_cover_every_entry_once():
    R = _random_csr(37, 23, 0.2, 0)
    groups = build_row_groups(R, d=4, budget=40)  # tiny budget: many groups
    assert len(groups.rows) > 3
    seen = {}
    for rows, idx in zip(groups.rows, groups.idx, strict=True):
        for r, cols in zip(rows.tolist(), idx.tolist(), strict=True):
            seen[r] = sorted(c for c in cols if c != 23)
    assert sorted(seen) == list(range(37))
    for r in range(37):
        assert seen[r] == sorted(R[r].indices.tolist())


@pytest.mark.parametrize("method", ["auto", "primal", "dual"])
@pytest.mark.parametrize("budget", [1 << 24, 30])
def test_ials_user_solve_equals_explicit_normal_equations(budget, method):
    torch.manual_seed(0)
    R = _random_csr(15, 11, 0.3, 1)
    d, alpha0 = 5, 0.3
    V = torch.randn(11, d, dtype=torch.float64)
    lam = torch.as_tensor(frequency_l2(np.diff(R.indptr), 0.01, alpha0, 11, 1.0))
    out = torch.zeros(15, d, dtype=torch.float64)
    solve_rows(V, build_row_groups(R, d, budget=budget), alpha0 * (V.T @ V), lam, out, method=method)
    for u in range(15):
        Vi = V[R[u].indices]
        A = alpha0 * V.T @ V + lam[u] * torch.eye(d, dtype=torch.float64) + Vi.T @ Vi
        expected = torch.linalg.solve(A, Vi.sum(0))
        torch.testing.assert_close(out[u], expected, rtol=1e-10, atol=1e-10)


def test_ials_item_solve_and_stationarity_after_epoch():
    R = _random_csr(20, 12, 0.25, 2)
    model = IALS(dim=4, alpha0=0.2, l2=0.01, epochs=1, seed=3, dtype=torch.float64).fit(R)
    U, V = model.U, model.V
    # the item step is the last of the epoch: V must be the exact minimiser given U
    lam_i = torch.as_tensor(frequency_l2(np.asarray(R.sum(0)).ravel(), 0.01, 0.2, 20, 1.0))
    for i in range(12):
        Ui = U[R[:, i].nonzero()[0]]
        A = 0.2 * U.T @ U + lam_i[i] * torch.eye(4, dtype=torch.float64) + Ui.T @ Ui
        torch.testing.assert_close(V[i], torch.linalg.solve(A, Ui.sum(0)), rtol=1e-9, atol=1e-9)
    # and the gradient of the full loss wrt V vanishes
    Rd = torch.as_tensor(R.toarray())
    lam_u = torch.as_tensor(frequency_l2(np.diff(R.indptr), 0.01, 0.2, 12, 1.0))
    Vg = V.clone().requires_grad_(True)
    _ials_loss(U, Vg, Rd, 0.2, lam_u, lam_i).backward()
    assert float(Vg.grad.abs().max()) < 1e-9
    assert model.history[0]["loss"] == pytest.approx(float(_ials_loss(U, V, Rd, 0.2, lam_u, lam_i)), rel=1e-9)


def test_ials_fold_in_is_one_exact_solve():
    R = _random_csr(20, 12, 0.25, 4)
    model = IALS(dim=3, alpha0=0.1, l2=0.02, epochs=2, seed=0, dtype=torch.float64).fit(R)
    hist = _random_csr(5, 12, 0.3, 5)
    folded = model.fold_in(hist)
    V = model.V
    for u in range(5):
        Vi = V[hist[u].indices]
        lam = 0.02 * (len(hist[u].indices) + 0.1 * 12)
        A = 0.1 * V.T @ V + lam * torch.eye(3, dtype=torch.float64) + Vi.T @ Vi
        torch.testing.assert_close(folded[u], torch.linalg.solve(A, Vi.sum(0)))


def test_prox_sherman_morrison_equals_dense_solve():
    torch.manual_seed(1)
    n, d, eta, rho = 50, 6, 0.01, 0.1 * 50 ** 2
    U_hat = torch.randn(n, d, dtype=torch.float64)
    dense = torch.eye(n, dtype=torch.float64) + (eta * rho / n ** 2) * torch.ones(n, n, dtype=torch.float64)
    torch.testing.assert_close(prox_sherman_morrison(U_hat, eta, rho), torch.linalg.solve(dense, U_hat),
                               rtol=1e-5, atol=1e-5)
    # hand value: n = 2, ηρ/n² = 1/2 → (I + ½ 11ᵀ)⁻¹ = [[3/4, −1/4], [−1/4, 3/4]]
    x = torch.tensor([[1.0], [3.0]], dtype=torch.float64)
    torch.testing.assert_close(prox_sherman_morrison(x, 1.0, 2.0), torch.tensor([[0.0], [2.0]], dtype=torch.float64))


def test_u_step_without_penalties_is_a_gradient_step_on_ials_loss():
    R = _random_csr(9, 7, 0.3, 6)
    torch.manual_seed(2)
    U = torch.randn(9, 3, dtype=torch.float64)
    V = torch.randn(7, 3, dtype=torch.float64)
    lam_u = torch.as_tensor(frequency_l2(np.diff(R.indptr), 0.05, 0.2, 7, 1.0))
    Ug = U.clone().requires_grad_(True)
    _ials_loss(Ug, V, torch.as_tensor(R.toarray()), 0.2, lam_u, torch.zeros(7, dtype=torch.float64)).backward()
    zero = torch.zeros(3, dtype=torch.float64)
    got = u_step(U, V, R, lam_u, V.T @ V, 0.2, 0.01, 0.0, zero, zero)
    # the official step is η(H_u u − b_u) = η · ½ ∇L
    torch.testing.assert_close(got, U - 0.01 * 0.5 * Ug.grad)


def test_u_step_with_penalty_equals_dense_linearised_prox():
    R = _random_csr(8, 6, 0.3, 7)
    torch.manual_seed(3)
    U, V = torch.randn(8, 2, dtype=torch.float64), torch.randn(6, 2, dtype=torch.float64)
    s, w = torch.randn(2, dtype=torch.float64), torch.randn(2, dtype=torch.float64)
    lam_u = torch.full((8,), 0.1, dtype=torch.float64)
    eta, rho, n = 0.05, 3.0, 8
    Rd = torch.as_tensor(R.toarray())
    half_grad = 0.3 * U @ V.T @ V + 0.1 * U + ((U @ V.T - 1.0) * Rd) @ V
    rhs = U - eta * half_grad + (eta * rho / n) * (s - w)
    dense = torch.eye(n, dtype=torch.float64) + (eta * rho / n ** 2) * torch.ones(n, n, dtype=torch.float64)
    torch.testing.assert_close(u_step(U, V, R, lam_u, V.T @ V, 0.3, eta, rho, s, w), torch.linalg.solve(dense, rhs))


def test_s_step_minimises_its_subproblem():
    torch.manual_seed(4)
    G = torch.randn(4, 4, dtype=torch.float64)
    G = G @ G.T
    ubar, w = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    s = s_step(ubar, w, G, 2.0, 0.7).requires_grad_(True)
    # s = argmin Λ sᵀ G s + ρ ‖ū − s + w‖²
    (2.0 * s @ G @ s + 0.7 * ((ubar - s + w) ** 2).sum()).backward()
    assert float(s.grad.abs().max()) < 1e-10


def test_lower_hessian_variant_matches_official_product():
    # the official ProjectU multiplies u with α0 G + λ I + tril(Σ v vᵀ) (lower triangle only)
    R = _random_csr(6, 5, 0.4, 10)
    torch.manual_seed(5)
    U, V = torch.randn(6, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    lam_u = torch.full((6,), 0.2, dtype=torch.float64)
    zero = torch.zeros(3, dtype=torch.float64)
    got = u_step(U, V, R, lam_u, V.T @ V, 0.1, 0.02, 0.0, zero, zero, hessian="lower")
    for u in range(6):
        Vi = V[R[u].indices]
        H = 0.1 * V.T @ V + 0.2 * torch.eye(3, dtype=torch.float64) + torch.tril(Vi.T @ Vi)
        torch.testing.assert_close(got[u], U[u] - 0.02 * (H @ U[u] - Vi.sum(0)))


def test_strength_scaling_switch():
    model = ExADMM(exposure_reg=1e-3, admm_penalty=0.1)
    assert model.strengths(100) == pytest.approx((10.0, 1000.0))
    assert ExADMM(exposure_reg=1e-3, admm_penalty=0.1, strength_scaling="none").strengths(100) == (1e-3, 0.1)
    with pytest.raises(ValueError):
        ExADMM(strength_scaling="n")


def test_exadmm_converges_and_lowers_exposure_concentration():
    R = _random_csr(60, 30, 0.15, 8)
    # a regime where ADMM converges on this toy problem (lr 0.05, penalty 0.1; measured:
    # primal residual 0.23 after epoch 1, 1.2e-3 after 60, with the fixed step; the safeguarded
    # step, tests/test_exadmm_step_size.py, takes smaller steps and more epochs here)
    kw = dict(dim=4, alpha0=0.1, l2=0.002, learning_rate=0.05, admm_penalty=0.1, epochs=60, seed=0,
              dtype=torch.float64, pred_iterations=20, u_step_size="fixed")
    fair = ExADMM(exposure_reg=1e-2, **kw).fit(R)
    plain = ExADMM(exposure_reg=0.0, **kw).fit(R)
    assert fair.history[-1]["primal_residual"] < 0.05 * fair.history[0]["primal_residual"]
    assert fair.history[-1]["residual_w"] == pytest.approx(fair.history[-1]["primal_residual"], rel=1e-9)
    # the exposure term Λ‖V ū‖² is smaller with the regulariser on
    ubar_f, ubar_p = fair.U.mean(0), plain.U.mean(0)
    assert float((fair.V @ ubar_f).norm()) < float((plain.V @ ubar_p).norm())
    folded = fair.fold_in(_random_csr(10, 30, 0.2, 9))
    assert folded.shape == (10, 4) and torch.isfinite(folded).all()
    assert len(fair.fold_in_history) == 20


def test_row_solves_in_parallel_threads_equal_serial_and_dual_equals_primal():
    # many small groups (tiny budget) dealt to 2 worker threads give the serial result;
    # the dual (push-through) form equals the primal normal equations
    R = _random_csr(60, 30, 0.3, 7)
    d = 6
    V = torch.randn(30, d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    s = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    constant = 0.2 * (V.T @ V) + 5.0 * torch.outer(s, s)  # exADMM's V-step constant is not α0·G alone
    lam = torch.as_tensor(frequency_l2(np.diff(R.indptr), 0.01, 0.2, 30, 1.0))
    groups = build_row_groups(R, d, budget=40)
    assert len(groups.rows) > 4
    results = {}
    for method in ("primal", "dual"):
        for workers in (1, 2):
            out = torch.zeros(60, d, dtype=torch.float64)
            results[method, workers] = solve_rows(V, groups, constant, lam, out, method=method, workers=workers)
    torch.testing.assert_close(results["primal", 2], results["primal", 1], rtol=0, atol=0)
    torch.testing.assert_close(results["dual", 1], results["primal", 1], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(results["dual", 2], results["dual", 1], rtol=0, atol=0)
    with pytest.raises(ValueError, match="method"):
        solve_rows(V, groups, constant, lam, torch.zeros(60, d, dtype=torch.float64), method="cg")


def test_cg_rows_converge_to_the_exact_solves_and_one_step_is_steepest_descent():
    R = _random_csr(40, 25, 0.3, 11)
    d = 5
    V = torch.randn(25, d, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    constant = 0.3 * (V.T @ V)
    lam = torch.as_tensor(frequency_l2(np.diff(R.indptr), 0.01, 0.3, 25, 1.0))
    groups = build_row_groups(R, d, budget=50)
    exact = solve_rows(V, groups, constant, lam, torch.zeros(40, d, dtype=torch.float64))
    # d CG iterations solve a d-dimensional SPD system exactly (up to rounding)
    cg = cg_rows(V, groups, constant, lam, torch.zeros(40, d, dtype=torch.float64), steps=d)
    torch.testing.assert_close(cg, exact, rtol=1e-8, atol=1e-8)
    # one step from x = 0: x = (rᵀr / rᵀAr) r with r = b (hand formula for row 0)
    one = cg_rows(V, groups, constant, lam, torch.zeros(40, d, dtype=torch.float64), steps=1)
    Vi = V[R[0].indices]
    A = constant + lam[0] * torch.eye(d, dtype=torch.float64) + Vi.T @ Vi
    b = Vi.sum(0)
    torch.testing.assert_close(one[0], (b @ b) / (b @ A @ b) * b)


def test_ials_cg_solver_reaches_the_exact_solvers_loss():
    R = _random_csr(50, 30, 0.2, 12)
    exact = IALS(dim=4, alpha0=0.2, l2=0.01, epochs=8, seed=1, dtype=torch.float64).fit(R)
    cg = IALS(dim=4, alpha0=0.2, l2=0.01, epochs=8, seed=1, dtype=torch.float64, solver="cg", cg_steps=3).fit(R)
    assert cg.history[-1]["loss"] == pytest.approx(exact.history[-1]["loss"], rel=0.02)
    assert cg.history[-1]["loss"] < cg.history[0]["loss"]
    with pytest.raises(ValueError, match="solver"):
        IALS(solver="lu")


@pytest.mark.parametrize("budget", [40, 300, 1 << 18])
def test_row_groups_bounded_search_equals_full_search(budget):
    """build_row_groups searches each group's end in a window of ``per_row // deg + 1`` rows; the
    groups equal those of a search over every remaining row (skewed degrees, several budgets)."""
    rng = np.random.default_rng(4)
    deg = np.minimum(rng.zipf(1.6, 300), 60)
    R = sp.csr_matrix((np.ones(deg.sum()), (np.repeat(np.arange(300), deg),
                                            np.concatenate([rng.choice(80, k, replace=False) for k in deg]))),
                      shape=(300, 80))
    groups = build_row_groups(R, d=4, budget=budget)
    degree = np.diff(R.indptr)
    order = np.argsort(degree, kind="stable")
    deg_sorted = degree[order]
    per_row, p, bounds = max(1, budget // 4), 0, []
    while p < order.size:
        span = np.arange(1, order.size - p + 1) * deg_sorted[p:]
        q = p + max(1, int(np.searchsorted(span, per_row, side="right")))
        q = min(q, max(p + 1, int(np.searchsorted(deg_sorted, 1.25 * deg_sorted[p], side="right"))))
        bounds.append(order[p:q])
        p = q
    assert [g.tolist() for g in groups.rows] == [b.tolist() for b in bounds]


@pytest.mark.parametrize("family", ["ials", "exadmm"])
def test_items_without_training_interactions_have_zero_factors(family):
    """Items no training user touched get their exact solution, 0 (not their random initial values):
    every user scores them exactly 0, so noise cannot rank them into a top-K list."""
    R = _random_csr(40, 25, 0.25, 5).tolil()
    R[:, [3, 17]] = 0
    R = sp.csr_matrix(R)
    R.eliminate_zeros()
    kw = dict(dim=4, alpha0=0.1, l2=0.01, epochs=3, seed=2)
    model = IALS(**kw).fit(R) if family == "ials" else ExADMM(exposure_reg=1e-3, admm_penalty=0.01, **kw).fit(R)
    assert torch.count_nonzero(model.V[[3, 17]]) == 0
    assert torch.count_nonzero(model.V.abs().sum(1)) == 23
    scores = model.score(np.arange(40))
    assert np.all(scores[:, [3, 17]] == 0.0) and np.all(scores.max(axis=1) > 0.0)
