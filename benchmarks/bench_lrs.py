"""Seconds per AMHT-LRS outer iteration (issue 8, acceptance 4): d 100, r 5, k 5, t 10,000, m 50.

    python3 benchmarks/bench_lrs.py [--threads 2] [--iterations 3] [--t 10000] [--u-steps lstsq,gradient]
                                    [--swap on,off]

One outer iteration = global step (exact dr x dr least squares, or the preconditioned gradient step)
+ QR + the local step (inner_steps = 3 CoSaMP steps for all users at once, then, with ``--swap on``,
the swap search from 2 + restarts starts and the refit).
Times come from the monitor hook (called after each iteration); iteration 0 (initialisation +
first local step) is reported separately. No Python loop runs over users.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from recrepro.papers.lrs.amht_lrs import AMHTConfig, amht_lrs
from recrepro.papers.lrs.generator import LRSSpec, generate, parameter_error, subspace_distance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--r", type=int, default=5)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--t", type=int, default=10_000)
    parser.add_argument("--m", type=int, default=50)
    parser.add_argument("--u-steps", default="lstsq,gradient")
    parser.add_argument("--swap", default="on,off", help="swap search on/off (both: the cost of the search)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec = LRSSpec(d=args.d, r=args.r, k=args.k, t=args.t, m=args.m, sigma=0.1, seed=0)
    start = time.perf_counter()
    data = generate(spec)
    print(f"data {tuple(data.X.shape)} float64 generated in {time.perf_counter() - start:.1f} s; threads {args.threads}")
    for u_step, swap in [(u, s) for u in args.u_steps.split(",") for s in args.swap.split(",")]:
        stamps = []
        cfg = AMHTConfig(r=args.r, k=args.k, iterations=args.iterations, u_step=u_step, swap_search=swap == "on")
        t0 = time.perf_counter()
        res = amht_lrs(data.X, data.y, cfg, monitor=lambda U, W, B: stamps.append(time.perf_counter()) or {})
        per_iter = [b - a for a, b in zip(stamps, stamps[1:])]
        err = float(parameter_error(res.theta, data.theta).mean())
        print(f"u_step={u_step:8s} swap={swap:3s} init+first local step {stamps[0] - t0:6.2f} s | per iteration "
              f"{' '.join(f'{s:.2f}' for s in per_iter)} s (median {sorted(per_iter)[len(per_iter) // 2]:.2f} s) | "
              f"error after {args.iterations} it {err:.4f}, subspace {subspace_distance(res.U, data.U):.2e}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.2f} GB")


if __name__ == "__main__":
    main()
