"""Tests for run records: metrics/per-user/provenance files, hashes and the finiteness guard."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recrepro.io import sha256_file, write_json, write_parquet
from recrepro.records import (
    ManifestMismatchError,
    NonFiniteError,
    RunRecordError,
    canonical_json,
    check_finite,
    config_sha256,
    git_state,
    process_cpu_seconds,
    read_metrics,
    read_per_user,
    split_file_hashes,
    write_run_record,
)

PROVENANCE_KEYS = {
    "schema_version", "run", "config", "config_sha256", "split", "git", "versions", "seed", "device",
    "device_name", "threads", "host", "started_at", "finished_at", "wall_seconds", "cpu_seconds", "peak_rss_mb",
    "benchmark_file",
}
META = {"dataset": "toy", "split": "random_80_20", "method": "mostpop", "tier": "smoke", "paper": "baselines"}


def make_split(folder: Path) -> Path:
    """A two-file split with a manifest.json whose hashes are correct."""
    write_parquet(folder / "train.parquet", pd.DataFrame({"user": [0, 0, 1], "item": [1, 2, 0]}))
    write_parquet(folder / "test.parquet", pd.DataFrame({"user": [1], "item": [2]}))
    manifest = {
        "files": {
            name: {"sha256": sha256_file(folder / name), "rows": rows}
            for name, rows in (("train.parquet", 3), ("test.parquet", 1))
        }
    }
    write_json(folder / "manifest.json", manifest)
    return folder / "manifest.json"


def record_kwargs(**overrides):
    kwargs = dict(
        overall={"ndcg@20": 0.25, "hr@10": np.float64(0.5), "coverage@20": 0.1},
        strata={"popular": {"ndcg@20": 0.4}, "unpopular": {"ndcg@20": 0.05}},
        # Users deliberately out of order: the file must come out sorted.
        per_user=pd.DataFrame({"user": [2, 0, 1], "ndcg@20": [0.5, 0.25, 0.0], "hr@10": [1.0, 0.5, 0.0]}),
        counts={"n_users_evaluated": 3, "n_users_skipped_no_targets": np.int64(1)},
        meta=dict(META),
        config_slice={"model": {"k": 20}, "lr": 0.01},
        split_manifest=None,
        seed=7,
        device="cpu",
        wall_seconds=12.5,
        benchmark_file="benchmarks/out/x.tsv",
    )
    kwargs.update(overrides)
    return kwargs


def test_record_files_and_provenance_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    manifest = make_split(tmp_path / "split")
    run_dir = tmp_path / "run"
    paths = write_run_record(run_dir, **record_kwargs(split_manifest=manifest))

    assert {p.name for p in run_dir.iterdir()} == {"metrics.json", "per_user.parquet", "provenance.json"}
    assert paths["metrics"] == run_dir / "metrics.json"

    metrics = read_metrics(run_dir)
    assert metrics["overall"] == {"ndcg@20": 0.25, "hr@10": 0.5, "coverage@20": 0.1}
    assert metrics["strata"] == {"popular": {"ndcg@20": 0.4}, "unpopular": {"ndcg@20": 0.05}}
    assert metrics["counts"] == {"n_users_evaluated": 3, "n_users_skipped_no_targets": 1}
    assert (metrics["dataset"], metrics["split"], metrics["method"], metrics["tier"]) == (
        "toy", "random_80_20", "mostpop", "smoke")
    assert metrics["seed"] == 7 and metrics["paper"] == "baselines"

    per_user = read_per_user(run_dir)
    assert list(per_user.columns) == ["user", "hr@10", "ndcg@20"]
    assert per_user["user"].tolist() == [0, 1, 2]
    assert per_user["ndcg@20"].tolist() == [0.25, 0.0, 0.5]

    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert set(provenance) == PROVENANCE_KEYS
    assert provenance["config"] == {"model": {"k": 20}, "lr": 0.01}
    # Hand-written canonical form: sorted keys, no spaces.
    assert provenance["config_sha256"] == hashlib.sha256(b'{"lr":0.01,"model":{"k":20}}').hexdigest()
    assert provenance["split"]["files"] == {
        "test.parquet": {"sha256": sha256_file(tmp_path / "split" / "test.parquet"), "rows": 1},
        "train.parquet": {"sha256": sha256_file(tmp_path / "split" / "train.parquet"), "rows": 3},
    }
    assert provenance["split"]["verified"] is True
    assert provenance["split"]["manifest_sha256"] == sha256_file(manifest)
    assert provenance["seed"] == 7 and provenance["device"] == "cpu"
    assert provenance["wall_seconds"] == 12.5
    assert provenance["benchmark_file"] == "benchmarks/out/x.tsv"
    assert provenance["threads"]["OMP_NUM_THREADS"] == "3"
    assert {"torch_num_threads", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"} <= set(provenance["threads"])
    assert set(provenance["versions"]) >= {"python", "numpy", "scipy", "pandas", "pyarrow", "torch", "recrepro"}
    assert provenance["versions"]["numpy"] == np.__version__
    assert set(provenance["git"]) == {"commit", "dirty"}
    assert provenance["host"]["hostname"]
    # the CPU and its widest SIMD level: records of one config agree bit for bit only on one kind of CPU
    assert set(provenance["host"]) == {"hostname", "platform", "cpu", "cpu_simd"}
    if Path("/proc/cpuinfo").is_file():
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")).split()
        expected = "AVX512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE4.2" if "sse4_2" in flags else None
        assert provenance["host"]["cpu_simd"] == expected and provenance["host"]["cpu"]
    assert provenance["peak_rss_mb"] > 1.0
    assert 0.0 < provenance["cpu_seconds"]  # at least the interpreter's start-up
    assert provenance["run"]["method"] == "mostpop" and provenance["run"]["seed"] == 7


def test_wall_time_measured_from_started_at(tmp_path):
    import time

    write_run_record(tmp_path / "run", **record_kwargs(wall_seconds=None, started_at=time.time() - 5.0))
    provenance = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert 5.0 <= provenance["wall_seconds"] < 60.0
    assert provenance["started_at"] is not None


def test_a_resumed_runs_times_sum_its_pieces(tmp_path):
    earlier = {"pieces": 2, "wall_seconds": 100.25, "cpu_seconds": 80.5}
    # this process's CPU time goes on top: bracketed by readings around the write (a test worker may
    # have run for minutes before this test, so no fixed bound holds)
    before = process_cpu_seconds()
    write_run_record(tmp_path / "run", **record_kwargs(), earlier=earlier)
    after = process_cpu_seconds()
    provenance = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert provenance["wall_seconds"] == 12.5 + 100.25 and provenance["pieces"] == 3
    # the earlier pieces' code is unknown here (the ledger named none): listed as such, never guessed
    assert provenance["earlier_pieces"] == {**earlier, "code": [None]}
    assert 80.5 + before - 0.001 <= provenance["cpu_seconds"] <= 80.5 + after + 0.001
    # earlier pieces not measured (a checkpoint from before the ledger): counted, times left to this piece
    unmeasured = {"pieces": 1, "wall_seconds": None, "cpu_seconds": None}
    before = process_cpu_seconds()
    write_run_record(tmp_path / "old", **record_kwargs(), earlier=unmeasured)
    after = process_cpu_seconds()
    provenance = json.loads((tmp_path / "old" / "provenance.json").read_text())
    assert provenance["wall_seconds"] == 12.5 and provenance["pieces"] == 2
    assert provenance["earlier_pieces"] == {**unmeasured, "code": [None]}
    assert before - 0.001 <= provenance["cpu_seconds"] <= after + 0.001
    # a run in one piece says nothing about pieces
    write_run_record(tmp_path / "one", **record_kwargs(), earlier={"pieces": 0, "wall_seconds": 0.0,
                                                                    "cpu_seconds": 0.0})
    assert set(json.loads((tmp_path / "one" / "provenance.json").read_text())) == PROVENANCE_KEYS


def test_metrics_files_are_deterministic(tmp_path):
    write_run_record(tmp_path / "a", **record_kwargs())
    shuffled = record_kwargs()
    shuffled["overall"] = dict(reversed(list(shuffled["overall"].items())))
    shuffled["per_user"] = shuffled["per_user"].iloc[[2, 1, 0]]
    write_run_record(tmp_path / "b", **shuffled)
    for name in ("metrics.json", "per_user.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_config_hash_stable_and_sensitive():
    config = {"model": {"k": 20, "reg": [0.1, 0.2]}, "lr": 0.01}
    reordered = {"lr": 0.01, "model": {"reg": [0.1, 0.2], "k": 20}}
    assert canonical_json(config) == '{"lr":0.01,"model":{"k":20,"reg":[0.1,0.2]}}'
    assert config_sha256(config) == config_sha256(reordered)
    assert config_sha256(config) == hashlib.sha256(canonical_json(config).encode()).hexdigest()
    changed = {"model": {"k": 20, "reg": [0.1, 0.3]}, "lr": 0.01}
    assert config_sha256(changed) != config_sha256(config)
    with pytest.raises(ValueError):
        canonical_json({"lr": float("nan")})


def test_manifest_mismatch_raises_and_writes_nothing(tmp_path):
    manifest = make_split(tmp_path / "split")
    assert split_file_hashes(manifest)["verified"] is True
    # The split is regenerated after its manifest was written.
    write_parquet(tmp_path / "split" / "train.parquet", pd.DataFrame({"user": [5], "item": [6]}))
    with pytest.raises(ManifestMismatchError, match=r"train\.parquet.*differs"):
        split_file_hashes(manifest)
    with pytest.raises(ManifestMismatchError, match="train.parquet"):
        write_run_record(tmp_path / "run", **record_kwargs(split_manifest=manifest))
    assert not (tmp_path / "run").exists()
    # Without verification only the manifest's own hashes are recorded.
    assert split_file_hashes(manifest, verify=False)["verified"] is False


def test_manifest_missing_file_and_malformed(tmp_path):
    manifest = make_split(tmp_path / "split")
    (tmp_path / "split" / "test.parquet").unlink()
    with pytest.raises(ManifestMismatchError, match="test.parquet.*missing"):
        split_file_hashes(manifest)
    write_json(tmp_path / "bad" / "manifest.json", {"files": {"train.parquet": {"rows": 3}}})
    with pytest.raises(ManifestMismatchError, match="sha256"):
        split_file_hashes(tmp_path / "bad" / "manifest.json")
    with pytest.raises(ManifestMismatchError, match="not found"):
        split_file_hashes(tmp_path / "nowhere" / "manifest.json")


def test_rewrite_replaces_previous_record(tmp_path):
    write_run_record(tmp_path / "run", **record_kwargs())
    with pytest.raises(NonFiniteError):
        write_run_record(tmp_path / "run", **record_kwargs(overall={"ndcg@20": float("nan"), "hr@10": 0.5}))
    # Validation failed before touching disk: the earlier complete record is intact.
    assert read_metrics(tmp_path / "run")["overall"]["ndcg@20"] == 0.25


def test_non_finite_metric_writes_nothing(tmp_path):
    with pytest.raises(NonFiniteError, match=r"inf in metric overall\['hr@10'\]"):
        write_run_record(tmp_path / "run", **record_kwargs(overall={"ndcg@20": 0.2, "hr@10": float("inf")}))
    per_user = pd.DataFrame({"user": [0, 1], "ndcg@20": [0.1, np.nan]})
    with pytest.raises(NonFiniteError, match="NaN in per-user ndcg@20"):
        write_run_record(tmp_path / "run", **record_kwargs(per_user=per_user))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"meta": {"dataset": "toy", "split": "s", "method": "m"}}, r"meta lacks \['tier'\]"),
        ({"meta": {**META, "seed": 1}}, "may not set"),
        ({"per_user": pd.DataFrame({"user": [0], "recall@20": [0.1]})}, "not keys of overall"),
        ({"per_user": pd.DataFrame({"u": [0], "ndcg@20": [0.1]})}, "'user' column"),
        ({"per_user": pd.DataFrame({"user": [0, 0], "ndcg@20": [0.1, 0.2]})}, "duplicate users"),
        ({"counts": {"n_users_evaluated": -1}}, "non-negative int"),
        ({"overall": {"ndcg@20": "0.2"}}, "must be a number"),
    ],
)
def test_malformed_pieces_rejected(tmp_path, overrides, message):
    with pytest.raises(RunRecordError, match=message):
        write_run_record(tmp_path / "run", **record_kwargs(**overrides))
    assert not (tmp_path / "run").exists()


def test_check_finite_numpy():
    check_finite("user embeddings", np.ones((3, 2), dtype=np.float32), "epoch 3")
    check_finite("item ids", np.arange(5), "load")  # integers cannot be non-finite
    check_finite("loss", 0.5, "step 1")
    embeddings = np.ones((4, 2))
    embeddings[1, 0] = np.nan
    embeddings[2, 1] = np.inf
    with pytest.raises(NonFiniteError) as caught:
        check_finite("user embeddings", embeddings, "epoch 3")
    assert str(caught.value).startswith("NaN in user embeddings at epoch 3")
    assert "1 NaN and 1 infinite of 8 values" in str(caught.value)
    with pytest.raises(NonFiniteError, match=r"^inf in loss at step 9"):
        check_finite("loss", -np.inf, "step 9")
    assert issubclass(NonFiniteError, ValueError)


def test_check_finite_torch():
    torch = pytest.importorskip("torch")
    check_finite("item embeddings", torch.zeros(3, 4), "epoch 0")
    check_finite("indices", torch.arange(4), "epoch 0")
    # A parameter that requires grad, as training code will pass it.
    weights = torch.nn.Parameter(torch.zeros(3, 4))
    with torch.no_grad():
        weights[0, 0] = float("nan")
    with pytest.raises(NonFiniteError, match=r"^NaN in item embeddings at epoch 2 \(1 NaN and 0 infinite of 12"):
        check_finite("item embeddings", weights, "epoch 2")


def test_git_state_outside_and_inside_a_checkout(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "dirty": None}
    assert git_state(tmp_path / "does-not-exist") == {"commit": None, "dirty": None}
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    assert git_state(repo) == {"commit": None, "dirty": None}  # no commit yet
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert git_state(repo) == {"commit": head, "dirty": False}
    (repo / "a.txt").write_text("changed\n")
    assert git_state(repo) == {"commit": head, "dirty": True}


def test_group_by_k_regroups_cutoff_metrics_and_skips_auc():
    from recrepro.records import _group_by_k

    grouped = _group_by_k({"ndcg@20": 0.5, "hr@5": 1.0, "auc": 0.7, "ndcg@5": 0.25})
    assert grouped == {"5": {"hr": 1.0, "ndcg": 0.25}, "20": {"ndcg": 0.5}}
    assert list(grouped) == ["5", "20"]  # numeric order, not string order


# ------------------------------------------------------------------- rank correlations in metrics.json


def _magnitudes(run_dir: Path, norm) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_parquet(run_dir / "magnitudes.parquet", pd.DataFrame({
        "item": np.arange(4), "train_degree": np.array([1, 2, 3, 4]), "norm": np.asarray(norm, dtype=float)}))
    if not (run_dir / "metrics.json").is_file():
        write_json(run_dir / "metrics.json", {"method": "m", "seed": 0, "overall": {"ndcg@20": 0.1}})


def test_rank_correlations_by_hand(tmp_path):
    from recrepro.records import rank_correlation, write_rank_correlations

    # ranks of norm 1, 3, 2, 4 against degree 1..4: Σd² = 2, ρ = 1 - 6·2 / (4·15) = 0.8
    _magnitudes(tmp_path, [0.1, 0.7, 0.5, 0.9])
    write_rank_correlations(tmp_path, "magnitudes.parquet")
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    entry = metrics["rank_correlations"]["magnitudes.parquet"]
    assert entry["rows"] == 4 and entry["spearman"] == {"norm~train_degree": pytest.approx(0.8)}
    assert metrics["overall"] == {"ndcg@20": 0.1}  # the metrics are left as they were
    assert rank_correlation(tmp_path, "magnitudes.parquet", "train_degree", "norm") == (pytest.approx(0.8), 4)
    (tmp_path / "magnitudes.parquet").unlink()
    # the table gone, metrics.json answers, in either order of the columns
    assert rank_correlation(tmp_path, "magnitudes.parquet", "norm", "train_degree") == (pytest.approx(0.8), 4)
    assert rank_correlation(tmp_path, "magnitudes.parquet", "item", "norm") is None
    assert rank_correlation(tmp_path / "elsewhere", "magnitudes.parquet", "train_degree", "norm") is None


def test_an_undefined_rank_correlation_is_kept_as_none(tmp_path):
    from recrepro.records import rank_correlation, write_rank_correlations

    _magnitudes(tmp_path, [0.5, 0.5, 0.5, 0.5])  # constant norms: ρ undefined, and the record still written
    write_rank_correlations(tmp_path, "magnitudes.parquet")
    entry = json.loads((tmp_path / "metrics.json").read_text())["rank_correlations"]["magnitudes.parquet"]
    assert entry["spearman"] == {"norm~train_degree": None}
    assert rank_correlation(tmp_path, "magnitudes.parquet", "train_degree", "norm") is None
    (tmp_path / "magnitudes.parquet").unlink()
    assert rank_correlation(tmp_path, "magnitudes.parquet", "train_degree", "norm") is None


def test_rank_correlations_of_another_table_are_an_error(tmp_path):
    from recrepro.records import RunRecordError, rank_correlation, write_rank_correlations

    _magnitudes(tmp_path, [0.1, 0.7, 0.5, 0.9])
    write_rank_correlations(tmp_path, "magnitudes.parquet")
    _magnitudes(tmp_path, [0.9, 0.7, 0.5, 0.1])  # another run's table beside the old entry
    with pytest.raises(RunRecordError, match="content_sha256"):
        rank_correlation(tmp_path, "magnitudes.parquet", "train_degree", "norm")


def test_normalise_adds_the_rank_correlations_once(tmp_path):
    from recrepro.records import normalise_run_dir

    _magnitudes(tmp_path, [0.4, 0.3, 0.2, 0.1])
    changes = normalise_run_dir(tmp_path)
    assert "metrics.json: magnitudes.parquet's rank correlations -> rank_correlations" in changes
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["rank_correlations"]["magnitudes.parquet"]["spearman"]["norm~train_degree"] == pytest.approx(-1.0)
    assert normalise_run_dir(tmp_path) == []


def test_rank_correlations_stay_out_of_the_provenance(tmp_path):
    entry = {"magnitudes.parquet": {"content_sha256": "0" * 64, "rows": 4, "spearman": {"norm~train_degree": -0.4}}}
    write_run_record(tmp_path, **record_kwargs(meta={**META, "rank_correlations": entry}))
    assert json.loads((tmp_path / "metrics.json").read_text())["rank_correlations"] == entry
    assert "rank_correlations" not in (tmp_path / "provenance.json").read_text()
