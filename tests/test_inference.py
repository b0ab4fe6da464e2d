"""The statistics behind the verdicts (recrepro.scorecard.inference), each against a hand computation."""

from __future__ import annotations

import math

import pytest

from recrepro.scorecard.inference import (
    Estimate,
    holm,
    margin_test,
    paired_estimate,
    pooled_estimate,
    spearman_difference,
    spearman_estimate,
    to_rho,
    trend_test,
)


def test_holm_step_down_by_hand():
    # the textbook case: p_(k) × (m - k + 1), made monotone: 0.01·5, 0.02·4, 0.03·3, max(0.04·2, .09), max(0.05, .09)
    assert holm([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    # order does not matter, NaN is no test (m = 3 here), and nothing exceeds 1
    adjusted = holm([0.04, 0.01, float("nan"), 0.03])
    assert adjusted[0] == pytest.approx(0.06) and adjusted[1] == pytest.approx(0.03) and adjusted[3] == pytest.approx(0.06)
    assert math.isnan(adjusted[2])
    assert holm([0.6, 0.7]) == [1.0, 1.0] and holm([]) == []


def test_paired_estimate_its_interval_p_and_detectable_effect_by_hand():
    e = paired_estimate([3.0, 5.0, 7.0], [1.0, 2.0, 3.0], "paired t-test over 3 seeds")
    # differences 2, 3, 4: mean 3, sd 1, se 1/√3 = 0.57735 on 2 df
    assert (e.effect, e.df, e.n) == (3.0, 2.0, 3) and e.se == pytest.approx(1 / math.sqrt(3))
    t = 3 / (1 / math.sqrt(3))
    assert e.p_value() == pytest.approx(1 - t / math.sqrt(t * t + 2))  # two-sided p on 2 df in closed form
    low, high = e.interval(0.95)
    assert (low, high) == (pytest.approx(3 - 4.302653 / math.sqrt(3)), pytest.approx(3 + 4.302653 / math.sqrt(3)))
    assert e.detectable() == pytest.approx((4.302653 + 1.060660) / math.sqrt(3), rel=1e-5)
    assert paired_estimate([1.0], [0.0], "") is None
    with pytest.raises(ValueError):
        paired_estimate([1.0, 2.0], [1.0], "")
    # constant differences: an exact gain (p 0), none at all (undefined)
    assert paired_estimate([2.0, 3.0], [1.0, 2.0], "").p_value() == 0.0
    assert math.isnan(paired_estimate([1.0, 2.0], [1.0, 2.0], "").p_value())
    # scaled: a difference as a share of a reference mean
    s = e.scaled(1 / 2)
    assert (s.effect, s.se) == (1.5, pytest.approx(e.se / 2)) and s.p_value() == pytest.approx(e.p_value())


def test_margin_test_equivalence_non_inferiority_and_outside_by_hand():
    phi5 = 2.866515718791939e-07  # 1 - Φ(5)
    phi3 = 0.0013498980316301  # 1 - Φ(3)
    inside = margin_test(Estimate(0.0, 0.01, math.inf, 100, ""), -0.05, 0.05)
    assert inside.p_inside == pytest.approx(phi5, rel=1e-6) and inside.p_outside == pytest.approx(1 - phi5)
    # non-inferiority (one bound): -2 % with se 1 % against -5 %: z = 3
    assert margin_test(Estimate(-0.02, 0.01, math.inf, 100, ""), -0.05, None).p_inside == pytest.approx(phi3)
    # wholly below the margin: -8 % with se 1 %: z = -3 from the bound
    below = margin_test(Estimate(-0.08, 0.01, math.inf, 100, ""), -0.05, None)
    assert below.p_outside == pytest.approx(phi3) and below.p_inside == pytest.approx(1 - phi3)
    with pytest.raises(ValueError):
        margin_test(Estimate(0.0, 1.0, 1.0, 2, ""), None, None)


def test_trend_test_is_kendalls_tau_over_every_seed_value():
    # four points in order, one value each: τ = 1, exact two-sided p = 2 / 4! = 0.0833
    t = trend_test([[1.0], [2.0], [3.0], [4.0]])
    assert (t.tau, t.n) == (1.0, 4) and t.p_value == pytest.approx(2 / 24)
    # two seeds per point, falling: the within-point pairs are ties in position (τ-b)
    t = trend_test([[3.0, 3.1], [2.0, 2.1], [1.0, 1.1]])
    # 12 pairs across points, all discordant; 3 tied in x: τ-b = -12 / √((15 - 3) · 15)
    assert t.tau == pytest.approx(-12 / math.sqrt(12 * 15)) and t.n == 6
    assert math.isnan(trend_test([[1.0], [1.0]]).tau)


def test_spearman_on_fishers_z_and_a_pooled_estimate_by_hand():
    e = spearman_estimate([0.5], 103)
    assert e.effect == pytest.approx(math.atanh(0.5)) and e.se == pytest.approx(math.sqrt(1.06 / 100))
    assert to_rho(e.effect) == pytest.approx(0.5)
    two = spearman_estimate([0.5, 0.5], 103)  # two seeds as replicates: se / √2
    assert two.se == pytest.approx(math.sqrt(1.06 / 100) / math.sqrt(2))
    assert math.isinf(two.df)  # the seeds agree: the items' error is the larger


def test_spearman_takes_the_seeds_spread_where_it_is_larger_by_hand():
    rhos = [math.tanh(0.5), math.tanh(0.7), math.tanh(0.9)]  # z 0.5, 0.7, 0.9: sd 0.2
    many = spearman_estimate(rhos, 40_003)  # items' se √(1.06 / 40,000) / √3 = 0.0030 < 0.2 / √3 = 0.1155
    assert many.effect == pytest.approx(0.7) and many.se == pytest.approx(0.2 / math.sqrt(3))
    assert many.df == 2 and many.test.startswith("t over 3 seeds' Fisher z")
    few = spearman_estimate(rhos, 13)  # items' se √(1.06 / 10) / √3 = 0.1880 > 0.1155
    assert few.se == pytest.approx(math.sqrt(0.106) / math.sqrt(3)) and math.isinf(few.df)
    # against another method on the same seeds, z 0.1, 0.2, 0.3: differences 0.4, 0.5, 0.6 (sd 0.1)
    diff = spearman_difference(rhos, [math.tanh(0.1), math.tanh(0.2), math.tanh(0.3)], 40_003, 40_003, "`b`")
    assert diff.effect == pytest.approx(0.5) and diff.se == pytest.approx(0.1 / math.sqrt(3)) and diff.df == 2
    assert diff.test.startswith("paired t over 3 seeds' Fisher z")
    # one seed: the items' errors in quadrature, √(2 · 1.06 / 100), normal
    one = spearman_difference([0.5], [0.2], 103, 103, "`b`")
    assert one.effect == pytest.approx(math.atanh(0.5) - math.atanh(0.2))
    assert one.se == pytest.approx(math.sqrt(2 * 1.06 / 100)) and math.isinf(one.df)
    pooled = pooled_estimate([Estimate(0.0, 1.0, 2.0, 3, ""), Estimate(3.0, 2.0, 2.0, 3, "")])
    # unweighted: (0 + 3) / 2 = 1.5, se √(1 + 4) / 2 = 1.1180 (inverse-variance would give 0.6, leaning
    # on the precise estimate)
    assert pooled.effect == pytest.approx(1.5) and pooled.se == pytest.approx(math.sqrt(5) / 2) and pooled.n == 6
    # Welch-Satterthwaite: (Σ seᵢ²)² / Σ seᵢ⁴/dfᵢ = 25 / (1/2 + 16/2) = 2.9412 (by hand)
    assert pooled.df == pytest.approx(25 / 8.5)
    assert pooled.test == "unweighted mean of 2 estimates (t with 2.9 Welch-Satterthwaite df)"
    # a deterministic cell (se 0) still counts once in the mean; none with an se at all: no pooled effect
    with_exact = pooled_estimate([Estimate(1.0, 0.0, 2.0, 1, ""), Estimate(3.0, 2.0, 2.0, 3, "")])
    assert with_exact.effect == pytest.approx(2.0) and with_exact.se == pytest.approx(1.0) and with_exact.df == 2.0
    # one estimate pools to itself, its own t test: a 3-seed check is not made significant by pooling
    alone = pooled_estimate([Estimate(0.11, 0.083, 2.0, 3, "")])
    assert alone.df == 2.0 and alone.p_value() == pytest.approx(Estimate(0.11, 0.083, 2.0, 3, "").p_value())
    # large samples (df ∞) keep the normal approximation
    assert math.isinf(pooled_estimate([Estimate(0.0, 1.0, math.inf, 900, "")] * 2).df)
    assert pooled_estimate([Estimate(1.0, 0.0, 2.0, 3, "")]) is None
    assert Estimate(0.0, 1.0, math.inf, 1, "").detectable() == pytest.approx(1.959964 + 0.841621, rel=1e-6)


def test_a_large_t_keeps_its_tiny_p_rather_than_zero():
    # 1 - cdf(18) cancels to 0 in floating point; the survival function keeps ~1e-62
    from scipy import stats

    e = Estimate(18.0, 1.0, 942.0, 943, "")
    assert e.p_value() == pytest.approx(2 * stats.t.sf(18.0, 942.0)) and 0 < e.p_value() < 1e-50
    assert 0 < e.p_above(0.0) < 1e-50
