"""PRISM's records against today's configuration (recrepro.papers.prism.drift): the recorded device
does not count, a switch or setting that differs does (hand-built records), and every committed
record is current."""

from __future__ import annotations

import json

import pytest

from recrepro.config import load_config
from recrepro.papers.prism.drift import record_drift
from recrepro.papers.prism.rules import tier_conf
from recrepro.papers.prism.run import settings_for

RUN = "paper/prism/runs/gowalla/prism/random_ratio/mf_directau_prism/seed123"


@pytest.fixture(scope="module")
def config(repo_root):
    return load_config(repo_root / "config.yaml")


def _record(root, config, *, device="cuda", switches=None, **changed):
    """A record of MF + DirectAU + PRISM on gowalla (seed 123) as the driver writes it, trained on ``device``."""
    _, settings = settings_for("mf_directau_prism", tier_conf(config, "paper"), config["prism"]["switches"], 123,
                               device, dataset="gowalla")
    run = root / RUN
    run.mkdir(parents=True)
    (run / "provenance.json").write_text(json.dumps({"seed": 123, "config": {
        "method": "mf_directau_prism", "settings": {**settings, **changed},
        "switches": dict(switches or config["prism"]["switches"]),
        "evaluation": config["evaluation"]["splits"]["random_ratio"]}}))


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_current_record_has_no_drift_whatever_device_it_trained_on(tmp_path, config, device):
    _record(tmp_path, config, device=device)
    assert record_drift(config, "paper", tmp_path).empty


def test_a_record_of_another_learning_rate_or_switch_is_outdated(tmp_path, config):
    switches = dict(config["prism"]["switches"])
    key = sorted(switches)[0]
    switches[key] = f"not-{switches[key]}"
    _record(tmp_path, config, switches=switches, lr=0.5)
    drift = record_drift(config, "paper", tmp_path)
    assert sorted(drift["setting"]) == sorted(["settings.lr", f"switches.{key}"])
    assert not drift["same_record"].any()


def test_every_committed_record_is_current(repo_root, config):
    assert len(list((repo_root / "results/paper/prism/runs").glob("*/*/*/*/seed*/provenance.json"))) > 0
    drift = record_drift(config, "paper", repo_root / "results")
    assert drift.empty, drift.to_string()
