"""Benchmark: full-ranking top-20 evaluation on Gowalla, ours vs a bare torch loop.

Run from the repository root::

    python3 benchmarks/bench_full_ranking.py [--repeats 3] [--rounds 2] [--with-rank-metrics]

Workload: Gowalla (LightGCN split, 29,858 users × 40,981 items), random embeddings d = 64
(numpy ``default_rng(0)``, float32, N(0, 0.1²)), training items masked, top-20 for every
user with test items.  Each method runs in its own subprocess so its peak RSS is its own:

- ``ours``: :func:`recrepro.evaluation.evaluate_full_ranking` with the default metrics
  (Recall both forms, NDCG, HR, precision, coverage, Gini, position Gini) at K = 20;
- ``ours_topk``: :func:`recrepro.evaluation.full_ranking_topk` (lists only);
- ``bare``: ``torch.mm`` + index-put of ``-inf`` + ``torch.topk`` in batches of 2048
  users (no tie rule, no metrics) — the reference loop;
- ``ours_rank`` (``--with-rank-metrics``): ``ours`` plus AUC and λOpt's per-positive
  HR/NDCG (exact float64 scores and a row sort per user).

Each worker does one untimed warm-up run, then ``--repeats`` timed runs; the methods
alternate over ``--rounds`` rounds so that slow phases of a shared machine hit all of
them.  Reported: the best wall time over all timed runs (seconds), every run, and the
largest peak RSS of the method's processes (GB, ``ru_maxrss``; it includes the ~0.4 GB
of interpreter, torch, data and embeddings, shown separately as "RSS after load").  This
is a script, not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from devclock import clock_label, device_label, on_cuda, stamp_fn  # benchmarks/ (on sys.path)

BATCH = 2048
K = 20
DIM = 64


def dataset_root() -> Path:
    env = os.environ.get("RECREPRO_MIRROR")
    return Path(env) if env else Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"


def load():
    from recrepro.evaluation import interactions_to_csr

    from recrepro.datasets.parsers import read_lightgcn_split

    root = dataset_root() / "gowalla"
    frame = read_lightgcn_split(root / "train.txt", root / "test.txt")
    is_train = (frame["part"] == "train").to_numpy()
    users, items = frame["user"].to_numpy(np.int64), frame["item"].to_numpy(np.int64)
    train_u, train_i, test_u, test_i = users[is_train], items[is_train], users[~is_train], items[~is_train]
    n_users = int(max(train_u.max(), test_u.max())) + 1
    n_items = int(max(train_i.max(), test_i.max())) + 1
    train = interactions_to_csr(train_u, train_i, n_users, n_items)
    test = interactions_to_csr(test_u, test_i, n_users, n_items)
    rng = np.random.default_rng(0)
    user_emb = (0.1 * rng.standard_normal((n_users, DIM))).astype(np.float32)
    item_emb = (0.1 * rng.standard_normal((n_items, DIM))).astype(np.float32)
    return train, test, user_emb, item_emb


def bare_loop(train, test, user_emb, item_emb) -> float:
    """The reference: torch.mm + mask + torch.topk, batches of 2048 users."""
    import torch

    users = np.flatnonzero(np.diff(test.indptr) > 0)
    user_t = torch.from_numpy(user_emb)
    item_t = torch.from_numpy(item_emb)
    checksum = 0
    for start in range(0, users.size, BATCH):
        batch = users[start : start + BATCH]
        scores = torch.mm(user_t[torch.from_numpy(batch)], item_t.T)
        sub = train[batch]
        rows = np.repeat(np.arange(batch.size), np.diff(sub.indptr))
        scores[torch.from_numpy(rows), torch.from_numpy(sub.indices.astype(np.int64))] = -torch.inf
        _, top = torch.topk(scores, K, dim=1)
        checksum += int(top[:, 0].sum())
    return float(checksum)


def bare_mm(user_emb, item_emb, users, device: str = "cpu") -> float:
    """The floor: one ``torch.mm`` per batch of 2048 users over all items, nothing else (on ``device``)."""
    import torch

    user_t, item_t = torch.from_numpy(user_emb), torch.from_numpy(item_emb)
    if on_cuda(device):  # copied inside the timed call, as ours copies its NumPy tables to the device
        user_t, item_t = user_t.to(device), item_t.to(device)
    checksum = 0.0
    for start in range(0, users.size, BATCH):
        checksum += float(torch.mm(user_t[torch.from_numpy(users[start:start + BATCH])], item_t.T)[0, 0])
    return checksum


def measure(quick: bool, device: str = "cpu") -> list[dict]:
    """Ours (``evaluate_full_ranking``, default metrics @20) vs the bare ``torch.mm`` floor, in this process.

    Process CPU seconds (on CUDA: wall seconds after ``torch.cuda.synchronize()``), best of 2 (quick)
    or 4 alternating runs each after one warm-up; the peak RSS of ours is measured in a fresh
    subprocess (full mode on the CPU only; it includes the ~0.4 GB of interpreter, torch and data).
    On CUDA the RSS part is left out: the host-memory goal is about the CPU evaluation."""
    from recrepro.evaluation import evaluate_full_ranking

    train, test, user_emb, item_emb = load()
    users = np.flatnonzero(np.diff(test.indptr) > 0)
    runs = {"ours": lambda: evaluate_full_ranking((user_emb, item_emb), train, test, [K], batch_size=BATCH,
                                                  device=device),
            "floor": lambda: bare_mm(user_emb, item_emb, users, device)}
    stamp = stamp_fn(device)
    best = {name: float("inf") for name in runs}
    for rep in range(3 if quick else 5):
        for name, fn in runs.items():
            t0 = stamp()
            fn()
            if rep:  # rep 0 is the warm-up
                best[name] = min(best[name], stamp() - t0)
    row = {"measure": "full-ranking top-20 evaluation, gowalla, all test users, d 64, vs bare torch.mm",
           "ours_s": round(best["ours"], 3), "anchor_s": round(best["floor"], 3),
           "ratio": round(best["ours"] / best["floor"], 3), "goal": "≤ 1.2×",
           "holds": best["ours"] / best["floor"] <= 1.2, "clock": clock_label(device), "device": device_label(device)}
    if not quick and not on_cuda(device):
        out = subprocess.run([sys.executable, __file__, "--worker", "ours", "--repeats", "1"],
                             capture_output=True, text=True, check=True)
        row["peak_rss_gb"] = round(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_gb"], 3)
        row["goal"] += ", peak RSS < 1 GB"
        row["holds"] = row["holds"] and row["peak_rss_gb"] < 1.0
    elif not quick:
        row["note"] = "peak RSS < 1 GB is checked on the CPU run"
    return [row]


def worker(method: str, repeats: int) -> dict:
    import torch

    torch.set_num_threads(os.cpu_count() or 1)  # 2 on the reference machine; OpenBLAS uses all cores too
    from recrepro.evaluation import ALL_METRICS, evaluate_full_ranking, full_ranking_topk

    t0 = time.perf_counter()
    train, test, user_emb, item_emb = load()
    load_s = time.perf_counter() - t0
    rss_after_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    times, summary = [], {}
    for run in range(repeats + 1):  # run 0 is the warm-up
        t0 = time.perf_counter()
        if method == "bare":
            summary = {"checksum": bare_loop(train, test, user_emb, item_emb)}
        elif method == "ours":
            result = evaluate_full_ranking((user_emb, item_emb), train, test, [K], batch_size=BATCH)
            summary = {k: round(v, 6) for k, v in result.overall.items()}
        elif method == "ours_topk":
            users = np.flatnonzero(np.diff(test.indptr) > 0)
            top = full_ranking_topk((user_emb, item_emb), K, exclude=train, users=users, batch_size=BATCH)
            summary = {"checksum": float(top.items[:, 0].astype(np.int64).sum())}
        elif method == "ours_rank":
            result = evaluate_full_ranking((user_emb, item_emb), train, test, [K], batch_size=BATCH,
                                           metrics=ALL_METRICS)
            summary = {k: round(v, 6) for k, v in result.overall.items()}
        else:
            raise ValueError(method)
        if run:
            times.append(time.perf_counter() - t0)
    return {
        "method": method,
        "best_s": min(times),
        "times_s": [round(t, 3) for t in times],
        "load_s": round(load_s, 3),
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "rss_after_load_gb": rss_after_load,
        "summary": summary,
    }


def machine() -> str:
    import torch

    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{cpu}, {os.cpu_count()} cores, {mem_gb:.0f} GiB; Python {platform.python_version()}, "
            f"numpy {np.__version__}, torch {torch.__version__} (CPU, {torch.get_num_threads()} threads), "
            f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--with-rank-metrics", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.repeats)))
        return
    if not (dataset_root() / "gowalla" / "train.txt").exists():
        sys.exit(f"Gowalla not found under {dataset_root()} (set RECREPRO_MIRROR)")
    methods = ["bare", "ours", "ours_topk"] + (["ours_rank"] if args.with_rank_metrics else [])
    print(f"machine: {machine()}")
    print(f"workload: Gowalla 29,858 users x 40,981 items, d={DIM}, top-{K}, train masked, batch {BATCH}")
    runs: dict[str, list[dict]] = {m: [] for m in methods}
    for _ in range(args.rounds):
        for method in methods:
            repeats = 1 if method == "ours_rank" else args.repeats
            out = subprocess.run([sys.executable, __file__, "--worker", method, "--repeats", str(repeats)],
                                 check=True, capture_output=True, text=True)
            runs[method].append(json.loads(out.stdout.strip().splitlines()[-1]))
    results = []
    for method, parts in runs.items():
        results.append({
            "method": method,
            "best_s": min(p["best_s"] for p in parts),
            "times_s": [t for p in parts for t in p["times_s"]],
            "peak_rss_gb": max(p["peak_rss_gb"] for p in parts),
            "rss_after_load_gb": max(p["rss_after_load_gb"] for p in parts),
            "summary": parts[-1]["summary"],
        })
    print(f"{'method':<10} {'best s':>7} {'peak RSS GB':>12} {'RSS after load':>15}  all timed runs (s)")
    for r in results:
        print(f"{r['method']:<10} {r['best_s']:>7.2f} {r['peak_rss_gb']:>12.2f} {r['rss_after_load_gb']:>15.2f}  "
              f"{r['times_s']}")
    for r in results:
        if r["method"].startswith("ours") and "ndcg@20" in r["summary"]:
            print(f"{r['method']} metrics: {r['summary']}")


if __name__ == "__main__":
    main()
