"""λOpt experiment drivers (Chen et al., KDD 2019; issue 6): runs, table, figures.

The verbs ``recrepro lambdaopt <verb>`` (:mod:`recrepro.papers.lambdaopt.cli`, called by
``workflow/rules/lambdaopt*.smk``) run these functions:

``run``
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
    over the users/items of equal training frequency, per epoch).
``sensitivity``
    Validation AUC after every epoch of MF-λFix for each fixed λ (the "tuning headache").
``table``  results table (method × metric, mean ± sd over seeds) as Markdown and CSV, with the
    ordering of the four granularities and the paired tests of -DUI vs λFix (:func:`paired_tests`).
``figure-trajectory``  heat maps of mean λ by training frequency (x) and epoch (y) + lines.
``figure-sensitivity`` validation AUC over epochs per fixed λ.
``figure-groups``      HR@100 / NDCG@100 of two methods by user-frequency quartile.
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
from recrepro.papers.lambdaopt.grid import GRID_POINT, grid_point_names, grid_point_settings  # noqa: F401 (rule helpers)
from recrepro.records import write_history
from recrepro.papers.rules import protocol_split_dir, protocol_splits, variant_settings

__all__ = ["run_variant", "sensitivity", "sensitivity_checkpoints", "results_table", "table_markdown", "figure_trajectory", "figure_sensitivity",
           "figure_groups", "rule_splits", "rule_settings", "rule_runs", "rule_tier", "rule_first_seed", "rule_run_dir",
           "rule_split_dir", "rule_sensitivity_epochs", "paired_tests", "granularity_order", "TABLE_METRICS"]

TABLE_METRICS = ["auc", "pp_hr@50", "pp_hr@100", "pp_ndcg@50", "pp_ndcg@100"]
METHOD_ORDER = ["sgda", "amf", "neumf", "lambdafix", "lambdaopt_d", "lambdaopt_du", "lambdaopt_di", "lambdaopt_dui", "lambdaopt_dui_code"]


# ----------------------------------------------------------------------------- rule helpers
def rule_splits(config: Mapping[str, Any], tier: str) -> list[tuple[str, str, int]]:
    """(dataset, split, split_seed) of the tier's ``lambdaopt``-protocol data entries."""
    return protocol_splits(config, tier, "lambdaopt")


def rule_split_dir(config: Mapping[str, Any], tier: str, dataset: str, split: str) -> str:
    return protocol_split_dir(config, tier, "lambdaopt", dataset, split)


def rule_settings(config: Mapping[str, Any], tier: str, dataset: str, variant: str) -> dict[str, Any]:
    """switches < tier settings < per-dataset settings < the variant's own keys; a grid point
    ``<variant>-gNN`` (:mod:`recrepro.papers.lambdaopt.grid`): its variant's, at the NN-th λ alone."""
    point = GRID_POINT.match(variant)
    if point is not None:
        return grid_point_settings(rule_settings(config, tier, dataset, point["variant"]), variant)
    switches = config.get("lambdaopt", {}).get("switches", {})
    settings, conf = variant_settings(config, "lambdaopt", tier, dataset, variant, switches)
    cap = conf.get("epoch_cap")
    if cap is not None and "epochs" in settings:     # compute cap (config comment, docs/deviations.md)
        settings["epochs"] = min(int(settings["epochs"]), int(cap))
    if settings.get("method") not in VALIDATION_LEARNERS:    # nothing of theirs learns on validation
        settings.pop("select_share", None)
    return settings


#: Methods whose λ learns on the validation loss (λOpt, SGDA): ``select_share`` holds part of the
#: validation out of their λ step for the stopping rule; the others stop on the whole validation.
VALIDATION_LEARNERS = ("lambdaopt", "sgda")


def rule_sensitivity_epochs(config: Mapping[str, Any], tier: str) -> int:
    """Epochs of the sensitivity curves, under the tier's ``epoch_cap``."""
    conf = rule_tier(config, tier)
    epochs = int(conf["sensitivity"]["epochs"])
    return epochs if conf.get("epoch_cap") is None else min(epochs, int(conf["epoch_cap"]))


def rule_runs(config: Mapping[str, Any], tier: str, dataset: str | None = None) -> list[str]:
    """metrics.json of every (dataset, variant, seed) run of the tier."""
    conf = config.get("lambdaopt", {}).get("tiers", {}).get(tier, {})
    return [f"results/{tier}/lambdaopt/runs/{d}/{s}/{v}/seed{seed}/metrics.json"
            for d, s, _ in rule_splits(config, tier) if dataset in (None, d)
            for v in conf.get("variants", []) for seed in conf.get("seeds", [0])]


def rule_grid_points(config: Mapping[str, Any], tier: str, dataset: str, variant: str) -> list[str]:
    """The grid points' run names MF-λFix's record is assembled from on the datasets of the tier's
    ``lambdafix_per_lambda`` (one job per λ); ``[]`` elsewhere and for other methods (one job)."""
    if dataset not in rule_tier(config, tier).get("lambdafix_per_lambda", []):
        return []
    return grid_point_names(variant, rule_settings(config, tier, dataset, variant))


def rule_grid_runs(config: Mapping[str, Any], tier: str) -> list[str]:
    """metrics.json of every grid point's run of the tier (jobs of their own: the compute page prices them)."""
    conf = rule_tier(config, tier)
    return [f"results/{tier}/lambdaopt/runs/{d}/{s}/{p}/seed{seed}/metrics.json"
            for d, s, _ in rule_splits(config, tier) for v in conf.get("variants", [])
            for p in rule_grid_points(config, tier, d, v) for seed in conf.get("seeds", [0])]


def rule_tier(config: Mapping[str, Any], tier: str) -> dict[str, Any]:
    """The ``lambdaopt.tiers.<tier>`` block."""
    return config.get("lambdaopt", {}).get("tiers", {}).get(tier, {})


def rule_first_seed(config: Mapping[str, Any], tier: str) -> int:
    return rule_tier(config, tier).get("seeds", [0])[0]


def rule_run_dir(config: Mapping[str, Any], tier: str, dataset: str, method: str) -> str:
    """Run directory of ``method`` on ``dataset`` for the tier's first seed (figures)."""
    split = [s for d, s, _ in rule_splits(config, tier) if d == dataset][0]
    return f"results/{tier}/lambdaopt/runs/{dataset}/{split}/{method}/seed{rule_first_seed(config, tier)}"


def rule_group_records(config: Mapping[str, Any], tier: str, dataset: str, which: int) -> list[str]:
    """per_user.parquet of the groups figure's ``which``-th method (``lambdaopt.tiers.<tier>.groups``)
    on ``dataset``, one per seed of the tier: the figure's table pairs the seeds (claim L4)."""
    first = rule_run_dir(config, tier, dataset, rule_tier(config, tier)["groups"][which])
    base = first[: first.rindex("/seed")]
    return [f"{base}/seed{seed}/per_user.parquet" for seed in rule_tier(config, tier).get("seeds", [0])]


# ----------------------------------------------------------------------------- training
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


# ----------------------------------------------------------------------------- tables
def _load(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    from recrepro.scorecard import load_runs

    return load_runs(run_dirs)


def results_table(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    tidy = _load(run_dirs)
    tidy = tidy[tidy["metric"].isin(TABLE_METRICS)]
    agg = tidy.groupby(["dataset", "method", "metric"])["value"].agg(["mean", "std", "count"]).reset_index()
    return agg


GRANULARITY_METHODS = ["lambdaopt_d", "lambdaopt_du", "lambdaopt_di", "lambdaopt_dui"]


def _within_margin(stop: Mapping[str, Any], run_dir: Path) -> bool:
    """Whether a run's best validation AUC is at most its ``gain_margin`` above its first (a record
    from before the first value was kept: the first evaluation of its history, one curve only;
    a record from before the margin: no)."""
    first, best, margin = stop.get("first_val_auc"), stop.get("best_val_auc"), stop.get("gain_margin")
    if first is None and (run_dir / "history.parquet").is_file():
        history = pd.read_parquet(run_dir / "history.parquet")
        evaluated = history["val_auc"].dropna() if "val_auc" in history and "lam" not in history else ()
        first = float(evaluated.iloc[0]) if len(evaluated) else None
    if not all(isinstance(v, (int, float)) for v in (first, best, margin)) or not margin:
        return False
    return best - first <= margin


def stopping_summary(run_dirs: Sequence[str | Path]) -> dict[tuple[str, str], str]:
    """``(dataset, method)`` -> how its seeds stopped: the best validation epoch of each seed and the
    rule that ended it (``375 (patience)``; ``at its first evaluation`` where the run never improved on
    where it started; ``never more than 0.01 above its first evaluation`` where it ran to the cap without
    clearing the stopping rule's ``gain_margin``: docs/deviations.md#lambdaopt-video-init). Runs
    without a stopping rule: absent."""
    from recrepro.io import read_json
    from recrepro.scorecard.claims import never_left_initialisation

    seeds: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for r in map(Path, run_dirs):
        meta = read_json(r / "metrics.json")
        stop = meta.get("stopping")
        if not isinstance(stop, Mapping) or stop.get("best_epoch") is None:
            continue
        text = f"{int(stop['best_epoch'])} ({stop.get('stopped')})"
        if never_left_initialisation(meta):
            text += ", at its first evaluation"
        elif stop.get("stopped") == "cap" and int(stop["best_epoch"]) <= int(stop.get("eval_every") or 1):
            text += ", never above its first evaluation"
        elif stop.get("stopped") == "cap" and _within_margin(stop, r):
            text += f", never more than {float(stop['gain_margin']):g} above its first evaluation"
        seeds.setdefault((meta["dataset"], meta["method"]), []).append((int(meta["seed"]), text))
    return {key: "; ".join(t for _, t in sorted(v)) for key, v in seeds.items()}


def paired_tests(run_dirs: Sequence[str | Path], method_a: str = "lambdaopt_dui",
                 method_b: str = "lambdafix") -> pd.DataFrame:
    """``method_a`` vs ``method_b`` on every table metric, per dataset.

    Pairs are (seed, test user): the per-user metrics of the two runs with the same seed (same
    split, same users).  ``wilcoxon_p``: two-sided Wilcoxon signed-rank test on the per-user
    differences pooled over the seeds (zero differences dropped, normal approximation for
    large n: ``scipy.stats.wilcoxon``).  ``ttest_p``: two-sided paired t-test over the seeds'
    means (needs >= 2 seeds; NaN otherwise).
    """
    from scipy import stats

    from recrepro.io import read_json

    runs = []
    for r in map(Path, run_dirs):
        meta = read_json(r / "metrics.json")
        if meta["method"] in (method_a, method_b):
            runs.append((meta["dataset"], meta["method"], int(meta["seed"]), r))
    rows = []
    for dataset in sorted({d for d, *_ in runs}):
        per = {(m, seed): r for d, m, seed, r in runs if d == dataset}
        seeds = sorted({seed for m, seed in per if (method_a, seed) in per and (method_b, seed) in per})
        if not seeds:
            continue
        frames = []
        for seed in seeds:
            a = pd.read_parquet(per[(method_a, seed)] / "per_user.parquet")
            b = pd.read_parquet(per[(method_b, seed)] / "per_user.parquet")
            frames.append(a.merge(b, on="user", suffixes=("_a", "_b")).assign(seed=seed))
        pairs = pd.concat(frames, ignore_index=True)
        for metric in TABLE_METRICS:
            if f"{metric}_a" not in pairs:
                continue
            sub = pairs[["seed", f"{metric}_a", f"{metric}_b"]].dropna()
            diff = (sub[f"{metric}_a"] - sub[f"{metric}_b"]).to_numpy()
            w_p = float(stats.wilcoxon(diff).pvalue) if np.any(diff != 0) else 1.0
            means = sub.groupby("seed")[[f"{metric}_a", f"{metric}_b"]].mean()
            t_p = (float(stats.ttest_rel(means[f"{metric}_a"], means[f"{metric}_b"]).pvalue)
                   if len(means) >= 2 else float("nan"))
            rows.append({"dataset": dataset, "metric": metric, "method_a": method_a, "method_b": method_b,
                         "mean_a": float(means[f"{metric}_a"].mean()), "mean_b": float(means[f"{metric}_b"].mean()),
                         "diff": float(diff.mean()), "n_pairs": int(diff.size), "seeds": len(means),
                         "wilcoxon_p": w_p, "ttest_p": t_p})
    return pd.DataFrame(rows, columns=["dataset", "metric", "method_a", "method_b", "mean_a", "mean_b", "diff",
                                       "n_pairs", "seeds", "wilcoxon_p", "ttest_p"])


def granularity_order(agg: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and metric: the four granularities sorted by mean, best first (``"dui > di > …"``)."""
    rows = []
    part = agg[agg["method"].isin(GRANULARITY_METHODS)]
    for (dataset, metric), sub in part.groupby(["dataset", "metric"]):
        order = sub.sort_values("mean", ascending=False)["method"].str.replace("lambdaopt_", "")
        rows.append({"dataset": dataset, "metric": metric, "order": " > ".join(order)})
    return pd.DataFrame(rows, columns=["dataset", "metric", "order"])


def table_markdown(agg: pd.DataFrame, tier: str, tests: pd.DataFrame | None = None,
                   stops: Mapping[tuple[str, str], str] | None = None) -> str:
    stops = stops or {}
    lines = [f"# λOpt results table ({tier} tier)", "",
             "Test AUC, HR@K, NDCG@K (λOpt's per-positive metrics, optimistic ties), mean ± sd over seeds"
             + (", at each seed's best validation epoch (`best epoch (rule)`: the epoch and what ended the run, "
                "patience or the cap, per seed; a run stopped on patience whose best is its first evaluation "
                "never left its initialisation and no claim compares it; one that reached the cap no more than "
                "the rule's gain margin above its first evaluation failed to learn, and counts)."
                if stops else "."), ""]
    for dataset, part in agg.groupby("dataset"):
        extra = any(d == dataset for d, _ in stops)
        lines += [f"## {dataset}", "", "| method | " + " | ".join(TABLE_METRICS) + (" | best epoch (rule) |" if extra else " |"),
                  "|---|" + "---|" * (len(TABLE_METRICS) + int(extra))]
        methods = sorted(part["method"].unique(), key=lambda m: (METHOD_ORDER.index(m)
                                                                 if m in METHOD_ORDER else 99, m))
        for m in methods:
            cells = []
            for metric in TABLE_METRICS:
                row = part[(part["method"] == m) & (part["metric"] == metric)]
                if row.empty:
                    cells.append("–")
                    continue
                mean, sd = row["mean"].iloc[0], row["std"].iloc[0]
                cells.append(f"{mean:.4f}" + ("" if pd.isna(sd) else f" ± {sd:.4f}"))
            if extra:
                cells.append(stops.get((dataset, m), "–"))
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        lines.append("")
        order = granularity_order(part)
        if not order.empty:
            lines += ["Granularities by mean (best first): "
                      + "; ".join(f"{r.metric}: {r.order}" for r in order.itertuples()), ""]
        if tests is not None and not tests[tests["dataset"] == dataset].empty:
            t = tests[tests["dataset"] == dataset]
            lines += [f"Paired tests, {t['method_a'].iloc[0]} vs {t['method_b'].iloc[0]}: Wilcoxon signed-rank on "
                      "per-user differences pooled over seeds (pairs = seed × test user); paired t over seed means.",
                      "", "| metric | mean A | mean B | A − B | pairs | seeds | Wilcoxon p | t-test p |",
                      "|---|---|---|---|---|---|---|---|"]
            for r in t.itertuples():
                lines.append(f"| {r.metric} | {r.mean_a:.4f} | {r.mean_b:.4f} | {r.diff:+.4f} | {r.n_pairs} | "
                             f"{r.seeds} | {r.wilcoxon_p:.2g} | {r.ttest_p:.2g} |")
            lines.append("")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- figures
#: Colours of λOpt's methods, fixed across its figures: the two the figures compare get the
#: strongest colours, the rest follow in the paper's table order.
METHOD_COLORS_ORDER = ("lambdaopt_dui", "lambdafix", "lambdaopt_d", "lambdaopt_du", "lambdaopt_di", "sgda", "amf",
                       "neumf", "lambdaopt_dui_code")
#: Labels of the methods in figures and legends (the paper's names).
METHOD_LABELS = {"sgda": "SGDA", "amf": "AMF", "neumf": "NeuMF", "lambdafix": "MF-λFix", "lambdaopt_d": "MF-λOpt-D",
                 "lambdaopt_du": "MF-λOpt-DU", "lambdaopt_di": "MF-λOpt-DI", "lambdaopt_dui": "MF-λOpt-DUI",
                 "lambdaopt_dui_code": "MF-λOpt-DUI (code)"}


def frequency_bins(freq: np.ndarray, weight: np.ndarray, n_bins: int) -> tuple[np.ndarray, list[str]]:
    """Integer frequency bins by (weighted) quantiles: ``(bin index of each freq, "lo–hi" labels)``.

    Each bin holds about the same number of users (items): ``weight`` counts them per
    frequency. Bins are closed integer ranges, so the labels never show fractions
    ("19–34", not "19–34.75"); frequencies that fill more than one quantile collapse into one bin.

    Parameters
    ----------
    freq:
        Integer training frequencies (one entry per distinct frequency or per user).
    weight:
        How many users (items) have each ``freq``.
    n_bins:
        Bins at most.
    """
    freq = np.asarray(freq, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.int64)
    population = np.repeat(freq, weight)
    quantiles = np.quantile(population, np.linspace(0, 1, n_bins + 1)[1:-1], method="inverted_cdf")
    uppers = np.unique(np.append(quantiles.astype(np.int64), population.max()))
    index = np.searchsorted(uppers, freq, side="left")
    lowers = np.concatenate([[population.min()], uppers[:-1] + 1])
    labels = [f"{lo}" if lo == hi else f"{lo}–{hi}" for lo, hi in zip(lowers, uppers, strict=True)]
    return index, labels


def figure_trajectory(run_dir: str | Path, out_pdf: str, out_png: str, tier: str, dataset: str,
                      n_bins: int = 10) -> None:
    """λ-trajectories of MF-λOpt-DUI (slide 22): heat maps of mean λ by training frequency and epoch.

    Top: per kind (users, items) a heat map, x = training frequency in ``n_bins`` quantile bins
    (about equally many users per bin, integer ranges), y = epoch, colour = mean λ over the
    users (items) of the bin. Bottom: the same averaged over frequency quartiles, one line each.
    """
    from recrepro.reporting.plotting import add_colorbar, figure_legend, fixed_colors, new_figure, save_figure

    traj = pd.read_parquet(Path(run_dir) / "trajectory.parquet")
    fig, axes = new_figure(ncols=2, nrows=2, width=7.0, height=6.0)
    quartile_names = ["Q1 (least frequent)", "Q2", "Q3", "Q4 (most frequent)"]
    colors = fixed_colors(quartile_names)
    for col, kind in enumerate(("user", "item")):
        part = traj[traj["kind"] == kind]
        ax, ax2 = axes[0, col], axes[1, col]
        if part.empty:
            ax.set_title(f"{kind}s: no trajectory")
            ax2.set_visible(False)
            continue
        freq = part[["freq", "n"]].drop_duplicates("freq").sort_values("freq")
        bins, labels = frequency_bins(freq["freq"].to_numpy(), freq["n"].to_numpy(), n_bins)
        bin_of = dict(zip(freq["freq"].to_numpy(), bins, strict=True))
        binned = part.assign(bin=part["freq"].map(bin_of), w=part["mean_lambda"] * part["n"])
        grid = binned.groupby(["epoch", "bin"])[["w", "n"]].sum()
        grid = (grid["w"] / grid["n"]).unstack("bin").reindex(columns=range(len(labels)))
        epochs = grid.index.to_numpy() + 1
        # rows are the recorded epochs (every one, or every k-th in long runs): each row spans k epochs
        step = float(np.min(np.diff(epochs))) if epochs.size > 1 else 1.0
        im = ax.imshow(grid.to_numpy(), aspect="auto", origin="lower", cmap="viridis", interpolation="nearest",
                       extent=[-0.5, len(labels) - 0.5, epochs.min() - step / 2, epochs.max() + step / 2])
        add_colorbar(fig, im, ax, "mean λ")
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
        ax.set_xlabel(f"{kind} training frequency ({len(labels)} bins, ≈ equal {kind}s)")
        ax.set_ylabel("epoch")
        ax.set_title(f"({'ab'[col]}) {kind}s")
        ax.grid(False)
        q_bins, q_labels = frequency_bins(freq["freq"].to_numpy(), freq["n"].to_numpy(), 4)
        q_of = dict(zip(freq["freq"].to_numpy(), q_bins, strict=True))
        lines = part.assign(q=part["freq"].map(q_of), w=part["mean_lambda"] * part["n"])
        lines = lines.groupby(["q", "epoch"])[["w", "n"]].sum().reset_index()
        names = quartile_names if len(q_labels) == 4 else [f"Q{k + 1}" for k in range(len(q_labels))]
        for q, sub in lines.groupby("q"):
            name = names[int(q)]
            ax2.plot(sub["epoch"] + 1, sub["w"] / sub["n"], marker="o", ms=3, color=colors.get(name, "#000000"),
                     label=name, markevery=max(1, len(sub) // 10))  # a marker per epoch hides the line
        ax2.set_xlabel("epoch")
        ax2.set_ylabel("mean λ")
        ax2.set_title(f"{kind}s by frequency quartile: " + " | ".join(q_labels), fontsize=8)
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption="λ-trajectories of MF-λOpt-DUI (Chen et al. 2019, slide 22); bins: training frequency")


def sensitivity_budget(table: pd.DataFrame, epochs: int | None = None) -> tuple[str, bool]:
    """What budget the sensitivity ``table`` ran under, as a caption fragment, and whether it is not
    the configured one (``epochs``: the configured cap; ``None``: not checked).  A table from before
    the rows carried their budget (no ``epoch_cap`` column) counts as another budget."""
    last = int(table["epoch"].max()) if len(table) else 0
    if "epoch_cap" not in table.columns:
        return f"curves to epoch {last}, budget not recorded", epochs is not None
    cap = int(table["epoch_cap"].iloc[0])
    patience = table["patience"].iloc[0] if "patience" in table.columns else float("nan")
    rule = f"patience {int(patience)}, " if pd.notna(patience) else ""
    return f"curves to epoch {last} ({rule}cap {cap})", epochs is not None and cap != int(epochs)


def figure_sensitivity(table: pd.DataFrame, out_pdf: str, out_png: str, tier: str, dataset: str,
                       epochs: int | None = None) -> None:
    """Validation AUC per epoch of MF-λFix for each fixed λ (poster Fig. 2), λ from large to small.

    The caption says the budget the curves ran under; with ``epochs`` (the configured cap) a table
    made under another budget is marked on the figure, so an outdated sweep is not read as current."""
    from recrepro.reporting.plotting import figure_legend, method_styles, new_figure, save_figure

    fig, ax = new_figure(width=5.0)
    lams = sorted(table["lam"].unique(), reverse=True)
    styles = method_styles([f"λ = {lam:.0e}" for lam in lams])
    for i, lam in enumerate(lams):
        part = table[table["lam"] == lam].sort_values("epoch")
        label = f"λ = {lam:.0e}"
        # about ten markers a line, staggered: curves that lie on top of each other stay tellable apart
        step = max(1, len(part) // 10)
        ax.plot(part["epoch"], part["val_auc"], ms=3, label=label, markevery=(i * step // len(lams), step),
                **styles[label])
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation AUC")
    budget, outdated = sensitivity_budget(table, epochs)
    if outdated:
        ax.text(0.5, 0.5, f"run under another budget than the configuration's (up to {epochs} epochs):\n"
                          "rerun this dataset's sensitivity job", transform=ax.transAxes, ha="center", va="center",
                color="#b00020", fontsize=8, bbox={"facecolor": "white", "edgecolor": "#b00020", "alpha": 0.9})
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption=f"MF-λFix: sensitivity to λ (poster Fig. 2); {budget}")


def _seeds_text(data: pd.DataFrame) -> str:
    """"3 seeds" or, where the methods differ, "seeds: MF-λOpt-DUI 2, MF-λFix 3"."""
    per = data.groupby("method")["seed"].nunique()
    if per.nunique() == 1:
        n = int(per.iloc[0])
        return f"{n} seed" + ("s" if n != 1 else "")
    return "seeds: " + ", ".join(f"{METHOD_LABELS.get(m, m)} {int(n)}" for m, n in per.items())


def figure_groups(runs_a: str | Path | Sequence[str | Path], runs_b: str | Path | Sequence[str | Path],
                  out_pdf: str, out_png: str, tier: str, dataset: str) -> pd.DataFrame:
    """HR@100 / NDCG@100 of two methods by user-frequency quartile (training counts); returns the data.

    As slide 21 (sparse vs active users): bars per frequency group, MF-λOpt-DUI beside MF-λFix.
    ``runs_a`` / ``runs_b``: each method's run records, one per seed (the split is the same for every
    seed, so the training counts come from the first of ``runs_a``). The data have one row per method,
    seed, group and metric (the mean and sd over the group's users), so that a verdict on them pairs the
    seeds; a bar is the mean over a method's seeds of the group's mean, its whisker the mean over the
    seeds of the sd over users. The groups are quartiles of the training frequency with integer
    bounds (the slide's fixed bins <30, [30, 60), [60, 90), ≥90 fit Amazon Food Review only).
    """
    from recrepro.io import read_json
    from recrepro.reporting.plotting import figure_legend, fixed_colors, new_figure, save_figure

    runs_a = [runs_a] if isinstance(runs_a, (str, Path)) else list(runs_a)
    runs_b = [runs_b] if isinstance(runs_b, (str, Path)) else list(runs_b)
    if not runs_a or not runs_b:
        raise ValueError("figure_groups needs at least one run record of each method")
    counts = pd.read_parquet(Path(runs_a[0]) / "train_counts.parquet")
    freq = np.zeros(int(counts["user"].max()) + 1, dtype=np.int64)
    freq[counts["user"].to_numpy()] = counts["train_count"].to_numpy()
    active = freq[freq > 0]
    values, weights = np.unique(active, return_counts=True)
    bins, labels = frequency_bins(values, weights, 4)
    bin_of = np.full(int(freq.max()) + 1, -1, dtype=np.int64)
    bin_of[values] = bins
    rows = []
    for run in (*runs_a, *runs_b):
        meta = read_json(Path(run) / "metrics.json")
        method, seed = meta["method"], int(meta["seed"])
        pu = pd.read_parquet(Path(run) / "per_user.parquet")
        b = bin_of[freq[pu["user"].to_numpy()]]
        for k, label in enumerate(labels):
            sel = b == k
            for metric in ("pp_hr@100", "pp_ndcg@100"):
                vals = pu.loc[sel, metric].to_numpy(dtype=float)
                rows.append({"method": method, "seed": seed, "group": label, "k": k, "metric": metric,
                             "mean": float(np.nanmean(vals)) if vals.size else np.nan,
                             "sd": float(np.nanstd(vals)) if vals.size else np.nan, "n": int(sel.sum())})
    data = pd.DataFrame(rows)
    colors = fixed_colors(METHOD_COLORS_ORDER)
    fig, axes = new_figure(ncols=2, width=7.0, height=3.0)
    # the paper's order: MF-λFix first, then λOpt (its bars sit right of the baseline)
    methods = sorted(dict.fromkeys(data["method"]), key=lambda m: METHOD_ORDER.index(m) if m in METHOD_ORDER else 99)
    for ax, metric in zip(axes, ("pp_hr@100", "pp_ndcg@100"), strict=True):
        part = data[data["metric"] == metric].groupby(["method", "k"], as_index=False)[["mean", "sd"]].mean()
        width = 0.8 / len(methods)
        for m_i, m in enumerate(methods):
            sub = part[part["method"] == m].sort_values("k")
            ax.bar(sub["k"] + m_i * width, sub["mean"], width, yerr=sub["sd"], capsize=2,
                   label=METHOD_LABELS.get(m, m), color=colors.get(m, "#000000"), error_kw={"elinewidth": 0.8})
        ax.set_xticks(np.arange(len(labels)) + width * (len(methods) - 1) / 2, labels)
        ax.set_xlabel("user training frequency (quartiles)")
        ax.set_ylabel("test " + metric.replace("pp_", "").upper())
        ax.set_ylim(bottom=0)
        ax.grid(False, axis="x")
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption=f"Sparse vs active users (slide 21); bars: mean over users, averaged over {_seeds_text(data)}; "
                        "whiskers: sd over users")
    return data
