"""Seconds per training epoch: our iALS (exact batched solves) and exADMM vs ``implicit``'s ALS.

Issue 4, acceptance 4: gowalla (LightGCN train.txt/test.txt from the mirror), d = 64.
``implicit`` 0.7.x is timed with ``use_cg=False`` (exact) and ``use_cg=True`` when it is
importable; otherwise its rows say "not installed".  Usage::

    OMP_NUM_THREADS=2 python benchmarks/bench_ials.py --mirror ../shared/datasets --dim 64 --epochs 3 [--eval-epochs 15]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch


def load_gowalla(mirror: Path):
    from recrepro.datasets.parsers import read_lightgcn_split

    frame = read_lightgcn_split(mirror / "gowalla" / "train.txt", mirror / "gowalla" / "test.txt")
    users, items = frame["user"].to_numpy().astype(np.int64), frame["item"].to_numpy().astype(np.int64)
    n, m = users.max() + 1, items.max() + 1
    is_train = frame["part"].to_numpy() == "train"

    def csr(mask):
        return sp.csr_matrix((np.ones(mask.sum(), np.float32), (users[mask], items[mask])), shape=(n, m))

    return csr(is_train), csr(~is_train)


def time_ours(train, family: str, dim: int, epochs: int) -> tuple[dict, object]:
    """Mean wall seconds per epoch (from the model's history) and process CPU seconds per epoch
    (setup included; on a shared machine the CPU time is the steadier number)."""
    from recrepro.models.exadmm import ExADMM
    from recrepro.models.ials import IALS

    kw = dict(dim=dim, alpha0=0.1, l2=0.002, epochs=epochs, seed=0, log_losses=False)
    if family == "ials_cg":
        model = IALS(solver="cg", cg_steps=3, **kw)
    elif family == "ials":
        model = IALS(**kw)
    else:
        model = ExADMM(exposure_reg=1e-3, admm_penalty=0.01, learning_rate=0.01, **kw)
    cpu = time.process_time()
    model.fit(train)
    cpu = time.process_time() - cpu
    wall = float(np.mean([h["seconds"] for h in model.history]))
    return {"wall_s_per_epoch": wall, "cpu_s_per_epoch_incl_setup": cpu / epochs}, model


def time_implicit(train, dim: int, epochs: int, use_cg: bool):
    try:
        from implicit.cpu.als import AlternatingLeastSquares
    except ImportError:
        return None
    model = AlternatingLeastSquares(factors=dim, iterations=epochs, use_cg=use_cg, random_state=0,
                                    calculate_training_loss=False)
    started, cpu = time.perf_counter(), time.process_time()
    try:  # implicit asks for a single-threaded BLAS (it parallelises over rows itself)
        from threadpoolctl import threadpool_limits
    except ImportError:
        model.fit(train, show_progress=False)
    else:
        with threadpool_limits(1, "blas"):
            model.fit(train, show_progress=False)
    return {"wall_s_per_epoch": (time.perf_counter() - started) / epochs,
            "cpu_s_per_epoch": (time.process_time() - cpu) / epochs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, required=True)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--eval-epochs", type=int, default=0, help="also fit our iALS this long and evaluate")
    args = parser.parse_args()
    train, test = load_gowalla(args.mirror)
    out = {"dataset": "gowalla (LightGCN train)", "dim": args.dim, "threads": torch.get_num_threads(),
           "train_nnz": int(train.nnz), "shape": list(train.shape)}
    out["ours_ials"], _ = time_ours(train, "ials", args.dim, args.epochs)
    out["ours_ials_cg3"], _ = time_ours(train, "ials_cg", args.dim, args.epochs)
    out["ours_exadmm"], _ = time_ours(train, "exadmm", args.dim, args.epochs)
    out["implicit_exact"] = time_implicit(train, args.dim, args.epochs, use_cg=False) or "not installed"
    out["implicit_cg"] = time_implicit(train, args.dim, args.epochs, use_cg=True) or "not installed"
    if args.eval_epochs:
        from recrepro.evaluation import evaluate_full_ranking

        _, model = time_ours(train, "ials", args.dim, args.eval_epochs)
        users = np.flatnonzero(np.diff(test.indptr) > 0)
        res = evaluate_full_ranking(model, train, test, [20], users=users, metrics=["recall_lgcn", "ndcg"])
        out["ours_ials_eval"] = {"epochs": args.eval_epochs, **res.overall}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
