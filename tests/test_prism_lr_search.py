"""PRISM's learning-rate search table (recrepro.papers.prism.tables.lr_search_table) from hand-made run records."""

from __future__ import annotations

import json

import pytest

from recrepro.papers.prism.tables import lr_search_table

SEARCH = {"mf": [1e-2]}          # the tier's lr (1e-3) and 1e-2: 2 λ x 2 lr = 4 wd points, 2 PRISM points per loss
WDS = [0.0, 1e-6]
SETTINGS = {"patience": 3, "epochs": 20}


def _run(root, method, *, val=None, test=None, best=None, run=None, diverged=None, seed=1):
    """A run record as the PRISM trainer writes it (metrics.json + history.json); ``diverged``: a record that
    says it diverged (the trainer writes none today) with no scores."""
    d = root / "runs" / method / f"seed{seed}"
    d.mkdir(parents=True)
    metrics = {"dataset": "toy", "split": "random_ratio", "method": method, "seed": seed, "tier": "paper",
               "overall": {} if test is None else {"ndcg@20": test}, "strata": {}}
    if diverged is not None:
        metrics["diverged"] = {"epoch": diverged, "error": "NaN in training loss at epoch 3"}
    else:
        metrics.update(best_val_ndcg=val, epochs_to_best=best, counts={"epochs_to_best": best, "epochs_run": run})
        (d / "history.json").write_text(json.dumps({"best_val_ndcg": val, "best_epoch": best, "epochs_run": run,
                                                    "settings": SETTINGS}))
    (d / "metrics.json").write_text(json.dumps(metrics))
    return d


def _grid(root):
    """MF + SSM: 3 of 4 wd points (λ 0 at lr 0.01 diverged, λ 1e-6 at lr 0.01 not run), PRISM at both lrs;
    DirectAU: 2 of 4 wd points, PRISM at the tier's lr only."""
    return [_run(root, "mf_ssm_wd0", val=0.10, test=0.30, best=5, run=8),            # patience: 8 - 5 >= 3
            _run(root, "mf_ssm_wd1em6", val=0.20, test=0.10, best=20, run=20),       # the epoch limit
            _run(root, "mf_ssm_wd0_lr1em2", diverged=3),
            _run(root, "mf_ssm_prism", val=0.25, test=0.40, best=9, run=12),
            _run(root, "mf_ssm_prism_lr1em2", val=0.30, test=0.35, best=4, run=7),
            _run(root, "mf_directau_wd1em6", val=0.15, test=0.20, best=6, run=9),
            _run(root, "mf_directau_wd1em6_lr1em2", val=0.18, test=0.19, best=2, run=5),
            _run(root, "mf_directau_prism", val=0.17, test=0.22, best=7, run=10),
            _run(root, "nlmf_ssm_wd0", val=0.9, test=0.9, best=1, run=4)]         # no lr search on NL-MF: not listed


SELECTION = {"seeds": [1], "chosen": {"mf_ssm": "mf_ssm_wd1em6", "mf_ssm_prism": "mf_ssm_prism_lr1em2",
                                      "mf_directau": "mf_directau_wd1em6_lr1em2",
                                      "mf_directau_prism": "mf_directau_prism"}}


def _table(tmp_path, runs, out="t", selection=SELECTION):
    return lr_search_table(runs, tmp_path / f"{out}.md", tmp_path / f"{out}.csv",
                           tier="paper", dataset="toy", backbones=["mf", "nlmf"], losses=["ssm", "directau"],
                           weight_decays=WDS, lr_search=SEARCH, seeds=[1], alpha=1.0, selection=selection,
                           tier_lr=1e-3)


def test_every_grid_point_is_a_row_with_its_record_or_not_run(tmp_path):
    frame = _table(tmp_path, _grid(tmp_path))
    # 2 losses x (4 wd + 2 PRISM) points on one seed; NL-MF (no lr search) is not listed
    assert len(frame) == 12 and set(frame["backbone"]) == {"mf"}
    rows = frame.set_index("run")
    assert rows.loc["mf_ssm_wd1em6_lr1em2", "status"] == "not run"
    assert rows.loc["mf_directau_prism_lr1em2", "status"] == "not run"
    assert (frame["status"] == "not run").sum() == 4       # ssm: 1 wd; directau: 2 wd + 1 PRISM
    assert rows.loc["mf_ssm_wd0", "lr"] == 1e-3 and rows.loc["mf_ssm_wd0_lr1em2", "lr"] == 1e-2
    assert rows.loc["mf_ssm_wd0", "stopping_reason"] == "early stop (3 epochs without gain)"
    assert rows.loc["mf_ssm_wd1em6", "stopping_reason"] == "epoch limit (20)"
    assert rows.loc["mf_ssm_wd0", "diverged"] == "not recorded"
    assert rows.loc["mf_ssm_wd0_lr1em2", "diverged"] == "diverged at epoch 3"
    # the picks: one per arm and loss, from the selection record, never the best test score
    assert sorted(frame.loc[frame["picked"], "run"]) == sorted(SELECTION["chosen"].values())
    assert rows.loc["mf_ssm_wd0", "test_ndcg"] == 0.30 and not rows.loc["mf_ssm_wd0", "picked"]
    # stable order: loss as given, then arm (weight decay first), lr, λ
    assert list(frame["run"][:6]) == ["mf_ssm_wd0", "mf_ssm_wd1em6", "mf_ssm_wd0_lr1em2", "mf_ssm_wd1em6_lr1em2",
                                      "mf_ssm_prism", "mf_ssm_prism_lr1em2"]


def test_markdown_counts_marks_and_diverged_text(tmp_path):
    _table(tmp_path, _grid(tmp_path))
    text = (tmp_path / "t.md").read_text()
    assert "8 of 12 grid points run." in text
    assert "| mf | ssm | tuned weight decay | 3 of 4 (λ, lr) points |" in text
    assert "| mf | ssm | PRISM | 2 of 2 learning rates |" in text
    assert "| mf | directau | tuned weight decay | 2 of 4 (λ, lr) points |" in text
    assert "| mf | directau | PRISM | 1 of 2 learning rates |" in text
    assert ("| mf | ssm | tuned weight decay | 1e-06 | 0.001 | `mf_ssm_wd1em6` | 1 | 0.2000 | 20 | epoch limit (20) "
            "| not recorded | 0.1000 | **picked** |") in text
    assert "| mf | ssm | tuned weight decay | 0 | 0.01 | `mf_ssm_wd0_lr1em2` | 1 | – | – | diverged | " \
           "diverged at epoch 3 | – |  |" in text
    assert "| mf | ssm | tuned weight decay | 1e-06 | 0.01 | `mf_ssm_wd1em6_lr1em2` | 1 | not run |" in text
    assert "| mf | directau | PRISM | – | 0.01 | `mf_directau_prism_lr1em2` | 1 | not run |" in text
    assert text.count("**picked**") == 4 + 1                   # the four picks and the caption's word
    csv = (tmp_path / "t.csv").read_text().splitlines()
    assert csv[0].startswith("backbone,loss,arm,weight_decay,lr,run,seed,status,val_ndcg")
    assert "mf,ssm,tuned weight decay,0,0.01,mf_ssm_wd0_lr1em2,1,run,,,,diverged,diverged at epoch 3,,false" in csv


def test_a_pick_without_its_record_is_said_so(tmp_path):
    selection = {**SELECTION, "chosen": {**SELECTION["chosen"], "mf_directau_prism": "mf_directau_prism_lr1em2"}}
    _table(tmp_path, _grid(tmp_path), selection=selection)
    assert "`mf_directau_prism_lr1em2` | 1 | not run |  |  |  |  | **picked** (no record) |" in \
        (tmp_path / "t.md").read_text()


def test_output_is_byte_identical_on_a_second_run_and_whatever_the_run_order(tmp_path):
    runs = _grid(tmp_path)
    _table(tmp_path, runs, out="a")
    _table(tmp_path, list(reversed(runs)), out="b")
    for suffix in ("md", "csv"):
        assert (tmp_path / f"a.{suffix}").read_bytes() == (tmp_path / f"b.{suffix}").read_bytes()


def test_validation_is_the_score_the_selection_compares(tmp_path):
    from recrepro.papers.prism.tables import select_weight_decay

    runs = [r for r in _grid(tmp_path) if "directau" in str(r)]
    selection = select_weight_decay(runs, backbones=["mf"], losses=["directau"], weight_decays=WDS, lr_search=SEARCH)
    frame = _table(tmp_path, runs, selection=selection)
    ran = frame[frame["status"] == "run"].set_index("run")["val_ndcg"].to_dict()
    assert ran == pytest.approx(selection["validation"])
    assert frame.loc[frame["picked"], "run"].tolist() == ["mf_directau_wd1em6_lr1em2", "mf_directau_prism"]


def test_cli_verb_writes_the_table(tmp_path):
    from recrepro.cli.main import main

    runs = [str(r / "metrics.json") for r in _grid(tmp_path)]
    (tmp_path / "sel.json").write_text(json.dumps(SELECTION))
    main(["prism", "lr-search", "--tier", "paper", "--dataset", "toy", "--backbones", "mf", "--losses", "ssm",
          "directau", "--weight-decays", "0.0", "1e-06", "--lr-search", json.dumps(SEARCH), "--tier-lr", "0.001",
          "--seeds", "1", "--selection", str(tmp_path / "sel.json"), "--out-md", str(tmp_path / "c.md"),
          "--out-csv", str(tmp_path / "c.csv"), "--runs", *runs])
    _table(tmp_path, _grid(tmp_path / "again"), out="d")
    assert (tmp_path / "c.csv").read_text() == (tmp_path / "d.csv").read_text()


def test_workflow_lists_the_table_where_the_tier_searches_the_lr(repo_root):
    import yaml

    from recrepro.papers.prism import rules as wf

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    assert "results/paper/prism/tables/lr_search_gowalla.md" in wf.targets(config, "paper")
    assert not any("lr_search" in t for t in wf.targets(config, "smoke"))     # no lr search in the smoke tier
    runs = wf.lr_search_runs(config, "paper", "gowalla")
    # (MF, NL-MF) x 3 losses x (4 λ x 3 lr + 3 PRISM lr) on the selection seed, a subset of the selection's runs
    assert len(runs) == 2 * 3 * 15 and set(runs) <= set(wf.selection_runs(config, "paper", "gowalla"))
    assert all(("/mf_" in r or "/nlmf_" in r) and "/seed123/" in r for r in runs)
    assert sum("/nlmf_" in r for r in runs) == 3 * 15
