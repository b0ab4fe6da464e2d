"""Build and run the official exADMM binary (riktor/exADMM-recommender) on the ML-1M fixture.

Issue 23: compares the official code's run-to-run distribution (its generator is seeded from
``std::random_device``, so every run starts from different factors) with ours over seeds.
Nothing of the official code is kept in this repository: give the path of a checkout
*outside* it (e.g. ``git --git-dir=<mirror> archive HEAD include tools | tar -x -C
/work/official/exadmm``); the binary is built with ``g++ -O3`` (not bazel) into
``--build-dir`` (also outside the repository) and run ``--runs`` times with the flags of the
config's paper-tier ``ml-1m-exadmm-split`` entry (``exadmm``, or ``ials`` with ``--model
ials``).  Writes one JSON with every run's metrics and their mean, sd, min and max.

Needs ``g++`` and the Debian packages ``libeigen3-dev libgoogle-glog-dev libgflags-dev
libfmt-dev``; without them, or without the checkout or the fixture, it prints why it skips
and exits 0.  Measured (2-core machine, 25 Nov 2026, HEAD 48b1d55): 0.4 s a run.

    python benchmarks/official_exadmm.py --checkout /work/official/exadmm \\
        --data ../shared/datasets/ml-1m-exadmm-split --runs 10 --out /tmp/official_exadmm.json

The build leaves ``NDEBUG`` undefined, as bazel's default mode does: the official CSV reader
skips the header line inside an ``assert``, which ``-DNDEBUG`` would remove.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
HEADERS = {"eigen": "/usr/include/eigen3/Eigen/Core", "glog": "/usr/include/glog/logging.h",
           "gflags": "/usr/include/gflags/gflags.h", "fmt": "/usr/include/fmt/core.h"}
#: what the config calls a hyperparameter -> the official CLI flag
FLAGS = {"dim": "--dim", "alpha0": "--alpha", "l2": "--l2_reg", "l2_exp": "--l2_reg_exp", "stdev": "--stdev",
         "learning_rate": "--learning_rate", "admm_penalty": "--admm_penalty", "exposure_reg": "--exposure_reg",
         "pred_iterations": "--pred_iterations", "epochs": "--epoch"}
#: metric in the official log -> our metric key
METRICS = {"NDCG@20": "ndcg@20", "NDCG@50": "ndcg@50", "Rec@20": "recall@20", "Cov@100": "coverage@100",
           "Gini(uniform)@100": "gini@100", "Cov@20": "coverage@20", "Gini(uniform)@20": "gini@20"}


def skip(reason: str) -> int:
    print(f"official_exadmm: skipped: {reason}")
    return 0


def missing_build_tools() -> list[str]:
    """Names of the missing build tools/headers (empty when everything is there)."""
    missing = [] if shutil.which("g++") else ["g++"]
    return missing + [name for name, header in HEADERS.items() if not Path(header).exists()]


def fixture_flags(model: str, dataset: str = "ml-1m-exadmm-split") -> list[str]:
    """The official CLI flags for the config's paper-tier entry of ``dataset``."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    entry = next(e for e in config["exadmm"]["tiers"]["paper"]["datasets"] if e["dataset"] == dataset)
    flags = ["-n", model, "--print_train_stats", "0"]
    for key, value in entry[model].items():
        if key in FLAGS:
            flags += [FLAGS[key], str(value)]
    return flags


def build(checkout: Path, build_dir: Path) -> Path:
    """Compile ``tools/run_model.cpp`` with g++ -O3 (bazel's COPTS, no bazel)."""
    build_dir.mkdir(parents=True, exist_ok=True)
    binary = build_dir / "run_model"
    cmd = ["g++", "-O3", "-march=native", "-std=c++2a", "-I", str(checkout / "include"), "-I", str(checkout / "tools"),
           "-I", "/usr/include/eigen3", str(checkout / "tools" / "run_model.cpp"), "-o", str(binary),
           "-lglog", "-lgflags", "-lfmt", "-lpthread"]
    subprocess.run(cmd, check=True)
    return binary


def run_once(binary: Path, data: Path, part: str, flags: list[str]) -> dict[str, float]:
    """One run on ``train.csv`` + ``<part>_tr/_te.csv``; the final evaluation's metrics."""
    cmd = [str(binary), *flags, "--train_data", str(data / "train.csv"),
           "--test_train_data", str(data / f"{part}_tr.csv"), "--test_test_data", str(data / f"{part}_te.csv")]
    log = subprocess.run(cmd, check=True, capture_output=True, text=True).stderr  # glog writes to stderr
    out = {}
    for name, key in METRICS.items():
        found = re.findall(re.escape(name) + r"=([0-9.eE+-]+)", log)
        out[key] = float(found[-1])
    return out


def summarise(runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    return {k: {"mean": statistics.fmean(r[k] for r in runs), "sd": statistics.stdev(r[k] for r in runs),
                "min": min(r[k] for r in runs), "max": max(r[k] for r in runs)} for k in runs[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, required=True, help="official repo checkout, outside this repository")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared/datasets/ml-1m-exadmm-split")
    parser.add_argument("--part", default="validation", choices=["validation", "test"])
    parser.add_argument("--model", default="exadmm", choices=["exadmm", "ials"])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--build-dir", type=Path, default=Path("/tmp/official_exadmm_build"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/official_exadmm.json"))
    args = parser.parse_args(argv)
    checkout, build_dir = args.checkout.resolve(), args.build_dir.resolve()
    for path in (checkout, build_dir):
        if path == REPO or REPO in path.parents:
            print(f"official_exadmm: {path} is inside the repository; keep the official code outside it", file=sys.stderr)
            return 2
    if not (checkout / "tools" / "run_model.cpp").exists():
        return skip(f"no official checkout at {checkout} (tools/run_model.cpp missing)")
    if missing := missing_build_tools():
        return skip(f"build tools missing: {', '.join(missing)} "
                    "(apt-get install g++ libeigen3-dev libgoogle-glog-dev libgflags-dev libfmt-dev)")
    if not all((args.data / f).exists() for f in ("train.csv", f"{args.part}_tr.csv", f"{args.part}_te.csv")):
        return skip(f"fixture files missing under {args.data}")
    binary = build(checkout, build_dir)
    flags = fixture_flags(args.model)
    runs = []
    for i in range(args.runs):
        runs.append(run_once(binary, args.data, args.part, flags))
        print(f"run {i + 1}: " + " ".join(f"{k}={v:.4f}" for k, v in runs[-1].items()), flush=True)
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"checkout": str(checkout), "commit": commit or None, "part": args.part, "flags": flags, "runs": runs,
              "summary": summarise(runs) if len(runs) > 1 else {}}
    args.out.write_text(json.dumps(result, indent=1))
    for key, stats in result["summary"].items():
        print(f"{key}: mean {stats['mean']:.4f} sd {stats['sd']:.4f} [{stats['min']:.4f}, {stats['max']:.4f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
