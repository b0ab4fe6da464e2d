"""exADMM's records against today's configuration (recrepro.papers.exadmm.drift): a parameter or
part that differs is named (hand-built records), and every committed record is current."""

from __future__ import annotations

import json

import pytest

from recrepro.config import load_config
from recrepro.papers.exadmm.drift import record_drift
from recrepro.papers.exadmm.rules import DEFAULT_KS, DEFAULT_METRICS, smk_point

RUN = "paper/exadmm/runs/epinions/strong_generalization/exadmm_sw1/seed0"


@pytest.fixture(scope="module")
def config(repo_root):
    return load_config(repo_root / "config.yaml")


def _record(root, config, **changed):
    point = smk_point(config, "paper", "epinions", "exadmm_sw1")
    run = root / RUN
    run.mkdir(parents=True)
    slice_ = {"family": point["family"], "params": {**point["params"], **changed}, "ks": list(DEFAULT_KS),
              "metrics": list(DEFAULT_METRICS), "fit": ["train"], "fold_in": "test_tr", "target": "test_te"}
    (run / "provenance.json").write_text(json.dumps({"config": slice_}))
    return point


def test_a_current_record_has_no_drift(tmp_path, config):
    point = _record(tmp_path, config)
    assert point["params"]["exposure_reg"] == 0.0          # exadmm_sw1: the sweep's first weight, Λ = 0
    assert record_drift(config, "paper", tmp_path).empty


def test_a_record_of_another_exposure_weight_is_outdated(tmp_path, config):
    _record(tmp_path, config, exposure_reg=1e-3)
    drift = record_drift(config, "paper", tmp_path)
    assert drift[["setting", "recorded", "now", "same_record"]].values.tolist() == [
        ["params.exposure_reg", 1e-3, 0.0, False]]


def test_every_committed_record_is_current(repo_root, config):
    assert len(list((repo_root / "results/paper/exadmm/runs").glob("*/*/*/seed*/provenance.json"))) > 0
    drift = record_drift(config, "paper", repo_root / "results")
    assert drift.empty, drift.to_string()
