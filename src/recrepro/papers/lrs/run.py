"""AMHT-LRS (Pal et al., arXiv 2210.03505): the training driver, what ``recrepro lrs train`` calls.

Every experiment is synthetic (``recrepro.papers.lrs.generator``) and of our own design: the paper's
figures, constants and numbers could not be read (``docs/deviations.md#lrs-experiments``).

``recrepro lrs train --mode <mode>`` (:mod:`recrepro.papers.lrs.cli`, called by ``workflow/rules/lrs_runs.smk``)::

    --mode sweep       --experiment E --seeds S1,S2 --settings JSON --out rows.parquet [--out-timings F]  (run_sweep)
    --mode ml100k      --raw-dir D --seeds S1,S2 --settings JSON --tier T --out rows.parquet [--out-timings F]
                                                                                                  (run_ml100k)
    --mode acceptance  --seed S --settings JSON --tier T --run-root results/<tier>/lrs/runs --done F  (run_acceptance)

Experiments ``E``: ``error_vs_m`` (fig. 1), ``error_vs_t`` (fig. 2), ``iterations`` (fig. 3),
``private`` (fig. 4), ``support`` (fig. 5). Each sweep writes one tidy row per (method, x value)
with ``param_error`` (mean over users of ``||Theta_hat_i - Theta*_i|| / ||Theta*_i||``),
``subspace_distance``, ``support_precision``/``support_recall`` and ``seconds`` (the CLI writes the
seconds to a file of their own, :func:`split_timings`). The figures are drawn from the rows by
:mod:`recrepro.papers.lrs.figures`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from recrepro.papers.lrs.amht_lrs import AMHTConfig, amht_lrs
from recrepro.papers.lrs.baselines import altmin, lowrank_ridge, oracle_ls, per_user_ls, sparse_iht
from recrepro.papers.lrs.generator import LRSData, LRSSpec, generate, parameter_error, subspace_distance, support_scores
from recrepro.papers.lrs.private import PrivateConfig, private_amht_lrs
from recrepro.records import write_run_record

__all__ = ["BASELINES", "EXPERIMENTS", "METHODS", "VARIANTS", "fit_method", "run_acceptance", "run_ml100k", "run_sweep",
           "split_timings"]


#: The synthetic sweeps (``--mode sweep --experiment E``).
EXPERIMENTS = ("error_vs_m", "error_vs_t", "iterations", "private", "support")


#: Methods of figure 1 (and the acceptance runs), in legend order.
METHODS = ("amht_lrs", "amht_lrs_cosamp", "amht_lrs_htp", "amht_lrs_iht", "altmin", "lowrank_ridge", "sparse_iht",
           "per_user_ls", "oracle")
#: AMHT-LRS variants without the swap search (docs/deviations.md#lrs-swap-search): method -> sparse_step.
VARIANTS = {"amht_lrs_cosamp": "cosamp", "amht_lrs_htp": "htp", "amht_lrs_iht": "iht"}
BASELINES = ("altmin", "lowrank_ridge", "sparse_iht", "per_user_ls")


# ------------------------------------------------------------------------------ fitting


def algorithm_config(settings: Mapping[str, Any], r: int, k: int, seed: int) -> AMHTConfig:
    return AMHTConfig(r=r, k=k, seed=seed, **settings.get("algorithm", {}))


def fit_method(method: str, data: LRSData, cfg: AMHTConfig, settings: Mapping[str, Any], monitor=None):
    """Fit one method; returns ``(Theta_hat, U_hat or None, B_hat or None, history)``."""
    X, y = data.X, data.y
    if method == "amht_lrs":  # the configured local step (default cosamp)
        res = amht_lrs(X, y, cfg, monitor=monitor)
        return res.theta, res.U, res.B, res.history
    if method in VARIANTS:  # the local solver alone, without the swap search
        res = amht_lrs(X, y, replace(cfg, sparse_step=VARIANTS[method], swap_search=False), monitor=monitor)
        return res.theta, res.U, res.B, res.history
    if method == "altmin":
        res = altmin(X, y, cfg, monitor=monitor)
        return res.theta, res.U, None, res.history
    if method == "lowrank_ridge":
        res = lowrank_ridge(X, y, cfg, ridge=float(settings.get("ridge", 1.0)))
        return res.theta, res.U, None, []
    if method == "sparse_iht":
        return sparse_iht(X, y, cfg), None, None, []
    if method == "per_user_ls":
        return per_user_ls(X, y), None, None, []
    if method == "oracle":
        return oracle_ls(X, y, data.U, data.B), data.U, None, []
    raise ValueError(f"unknown method {method!r}; known: {METHODS}")


def scores(data: LRSData, theta, U, B) -> dict[str, float]:
    per_user = parameter_error(theta, data.theta)
    row = {"param_error": float(per_user.mean()), "param_error_max": float(per_user.max()),
           "subspace_distance": float("nan") if U is None else subspace_distance(U, data.U),
           "support_precision": float("nan"), "support_recall": float("nan"), "support_exact": float("nan")}
    if B is not None:
        precision, recall = support_scores(B, data.B, tol=1e-8 * float(data.B.abs().max().clamp(min=1.0)))
        row.update(support_precision=float(precision.mean()), support_recall=float(recall.mean()),
                   support_exact=float(((precision == 1) & (recall == 1)).double().mean()))
    return row


def _spec(settings: Mapping[str, Any], seed: int, **overrides) -> LRSSpec:
    return LRSSpec(**{**settings["base"], **overrides, "seed": int(seed)})


def _timed_fit(method, data, cfg, settings, monitor=None):
    start = time.perf_counter()
    out = fit_method(method, data, cfg, settings, monitor)
    return out, time.perf_counter() - start


# ------------------------------------------------------------------------------- sweeps


def run_sweep(experiment: str, settings: Mapping[str, Any], seed: int, device: str = "cpu") -> pd.DataFrame:
    """One seed of one experiment as tidy rows (see module doc)."""
    base = settings["base"]
    rows: list[dict[str, Any]] = []
    if experiment in ("error_vs_m", "support"):
        grid = [int(m) for m in settings["m_grid"]]
        full = generate(_spec(settings, seed, m=max(grid)), device=device)
        methods = settings.get("methods", list(METHODS)) if experiment == "error_vs_m" else ["amht_lrs", *VARIANTS]
        for m in grid:
            data = full.subsample(m)
            cfg = algorithm_config(settings, base["r"], base["k"], seed)
            for method in methods:
                (theta, U, B, _), secs = _timed_fit(method, data, cfg, settings)
                rows.append({"method": method, "m": m, "t": base["t"], **scores(data, theta, U, B), "seconds": secs})
    elif experiment == "error_vs_t":
        m = int(settings["t_fixed_m"])
        for t in [int(v) for v in settings["t_grid"]]:
            data = generate(_spec(settings, seed, m=m, t=t), device=device)
            cfg = algorithm_config(settings, base["r"], base["k"], seed)
            for method in settings.get("t_methods", ["amht_lrs", "altmin", "lowrank_ridge", "per_user_ls", "oracle"]):
                (theta, U, B, _), secs = _timed_fit(method, data, cfg, settings)
                rows.append({"method": method, "m": m, "t": t, **scores(data, theta, U, B), "seconds": secs})
    elif experiment == "iterations":
        data = generate(_spec(settings, seed, m=int(settings["iterations_m"])), device=device)
        cfg = algorithm_config(settings, base["r"], base["k"], seed)

        def monitor(U, W, B):
            return {"param_error": float(parameter_error(W @ U.T + B, data.theta).mean()),
                    "subspace_distance": subspace_distance(U, data.U)}

        for method in ("amht_lrs", *VARIANTS, "altmin"):
            (_, _, _, history), _ = _timed_fit(method, data, cfg, settings, monitor)
            rows += [{"method": method, "m": data.spec.m, "t": data.spec.t, "iteration": h["iteration"],
                      "param_error": h["param_error"], "subspace_distance": h["subspace_distance"],
                      "train_mse": h["train_mse"]} for h in history]
    elif experiment == "private":
        p = settings["private"]
        data = generate(_spec(settings, seed, m=int(p["m"])), device=device)
        cfg = algorithm_config(settings, base["r"], base["k"], seed)
        (theta, U, B, _), secs = _timed_fit("amht_lrs", data, cfg, settings)
        nonprivate = {"method": "amht_lrs", "m": data.spec.m, "t": data.spec.t, **scores(data, theta, U, B), "seconds": secs}
        for eps in [float(e) for e in p["epsilons"]]:
            priv = PrivateConfig(epsilon=eps, delta=float(p["delta"]), clip=float(p["clip"]),
                                 init_clip=float(p["init_clip"]), step=float(p["step"]))
            start = time.perf_counter()
            res, acct = private_amht_lrs(data.X, data.y, cfg, priv, seed=seed)
            rows.append({"method": "private_amht_lrs", "m": data.spec.m, "t": data.spec.t, "epsilon_target": eps,
                         "epsilon": acct.epsilon, "rho": acct.rho, "delta": priv.delta,
                         **scores(data, res.theta, res.U, res.B), "seconds": time.perf_counter() - start})
            rows.append({**nonprivate, "epsilon_target": eps, "epsilon": math.inf})
    else:
        raise ValueError(f"unknown experiment {experiment!r}; known: {EXPERIMENTS}")
    frame = pd.DataFrame(rows)
    frame.insert(0, "seed", int(seed))
    frame.insert(0, "experiment", experiment)
    return frame


def run_ml100k(raw_dir: str | Path, settings: Mapping[str, Any], seeds: list[int]) -> pd.DataFrame:
    """Figure 6, OUR OWN DESIGN (``recrepro.papers.lrs.movielens``): held-out MSE per method vs ``m`` on ML-100K."""
    from recrepro.papers.lrs.movielens import heldout_mse, load_tasks

    ml = settings["ml100k"]
    grid = [int(m) for m in ml["m_grid"]]
    rows = []
    for seed in seeds:
        X, y, Xte, yte, info = load_tasks(raw_dir, d=int(ml["d"]), m_max=max(grid), n_test=int(ml["n_test"]), seed=seed)
        cfg = AMHTConfig(r=int(ml["r"]), k=int(ml["k"]), seed=seed, local_ridge=float(ml["local_ridge"]),
                         **settings.get("algorithm", {}))
        zero = torch.zeros(X.shape[0], X.shape[2], dtype=X.dtype)
        for m in grid:
            Xm, ym = X[:, :m], y[:, :m]
            fits = {
                "amht_lrs": lambda: amht_lrs(Xm, ym, cfg).theta,
                "altmin": lambda: altmin(Xm, ym, cfg).theta,
                "lowrank_ridge": lambda: lowrank_ridge(Xm, ym, cfg, ridge=float(settings.get("ridge", 1.0))).theta,
                "sparse_iht": lambda: sparse_iht(Xm, ym, cfg),
                "per_user_ls": lambda: per_user_ls(Xm, ym, float(ml["local_ridge"])),
                "global_mean": lambda: zero,
            }
            for method, fit in fits.items():
                start = time.perf_counter()
                theta = fit()
                rows.append({"experiment": "ml100k", "seed": seed, "method": method, "m": m, "t": info["users"],
                             "heldout_mse": heldout_mse(theta, Xte, yte), "seconds": time.perf_counter() - start})
    return pd.DataFrame(rows)


#: Columns of a row that identify it (the timings file repeats them beside ``seconds``).
ROW_KEYS = ("experiment", "seed", "method", "m", "t", "epsilon_target", "iteration")


def split_timings(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A sweep's rows without ``seconds`` and, apart, each row's keys with its ``seconds``.

    Wall times change from one run to the next; kept out of the rows, a rerun of the same seeds
    leaves the rows byte-identical (the figures read only the rows).
    """
    keys = [c for c in ROW_KEYS if c in frame.columns]
    if "seconds" not in frame.columns:  # an experiment that times nothing (per-iteration curves): keys only
        return frame, frame[keys]
    return frame.drop(columns="seconds"), frame[[*keys, "seconds"]]


# ---------------------------------------------------------------------------- acceptance


def run_acceptance(settings: Mapping[str, Any], seed: int, tier: str, run_root: str | Path, device: str = "cpu",
                   config_slice: Mapping[str, Any] | None = None) -> list[Path]:
    """Our acceptance settings (``settings["acceptance"]``): one run record per (setting, method).

    ``noiseless``: AMHT-LRS only (subspace distance, error, exact supports).
    ``noisy``: every method; AMHT-LRS also gets ``error_to_oracle`` (its error over the oracle's, the
    noise floor) and ``beats_baselines`` (1 if its error is below every baseline's).
    ``floor``: AMHT-LRS and the oracle at a larger ``m`` (``error_to_oracle``: the noise-floor check).
    ``private``: private AMHT-LRS over the epsilon grid; ``error_falls_with_epsilon`` (1 if the error
    decreases along the grid) and ``error_to_nonprivate`` at the largest epsilon.
    """
    acc = settings["acceptance"]  # acc["algorithm"] overrides settings["algorithm"] (not for ``private``)
    written: list[Path] = []

    def record(split, method, data, theta, U, B, extra, secs):
        overall = {k: v for k, v in {**scores(data, theta, U, B), **extra}.items() if math.isfinite(v)}
        per_user = pd.DataFrame({"user": np.arange(data.spec.t),
                                 "param_error": parameter_error(theta, data.theta).cpu().numpy()})
        run_dir = Path(run_root) / "synthetic" / split / method / f"seed{seed}"
        write_run_record(run_dir, overall=overall, strata={}, per_user=per_user,
                         counts={"n_users_evaluated": data.spec.t, "n_users_skipped_no_targets": 0},
                         meta={"tier": tier, "paper": "lrs", "dataset": "synthetic", "split": split, "method": method,
                               "protocol": "lrs_synthetic", "spec": data.spec.as_dict()},
                         config_slice=dict(config_slice or settings), split_manifest=None, seed=seed, device=device,
                         wall_seconds=secs, verify_split=False)
        written.append(run_dir)

    spec = LRSSpec(**{**acc["noiseless"], "sigma": 0.0, "seed": seed})
    data = generate(spec, device=device)
    cfg = AMHTConfig(r=spec.r, k=spec.k, seed=seed, **{**settings.get("algorithm", {}), **acc.get("algorithm", {})})
    (theta, U, B, _), secs = _timed_fit("amht_lrs", data, cfg, settings)
    record("noiseless", "amht_lrs", data, theta, U, B, {}, secs)

    spec = LRSSpec(**{**acc["noisy"], "seed": seed})
    data = generate(spec, device=device)
    cfg = replace(cfg, r=spec.r, k=spec.k)
    fits = {method: _timed_fit(method, data, cfg, settings) for method in METHODS}
    errors = {method: float(parameter_error(out[0], data.theta).mean()) for method, (out, _) in fits.items()}
    for method, ((theta, U, B, _), secs) in fits.items():
        extra = {}
        if method == "amht_lrs":
            extra = {"error_to_oracle": errors["amht_lrs"] / errors["oracle"],
                     "beats_baselines": float(all(errors["amht_lrs"] < errors[b] for b in BASELINES))}
        record("noisy", method, data, theta, U, B, extra, secs)

    spec = LRSSpec(**{**acc["floor"], "seed": seed})
    data = generate(spec, device=device)
    cfg = replace(cfg, r=spec.r, k=spec.k)
    fits = {method: _timed_fit(method, data, cfg, settings) for method in ("amht_lrs", "oracle")}
    errors = {method: float(parameter_error(out[0], data.theta).mean()) for method, (out, _) in fits.items()}
    for method, ((theta, U, B, _), secs) in fits.items():
        extra = {"error_to_oracle": errors["amht_lrs"] / errors["oracle"]} if method == "amht_lrs" else {}
        record("floor", method, data, theta, U, B, extra, secs)

    _acceptance_private(acc["private"], settings, seed, device, record)
    return written


def _acceptance_private(p: Mapping[str, Any], settings: Mapping[str, Any], seed: int, device: str,
                        record: Callable[..., None]) -> None:
    """:func:`run_acceptance`'s ``private`` setting: non-private AMHT-LRS, then the epsilon grid."""
    spec = LRSSpec(**{**p["spec"], "seed": seed})
    data = generate(spec, device=device)
    # the tier's algorithm settings (fixed T: the budget is split over T + 1 mechanisms), not the
    # run-to-convergence override of the other acceptance settings
    cfg = algorithm_config(settings, spec.r, spec.k, seed)
    (theta, U, B, _), secs = _timed_fit("amht_lrs", data, cfg, settings)
    nonprivate_error = float(parameter_error(theta, data.theta).mean())
    record("private", "amht_lrs", data, theta, U, B, {}, secs)
    errs, last = [], None
    for eps in sorted(float(e) for e in p["epsilons"]):
        priv = PrivateConfig(epsilon=eps, delta=float(p["delta"]), clip=float(p["clip"]),
                             init_clip=float(p["init_clip"]), step=float(p["step"]))
        start = time.perf_counter()
        res, acct = private_amht_lrs(data.X, data.y, cfg, priv, seed=seed)
        errs.append(float(parameter_error(res.theta, data.theta).mean()))
        last = (res, acct, time.perf_counter() - start)
    res, acct, secs = last
    record("private", "private_amht_lrs", data, res.theta, res.U, res.B,
           {"epsilon": acct.epsilon, "error_to_nonprivate": errs[-1] / nonprivate_error,
            "error_falls_with_epsilon": float(all(a > b for a, b in zip(errs, errs[1:])))}, secs)
