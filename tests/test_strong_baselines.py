"""Strong simple baselines (issue 48): hand-checked models, the tuning pick, the table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from recrepro.models.ease import EASE
from recrepro.models.itemitem import sparse_topk_rows, topk_per_row
from recrepro.models.itemknn import ItemKNN
from recrepro.models.rp3beta import RP3beta
from recrepro.paperlist import data_protocol_keys
from recrepro.baselines.strong import expand_grid, make_model, pick_point, strong_table, validation_section

# users x items: u0 = {0, 1}, u1 = {0, 1, 2}, u2 = {1, 2}
X = sp.csr_matrix(np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=np.float32))


def test_ease_matches_a_direct_solve():
    rng = np.random.default_rng(0)
    x = sp.csr_matrix((rng.random((40, 15)) < 0.3).astype(np.float32))
    dense = x.toarray().astype(np.float64)
    p = np.linalg.inv(dense.T @ dense + 5.0 * np.eye(15))
    b = np.eye(15) - p / np.diag(p)[None, :]  # Steck 2019 eq. (8)
    assert np.allclose(np.diag(b), 0.0)
    for dtype, tol in (("float64", 1e-12), ("float32", 1e-5)):
        model = EASE(lam=5.0, dtype=dtype).fit(x)
        assert model.W.dtype == np.dtype(dtype)
        assert np.abs(model.W - b).max() < tol
        assert np.allclose(model.score(np.array([3])), dense[3] @ b, atol=1e-4)
        # C order, the layout a CSR row times W reads row by row (scored through the Fortran-ordered
        # inverse, gowalla's validation pass took minutes longer), in LAPACK's memory (no copy)
        assert model.W.flags.c_contiguous


def test_ease_torch_path_matches_lapack():
    """The GPU path's arithmetic (torch Cholesky and its inverse, eq. 8's scaling), run on the CPU
    here: the same B as LAPACK's in-place path; a singular Gram matrix refused the same way."""
    import torch

    from recrepro.models.ease import _weights_torch, ease_weights

    rng = np.random.default_rng(2)
    x = sp.csr_matrix((rng.random((50, 20)) < 0.3).astype(np.float32))
    for dtype, tol in (("float64", 1e-12), ("float32", 1e-5)):
        want = ease_weights(x, 7.0, dtype)
        g = (x.astype(dtype).T @ x.astype(dtype)).toarray()
        g[np.diag_indices(20)] += 7.0
        got = _weights_torch(torch.from_numpy(g), 7.0)
        assert got.dtype == np.dtype(dtype) and np.allclose(np.diag(got), 0.0)
        assert np.abs(got - want).max() < tol
    singular = torch.tensor([[2.0, 2.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="positive definite"):
        _weights_torch(singular, 0.0)


def test_ease_inverts_in_the_gram_matrix_memory_whatever_its_order():
    """One n² matrix, as the module promises (gowalla's 6.7 GB in float32, not twice that): the
    LAPACK calls work in the array handed in, C- or Fortran-ordered, and still invert it."""
    from recrepro.models.ease import _inverse_in_place

    rng = np.random.default_rng(1)
    x = (rng.random((30, 12)) < 0.4).astype(np.float64)
    want = np.linalg.inv(x.T @ x + 3.0 * np.eye(12))
    scipy_gram = (sp.csr_matrix(x).T @ sp.csr_matrix(x)).toarray()
    for g in (np.ascontiguousarray(x.T @ x), np.asfortranarray(x.T @ x), scipy_gram):
        g[np.diag_indices(12)] += 3.0
        p = _inverse_in_place(g, 3.0)
        assert np.shares_memory(p, g)
        assert np.allclose(np.tril(p), np.tril(want), atol=1e-10)


def test_ease_rejects_a_singular_gram_matrix():
    x = sp.csr_matrix(np.array([[1, 1, 0], [1, 1, 0]], dtype=np.float32))  # item 2 never seen: row of zeros
    with pytest.raises(ValueError, match="positive definite"):
        EASE(lam=0.0).fit(x)


def test_itemknn_shrunk_cosine_by_hand():
    # co-occurrences c01 = 2, c02 = 1, c12 = 2; norms sqrt(2), sqrt(3), sqrt(2); shrink h = 1
    model = ItemKNN(k=3, shrink=1.0).fit(X)
    s01 = 2 / (math.sqrt(6) + 1)
    s02 = 1 / (2 + 1)
    expected = np.array([[0, s01, s02], [s01, 0, s01], [s02, s01, 0]])
    assert np.allclose(model.W.toarray(), expected, atol=1e-6)
    # k = 1: item 0 keeps item 1 (s01 > s02); item 1's two equal neighbours -> the lower id, 0
    top = ItemKNN(k=1, shrink=1.0).fit(X).W.toarray()
    assert np.allclose(top, [[0, s01, 0], [s01, 0, s01], [0, 0, 0]], atol=1e-6)
    # u0 = {0, 1}: scores are rows 0 + 1 of W
    assert np.allclose(ItemKNN(k=1, shrink=1.0).fit(X).score(np.array([0])), [[s01, s01, s01]], atol=1e-6)


def test_rp3beta_transition_probabilities_by_hand():
    model = RP3beta(alpha=1.0, beta=0.0, k=3).fit(X)
    p_iu, p_ui = model.transitions()
    assert np.allclose(p_ui.toarray(), [[.5, .5, 0], [1 / 3, 1 / 3, 1 / 3], [0, .5, .5]])
    assert np.allclose(p_iu.toarray(), [[.5, .5, 0], [1 / 3, 1 / 3, 1 / 3], [0, .5, .5]])
    # W_01 = P_iu[0,0] P_ui[0,1] + P_iu[0,1] P_ui[1,1] = .25 + 1/6; beta = 1 divides by deg(1) = 3
    beta1 = RP3beta(alpha=1.0, beta=1.0, k=3).fit(X).W.toarray()
    assert beta1[0, 1] == pytest.approx((0.25 + 1 / 6) / 3, rel=1e-6)
    assert np.allclose(np.diag(beta1), 0.0)
    # alpha = 2 squares every probability: W_02 = P_iu[0,1]^2 P_ui[1,2]^2 = 1/4 * 1/9
    alpha2 = RP3beta(alpha=2.0, beta=0.0, k=3).fit(X).W.toarray()
    assert alpha2[0, 2] == pytest.approx(1 / 36, rel=1e-6)


def test_topk_per_row_breaks_ties_by_lower_column_and_drops_zeros():
    block = np.array([[0.5, 0.2, 0.5, 0.5, 0.0], [0.0, 0.0, 0.0, 0.1, 0.0]], dtype=np.float32)
    rows, cols, vals = topk_per_row(block, 2)
    assert rows.tolist() == [0, 0, 1] and cols.tolist() == [0, 2, 3]
    assert np.allclose(vals, [0.5, 0.5, 0.1])
    # the sparse version keeps the same entries (and drops the diagonal when asked), in any block size
    for block_nnz in (1, 3, 1 << 20):
        top = sparse_topk_rows(sp.csr_matrix(block), 2, drop_diagonal=False, block_nnz=block_nnz)
        assert np.allclose(top.toarray(), [[0.5, 0, 0.5, 0, 0], [0, 0, 0, 0.1, 0]])
    no_diag = sparse_topk_rows(sp.csr_matrix(block), 2, drop_diagonal=True).toarray()
    assert no_diag[0].tolist() == pytest.approx([0, 0, 0.5, 0.5, 0])


def test_sparse_topk_matches_the_dense_rule_on_random_ties():
    rng = np.random.default_rng(1)
    dense = rng.integers(0, 4, size=(30, 25)).astype(np.float32)  # many ties and zeros
    r, c, v = topk_per_row(dense, 5)
    expected = np.zeros_like(dense)
    expected[r, c] = v
    got = sparse_topk_rows(sp.csr_matrix(dense), 5, drop_diagonal=False, block_nnz=40).toarray()
    assert np.array_equal(got, expected)


def test_fold_in_scores_a_held_out_user_from_her_history():
    train = sp.csr_matrix(np.vstack([X.toarray(), np.zeros((1, 3), np.float32)]))  # user 3 held out
    model = ItemKNN(k=3, shrink=0.0).fit(train)
    assert np.allclose(model.score(np.array([3])), 0.0)
    history = sp.csr_matrix(([1.0], ([3], [2])), shape=(4, 3))
    model.fold_in_users(history)
    assert np.allclose(model.score(np.array([3])), model.W.toarray()[2][None, :])
    assert np.allclose(model.score(np.array([0])), X[0].toarray() @ model.W.toarray())  # others unchanged


def test_pick_point_and_grid():
    assert pick_point([0.1, 0.3, 0.3, np.nan]) == 1  # first of equal scores, NaN never wins
    with pytest.raises(ValueError):
        pick_point([np.nan])
    points = expand_grid({"shrink": [0, 10], "k": [5, 50]}, {"block_size": 8})
    assert points[0] == {"block_size": 8, "k": 5, "shrink": 0} and len(points) == 4
    assert points[1] == {"block_size": 8, "k": 5, "shrink": 10}  # keys sorted, last key fastest
    assert expand_grid({}, {"lam": 1.0}) == [{"lam": 1.0}]
    with pytest.raises(ValueError, match="both fixed and searched"):
        expand_grid({"k": [1]}, {"k": 2})


def test_validation_section_moves_to_the_validation_part():
    fold = {"mode": "full", "fit": ["train"], "fold_in": "test_tr", "exclude": ["test_tr"], "target": "test_te",
            "ks": [20]}
    val = validation_section(fold)
    assert (val["fold_in"], val["exclude"], val["target"]) == ("validation_tr", ["validation_tr"], "validation_te")
    rr = validation_section({"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test",
                             "ks": [20]})
    assert rr["exclude"] == ["train"] and rr["target"] == "validation"
    loo = validation_section({"mode": "sampled", "fit": ["train"], "target": "test", "ks": [10]})
    assert loo["target"] == "validation"


def _run(d: Path, value: float, per_user: list[float] | None, metric: str = "ndcg@20") -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "metrics.json").write_text(json.dumps({"overall": {metric: value}}))
    if per_user is not None:
        pd.DataFrame({"user": np.arange(len(per_user)), metric: per_user}).to_parquet(d / "per_user.parquet")


def test_table_from_records_with_a_paired_test(tmp_path):
    from scipy import stats

    base = tmp_path / "baselines/strong/toy/p/random_ratio"
    ours_a, ours_b = [0.2, 0.4, 0.1, 0.5], [0.3, 0.4, 0.2, 0.4]
    for model, runs in (("ials", {"seed0": (0.30, ours_a), "seed1": (0.32, ours_b)}), ("mostpop", {"seed0": (0.1, None)})):
        for name, (value, per_user) in runs.items():
            _run(base / model / "split0" / name, value, per_user)
        (base / model / "split0" / "grid.json").write_text(json.dumps({
            "model": model, "dataset": "toy", "split": "random_ratio", "select": "ndcg@20",
            "grid_points": 2 if model == "ials" else 1, "settings": {"l2": 0.01} if model == "ials" else {},
            "runs": list(runs)}))
    theirs = [0.1, 0.2, 0.1, 0.3]
    _run(tmp_path / "paper/runs/m/seed0", 0.2, theirs)
    grids = sorted(tmp_path.glob("baselines/strong/**/grid.json"))
    protocols = {"toy/random_ratio": {"metrics": ["ndcg@20"],
                                      "paper_method": {"method": "m", "runs": "paper/runs/m"}}}
    frame = strong_table(grids, protocols, results_root=tmp_path, out_md=tmp_path / "t.md",
                         out_csv=tmp_path / "t.csv", title="toy")
    ials = frame.set_index("method").loc["ials"]
    assert ials["mean"] == pytest.approx(0.31) and ials["sd"] == pytest.approx(np.std([0.30, 0.32], ddof=1))
    assert ials["n_seeds"] == 2 and ials["paper_mean"] == pytest.approx(0.2)
    assert not ials["covers_seeds"]   # a seeded model's two runs are two seeds, nothing more
    expected_p = stats.ttest_rel((np.array(ours_a) + ours_b) / 2, theirs).pvalue
    assert ials["p_value"] == pytest.approx(expected_p)
    mostpop = frame.set_index("method").loc["mostpop"]
    assert pd.isna(mostpop["p_value"]) and "baseline" in mostpop["p_note"]
    md = (tmp_path / "t.md").read_text()
    assert "**0.3100 ± 0.0141 (2)**" in md and "settings" in md
    csv = pd.read_csv(tmp_path / "t.csv")
    for column in ("dataset", "split", "method", "settings", "budget", "metric", "mean", "sd", "n_seeds",
                   "paper_method", "paper_mean", "p_value"):
        assert column in csv.columns
    # a list of the paper's methods in preference order: the first with records is compared
    preferred = {"toy/random_ratio": {"metrics": ["ndcg@20"], "paper_method": [
        {"method": "m_tuned", "runs": "paper/runs/m_tuned"}, {"method": "m", "runs": "paper/runs/m"}]}}
    frame = strong_table(grids, preferred, results_root=tmp_path, out_md=tmp_path / "t.md",
                         out_csv=tmp_path / "t.csv", title="toy")
    assert set(frame["paper_method"]) == {"m"} and frame["paper_mean"].iloc[0] == pytest.approx(0.2)
    _run(tmp_path / "paper/runs/m_tuned/seed0", 0.25, theirs)
    _run(tmp_path / "paper/runs/m_tuned/seed1", 0.35, theirs)
    frame = strong_table(grids, preferred, results_root=tmp_path, out_md=tmp_path / "t.md",
                         out_csv=tmp_path / "t.csv", title="toy")
    assert set(frame["paper_method"]) == {"m_tuned"} and frame["paper_mean"].iloc[0] == pytest.approx(0.30)
    assert frame["paper_n_seeds"].iloc[0] == 2
    # a configured model with no record shows as not run; one run on fewer splits than configured says so
    configured = {"toy/random_ratio": {**protocols["toy/random_ratio"], "models": ["mostpop", "ials", "ease"],
                                       "split_seeds": [0, 1]}}
    frame = strong_table(grids, configured, results_root=tmp_path, out_md=tmp_path / "t.md",
                         out_csv=tmp_path / "t.csv", title="toy").set_index("method")
    assert frame.loc["ease", "budget"] == "not run" and frame.loc["ease", "n_seeds"] == 0
    assert pd.isna(frame.loc["ease", "mean"]) and frame.loc["ease", "paper_mean"] == pytest.approx(0.2)
    assert frame.loc["ials", "budget"].endswith("(1 of 2 splits run)")
    assert "| ndcg@20 | ease |  | not run | not run | m |" in (tmp_path / "t.md").read_text()
    assert not frame.loc["ease", "covers_seeds"]

    # the paper's method compared on another part than its record's (exADMM's fixture records validation and
    # compares test): the paired test reads that part's own per-user rows, never the record's
    exadmm = tmp_path / "paper/runs/x/seed0"
    _run(exadmm, 0.9, [0.9, 0.9, 0.9, 0.9])  # the record: validation, another set of values
    (exadmm / "test.json").write_text(json.dumps({"overall": {"ndcg@20": 0.2}}))
    (exadmm / "provenance.json").write_text(json.dumps({"config": {"target": "validation_te"}}))
    on_part = {"toy/random_ratio": {"metrics": ["ndcg@20"],
                                    "paper_method": {"method": "x", "runs": "paper/runs/x", "part": "test"}}}
    frame = strong_table(grids, on_part, results_root=tmp_path, out_md=tmp_path / "t.md",
                         out_csv=tmp_path / "t.csv", title="toy").set_index("method")
    assert frame.loc["ials", "paper_mean"] == pytest.approx(0.2) and pd.isna(frame.loc["ials", "p_value"])
    assert frame.loc["ials", "p_note"] == "per-user rows of the paper's method's test part not kept"
    pd.DataFrame({"user": np.arange(4), "ndcg@20": theirs}).to_parquet(exadmm / "test_per_user.parquet")
    frame = strong_table(grids, on_part, results_root=tmp_path, out_md=tmp_path / "t.md",
                         out_csv=tmp_path / "t.csv", title="toy").set_index("method")
    assert frame.loc["ials", "p_value"] == pytest.approx(expected_p)
    # a record that is of the compared part already serves as it is
    (exadmm / "test_per_user.parquet").unlink()
    (exadmm / "provenance.json").write_text(json.dumps({"config": {"target": "test_te"}}))
    _run(exadmm, 0.2, theirs)
    frame = strong_table(grids, on_part, results_root=tmp_path, out_md=tmp_path / "t.md",
                         out_csv=tmp_path / "t.csv", title="toy").set_index("method")
    assert frame.loc["ials", "p_value"] == pytest.approx(expected_p)


def test_tune_and_test_on_a_synthetic_split(tmp_path):
    from conftest import build_synthetic_split
    from recrepro.datasets.synthetic import SyntheticSpec
    from recrepro.io import read_json
    from recrepro.baselines.strong import tune_and_test

    split = build_synthetic_split(tmp_path / "s", SyntheticSpec(seed=3, users=80, items=50, min_user_interactions=5),
                                  "prism", 5, "random_ratio", 123)
    evaluation = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test", "ks": [20]}
    out = tune_and_test(split_dir=split, model="itemknn", grid={"k": [5, 20]}, fixed={"shrink": 0.0},
                        evaluation=evaluation, select="ndcg@20", seeds=[0, 1], out_dir=tmp_path / "out",
                        meta={"dataset": "synthetic", "protocol": "prism", "split": "random_ratio", "tier": "smoke"})
    scores = [p["val:ndcg@20"] for p in out["points"]]
    assert out["pick"] == pick_point(scores) and out["runs"] == ["seed0"]  # deterministic: one run
    record = read_json(tmp_path / "out/seed0/metrics.json")
    assert record["settings"] == out["settings"] and record["method"] == "itemknn"
    assert read_json(tmp_path / "out/grid.json")["grid_points"] == 2


def test_rule_helpers_read_the_config(repo_root):
    from recrepro.baselines import strong as strong
    from recrepro.config import load_config

    config = load_config(repo_root / "config.yaml")
    assert set(strong.papers(config, "smoke")) == set(data_protocol_keys())
    lastfm = strong.tune_params(config, "paper", "hetrec2011-lastfm-2k", "fedrap", "leave_one_out", "ease")
    assert lastfm["fixed"] == {"dtype": "float32"} and lastfm["select"] == "hr@10" and lastfm["seeds"] == "0,1,2"
    assert lastfm["evaluation"] == config["evaluation"]["splits"]["leave_one_out"]  # a name resolves to its section
    knn = strong.tune_params(config, "paper", "hetrec2011-lastfm-2k", "fedrap", "leave_one_out", "itemknn")
    assert len(expand_grid(knn["grid"], knn["fixed"])) == 20  # the tier's grid where the protocol has none
    grids = strong.grid_records(config, "paper", "prism")
    # 5 models x 3 split seeds of PRISM's random split, then 5 on the LightGCN release's split
    assert len(grids) == 5 * 3 + 5 and all(g.endswith("grid.json") for g in grids)
    assert sum("/given/lightgcn_given_val/" in g for g in grids) == 5
    with pytest.raises(ValueError, match="no strong_baselines protocol"):
        strong.protocol_entry(config, "paper", "ml-100k", "prism", "random_ratio")


def test_a_protocol_fitting_test_on_train_and_validation_tunes_on_train_and_refits_the_pick(tmp_path, monkeypatch):
    import recrepro.baselines.strong as strong
    from conftest import build_synthetic_split
    from recrepro.datasets.synthetic import SyntheticSpec
    from recrepro.evaluation.on_split import SplitData

    split = build_synthetic_split(tmp_path / "s", SyntheticSpec(seed=3, users=80, items=50, min_user_interactions=5),
                                  "prism", 5, "random_ratio", 123)
    fitted_on = []
    real = strong.make_model

    def spy(model, settings, seed, device):
        m = real(model, settings, seed, device)
        fit = m.fit
        m.fit = lambda x: (fitted_on.append(x.nnz), fit(x))[1]
        return m

    monkeypatch.setattr(strong, "make_model", spy)
    evaluation = {"mode": "full", "fit": ["train", "validation"], "exclude": ["train", "validation"],
                  "target": "test", "ks": [20]}
    assert strong.validation_section(evaluation)["fit"] == ["train"]
    out = strong.tune_and_test(split_dir=split, model="itemknn", grid={"k": [5, 20]}, fixed={"shrink": 0.0},
                               evaluation=evaluation, select="ndcg@20", seeds=[0], out_dir=tmp_path / "out",
                               meta={"dataset": "synthetic", "protocol": "prism", "split": "random_ratio", "tier": "smoke"})
    data = SplitData(split)
    n_train, n_both = data.csr(["train"]).nnz, data.csr(["train", "validation"]).nnz
    assert n_both > n_train
    # two grid points fitted on train, then the pick refitted on train + validation for test
    assert fitted_on == [n_train, n_train, n_both] and out["runs"] == ["seed0"]


def test_a_large_best_model_is_refitted_at_the_pick_not_kept_beside_the_next_fit(tmp_path, monkeypatch):
    """Keeping the grid's best EASE (6.7 GB on gowalla) while the next point fits doubled the job's
    peak memory (the kernel killed it); past KEEP_BEST_BYTES the pick is refitted, to the same record."""
    import recrepro.baselines.strong as strong
    from conftest import build_synthetic_split
    from recrepro.datasets.synthetic import SyntheticSpec
    from recrepro.io import read_json

    split = build_synthetic_split(tmp_path / "s", SyntheticSpec(seed=3, users=80, items=50, min_user_interactions=5),
                                  "prism", 5, "random_ratio", 123)
    evaluation = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test", "ks": [20]}
    fits = []
    real = strong.make_model

    def spy(model, settings, seed, device):
        m = real(model, settings, seed, device)
        fit = m.fit
        m.fit = lambda x: (fits.append(dict(settings)), fit(x))[1]
        return m

    monkeypatch.setattr(strong, "make_model", spy)

    def tune(out):
        return strong.tune_and_test(split_dir=split, model="ease", grid={"lam": [1.0, 100.0]}, fixed={},
                                    evaluation=evaluation, select="ndcg@20", seeds=[0], out_dir=tmp_path / out,
                                    meta={"dataset": "synthetic", "protocol": "prism", "split": "random_ratio",
                                          "tier": "smoke"})

    kept = tune("kept")
    assert len(fits) == 2  # the best of the two points tested as fitted
    monkeypatch.setattr(strong, "KEEP_BEST_BYTES", 0)  # any W is over it
    fits.clear()
    refitted = tune("refitted")
    assert len(fits) == 3 and fits[2] == refitted["settings"]
    assert refitted["settings"] == kept["settings"]
    a, b = read_json(tmp_path / "kept/seed0/metrics.json"), read_json(tmp_path / "refitted/seed0/metrics.json")
    assert a["overall"] == b["overall"]


def test_a_deterministic_models_one_run_per_split_stands_for_every_seed_once_every_split_ran(tmp_path):
    base = tmp_path / "baselines/strong/toy/p/loo"
    for split in ("split0", "split1"):
        _run(base / "ease" / split / "seed0", 0.4, None)
        (base / "ease" / split / "grid.json").write_text(json.dumps({
            "model": "ease", "dataset": "toy", "split": "loo", "select": "ndcg@20", "grid_points": 3,
            "settings": {"lam": 100.0}, "runs": ["seed0"], "deterministic": True}))
    _run(tmp_path / "paper/runs/m/seed0", 0.2, None)
    proto = {"metrics": ["ndcg@20"], "paper_method": {"method": "m", "runs": "paper/runs/m"}}
    one = [base / "ease/split0/grid.json"]
    frame = strong_table(one, {"toy/loo": proto}, results_root=tmp_path, out_md=tmp_path / "t.md",
                         out_csv=tmp_path / "t.csv", title="toy")
    assert frame["covers_seeds"].iloc[0] and frame["n_seeds"].iloc[0] == 1
    assert "0.4000 ± 0.0000 (1, deterministic: every seed)" in (tmp_path / "t.md").read_text()
    # two splits configured, one run: the run stands for one split's seeds only
    frame = strong_table(one, {"toy/loo": {**proto, "split_seeds": [0, 1]}}, results_root=tmp_path,
                         out_md=tmp_path / "t.md", out_csv=tmp_path / "t.csv", title="toy")
    assert not frame["covers_seeds"].iloc[0]
    both = sorted(base.glob("ease/*/grid.json"))
    frame = strong_table(both, {"toy/loo": {**proto, "split_seeds": [0, 1]}}, results_root=tmp_path,
                         out_md=tmp_path / "t.md", out_csv=tmp_path / "t.csv", title="toy")
    assert frame["covers_seeds"].iloc[0] and frame["n_seeds"].iloc[0] == 2


def test_a_pick_on_its_grids_edge_is_flagged_per_split(tmp_path):
    from recrepro.baselines.strong import pick_edges

    base = tmp_path / "baselines/strong/toy/p/rr"
    grid = {"alpha": [0.5, 1.0], "k": [50, 200]}
    points = [{"point": i, "settings": {"alpha": a, "k": k, "block": 8}}
              for i, (a, k) in enumerate((a, k) for a in grid["alpha"] for k in grid["k"])]
    picks = {"split0": {"alpha": 0.5, "k": 200, "block": 8}, "split1": {"alpha": 0.5, "k": 50, "block": 8}}
    for split, settings in picks.items():
        _run(base / "rp3beta" / split / "seed0", 0.3, None)
        (base / "rp3beta" / split / "grid.json").write_text(json.dumps({
            "model": "rp3beta", "dataset": "toy", "split": "rr", "select": "ndcg@20", "grid_points": 4,
            "grid": grid, "points": points, "settings": settings, "runs": ["seed0"], "deterministic": True}))
    grids = sorted(base.glob("rp3beta/*/grid.json"))
    loaded = [(g, json.loads(g.read_text())) for g in grids]
    # alpha is at its smallest on both splits; k at its largest on one and its smallest on the other;
    # "block" was fixed (one value), never an edge
    assert pick_edges(loaded) == "alpha (smallest), k (largest) on 1 of 2 splits, k (smallest) on 1 of 2 splits"
    assert pick_edges(loaded[:1]) == "alpha (smallest), k (largest)"
    inside = {**loaded[0][1], "grid": {"alpha": [0.25, 0.5, 1.0]},
              "points": [{"settings": {"alpha": a}} for a in (0.25, 0.5, 1.0)], "settings": {"alpha": 0.5}}
    assert pick_edges([(grids[0], inside)]) == ""
    _run(tmp_path / "paper/runs/m/seed0", 0.2, None)
    frame = strong_table(grids, {"toy/rr": {"metrics": ["ndcg@20"], "paper_method": {"method": "m", "runs": "paper/runs/m"}}},
                         results_root=tmp_path, out_md=tmp_path / "t.md", out_csv=tmp_path / "t.csv", title="toy")
    assert frame["pick_edges"].iloc[0].startswith("alpha (smallest), k (largest) on 1 of 2 splits")
    assert "; pick on the grid's edge in alpha (smallest)" in frame["budget"].iloc[0]
    assert "a better point may lie beyond" in (tmp_path / "t.md").read_text()


@pytest.mark.parametrize("model, setting, searched, pick, expected", [
    ("itemknn", "shrink", [0.0, 10.0, 50.0], 0.0, ""),              # shrink 0 is the floor: nothing beyond
    ("itemknn", "shrink", [0.0, 10.0, 50.0], 50.0, "shrink (largest)"),
    ("itemknn", "shrink", [1.0, 10.0], 1.0, "shrink (smallest)"),     # 1 is no floor: 0.5 lies beyond
    ("rp3beta", "beta", [0.0, 0.2, 0.4], 0.0, ""),                   # β 0 is P³_α: a floor
    ("ease", "lam", [1.0, 10.0], 1.0, "lam (smallest)"),             # λ > 0: no floor
])
def test_a_pick_at_its_settings_floor_is_no_edge(tmp_path, model, setting, searched, pick, expected):
    from recrepro.baselines.strong import pick_edges

    grid = {"model": model, "grid": {setting: searched}, "settings": {setting: pick},
            "points": [{"settings": {setting: v}} for v in searched]}
    assert pick_edges([(tmp_path / "grid.json", grid)]) == expected


@pytest.mark.parametrize("model, settings", [("itemknn", {"shrink"}), ("rp3beta", {"beta"})])
def test_each_settings_floor_is_the_smallest_value_its_model_accepts(model, settings):
    from recrepro.baselines.strong import setting_floors

    floors = setting_floors(model)
    assert set(floors) == settings
    for setting, floor in floors.items():
        make_model(model, {setting: floor})                           # the floor itself is allowed
        with pytest.raises(ValueError):
            make_model(model, {setting: floor - 1e-9})                # below it the model refuses


def test_without_per_user_rows_the_test_pairs_the_splits(tmp_path):
    from scipy import stats

    # PRISM's protocol: one split per split seed, the paper's method's seed<k> trained on split k;
    # neither side keeps per-user rows
    base = tmp_path / "baselines/strong/toy/p/rr"
    ours, theirs = {1: 0.30, 2: 0.32, 3: 0.35}, {1: 0.28, 2: 0.31, 3: 0.31}
    for k, value in ours.items():
        _run(base / "rp3beta" / f"split{k}" / "seed0", value, None)
        (base / "rp3beta" / f"split{k}" / "grid.json").write_text(json.dumps({
            "model": "rp3beta", "dataset": "toy", "split": "rr", "select": "ndcg@20", "grid_points": 1,
            "settings": {}, "runs": ["seed0"], "deterministic": True}))
        _run(tmp_path / f"paper/runs/m/seed{k}", theirs[k], None)
    proto = {"toy/rr": {"metrics": ["ndcg@20"], "paper_method": {"method": "m", "runs": "paper/runs/m"},
                        "split_seeds": [1, 2, 3]}}
    grids = sorted(base.glob("rp3beta/*/grid.json"))
    frame = strong_table(grids, proto, results_root=tmp_path, out_md=tmp_path / "t.md", out_csv=tmp_path / "t.csv",
                         title="toy")
    expected = stats.ttest_rel([0.30, 0.32, 0.35], [0.28, 0.31, 0.31]).pvalue
    assert frame["p_value"].iloc[0] == pytest.approx(expected)
    assert frame["p_note"].iloc[0].startswith("paired t-test over 3 splits")
    # one split in common: no test, and the note still says why not over users
    frame = strong_table(grids[:1], proto, results_root=tmp_path, out_md=tmp_path / "t.md",
                         out_csv=tmp_path / "t.csv", title="toy")
    assert pd.isna(frame["p_value"].iloc[0]) and "not kept" in frame["p_note"].iloc[0]
    # and the paper's method beside it is its run on that split, not its mean over all three
    assert frame["paper_mean"].iloc[0] == pytest.approx(0.28) and frame["paper_n_seeds"].iloc[0] == 1


def test_every_committed_strong_run_keeps_the_per_user_rows_its_protocol_keeps():
    """A run record whose per-user rows `.gitignore` keeps must carry them: without them the table's
    paired test is blank ("no per-user rows of the baseline") where it could be computed."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    runs = sorted(p.parent for p in (root / "results/paper/baselines/strong").glob("*/*/*/*/split*/seed*/metrics.json"))
    if not runs:
        pytest.skip("no committed strong-baseline records")
    wanted = [r / "per_user.parquet" for r in runs]
    # git check-ignore prints the ignored ones (exit 1 when none is): the others are kept
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=root, text=True,
                             input="\n".join(str(p.relative_to(root)) for p in wanted), capture_output=True).stdout
    kept = [p for p in wanted if str(p.relative_to(root)) not in set(ignored.split())]
    assert kept, "no protocol keeps per-user rows: the .gitignore rules changed"
    missing = [str(p.relative_to(root)) for p in kept if not p.is_file()]
    assert not missing, f"kept per-user rows missing (rerun their grid jobs): {missing}"


def test_an_ease_job_asks_for_its_items_by_items_matrix():
    """The job's memory request was the evaluation's alone (2.1 GB on gowalla) while EASE's fit holds
    a 6.7 GB matrix: 1.5 x items² x the dtype's bytes on top, nothing for the other models."""
    from recrepro.runtime.resources import DatasetSize, estimate
    from recrepro.baselines.strong import fit_memory_mb

    assert fit_memory_mb("ease", {"dtype": "float32"}, 40_981) == pytest.approx(9609.85, abs=0.01)
    assert fit_memory_mb("ease", {}, 1_000) == pytest.approx(11.44, abs=0.01)  # float64 by default
    assert fit_memory_mb("itemknn", {}, 40_981) == 0.0 and fit_memory_mb("ials", None, 40_981) == 0.0
    size = DatasetSize(29_858, 40_981, 1_027_370)
    plain = estimate("evaluate", size)["mem_mb"]
    with_ease = estimate("evaluate", size, extra_mb=fit_memory_mb("ease", {"dtype": "float32"}, 40_981))["mem_mb"]
    assert with_ease - plain == pytest.approx(9610, abs=100)


def test_a_grid_killed_midway_resumes_from_its_ledger_and_scores_only_the_rest(tmp_path, monkeypatch):
    """EASE on gowalla takes ~12 CPU-minutes a point: a job killed at its third point keeps the two
    scored; started again it fits only the rest (and the pick, if a kept point won), to the same grid."""
    import recrepro.baselines.strong as strong
    from conftest import build_synthetic_split
    from recrepro.datasets.synthetic import SyntheticSpec
    from recrepro.io import read_json

    split = build_synthetic_split(tmp_path / "s", SyntheticSpec(seed=3, users=80, items=50, min_user_interactions=5),
                                  "prism", 5, "random_ratio", 123)
    evaluation = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test", "ks": [20]}
    fits, fail_at = [], []
    real = strong.make_model

    def spy(model, settings, seed, device):
        m = real(model, settings, seed, device)
        fit = m.fit

        def counted(x):
            if fail_at and len(fits) == fail_at[0]:
                raise KeyboardInterrupt("killed")
            fits.append(settings["lam"])
            return fit(x)
        m.fit = counted
        return m

    monkeypatch.setattr(strong, "make_model", spy)
    ledger = tmp_path / "ckpt" / "points.json"

    def tune(out, grid=(0.5, 5.0, 50.0), checkpoint=ledger):
        return strong.tune_and_test(split_dir=split, model="ease", grid={"lam": list(grid)}, fixed={},
                                    evaluation=evaluation, select="ndcg@20", seeds=[0], out_dir=tmp_path / out,
                                    meta={"dataset": "synthetic", "protocol": "prism", "split": "random_ratio",
                                          "tier": "smoke"}, checkpoint=checkpoint)

    whole = tune("whole", checkpoint=None)
    assert fits == [0.5, 5.0, 50.0] and "resumed_points" not in whole
    fits.clear()
    fail_at.append(2)
    with pytest.raises(KeyboardInterrupt):
        tune("resumed")
    assert fits == [0.5, 5.0] and [r["point"] for r in read_json(ledger)["rows"]] == [0, 1]
    assert not (tmp_path / "resumed/grid.json").exists()
    fits.clear()
    fail_at.clear()
    resumed = tune("resumed")
    assert fits[0] == 50.0 and resumed["resumed_points"] == [0, 1]
    # the pick is refitted unless it is the point fitted in this run (then its fit is kept)
    assert fits[1:] == ([] if resumed["pick"] == 2 else [resumed["settings"]["lam"]])
    assert [p["val:ndcg@20"] for p in resumed["points"]] == [p["val:ndcg@20"] for p in whole["points"]]
    assert resumed["pick"] == whole["pick"]
    assert read_json(tmp_path / "resumed/seed0/metrics.json")["overall"] == \
        read_json(tmp_path / "whole/seed0/metrics.json")["overall"]
    assert not ledger.exists()  # removed once grid.json is written
    # a ledger of another grid is not reused: every point is fitted again
    fits.clear()
    fail_at.append(1)
    with pytest.raises(KeyboardInterrupt):
        tune("other")
    fail_at.clear()
    fits.clear()
    other = tune("other", grid=(0.5, 7.0))
    assert fits[:2] == [0.5, 7.0] and "resumed_points" not in other


def test_a_published_reference_is_printed_under_its_protocol_and_kept_out_of_the_csv(tmp_path):
    base = tmp_path / "baselines/strong/toy/p/given_split/mostpop/split0"
    _run(base / "seed0", 0.1, None)
    (base / "grid.json").write_text(json.dumps({
        "model": "mostpop", "dataset": "toy", "split": "given_split", "select": "ndcg@20", "grid_points": 1,
        "settings": {}, "runs": ["seed0"]}))
    refs = [{"dataset": "toy", "split": "given_split", "method": "GCN", "source": "Someone 2020, Table 3",
             "note": "same split", "values": {"recall_lgcn@20": 0.183, "ndcg@20": 0.1554}},
            {"dataset": "toy", "split": "other_split", "method": "Elsewhere", "source": "s", "note": "n",
             "values": {"ndcg@20": 0.9}}]
    frame = strong_table([base / "grid.json"], {"toy/given_split": {"metrics": ["ndcg@20"]}}, results_root=tmp_path,
                         out_md=tmp_path / "t.md", out_csv=tmp_path / "t.csv", title="toy", references=refs)
    md = (tmp_path / "t.md").read_text()
    assert ("Published reference, not run here (never judged): **GCN** recall_lgcn@20 0.1830, ndcg@20 0.1554 "
            "(Someone 2020, Table 3; same split).") in md
    assert "Elsewhere" not in md  # another split's reference stays out of this block
    assert frame["method"].tolist() == ["mostpop"] and "GCN" not in (tmp_path / "t.csv").read_text()


def test_the_packaged_references_are_valid_and_name_a_configured_protocol(repo_root, tmp_path):
    from recrepro.baselines import strong as strong
    from recrepro.config import load_config

    config = load_config(repo_root / "config.yaml")
    refs = strong.load_references()
    assert refs, "expected/strong.yaml holds LightGCN's Table 3 row for gowalla"
    protocols = {(p["dataset"], p["split"]): p for p in strong.tier_block(config, "paper")["protocols"]}
    for ref in refs:  # a typo in dataset or split would hide the row silently
        assert (ref["dataset"], ref["split"]) in protocols, ref
        metrics = protocols[(ref["dataset"], ref["split"])]["metrics"]
        assert set(ref["values"]) <= set(metrics), "a reference's metric the table does not report"
    bad = tmp_path / "strong.yaml"
    bad.write_text("references:\n  - {dataset: gowalla, split: x, method: M, source: s, note: n, values: {ndcg@20: high}}\n")
    with pytest.raises(strong.ReferencesError, match=r"references\[0\].*'values'"):
        strong.load_references(bad)
    bad.write_text("references:\n  - {dataset: gowalla, split: x, values: {ndcg@20: 0.1}}\n")
    with pytest.raises(strong.ReferencesError, match="needs exactly the keys"):
        strong.load_references(bad)


def test_a_point_ledger_is_dropped_for_other_code_and_held_by_one_process(tmp_path, monkeypatch):
    """Like a training checkpoint: points scored by other model code are not mixed in, and a second
    job on the same grid stops at once instead of scoring the same points beside the first."""
    import subprocess
    import sys

    import recrepro.runtime.checkpoints as checkpoints
    from recrepro.baselines.strong import PointLedger

    path = tmp_path / "split0.points.json"
    key = {"model": "ease", "points": [{"lam": 1.0}]}
    ledger = PointLedger(path, key)
    ledger.add({"point": 0, "settings": {"lam": 1.0}, "val:ndcg@20": 0.5})
    assert PointLedger(path, key).row(0)["val:ndcg@20"] == 0.5  # same code: reused (same process: re-entrant lock)
    other = subprocess.run([sys.executable, "-c", "import sys; from recrepro.baselines.strong import PointLedger; "
                            f"PointLedger({str(path)!r}, {key!r})"], capture_output=True, text=True)
    assert other.returncode != 0 and "CheckpointLockedError" in other.stderr and "another process" in other.stderr
    real = checkpoints.code_fingerprint
    monkeypatch.setattr(checkpoints, "code_fingerprint", lambda: {**real(), "source_sha256": "edited"})
    assert PointLedger(path, key).row(0) is None  # other code: the grid starts again
    ledger.remove()
    assert not path.exists() and not checkpoints.lock_path(path).exists()


def test_the_walk_past_an_edge_by_hand():
    from recrepro.baselines.grid import beyond_edges, check_beyond

    grid = [{"alpha": a, "k": k} for a in (0.5, 1.0) for k in (50, 200)]
    beyond = {"alpha": [0.1, 0.25, 1.5], "k": [20, 500, 1000]}
    # picked at (0.5, 200): the smallest alpha and the largest k; one step out on each, the rest held
    scores = [0.1, 0.4, 0.2, 0.3]
    assert beyond_edges(grid, scores, beyond) == [{"alpha": 0.25, "k": 200}, {"alpha": 0.5, "k": 500}]
    # the step on k won: k walks on to 1000; alpha (0.25 scored and lost) is inside its searched range now
    walked = grid + [{"alpha": 0.25, "k": 200}, {"alpha": 0.5, "k": 500}]
    assert beyond_edges(walked, scores + [0.35, 0.45], beyond) == [{"alpha": 0.5, "k": 1000}]
    # the list ends: the pick stays on the edge, and nothing more is scored
    assert beyond_edges(walked + [{"alpha": 0.5, "k": 1000}], scores + [0.35, 0.45, 0.5], beyond) == []
    # inside the grid on every walked setting: no step; no beyond list: no step
    assert beyond_edges(grid + [{"alpha": 0.75, "k": 100}], scores + [0.9], beyond) == []
    assert beyond_edges(grid, scores, {}) == [] and beyond_edges(grid, scores, None) == []
    # a setting the grid holds at one value is no edge, as in grid_edges
    assert beyond_edges([{"lam": 1.0, "k": 5}, {"lam": 2.0, "k": 5}], [0.2, 0.1], {"k": [10]}) == []
    check_beyond({"lam": [1.0, 10.0]}, {"lam": [0.1, 100.0]})
    with pytest.raises(ValueError, match="outside the grid's 1..10"):
        check_beyond({"lam": [1.0, 10.0]}, {"lam": [5.0, 100.0]})
    with pytest.raises(ValueError, match="does not search"):
        check_beyond({"lam": [1.0, 10.0]}, {"k": [5]})


def _walk_spies(monkeypatch, best_k):
    """Validation ndcg@20 of an ItemKNN point made -(log k - log best_k)²: hand-checkable picks."""
    import math

    import recrepro.baselines.strong as strong

    current, fits = {}, []
    real_make, real_eval = strong.make_model, strong._evaluate

    def make(model, settings, seed, device):
        current.update(settings)
        fits.append(settings["k"])
        return real_make(model, settings, seed, device)

    def evaluate(model, split, evaluation, device, batch_size):
        result = real_eval(model, split, evaluation, device, batch_size)
        if evaluation["target"] == "validation":
            result.overall["ndcg@20"] = -(math.log(current["k"]) - math.log(best_k)) ** 2
        return result

    monkeypatch.setattr(strong, "make_model", make)
    monkeypatch.setattr(strong, "_evaluate", evaluate)
    return fits


@pytest.mark.parametrize("beyond, best_k, walked, pick, edges", [
    ({"k": [1, 2, 40]}, 30, [40], 40, "k (largest)"),        # one step out, then the list ends
    ({"k": [1, 2, 25, 40]}, 30, [25, 40], 25, ""),           # out until the pick is inside
    ({"k": [1, 2, 25, 40]}, 3, [2, 1], 2, ""),               # down the other side
    ({}, 30, [], 20, "k (largest)"),                         # no list: the grid alone
])
def test_tune_and_test_walks_past_the_edge_and_the_table_names_the_points(tmp_path, monkeypatch, beyond, best_k,
                                                                          walked, pick, edges):
    import recrepro.baselines.strong as strong
    from conftest import build_synthetic_split
    from recrepro.datasets.synthetic import SyntheticSpec
    from recrepro.io import read_json

    split = build_synthetic_split(tmp_path / "s", SyntheticSpec(seed=3, users=80, items=50, min_user_interactions=5),
                                  "prism", 5, "random_ratio", 123)
    fits = _walk_spies(monkeypatch, best_k)
    evaluation = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test", "ks": [20]}
    meta = {"dataset": "synthetic", "protocol": "prism", "split": "random_ratio", "tier": "smoke"}
    out = strong.tune_and_test(split_dir=split, model="itemknn", grid={"k": [5, 20]}, fixed={"shrink": 0.0},
                               evaluation=evaluation, select="ndcg@20", seeds=[0], out_dir=tmp_path / "out",
                               meta=meta, beyond=beyond)
    assert [p["settings"]["k"] for p in out["points"]] == [5, 20, *walked]
    assert [p.get("beyond", False) for p in out["points"]] == [False, False] + [True] * len(walked)
    assert out["settings"]["k"] == pick and out["grid_points"] == 2 + len(walked)
    assert out.get("beyond_points", 0) == len(walked) and out.get("beyond", {}) == beyond
    assert fits[:2 + len(walked)] == [5, 20, *walked]
    grid = read_json(tmp_path / "out/grid.json")
    assert strong.pick_edges([(tmp_path / "out/grid.json", grid)]) == edges
    assert read_json(tmp_path / "out/seed0/provenance.json")["config"].get("beyond", {}) == beyond
    assert strong._points_text(grid) == "2-point grid" + (
        f" and {len(walked)} point{'' if len(walked) == 1 else 's'} past its edges" if walked else "")


def test_a_walk_killed_midway_resumes_from_its_ledger(tmp_path, monkeypatch):
    import recrepro.baselines.strong as strong
    from conftest import build_synthetic_split
    from recrepro.datasets.synthetic import SyntheticSpec
    from recrepro.io import read_json

    split = build_synthetic_split(tmp_path / "s", SyntheticSpec(seed=3, users=80, items=50, min_user_interactions=5),
                                  "prism", 5, "random_ratio", 123)
    fits = _walk_spies(monkeypatch, 30)
    evaluation = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test", "ks": [20]}
    meta = {"dataset": "synthetic", "protocol": "prism", "split": "random_ratio", "tier": "smoke"}
    ledger = tmp_path / "points.json"
    real_make = strong.make_model

    def dies_at_40(model, settings, seed, device):
        if settings["k"] == 40:
            raise KeyboardInterrupt("killed")
        return real_make(model, settings, seed, device)

    monkeypatch.setattr(strong, "make_model", dies_at_40)
    kwargs = dict(split_dir=split, model="itemknn", grid={"k": [5, 20]}, fixed={"shrink": 0.0}, evaluation=evaluation,
                  select="ndcg@20", seeds=[0], out_dir=tmp_path / "out", meta=meta, beyond={"k": [25, 40]},
                  checkpoint=ledger)
    with pytest.raises(KeyboardInterrupt):
        strong.tune_and_test(**kwargs)
    assert [r["settings"]["k"] for r in read_json(ledger)["rows"]] == [5, 20, 25]
    monkeypatch.undo()
    fits = _walk_spies(monkeypatch, 30)
    out = strong.tune_and_test(**kwargs)
    assert out["resumed_points"] == [0, 1, 2] and fits[0] == 40  # only the walk's last step is fitted again
    assert [p["settings"]["k"] for p in out["points"]] == [5, 20, 25, 40] and out["settings"]["k"] == 25
