"""Hand-computed values for every metric (arithmetic in the comments)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from recrepro.evaluation import (
    ALL_METRICS,
    coverage,
    dcg_discounts,
    evaluate_full_ranking,
    exposure_counts,
    gini,
    hit_rate,
    ideal_dcg,
    item_strata,
    ndcg,
    precision,
    rank_hit,
    rank_ndcg,
    recall_lgcn,
    recall_liang,
)

L3 = 1.0 / math.log2(3)  # discount of rank 2 = 0.6309297535714575
L4 = 1.0 / math.log2(4)  # discount of rank 3 = 0.5
NEG = -np.inf


def csr(rows: dict[int, list[int]], shape: tuple[int, int]) -> sp.csr_matrix:
    pairs = [(u, i) for u, items in rows.items() for i in items]
    u, i = (np.array(x, dtype=np.int64) for x in zip(*pairs)) if pairs else (np.empty(0, int), np.empty(0, int))
    return sp.csr_matrix((np.ones(len(u), np.float32), (u, i)), shape=shape)


# --------------------------------------------------------------------- metric functions


def test_discounts_and_idcg():
    assert np.allclose(dcg_discounts(3), [1.0, L3, L4])
    # IDCG@3 for |T| = 0, 1, 2, 5 -> 0, 1, 1 + L3, 1 + L3 + L4 (capped at K = 3)
    assert np.allclose(ideal_dcg(np.array([0, 1, 2, 5]), 3), [0.0, 1.0, 1 + L3, 1 + L3 + L4])


def test_hit_matrix_metrics():
    hits = np.array(
        [
            [False, True, False],  # |T| = 2: one hit at rank 2
            [True, True, True],  # |T| = 4: three hits (more targets than K)
            [False, False, False],  # |T| = 1: nothing
        ]
    )
    n_targets = np.array([2, 4, 1])
    # recall_liang@3 = hits / min(3, |T|): 1/2, 3/3, 0/1
    assert np.allclose(recall_liang(hits, n_targets, 3), [0.5, 1.0, 0.0])
    # recall_lgcn@3 = hits / |T|: 1/2, 3/4, 0
    assert np.allclose(recall_lgcn(hits, n_targets, 3), [0.5, 0.75, 0.0])
    # precision@3 = hits / 3
    assert np.allclose(precision(hits, n_targets, 3), [1 / 3, 1.0, 0.0])
    # ndcg@3: user0 L3 / (1 + L3); user1 (1 + L3 + L4) / (1 + L3 + L4) = 1; user2 0
    assert np.allclose(ndcg(hits, n_targets, 3), [L3 / (1 + L3), 1.0, 0.0])
    assert np.allclose(hit_rate(hits, n_targets, 3), [1.0, 1.0, 0.0])
    # @1: only the first column
    assert np.allclose(recall_liang(hits, n_targets, 1), [0.0, 1.0, 0.0])
    assert np.allclose(recall_lgcn(hits, n_targets, 1), [0.0, 0.25, 0.0])
    assert np.allclose(ndcg(hits, n_targets, 1), [0.0, 1.0, 0.0])
    # no targets -> nan (the evaluator never passes such users)
    assert np.isnan(recall_liang(hits[:1], np.array([0]), 3)).all()
    with pytest.raises(ValueError):
        ndcg(hits, n_targets, 4)


def test_rank_metrics():
    ranks = np.array([1, 2, 3, 11, np.inf])
    assert np.allclose(rank_hit(ranks, 10), [1, 1, 1, 0, 0])
    assert np.allclose(rank_ndcg(ranks, 10), [1.0, L3, L4, 0.0, 0.0])


# --------------------------------------------------------------------- exposure


def test_gini_extremes():
    m = 7
    assert gini(np.full(m, 3.0)) == pytest.approx(0.0, abs=1e-15)
    one = np.zeros(m)
    one[4] = 10.0
    assert gini(one) == pytest.approx((m - 1) / m, abs=1e-15)
    # [1, 3]: sorted, weights (2i - m - 1) = -1, +1 -> (3 - 1) / (2 * 4) = 0.25
    assert gini(np.array([3.0, 1.0])) == pytest.approx(0.25)
    # equals the mean-absolute-difference form used by exADMM: sum|xi - xj| / (2 m^2 mean)
    x = np.random.default_rng(0).integers(0, 20, 50).astype(float)
    mad = np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size**2 * x.mean())
    assert gini(x) == pytest.approx(mad, rel=1e-12)
    assert math.isnan(gini(np.zeros(3)))


def test_exposure_counts_and_coverage():
    topk = np.array([[1, 2, 3], [0, 1, 2], [5, 4, -1], [-1, -1, -1]])
    # uniform@3: item0 1, item1 2, item2 2, item3 1, item4 1, item5 1, item6 0
    assert np.allclose(exposure_counts(topk, 7, 3), [1, 2, 2, 1, 1, 1, 0])
    # @1: items 1, 0, 5
    assert np.allclose(exposure_counts(topk, 7, 1), [1, 1, 0, 0, 0, 1, 0])
    # log_rank@3: rank weights 1, L3, L4
    assert np.allclose(exposure_counts(topk, 7, 3, "log_rank"), [1, 1 + L3, L3 + L4, L4, L3, 1, 0])
    assert coverage(exposure_counts(topk, 7, 3)) == pytest.approx(6 / 7)


def test_item_strata_boundaries():
    # m = 20: popular = ceil(0.05 * 20) = 1 item, popular + neutral = ceil(0.20 * 20) = 4 items.
    degree = np.array([5, 9, 9, 7, 7, 7] + [1] * 14)
    labels = item_strata(degree)
    # Order by degree desc, id asc: 1 (9), 2 (9), 3, 4, 5 (7) ...
    # -> popular {1}; neutral {2, 3, 4}; item 5 (degree 7 like 3 and 4) falls to unpopular (id tie rule).
    assert np.flatnonzero(labels == 0).tolist() == [1]
    assert np.flatnonzero(labels == 1).tolist() == [2, 3, 4]
    assert labels[0] == 2 and labels[5] == 2
    # m = 21: ceil(1.05) = 2 popular, ceil(4.2) = 5 in the first two strata.
    assert np.bincount(item_strata(np.arange(21)), minlength=3).tolist() == [2, 3, 16]
    # all equal degrees: lowest ids are the most popular
    assert item_strata(np.zeros(20)).tolist()[:5] == [0, 1, 1, 1, 2]


# --------------------------------------------------------------------- the tiny end-to-end example
#
# 5 users x 6 items, K in {1, 3}.  Scores (rows = users):
SCORES = np.array(
    [
        [0.9, 0.8, 0.8, 0.5, 0.1, 0.0],  # u0: items 1 and 2 tie at 0.8
        [0.2, 0.2, 0.2, 0.2, 0.2, 0.2],  # u1: everything ties
        [0.3, 0.1, 0.2, 0.0, 0.5, 0.4],  # u2: no targets
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],  # u3: every item excluded
        [0.6, 0.5, 0.4, 0.9, 0.3, 0.7],  # u4: only 2 candidates (< K)
    ],
    dtype=np.float32,
)
EXCLUDE = {0: [0], 3: [0, 1, 2, 3, 4, 5], 4: [0, 1, 2, 3]}
TARGETS = {0: [2, 4], 1: [0, 1, 2, 3], 3: [2], 4: [4]}
# Rankings (score desc, then item id asc), excluded items removed:
#   u0: candidates 1..5 -> 1 (0.8), 2 (0.8), 3, 4, 5        top3 [1, 2, 3]; hits [F, T, F]
#   u1: all tie -> 0, 1, 2, 3, 4, 5                           top3 [0, 1, 2]; hits [T, T, T]
#   u3: no candidate                                          top3 [-1, -1, -1]; no hits
#   u4: candidates 4 (0.3), 5 (0.7) -> 5, 4                   top3 [5, 4, -1]; hits [F, T, F]


@pytest.fixture(scope="module")
def tiny():
    shape = SCORES.shape
    return evaluate_full_ranking(
        lambda users: SCORES[users],
        csr(EXCLUDE, shape),
        csr(TARGETS, shape),
        ks=[1, 3],
        metrics=ALL_METRICS,
        item_degree=np.array([10, 9, 8, 7, 6, 5]),
        return_topk=True,
    )


def test_tiny_topk_and_counts(tiny):
    assert tiny.topk.tolist() == [[1, 2, 3], [0, 1, 2], [-1, -1, -1], [5, 4, -1]]
    assert tiny.per_user["user"].tolist() == [0, 1, 3, 4]
    assert tiny.per_user["n_targets"].tolist() == [2, 4, 1, 1]
    assert tiny.counts["n_users_requested"] == 5
    assert tiny.counts["n_users_evaluated"] == 4
    assert tiny.counts["n_users_skipped_no_targets"] == 1  # u2
    assert tiny.counts["n_targets"] == 8
    assert tiny.counts["n_targets_excluded"] == 1  # u3's item 2
    assert tiny.counts["n_users_short_list"] == 2  # u3, u4
    assert tiny.counts["n_users_auc_undefined"] == 1  # u3 has no negatives


def test_tiny_hit_metrics(tiny):
    pu = tiny.per_user.set_index("user")
    # per user (u0, u1, u3, u4) at K = 3
    assert np.allclose(pu["recall_liang@3"], [1 / 2, 3 / 3, 0, 1 / 1])
    assert np.allclose(pu["recall_lgcn@3"], [1 / 2, 3 / 4, 0, 1 / 1])
    assert np.allclose(pu["precision@3"], [1 / 3, 3 / 3, 0, 1 / 3])  # padding counts as a miss
    assert np.allclose(pu["ndcg@3"], [L3 / (1 + L3), 1.0, 0.0, L3 / 1.0])
    assert np.allclose(pu["hr@3"], [1, 1, 0, 1])
    # K = 1: only u1 hits (item 0): liang 1/1, lgcn 1/4
    assert np.allclose(pu["recall_liang@1"], [0, 1, 0, 0])
    assert np.allclose(pu["recall_lgcn@1"], [0, 1 / 4, 0, 0])
    assert np.allclose(pu["ndcg@1"], [0, 1, 0, 0])
    o = tiny.overall
    assert o["recall_liang@3"] == pytest.approx((0.5 + 1 + 0 + 1) / 4)  # 0.625
    assert o["recall_lgcn@3"] == pytest.approx((0.5 + 0.75 + 0 + 1) / 4)  # 0.5625
    assert o["precision@3"] == pytest.approx((1 / 3 + 1 + 0 + 1 / 3) / 4)  # 5/12
    assert o["ndcg@3"] == pytest.approx((L3 / (1 + L3) + 1 + 0 + L3) / 4)
    assert o["hr@3"] == pytest.approx(3 / 4)
    assert o["recall_lgcn@1"] == pytest.approx(0.25 / 4)
    assert tiny.per_k[3]["ndcg"] == o["ndcg@3"]


def test_tiny_exposure(tiny):
    o = tiny.overall
    # @3 exposure: item0 1, item1 2, item2 2, item3 1, item4 1, item5 1 -> all 6 covered.
    assert o["coverage@3"] == pytest.approx(1.0)
    # sorted [1,1,1,1,2,2], weights -5,-3,-1,1,3,5 -> (-5-3-1+1+6+10) / (6 * 8) = 8/48
    assert o["gini@3"] == pytest.approx(1 / 6)
    # position weights: u0 1->1, 2->L3, 3->L4; u1 0->1, 1->L3, 2->L4; u4 5->1, 4->L3
    # exposure: item0 1, item1 1+L3, item2 L3+L4, item3 L4, item4 L3, item5 1
    e = np.array([1, 1 + L3, L3 + L4, L4, L3, 1])
    xs = np.sort(e)  # L4, L3, 1, 1, L3+L4, 1+L3
    expected = (np.array([-5, -3, -1, 1, 3, 5]) @ xs) / (6 * e.sum())  # = 0.20236...
    assert o["gini_pos@3"] == pytest.approx(expected, rel=1e-12)
    # @1: items 1 (u0), 0 (u1), 5 (u4) -> coverage 3/6; exposure [1,1,0,0,0,1]:
    # sorted [0,0,0,1,1,1] -> (1 + 3 + 5) / (6 * 3) = 0.5
    assert o["coverage@1"] == pytest.approx(0.5)
    assert o["gini@1"] == pytest.approx(0.5)


def test_tiny_auc_and_per_positive(tiny):
    pu = tiny.per_user.set_index("user")
    # AUC (tie rule item id):
    #   u0: negatives {1, 3, 5}.  target 2 (0.8): item 1 ties and has a lower id -> above;
    #       2 of 3 below -> 2/3.  target 4 (0.1): 1 and 3 above -> 1/3.  mean 0.5
    #   u1: negatives {4, 5} tie with every target but have higher ids -> 1
    #   u3: no negatives -> nan (left out of the mean)
    #   u4: negative {5} (0.7) beats target 4 (0.3) -> 0
    assert np.allclose(pu["auc"], [0.5, 1.0, np.nan, 0.0], equal_nan=True)
    assert tiny.overall["auc"] == pytest.approx((0.5 + 1 + 0) / 3)
    # per-positive ranks (each target alone vs the negatives):
    #   u0: target 2 -> 2, target 4 -> 3; u1: all four -> 1; u3: excluded -> inf; u4: 2
    # pp_hr@1 per user: 0, 4/4, 0, 0 -> 0.25; micro 4/8
    assert np.allclose(pu["pp_hr@1"], [0, 1, 0, 0])
    assert tiny.overall["pp_hr@1"] == pytest.approx(0.25)
    assert tiny.overall["pp_hr_micro@1"] == pytest.approx(0.5)
    # pp_hr@3: 2/2, 4/4, 0/1, 1/1 -> 0.75; micro 7/8
    assert tiny.overall["pp_hr@3"] == pytest.approx(0.75)
    assert tiny.overall["pp_hr_micro@3"] == pytest.approx(7 / 8)
    # pp_ndcg@3: u0 (L3 + L4)/2, u1 1, u3 0, u4 L3
    assert np.allclose(pu["pp_ndcg@3"], [(L3 + L4) / 2, 1, 0, L3])
    assert tiny.overall["pp_ndcg@3"] == pytest.approx(((L3 + L4) / 2 + 1 + 0 + L3) / 4)
    assert tiny.overall["pp_ndcg_micro@3"] == pytest.approx((L3 + L4 + 4 + 0 + L3) / 8)


@pytest.mark.parametrize(
    ("rank_ties", "auc_u0", "auc_u1", "pp_hr1_u0", "pp_hr1_u1"),
    [
        # optimistic: u0 target 2 ties item 1 and wins -> rank 1, all 3 negatives below -> AUC (1 + 1/3)/2
        #             u1: ties favour targets -> rank 1, AUC 1
        ("optimistic", (1 + 1 / 3) / 2, 1.0, 0.5, 1.0),
        # pessimistic: u0 target 2 -> rank 2, AUC (2/3 + 1/3)/2; u1: both negatives above -> rank 3, AUC 0
        ("pessimistic", 0.5, 0.0, 0.0, 0.0),
    ],
)
def test_tiny_rank_tie_rules(rank_ties, auc_u0, auc_u1, pp_hr1_u0, pp_hr1_u1):
    shape = SCORES.shape
    result = evaluate_full_ranking(
        lambda users: SCORES[users], csr(EXCLUDE, shape), csr(TARGETS, shape), ks=[1],
        metrics=["auc", "pp_hr"], rank_ties=rank_ties,
    )
    pu = result.per_user.set_index("user")
    assert pu.loc[0, "auc"] == pytest.approx(auc_u0)
    assert pu.loc[1, "auc"] == pytest.approx(auc_u1)
    assert pu.loc[0, "pp_hr@1"] == pytest.approx(pp_hr1_u0)
    assert pu.loc[1, "pp_hr@1"] == pytest.approx(pp_hr1_u1)


def test_tiny_strata(tiny):
    # degrees [10, 9, 8, 7, 6, 5], m = 6: popular = ceil(0.3) = {0}; neutral up to ceil(1.2) = 2 -> {1};
    # unpopular {2, 3, 4, 5}.
    assert tiny.settings["strata_sizes"] == {"popular": 1, "neutral": 1, "unpopular": 4}
    pu = tiny.per_user.set_index("user")
    idcg3_u1 = 1 + L3 + L4
    # u0: hit item 2 (unpopular) at rank 2 over IDCG 1 + L3
    # u1: hits 0 (popular, r1), 1 (neutral, r2), 2 (unpopular, r3) over IDCG 1 + L3 + L4
    # u4: hit item 4 (unpopular) at rank 2 over IDCG 1
    assert np.allclose(pu["ndcg_popular@3"], [0, 1 / idcg3_u1, 0, 0])
    assert np.allclose(pu["ndcg_neutral@3"], [0, L3 / idcg3_u1, 0, 0])
    assert np.allclose(pu["ndcg_unpopular@3"], [L3 / (1 + L3), L4 / idcg3_u1, 0, L3])
    total = sum(tiny.strata[s]["ndcg@3"] for s in ("popular", "neutral", "unpopular"))
    assert total == pytest.approx(tiny.overall["ndcg@3"], abs=1e-12)


def test_result_to_dict_is_json_ready(tiny):
    import json

    text = json.dumps(tiny.to_dict())
    assert '"ndcg@3"' in text and "NaN" not in text
