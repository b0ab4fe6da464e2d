"""λOpt (Chen et al., KDD 2019; issue 6): the training driver, what ``recrepro lambdaopt train`` calls.

The verb (:mod:`recrepro.papers.lambdaopt.cli`, called by ``workflow/rules/lambdaopt_runs.smk``) runs
these functions:

``--mode variant`` (:func:`run_variant`, the default)
    Train one variant on a ``temporal_user_ratio`` split and evaluate it on ``test``
    (full ranking, λOpt's per-positive HR/NDCG and AUC, optimistic ties).
    ``lambdafix`` trains one MF per λ of ``lambdafix_grid`` and keeps the λ with the best
    **validation** AUC (the paper: "best of {10, …, 1e-5, 0}" chosen on validation);
    ``lambdaopt`` variants learn Λ on the validation part, as does the baseline ``sgda``
    (:mod:`recrepro.papers.lambdaopt.sgda`); ``amf`` (:mod:`recrepro.papers.lambdaopt.amf`) and ``neumf``
    (:mod:`recrepro.models.neumf`) train on train only.  With a ``patience`` in the settings
    (the paper tier's converging budget, :mod:`recrepro.papers.lambdaopt.stopping`) every model
    (each λ of λFix's grid too) trains until its validation AUC has not improved for
    ``patience`` epochs, at most ``epochs``; the record's test metrics are those of the best
    validation epoch, ``last_epoch`` holds the last epoch's and ``stopping`` says whether the
    run stopped on patience or at the cap.  Without one (the smoke tier) the test metrics are
    those of the last epoch (the official code has no model selection).
    Beside the run record: ``history.parquet`` (per-epoch loss, seconds, mean λ, validation
    AUC under the stopping rule; for λFix the validation AUC of every grid value: its whole
    curve under the stopping rule) and ``trajectory.parquet`` (λOpt: mean λ
    over the users/items of equal training frequency, per epoch).  MF-λFix's record can also be
    assembled from its grid points' records (:mod:`recrepro.papers.lambdaopt.grid`).
``--mode sensitivity`` (:func:`sensitivity`)
    Validation AUC after every epoch of MF-λFix for each fixed λ (the "tuning headache").

The table and the figures are drawn from the records (:mod:`~recrepro.papers.lambdaopt.tables`,
:mod:`~recrepro.papers.lambdaopt.figures`); the runs' settings come from the config
(:mod:`recrepro.papers.lambdaopt.rules`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from recrepro.io import write_parquet
from recrepro.records import write_history

__all__ = ["TABLE_METRICS", "held_out_validation", "make_model", "make_monitor", "run_variant", "sensitivity",
           "sensitivity_checkpoints", "trajectory_frame"]


#: The test metrics of the records' summaries and of the results table.
TABLE_METRICS = ["auc", "pp_hr@50", "pp_hr@100", "pp_ndcg@50", "pp_ndcg@100"]


def _validation_section(evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """Validation AUC only: the cut-off is 1 (AUC does not depend on it; a top-1 list costs a
    max per user instead of a top-100 selection, which took 40 % of an evaluation on amazon-video)."""
    return {"mode": "full", "fit": list(evaluation.get("fit", ["train"])), "exclude": ["train"],
            "target": "validation", "ks": [1], "metrics": ["auc"],
            "rank_ties": evaluation.get("rank_ties", "optimistic")}


#: Settings of the stopping rule (the driver's, not the model's: they are left out of the model config).
STOPPING_KEYS = ("patience", "eval_every", "select_share", "wait_for_gain", "gain_margin")


def _model_settings(settings: Mapping[str, Any], device: str) -> dict[str, Any]:
    out = {k: v for k, v in settings.items() if k not in ("method", "lambdafix_grid", *STOPPING_KEYS)}
    out["device"] = device
    return out


def make_model(settings: Mapping[str, Any], seed: int, device: str = "cpu", lam: float | None = None):
    from recrepro.papers.lambdaopt.mf_lambdaopt import LambdaOptConfig, MFLambdaOpt
    from recrepro.models.mf_bpr import BPRConfig, MFBPR

    ms = _model_settings(settings, device)
    if settings["method"] == "lambdafix":
        cfg = BPRConfig.from_mapping(ms)
        if lam is not None:
            cfg.lam = float(lam)
        return MFBPR(cfg, seed=seed)
    if settings["method"] == "lambdaopt":
        return MFLambdaOpt(LambdaOptConfig.from_mapping(ms), seed=seed)
    if settings["method"] == "sgda":
        from recrepro.papers.lambdaopt.sgda import SGDA, SGDAConfig

        return SGDA(SGDAConfig.from_mapping(ms), seed=seed)
    if settings["method"] == "amf":
        from recrepro.papers.lambdaopt.amf import AMF, AMFConfig

        return AMF(AMFConfig.from_mapping(ms), seed=seed)
    if settings["method"] == "neumf":
        from recrepro.models.neumf import NeuMF, NeuMFConfig

        return NeuMF(NeuMFConfig.from_mapping(ms), seed=seed)
    raise ValueError(f"lambdaopt: unknown method {settings['method']!r}")


def trajectory_frame(model, train) -> pd.DataFrame:
    """Mean λ (over dimensions, then over the users/items of equal training frequency) per epoch."""
    rows = []
    freq = {"user": np.asarray(train.sum(axis=1)).ravel().astype(np.int64),
            "item": np.asarray(train.sum(axis=0)).ravel().astype(np.int64)}
    for traj in getattr(model, "lambda_trajectory", []):
        for kind in ("user", "item"):
            f = freq[kind]
            n = np.bincount(f)
            s = np.bincount(f, weights=traj[kind].astype(np.float64))
            keep = np.flatnonzero(n)
            rows.append(pd.DataFrame({"kind": kind, "epoch": traj["epoch"], "freq": keep,
                                      "mean_lambda": s[keep] / n[keep], "n": n[keep]}))
    if not rows:
        return pd.DataFrame({"kind": pd.Series(dtype=str), "epoch": pd.Series(dtype=np.int64),
                             "freq": pd.Series(dtype=np.int64), "mean_lambda": pd.Series(dtype=float),
                             "n": pd.Series(dtype=np.int64)})
    return pd.concat(rows, ignore_index=True)


def _resume_kwargs(model: Any, checkpoint: Path | None) -> dict[str, Any]:
    """``fit`` keywords for ``checkpoint``: none without a path or for a model that cannot resume."""
    if checkpoint is None:
        return {}
    if not getattr(model, "resumable", False):
        warnings.warn(f"lambdaopt: {type(model).__name__} cannot resume from checkpoints; training without",
                      stacklevel=2)
        return {}
    return {"checkpoint": checkpoint}


def _validation_auc(model: Any, split: Any, section: Mapping[str, Any], device: str, batch_size: int) -> float:
    """Validation AUC of ``model`` (full ranking, train items excluded): the stopping rule's score."""
    from recrepro.evaluation.on_split import evaluate_on_split

    return float(evaluate_on_split(model, split, section, device=device, batch_size=batch_size).overall["auc"])


def make_monitor(settings: Mapping[str, Any], split: Any, section: Mapping[str, Any], device: str,
                 batch_size: int, held_out: tuple[sp.csr_matrix, sp.csr_matrix] | None = None):
    """The converging budget's :class:`~recrepro.papers.lambdaopt.stopping.ValidationMonitor` when the
    settings name a ``patience`` (``null``: to the cap, still selecting the best epoch); ``None``
    otherwise (the last epoch is reported, as the smoke tier does).

    ``held_out``: ``(exclude, targets)`` — the monitor scores the AUC of ``targets`` (the held-out share
    of the validation, :func:`held_out_validation`) with ``exclude`` masked, instead of the whole
    validation part."""
    if "patience" not in settings:
        return None
    from recrepro.papers.lambdaopt.stopping import ValidationMonitor

    if held_out is None:
        def evaluate(m: Any) -> float:
            return _validation_auc(m, split, section, device, batch_size)
    else:
        def evaluate(m: Any) -> float:
            return _held_out_auc(m, held_out, section, device, batch_size)
    return ValidationMonitor(evaluate, patience=settings["patience"], cap=int(settings["epochs"]),
                             eval_every=int(settings.get("eval_every", 1)),
                             wait_for_gain=bool(settings.get("wait_for_gain", False)),
                             gain_margin=float(settings.get("gain_margin", 0.0)))


def held_out_validation(validation: sp.csr_matrix, share: float, seed: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Split the validation interactions into the part a model may learn from and a held-out part
    for stopping and selection (docs/deviations.md#lambdaopt-protocol, item 11).

    Each interaction is held out with probability ``share``, by a generator of its own seeded from
    the training ``seed`` (the same split for every method and λ of a seed).  Returns
    ``(learn, held_out)``: two CSR matrices of the validation's shape whose entries are disjoint and
    together are the validation's."""
    if not 0.0 < float(share) < 1.0:
        raise ValueError(f"select_share must lie strictly between 0 and 1, got {share!r}")
    coo = sp.coo_matrix(validation)
    held = np.random.default_rng([int(seed), 0x5E1EC7]).random(coo.nnz) < float(share)

    def part(mask: np.ndarray) -> sp.csr_matrix:
        return sp.csr_matrix((coo.data[mask], (coo.row[mask], coo.col[mask])), shape=validation.shape)

    return part(~held), part(held)


def _held_out_auc(model: Any, held_out: tuple[sp.csr_matrix, sp.csr_matrix], section: Mapping[str, Any],
                  device: str, batch_size: int) -> float:
    """AUC of the held-out validation targets (full ranking, ``exclude`` masked)."""
    from recrepro.evaluation.ranking import evaluate_full_ranking

    exclude, targets = held_out
    users = np.flatnonzero(np.diff(targets.indptr))
    result = evaluate_full_ranking(model, exclude, targets, [1], users=users, batch_size=batch_size, device=device,
                                   metrics=["auc"], rank_ties=section.get("rank_ties", "optimistic"))
    return float(result.overall["auc"])


def _with_curve(history: list[dict[str, Any]], monitor: Any, **extra: Any) -> pd.DataFrame:
    """The model's per-epoch history (epochs from 0) with the monitor's validation AUC beside it."""
    hist = pd.DataFrame(history)
    if monitor is not None and monitor.curve and not hist.empty:
        curve = pd.DataFrame(monitor.curve)
        hist = hist.merge(curve.assign(epoch=curve["epoch"] - 1), on="epoch", how="left")
    return hist.assign(**extra) if extra else hist


def run_variant(*, split_dir: str | Path, variant: str, settings: Mapping[str, Any], seed: int,
                out_dir: str | Path, evaluation: Mapping[str, Any], meta: Mapping[str, Any],
                device: str = "cpu", batch_size: int = 2048, benchmark_file: str | None = None,
                checkpoint: str | Path | None = None) -> dict[str, Any]:
    """Train ``variant`` (see module docstring), evaluate on test, write the run record.

    ``checkpoint``: the model saves its state after every epoch to this file (MF-λFix's grid:
    one file per λ, ``<checkpoint>.lam<k>``) and resumes from it when restarted
    (:mod:`recrepro.runtime.checkpoints`); deleted once the record is written.  Only MF-λFix and
    λOpt resume (:attr:`recrepro.models.mf_bpr.MFBPR.resumable`); the other methods
    ignore the option with a warning.
    """
    from recrepro.runtime.checkpoints import earlier_usage, remove_checkpoint
    from recrepro.evaluation.on_split import SplitData, evaluate_on_split, write_split_record

    started = time.time()
    split = SplitData(split_dir)
    train = split.csr(list(evaluation.get("fit", ["train"])))
    validation = split.csr(["validation"])
    val_section = _validation_section(evaluation)
    selection: dict[str, Any] = {}
    grid_rows = []
    files: list[Path | None] = []  # checkpoints, removed once the record is written
    curves: list[pd.DataFrame] = []
    if settings["method"] == "lambdafix":
        best = None
        for k, lam in enumerate(settings.get("lambdafix_grid", [settings.get("lam", 0.0)])):
            model = make_model(settings, seed, device, lam=lam)
            monitor = make_monitor(settings, split, val_section, device, batch_size)
            files.append(None if checkpoint is None else Path(f"{checkpoint}.lam{k}"))
            model.fit(train, **_resume_kwargs(model, files[-1]), **({} if monitor is None else {"monitor": monitor}))
            if monitor is None:
                val_auc = _validation_auc(model, split, val_section, device, batch_size)
                grid_rows.append({"lam": float(lam), "val_auc": val_auc})
            else:
                val_auc = float(monitor.best_value)
                grid_rows.append({"lam": float(lam), "val_auc": val_auc, "best_epoch": monitor.best_epoch,
                                  "stopped": monitor.stopped})
                curves.append(_with_curve(model.history, monitor, lam=float(lam)))
            print(f"lambdafix: lam={lam:g} validation auc={val_auc:.4f}", flush=True)
            if best is None or val_auc > best[0]:
                best = (val_auc, float(lam), model, monitor)
        selection = {"selected_lam": best[1], "selected_val_auc": best[0]}
        model, monitor = best[2], best[3]
    else:
        model = make_model(settings, seed, device)
        learn, held_out = validation, None
        if getattr(model, "learns_on_validation", False) and settings.get("select_share") is not None:
            # λ learns on one share of the validation, the stopping rule reads the other (item 11)
            learn, targets = held_out_validation(validation, settings["select_share"], seed)
            held_out = ((train + learn).tocsr(), targets)
            selection["select_share"] = float(settings["select_share"])
            selection["n_select_targets"] = int(targets.nnz)
        monitor = make_monitor(settings, split, val_section, device, batch_size, held_out=held_out)
        files.append(None if checkpoint is None else Path(checkpoint))
        model.fit(train, validation=learn, **_resume_kwargs(model, files[-1]),
                  **({} if monitor is None else {"monitor": monitor}))
    last = None
    if monitor is not None:     # the last epoch's test metrics, then the best validation epoch's
        last = evaluate_on_split(model, split, evaluation, device=device, batch_size=batch_size)
        if monitor.best_snapshot is not None:
            model.restore(monitor.best_snapshot)
        selection["stopping"] = monitor.summary()
        selection["last_epoch"] = {k: float(v) for k, v in last.overall.items() if k in TABLE_METRICS}
    result = evaluate_on_split(model, split, evaluation, device=device, batch_size=batch_size)
    out = Path(out_dir)
    if curves:      # λFix under the stopping rule: every grid value's curve (the sensitivity to λ)
        hist = pd.concat(curves, ignore_index=True)
    else:
        hist = _with_curve(model.history, monitor)
    if grid_rows:
        hist = pd.concat([hist, pd.DataFrame(grid_rows)], ignore_index=True)
    overall = {k: float(v) for k, v in result.overall.items()}
    write_split_record(
        out, split, result, overall=overall, meta={**meta, "method": variant, **selection},
        config_slice={"variant": variant, "settings": dict(settings), "evaluation": dict(evaluation)},
        seed=seed, device=device, started_at=started, benchmark_file=benchmark_file,
        earlier=earlier_usage(*files))
    write_history(out, hist, "history.parquet")
    write_parquet(out / "trajectory.parquet", trajectory_frame(model, train))
    # per-user training counts for the frequency-group figure, so that it redraws without the split
    write_parquet(out / "train_counts.parquet", pd.DataFrame({
        "user": np.arange(train.shape[0], dtype=np.int64),
        "train_count": np.diff(train.indptr).astype(np.int64)}))
    for path in files:  # the record is complete: a rerun must not resume a finished run
        remove_checkpoint(path)
    return {"overall": {k: overall[k] for k in TABLE_METRICS if k in overall},
            **{k: v for k, v in selection.items() if k not in ("stopping", "last_epoch")},
            **({} if monitor is None else {"stopped": monitor.stopped, "best_epoch": monitor.best_epoch})}


def sensitivity_checkpoints(checkpoint: str | Path | None, lambdas: Sequence[float]) -> list[Path]:
    """The per-λ checkpoint files of a :func:`sensitivity` run under ``checkpoint`` (``<checkpoint>.lam<k>``,
    as MF-λFix's grid in :func:`run_variant`); none without a path."""
    return [] if checkpoint is None else [Path(f"{checkpoint}.lam{k}") for k in range(len(lambdas))]


def sensitivity(*, split_dir: str | Path, settings: Mapping[str, Any], lambdas: Sequence[float], epochs: int,
                seed: int, evaluation: Mapping[str, Any], device: str = "cpu",
                checkpoint: str | Path | None = None) -> pd.DataFrame:
    """Validation AUC after each epoch of MF-λFix for every fixed λ.

    Under the converging budget (``patience`` in ``settings``) each curve runs until the stopping
    rule ends it (at most ``epochs``), evaluated every ``eval_every`` epochs.  Every row carries the
    budget it ran under (``epoch_cap``; ``patience``, NaN without a stopping rule), so a figure drawn
    from the table can say when the table was made under another budget than the configuration's.

    ``checkpoint``: each curve saves the model and its stopping rule after every epoch to its own file
    (:func:`sensitivity_checkpoints`) and resumes from it when restarted; a finished curve's file holds
    its whole curve, so a restart skips it. On amazon-video the four curves run to the cap, hours of
    CPU; the caller removes the files once the table is written."""
    from recrepro.evaluation.on_split import SplitData, evaluate_on_split

    split = SplitData(split_dir)
    train = split.csr(list(evaluation.get("fit", ["train"])))
    val_section = _validation_section(evaluation)
    rows = []
    patience = float(settings["patience"]) if settings.get("patience") is not None else float("nan")
    files = sensitivity_checkpoints(checkpoint, lambdas)
    for k, lam in enumerate(lambdas):
        s = {**settings, "method": "lambdafix", "epochs": int(epochs)}
        monitor = make_monitor(s, split, val_section, device, 2048)
        if monitor is not None:
            model = make_model(s, seed, device, lam=lam)
            model.fit(train, monitor=monitor, **_resume_kwargs(model, files[k] if files else None))
            rows += [{"lam": float(lam), "epoch": int(r["epoch"]), "val_auc": float(r["val_auc"])}
                     for r in monitor.curve]
            continue

        def on_epoch(m, epoch, lam=lam):
            auc = float(evaluate_on_split(m, split, val_section, device=device).overall["auc"])
            rows.append({"lam": float(lam), "epoch": epoch + 1, "val_auc": auc})

        make_model(s, seed, device, lam=lam).fit(train, on_epoch=on_epoch)
    return pd.DataFrame(rows).assign(epoch_cap=int(epochs), patience=patience)
