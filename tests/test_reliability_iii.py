"""Reliability III (issue 47): no silent wrong number from a damaged checkpoint, a changed input or a
broken record; clear refusals where a run cannot go on.

``docs/reliability.md`` ("Fixed in issue 47") lists every case and the test here that checks it.
The tests that run Snakemake are marked ``workflow``. The end-to-end checkpoint tests run
``recrepro prism train`` from a snapshot of the package in a git repository of its own, so that
the code (and its commit) is what the test makes it, not what the checkout holds at the moment.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_resume import (  # noqa: F401  (prism_split is a fixture)
    PRISM_CASES,
    Killed,
    _assert_same_run,
    _planted,
    _prism_cli,
    _run_files,
    _settings,
    kill_after_saves,
    prism_split,
)
from test_workflow import REPO, snakemake

from recrepro.runtime import checkpoints as C
from recrepro.papers.prism import trainer as T

EPOCHS = 60
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# ============================================================ helpers: damage, snapshot, kill


def member_data(path: Path, name: str | None = None) -> tuple[int, int]:
    """(offset, size) of the bytes of one member of a checkpoint's zip archive (default: the largest)."""
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        info = next(i for i in infos if i.filename.endswith(name)) if name else max(infos, key=lambda i: i.file_size)
    with open(path, "rb") as fh:
        fh.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", fh.read(4))
    return info.header_offset + 30 + name_len + extra_len, info.file_size


def damage(path: Path, how: str) -> None:
    """Flip one byte (a float's exponent byte) or zero 4 KiB inside the largest member; the size stays."""
    offset, size = member_data(path)
    size_before = path.stat().st_size
    with open(path, "r+b") as fh:
        if how == "flip":
            fh.seek(offset + 4 * (size // 8) + 3)
            byte = fh.read(1)
            fh.seek(-1, os.SEEK_CUR)
            fh.write(bytes([byte[0] ^ 0x40]))
        else:
            assert size >= 4096, "the largest member is smaller than the 4 KiB to zero"
            fh.seek(offset)
            fh.write(b"\0" * 4096)
    assert path.stat().st_size == size_before


def snapshot(dest: Path) -> Path:
    """A copy of ``src/recrepro`` in a git repository of its own (one commit); returns its ``src``."""
    src = dest / "src"
    shutil.copytree(REPO / "src" / "recrepro", src / "recrepro", ignore=shutil.ignore_patterns("__pycache__"))
    git(dest, "init", "-q")
    commit_all(dest, "snapshot")
    return src


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def cli_env(src: Path) -> dict[str, str]:
    return {**os.environ, **ONE_THREAD, "PYTHONPATH": str(src)}


def run_cli(src: Path, split: Path, out: Path, ckpt: Path | None, epochs: int = EPOCHS) -> subprocess.CompletedProcess:
    proc = subprocess.run(_prism_cli(split, out, ckpt, epochs), env=cli_env(src), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def start_and_kill(src: Path, split: Path, out: Path, ckpt: Path) -> int:
    """Start a training run, SIGKILL it once a saved epoch is in its ledger; the epoch it was killed at."""
    proc = subprocess.Popen(_prism_cli(split, out, ckpt, EPOCHS), env=cli_env(src), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        ledger = C.usage_path(ckpt)
        while proc.poll() is None and time.monotonic() < deadline and not (
                ledger.exists() and json.loads(ledger.read_text() or "{}").get("current")):
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    epoch = torch.load(ckpt, weights_only=True)["state"]["epoch"]
    assert 1 <= epoch < EPOCHS
    return epoch


@pytest.fixture(scope="module")
def reference(prism_split, tmp_path_factory):
    """The uninterrupted record of the end-to-end run, from a snapshot of the package."""
    base = tmp_path_factory.mktemp("reference")
    src = snapshot(base / "code")
    run_cli(src, prism_split, base / "ref", None)
    files = _run_files(base / "ref")
    assert {"metrics.json", "per_user.parquet", "history.json"} <= files.keys()
    return files


# ============================================================ 1. damaged checkpoint, same size


@pytest.mark.parametrize("how", ["flip", "zero"])
def test_a_damaged_checkpoint_of_the_same_size_restarts_cleanly(how, tmp_path, monkeypatch, caplog,
                                                                 one_torch_thread):
    train, val = _planted()
    settings = _settings(PRISM_CASES["directau_coupled_wd"], dim=48)  # the largest table holds over 4 KiB
    ckpt = tmp_path / "c"
    kill_after_saves(monkeypatch, 3)
    with pytest.raises(Killed):
        T.train(train, val, settings, checkpoint=ckpt)
    monkeypatch.undo()
    damage(ckpt, how)
    epochs_seen: list[int] = []
    with caplog.at_level(logging.INFO, logger="recrepro.runtime.checkpoints"):
        run = T.train(train, val, settings, checkpoint=ckpt, on_epoch=lambda e, s: epochs_seen.append(e))
    assert "damaged" in caplog.text and "CRC-32" in caplog.text and str(ckpt) in caplog.text
    assert "resuming" not in caplog.text and epochs_seen[0] == 1  # started over
    _assert_same_run(T.train(train, val, settings), run)


def test_a_damaged_side_file_restarts_cleanly(tmp_path, caplog):
    path = tmp_path / "x.ckpt"
    C.save_checkpoint(path, {"epoch": 3}, key="k", arrays={"D": np.arange(4096, dtype=np.float32)})
    side = next(tmp_path.glob("x.ckpt.ckpt-*.D.npy"))
    with open(side, "r+b") as fh:
        fh.seek(-7, os.SEEK_END)
        fh.write(b"\x7f")
    with caplog.at_level(logging.WARNING, logger="recrepro.runtime.checkpoints"):
        assert C.load_checkpoint(path, key="k") is None
    assert "damaged" in caplog.text and side.name in caplog.text


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_prism_cli_damaged_checkpoint_restarts_to_the_uninterrupted_record(prism_split, reference, tmp_path):
    src = snapshot(tmp_path / "code")
    ckpt, out = tmp_path / "ckpt" / "run.ckpt", tmp_path / "resumed"
    start_and_kill(src, prism_split, out, ckpt)
    damage(ckpt, "zero")
    rerun = run_cli(src, prism_split, out, ckpt)
    warning = [line for line in rerun.stderr.splitlines() if "WARNING" in line]
    assert any("damaged" in line and str(ckpt) in line for line in warning), rerun.stderr[-2000:]
    assert "resuming from checkpoint" not in rerun.stderr
    assert _run_files(out) == reference  # byte for byte, metrics.json included
    assert "pieces" not in json.loads((out / "provenance.json").read_text())  # a run in one piece


# ============================================================ 2. checkpoint of other code


def test_a_checkpoint_of_other_code_restarts_naming_both_commits(tmp_path, monkeypatch, caplog, one_torch_thread):
    train, val = _planted()
    settings = _settings(PRISM_CASES["bpr_prism_alpha"])
    kill_after_saves(monkeypatch, 2)
    with pytest.raises(Killed):
        T.train(train, val, settings, checkpoint=tmp_path / "c")
    monkeypatch.undo()
    written = C.code_fingerprint()
    later = {**written, "commit": "c0ffee" * 6 + "c0ff", "source_sha256": "5" * 64}
    monkeypatch.setattr(C, "code_fingerprint", lambda: later)  # the loss changed since the kill
    with caplog.at_level(logging.INFO, logger="recrepro.runtime.checkpoints"):
        run = T.train(train, val, settings, checkpoint=tmp_path / "c")
    assert "written by other code" in caplog.text and "c0ffeec0ffee" in caplog.text
    assert str(written["commit"])[:12] in caplog.text
    assert "resuming" not in caplog.text
    _assert_same_run(T.train(train, val, settings), run)


def test_code_fingerprint_covers_what_trains_and_not_what_draws(tmp_path):
    src = snapshot(tmp_path / "code")
    probe = "from recrepro.runtime.checkpoints import code_fingerprint as f; import json; print(json.dumps(f()))"

    def fingerprint() -> dict:
        done = subprocess.run([sys.executable, "-c", probe], env=cli_env(src), capture_output=True, text=True,
                              check=True, timeout=120)
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = fingerprint()
    assert first["commit"] == git(tmp_path / "code", "rev-parse", "HEAD") and len(first["source_sha256"]) == 64
    with open(src / "recrepro" / "scorecard" / "render.py", "a") as fh:
        fh.write("\n# drawing only\n")
    assert fingerprint()["source_sha256"] == first["source_sha256"]
    with open(src / "recrepro" / "models" / "losses.py", "a") as fh:
        fh.write("\n# a change to what trains\n")
    assert fingerprint()["source_sha256"] != first["source_sha256"]


def test_code_fingerprint_leaves_out_the_papers_a_process_does_not_train(tmp_path):
    """A paper never imports another (import-linter: papers-independent), so an edit to PRISM or to
    λOpt's drift check leaves a λOpt checkpoint resumable; an edit to λOpt's model does not."""
    src = snapshot(tmp_path / "code")

    def fingerprint(paper_module: str) -> str:
        probe = (f"import {paper_module}; from recrepro.runtime.checkpoints import code_fingerprint as f; "
                 "print(f()['source_sha256'])")
        done = subprocess.run([sys.executable, "-c", probe], env=cli_env(src), capture_output=True, text=True,
                              check=True, timeout=120)
        return done.stdout.strip().splitlines()[-1]

    lambdaopt, prism = "recrepro.papers.lambdaopt.mf_lambdaopt", "recrepro.papers.prism.trainer"
    first = {m: fingerprint(m) for m in (lambdaopt, prism)}
    assert first[lambdaopt] != first[prism]
    for edited in ("papers/prism/trainer.py", "papers/lambdaopt/drift.py", "records/drift.py", "reporting/plotting.py"):
        with open(src / "recrepro" / edited, "a") as fh:
            fh.write("\n# edited\n")
        assert fingerprint(lambdaopt) == first[lambdaopt], edited
    assert fingerprint(prism) != first[prism]          # PRISM's own trainer changed
    # the paper's own command line stays in: it turns the job's arguments into the training call
    with open(src / "recrepro" / "papers" / "lambdaopt" / "cli.py", "a") as fh:
        fh.write("\n# edited\n")
    second = fingerprint(lambdaopt)
    assert second != first[lambdaopt]
    first[lambdaopt] = second
    with open(src / "recrepro" / "papers" / "lambdaopt" / "mf_lambdaopt.py", "a") as fh:
        fh.write("\n# a change to what trains\n")
    assert fingerprint(lambdaopt) != first[lambdaopt]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_prism_cli_resumed_under_another_commit_records_both_or_restarts(prism_split, reference, tmp_path):
    repo = tmp_path / "code"
    src = snapshot(repo)
    first = git(repo, "rev-parse", "HEAD")
    # (a) killed at one commit, resumed at a later one that changed nothing that trains: the record
    # is the uninterrupted one and its provenance names both commits
    ckpt, out = tmp_path / "ckpt" / "a.ckpt", tmp_path / "a"
    start_and_kill(src, prism_split, out, ckpt)
    (repo / "NOTES.txt").write_text("a later commit\n")
    second = commit_all(repo, "docs only")
    rerun = run_cli(src, prism_split, out, ckpt)
    assert "resuming from checkpoint" in rerun.stderr, rerun.stderr[-2000:]
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["git"]["commit"] == second and prov["pieces"] == 2
    assert [piece["commit"] for piece in prov["earlier_pieces"]["code"]] == [first]
    assert _run_files(out) == reference
    # (b) killed, then the code that trains changes: the checkpoint is not resumed, the run starts over
    ckpt, out = tmp_path / "ckpt" / "b.ckpt", tmp_path / "b"
    start_and_kill(src, prism_split, out, ckpt)
    with open(src / "recrepro" / "models" / "losses.py", "a") as fh:
        fh.write("\n# a later version of the losses\n")
    third = commit_all(repo, "losses changed")
    rerun = run_cli(src, prism_split, out, ckpt)
    warning = [line for line in rerun.stderr.splitlines() if "written by other code" in line]
    assert warning and second[:12] in warning[0] and third[:12] in warning[0], rerun.stderr[-2000:]
    assert "resuming from checkpoint" not in rerun.stderr
    assert "pieces" not in json.loads((out / "provenance.json").read_text())
    assert _run_files(out) == reference


# ============================================================ 3. processed files verified


def _processed(tmp_path: Path) -> Path:
    from recrepro.datasets import load_raw
    from recrepro.datasets.synthetic import SyntheticSpec, generate_synthetic
    from recrepro.io import write_parquet
    from recrepro.datasets.preprocessing import preprocess, resolve_recipe, write_preprocessed

    frame = generate_synthetic(SyntheticSpec(seed=5, users=80, items=60, density=0.1, latent_rank=4))
    write_parquet(tmp_path / "raw" / "interactions.parquet", frame)
    recipe = resolve_recipe({"prism": {"default": {"positive": None, "filter": {"mode": "none"}}}},
                            "prism", "synthetic", {})
    write_preprocessed(preprocess(load_raw("synthetic", tmp_path / "raw"), recipe), tmp_path / "processed")
    return tmp_path / "processed"


@pytest.mark.parametrize("name", ["interactions.parquet", "user_map.parquet", "item_map.parquet"])
def test_split_refuses_a_processed_file_changed_after_preprocessing(tmp_path, capsys, name):
    from recrepro.cli.main import main as cli_main
    from recrepro.io import sha256_file

    processed = _processed(tmp_path)
    recorded = sha256_file(processed / name)
    path = processed / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit, same size
    path.write_bytes(bytes(data))
    rc = cli_main(["data", "split", "--processed-dir", str(processed), "--split", "random_ratio", "--seed", "1",
                   "--params", "{}", "--out-dir", str(tmp_path / "split")])
    err = capsys.readouterr().err
    assert rc == 1 and str(path) in err and recorded in err and sha256_file(path) in err
    assert not (tmp_path / "split").exists()


def test_a_truncated_processed_file_is_refused_by_its_size(tmp_path):
    from recrepro.datasets.preprocessing import ProcessedDataError, read_interactions

    processed = _processed(tmp_path)
    with open(processed / "interactions.parquet", "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(ProcessedDataError, match=r"interactions\.parquet: 100 bytes, but preprocessing wrote"):
        read_interactions(processed)


@pytest.mark.workflow
def test_workflow_split_stops_on_a_flipped_processed_file(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    manifest = "data/splits/synthetic/prism/random_ratio/seed123/manifest.json"
    snakemake(manifest, "--cores", "1", "--directory", str(work), "--configfile", str(REPO / "config.yaml"))
    path = work / "data/processed/synthetic/prism/interactions.parquet"
    from recrepro.io import sha256_file

    before = sha256_file(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    after = sha256_file(path)
    proc = snakemake(manifest, "--cores", "1", "--directory", str(work), "--configfile", str(REPO / "config.yaml"),
                     "--forcerun", "split_dataset", check=False)
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "ProcessedDataError" in console and "interactions.parquet" in console
    assert before in console and after in console
    assert not (work / manifest).exists()


# ============================================================ 4. records read back


def _record(run_dir: Path, **overall: float) -> Path:
    run_dir.mkdir(parents=True)
    metrics = {"dataset": "d", "split": "s", "method": "m", "seed": 0, "tier": "smoke",
               "overall": {"ndcg@20": 0.3, **overall}, "strata": {}, "per_k": {}, "counts": {}}
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return run_dir


def test_invalid_json_in_a_record_names_the_file(tmp_path):
    from recrepro.scorecard.runs import load_runs

    run = _record(tmp_path / "r")
    text = (run / "metrics.json").read_text()
    (run / "metrics.json").write_text(text[:200] + "}" + text[200:])
    with pytest.raises(ValueError, match=r"metrics\.json: invalid JSON at line \d+, column \d+") as err:
        load_runs([run])
    assert str(run / "metrics.json") in str(err.value)


@pytest.mark.parametrize(("key", "value", "why"), [
    ("ndcg@20", float("nan"), "nan"), ("hr@10", float("inf"), "inf"), ("ndcg@20", 5.0, r"outside \[0, 1\]"),
    ("auc", -0.1, r"outside \[0, 1\]"), ("recall_liang@20", 1.5, r"outside \[0, 1\]"),
])
def test_a_record_with_a_non_finite_or_out_of_range_metric_is_refused(tmp_path, key, value, why):
    from recrepro.records import RecordValueError
    from recrepro.scorecard.runs import load_runs

    run = _record(tmp_path / "r", **{key: value})
    with pytest.raises(RecordValueError, match=why) as err:
        load_runs([run])
    assert str(run / "metrics.json") in str(err.value) and key in str(err.value)


def test_a_record_with_good_values_is_read(tmp_path):
    from recrepro.scorecard.runs import load_runs

    run = _record(tmp_path / "r", **{"hr@10": 1.0, "auc": 0.0, "param_error": 13.9, "epsilon": 16.0})
    assert len(load_runs([run])) == 5


@pytest.mark.parametrize(("history", "why"), [
    ({"val_ndcg": [0.1, float("nan"), 0.2]}, "nan"),
    ({"val_ndcg": [0.1, 5.0, 0.2]}, r"outside \[0, 1\]"),
    ({"best_val_ndcg": float("inf")}, "inf"),
])
def test_a_history_with_a_nan_or_a_spike_is_refused(tmp_path, history, why):
    from recrepro.records import RecordValueError, read_history

    (tmp_path / "history.json").write_text(json.dumps(history))
    with pytest.raises(RecordValueError, match=why) as err:
        read_history(tmp_path)
    assert str(tmp_path / "history.json") in str(err.value)


def test_a_parquet_history_refuses_infinity_and_a_spike_but_keeps_gaps(tmp_path):
    from recrepro.records import RecordValueError, read_history

    pd.DataFrame({"epoch": [0.0, 1.0], "val_auc": [np.nan, 0.7]}).to_parquet(tmp_path / "history.parquet")
    assert read_history(tmp_path, "history.parquet")["val_auc"].isna().sum() == 1  # a gap: an epoch not evaluated
    for column, values in (("val_auc", [0.5, 5.0]), ("loss", [1.0, np.inf])):
        pd.DataFrame({column: values}).to_parquet(tmp_path / "history.parquet")
        with pytest.raises(RecordValueError, match=column):
            read_history(tmp_path, "history.parquet")


def test_every_committed_record_reads_back():
    from recrepro.records import read_history, read_metrics

    runs = sorted((REPO / "results").rglob("metrics.json"))
    for path in runs:
        read_metrics(path.parent)
    for name in ("history.json", "history.parquet"):
        for path in sorted((REPO / "results").rglob(name)):
            read_history(path.parent, name)


def test_a_committed_record_missing_from_the_tree_is_refused(tmp_path):
    from recrepro.io import CommittedFileMissingError, check_committed_present

    run = _record(tmp_path / "results" / "r")
    git(tmp_path, "init", "-q")
    commit_all(tmp_path, "records")
    check_committed_present(["results/r/metrics.json", "results/never/metrics.json"], tmp_path)  # fine
    (run / "metrics.json").unlink()
    with pytest.raises(CommittedFileMissingError, match=r"git checkout -- results/r/metrics\.json"):
        check_committed_present(["results/r/metrics.json"], tmp_path)
    git(tmp_path, "rm", "-q", "--cached", "results/r/metrics.json")  # dropped on purpose: fine
    check_committed_present(["results/r/metrics.json"], tmp_path)


# ============================================================ 4, 5. a failed redraw (workflow)


# tests/test_workflow.py::test_a_failed_redraw_names_the_bad_record_and_leaves_committed_files (it redraws
# the smoke run's baselines records, which that file makes anyway)


# ============================================================ 6. two processes on one run


def test_a_second_process_on_the_same_run_stops_naming_the_first(tmp_path):
    ckpt = tmp_path / "run.ckpt"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from recrepro.runtime import checkpoints as C; "
         f"C.Checkpointer({str(ckpt)!r}, 'k'); print('locked', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        expected = rf"another process \(pid {holder.pid}\) is training this run"
        with pytest.raises(C.CheckpointLockedError, match=expected):
            C.Checkpointer(ckpt, "k")
    finally:
        holder.kill()
        holder.wait(timeout=30)
    C.Checkpointer(ckpt, "k").load()  # the holder is gone: the lock is free
    C.remove_checkpoint(ckpt)
    assert not C.lock_path(ckpt).exists()


def test_two_prism_cli_processes_on_one_record(prism_split, tmp_path):
    # both with the one log a workflow job names (`--log`): the refused second leaves the first's log whole
    src = snapshot(tmp_path / "code")
    ckpt, out, log = tmp_path / "ckpt" / "run.ckpt", tmp_path / "out", tmp_path / "logs" / "run.log"
    cmd = _prism_cli(prism_split, out, ckpt, 100_000) + ["--log", str(log)]
    first = subprocess.Popen(cmd, env=cli_env(src), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while first.poll() is None and time.monotonic() < deadline and not (
                ckpt.exists() and "epoch" in (log.read_text() if log.exists() else "")):
            time.sleep(0.01)
        before = log.read_text()
        started = time.monotonic()
        second = subprocess.run(cmd, env=cli_env(src), capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
        assert first.poll() is None, "the first run ended early"
    finally:
        first.kill()
        first.wait(timeout=60)
    assert second.returncode == 1 and took < 60
    assert f"another process (pid {first.pid}) is training this run" in second.stderr
    assert any(line.startswith("recrepro: error: CheckpointLockedError") for line in second.stderr.splitlines())
    assert not (out / "metrics.json").exists()
    after = log.read_text()
    assert after.startswith(before) and "CheckpointLockedError" not in after  # the first's log, not truncated


# ============================================================ 7. disk full while writing a checkpoint


@pytest.mark.parametrize("failure", [
    RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4736 vs 4630"),
    OSError(errno.ENOSPC, "No space left on device"),
])
def test_disk_full_while_writing_a_checkpoint_is_named_and_keeps_the_previous_one(tmp_path, monkeypatch, failure):
    path = tmp_path / "run.ckpt"
    C.save_checkpoint(path, {"epoch": 1}, key="k")
    before = path.read_bytes()

    def full_disk(obj, fh, *args, **kwargs):
        fh.write(b"PK\x03\x04 partial")
        raise failure

    monkeypatch.setattr(C.torch, "save", full_disk)
    with pytest.raises(C.CheckpointWriteError, match=rf"no space left while writing checkpoint {path}"):
        C.save_checkpoint(path, {"epoch": 2}, key="k")
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["run.ckpt"]


def test_another_error_while_writing_a_checkpoint_is_not_called_disk_full(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("something else")

    monkeypatch.setattr(C.torch, "save", broken)
    with pytest.raises(RuntimeError, match="something else") as err:
        C.save_checkpoint(tmp_path / "run.ckpt", {"epoch": 2}, key="k")
    assert not isinstance(err.value, C.CheckpointWriteError)


# ============================================================ 9. seeds out of range


@pytest.mark.parametrize("seed", [-1, 2**64, 2**32])
@pytest.mark.parametrize(("override", "where"), [
    (lambda s: {"tiers.smoke.data": [{"dataset": "synthetic", "protocol": "prism", "split": "random_ratio",
                                       "seeds": [123, s]}]}, "tiers/smoke/data/0/seeds/1"),
    (lambda s: {"data.synthetic.seed": s}, "data/synthetic/seed"),
    (lambda s: {"seeds": [s]}, "seeds/0"),
])
def test_seeds_out_of_range_are_refused_naming_seed_and_place(seed, override, where):
    from recrepro.config import ConfigError, load_config

    with pytest.raises(ConfigError) as err:
        load_config(REPO / "config.yaml", override(seed))
    first = str(err.value).splitlines()[0]
    assert where in first and str(seed) in first


def test_exadmm_split_seed_out_of_range_is_refused():
    from recrepro.config import ConfigError, load_config

    entry = {"dataset": "synthetic", "protocol": "exadmm", "split": "strong_generalization", "split_seed": -1,
             "seeds": [0]}
    with pytest.raises(ConfigError, match="exadmm/tiers/smoke/datasets/0/split_seed: -1"):
        load_config(REPO / "config.yaml", {"exadmm.tiers.smoke.datasets": [entry]})


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_make_split_refuses_a_seed_out_of_range(tmp_path, seed):
    from recrepro.datasets.preprocessing import read_interactions
    from recrepro.datasets.splits import make_split

    data = read_interactions(_processed(tmp_path))
    with pytest.raises(ValueError, match=rf"seed {seed} is out of range"):
        make_split(data, "random_ratio", {}, seed)


# ============================================================ 10. YAML syntax errors and duplicate keys


def test_a_duplicate_key_in_the_config_is_refused_with_its_line(tmp_path):
    from recrepro.config import ConfigError, load_config

    text = (REPO / "config.yaml").read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("threads:"))
    lines.insert(at + 1, "threads: 7")
    (tmp_path / "config.yaml").write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=rf"line {at + 2}, column 1: duplicate key 'threads' "
                                          rf"\(first given at line {at + 1}\)"):
        load_config(tmp_path / "config.yaml")


def test_a_nested_duplicate_key_is_refused_too(tmp_path):
    from recrepro.config import ConfigError, load_yaml_file

    (tmp_path / "c.yaml").write_text("data:\n  root: a\n  mirror: null\n  root: b\n")
    with pytest.raises(ConfigError, match=r"line 4, column 3: duplicate key 'root' \(first given at line 2\)"):
        load_yaml_file(tmp_path / "c.yaml")


def test_a_yaml_syntax_error_names_line_and_column(tmp_path):
    from recrepro.config import ConfigError, load_config

    (tmp_path / "config.yaml").write_text("tier: smoke\nthreads: [2\ndevice: cpu\n")
    with pytest.raises(ConfigError, match=r"config\.yaml: YAML syntax error at line 3, column 7: .*"
                                          r"flow sequence, which starts at line 2, column 10"):
        load_config(tmp_path / "config.yaml")


@pytest.mark.workflow
@pytest.mark.parametrize(("edit", "needle"), [
    (lambda text: text.replace("\ndevice: auto", "\ndevice: cpu\ndevice: auto", 1), "duplicate key 'device'"),
    (lambda text: text.replace("\nthreads: 2", "\nthreads: [2", 1), "YAML syntax error at line"),
])
def test_the_workflow_refuses_a_broken_config_yaml_naming_the_line(tmp_path, edit, needle):
    work = tmp_path / "work"
    work.mkdir()
    text = (REPO / "config.yaml").read_text()
    broken = edit(text)
    assert broken != text
    (work / "config.yaml").write_text(broken)
    proc = snakemake("-n", "--directory", str(work), check=False, timeout=300)
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0 and needle in console and "config.yaml: " in console
