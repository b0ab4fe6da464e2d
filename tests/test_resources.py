"""Per-job resources (issue 9): the estimates, and what a paper-tier dry run through profiles/slurm asks for."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recrepro.paperlist import paper_keys
from recrepro.runtime.resources import DATASET_SIZES, DatasetSize, dataset_size, estimate

REPO = Path(__file__).resolve().parents[1]
#: the training rules that ask for a GPU under device=cuda, as each paper's rules module names them
TRAIN_RULES = {rule for paper in paper_keys()
               for rule in importlib.import_module(f"recrepro.papers.{paper}.rules").GPU_RULES}


def test_synthetic_size_comes_from_the_generator_settings():
    cfg = {"data": {"synthetic": {"users": 600, "items": 400, "density": 0.08}}}
    assert dataset_size("synthetic", cfg) == DatasetSize(600, 400, 19_200)


def test_processed_stats_take_precedence(tmp_path):
    stats = tmp_path / "processed" / "ml-1m" / "prism" / "stats.json"
    stats.parent.mkdir(parents=True)
    stats.write_text('{"users": 10, "items": 20, "interactions": 30, "density": 0.15}')
    assert dataset_size("ml-1m", {}, tmp_path, "prism") == DatasetSize(10, 20, 30)
    assert dataset_size("ml-1m", {}, tmp_path, "fedrap") == DATASET_SIZES["ml-1m"]


def test_evaluate_estimate_by_hand():
    # 1000 base + 40 B x 19,200 (0.768 MB) + 3 x 2048 x 400 x 4 B (9.8304 MB) = 1010.6 -> 1100 MB
    size = DatasetSize(600, 400, 19_200)
    assert estimate("evaluate", size) == {"mem_mb": 1100, "runtime": 11}  # 10 + 2 x 600 x 400 / 1e9 -> 11
    # attempt 2: 2021.2 -> 2100 MB, 20.0005 -> 21 min
    assert estimate("evaluate", size, attempt=2) == {"mem_mb": 2100, "runtime": 21}


def test_train_estimate_ml20m_by_hand():
    # csr 40 x 20,000,263 = 800.01 MB; scores 3 x 2048 x 26,744 x 4 = 657.24 MB;
    # params 16 x (138,493 + 26,744) x 256 = 676.81 MB; + 1000 base = 3134.06 -> 3200 MB
    # runtime 30 + 2 x 138,493 x 26,744 / 1e9 (7.41) + 30 x 20.000263 (600.01) = 637.4 -> 638 min
    assert estimate("train", DATASET_SIZES["ml-20m"]) == {"mem_mb": 3200, "runtime": 638}
    # on a GPU the interaction term is 6 per million: 30 + 7.41 + 120.0 = 157.4 -> 158
    assert estimate("train", DATASET_SIZES["ml-20m"], gpu=True)["runtime"] == 158
    # a rule's own buffer (FedRAP's memory_budget_mb) is added
    assert estimate("train", DATASET_SIZES["ml-20m"], extra_mb=2048)["mem_mb"] == 5200


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown resource kind"):
        estimate("gpu-heavy", DatasetSize(1, 1, 1))


def _dry_run_jobs(tmp_path: Path, device: str) -> list[tuple[str, dict]]:
    pytest.importorskip("snakemake_executor_plugin_slurm", reason="snakemake-executor-plugin-slurm not installed")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--configfile",
           str(REPO / "config.yaml"), "--directory", str(tmp_path), "--workflow-profile",
           str(REPO / "profiles" / "slurm"), "-n", "--config", "tier=paper", f"device={device}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs, rule = [], None
    for line in proc.stdout.splitlines() + proc.stderr.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):$", line)
        if m:
            rule = m.group(1)
        elif rule and line.strip().startswith("resources:"):
            res = dict(kv.split("=", 1) for kv in line.split(":", 1)[1].strip().split(", "))
            jobs.append((rule, res))
            rule = None
    return jobs


@pytest.mark.workflow
def test_paper_tier_dry_run_lists_every_job_with_resources_and_gpus_only_on_cuda(tmp_path):
    cpu = _dry_run_jobs(tmp_path / "cpu", "cpu") if (tmp_path / "cpu").mkdir() is None else None
    assert len(cpu) > 1000  # every paper-tier job is listed
    for rule, res in cpu:
        assert int(res["mem_mb"]) >= 1000 and int(res["runtime"]) >= 10, (rule, res)
        assert res.get("gpu", "0") == "0", (rule, res)
    assert {r for r, _ in cpu} >= TRAIN_RULES
    cuda = _dry_run_jobs(tmp_path / "cuda", "cuda") if (tmp_path / "cuda").mkdir() is None else None
    assert len(cuda) == len(cpu)
    for rule, res in cuda:
        assert res.get("gpu", "0") == ("1" if rule in TRAIN_RULES else "0"), (rule, res)


@pytest.mark.workflow
def test_local_profile_is_valid(tmp_path):
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--configfile",
           str(REPO / "config.yaml"), "--directory", str(tmp_path), "--workflow-profile",
           str(REPO / "profiles" / "local"), "-n"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "Using workflow specific profile" in out and "synthesize_data" in out


def test_slurm_profile_settings():
    import yaml

    prof = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert prof["executor"] == "slurm" and prof["jobs"] >= 1
    assert prof["retries"] >= 1 and "attempt" in str(prof["default-resources"]["mem_mb"])
    assert {"mem_mb", "runtime"} <= set(prof["default-resources"])
    assert prof["slurm-init-seconds-before-status-checks"] > 0
    # squeue status needs MinJobAge >= 3 x the first-check delay; Slurm's default MinJobAge is 300 s
    assert prof["slurm-status-command"] == "squeue" and 3 * prof["slurm-init-seconds-before-status-checks"] <= 300
    local = yaml.safe_load((REPO / "profiles" / "local" / "config.yaml").read_text())
    assert local["keep-going"] and local["rerun-incomplete"] and local["latency-wait"] > 0 and local["cores"] >= 1


def _dry_run_commands(tmp_path: Path, targets: list[str], *config: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--configfile",
           str(REPO / "config.yaml"), "--directory", str(tmp_path), "-n", "-p", *targets,
           "--config", "tier=paper", *config]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.workflow
def test_fedrap_private_table_budget_is_per_dataset(tmp_path):
    """LastFM's 4.2 GB private tables run in RAM (its own budget), other datasets keep the default;
    the job asks the scheduler for that budget on top of its estimate. A misspelt dataset is refused."""
    runs = "results/paper/fedrap/runs/{}/leave_one_out/fedrap_code-g00/seed0/metrics.json"
    proc = _dry_run_commands(tmp_path, [runs.format("hetrec2011-lastfm-2k"), runs.format("ml-100k")])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    budgets = dict(re.findall(r"--split-dir data/splits/([\w-]+)/fedrap\S* .*?--memory-budget-mb (\d+)", out))
    assert budgets == {"hetrec2011-lastfm-2k": "4608", "ml-100k": "2048"}
    mem = [int(m) for m in re.findall(r"mem_mb=(\d+)", out.split("rule fedrap_train")[1])]
    mem += [int(m) for m in re.findall(r"mem_mb=(\d+)", out.split("rule fedrap_train")[2])]
    assert max(mem) - min(mem) >= 4608 - 2048  # the budget is part of the request
    bad = _dry_run_commands(tmp_path, [runs.format("ml-100k")], "fedrap={memory_budget_mb_by_dataset: {lastfm: 100}}")
    assert bad.returncode != 0
    assert "memory_budget_mb_by_dataset: unknown dataset 'lastfm'" in bad.stdout + bad.stderr
