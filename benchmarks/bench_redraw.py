"""Benchmark: the paper tier's redraw from records, against redrawing one figure.

    python3 benchmarks/bench_redraw.py [--cores 2] [--repeats 1]

In a fresh copy of the checkout (the files a clean clone has: tracked, plus new files git does
not ignore) with no ``data/``, no mirror and no network, it runs

* ours: ``snakemake --cores N --config tier=paper from_records=true`` (every figure, table,
  scorecard and generated page, from the committed records);
* the anchor: the same command asking for one PRISM figure (``snakemake <one pdf> ...``) in a
  second fresh copy: Snakemake's start, one figure job (Python, pandas and matplotlib starting up)
  and its end, the unit most of the redraw is made of.

Both are timed in CPU seconds of the child processes (Snakemake and every job it ran) and in wall
seconds.  The ratio says how many one-figure redraws the whole redraw costs; the goal is issue 20's
absolute one, **under 2 minutes of wall time on 2 cores**, and the row's ``holds`` reads the wall
time.  CPU time grows with the machine's load (beside two training jobs, by up to a third), so a
measure taken beside other work says so in its ``note``.  Not part of the test suite: the tests
check what the redraw makes, not how long it takes.

``measure(quick, device)`` (imported by ``benchmarks/run_all.py``) returns the row; the redraw
runs no torch work, so ``device`` only labels it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: issue 20: the whole redraw in under 2 minutes on 2 cores
GOAL_WALL_SECONDS = 120.0


def checkout_files(repo: Path = ROOT) -> list[Path]:
    """Files of the checkout as a clean clone would have them (tracked, plus new files not ignored)."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=repo,
                         capture_output=True, text=True, check=True).stdout
    return [Path(p) for p in out.split("\0") if p and (repo / p).is_file()]


def copy_checkout(dest: Path, repo: Path = ROOT) -> None:
    for rel in checkout_files(repo):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / rel, target)


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def offline_env() -> dict[str, str]:
    """This interpreter's environment for a Snakemake child: its scripts on PATH and no network.

    The proxies point at a closed port, so a job that tries to download fails at once instead of hanging:
    a redraw must need no network."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update({"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"})
    return env


def timed_snakemake(cwd: Path, cores: int, *targets: str) -> dict:
    """Run the redraw (of ``targets``, or everything) in ``cwd``; its CPU and wall seconds and job count."""
    env = offline_env()
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), *targets,
           "--config", "tier=paper", "from_records=true"]
    cpu0, wall0 = _children_cpu_seconds(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - wall0, _children_cpu_seconds() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed in {cwd}:\n{proc.stderr[-3000:]}")
    done = re.findall(r"(\d+) of (\d+) steps \(100%\) done", proc.stdout + proc.stderr)
    return {"cpu_s": cpu, "wall_s": wall, "jobs": int(done[-1][1]) if done else 0}


def one_figure_target(repo: Path = ROOT) -> str:
    """A committed PRISM figure of the paper's (``fig*``), asked for by its PDF (committed as PNG; the rule
    draws both): the anchor's single target. The claims' forest plot (``claims.png``) is drawn as a PNG
    only, so its PDF is no target."""
    figures = sorted(p for p in checkout_files(repo)
                     if p.parts[:3] == ("results", "paper", "prism") and "figures" in p.parts and p.suffix == ".png"
                     and p.name.startswith("fig"))
    if not figures:
        raise FileNotFoundError("results/paper/prism holds no committed figure to redraw")
    return str(figures[0].with_suffix(".pdf"))


def measure(quick: bool = True, device: str = "cpu", cores: int = 2, repeats: int = 1) -> list[dict]:
    """The redraw's row: ours (everything) against the anchor (one figure), each in a fresh copy."""
    if not any(p.name == "metrics.json" for p in checkout_files()):
        raise FileNotFoundError("results/paper holds no run records to redraw from")
    target = one_figure_target()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    ours, anchor = [], []
    for _ in range(max(1, repeats)):
        with tempfile.TemporaryDirectory(prefix="redraw-") as tmp:
            full, one = Path(tmp) / "full", Path(tmp) / "one"
            copy_checkout(full)
            copy_checkout(one)
            anchor.append(timed_snakemake(one, cores, target))
            ours.append(timed_snakemake(full, cores))
    best = min(ours, key=lambda r: r["wall_s"])
    base = min(anchor, key=lambda r: r["cpu_s"])
    note = (f"{best['jobs']} jobs, wall {best['wall_s']:.0f} s on {cores} cores; anchor: one figure, "
            f"{base['jobs']} job; load average {load:.1f} at the start")
    return [{"measure": "redraw from records, CPU s of every job, vs redrawing one figure",
             "ours_s": round(best["cpu_s"], 3), "anchor_s": round(base["cpu_s"], 3),
             "ratio": round(best["cpu_s"] / base["cpu_s"], 3), "goal": "wall < 120 s on 2 cores",
             "holds": best["wall_s"] < GOAL_WALL_SECONDS if cores <= 2 else None,
             "wall_s": round(best["wall_s"], 3), "jobs": best["jobs"], "clock": "children's CPU s",
             "device": "cpu", "note": note}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    for row in measure(cores=args.cores, repeats=args.repeats):
        print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main()
