"""A run on its split: read the split, evaluate a fitted model with the split's evaluator, record.

:func:`evaluate_on_split` is the one place that knows how a split's ``evaluation``
section (``config.yaml: evaluation.splits.<split>``) maps to the evaluation core; every
paper's training rule calls it with its fitted model, as
:func:`recrepro.baselines.run.run_baseline` does for the reference baselines.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from recrepro.evaluation import evaluate_full_ranking, evaluate_sampled, interactions_to_csr
from recrepro.io import read_json
from recrepro.records import write_run_record


class SplitData:
    """A split directory: its manifest and lazily read parts as CSR matrices."""

    def __init__(self, split_dir: str | Path) -> None:
        self.dir = Path(split_dir)
        self.manifest = read_json(self.dir / "manifest.json")
        self.n_users = int(self.manifest["n_users"])
        self.n_items = int(self.manifest["n_items"])
        self._frames: dict[str, pd.DataFrame] = {}

    def describe(self) -> dict[str, Any]:
        """``dataset``, ``protocol`` and ``split`` as the manifest records them."""
        return {k: self.manifest[k] for k in ("dataset", "protocol", "split") if k in self.manifest}

    def part(self, name: str) -> pd.DataFrame:
        if f"{name}.parquet" not in self.manifest["files"]:
            raise ValueError(f"{self.dir}: split has no part {name!r}; parts: {sorted(self.manifest['files'])}")
        if name not in self._frames:
            self._frames[name] = pd.read_parquet(self.dir / f"{name}.parquet")
        return self._frames[name]

    def csr(self, names: list[str] | tuple[str, ...]) -> sp.csr_matrix:
        """The union of ``names`` as a binary ``[n_users, n_items]`` CSR matrix."""
        if not names:
            return sp.csr_matrix((self.n_users, self.n_items), dtype=np.float32)
        frame = pd.concat([self.part(n)[["user", "item"]] for n in names], ignore_index=True)
        return interactions_to_csr(frame["user"].to_numpy(), frame["item"].to_numpy(), self.n_users, self.n_items)


def evaluate_on_split(model: Any, split: SplitData, evaluation: Mapping[str, Any], *,
                      device: str = "cpu", batch_size: int = 2048):
    """Evaluate ``model`` (a fitted recommender, ``(U, V)`` or a score callable) as ``evaluation`` says.

    ``evaluation`` is one ``evaluation.splits`` entry: ``mode`` (full | sampled), ``fit``
    (parts the model was trained on: their item degrees define the popularity strata),
    ``exclude`` (parts masked when ranking), ``target``, ``ks``, and optionally
    ``metrics``, ``ties`` (sampled) and ``rank_ties`` (full-ranking rank metrics).
    """
    target = split.part(evaluation["target"])
    ks = list(evaluation["ks"])
    if evaluation["mode"] == "sampled":
        return evaluate_sampled(model, target, split.part("negatives"), ks,
                                ties=evaluation.get("ties", "pessimistic"))
    fit = split.csr(evaluation["fit"])
    item_degree = np.asarray(fit.sum(axis=0)).ravel()
    kwargs: dict[str, Any] = {}
    if evaluation.get("metrics"):
        kwargs["metrics"] = list(evaluation["metrics"])
    if evaluation.get("rank_ties"):
        kwargs["rank_ties"] = evaluation["rank_ties"]
    targets = split.csr([evaluation["target"]])
    users = np.unique(target["user"].to_numpy())
    return evaluate_full_ranking(model, split.csr(evaluation.get("exclude", [])), targets, ks, users=users,
                                 batch_size=batch_size, device=device, item_degree=item_degree, **kwargs)


def write_split_record(out_dir: str | Path, split: SplitData, result: Any, *, meta: Mapping[str, Any],
                       config_slice: Mapping[str, Any], seed: int, device: str, started_at: float,
                       benchmark_file: str | None = None, overall: Mapping[str, float] | None = None,
                       counts: Mapping[str, int] | None = None,
                       earlier: Mapping[str, Any] | None = None) -> dict[str, Path]:
    """Write the run record of ``result``, a model's evaluation on ``split`` (:func:`evaluate_on_split`).

    The record holds the result's metrics and strata, the per-user rows of its metric columns,
    its counts, the split's identity (:meth:`SplitData.describe`, under ``meta``) and manifest,
    and the wall time since ``started_at`` (a ``time.time()`` value), plus ``earlier``, what
    the earlier pieces of a resumed run spent (:func:`recrepro.runtime.checkpoints.earlier_usage`).
    ``overall`` and ``counts`` replace the result's own where the run adds to them.
    """
    overall = result.overall if overall is None else overall
    return write_run_record(
        out_dir,
        overall=overall,
        strata=getattr(result, "strata", {}) or {},
        per_user=result.per_user[["user", *[c for c in overall if c in result.per_user.columns]]],
        counts=result.counts if counts is None else counts,
        meta={**split.describe(), **meta},
        config_slice=config_slice,
        split_manifest=split.dir / "manifest.json",
        seed=seed,
        device=device,
        started_at=started_at,
        wall_seconds=time.time() - started_at,
        benchmark_file=benchmark_file,
        earlier=earlier,
    )
