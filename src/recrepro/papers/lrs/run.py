"""AMHT-LRS (Pal et al., arXiv 2210.03505): experiment drivers, figures and run records.

Every experiment is synthetic (``recrepro.papers.lrs.generator``) and of our own design: the paper's
figures, constants and numbers could not be read (``docs/deviations.md#lrs-experiments``).

The verbs ``recrepro lrs <verb>`` (:mod:`recrepro.papers.lrs.cli`, called by ``workflow/rules/lrs*.smk``)::

    sweep       --experiment E --seeds S1,S2 --settings JSON --out rows.parquet [--out-timings F]  (run_sweep)
    figures     --tier T --out-dir D E1=rows1.parquet E2=rows2.parquet ...   (make_figure: D/<figure name>.pdf/.png)
    ml100k      --raw-dir D --seeds S1,S2 --settings JSON --tier T --out rows.parquet [--out-timings F]
                                                                                          (run_ml100k, make_figure)
    acceptance  --seed S --settings JSON --tier T --run-root results/<tier>/lrs/runs --done F  (run_acceptance)

Experiments ``E``: ``error_vs_m`` (fig. 1), ``error_vs_t`` (fig. 2), ``iterations`` (fig. 3),
``private`` (fig. 4), ``support`` (fig. 5). Each sweep writes one tidy row per (method, x value)
with ``param_error`` (mean over users of ``||Theta_hat_i - Theta*_i|| / ||Theta*_i||``),
``subspace_distance``, ``support_precision``/``support_recall`` and ``seconds`` (the CLI writes the
seconds to a file of their own, :func:`split_timings`).
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

EXPERIMENTS = ("error_vs_m", "error_vs_t", "iterations", "private", "support")
#: Figure file names and the experiment each draws.
FIGURES = {"fig1_error_vs_m": "error_vs_m", "fig2_error_vs_t": "error_vs_t", "fig3_iterations": "iterations",
           "fig4_private": "private", "fig5_support": "support"}
#: Figures drawn from rows that are not a synthetic sweep: figure file name -> what :func:`make_figure` draws.
REALDATA_FIGURES = {"fig6_ml100k": "ml100k"}
#: Methods of figure 1 (and the acceptance runs), in legend order.
METHODS = ("amht_lrs", "amht_lrs_cosamp", "amht_lrs_htp", "amht_lrs_iht", "altmin", "lowrank_ridge", "sparse_iht",
           "per_user_ls", "oracle")
#: AMHT-LRS variants without the swap search (docs/deviations.md#lrs-swap-search): method -> sparse_step.
VARIANTS = {"amht_lrs_cosamp": "cosamp", "amht_lrs_htp": "htp", "amht_lrs_iht": "iht"}
BASELINES = ("altmin", "lowrank_ridge", "sparse_iht", "per_user_ls")
LABELS = {
    "amht_lrs": "AMHT-LRS (CoSaMP + swap search)", "amht_lrs_cosamp": "AMHT-LRS (CoSaMP, no swaps)",
    "amht_lrs_htp": "AMHT-LRS (HTP, no swaps)", "amht_lrs_iht": "AMHT-LRS (plain IHT, no swaps)",
    "altmin": "low rank only (AltMin)",
    "lowrank_ridge": "low rank + dense ridge", "sparse_iht": "sparse only (k-sparse Θ)", "per_user_ls": "per-user LS",
    "oracle": "oracle LS (U*, supports known)", "private_amht_lrs": "private AMHT-LRS",
    "global_mean": "global mean rating",
}


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


# ------------------------------------------------------------------------------ figures


def _summary(frame: pd.DataFrame, x: str, y: str) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    out = {}
    for method, group in frame.groupby("method", sort=False):
        agg = group.groupby(x)[y].agg(["mean", "std"]).sort_index()
        out[method] = (agg.index.to_numpy(dtype=float), agg["mean"].to_numpy(), agg["std"].to_numpy())
    return out


#: Every method of the LRS figures in one order: marker fixed across the figures.
METHOD_ORDER = (*METHODS, "private_amht_lrs", "global_mean")
#: Colour and dash of every method, the same in every LRS figure: AMHT-LRS and its variants solid,
#: the baselines dashed, the oracle (the noise floor) black dotted; eleven methods, so the
#: reference lines take greys beside the eight colour-blind-safe colours.
LINE_STYLES = {
    "amht_lrs": ("#0072B2", "-"), "amht_lrs_cosamp": ("#D55E00", "-"), "amht_lrs_htp": ("#009E73", "-"),
    "amht_lrs_iht": ("#E69F00", "-"), "altmin": ("#CC79A7", "--"), "lowrank_ridge": ("#56B4E9", "--"),
    "sparse_iht": ("#F0E442", "--"), "per_user_ls": ("#555555", "--"), "oracle": ("#000000", ":"),
    "private_amht_lrs": ("#D55E00", "-"), "global_mean": ("#999999", "--"),
}


def _lines(ax, summary, order=None):
    from recrepro.reporting.plotting import method_styles

    methods = [m for m in (order or summary) if m in summary]
    markers = method_styles([*METHOD_ORDER, *methods])
    for method in methods:
        xs, mean, sd = summary[method]
        color, dash = LINE_STYLES.get(method, (markers[method]["color"], "-"))
        ax.errorbar(xs, mean, yerr=np.nan_to_num(sd), label=LABELS.get(method, method), color=color, linestyle=dash,
                    marker=markers[method]["marker"], markersize=3.5, linewidth=1.2, capsize=2.5, elinewidth=0.8)


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


def make_figure(experiment: str, frame: pd.DataFrame, out_pdf: str, out_png: str, tier: str) -> None:
    """Draw one figure from the concatenated seeds' rows (mean ± sd over seeds)."""
    from recrepro.reporting.plotting import FONT_SIZES, figure_legend, new_figure, save_figure

    n_seeds = frame["seed"].nunique()
    note = f"mean ± sd over {n_seeds} seed(s); synthetic LRS data, our design (no published numbers)"
    if experiment == "error_vs_m":
        fig, ax = new_figure(width=5.5)
        _lines(ax, _summary(frame, "m", "param_error"), METHODS)
        ax.set(xlabel="samples per user m", ylabel="mean relative parameter error", yscale="log")
        ax.set_title(f"Fig. 1: error vs m (t={int(frame['t'].iloc[0])})")
    elif experiment == "error_vs_t":
        fig, ax = new_figure(width=5.5)
        _lines(ax, _summary(frame, "t", "param_error"), METHODS)
        ax.set(xlabel="number of users t", ylabel="mean relative parameter error", yscale="log", xscale="log")
        ax.set_title(f"Fig. 2: error vs t (m={int(frame['m'].iloc[0])})")
        # ticks at the t grid, in plain numbers: the log axis's own minor labels (3×10², 4×10², …) ran into each other
        from matplotlib.ticker import FuncFormatter, NullFormatter
        ax.set_xticks(sorted(frame["t"].unique()))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    elif experiment == "iterations":
        fig, axes = new_figure(ncols=2, width=7.0, height=3.0)
        _lines(axes[0], _summary(frame, "iteration", "subspace_distance"), METHOD_ORDER)
        _lines(axes[1], _summary(frame, "iteration", "param_error"), METHOD_ORDER)
        axes[0].set(xlabel="outer iteration", ylabel="‖(I − ÛÛᵀ)U*‖₂", yscale="log", title="Fig. 3a: subspace distance")
        axes[1].set(xlabel="outer iteration", ylabel="mean relative parameter error", yscale="log", title="Fig. 3b: error")
        # whole iterations, written from the rounded value: a tick the locator puts at −2e-16 on one host's
        # arithmetic and at 0 on another's would print "−0" there and change the PDF's bytes
        from matplotlib.ticker import FuncFormatter, MaxNLocator
        for ax in axes:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{int(round(value))}"))
    elif experiment == "private":
        fig, ax = new_figure(width=5.5)
        priv = frame[frame["method"] == "private_amht_lrs"]
        non = frame[frame["method"] == "amht_lrs"].copy()
        summary = _summary(priv, "epsilon_target", "param_error")
        summary.update(_summary(non, "epsilon_target", "param_error"))
        _lines(ax, summary, ["private_amht_lrs", "amht_lrs"])
        ax.set(xlabel="ε (computed by the zCDP accountant, δ = %g)" % priv["delta"].iloc[0],
               ylabel="mean relative parameter error", xscale="log", yscale="log", title="Fig. 4: private vs non-private")
    elif experiment == "ml100k":
        fig, ax = new_figure(width=5.5)
        _lines(ax, _summary(frame, "m", "heldout_mse"), [*METHODS, "global_mean"])
        ax.set(xlabel="training ratings per user m", ylabel="held-out MSE (ratings)", yscale="log",
               title=f"Fig. 6 (our design): ML-100K, {int(frame['t'].iloc[0])} users as tasks")
        # MSEs span less than a decade: plain numbers on the log axis (not 2×10⁰) and ticks at the m grid
        from matplotlib.ticker import FuncFormatter
        plain = FuncFormatter(lambda value, _: f"{value:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.set_xticks(sorted(frame["m"].unique()))
        note = f"mean ± sd over {n_seeds} seed(s); our own demonstration, not the paper's experiment"
    elif experiment == "support":
        frame = frame[frame["method"].isin(["amht_lrs", *VARIANTS])]  # the error-vs-m rows also serve here
        fig, axes = new_figure(ncols=2, width=7.0, height=3.0)
        _lines(axes[0], _summary(frame, "m", "support_precision"), METHOD_ORDER)
        _lines(axes[1], _summary(frame, "m", "support_recall"), METHOD_ORDER)
        axes[0].set(xlabel="samples per user m", ylabel="precision of supp(b̂ᵢ)", title="Fig. 5a: support precision")
        axes[1].set(xlabel="samples per user m", ylabel="recall of supp(b̂ᵢ)", title="Fig. 5b: support recall")
    else:
        raise ValueError(f"unknown experiment {experiment!r}")
    for ax in fig.axes:  # a log axis spanning about a decade labels its minor ticks: at the major labels' size
        ax.tick_params(which="minor", labelsize=FONT_SIZES["tick"])
    figure_legend(fig, ncols=3 if len(fig.axes) > 1 else 2)
    dataset = "ml-100k" if experiment == "ml100k" else "synthetic LRS"
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset, caption=note)


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
