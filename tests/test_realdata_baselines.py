"""The foundation's anchors: MostPopular on real splits, through the same entry point the rules use."""

from __future__ import annotations

import pytest

from recrepro.io import read_json
from recrepro.baselines.run import run_baseline

pytestmark = pytest.mark.realdata


def test_mostpop_gowalla_lightgcn_given(pipeline, tmp_path):
    _, split = pipeline
    out = split("gowalla", "given", "lightgcn_given", 0)
    evaluation = {"mode": "full", "fit": ["train"], "exclude": ["train"], "target": "test", "ks": [20]}
    run_baseline(split_dir=out, method="mostpop", seed=0, out_dir=tmp_path, evaluation=evaluation, meta={})
    overall = read_json(tmp_path / "metrics.json")["overall"]
    # The literature's MostPop row for this split (e.g. UltraGCN's table) reads 0.0416 / 0.0317.
    assert overall["recall_lgcn@20"] == pytest.approx(0.041631, abs=5e-6)
    assert overall["ndcg@20"] == pytest.approx(0.031690, abs=5e-6)


def test_mostpop_ml100k_leave_one_out(pipeline, tmp_path):
    _, split = pipeline
    out = split("ml-100k", "fedrap", "leave_one_out", 0)
    evaluation = {"mode": "sampled", "fit": ["train"], "target": "test", "ks": [10], "ties": "pessimistic"}
    run_baseline(split_dir=out, method="mostpop", seed=0, out_dir=tmp_path, evaluation=evaluation, meta={})
    metrics = read_json(tmp_path / "metrics.json")
    assert metrics["counts"]["n_users_evaluated"] == 943
    assert metrics["overall"]["hr@10"] == pytest.approx(0.411453, abs=5e-6)
    assert metrics["overall"]["ndcg@10"] == pytest.approx(0.226897, abs=5e-6)
