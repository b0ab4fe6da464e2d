"""benchmarks/official_lambdaopt.py: its data hand-over, the stopping rule it applies to the released
code's curve, the comparison with a record, when it skips, and (with a checkout at
/tmp/official_lambdaopt) a two-epoch run of the released code on a micro split."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from batched_fetch import assert_batched_fetch_is_bit_for_bit

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT = Path("/tmp/official_lambdaopt")


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("official_lambdaopt", ROOT / "benchmarks" / "official_lambdaopt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def handover(harness):
    namespace = {"pd": pd}
    exec(harness.HANDOVER, namespace)
    return namespace


def _frame(rows):
    return pd.DataFrame(rows, columns=["user", "item", "timestamp"])


def test_hand_over_gives_the_released_splitter_exactly_our_parts(handover):
    """Hand-checked: user 1's rows come first in time order, and the two ``split_lro`` calls of the
    released ``SampleGenerator`` get back our test, then our train and validation, row for row."""
    train = _frame([(1, 10, 5), (0, 11, 3), (0, 12, 1)])
    validation = _frame([(0, 13, 7), (1, 14, 8)])
    test = _frame([(1, 15, 9), (0, 16, 2)])  # a test timestamp before validation's: the part decides, not time
    ui = handover["hand_over"](train, validation, test)
    assert list(ui.columns) == ["userId", "itemId", "timestamp", "part"]
    assert ui[["userId", "itemId"]].to_numpy().tolist() == [[0, 12], [0, 16], [0, 11], [0, 13],
                                                            [1, 10], [1, 14], [1, 15]]
    rest, held_test = handover["split_by_part"](ui, test_ratio=0.2)
    assert held_test[["userId", "itemId"]].to_numpy().tolist() == [[0, 16], [1, 15]]
    assert "part" not in held_test.columns and len(rest) == 5
    held_train, held_validation = handover["split_by_part"](rest, test_ratio=0.25)
    assert sorted(held_train["itemId"]) == [10, 11, 12] and sorted(held_validation["itemId"]) == [13, 14]
    assert list(held_train.columns) == list(held_validation.columns) == ["userId", "itemId", "timestamp"]


def test_best_by_validation_is_our_stopping_rule(harness):
    """Strict improvement (a tie keeps the earlier epoch); stop once ``epoch − best ≥ patience``."""
    curve = [(1, 0.50), (2, 0.60), (3, 0.60), (4, 0.55), (5, 0.59), (6, 0.70)]
    assert harness.best_by_validation(curve, patience=3) == {"best_epoch": 2, "best_val_auc": 0.60, "stopped_at": 5}
    assert harness.best_by_validation(curve, patience=None) == {"best_epoch": 6, "best_val_auc": 0.70,
                                                                "stopped_at": None}
    assert harness.best_by_validation(curve, patience=10)["stopped_at"] is None


def _record(path: Path, hist: pd.DataFrame, metrics: dict) -> Path:
    path.mkdir(parents=True)
    hist.to_parquet(path / "history.parquet")
    (path / "metrics.json").write_text(json.dumps(metrics))
    return path


def test_compare_aligns_history_rows_to_official_epochs_and_takes_the_selected_lambda(harness, tmp_path):
    """Our history row ``epoch`` e is the state after e + 1 epochs; λFix keeps every grid value's curve
    (and summary rows without an epoch): only the selected λ's curve is compared."""
    overall = {"auc": 0.79, "pp_hr@50": 0.3, "pp_hr@100": 0.5, "pp_ndcg@50": 0.1, "pp_ndcg@100": 0.13}
    hist = pd.DataFrame({"epoch": [0.0, 1, 2, 0, 1, 2, np.nan], "val_auc": [0.1, 0.2, 0.3, 0.5, 0.6, 0.65, 0.6],
                         "lam": [1.0, 1, 1, 0.01, 0.01, 0.01, 0.01]})
    record = _record(tmp_path / "fix", hist, {"selected_lam": 0.01, "overall": overall,
                                              "stopping": {"best_epoch": 3, "best_val_auc": 0.65}})
    curve, _ = harness.our_curve(record)
    assert curve == [(1, 0.5), (2, 0.6), (3, 0.65)]
    official = [{"epoch": e, "val_auc": v, **{k: 0.7 + e / 100 for k in harness.METRICS}}
                for e, v in ((0, 0.49), (1, 0.52), (2, 0.58), (3, 0.58))]
    out = harness.compare(official, record, every=1)
    assert out["epochs_compared"] == 3 and out["first_epoch"] == 1 and out["last_epoch"] == 3
    assert out["max_abs_gap_val_auc"] == pytest.approx(0.07) and out["epoch_of_max_gap"] == 3
    assert out["mean_abs_gap_val_auc"] == pytest.approx((0.02 + 0.02 + 0.07) / 3)
    # the released curve's best under our rule (a tie at epoch 3 keeps epoch 2), and its test AUC there
    assert out["official_best_epoch"] == 2 and out["official_test_at_best"]["auc"] == pytest.approx(0.72)
    assert out["ours_best_epoch"] == 3 and out["ours_test_at_best"]["auc"] == 0.79


def test_a_code_mode_record_counts_two_of_its_epochs_as_one_official_epoch(harness, tmp_path):
    """Under ``assumed_batch: separate`` (``lambdaopt_dui_code``) our epoch is one sampler pass with half
    its batches real steps: our epochs 2, 4, 6 are official epochs 1, 2, 3; odd ones have no counterpart."""
    hist = pd.DataFrame({"epoch": range(6), "val_auc": [0.50, 0.51, 0.52, 0.53, 0.54, 0.55]})
    record = _record(tmp_path / "code", hist, {"overall": dict.fromkeys(harness.METRICS, 0.5),
                                               "stopping": {"best_epoch": 5, "epochs_trained": 6}})
    (record / "provenance.json").write_text(json.dumps({"config": {"settings": {"assumed_batch": "separate"}}}))
    assert harness.epochs_per_official_epoch(record) == 2
    assert harness.our_curve(record)[0] == [(1, 0.51), (2, 0.53), (3, 0.55)]
    official = [{"epoch": e, "val_auc": 0.5, **dict.fromkeys(harness.METRICS, 0.6)} for e in range(4)]
    out = harness.compare(official, record)
    assert out["ours_best_epoch"] == 2.5 and out["ours_last"]["epoch"] == 3 and out["epochs_compared"] == 3


def test_the_test_section_is_the_records_evaluation(harness):
    """The harness scores the released model with the λOpt records' test evaluation (a subset of metrics)."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    ours = dict(config["evaluation"]["splits"]["temporal_user_ratio"])
    mine = dict(harness.TEST_SECTION)
    assert set(mine.pop("metrics")) <= set(ours.pop("metrics"))
    assert mine == ours
    assert config["lambdaopt"]["tiers"]["paper"]["settings"]["patience"] == harness.PATIENCE
    assert config["lambdaopt"]["tiers"]["paper"]["settings"]["select_share"] == 0.5  # the --select-share default


def test_without_the_checkout_or_the_split_it_skips_with_the_reason(harness, tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    assert harness.main(["--checkout", str(tmp_path / "none"), "--split-dir", str(tmp_path), "--out", str(out)]) == 0
    assert "no yihong-chen/lambda-opt checkout" in capsys.readouterr().out
    checkout = tmp_path / "checkout"
    for rel in ("src/engine.py", "src/regularizer/regularizer.py", "src/utils/data_loader.py",
                *harness.SCRIPTS.values()):
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text("")
    assert harness.main(["--checkout", str(checkout), "--split-dir", str(tmp_path / "split"), "--out", str(out)]) == 0
    assert "no λOpt split" in capsys.readouterr().out
    assert not out.exists()


def test_batched_fetch_gives_the_per_sample_loaders_batches_bit_for_bit(harness):
    """The driver's faster fetch, on a stand-in of the released ``UserPosNegDataset`` (three tensors,
    one triple per index): under the same seed the shuffled batches are the same tensors."""
    import torch

    assert_batched_fetch_is_bit_for_bit(harness.BATCHED_FETCH, "batch_triples",
                                        ("user_tensor", "pos_item", "neg_item"), torch.arange(200, 211))
    assert "data_loader.DataLoader = batched_loader" in harness.DRIVER


def _micro_split(path: Path, n_users: int = 24, n_items: int = 30, per_user: int = 15) -> Path:
    """Every user rates ``per_user`` items in time order: the first 60 % train, then validation, then test."""
    rng = np.random.default_rng(0)
    parts = {"train": [], "validation": [], "test": []}
    for u in range(n_users):
        items = rng.permutation(n_items)[:per_user] if u else np.arange(per_user)
        for t, i in enumerate(items):
            name = "train" if t < 9 else "validation" if t < 12 else "test"
            parts[name].append((u, int(i), 1.0, 1000 + t))
    path.mkdir(parents=True)
    files = {}
    for name, rows in parts.items():
        pd.DataFrame(rows, columns=["user", "item", "rating", "timestamp"]).to_parquet(path / f"{name}.parquet")
        files[f"{name}.parquet"] = {"rows": len(rows)}
    (path / "manifest.json").write_text(json.dumps({"dataset": "micro", "protocol": "lambdaopt",
                                                    "split": "temporal_user_ratio", "n_users": n_users,
                                                    "n_items": n_items, "files": files}))
    return path


@pytest.mark.skipif(not (CHECKOUT / "src" / "engine.py").is_file(), reason=f"no lambda-opt checkout at {CHECKOUT}")
@pytest.mark.parametrize("variant", ["dui", "fix"])
def test_the_released_code_runs_on_a_micro_split(harness, tmp_path, variant):
    split = _micro_split(tmp_path / "split")
    out = tmp_path / f"{variant}.jsonl"
    extra = ["--lam", "0.01"] if variant == "fix" else []
    assert harness.main(["--checkout", str(CHECKOUT), "--split-dir", str(split), "--variant", variant,
                         "--epochs", "2", "--out", str(out), *extra]) == 0
    rows = harness.read_rows(out)
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    # one batch an epoch: the evaluation after epoch k follows k + 1 real steps
    assert [r["steps"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert 0.0 <= r["val_auc"] <= 1.0 and 0.0 <= r["auc"] <= 1.0 and 0.0 <= r["pp_hr@50"] <= r["pp_hr@100"]
    if variant == "dui":
        assert rows[0]["lambda_user_mean"] == 0.0 and rows[-1]["lambda_user_mean"] > 0.0  # Λ starts at 0, then learns
    else:
        assert all(r["lam"] == pytest.approx(0.01) for r in rows)
