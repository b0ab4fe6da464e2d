"""Cluster submission against a real one-node Slurm (issue 9).

``.ci/slurm-up.sh`` starts munged, MariaDB + slurmdbd (accounting, so ``sacct`` works), slurmctld and
slurmd under a temporary directory; ``.ci/slurm-down.sh`` stops them by PID at the end. A slice of the
smoke tier (one split, the two baselines' evaluations, one FedRAP-paper training run, the baselines'
figure and scorecard) is run once locally and once through ``--workflow-profile profiles/slurm``, and:

- the Slurm run exits 0 and its metrics equal the local run's;
- a training job cancelled mid-way with ``scancel`` is resubmitted (``retries``) with twice the memory;
- a job that fails makes Snakemake exit non-zero.

Skipped, with the reason, without root or without the Slurm binaries (``apt-get install slurm-wlm munge
mariadb-server slurmdbd``; ``.ci/run`` does that on CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.workflow

_MISSING = [b for b in ("sbatch", "squeue", "sacct", "scancel", "slurmctld", "slurmd", "munged") if not shutil.which(b)]
if _MISSING:
    pytest.skip(f"Slurm not installed ({', '.join(_MISSING)} missing; apt-get install slurm-wlm munge "
                "mariadb-server slurmdbd, as .ci/run does)", allow_module_level=True)
if os.geteuid() != 0:
    pytest.skip("starting a throw-away Slurm needs root (slurmd runs jobs as their users)", allow_module_level=True)
pytest.importorskip("snakemake_executor_plugin_slurm", reason="snakemake-executor-plugin-slurm not installed "
                    "(pip install -e '.[workflow]')")

SPLIT = ("synthetic", "fedrap", "leave_one_out", 0)
EVALS = [f"results/smoke/baselines/runs/synthetic/fedrap/leave_one_out/{m}/seed0/metrics.json"
         for m in ("mostpop", "random")]
TRAIN = "results/smoke/fedrap/runs/synthetic/leave_one_out/mf/seed0/metrics.json"
LOCAL = ["results/smoke/baselines/figures/baselines.pdf", "results/smoke/baselines/scorecard.md"]
TARGETS = [*EVALS, TRAIN, *LOCAL]
# The slice: one split, one thread per job (same arithmetic in both runs), a small FedRAP buffer.
SLICE = {
    "threads": 1,
    "tiers": {"smoke": {"data": [{"dataset": SPLIT[0], "protocol": SPLIT[1], "split": SPLIT[2],
                                  "seeds": [SPLIT[3]]}], "baselines": ["mostpop", "random"]}},
    "fedrap": {"memory_budget_mb": 256},
}
# Fast polling for a test (the profile's 20 s first check suits real clusters).
FAST = ["--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "2"]


def _env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra or {})
    return env


def _snakemake(work: Path, *args: str, env: dict, timeout: int = 480) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
           "--configfile", str(REPO / "config.yaml"), str(work / "slice.yaml"), "--directory", str(work), *args]
    return subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)


def _workdir(root: Path, name: str) -> Path:
    work = root / name
    work.mkdir()
    (work / "slice.yaml").write_text(yaml.safe_dump(SLICE))
    return work


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running one-node cluster: the environment for its clients (SLURM_CONF). Stopped by PID after."""
    state = tmp_path_factory.mktemp("slurm")
    try:
        up = subprocess.run([str(REPO / ".ci" / "slurm-up.sh"), str(state)], capture_output=True, text=True,
                            timeout=180)
        assert up.returncode == 0, f"slurm-up.sh failed:\n{up.stdout}\n{up.stderr}"
        env = {}
        for line in (state / "env.sh").read_text().splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value
        yield _env(env)
    finally:
        subprocess.run([str(REPO / ".ci" / "slurm-down.sh"), str(state)], timeout=120)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    work = _workdir(tmp_path_factory.mktemp("runs"), "local")
    proc = _snakemake(work, "--cores", "2", *TARGETS, env=_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work


def _sacct(env: dict) -> list[dict]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,Comment,State,ReqMem"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return [dict(zip(("id", "comment", "state", "mem"), line.split("|"))) for line in out.splitlines() if line]


def _cancel_first_running(env: dict, rule: str, done: threading.Event, cancelled: list) -> None:
    """Watch the queue; scancel the first RUNNING job of `rule` once (it runs for a few seconds)."""
    deadline = time.monotonic() + 180
    while not done.is_set() and time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-o", "%i|%k|%T"], env=env, capture_output=True, text=True).stdout
        for line in out.splitlines():
            job, comment, state = line.split("|")
            if comment.startswith(f"rule_{rule}") and state == "RUNNING":
                time.sleep(1.0)  # mid-way: the job step has started
                subprocess.run(["scancel", job], env=env, check=True)
                cancelled.append(job)
                return
        time.sleep(0.5)


@pytest.fixture(scope="module")
def slurm_run(slurm, local_run, tmp_path_factory):
    """The slice through profiles/slurm, with the data stage copied from the local run (timestamps kept),
    so that the submitted jobs are the evaluations and the training run; one of those is scancel'ed."""
    work = _workdir(tmp_path_factory.mktemp("runs"), "slurm")
    shutil.copytree(local_run / "data", work / "data")
    done, cancelled = threading.Event(), []
    watcher = threading.Thread(target=_cancel_first_running, args=(slurm, "fedrap_train", done, cancelled))
    watcher.start()
    t0 = time.monotonic()
    try:
        proc = _snakemake(work, "--workflow-profile", str(REPO / "profiles" / "slurm"), *FAST,
                          *TARGETS, env=slurm)
    finally:
        done.set()
        watcher.join()
    return work, proc, cancelled, time.monotonic() - t0


def test_slice_runs_through_slurm_and_exits_0(slurm_run):
    work, proc, _, seconds = slurm_run
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    log = proc.stdout + proc.stderr
    submitted = [line for line in log.splitlines() if "has been submitted with SLURM jobid" in line]
    assert len(submitted) >= 3, log[-3000:]  # two evaluations + the training run (+ its retry)
    assert "rule synthesize_data:" not in log  # the data stage was copied, not rerun
    for target in TARGETS:
        assert (work / target).is_file(), target
    assert (work / LOCAL[0]).read_bytes()[:4] == b"%PDF"


def test_slurm_metrics_equal_the_local_run(slurm_run, local_run):
    work, proc, _, _ = slurm_run
    assert proc.returncode == 0
    for target in [*EVALS, TRAIN]:
        ours = json.loads((work / target).read_text())
        ref = json.loads((local_run / target).read_text())
        assert ours["overall"] == ref["overall"], target
    card = (work / "results/smoke/baselines/scorecard.csv").read_text()
    assert card == (local_run / "results/smoke/baselines/scorecard.csv").read_text()


def test_cancelled_job_is_retried_with_more_memory(slurm_run, slurm):
    work, proc, cancelled, _ = slurm_run
    assert cancelled, "the training job was never seen RUNNING"
    assert proc.returncode == 0
    log = proc.stdout + proc.stderr
    assert f"SLURM-job '{cancelled[0]}' failed, SLURM status is: 'CANCELLED'" in log
    assert "Trying to restart job" in log
    assert (work / TRAIN).is_file()
    if slurm.get("RECREPRO_SLURM_ACCOUNTING") != "slurmdbd":
        pytest.skip("no Slurm accounting (mariadb-server, slurmdbd): the resubmission's memory is not checked")
    jobs = [j for j in _sacct(slurm) if j["comment"].startswith("rule_fedrap_train")]
    first = next(j for j in jobs if j["id"] == cancelled[0])
    assert first["state"].startswith("CANCELLED")
    later = [j for j in jobs if int(j["id"]) > int(cancelled[0])]
    assert [j["state"] for j in later] == ["COMPLETED"]  # one resubmission (profile: retries: 2), done
    mem = lambda j: float(j["mem"].rstrip("MGn")) * (1024 if j["mem"].rstrip("n").endswith("G") else 1)
    assert mem(later[0]) > 1.5 * mem(first)  # attempt 2 asks for about twice the memory (plus fudge)


def test_a_failing_job_makes_snakemake_exit_nonzero(slurm, slurm_run):
    work, proc, _, _ = slurm_run
    assert proc.returncode == 0
    # Corrupt one part of the split: the evaluation verifies the manifest's sha256 and stops.
    part = next((work / "data/splits/synthetic/fedrap/leave_one_out/seed0").glob("*.parquet"))
    blob = bytearray(part.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    part.write_bytes(bytes(blob))
    # (the target before --forcerun, which would take it as one more rule name)
    failing = _snakemake(work, EVALS[0], "--workflow-profile", str(REPO / "profiles" / "slurm"), *FAST,
                         "--retries", "0", "--forcerun", "evaluate_baseline", env=slurm, timeout=180)
    assert failing.returncode != 0
    log = failing.stdout + failing.stderr
    assert "Error in rule evaluate_baseline" in log
    assert "SLURM status is: 'FAILED'" in log  # the job state the executor read from Slurm
    assert "rule fedrap_train" not in log  # only the forced evaluation ran
