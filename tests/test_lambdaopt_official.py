"""recrepro.papers.lambdaopt.official: the released code's curves under our stopping rule, beside our records."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from recrepro.papers.lambdaopt import official

METRICS = official.METRICS


def _curve_file(path: Path, rows: list[tuple[int, float, float]]) -> Path:
    """A released-code curve: ``(epoch, val_auc, test auc)``; the other test metrics follow the AUC."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"epoch": e, "val_auc": v, **{k: a - (0.1 if k != "auc" else 0.0) for k in METRICS}})
             for e, v, a in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _record(root: Path, method: str, *, best: int, trained: int, auc: float, hist: pd.DataFrame | None = None,
            settings: dict | None = None, extra: dict | None = None) -> Path:
    record = root / "ml-100k" / "temporal_user_ratio" / method / "seed0"
    record.mkdir(parents=True)
    metrics = {"overall": {k: auc - (0.1 if k != "auc" else 0.0) for k in METRICS},
               "stopping": {"best_epoch": best, "epochs_trained": trained, "stopped": "patience", "best_val_auc": 0.8},
               **(extra or {})}
    (record / "metrics.json").write_text(json.dumps(metrics))
    (record / "provenance.json").write_text(json.dumps({"config": {"settings": settings or {}}}))
    if hist is not None:
        hist.to_parquet(record / "history.parquet")
    return record


def test_best_by_validation_is_the_records_rule_with_and_without_waiting_for_a_gain():
    """Hand-checked: strict improvement; stop once patience epochs pass without one; with
    ``wait_for_gain`` a curve that has not beaten its first value trains on."""
    curve = [(1, 0.50), (2, 0.60), (3, 0.60), (4, 0.55), (5, 0.59), (6, 0.70)]
    assert official.best_by_validation(curve, patience=3) == {"best_epoch": 2, "best_val_auc": 0.60, "stopped_at": 5}
    assert official.best_by_validation(curve, patience=None)["best_epoch"] == 6
    dip = [(1, 0.52), (2, 0.51), (3, 0.50), (4, 0.51), (5, 0.53), (6, 0.52)]
    assert official.best_by_validation(dip, patience=2)["stopped_at"] == 3          # best at its first value
    waited = official.best_by_validation(dip, patience=2, wait_for_gain=True)
    assert waited == {"best_epoch": 5, "best_val_auc": 0.53, "stopped_at": None}      # trains on past the dip
    wobble = [(1, 0.50), (2, 0.505), (3, 0.50), (4, 0.50), (5, 0.52), (6, 0.51), (7, 0.51), (8, 0.51)]
    assert official.best_by_validation(wobble, patience=2, wait_for_gain=True)["stopped_at"] == 4
    assert official.best_by_validation(wobble, patience=2, wait_for_gain=True, gain_margin=0.01) == {
        "best_epoch": 5, "best_val_auc": 0.52, "stopped_at": 7}                       # 0.005 is a wobble
    # an evaluation every other epoch: patience counts epochs, not evaluations
    sparse = [(2, 0.6), (4, 0.7), (6, 0.65), (8, 0.66)]
    assert official.best_by_validation(sparse, patience=4) == {"best_epoch": 4, "best_val_auc": 0.7, "stopped_at": 8}


def test_a_separate_batch_record_counts_two_of_its_epochs_as_one_official_epoch(tmp_path):
    hist = pd.DataFrame({"epoch": range(6), "val_auc": [0.50, 0.51, 0.52, 0.53, 0.54, 0.55]})
    record = _record(tmp_path, "lambdaopt_dui_code", best=6, trained=6, auc=0.8, hist=hist,
                     settings={"assumed_batch": "separate"})
    assert official.epochs_per_official_epoch(record) == 2
    assert official.our_curve(record)[0] == [(1, 0.51), (2, 0.53), (3, 0.55)]


def test_the_table_sets_the_released_gap_beside_ours(tmp_path):
    """The released DUI peaks at epoch 2 (0.80 test AUC there), its λFix at 3 (0.75): gap +0.05; ours under
    the released switches: best epoch 8 of its own = 4 official, 0.81 − 0.79 = +0.02; under the paper's
    equations 0.77 − 0.79 = −0.02."""
    files = [_curve_file(tmp_path / "official" / "ml-100k_dui_seed0.jsonl",
                         [(0, 0.5, 0.5), (1, 0.6, 0.7), (2, 0.9, 0.80), (3, 0.85, 0.78)]),
             _curve_file(tmp_path / "official" / "ml-100k_fix_seed0.jsonl",
                         [(0, 0.5, 0.5), (1, 0.6, 0.6), (2, 0.7, 0.7), (3, 0.8, 0.75)])]
    runs = tmp_path / "runs"
    _record(runs, "lambdaopt_dui_code", best=8, trained=10, auc=0.81, settings={"assumed_batch": "separate"})
    _record(runs, "lambdaopt_dui", best=5, trained=9, auc=0.77)
    _record(runs, "lambdafix", best=7, trained=9, auc=0.79)
    table = official.official_table(files, runs, {"patience": 100, "wait_for_gain": True}).set_index("side")
    released = table.loc["released code"]
    assert released["dui_best_epoch"] == 2 and released["fix_best_epoch"] == 3
    assert released["dui_stopped"] == "curve ends at 3"
    assert released["gap_auc"] == pytest.approx(0.05) and released["gap_pp_hr@100"] == pytest.approx(0.05)
    code = table.loc["ours, the released code's switches"]
    assert code["dui_best_epoch"] == 4 and code["dui_stopped"] == "patience at 5"
    assert code["gap_auc"] == pytest.approx(0.02)
    assert table.loc["ours, the paper's equations", "gap_auc"] == pytest.approx(-0.02)
    md = official.official_markdown(table.reset_index())
    assert "| ml-100k | 0 | released code | `dui (fdaa44d)`: 2 (curve ends at 3) | 0.8000 |" in md
    assert "- ml-100k, released code: +0.0500 (1 seed)" in md


def test_a_missing_record_is_said_not_recorded_and_a_misnamed_curve_is_refused(tmp_path):
    files = [_curve_file(tmp_path / "ml-100k_dui_seed0.jsonl", [(0, 0.5, 0.5), (1, 0.6, 0.7)])]
    table = official.official_table(files, tmp_path / "runs", {"patience": 100})
    assert table["gap_auc"].isna().all()
    assert "`lambdaopt_dui_code`: not recorded" in official.official_markdown(table)
    bad = _curve_file(tmp_path / "ml-100k_dxi_seed0.jsonl", [(0, 0.5, 0.5)])
    with pytest.raises(ValueError, match="expected <dataset>_<dui|fix>_seed<k>.jsonl"):
        official.official_curves([bad])
