"""benchmarks/official_fedrap.py: when it resumes a killed released-code run, and when it skips."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from batched_fetch import assert_batched_fetch_is_bit_for_bit

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("official_fedrap", ROOT / "benchmarks" / "official_fedrap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _state(tmp_path: Path, rounds: int, config: dict, split: str = "/s") -> Path:
    ckpt = tmp_path / "run.pt"
    ckpt.write_bytes(b"state")
    Path(f"{ckpt}.json").write_text(json.dumps({"round": rounds, "config": config, "split_dir": split}))
    return ckpt


def test_resume_round_takes_a_matching_checkpoint_and_reruns_a_round_without_one(harness, tmp_path):
    config = {**harness.DEFAULTS, **harness.FLAG_SETS["ml1m"]}
    done = [{"round": a} for a in (1, 2, 3)]
    assert harness.resume_round(done, _state(tmp_path, 3, config), config, "/s") == 3
    # killed after round 3's line but before its checkpoint: resume from 2, round 3 runs again
    assert harness.resume_round(done, _state(tmp_path, 2, config), config, "/s") == 2
    # a checkpoint of other flags, another split, too far behind, or no lines at all: no resume
    readme = {**harness.DEFAULTS, **harness.FLAG_SETS["readme"]}
    assert harness.resume_round(done, _state(tmp_path, 3, readme), config, "/s") is None
    assert harness.resume_round(done, _state(tmp_path, 3, config, "/other"), config, "/s") is None
    assert harness.resume_round(done, _state(tmp_path, 1, config), config, "/s") is None
    assert harness.resume_round([], _state(tmp_path, 3, config), config, "/s") is None
    assert harness.resume_round(done, tmp_path / "absent.pt", config, "/s") is None


def test_without_the_checkout_it_skips_with_the_reason(harness, tmp_path, capsys):
    assert harness.main(["--checkout", str(tmp_path / "none"), "--split-dir", str(tmp_path),
                         "--out", str(tmp_path / "o.jsonl")]) == 0
    assert "no mtics/FedRAP checkout" in capsys.readouterr().out
    assert not (tmp_path / "o.jsonl").exists()


def test_batched_fetch_gives_the_per_sample_loaders_batches_bit_for_bit(harness):
    """The driver's faster fetch, on a stand-in of the released dataset class (three tensors, one
    sample per index): under the same seed the shuffled batches are the same tensors, dtypes included."""
    import torch

    assert_batched_fetch_is_bit_for_bit(harness.BATCHED_FETCH, "batch_items",
                                        ("user_tensor", "item_tensor", "target_tensor"), torch.rand(11))
    # and it is the loader the driver installs on the released code
    assert "engine_module.DataLoader = batched_loader" in harness.DRIVER and "def batch_items" in harness.DRIVER


def test_the_evaluator_check_needs_our_run_and_says_so(harness, tmp_path, capsys):
    checkout, split = tmp_path / "checkout", tmp_path / "split"
    for f in (checkout / "model" / "model.py", checkout / "utils" / "data.py", split / "negatives.parquet"):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("")
    assert harness.main(["--checkout", str(checkout), "--split-dir", str(split), "--out", str(tmp_path / "o.jsonl"),
                         "--evaluator-check", "6", "20"]) == 0
    assert "--evaluator-check needs --compare" in capsys.readouterr().out
    assert not (tmp_path / "o.jsonl").exists()
