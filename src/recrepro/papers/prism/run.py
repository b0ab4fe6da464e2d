"""PRISM (Loveland et al., KDD 2025): one training run, what ``recrepro prism train`` calls.

:func:`run_method` trains one method (a backbone, a loss, a weight decay or PRISM's init:
:mod:`recrepro.papers.prism.methods`) with the shared trainer (:mod:`recrepro.papers.prism.trainer`),
early-stops on validation, evaluates on test and writes the run record. The tables and figures read the
records back (:mod:`~recrepro.papers.prism.tables`, :mod:`~recrepro.papers.prism.figures`).

The rules in ``workflow/rules/prism_runs.smk`` call it through ``recrepro prism train``
(:mod:`recrepro.papers.prism.cli`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from recrepro.io import write_parquet
from recrepro.papers.prism.methods import parse_method
from recrepro.records import RANK_CORRELATIONS_KEY, rank_correlations, write_history

if TYPE_CHECKING:
    from recrepro.evaluation.on_split import SplitData

# Training and evaluation import torch inside the functions that need it: the drift check reads
# settings_for without torch.

__all__ = ["evaluate_prism", "run_method", "settings_for"]


SSM_NEGATIVES = {"paper": 10, "code": 20}


def settings_for(method: str, tier_conf: Mapping[str, Any], switches: Mapping[str, Any], seed: int,
                 device: str, dataset: str | None = None) -> tuple[str, dict[str, Any]]:
    """Trainer settings of ``method`` under a tier's config block and the paper's switches.

    The debiasing baselines read the tier's ``debias`` block; IPL's exponent β may be
    given per dataset (``ipl_exponent: {default: 1.5, gowalla: 1.285, ...}``).
    """
    spec = parse_method(method)
    loss = spec["loss"]
    debias = dict(tier_conf.get("debias", {}))
    exponent = debias.get("ipl_exponent", 1.5)
    if isinstance(exponent, Mapping):
        exponent = exponent.get(dataset, exponent.get("default", 1.5))
    settings = {
        "loss": loss,
        "alpha": spec["alpha"],
        "weight_decay": spec["weight_decay"],
        "wd_mode": spec["wd_mode"],
        "dim": int(tier_conf["dim"]),
        "lr": float(tier_conf["lr"] if spec["lr"] is None else spec["lr"]),
        "epochs": int(tier_conf["epochs"]),
        "patience": int(tier_conf["patience"]),
        "batch_size": int(tier_conf["batch_size"].get(loss, tier_conf["batch_size"].get("bpr", 16384))),
        "n_negatives": SSM_NEGATIVES[switches["ssm_negatives"]] if loss == "ssm" else 1,
        "negatives": switches["negatives"],
        "tau": float(tier_conf.get("tau", 0.2)),
        "gamma": float(tier_conf.get("gamma", 1.0)),
        "gamma_user": float(tier_conf.get("gamma_user", 1.0)),
        "gamma_item": float(tier_conf.get("gamma_item", 1.0)),
        "nlmf_relu": bool(switches["nlmf_relu"]),
        "layers": int(tier_conf.get("layers", 3)),
        "record_cosine": _records_cosine(spec, tier_conf.get("record_cosine", "fig6")),
        "ipl_weight": float(debias.get("ipl_weight", 0.1)),
        "ipl_exponent": float(exponent),
        "resn_weight": float(debias.get("resn_weight", 1e-3)),
        "macr_alpha": float(debias.get("macr_alpha", 1e-3)),
        "macr_beta": float(debias.get("macr_beta", 1e-3)),
        "macr_c": float(debias.get("macr_c", 1.0)),
        "seed": int(seed),
        "device": device,
    }
    return spec["backbone"], settings


def _records_cosine(spec: Mapping[str, Any], mode: Any) -> bool:
    """Whether a run records cosine-score validation NDCG@20 per epoch (one extra ranking per epoch).

    ``fig6`` (default): only the runs Fig. 6 reads (MF + DirectAU, Xavier init, coupled or no
    weight decay); ``True`` / ``False``: every run / none.
    """
    if mode == "fig6":
        return spec["backbone"] == "mf" and spec["loss"] == "directau" and spec["alpha"] is None \
            and spec["wd_mode"] in ("coupled", "none")
    return bool(mode)


def evaluate_prism(model: Any, split: SplitData, evaluation: Mapping[str, Any], strata_degrees: str,
                   *, device: str = "cpu", batch_size: int = 2048):
    """Test evaluation: full ranking, ``exclude`` masked, strata from ``train`` or ``all`` degrees."""
    fit = split.csr(evaluation["fit"])
    if strata_degrees == "all":
        parts = [p for p in ("train", "validation", "test") if f"{p}.parquet" in split.manifest["files"]]
        degree_matrix = split.csr(parts)
    else:
        degree_matrix = fit
    item_degree = np.asarray(degree_matrix.sum(axis=0)).ravel()
    target = split.part(evaluation["target"])
    from recrepro.evaluation import evaluate_full_ranking

    return evaluate_full_ranking(model, split.csr(evaluation.get("exclude", [])), split.csr([evaluation["target"]]),
                                 list(evaluation["ks"]), users=np.unique(target["user"].to_numpy()),
                                 batch_size=batch_size, device=device, item_degree=item_degree)


def run_method(*, split_dir: Path, method: str, seed: int, out_dir: Path, tier_conf: Mapping[str, Any],
               switches: Mapping[str, Any], evaluation: Mapping[str, Any], meta: Mapping[str, Any],
               device: str = "cpu", batch_size: int = 2048, benchmark_file: str | None = None,
               checkpoint: str | Path | None = None) -> dict[str, Path]:
    """Train ``method`` on the split, early-stop on validation, evaluate on test, write the record.

    Besides the run record, writes ``history.json`` (per-epoch validation NDCG@20 and
    seconds, epochs to best), ``magnitudes.parquet`` (item, train degree, ‖e_i‖ of the raw ID
    embedding after training) for Fig. 2; ``metrics.json`` keeps the table's Spearman ρ of degree and
    norm, which claim P2 reads where the table is not kept (:mod:`recrepro.records.correlations`).

    ``checkpoint``: a file the trainer saves its state to after every epoch and resumes
    from when restarted (:mod:`recrepro.runtime.checkpoints`); deleted once the record is written.
    A resumed run writes the same record as an uninterrupted one, except wall-clock fields
    (``seconds_per_epoch``, ``epoch_seconds``, provenance times, which sum its pieces).
    """
    from recrepro.runtime.checkpoints import earlier_usage, remove_checkpoint
    from recrepro.papers.prism.recommender import EmbeddingRecommender
    from recrepro.evaluation.on_split import SplitData, write_split_record

    started = time.time()
    split = SplitData(split_dir)
    backbone, settings = settings_for(method, tier_conf, switches, seed, device, dataset=meta.get("dataset"))
    train = split.csr(evaluation["fit"])
    validation = split.csr(["validation"])
    model = EmbeddingRecommender(backbone, **settings).fit(train, validation, checkpoint=checkpoint)
    result = evaluate_prism(model, split, evaluation, switches["strata_degrees"], device=device, batch_size=batch_size)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    history = dict(model.history)
    write_history(out_dir, history)
    item_degree = np.bincount(train.indices, minlength=split.n_items)
    magnitudes = pd.DataFrame({
        "item": np.arange(split.n_items, dtype=np.int64),
        "train_degree": item_degree.astype(np.int64),
        "norm": model.item_magnitudes().astype(np.float64),
    })
    write_parquet(out_dir / "magnitudes.parquet", magnitudes)
    paths = write_split_record(
        out_dir, split, result,
        counts={**result.counts, "epochs_to_best": int(history["best_epoch"]), "epochs_run": int(history["epochs_run"])},
        meta={**meta, "method": method, "backbone": backbone,
              "best_val_ndcg": history["best_val_ndcg"], "seconds_per_epoch": history["seconds_per_epoch"],
              "epochs_to_best": int(history["best_epoch"]),
              RANK_CORRELATIONS_KEY: {"magnitudes.parquet": rank_correlations(magnitudes, "magnitudes.parquet")},
              **({"diverged": history["diverged"]} if history.get("diverged") else {})},
        config_slice={"method": method, "settings": settings, "switches": dict(switches),
                      "evaluation": dict(evaluation)},
        seed=seed, device=device, started_at=started, benchmark_file=benchmark_file,
        earlier=earlier_usage(checkpoint))
    remove_checkpoint(checkpoint)  # the record is complete: a rerun must not resume a finished run
    return paths
