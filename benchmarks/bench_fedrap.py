"""Benchmark: seconds per federated round of FedRAP (all clients, 10 local epochs).

Run from the repository root, after building the split (paper tier, mirror)::

    python3 benchmarks/bench_fedrap.py --split-dir data/splits/ml-100k/fedrap/leave_one_out/seed0 \
        [--rounds 3] [--mode code] [--threads 2] [--paper-path lazy|dense]

Workload: the README's ML-100K flags of mtics/FedRAP (``--mu 1e-3 --l2_regularization 1e-6
--lr_network 1e-4 --lr_args 1e3``, λ 0.1, d 32, batch 2048, 4 negatives, every client every
round, 10 local epochs), ``mode=code`` by default (``paper`` adds the full-matrix regularisers,
by default through the exact lazy form, ``--paper-path dense`` through the dense reference
path).  Reported per round: wall seconds of the training round (client sampling, negatives,
local training, aggregation; evaluation excluded and timed separately), the process CPU
seconds of the round (on a shared machine CPU/threads is a better guide to the unloaded wall
time), test HR@10 after the round, and the peak RSS.  Not part of the test suite.

``measure(quick)`` (imported by ``benchmarks/run_all.py``): paper mode's round against code
mode's round on the same dataset in the same process (issue 21's goal: ≤ 3×), for ML-100K,
Amazon Video and LastFM (quick: ML-100K only).  Split folders are looked up under
``$RECREPRO_DATA_ROOT`` (default ``data``); a dataset whose split is missing is skipped.
``measure(quick, device="cuda")`` trains both modes on the GPU (``FederatedConfig.device``) and
times them in wall seconds after ``torch.cuda.synchronize()``.

``measure_dense_step(quick)``: the dense path's full-matrix step, fused (``dense_update: fused``,
one ``torch.compile``'d pass) against eager, on a chunk of LastFM-sized tables (no data needed;
docs/performance.md#fedrap-fused-dense).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import time
from pathlib import Path

import torch

from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.dense import DensePath, EagerScratch
from recrepro.papers.fedrap.fedrap import FederatedRecommender
from recrepro.papers.fedrap.run import NEGATIVE_POOL_PARTS, _eval_both
from recrepro.evaluation.on_split import SplitData

from devclock import clock_label, device_label, stamp_fn  # benchmarks/ (on sys.path)

#: datasets of :func:`measure` (folder names under ``splits/``); quick mode runs the first only
DATASETS = ("ml-100k", "amazon-video", "hetrec2011-lastfm-2k")


def make_model(split: SplitData, mode: str, rounds: int, seed: int = 0, paper_path: str = "lazy",
               memory_budget_mb: float = 2048.0, device: str = "cpu") -> FederatedRecommender:
    """A FedRAP model with the README's ML-100K flags, set up on ``split`` (no round run yet), on ``device``."""
    train = split.csr(["train"])
    touched = split.csr(NEGATIVE_POOL_PARTS["all_interactions"])  # the released code's negative pool
    cfg = FederatedConfig(method="fedrap", mode=mode, rounds=rounds, local_epochs=10, dim=32,
                          lam=0.1, mu=1e-3, l2=1e-6, lr_network=1e-4, lr_args=1e3, seed=seed,
                          paper_path=paper_path, memory_budget_mb=memory_budget_mb, device=device)
    model = FederatedRecommender(cfg)
    model.train_csr, model.touched = train, touched
    model.init_state(*train.shape)
    return model


def _reset_peak_rss() -> None:
    """Reset the kernel's peak-RSS mark (VmHWM) of this process (Linux ≥ 4.0; else no-op)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _peak_rss_mb() -> float:
    """Peak RSS since the last :func:`_reset_peak_rss` (VmHWM), else the process's ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed_rounds(split: SplitData, mode: str, warmup: int, timed: int,
                  device: str = "cpu") -> tuple[list[float], list[float], float]:
    """Process CPU and wall seconds of ``timed`` training rounds after ``warmup`` untimed ones, and
    the peak RSS (MB).  On CUDA the first list is wall seconds after ``torch.cuda.synchronize()``
    (CPU seconds say nothing about GPU work), and so is, in effect, the second."""
    gc.collect()
    _reset_peak_rss()
    model = make_model(split, mode, warmup + timed, device=device)
    for _ in range(warmup):
        model.train_round()
    stamp = stamp_fn(device)
    cpu, wall = [], []
    for _ in range(timed):
        c0, t0 = stamp(), time.perf_counter()
        model.train_round()
        cpu.append(stamp() - c0)
        wall.append(time.perf_counter() - t0)
    peak = _peak_rss_mb()
    del model
    gc.collect()
    return cpu, wall, peak


def measure(quick: bool, device: str = "cpu") -> list[dict]:
    """Paper mode's FedRAP round vs code mode's, per dataset, in this process, on ``device``.

    One dict per dataset: ``{"measure", "ours_s", "anchor_s", "ratio", "goal", "holds"}`` plus
    context (``ours_wall_s``, ``anchor_wall_s``, ``wall_ratio``, ``peak_rss_mb`` of each mode,
    ``threads``).  ``ours`` = a paper-mode round (lazy full-matrix regularisers), ``anchor`` = a
    code-mode round, both the median over the timed rounds of the **process CPU seconds**
    (``run_all.py``'s convention: on the shared machine other jobs move wall times); the wall
    medians are reported too, and ``holds`` needs the goal on both (on LastFM the wall time also
    includes waiting for the disk-backed tables).  Round 1 (a = 0) is run untimed: its
    curriculum weights are ``tanh(0) = 0``, so it would understate paper mode's work.
    quick: ML-100K only, one timed round per mode (≈ 30 s on 2 cores); full: every dataset
    whose split exists, three timed rounds per mode.  For LastFM the goal also requires paper
    mode's peak RSS ≤ 2 GB (the private tables live in a disk-backed memmap above the
    2 GB ``memory_budget_mb``).  On CUDA ``ours_s`` / ``anchor_s`` are wall seconds after
    ``torch.cuda.synchronize()`` (the row's ``clock``); the peak RSS is still the host's.
    """
    root = Path(os.environ.get("RECREPRO_DATA_ROOT", "data"))
    out = []
    for name in DATASETS[:1] if quick else DATASETS:
        split_dir = root / "splits" / name / "fedrap" / "leave_one_out" / "seed0"
        if not (split_dir / "manifest.json").exists():
            continue
        split = SplitData(split_dir)
        timed = 1 if quick else 3
        anchor, anchor_wall, anchor_rss = _timed_rounds(split, "code", 1, timed, device)
        ours, ours_wall, ours_rss = _timed_rounds(split, "paper", 1, timed, device)
        ours_s, anchor_s = statistics.median(ours), statistics.median(anchor)
        ratio = ours_s / anchor_s
        wall_ratio = statistics.median(ours_wall) / statistics.median(anchor_wall)
        holds = ratio <= 3.0 and wall_ratio <= 3.0 and (name != "hetrec2011-lastfm-2k" or ours_rss <= 2048)
        out.append({"measure": f"fedrap paper-mode round vs code-mode round, {name}",
                    "ours_s": round(ours_s, 3), "anchor_s": round(anchor_s, 3), "ratio": round(ratio, 2),
                    "goal": "≤ 3×" + (" and paper peak RSS ≤ 2 GB" if name == "hetrec2011-lastfm-2k" else ""),
                    "holds": bool(holds), "ours_wall_s": round(statistics.median(ours_wall), 3),
                    "anchor_wall_s": round(statistics.median(anchor_wall), 3), "wall_ratio": round(wall_ratio, 2),
                    "peak_rss_mb": {
                        "paper": round(ours_rss), "code": round(anchor_rss)},
                    "threads": torch.get_num_threads(), "clock": clock_label(device),
                    "device": device_label(device)})
    return out


def measure_dense_step(quick: bool, device: str = "cpu") -> dict:
    """The dense path's full-matrix step on ``[B, 17,612, 32]`` tables (LastFM's items; ``B`` = 16
    clients quick, 64 full), fused (ours) against eager (anchor), at the LastFM pick's L1 step
    (μ = 1, ``lr_args`` 1000, λ = 0.1): the median process CPU seconds of a step over 3 (quick) or
    7 timed steps each, after an untimed one (the fused step compiles there).  Goal: ≤ 0.5×."""
    n_clients, n_items, repeats = (16 if quick else 64), 17_612, (3 if quick else 7)
    gen = torch.Generator().manual_seed(0)
    tables = [torch.randn(n_clients, n_items, 32, generator=gen).mul_(0.01).to(device) for _ in range(2)]
    lr = torch.full((n_clients,), 1000.0, device=device)
    loss0 = torch.zeros(n_clients, device=device)
    clock = stamp_fn(device)
    medians, used = {}, {}
    for name in ("eager", "fused"):
        cfg = FederatedConfig(method="fedrap", mode="paper", dim=32, l2=1e-4, dense_update=name, device=device)
        path, scratch = DensePath(), EagerScratch()
        D, C = (t.clone() for t in tables)
        # untimed: the fused step compiles here
        path.full_matrix_update(cfg, n_items, D, C, 0.1, 1.0, lr, loss0, scratch)
        times = []
        for _ in range(repeats):
            t0 = clock()
            path.full_matrix_update(cfg, n_items, D, C, 0.1, 1.0, lr, loss0, scratch)
            times.append(clock() - t0)
        medians[name], used[name] = statistics.median(times), path.update_used
        del D, C
    ratio = medians["fused"] / medians["eager"]
    return {"measure": f"fedrap dense full-matrix step, fused vs eager ({n_clients} × {n_items} × 32)",
            "ours_s": round(medians["fused"], 4), "anchor_s": round(medians["eager"], 4), "ratio": round(ratio, 2),
            "goal": "≤ 0.5×", "holds": bool(ratio <= 0.5 and used["fused"] == "fused"),
            "ran": used["fused"], "threads": torch.get_num_threads(), "clock": clock_label(device),
            "device": device_label(device)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split-dir", help="one split: per-round table (the original benchmark)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="code", choices=["code", "paper"])
    parser.add_argument("--paper-path", default="lazy", choices=["lazy", "dense"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure", action="store_true", help="run measure() (paper vs code per dataset)")
    parser.add_argument("--quick", action="store_true", help="with --measure: ML-100K only, one round")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.measure:
        for row in measure(args.quick):
            print(json.dumps(row), flush=True)
        return
    if not args.split_dir:
        parser.error("--split-dir is required without --measure")
    split = SplitData(args.split_dir)
    model = make_model(split, args.mode, args.rounds, seed=args.seed, paper_path=args.paper_path)
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
    print(json.dumps({"mode": args.mode, "paper_path": args.paper_path, "threads": args.threads,
                      "peak_rss_mb": round(peak),
                      "mean_wall_s": round(sum(r["wall_s"] for r in rows) / len(rows), 2),
                      "mean_cpu_s": round(sum(r["cpu_s"] for r in rows) / len(rows), 2)}))


if __name__ == "__main__":
    main()
