"""Benchmark: seconds per federated round of FedRAP on ML-100K (all 943 clients, 10 local epochs).

Run from the repository root, after building the split (paper tier, mirror)::

    python3 benchmarks/bench_fedrap.py --split-dir data/splits/ml-100k/fedrap/leave_one_out/seed0 \
        [--rounds 3] [--mode code] [--threads 2]

Workload: the README's ML-100K flags of mtics/FedRAP (``--mu 1e-3 --l2_regularization 1e-6
--lr_network 1e-4 --lr_args 1e3``, λ 0.1, d 32, batch 2048, 4 negatives, every client every
round, 10 local epochs), ``mode=code`` by default (``paper`` adds the dense full-matrix
regularisers to every step).  Reported per round: wall seconds of the training round (client
sampling, negatives, local training, aggregation; evaluation excluded and timed separately),
the process CPU seconds of the round (on a shared machine CPU/threads is a better guide to the
unloaded wall time), test HR@10 after the round, and the peak RSS.  Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import torch

from recrepro.models.federated import FederatedConfig, FederatedRecommender
from recrepro.papers.fedrap import NEGATIVE_POOL_PARTS, _eval_both
from recrepro.runs import SplitData


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split-dir", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="code", choices=["code", "paper"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    split = SplitData(args.split_dir)
    train = split.csr(["train"])
    touched = split.csr(NEGATIVE_POOL_PARTS["all_interactions"])  # the released code's negative pool
    cfg = FederatedConfig(method="fedrap", mode=args.mode, rounds=args.rounds, local_epochs=10, dim=32,
                          lam=0.1, mu=1e-3, l2=1e-6, lr_network=1e-4, lr_args=1e3, seed=args.seed)
    model = FederatedRecommender(cfg)
    model.train_csr, model.touched = train, touched
    model.init_state(*train.shape)
    rows = []
    for _ in range(args.rounds):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        info = model.train_round()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        e0 = time.perf_counter()
        _, test = _eval_both(model, split, "pessimistic")
        rows.append({"round": info["round"], "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                     "eval_s": round(time.perf_counter() - e0, 2), "test_hr@10": round(test.overall["hr@10"], 4),
                     "test_ndcg@10": round(test.overall["ndcg@10"], 4)})
        print(json.dumps(rows[-1]), flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": args.mode, "threads": args.threads, "peak_rss_mb": round(peak),
                      "mean_wall_s": round(sum(r["wall_s"] for r in rows) / len(rows), 2),
                      "mean_cpu_s": round(sum(r["cpu_s"] for r in rows) / len(rows), 2)}))


if __name__ == "__main__":
    main()
