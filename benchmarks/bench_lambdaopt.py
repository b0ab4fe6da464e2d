"""Seconds per epoch of MF-λFix vs MF-λOpt (issue 6, acceptance 4).

    python3 benchmarks/bench_lambdaopt.py --split-dir data/splits/ml-100k/lambdaopt/temporal_user_ratio/seed0

Trains each variant for ``--epochs`` epochs, ``--rounds`` times interleaved, with the paper tier's
MF settings (d 128, batch 1024, Adam lr 1e-3, λ network Adam(amsgrad) lr 1e-2, clip 1e-3) and prints the median seconds per epoch
and the median over rounds of the ratio to the same round's λFix (training only, from
``model.history``; evaluation is not timed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from recrepro.runtime.options import add_threads
from recrepro.papers.lambdaopt.run import make_model
from recrepro.evaluation.on_split import SplitData

from devclock import clock_label, device_label, stamp_fn  # benchmarks/ (on sys.path)

VARIANTS = {
    "lambdafix": {"method": "lambdafix", "lam": 1.0e-4},
    "lambdaopt_d": {"method": "lambdaopt", "granularity": "d"},
    "lambdaopt_dui": {"method": "lambdaopt", "granularity": "dui"},
    "lambdaopt_dui_unfused": {"method": "lambdaopt", "granularity": "dui", "lambda_fused": False},
    "lambdaopt_dui_code": {"method": "lambdaopt", "granularity": "dui", "assumed_grad": "current_lambda",
                           "sim_penalty": "full_table", "assumed_batch": "separate"},
}


def measure(quick: bool, split_dir: str, device: str = "cpu") -> list[dict]:
    """λOpt-DUI epoch vs λFix epoch (ml-100k, paper settings), same process (goal ≤ 2×), on ``device``.

    Each fit runs 3 epochs; its steady-state epoch is the process CPU time (on CUDA: wall time after
    ``torch.cuda.synchronize()``) from the end of epoch 1 to the end of epoch 3, halved (setup and the
    first epoch's warm-up left out).  λFix and DUI alternate over 1 (quick) or 3 rounds; the ratio is
    the median of the rounds' ratios."""
    split = SplitData(split_dir)
    train, val = split.csr(["train"]), split.csr(["validation"])
    base = {"dim": 128, "epochs": 3, "batch_size": 1024, "val_batch_size": 1024, "lr": 1.0e-3,
            "lambda_lr": 1.0e-2, "lambda_clip": 1.0e-3}
    ratios, cpu = [], {"lambdafix": [], "lambdaopt_dui": []}
    stamp = stamp_fn(device)
    for r in range(1 if quick else 3):
        for name in cpu:
            settings = {**base, **VARIANTS[name]}
            model = make_model(settings, seed=r, device=device, lam=settings.get("lam"))
            stamps: list[float] = []
            model.fit(train, validation=val, on_epoch=lambda m, e: stamps.append(stamp()))
            cpu[name].append((stamps[2] - stamps[0]) / 2)
        ratios.append(cpu["lambdaopt_dui"][-1] / cpu["lambdafix"][-1])
    ratio = statistics.median(ratios)
    return [{"measure": "λOpt-DUI epoch vs λFix epoch, ml-100k", "ours_s": round(statistics.median(cpu["lambdaopt_dui"]), 3),
             "anchor_s": round(statistics.median(cpu["lambdafix"]), 3), "ratio": round(ratio, 3), "goal": "≤ 2×",
             "holds": ratio <= 2.0, "clock": clock_label(device), "device": device_label(device)}]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split-dir", required=True)
    parser.add_argument("--epochs", type=int, default=3)
    add_threads(parser, default=2, help="torch threads (default 2)")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (A B C A B C ...)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    split = SplitData(args.split_dir)
    train, val = split.csr(["train"]), split.csr(["validation"])
    base = {"dim": args.dim, "epochs": args.epochs, "batch_size": args.batch_size, "val_batch_size": args.batch_size,
            "lr": 1.0e-3, "lambda_lr": 1.0e-2, "lambda_clip": 1.0e-3}
    # On a shared machine the load drifts: the variants run interleaved, round after round, and each
    # round's ratio to the same round's λFix is taken; the report gives medians over rounds.
    # CPU seconds (time.process_time around fit, / epochs) are reported beside wall seconds: with other
    # jobs on the cores, wall time measures the neighbours as much as the code.
    per_round: dict[str, list[float]] = {name: [] for name in args.variants}
    cpu_round: dict[str, list[float]] = {name: [] for name in args.variants}
    for r in range(args.rounds):
        for name in args.variants:
            settings = {**base, **VARIANTS[name]}
            model = make_model(settings, seed=r, device=args.device, lam=settings.get("lam"))
            cpu0 = time.process_time()
            model.fit(train, validation=val)
            cpu_round[name].append((time.process_time() - cpu0) / args.epochs)
            per_round[name].append(statistics.median(h["seconds"] for h in model.history))
            print(f"round {r} {name}: {per_round[name][-1]:.3f} s/epoch wall, {cpu_round[name][-1]:.3f} CPU",
                  flush=True)
    out = {}
    ref, cref = per_round.get("lambdafix"), cpu_round.get("lambdafix")
    for name, secs in per_round.items():
        cpu = cpu_round[name]
        row = {"median_s_per_epoch": statistics.median(secs), "per_round": [round(s, 3) for s in secs],
               "median_cpu_s_per_epoch": statistics.median(cpu), "cpu_per_round": [round(s, 3) for s in cpu]}
        if ref:
            row["median_ratio_to_lambdafix"] = statistics.median(s / f for s, f in zip(secs, ref))
            row["median_cpu_ratio_to_lambdafix"] = statistics.median(s / f for s, f in zip(cpu, cref))
        out[name] = row
        print(f"{name}: wall {row['median_s_per_epoch']:.3f} s/epoch, CPU {row['median_cpu_s_per_epoch']:.3f} s/epoch"
              + (f"; x lambdafix (median of per-round ratios): wall {row['median_ratio_to_lambdafix']:.2f},"
                 f" CPU {row['median_cpu_ratio_to_lambdafix']:.2f}" if ref else ""))
    print(json.dumps({"split": args.split_dir, "n_users": split.n_users, "n_items": split.n_items,
                      "train": int(train.nnz), "threads": args.threads, "epochs": args.epochs,
                      "rounds": args.rounds, "results": out}))


if __name__ == "__main__":
    main()
