"""exADMM (Togashi, Abe, Saito, WWW 2024): one operating point's run and Fig. 2's timings.

``recrepro exadmm train`` (:mod:`recrepro.papers.exadmm.cli`, called by ``workflow/rules/exadmm_runs.smk``)
runs these functions:

``--mode point`` (:func:`run_point`, the default)
    Fit one operating point (iALS, exADMM or FairRec on top of iALS) on a
    strong-generalisation split's ``train`` part, fold in the held-out users of
    ``validation_tr`` and ``test_tr`` (V fixed), evaluate both (exclude = fold-in part,
    targets = ``*_te``) and write the run record (test metrics) plus ``validation.json``
    (validation metrics, for model selection) and ``history.json`` (per-epoch seconds,
    residuals, objective terms).
``--mode scalability`` (:func:`scalability`)
    Figure 2's timings: seconds per training epoch vs d and vs number of users (a JSON record).

The operating points come from the config (:mod:`recrepro.papers.exadmm.rules`); the figures and
Table 4 are drawn from the records (:mod:`~recrepro.papers.exadmm.figures`, :mod:`~recrepro.papers.exadmm.tables`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recrepro.io import write_json, write_parquet
from recrepro.records import RunProvenance, write_history

if TYPE_CHECKING:
    from recrepro.evaluation.on_split import SplitData

# torch, the evaluation core and the models are imported where they are used, so the
# Snakefile can import the operating points (recrepro.papers.exadmm.rules) cheaply.

__all__ = ["DEFAULT_KS", "DEFAULT_METRICS", "MODEL_KEYS", "make_model", "run_point", "scalability"]


DEFAULT_METRICS = ("recall_liang", "ndcg", "coverage", "gini", "gini_pos")
#: Cut-offs a run record scores when the tier names none (``exadmm.ks``).
DEFAULT_KS = (3, 5, 10, 20, 50, 100)
MODEL_KEYS = {
    "ials": ("dim", "alpha0", "l2", "l2_exp", "stdev", "epochs", "log_losses", "solver", "cg_steps"),
    "exadmm": ("dim", "alpha0", "l2", "l2_exp", "stdev", "epochs", "exposure_reg", "admm_penalty",
               "learning_rate", "pred_iterations", "strength_scaling", "u_step_hessian", "u_step_size",
               "log_losses"),
}


def make_model(family: str, params: Mapping[str, Any], seed: int, device: str = "cpu"):
    from recrepro.papers.exadmm.exadmm import ExADMM
    from recrepro.models.ials import IALS

    kwargs = {k: v for k, v in params.items() if k in MODEL_KEYS[family]}
    cls = IALS if family == "ials" else ExADMM
    return cls(seed=seed, device=device, **kwargs)


# ------------------------------------------------------------------ train + evaluate


def _evaluate_part(model, split: SplitData, fold: str, target: str, ks, metrics, item_degree, device, batch_size,
                   post=None):
    from recrepro.evaluation import evaluate_full_ranking

    history = split.csr([fold])
    users_factors = model.fold_in(history)
    target_frame = split.part(target)
    users = np.unique(target_frame["user"].to_numpy())
    source = (users_factors, model.V)
    if post is not None:
        source = post(users_factors, model.V, history, users)
    return evaluate_full_ranking(source, history, split.csr([target]), ks, users=users, batch_size=batch_size,
                                 device=device, item_degree=item_degree, metrics=list(metrics))


def run_point(*, split_dir: Path, method: str, family: str, params: Mapping[str, Any], seed: int, out_dir: Path,
              ks: Sequence[int], metrics: Sequence[str], meta: Mapping[str, Any], device: str = "cpu",
              batch_size: int = 2048, benchmark_file: str | None = None,
              record_part: str = "test", parts: Sequence[str] = ("validation", "test")) -> dict[str, Path]:
    """Fit one operating point, fold in the held-out users of ``parts``, evaluate, write the record.

    ``<part>.json`` holds each evaluated part's metrics; the run record holds ``record_part``'s.
    """
    import torch

    from recrepro.evaluation.on_split import SplitData, write_split_record

    started = time.time()
    torch.manual_seed(seed)
    split = SplitData(split_dir)
    train = split.csr(["train"])
    item_degree = np.asarray(train.sum(axis=0)).ravel()
    post = None
    if family == "fairrec":
        from recrepro.papers.exadmm.fairrec import fairrec_scores

        model = make_model("ials", params["base"], seed, device).fit(train)

        def post(U, V, history, users):  # noqa: E306
            return fairrec_scores(U, V, history, users, k=int(params.get("topk_fair", max(ks))),
                                  prop=float(params["min_assignment_prop"]), seed=seed)
    else:
        model = make_model(family, params, seed, device).fit(train)
    results = {}
    for name in dict.fromkeys([*parts, record_part]):
        results[name] = _evaluate_part(model, split, f"{name}_tr", f"{name}_te", ks, metrics, item_degree, device,
                                       batch_size, post)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, result in results.items():  # validation.json selects operating points
        write_json(out_dir / f"{name}.json", {"overall": result.overall, "counts": result.counts})
        if name != record_part:  # the record's own part is per_user.parquet; a paired test of another part needs its own
            columns = ["user", *[c for c in result.overall if c in result.per_user.columns]]
            write_parquet(out_dir / f"{name}_per_user.parquet", result.per_user[columns])
    write_history(out_dir, {"train": getattr(model, "history", []),
                            "fold_in": getattr(model, "fold_in_history", [])})
    return write_split_record(
        out_dir, split, results[record_part], meta={"method": method, "family": family, **meta},
        config_slice={"family": family, "params": dict(params), "ks": list(ks), "metrics": list(metrics),
                      "fit": ["train"], "fold_in": f"{record_part}_tr", "target": f"{record_part}_te"},
        seed=seed, device=device, started_at=started, benchmark_file=benchmark_file)


# ------------------------------------------------------------------ Fig. 2's timings


def scalability(split_dir, out_json, *, entry: Mapping[str, Any], dims: Sequence[int],
                user_fractions: Sequence[float], epochs: int, device: str = "cpu", seed: int = 0) -> dict:
    """Figure 2's timings: mean seconds per training epoch of iALS and exADMM vs d and vs number of users.

    FairRec's cost is iALS's epoch plus its post-processing (reported separately, once).
    Users are subsampled (without replacement, seed ``seed``) from the training users. Writes
    ``out_json``, the record :func:`figure_scalability` draws from: the timings, the dataset,
    the epochs, FairRec's k, the device, the threads and a run record's provenance block
    (:class:`recrepro.records.RunProvenance`).
    """
    import torch

    from recrepro.evaluation.on_split import SplitData

    started_at = time.time()
    split = SplitData(split_dir)
    train = split.csr(["train"])
    active = np.flatnonzero(np.diff(train.indptr) > 0)
    rng = np.random.default_rng(seed)
    records = []

    fair = (entry.get("sweep") or {}).get("fairrec") or [{}]
    fair_k, fair_prop = int(fair[0].get("topk_fair", 20)), float(fair[0].get("min_assignment_prop", 0.5))

    def timed(family, params, matrix):
        model = make_model(family, {**params, "epochs": epochs}, seed, device)
        model.log_losses = False
        model.fit(matrix)
        return float(np.mean([h["seconds"] for h in model.history])), model

    def fairrec_seconds(model, matrix):
        """FairRec's post-processing of the fitted iALS for the matrix's users (one pass)."""
        from recrepro.papers.exadmm.fairrec import fairrec_rankings

        rows = np.flatnonzero(np.diff(matrix.indptr) > 0)
        started = time.perf_counter()
        scores = (model.U[torch.as_tensor(rows, device=model.U.device)] @ model.V.T).double().cpu().numpy()
        fairrec_rankings(scores, matrix[rows], k=min(fair_k, matrix.shape[1]), prop=fair_prop, seed=seed)
        return time.perf_counter() - started

    base_d = int(entry["ials"]["dim"])
    for family in ("ials", "exadmm"):
        for d in dims:
            seconds, model = timed(family, {**entry[family], "dim": d}, train)
            records.append({"family": family, "axis": "dim", "dim": d, "n_users": active.size, "seconds": seconds})
            if family == "ials":
                post = fairrec_seconds(model, train)
                records.append({"family": "fairrec", "axis": "dim", "dim": d, "n_users": active.size,
                                "seconds": seconds + post, "post_seconds": post})
        for frac in user_fractions:
            keep = np.sort(rng.choice(active, size=max(2, int(frac * active.size)), replace=False))
            sub = train[keep]
            seconds, model = timed(family, {**entry[family], "dim": base_d}, sub)
            records.append({"family": family, "axis": "users", "dim": base_d, "n_users": int(keep.size),
                            "seconds": seconds})
            if family == "ials":
                post = fairrec_seconds(model, sub)
                records.append({"family": "fairrec", "axis": "users", "dim": base_d, "n_users": int(keep.size),
                                "seconds": seconds + post, "post_seconds": post})
    dataset = split.describe().get("dataset", "?")
    settings = {"dims": [int(d) for d in dims], "user_fractions": [float(f) for f in user_fractions],
                "epochs": int(epochs)}
    # The same provenance as a run record's (commit, versions, config hash, split hashes, threads,
    # host, times): timings mean little without the machine and the code that took them.
    provenance = RunProvenance(
        meta={"dataset": dataset, "kind": "exadmm_scalability"}, config_slice={"entry": dict(entry), **settings},
        split_manifest=Path(split_dir) / "manifest.json", seed=seed, device=device, started_at=started_at).build()
    record = {"dataset": dataset, "records": records, "epochs": epochs,
              "fairrec_k": fair_k, "device": device, "threads": torch.get_num_threads(), "provenance": provenance}
    write_json(out_json, record)
    return record
