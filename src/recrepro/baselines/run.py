"""MostPop and Random on any split: fit, evaluate with the split's evaluator, record."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recrepro.evaluation.on_split import SplitData, evaluate_on_split, write_split_record
from recrepro.models.base import Recommender


def make_baseline(method: str, seed: int) -> Recommender:
    from recrepro.models.baselines import MostPopular, RandomRecommender

    if method == "mostpop":
        return MostPopular()
    if method == "random":
        return RandomRecommender(seed=seed)
    raise ValueError(f"unknown baseline {method!r}; known: mostpop, random")


def run_baseline(*, split_dir: Path, method: str, seed: int, out_dir: Path, evaluation: Mapping[str, Any],
                 meta: Mapping[str, Any], device: str = "cpu", batch_size: int = 2048,
                 benchmark_file: str | None = None) -> dict[str, Path]:
    """Fit a reference baseline on the split's ``fit`` parts, evaluate it and write the run record."""
    started = time.time()
    split = SplitData(split_dir)
    model = make_baseline(method, seed).fit(split.csr(evaluation["fit"]))
    result = evaluate_on_split(model, split, evaluation, device=device, batch_size=batch_size)
    return write_split_record(
        out_dir, split, result, meta={"method": method, "tier": "custom", **meta},
        config_slice={"method": method, "evaluation": dict(evaluation), "batch_size": batch_size},
        seed=seed, device=device, started_at=started, benchmark_file=benchmark_file)
