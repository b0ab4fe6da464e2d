"""λOpt's records against today's configuration (recrepro.papers.lambdaopt.drift): a difference
is listed, and one that provably leaves the record unchanged is told apart (hand-built records),
and every committed record is current or provably the same."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from recrepro.config import load_config
from recrepro.papers.lambdaopt.drift import record_drift
from recrepro.papers.lambdaopt.rules import rule_settings

RUN = "paper/lambdaopt/runs/ml-100k/temporal_user_ratio/lambdaopt_dui/seed0"


def _record(root, config, settings, gain_epoch):
    """A record of ml-100k's -DUI whose validation AUC (every epoch from 0) starts at 0.5, dips, and
    first beats 0.5 at ``gain_epoch``."""
    run = root / RUN
    run.mkdir(parents=True)
    evaluation = config["evaluation"]["splits"]["temporal_user_ratio"]
    (run / "provenance.json").write_text(json.dumps({"config": {"settings": settings, "evaluation": evaluation}}))
    auc = np.r_[0.5, np.full(gain_epoch - 1, 0.45), np.linspace(0.51, 0.8, 50)]
    pd.DataFrame({"epoch": np.arange(auc.size, dtype=float), "val_auc": auc}).to_parquet(run / "history.parquet")
    return run


@pytest.fixture(scope="module")
def config(repo_root):
    return load_config(repo_root / "config.yaml")


def test_a_current_record_has_no_drift(tmp_path, config):
    _record(tmp_path, config, rule_settings(config, "paper", "ml-100k", "lambdaopt_dui"), 30)
    assert record_drift(config, "paper", tmp_path).empty


@pytest.mark.parametrize("gain_epoch, same", [(30, True), (99, True), (100, False), (250, False)])
def test_wait_for_gain_leaves_a_record_unchanged_only_if_it_gained_within_patience(tmp_path, config, gain_epoch, same):
    now = rule_settings(config, "paper", "ml-100k", "lambdaopt_dui")
    assert now["wait_for_gain"] is True and now["patience"] == 100
    old = {k: v for k, v in now.items() if k != "wait_for_gain"}
    _record(tmp_path, config, old, gain_epoch)
    drift = record_drift(config, "paper", tmp_path)
    assert drift["setting"].tolist() == ["settings.wait_for_gain"]
    assert drift["recorded"].tolist() == [None] and drift["now"].tolist() == [True]
    assert bool(drift["same_record"].iloc[0]) is same
    assert f"{gain_epoch:g} epochs" in drift["why"].iloc[0]


@pytest.mark.parametrize("plateau, epochs, same", [(0.508, 150, False), (0.512, 150, True), (0.508, 3200, True)])
def test_gain_margin_leaves_a_record_unchanged_only_if_every_curve_cleared_it_or_ran_to_the_cap(
        tmp_path, config, plateau, epochs, same):
    """A record made when any gain counted: a curve that stopped on patience at most the margin above
    its first value would have trained on; one more than the margin above it, or one at the cap, not."""
    now = rule_settings(config, "paper", "ml-100k", "lambdaopt_dui")
    assert now["gain_margin"] == 0.01 and now["epochs"] == 3200
    old = {k: v for k, v in now.items() if k != "gain_margin"}
    run = tmp_path / RUN
    run.mkdir(parents=True)
    evaluation = config["evaluation"]["splits"]["temporal_user_ratio"]
    (run / "provenance.json").write_text(json.dumps({"config": {"settings": old, "evaluation": evaluation}}))
    auc = np.full(epochs, 0.5)
    auc[20] = plateau                     # the best: 0.008 or 0.012 above the first value
    pd.DataFrame({"epoch": np.arange(epochs, dtype=float), "val_auc": auc}).to_parquet(run / "history.parquet")
    drift = record_drift(config, "paper", tmp_path)
    assert drift["setting"].tolist() == ["settings.gain_margin"]
    assert drift["recorded"].tolist() == [None] and drift["now"].tolist() == [0.01]
    assert bool(drift["same_record"].iloc[0]) is same
    assert ("would have trained on" in drift["why"].iloc[0]) is not same


def test_any_other_difference_makes_the_record_outdated(tmp_path, config):
    now = rule_settings(config, "paper", "ml-100k", "lambdaopt_dui")
    _record(tmp_path, config, {**now, "lr": now["lr"] * 10}, 5)
    drift = record_drift(config, "paper", tmp_path)
    assert drift[["setting", "recorded", "now", "same_record"]].values.tolist() == [
        ["settings.lr", now["lr"] * 10, now["lr"], False]]
    assert drift["why"].iloc[0].startswith("rerun the record")


def test_every_committed_record_is_current_or_provably_the_same(repo_root, config):
    drift = record_drift(config, "paper", repo_root / "results")
    assert len(list((repo_root / "results/paper/lambdaopt/runs").glob("*/*/*/seed*/provenance.json"))) > 0
    outdated = drift[~drift["same_record"]]
    assert outdated.empty, outdated.to_string()


def test_the_drift_verb_names_an_outdated_record_and_fails(tmp_path, config, repo_root, capsys):
    from recrepro.cli.main import main

    now = rule_settings(config, "paper", "ml-100k", "lambdaopt_dui")
    _record(tmp_path, config, {**now, "lr": now["lr"] * 10}, 5)
    with pytest.raises(SystemExit) as stop:
        main(["lambdaopt", "drift", "--tier", "paper", "--config", str(repo_root / "config.yaml"),
              "--results", str(tmp_path)])
    assert stop.value.code == 1
    assert f"OUTDATED: {tmp_path / RUN}: settings.lr" in capsys.readouterr().out
