"""Seconds per epoch of MF-λFix vs MF-λOpt (issue 6, acceptance 4).

    python3 benchmarks/bench_lambdaopt.py --split-dir data/splits/ml-100k/lambdaopt/temporal_user_ratio/seed0

Trains each variant for ``--epochs`` epochs with the paper tier's MF settings (d 128, batch 1024,
Adam lr 1e-3, λ network Adam(amsgrad) lr 1e-2, clip 1e-3) and prints the median seconds per epoch
(training only, from ``model.history``; evaluation is not timed).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from recrepro.papers.lambdaopt import make_model
from recrepro.runs import SplitData

VARIANTS = {
    "lambdafix": {"method": "lambdafix", "lam": 1.0e-4},
    "lambdaopt_d": {"method": "lambdaopt", "granularity": "d"},
    "lambdaopt_dui": {"method": "lambdaopt", "granularity": "dui"},
    "lambdaopt_dui_code": {"method": "lambdaopt", "granularity": "dui", "assumed_grad": "current_lambda",
                           "sim_penalty": "full_table", "assumed_batch": "separate"},
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split-dir", required=True)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    split = SplitData(args.split_dir)
    train, val = split.csr(["train"]), split.csr(["validation"])
    base = {"dim": args.dim, "epochs": args.epochs, "batch_size": args.batch_size, "val_batch_size": args.batch_size,
            "lr": 1.0e-3, "lambda_lr": 1.0e-2, "lambda_clip": 1.0e-3}
    out = {}
    for name in args.variants:
        settings = {**base, **VARIANTS[name]}
        model = make_model(settings, seed=0, device=args.device, lam=settings.get("lam"))
        model.fit(train, validation=val)
        secs = [h["seconds"] for h in model.history]
        out[name] = {"median_s_per_epoch": statistics.median(secs), "per_epoch": [round(s, 3) for s in secs]}
        print(name, json.dumps(out[name]), flush=True)
    ref = out.get("lambdafix", {}).get("median_s_per_epoch")
    if ref:
        for name, row in out.items():
            print(f"{name}: {row['median_s_per_epoch']:.3f} s/epoch = {row['median_s_per_epoch'] / ref:.2f}x lambdafix")
    print(json.dumps({"split": args.split_dir, "n_users": split.n_users, "n_items": split.n_items,
                      "train": int(train.nnz), "threads": args.threads, "results": out}))


if __name__ == "__main__":
    main()
