"""benchmarks/official_prism.py: when it skips, and the table it prints (no released code needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("official_prism", ROOT / "benchmarks" / "official_prism.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_skips_without_a_checkout_or_a_split(harness, tmp_path, capsys):
    out = tmp_path / "out.json"
    assert harness.main(["--checkout", str(tmp_path / "none"), "--split-dir", str(tmp_path), "--out", str(out)]) == 0
    assert "no snap-research/PRISM checkout" in capsys.readouterr().out
    checkout = tmp_path / "prism"
    checkout.mkdir()
    for name in ("models.py", "losses.py", "train.py", "dataloader.py"):
        (checkout / name).write_text("")
    assert harness.main(["--checkout", str(checkout), "--split-dir", str(tmp_path / "nosplit"), "--out", str(out)]) == 0
    assert "no split at" in capsys.readouterr().out
    assert not out.exists()


def test_table_has_a_row_per_epoch_and_dashes_for_missing_ones(harness):
    text = harness.table({"official": {"loss": [-1.5, -1.75], "val_ndcg": [0.001, 0.002]},
                          "nlmf": {"loss": [-1.25], "val_ndcg": [0.003]}})
    lines = text.splitlines()
    assert lines[0] == "| epoch | official loss | official val NDCG@20 | nlmf loss | nlmf val NDCG@20 |"
    assert lines[2] == "| 1 | -1.5000 | 0.00100 | -1.2500 | 0.00300 |"
    assert lines[3] == "| 2 | -1.7500 | 0.00200 | – | – |"


def test_the_driver_sets_the_run_scripts_directau_line(harness):
    args = harness.OFFICIAL_ARGS
    assert (args["model"], args["num_layers"], args["loss"], args["regs"], args["gammas"]) == \
        ("MLP", 2, "align", ["uniformity"], [1.0])
    assert (args["batch_size"], args["lr"], args["weight_decay"], args["degree_init"], args["degree_init_str"]) == \
        (4096, 1e-3, 0.0, True, 1.0)
    compile(harness.DRIVER, "driver.py", "exec")  # the driver the released checkout runs is valid Python
