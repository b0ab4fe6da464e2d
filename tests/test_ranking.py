"""Full and sampled ranking: tie rule, batching invariance, backends, brute-force cross-checks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

from recrepro.evaluation import (
    ALL_METRICS,
    evaluate_full_ranking,
    evaluate_sampled,
    full_ranking_topk,
    interactions_to_csr,
    negatives_from_frame,
    rank_positives,
    sampled_ranks,
    select_topk,
)
from recrepro.evaluation.ranking import select_topk_refined
from recrepro.evaluation.scoring import resolve_score_source

KS = [1, 5, 10]


# --------------------------------------------------------------------- brute-force reference


def reference_metrics(scores: np.ndarray, exclude: sp.csr_matrix, targets: sp.csr_matrix, ks, ties="item_id"):
    """Per-user metrics by plain Python loops over users and items (the definitions, literally)."""
    n_users, n_items = scores.shape
    rows = {}
    for u in range(n_users):
        tset = set(targets[u].indices.tolist())
        if not tset:
            continue
        eset = set(exclude[u].indices.tolist())
        cands = [i for i in range(n_items) if i not in eset and scores[u, i] > -np.inf]
        order = sorted(cands, key=lambda i: (-float(scores[u, i]), i))
        row = {}
        for k in ks:
            top = order[:k]
            hit = [i in tset for i in top]
            n_hit = sum(hit)
            dcg = sum(1 / math.log2(r + 2) for r, h in enumerate(hit) if h)
            idcg = sum(1 / math.log2(r + 2) for r in range(min(k, len(tset))))
            row[f"recall_liang@{k}"] = n_hit / min(k, len(tset))
            row[f"recall_lgcn@{k}"] = n_hit / len(tset)
            row[f"precision@{k}"] = n_hit / k
            row[f"ndcg@{k}"] = dcg / idcg
            row[f"hr@{k}"] = float(n_hit > 0)
        negatives = [i for i in cands if i not in tset]
        ranks = []
        auc_terms = []
        for p in sorted(tset):
            if p not in cands:
                ranks.append(math.inf)
                auc_terms.append(0.0)
                continue
            sp_ = float(scores[u, p])

            def above(i: int) -> bool:
                si = float(scores[u, i])
                if ties == "item_id":
                    return si > sp_ or (si == sp_ and i < p)
                if ties == "optimistic":
                    return si > sp_
                return si >= sp_

            n_above = sum(above(i) for i in negatives)
            ranks.append(1 + n_above)
            auc_terms.append((len(negatives) - n_above) / len(negatives) if negatives else math.nan)
        row["auc"] = float(np.mean(auc_terms)) if negatives else math.nan
        for k in ks:
            row[f"pp_hr@{k}"] = float(np.mean([r <= k for r in ranks]))
            row[f"pp_ndcg@{k}"] = float(np.mean([1 / math.log2(r + 1) if r <= k else 0.0 for r in ranks]))
        rows[u] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def random_problem(seed: int, n_users: int = 60, n_items: int = 40):
    rng = np.random.default_rng(seed)
    exclude = sp.random(n_users, n_items, density=0.15, format="csr", random_state=seed)
    targets = sp.random(n_users, n_items, density=0.1, format="csr", random_state=seed + 1)
    exclude = exclude.tolil()
    targets = targets.tolil()
    targets[3, :] = 0  # a user without targets
    exclude[4, :] = 1  # an all-masked user (with targets)
    targets[4, 7] = 1
    exclude[5, :35] = 1  # a user with only 5 candidates (< 10)
    targets[5, 36] = 1
    exclude[6, 2] = 1  # a target that is also excluded
    targets[6, 2] = 1
    exclude, targets = exclude.tocsr(), targets.tocsr()
    exclude.eliminate_zeros()
    targets.eliminate_zeros()
    # Quantised scores -> many exact ties; signed zeros must tie too; a few -inf from the model.
    scores = (rng.integers(-2, 3, size=(n_users, n_items)) / 2).astype(np.float32)
    scores[scores == 0] *= rng.choice(np.array([-1, 1], np.float32), size=int((scores == 0).sum()))
    scores[rng.random(scores.shape) < 0.02] = -np.inf
    return scores, exclude, targets


@pytest.mark.parametrize("ties", ["item_id", "optimistic", "pessimistic"])
def test_matches_bruteforce_reference_with_ties(ties):
    scores, exclude, targets = random_problem(0)
    result = evaluate_full_ranking(lambda u: scores[u], exclude, targets, KS, metrics=ALL_METRICS,
                                   rank_ties=ties, batch_size=16)
    expected = reference_metrics(scores, exclude, targets, KS, ties)
    got = result.per_user.set_index("user")
    assert got.index.tolist() == expected.index.tolist()
    for column in expected.columns:
        np.testing.assert_allclose(got[column].to_numpy(), expected[column].to_numpy(), rtol=0, atol=1e-12,
                                   err_msg=column)
    assert result.counts["n_users_skipped_no_targets"] == 1
    assert result.counts["n_targets_excluded"] >= 2  # user 4's target and user 6's
    # micro per-positive means: over all targets of evaluated users
    ref_ranks_hr = reference_pp_micro(scores, exclude, targets, 5, ties)
    assert result.overall["pp_hr_micro@5"] == pytest.approx(ref_ranks_hr, abs=1e-12)


def reference_pp_micro(scores, exclude, targets, k, ties):
    hits, total = 0, 0
    for u in range(scores.shape[0]):
        tset = set(targets[u].indices.tolist())
        eset = set(exclude[u].indices.tolist())
        cands = [i for i in range(scores.shape[1]) if i not in eset and scores[u, i] > -np.inf]
        negatives = [i for i in cands if i not in tset]
        for p in tset:
            total += 1
            if p not in cands:
                continue
            s = scores[u, p]
            if ties == "item_id":
                above = sum(scores[u, i] > s or (scores[u, i] == s and i < p) for i in negatives)
            elif ties == "optimistic":
                above = sum(scores[u, i] > s for i in negatives)
            else:
                above = sum(scores[u, i] >= s for i in negatives)
            hits += 1 + above <= k
    return hits / total


def embedding_problem(seed: int = 1, n_users: int = 300, n_items: int = 500, dim: int = 16):
    rng = np.random.default_rng(seed)
    user_emb = rng.standard_normal((n_users, dim)).astype(np.float32)
    item_emb = rng.standard_normal((n_items, dim)).astype(np.float32)
    item_emb[100:130] = item_emb[7]  # 31 identical items -> exact ties in any backend
    exclude = sp.random(n_users, n_items, density=0.05, format="csr", random_state=seed)
    targets = sp.random(n_users, n_items, density=0.02, format="csr", random_state=seed + 1)
    degree = np.asarray((exclude != 0).sum(axis=0)).ravel()
    return user_emb, item_emb, exclude, targets, degree


def assert_same_result(a, b, tol=1e-9):
    assert a.per_user.columns.tolist() == b.per_user.columns.tolist()
    assert (a.per_user["user"].to_numpy() == b.per_user["user"].to_numpy()).all()
    for column in a.per_user.columns:
        np.testing.assert_allclose(a.per_user[column].to_numpy(float), b.per_user[column].to_numpy(float),
                                   rtol=0, atol=tol, err_msg=column)
    assert a.overall.keys() == b.overall.keys()
    for key in a.overall:
        assert a.overall[key] == pytest.approx(b.overall[key], abs=tol, nan_ok=True), key
    assert a.counts == b.counts


def test_batch_size_invariance():
    user_emb, item_emb, exclude, targets, degree = embedding_problem()
    results = {}
    for batch_size in (1, 7, 4096):
        results[batch_size] = evaluate_full_ranking((user_emb, item_emb), exclude, targets, [5, 20],
                                                    batch_size=batch_size, item_degree=degree, return_topk=True)
    assert_same_result(results[1], results[7])
    assert_same_result(results[1], results[4096])
    assert (results[1].topk == results[4096].topk).all()
    # The rank metrics take the exact-scores path; the top-K metrics must not change with it.
    for batch_size in (1, 7, 4096):
        full = evaluate_full_ranking((user_emb, item_emb), exclude, targets, [5, 20], batch_size=batch_size,
                                     item_degree=degree, metrics=ALL_METRICS, return_topk=True)
        assert (full.topk == results[1].topk).all()
        for key, value in results[1].overall.items():
            assert full.overall[key] == pytest.approx(value, abs=1e-12), key
        results[f"all{batch_size}"] = full
    assert_same_result(results["all1"], results["all7"])
    assert_same_result(results["all1"], results["all4096"])


def test_backends_and_torch_inputs_agree():
    user_emb, item_emb, exclude, targets, degree = embedding_problem(seed=2)
    ref = evaluate_full_ranking((user_emb, item_emb), exclude, targets, [5, 20], metrics=ALL_METRICS,
                                item_degree=degree, batch_size=64)
    via_torch = evaluate_full_ranking((torch.from_numpy(user_emb), torch.from_numpy(item_emb)), exclude, targets,
                                      [5, 20], metrics=ALL_METRICS, item_degree=degree, batch_size=50,
                                      backend="torch")
    assert via_torch.settings["backend"] == "torch"
    assert_same_result(ref, via_torch)

    # A callable returning exactly-rounded float64 scores (torch) gives the same numbers too.
    exact = (user_emb.astype(np.float64) @ item_emb.astype(np.float64).T).astype(np.float32)

    def score_batch(users):
        return torch.from_numpy(exact[users].astype(np.float64))

    via_callable = evaluate_full_ranking(score_batch, exclude, targets, [5, 20], metrics=ALL_METRICS,
                                         item_degree=degree, batch_size=33)
    assert_same_result(ref, via_callable)


def test_strata_sum_to_overall_ndcg():
    user_emb, item_emb, exclude, targets, degree = embedding_problem(seed=3)
    result = evaluate_full_ranking((user_emb, item_emb), exclude, targets, [10, 50], item_degree=degree)
    for k in (10, 50):
        per_user = result.per_user
        total = per_user[[f"ndcg_{s}@{k}" for s in ("popular", "neutral", "unpopular")]].sum(axis=1)
        np.testing.assert_allclose(total, per_user[f"ndcg@{k}"], rtol=0, atol=1e-9)
        assert sum(result.strata[s][f"ndcg@{k}"] for s in result.strata) == pytest.approx(
            result.overall[f"ndcg@{k}"], abs=1e-9)


def test_determinism():
    user_emb, item_emb, exclude, targets, degree = embedding_problem(seed=4)
    a = evaluate_full_ranking((user_emb, item_emb), exclude, targets, [10], metrics=ALL_METRICS, item_degree=degree)
    b = evaluate_full_ranking((user_emb, item_emb), exclude, targets, [10], metrics=ALL_METRICS, item_degree=degree)
    assert a.overall == b.overall
    pd.testing.assert_frame_equal(a.per_user, b.per_user)


def test_users_subset_and_batches_are_bounded():
    user_emb, item_emb, exclude, targets, _ = embedding_problem(seed=5)
    seen = []

    def score_batch(users):
        seen.append(len(users))
        return user_emb[users] @ item_emb.T

    held_out = np.array([250, 3, 17, 99, 42])
    result = evaluate_full_ranking(score_batch, exclude, targets, [10], users=held_out, batch_size=2)
    assert max(seen) <= 2
    with_targets = held_out[np.diff(targets.indptr)[held_out] > 0]
    assert result.per_user["user"].tolist() == with_targets.tolist()
    assert result.counts["n_users_requested"] == 5
    with pytest.raises(ValueError):
        evaluate_full_ranking(score_batch, exclude, targets, [10], users=[1, 1])


# --------------------------------------------------------------------- top-K selection


def test_select_topk_tie_rule():
    scores = np.array(
        [
            [1.0, 2.0, 2.0, 2.0, 0.0],  # tie straddles the boundary: lowest ids win
            [0.0, -0.0, 5.0, 0.0, -np.inf],  # signed zeros tie
            [-np.inf, -np.inf, 3.0, -np.inf, -np.inf],  # one candidate
            [7.0, 7.0, 7.0, 7.0, 7.0],
        ],
        dtype=np.float32,
    )
    items, values = select_topk(scores, 2)
    assert items.tolist() == [[1, 2], [2, 0], [2, -1], [0, 1]]
    assert values[2, 1] == -np.inf
    items, _ = select_topk(scores, 7)  # k > n_items: padded
    assert items[0].tolist() == [1, 2, 3, 0, 4, -1, -1]
    assert items[2].tolist() == [2, -1, -1, -1, -1, -1, -1]
    assert items[1].tolist() == [2, 0, 1, 3, -1, -1, -1]
    scores[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        select_topk(scores, 2)


def test_refined_topk_equals_exact_topk_and_falls_back():
    rng = np.random.default_rng(6)
    n_users, n_items, dim = 40, 300, 8
    user_emb = rng.standard_normal((n_users, dim)).astype(np.float32)
    item_emb = rng.standard_normal((n_items, dim)).astype(np.float32)
    # 40 copies of the best item for user 0: its window holds > k + margin items -> fallback path
    best = int(np.argmax(user_emb[0] @ item_emb.T))
    item_emb[200:240] = item_emb[best]
    source = resolve_score_source((user_emb, item_emb), n_items, backend="numpy", device="cpu", max_batch=n_users)
    users = np.arange(n_users)
    exact = source.scores(users).numpy().copy()
    approx = source.approx_scores(users)
    for k in (1, 5, 20):
        assert (select_topk_refined(approx, k, source, users)[0] == select_topk(exact, k)[0]).all()
    items, _ = select_topk_refined(approx, 20, source, users)
    assert items[0, :20].tolist() == sorted([best] + list(range(200, 219)))


def test_full_ranking_topk_matches_evaluation():
    user_emb, item_emb, exclude, targets, _ = embedding_problem(seed=7)
    top = full_ranking_topk((user_emb, item_emb), 10, exclude=exclude, batch_size=64)
    assert top.items.shape == (user_emb.shape[0], 10) and top.items.dtype == np.int32
    result = evaluate_full_ranking((user_emb, item_emb), exclude, targets, [10], return_topk=True)
    assert (top.items[result.per_user["user"].to_numpy()] == result.topk).all()
    # excluded items never appear
    rows = np.repeat(np.arange(user_emb.shape[0]), 10)
    assert exclude[rows, top.items.ravel()].sum() == 0


def test_rank_positives_counts():
    scores = np.array([[3.0, 1.0, 1.0, -0.0, 0.0, -np.inf]], dtype=np.float32)
    # positives: item 2 (1.0) and item 4 (+0.0); negatives: items 0, 1, 3 (item 5 is no candidate)
    rows, items = np.array([0, 0]), np.array([2, 4])
    for ties, expected in (
        # item 2: 0 (3.0) and 1 (tie, lower id) above -> 3; item 4: 0, 1 and 3 (-0.0 == +0.0, lower id) -> 4
        ("item_id", [3, 4]),
        ("optimistic", [2, 3]),  # only strictly higher scores: item 2 <- {0}; item 4 <- {0, 1}
        ("pessimistic", [3, 4]),  # higher or equal: item 2 <- {0, 1}; item 4 <- {0, 1, 3}
    ):
        ranks, n_neg = rank_positives(scores, rows, items, ties)
        assert ranks.tolist() == expected, ties
        assert n_neg.tolist() == [3]


# --------------------------------------------------------------------- sampled ranking


def test_sampled_pessimistic_vs_optimistic():
    # user 0: positive item 0 scores 0.5; negatives 1 (0.5, a tie), 2 (0.7), 3 (0.1)
    # pessimistic rank = 1 + #{>= 0.5} = 1 + 2 = 3; optimistic = 1 + #{> 0.5} = 2
    # user 1: positive item 3 scores 0.9 above all negatives -> rank 1 either way
    table = np.array([[0.5, 0.5, 0.7, 0.1], [0.2, 0.3, 0.1, 0.9]], dtype=np.float32)
    positives = (np.array([0, 1]), np.array([0, 3]))
    negatives = (np.array([1, 0]), np.array([[0, 1, 2], [1, 2, 3]]))  # unsorted users on purpose
    pess = evaluate_sampled(lambda u: table[u], positives, negatives, ks=[1, 2, 3], ties="pessimistic")
    opti = evaluate_sampled(lambda u: table[u], positives, negatives, ks=[1, 2, 3], ties="optimistic")
    assert pess.per_user["rank"].tolist() == [3, 1]
    assert opti.per_user["rank"].tolist() == [2, 1]
    # HR@2: pessimistic (0 + 1)/2, optimistic (1 + 1)/2
    assert pess["hr@2"] == pytest.approx(0.5)
    assert opti["hr@2"] == pytest.approx(1.0)
    # NDCG@3: pessimistic (1/log2(4) + 1)/2; optimistic (1/log2(3) + 1)/2
    assert pess["ndcg@3"] == pytest.approx((0.5 + 1) / 2)
    assert opti["ndcg@3"] == pytest.approx((1 / math.log2(3) + 1) / 2)
    assert sampled_ranks(np.array([1.0]), np.array([[1.0, 1.0, 2.0]]), "pessimistic").tolist() == [4]


def test_sampled_sources_agree_and_validate():
    rng = np.random.default_rng(8)
    user_emb = rng.standard_normal((20, 4)).astype(np.float32)
    item_emb = rng.standard_normal((50, 4)).astype(np.float32)
    pos_items = rng.integers(0, 10, 20)
    neg_items = rng.choice(np.arange(10, 50), size=(20, 5))
    frame = pd.DataFrame({"user": np.repeat(np.arange(20), 5), "item": neg_items.ravel()}).sample(frac=1, random_state=0)
    users, table = negatives_from_frame(frame, n_negatives=5)
    assert users.tolist() == list(range(20))
    assert sorted(table[3].tolist()) == sorted(neg_items[3].tolist())
    a = evaluate_sampled((user_emb, item_emb), (np.arange(20), pos_items), frame, [3])
    b = evaluate_sampled(lambda u: user_emb[u] @ item_emb.T, pd.DataFrame({"user": np.arange(20), "item": pos_items}),
                         (np.arange(20), neg_items), [3], batch_size=3)
    assert (a.per_user["rank"].to_numpy() == b.per_user["rank"].to_numpy()).all()
    with pytest.raises(ValueError, match="also among"):
        evaluate_sampled((user_emb, item_emb), (np.array([0]), np.array([neg_items[0, 0]])), frame, [3])
    with pytest.raises(ValueError, match="no negatives"):
        evaluate_sampled((user_emb, item_emb), (np.array([25]), np.array([0])), frame, [3])


def test_interactions_to_csr_dedupes():
    m = interactions_to_csr(np.array([0, 0, 1]), np.array([2, 2, 0]), 3, 4)
    assert m.shape == (3, 4) and m.nnz == 2 and m.has_canonical_format
    assert m.toarray().tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]


def test_nan_scores_are_a_non_finite_error_in_both_evaluators():
    """A diverged model's NaN scores stop the evaluation with NonFiniteError (a ValueError), which a
    FedRAP grid run records as a divergence instead of crashing (papers/fedrap/run.run_variant)."""
    from recrepro.evaluation import sampled_ranks, select_topk
    from recrepro.records import NonFiniteError

    with pytest.raises(NonFiniteError, match="scores contain NaN"):
        sampled_ranks(np.array([0.5, np.nan]), np.zeros((2, 3)))
    scores = torch.zeros((2, 5))
    scores[1, 3] = float("nan")
    with pytest.raises(NonFiniteError, match="scores contain NaN"):
        select_topk(scores, 2)
    assert issubclass(NonFiniteError, ValueError)
