"""Fit seconds of the strong simple baselines (issue 48) on gowalla, against named anchors.

The LightGCN gowalla training matrix (29,858 × 40,981, 810k entries) from the mirror.  Each row
is process CPU seconds, ours and the anchor in this process:

* ``itemknn`` / ``rp3beta`` (k = 100) against the sparse Gram product ``XᵀX`` (``scipy.sparse``)
  that every item–item model starts from: the ratio is what the sparse top-k, the shrinkage and
  the transition powers cost on top of it.  ``implicit``'s ``CosineRecommender`` (no shrinkage)
  is timed too where it is importable.
* ``ease`` on the ``n`` most popular items (``--quick``: 4,000; else 8,000; gowalla's 40,981
  would take 4·40,981² bytes = 6.7 GB in float32 and ~10¹⁴ flops) against ``numpy.linalg.inv`` of
  the same ``XᵀX + λI`` (float64): in-place Cholesky inversion vs a general inverse.
* ``mostpop`` against the same Gram product (it is a column count).
* ``ease`` scoring of every user (float32, the same items) against the CSR × dense products on a
  C-ordered copy of its ``W``: goal ≤ 1.5 (a Fortran-ordered ``W`` made the product 3-14x slower).

    python benchmarks/bench_strong.py --mirror ../shared/datasets [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def _cpu(fn) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def measure(quick: bool, mirror: Path) -> list[dict]:
    from bench_ials import load_gowalla  # benchmarks/ (on sys.path)
    from recrepro.models.baselines import MostPopular
    from recrepro.models.ease import EASE
    from recrepro.models.itemknn import ItemKNN
    from recrepro.models.rp3beta import RP3beta

    train, _ = load_gowalla(mirror)
    if quick:  # a third of the users: the same item count, a quicker Gram
        train = train[: train.shape[0] // 3]
    gram = _cpu(lambda: train.T @ train)
    rows = []
    shape = f"{train.shape[0]:,} × {train.shape[1]:,}"
    for name, model in (("itemknn", ItemKNN(k=100, shrink=10.0)), ("rp3beta", RP3beta(alpha=1.0, beta=0.5, k=100)),
                        ("mostpop", MostPopular())):
        ours = _cpu(lambda: model.fit(train))
        rows.append({"measure": f"strong {name} fit, gowalla {shape}", "ours_s": ours, "anchor_s": gram,
                     "ratio": ours / gram, "goal": "", "holds": None, "note": "anchor: scipy.sparse XᵀX"})
    try:
        from implicit.nearest_neighbours import CosineRecommender

        anchor = _cpu(lambda: CosineRecommender(K=100).fit(train, show_progress=False))
        ours = rows[0]["ours_s"]
        rows.append({"measure": f"strong itemknn fit vs implicit CosineRecommender, gowalla {shape}", "ours_s": ours,
                     "anchor_s": anchor, "ratio": ours / anchor, "goal": "", "holds": None,
                     "note": "implicit has no shrinkage term"})
    except ImportError:
        pass
    n = 4000 if quick else 8000
    top = np.argsort(-np.asarray(train.sum(axis=0)).ravel(), kind="stable")[:n]
    sub = train[:, top].tocsr()
    ours = _cpu(lambda: EASE(lam=500.0).fit(sub))
    dense = (sub.T @ sub).toarray().astype(np.float64)
    dense[np.diag_indices(n)] += 500.0
    anchor = _cpu(lambda: np.linalg.inv(dense))
    rows.append({"measure": f"strong ease fit, gowalla top {n:,} items", "ours_s": ours, "anchor_s": anchor,
                 "ratio": ours / anchor, "goal": "", "holds": None, "note": "anchor: numpy.linalg.inv(XᵀX + λI)"})
    rows.append(ease_scoring(sub))
    return rows


def ease_scoring(sub, batch: int = 2048) -> dict:
    """Every user's EASE scores, in the evaluator's batches, against the same CSR × dense products on a
    C-ordered copy of ``W``: the ratio is what ``score`` adds to the product (about 1). A Fortran-ordered
    ``W`` (LAPACK's in-place inverse as it comes) made the product itself 3-14x slower."""
    from recrepro.models.ease import EASE

    model = EASE(lam=500.0, dtype="float32").fit(sub)
    users = np.arange(sub.shape[0])
    c_order = np.ascontiguousarray(model.W)
    model.score(users[:batch]), sub[:batch] @ c_order  # warm both: the first call pays the page faults
    ours = _cpu(lambda: [model.score(users[i:i + batch]) for i in range(0, users.size, batch)])
    anchor = _cpu(lambda: [sub[i:i + batch] @ c_order for i in range(0, users.size, batch)])
    return {"measure": f"strong ease scoring, gowalla {sub.shape[0]:,} users × top {sub.shape[1]:,} items",
            "ours_s": ours, "anchor_s": anchor, "ratio": ours / anchor, "goal": "≤ 1.5", "holds": ours / anchor <= 1.5,
            "note": "anchor: CSR rows × a C-ordered copy of W, the same batches"}


def ease_full(mirror: Path, lam: float = 500.0) -> dict:
    """EASE on all of gowalla's items in float32, as the strong-baseline grid runs it: process CPU and
    wall seconds of the fit, and the process's peak resident memory (``ru_maxrss``) against the
    n² float32 matrix it must hold.  Not part of ``run_all.py`` (tens of CPU minutes on 2 cores)."""
    import resource

    from bench_ials import load_gowalla
    from recrepro.models.ease import ease_weights

    train, _ = load_gowalla(mirror)
    n = train.shape[1]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wall, cpu = time.perf_counter(), time.process_time()
    weights = ease_weights(train, lam, dtype="float32")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"measure": f"strong ease fit, gowalla all {n:,} items, float32, lambda {lam:g}", "cpu_s": cpu,
            "wall_s": wall, "peak_rss_mb": peak, "rss_before_fit_mb": before,
            "matrix_mb": n * n * 4 / 2**20, "finite": bool(np.isfinite(weights).all())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default="../shared/datasets")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ease-full", action="store_true",
                        help="only EASE on all gowalla items in float32: time and peak memory (see ease_full)")
    args = parser.parse_args()
    rows = [ease_full(Path(args.mirror))] if args.ease_full else measure(args.quick, Path(args.mirror))
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main()
