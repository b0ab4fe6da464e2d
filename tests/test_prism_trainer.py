"""PRISM trainer and drivers on a tiny planted dataset (fast), plus gowalla checks (realdata)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from recrepro.papers.prism import trainer as T
from recrepro.papers.prism.tables import table_prism
from recrepro.records import NonFiniteError


def _planted(n_users=60, n_items=40, seed=0):
    rng = np.random.default_rng(seed)
    groups_u = rng.integers(0, 4, n_users)
    groups_i = np.arange(n_items) % 4
    dense = (groups_u[:, None] == groups_i[None, :]) & (rng.random((n_users, n_items)) < 0.7)
    rows, cols = np.nonzero(dense)
    perm = rng.permutation(rows.size)
    cut = int(0.8 * rows.size)
    tr, va = perm[:cut], perm[cut:]
    mk = lambda idx: sp.csr_matrix((np.ones(idx.size, np.float32), (rows[idx], cols[idx])), shape=(n_users, n_items))
    return mk(tr), mk(va)


def test_trainer_learns_and_restores_best_epoch():
    train, val = _planted()
    settings = T.TrainSettings(loss="bpr", dim=8, lr=0.05, epochs=8, patience=3, batch_size=256, seed=1,
                               fused_adam=False)
    net, history = T.train(train, val, settings)
    assert len(history["val_ndcg"]) == history["epochs_run"] == len(history["epoch_seconds"])
    assert history["best_epoch"] == int(np.argmax(history["val_ndcg"])) + 1
    # the restored net scores exactly the best validation value
    restored = T.validation_ndcg(net, train, val, 20, 1024, "cpu")
    assert restored == pytest.approx(max(history["val_ndcg"]), abs=1e-9)
    # planted structure: far above random (random NDCG@20 on 40 items with ~3 targets is about 0.2)
    assert restored > 0.5


def test_early_stopping_stops_after_patience():
    train, val = _planted()
    settings = T.TrainSettings(loss="directau", dim=8, lr=1e-6, epochs=50, patience=2, batch_size=512, seed=0,
                               fused_adam=False)
    _, history = T.train(train, val, settings)
    # a negligible lr cannot keep improving: the run stops long before 50 epochs,
    # exactly `patience` epochs after the best one
    assert history["epochs_run"] < 50
    assert history["epochs_run"] == history["best_epoch"] + 2


def test_nan_loss_is_recorded_as_divergence_with_where(monkeypatch):
    train, val = _planted()

    def nan_loss(net, users, items, negs, settings, margins=None, item_degree=None):
        return net.user_emb.sum() * float("nan")

    monkeypatch.setattr(T, "batch_loss", nan_loss)
    _, history = T.train(train, val, T.TrainSettings(loss="bpr", dim=4, epochs=2, fused_adam=False))
    assert history["diverged"]["epoch"] == 1 and "training loss at epoch 1" in history["diverged"]["error"]
    assert history["epochs_run"] == 0 and history["best_val_ndcg"] is None


def test_a_run_that_blows_up_keeps_its_best_epoch_before_and_is_never_picked(monkeypatch, tmp_path):
    import torch

    train, val = _planted()
    real = T._train_epoch

    def blow_up_in_epoch_3(net, optimizer, *args):
        loss = real(net, optimizer, *args)
        if args[-1] == 3:
            with torch.no_grad():
                for p in net.parameters():
                    p.fill_(float("inf"))
        return loss

    monkeypatch.setattr(T, "_train_epoch", blow_up_in_epoch_3)
    settings = T.TrainSettings(loss="bpr", dim=8, lr=0.05, epochs=8, patience=5, batch_size=256, seed=1,
                               fused_adam=False)
    net, history = T.train(train, val, settings)
    assert history["diverged"]["epoch"] == 3 and "embeddings at epoch 3" in history["diverged"]["error"]
    assert history["epochs_run"] == 2 and history["best_epoch"] in (1, 2)
    # the restored model is the best validated one before the blow-up, finite
    assert T.validation_ndcg(net, train, val, 20, 1024, "cpu") == pytest.approx(history["best_val_ndcg"], abs=1e-9)
    # the selection never picks a diverged point, though it counts as searched
    from recrepro.papers.prism.tables import select_weight_decay

    _fake_run(tmp_path, "mf_directau_wd0", 0, 0.20, 0.2)
    _fake_run(tmp_path, "mf_directau_wd1em6", 0, 0.30, 0.3, extra={"diverged": {"epoch": 4, "error": "NaN"}})
    chosen = select_weight_decay(sorted((tmp_path / "runs").glob("*/seed0")), backbones=["mf"], losses=["directau"],
                                 weight_decays=[0.0, 1e-6])
    assert chosen["chosen"]["mf_directau"] == "mf_directau_wd0" and chosen["candidates"]["mf_directau"] == 2


@pytest.mark.parametrize("backbone,loss", [("nlmf", "ssm"), ("lightgcn", "directau"), ("mf", "mawu")])
def test_other_backbones_and_losses_run(backbone, loss):
    train, val = _planted()
    settings = T.TrainSettings(backbone=backbone, loss=loss, dim=8, lr=0.01, epochs=2, patience=2, batch_size=256,
                               n_negatives=10, seed=0, alpha=1.0, fused_adam=False)
    net, history = T.train(train, val, settings)
    assert history["epochs_run"] == 2 and all(np.isfinite(history["val_ndcg"]))


def test_prism_init_formula_and_spearman_one_in_trainer():
    train, _ = _planted()
    settings = T.TrainSettings(loss="directau", dim=8, epochs=1, alpha=1.0, fused_adam=False)
    from recrepro.models.backbones import build_net

    net = build_net("mf", *train.shape, 8, 0)
    deg = np.bincount(train.indices, minlength=train.shape[1])
    net.apply_prism(np.diff(train.indptr), deg, settings.alpha)
    norms = net.item_emb.detach().norm(dim=1).numpy()
    np.testing.assert_allclose(norms, np.log(deg + 2.0), rtol=1e-6)
    # magnitude is a non-decreasing function of degree (Spearman 1 up to float32 ties)
    order = np.argsort(deg, kind="stable")
    assert np.all(np.diff(norms[order]) >= -1e-6)
    assert stats.spearmanr(deg, norms).statistic > 0.99


def _fake_run(root, method, seed, val, test, extra=None):
    """A PRISM run record with a given validation (history) and test (metrics) NDCG@20."""
    import json

    d = root / "runs" / method / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({"dataset": "toy", "split": "random_ratio", "method": method,
                                                "seed": seed, "tier": "smoke", "overall": {"ndcg@20": test},
                                                "strata": {}, **(extra or {})}))
    (d / "history.json").write_text(json.dumps({"best_val_ndcg": val, "best_epoch": 3, "seconds_per_epoch": 1.0}))
    return d


def test_table_picks_tuned_wd_on_validation_not_test(tmp_path):
    import json

    def run(method, seed, val, test):
        return _fake_run(tmp_path, method, seed, val, test)

    dirs = [run("mf_directau_wd0", s, 0.10, 0.30) for s in (1, 2)]
    dirs += [run("mf_directau_wd1em6", s, 0.20, 0.20) for s in (1, 2)]  # best validation, worse test
    dirs += [run("mf_directau_prism", 1, 0.0, 0.25), run("mf_directau_prism", 2, 0.0, 0.27)]
    frame = table_prism(dirs, tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "tuned", tier="smoke",
                        dataset="toy", backbones=["mf"], losses=["directau"], weight_decays=[0.0, 1e-6])
    row = frame.iloc[0]
    assert row["tuned_weight_decay"] == 1e-6
    assert row["tuned_ndcg_mean"] == pytest.approx(0.20)
    assert row["prism_ndcg_mean"] == pytest.approx(0.26)
    # relative to PRISM, as the paper's % Diff: (0.26 - 0.20) / 0.26
    assert row["pct_diff"] == pytest.approx(100 * 0.06 / 0.26)
    copied = json.loads((tmp_path / "tuned" / "mf_directau_tunedwd" / "seed1" / "metrics.json").read_text())
    assert copied["method"] == "mf_directau_tunedwd" and copied["selected_method"] == "mf_directau_wd1em6"
    # an alias of an earlier pick on a seed the new pick has not run is gone, not averaged with the new one
    stale = tmp_path / "tuned" / "mf_directau_tunedwd" / "seed3"
    stale.mkdir()
    (stale / "metrics.json").write_text(json.dumps({"method": "mf_directau_tunedwd", "selected_method": "old"}))
    table_prism(dirs, tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "tuned", tier="smoke",
                dataset="toy", backbones=["mf"], losses=["directau"], weight_decays=[0.0, 1e-6])
    assert sorted(p.name for p in (tmp_path / "tuned" / "mf_directau_tunedwd").iterdir()) == ["seed1", "seed2"]


def test_first_seed_selection_picks_on_that_seed_and_table_averages_every_seed(tmp_path):
    """select_on first_seed: seed 1 prefers λ 0 on validation, seed 2 would prefer 1e-6; the pick is λ 0
    and the tuned column is λ 0's test mean over both seeds (hand-computed: (0.30 + 0.40) / 2)."""
    from recrepro.papers.prism.tables import select_weight_decay

    def run(method, seed, val, test):
        return _fake_run(tmp_path, method, seed, val, test)

    grid = [run("mf_ssm_wd0", 1, 0.30, 0.30), run("mf_ssm_wd1em6", 1, 0.20, 0.50)]
    selection = select_weight_decay(grid, backbones=["mf"], losses=["ssm"], weight_decays=[0.0, 1e-6])
    assert selection["chosen"] == {"mf_ssm": "mf_ssm_wd0"} and selection["seeds"] == [1]
    others = [run("mf_ssm_wd0", 2, 0.10, 0.40), run("mf_ssm_prism", 1, 0.0, 0.33), run("mf_ssm_prism", 2, 0.0, 0.37)]
    frame = table_prism(grid + others, tmp_path / "t.md", tmp_path / "t.csv", None, tier="smoke", dataset="toy",
                        backbones=["mf"], losses=["ssm"], weight_decays=[0.0, 1e-6], selection=selection)
    row = frame.iloc[0]
    assert row["tuned_weight_decay"] == 0.0 and row["n_seeds_tuned"] == 2
    assert row["tuned_ndcg_mean"] == pytest.approx(0.35)
    assert "on seed 1" in (tmp_path / "t.md").read_text()


def test_prism_row_without_its_grid_is_listed_with_the_tuned_side_empty(tmp_path):
    dirs = [_fake_run(tmp_path, "mf_ssm_prism", 1, 0.0, 0.25), _fake_run(tmp_path, "mf_directau_wd0", 1, 0.1, 0.3),
            _fake_run(tmp_path, "mf_directau_prism", 1, 0.0, 0.33)]
    selection = {"seeds": [1], "chosen": {"mf_directau": "mf_directau_wd0"}}
    frame = table_prism(dirs, tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "tuned", tier="paper", dataset="toy",
                        backbones=["mf"], losses=["ssm", "directau"], weight_decays=[0.0], selection=selection)
    assert list(frame["loss"]) == ["ssm", "directau"]
    assert np.isnan(frame.iloc[0]["tuned_ndcg_mean"]) and frame.iloc[0]["prism_ndcg_mean"] == pytest.approx(0.25)
    text = (tmp_path / "t.md").read_text()
    assert "| mf | ssm | – | – | 0.2500 | – | – | 3.0 |" in text
    assert "| mf | directau | 0 | 0.3000 | 0.3300 | +9.09% | 3.0 | 3.0 |" in text  # (0.33 - 0.30) / 0.33
    assert not (tmp_path / "tuned" / "mf_ssm_tunedwd").exists()


def test_pick_from_part_of_the_grid_is_named_as_a_cap(tmp_path):
    import json

    from recrepro.papers.prism.tables import select_weight_decay

    grid = [_fake_run(tmp_path, "nlmf_directau_wd0", 1, 0.06, 0.063)]
    selection = select_weight_decay(grid, backbones=["nlmf"], losses=["directau"], weight_decays=[0.0, 1e-6, 1e-4])
    frame = table_prism(grid, tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "tuned", tier="paper", dataset="toy",
                        backbones=["nlmf"], losses=["directau"], weight_decays=[0.0, 1e-6, 1e-4], selection=selection)
    assert frame.iloc[0]["n_weight_decays_run"] == 1
    assert "| nlmf | directau | 0 (1 of 3 λ run) | 0.0630 |" in (tmp_path / "t.md").read_text()
    alias = json.loads((tmp_path / "tuned" / "nlmf_directau_tunedwd" / "seed1" / "metrics.json").read_text())
    assert alias["budget"] == "tuned over 1 of 3 weight decays"


def test_diagnostic_backbone_rows_sit_under_the_table_and_pair_seeds(tmp_path):
    """nlmflinear on seed 1 only: listed under the table beside nlmf's seed-1 PRISM run (0.20, not the
    two-seed mean 0.25), and kept out of the CSV."""
    def run(method, seed, val, test):
        return _fake_run(tmp_path, method, seed, val, test)

    dirs = [run("nlmf_ssm_wd0", 1, 0.1, 0.1), run("nlmf_ssm_prism", 1, 0.0, 0.20), run("nlmf_ssm_prism", 2, 0.0, 0.30),
            run("nlmflinear_ssm_prism", 1, 0.0, 0.40)]
    frame = table_prism(dirs, tmp_path / "t.md", tmp_path / "t.csv", None, tier="smoke", dataset="toy",
                        backbones=["nlmf"], losses=["ssm"], weight_decays=[0.0], diagnostic_backbones=["nlmflinear"])
    assert list(frame["backbone"]) == ["nlmf"]
    text = (tmp_path / "t.md").read_text()
    assert "## Diagnostic runs" in text
    assert "| nlmflinear | ssm | 0.4000 | 0.2000 | 1 | 3.0 | 3.0 |" in text
    table_prism(dirs[:3], tmp_path / "u.md", tmp_path / "u.csv", None, tier="smoke", dataset="toy",
                backbones=["nlmf"], losses=["ssm"], weight_decays=[0.0], diagnostic_backbones=["nlmflinear"])
    assert "Diagnostic" not in (tmp_path / "u.md").read_text()


# ------------------------------------------------------------------------------- gowalla


@pytest.mark.realdata
def test_gowalla_prism_init_norms_exact(pipeline):
    from recrepro.models.mf import MFNet
    from recrepro.evaluation.on_split import SplitData

    _, split = pipeline
    data = SplitData(split("gowalla", "prism", "random_ratio", 123))
    train = data.csr(["train"])
    net = MFNet(data.n_users, data.n_items, 64, seed=123)
    user_deg = np.diff(train.indptr)
    item_deg = np.bincount(train.indices, minlength=data.n_items)
    net.apply_prism(user_deg, item_deg, 1.0)
    np.testing.assert_allclose(net.item_emb.detach().norm(dim=1).numpy(), np.log(item_deg + 2.0), rtol=1e-5)
    np.testing.assert_allclose(net.user_emb.detach().norm(dim=1).numpy(), np.log(user_deg + 2.0), rtol=1e-5)
    # 80/10/10 random split of the merged LightGCN gowalla (810,128 + 217,242 interactions)
    assert train.nnz + data.csr(["validation"]).nnz + data.csr(["test"]).nnz == 1_027_370


def test_workflow_helpers_from_config(repo_root):
    import yaml

    from recrepro.papers.prism import rules as wf

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    smoke = wf.all_runs(config, "smoke")
    # Fig. 1: 2 losses x 3 weight decays; Table 1 adds PRISM for MF+DirectAU; 3 seeds each
    assert len(smoke) == (2 * 3 + 1) * 3
    assert any("/mf_directau_prism/seed492/" in r for r in smoke)
    paper_datasets = [d for d, *_ in wf.entries(config, "paper")]
    assert paper_datasets == ["ml-1m", "gowalla", "yelp2018", "amazon-book"]
    # paper Table 1: (MF, NL-MF) x (SSM, DirectAU, MAWU) x (PRISM + 4 weight decays), plus Fig. 1's BPR grid
    assert len(wf.table_methods(config, "paper")) == 2 * 3 * 5
    titles, runs = wf.fig2_runs(config, "paper", "gowalla")
    # the paper's panels: (a) with weight decay (BPR, DirectAU), (b) without
    assert titles == ["bpr, wd 1e-06", "directau, wd 1e-06", "bpr, wd 0", "directau, wd 0"]
    assert runs[1].endswith("/mf_directau_wd1em6/seed123/metrics.json")


def test_lr_search_picks_each_arm_over_its_learning_rates_on_validation(tmp_path):
    """MF + SSM with the paper's lr grid: the tuned arm over λ × lr (best validation: λ 0 at lr 0.01),
    PRISM over lr (best: 0.1, although its tier-lr run tests better); the table's PRISM column and the
    `tunedprism` alias are the pick's runs, each arm names its lr, and a grid partly run says how much."""
    import json

    from recrepro.papers.prism.tables import select_weight_decay

    def run(method, seed, val, test):
        return _fake_run(tmp_path, method, seed, val, test)

    grid = [run("mf_ssm_wd0", 1, 0.10, 0.30), run("mf_ssm_wd1em6", 1, 0.12, 0.31),
            run("mf_ssm_wd0_lr1em2", 1, 0.20, 0.25),                           # 3 of the 2 x 3 (λ, lr) points
            run("mf_ssm_prism", 1, 0.05, 0.40), run("mf_ssm_prism_lr1em2", 1, 0.15, 0.20),
            run("mf_ssm_prism_lr1em1", 1, 0.30, 0.35)]
    search = {"mf": [1e-2, 1e-1]}
    selection = select_weight_decay(grid, backbones=["mf"], losses=["ssm"], weight_decays=[0.0, 1e-6],
                                    lr_search=search)
    assert selection["chosen"] == {"mf_ssm": "mf_ssm_wd0_lr1em2", "mf_ssm_prism": "mf_ssm_prism_lr1em1"}
    assert selection["candidates"] == {"mf_ssm": 3, "mf_ssm_prism": 3}
    others = [run("mf_ssm_wd0_lr1em2", 2, 0.0, 0.27), run("mf_ssm_prism_lr1em1", 2, 0.0, 0.37),
              run("mf_ssm_prism", 2, 0.0, 0.50)]
    frame = table_prism(grid + others, tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "tuned", tier="paper",
                        dataset="toy", backbones=["mf"], losses=["ssm"], weight_decays=[0.0, 1e-6],
                        selection=selection, lr_search=search)
    row = frame.iloc[0]
    assert row["tuned_weight_decay"] == 0.0 and row["tuned_lr"] == 1e-2 and row["prism_lr"] == 0.1
    assert row["tuned_ndcg_mean"] == pytest.approx(0.26) and row["prism_ndcg_mean"] == pytest.approx(0.36)
    text = (tmp_path / "t.md").read_text()
    assert "| mf | ssm | 0, lr 0.01 (3 of 6 (λ, lr) run) | 0.2600 ± 0.0141 | 0.3600 ± 0.0141 (lr 0.1) |" in text
    alias = json.loads((tmp_path / "tuned" / "mf_ssm_tunedprism" / "seed2" / "metrics.json").read_text())
    assert alias["selected_method"] == "mf_ssm_prism_lr1em1" and "budget" not in alias   # all 3 lr ran
    tuned = json.loads((tmp_path / "tuned" / "mf_ssm_tunedwd" / "seed1" / "metrics.json").read_text())
    assert tuned["budget"] == "tuned over 3 of 6 (weight decay, learning rate) points"


def test_lr_search_before_its_runs_keeps_the_tier_lr_picks_and_names_the_cap(tmp_path):
    """Only the tier-lr runs exist: the picks are the runs without a search, and both aliases say so."""
    import json

    from recrepro.papers.prism.tables import select_weight_decay

    grid = [_fake_run(tmp_path, "mf_ssm_wd0", 1, 0.10, 0.30), _fake_run(tmp_path, "mf_ssm_prism", 1, 0.05, 0.40)]
    search = {"mf": [1e-2, 1e-1]}
    selection = select_weight_decay(grid, backbones=["mf"], losses=["ssm"], weight_decays=[0.0], lr_search=search)
    assert selection["chosen"] == {"mf_ssm": "mf_ssm_wd0", "mf_ssm_prism": "mf_ssm_prism"}
    table_prism(grid, tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "tuned", tier="paper", dataset="toy",
                backbones=["mf"], losses=["ssm"], weight_decays=[0.0], selection=selection, lr_search=search)
    alias = json.loads((tmp_path / "tuned" / "mf_ssm_tunedprism" / "seed1" / "metrics.json").read_text())
    assert alias["budget"] == "tuned over 1 of 3 learning rates"
    assert "(lr the tier's; 1 of 3 lr run)" in (tmp_path / "t.md").read_text()
    table_prism(grid, tmp_path / "t.md", tmp_path / "t.csv", None, tier="paper", dataset="toy", backbones=["mf"],
                losses=["ssm"], weight_decays=[0.0], selection=selection, lr_search=search, tier_lr=1e-3)
    assert "| 0, lr 0.001 (1 of 3 (λ, lr) run) |" in (tmp_path / "t.md").read_text()
    assert "(lr 0.001; 1 of 3 lr run)" in (tmp_path / "t.md").read_text()


def test_lr_search_runs_join_the_selection_on_the_first_seed_only(repo_root):
    import yaml

    from recrepro.papers.prism import rules as wf

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    assert wf.lr_search_arg(config, "paper") == {"mf": [1e-2, 1e-1], "nlmf": [1e-2, 1e-1]}
    assert wf.searched_lrs(config, "paper", "lightgcn") == [None]  # not a Table 1 backbone
    selection = wf.selection_runs(config, "paper", "gowalla")
    assert all("/seed123/" in r for r in selection)
    lr_runs = [r for r in selection if "_lr1em" in r]
    # (MF, NL-MF) x (SSM, DirectAU, MAWU) x (4 weight decays + PRISM) x 2 searched lrs
    assert len(lr_runs) == 2 * 3 * 5 * 2 and sum("/nlmf_" in r for r in lr_runs) == 3 * 5 * 2
    assert any(r.endswith("/mf_ssm_prism/seed123/metrics.json") for r in selection)   # PRISM's tier-lr point
    assert any(r.endswith("/mf_mawu_wd1em8_lr1em1/seed123/metrics.json") for r in selection)


def test_a_searched_learning_rate_reaches_the_trainer_settings(repo_root):
    import yaml

    from recrepro.papers.prism.run import settings_for

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    conf, switches = config["prism"]["tiers"]["paper"], config["prism"]["switches"]
    assert settings_for("mf_ssm_wd1em6_lr1em1", conf, switches, 123, "cpu")[1]["lr"] == 0.1
    base = settings_for("mf_ssm_wd1em6", conf, switches, 123, "cpu")[1]
    assert base["lr"] == conf["lr"] == 1e-3
    assert {k: v for k, v in settings_for("mf_ssm_wd1em6_lr1em2", conf, switches, 123, "cpu")[1].items()
            if k != "lr"} == {k: v for k, v in base.items() if k != "lr"}


def test_in_batch_negatives_are_uniform_over_the_distinct_items_of_the_batch():
    # the released loader draws from the batch subgraph's nodes, each distinct item once: item 0 is
    # four of the five positives but half of the pool, so about half the negatives (not 80 %)
    import torch

    gen = torch.Generator().manual_seed(0)
    batch = torch.tensor([0, 0, 0, 0, 7])
    negs = T.draw_negatives(batch, 10, 4000, "in_batch", gen)
    assert negs.shape == (5, 4000) and set(negs.unique().tolist()) == {0, 7}
    share = (negs == 0).float().mean().item()
    assert abs(share - 0.5) < 0.02  # 20,000 draws: sd 0.0035 around 0.5; proportional sampling gives 0.8
    uniform = T.draw_negatives(batch, 10, 4000, "uniform", gen)
    assert set(uniform.unique().tolist()) == set(range(10))
