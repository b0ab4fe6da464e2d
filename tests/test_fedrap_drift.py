"""FedRAP's records against today's configuration (recrepro.papers.fedrap.drift): the negative pool,
kept in metrics.json rather than in the recorded settings, is compared too (hand-built records),
and every committed record is current."""

from __future__ import annotations

import json

import pytest

from recrepro.config import load_config
from recrepro.papers.fedrap.drift import record_drift
from recrepro.papers.fedrap.rules import rule_settings

RUN = "paper/fedrap/runs/ml-100k/leave_one_out/fedrap_code_pool/seed0"


@pytest.fixture(scope="module")
def config(repo_root):
    return load_config(repo_root / "config.yaml")


def _record(root, config, settings, pool):
    """A record as the driver writes it: the settings without the pool, the pool in metrics.json."""
    run = root / RUN
    run.mkdir(parents=True)
    evaluation = config["evaluation"]["splits"]["leave_one_out"]
    settings = {k: v for k, v in settings.items() if k != "negative_pool"}
    (run / "provenance.json").write_text(json.dumps({"config": {"variant": "fedrap_code_pool", "settings": settings,
                                                                "evaluation": evaluation}}))
    (run / "metrics.json").write_text(json.dumps({"negative_pool": pool, "overall": {"hr@10": 0.5}}))


def test_a_current_record_has_no_drift(tmp_path, config):
    now = rule_settings(dict(config), "paper", "ml-100k", "fedrap_code_pool")
    assert now["negative_pool"] == "all_interactions"
    _record(tmp_path, config, now, "all_interactions")
    assert record_drift(config, "paper", tmp_path).empty


def test_a_record_of_the_other_negative_pool_is_outdated(tmp_path, config):
    _record(tmp_path, config, rule_settings(dict(config), "paper", "ml-100k", "fedrap_code_pool"), "train")
    drift = record_drift(config, "paper", tmp_path)
    assert drift[["setting", "recorded", "now", "same_record"]].values.tolist() == [
        ["settings.negative_pool", "train", "all_interactions", False]]


def test_a_record_of_other_rounds_is_outdated(tmp_path, config):
    now = rule_settings(dict(config), "paper", "ml-100k", "fedrap_code_pool")
    _record(tmp_path, config, {**now, "rounds": 50}, "all_interactions")
    assert record_drift(config, "paper", tmp_path)["setting"].tolist() == ["settings.rounds"]


def test_every_committed_record_is_current(repo_root, config):
    assert len(list((repo_root / "results/paper/fedrap/runs").glob("*/*/*/seed*/provenance.json"))) > 0
    drift = record_drift(config, "paper", repo_root / "results")
    assert drift.empty, drift.to_string()


def test_the_drift_verb_says_so(repo_root, capsys):
    from recrepro.cli.main import main

    main(["fedrap", "drift", "--tier", "paper", "--config", str(repo_root / "config.yaml"),
          "--results", str(repo_root / "results")])
    assert capsys.readouterr().out.strip() == ("every FedRAP record was made under the settings the configuration "
                                               "gives today")
