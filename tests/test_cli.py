"""The `recrepro` command line: the entry points the rules call, and its error reporting."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from recrepro.cli import main


def test_synth_preprocess_split_round_trip(tmp_path, repo_root):
    raw = tmp_path / "raw" / "synthetic"
    assert main(["data", "synth", "--raw-dir", str(raw), "--spec", '{"users": 40, "items": 200}']) == 0
    assert main(["data", "preprocess", "synthetic", "--protocol", "fedrap", "--config", str(repo_root / "config.yaml"),
                 "--raw-dir", str(raw), "--out-dir", str(tmp_path / "proc")]) == 0
    stats = json.loads((tmp_path / "proc" / "stats.json").read_text())
    assert stats["users"] == 40 and stats["recipe"]["user_min"] == 10
    assert main(["data", "split", "--processed-dir", str(tmp_path / "proc"), "--split", "leave_one_out",
                 "--seed", "3", "--out-dir", str(tmp_path / "split")]) == 0
    manifest = json.loads((tmp_path / "split" / "manifest.json").read_text())
    assert manifest["files"]["test.parquet"]["rows"] == 40
    assert len(pd.read_parquet(tmp_path / "split" / "negatives.parquet")) == 40 * 99


def test_unknown_dataset_is_one_clear_line(capsys):
    assert main(["data", "describe", "movielens-99"]) == 1
    err = capsys.readouterr().err
    assert "movielens-99" in err and "ml-100k" in err and "Traceback" not in err


def test_unknown_protocol_is_one_clear_line(tmp_path, capsys, repo_root):
    raw = tmp_path / "raw"
    main(["data", "synth", "--raw-dir", str(raw), "--spec", '{"users": 20, "items": 20}'])
    assert main(["data", "preprocess", "synthetic", "--protocol", "nope", "--config", str(repo_root / "config.yaml"),
                 "--raw-dir", str(raw), "--out-dir", str(tmp_path / "p")]) == 1
    assert "unknown protocol 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


def test_describe_lists_urls_and_licence(capsys):
    assert main(["data", "describe", "ml-100k"]) == 0
    out = capsys.readouterr().out
    assert "ml-100k.zip" in out and "licence" in out
