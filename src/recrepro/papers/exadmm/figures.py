"""exADMM (Togashi, Abe, Saito, WWW 2024): experiment drivers, figures, table and the rules' helpers.

The verbs ``recrepro exadmm <verb>`` (:mod:`recrepro.papers.exadmm.cli`, called by
``workflow/rules/exadmm*.smk``) run these functions:

``train`` (:func:`run_point`)
    Fit one operating point (iALS, exADMM or FairRec on top of iALS) on a
    strong-generalisation split's ``train`` part, fold in the held-out users of
    ``validation_tr`` and ``test_tr`` (V fixed), evaluate both (exclude = fold-in part,
    targets = ``*_te``) and write the run record (test metrics) plus ``validation.json``
    (validation metrics, for model selection) and ``history.json`` (per-epoch seconds,
    residuals, objective terms).
``tradeoff`` (:func:`figure_tradeoff`)
    Figure 1: accuracy (NDCG@K, Recall@K) vs exposure concentration (Gini@K, Coverage@K).
``convergence`` (:func:`figure_convergence`)
    Figure 3: ADMM residuals and objective per epoch.
``table`` (:func:`table_best`)
    Table 4: per family the validation-selected operating point with its test metrics.
``scalability`` (:func:`scalability`)
    Figure 2's timings: seconds per training epoch vs d and vs number of users (a JSON record).
``figure-scalability`` (:func:`figure_scalability`)
    Figure 2, drawn from that record.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from recrepro.io import read_json, write_json, write_parquet, write_text
from recrepro.records import build_provenance, read_history, read_record_json, write_history

if TYPE_CHECKING:
    from recrepro.evaluation.on_split import SplitData

# torch, the evaluation core and the models are imported where they are used, so the
# Snakefile can import operating_points cheaply.

FAMILIES = ("ials", "exadmm", "fairrec")
DEFAULT_METRICS = ("recall_liang", "ndcg", "coverage", "gini", "gini_pos")
#: Cut-offs a run record scores when the tier names none (``exadmm.ks``).
DEFAULT_KS = (3, 5, 10, 20, 50, 100)
MODEL_KEYS = {
    "ials": ("dim", "alpha0", "l2", "l2_exp", "stdev", "epochs", "log_losses", "solver", "cg_steps"),
    "exadmm": ("dim", "alpha0", "l2", "l2_exp", "stdev", "epochs", "exposure_reg", "admm_penalty",
               "learning_rate", "pred_iterations", "strength_scaling", "u_step_hessian", "u_step_size",
               "log_losses"),
}


# ------------------------------------------------------------------ operating points
def operating_points(entry: Mapping[str, Any], switches: Mapping[str, Any] | None = None) -> dict[str, dict]:
    """Method name -> ``{"family", "params"}`` for one dataset entry of the config.

    The base settings are methods ``ials`` and ``exadmm``; each ``sweep.<family>`` item
    overrides them and is named ``<family>_sw<i>`` (i from 1) unless it gives a ``name``.
    ``record_part`` (``test`` by default) is the held-out part whose metrics the run record
    holds (the ML-1M fixture's published numbers are on ``validation``).  FairRec points post-process
    the base iALS model: ``fairrec_sw<i>`` with ``min_assignment_prop`` from the sweep.
    """
    switches = dict(switches or {})
    points: dict[str, dict] = {}
    for family in ("ials", "exadmm"):
        if family not in entry:
            continue
        base = dict(entry[family])
        if family == "exadmm":
            base = {**{k: v for k, v in switches.items() if k in MODEL_KEYS["exadmm"]}, **base}
        points[family] = {"family": family, "params": base}
        for i, override in enumerate(entry.get("sweep", {}).get(family, []), start=1):
            override = dict(override)
            name = override.pop("name", f"{family}_sw{i}")
            points[name] = {"family": family, "params": {**base, **override}}
    if "ials" in entry:
        for i, override in enumerate(entry.get("sweep", {}).get("fairrec", []), start=1):
            override = dict(override)
            name = override.pop("name", f"fairrec_sw{i}")
            points[name] = {"family": "fairrec", "params": {"base": dict(entry["ials"]), **override}}
    record = entry.get("record_part", "test")
    for point in points.values():
        point["record_part"] = record
    return points


# ------------------------------------------------------------------ workflow helpers
# (used by workflow/rules/exadmm.smk; they only read the config)
def smk_entries(config: Mapping[str, Any], tier: str) -> list[dict]:
    """The tier's dataset entries of the ``exadmm`` config block."""
    return list(config.get("exadmm", {}).get("tiers", {}).get(tier, {}).get("datasets", []))


def smk_switches(config: Mapping[str, Any]) -> dict[str, str]:
    block = config.get("exadmm", {})
    return {"strength_scaling": block.get("strength_scaling", "n2"),
            "u_step_hessian": block.get("u_step_hessian", "full"),
            "u_step_size": block.get("u_step_size", "lipschitz")}


def smk_entry(config: Mapping[str, Any], tier: str, dataset: str) -> dict:
    for entry in smk_entries(config, tier):
        if entry["dataset"] == dataset:
            return entry
    raise ValueError(f"exadmm: no {tier} entry for dataset {dataset!r}")


def smk_point(config: Mapping[str, Any], tier: str, dataset: str, method: str) -> dict:
    return operating_points(smk_entry(config, tier, dataset), smk_switches(config))[method]


def smk_manifest(config: Mapping[str, Any], data_root: str, tier: str, dataset: str) -> str:
    """The split manifest an entry trains on (``<data>/splits/<dataset>/<protocol>/<split>/seed<k>``)."""
    e = smk_entry(config, tier, dataset)
    return f"{data_root}/splits/{dataset}/{e['protocol']}/{e['split']}/seed{e['split_seed']}/manifest.json"


def smk_runs(config: Mapping[str, Any], tier: str) -> list[str]:
    """metrics.json of every operating point and seed of the tier."""
    out = []
    for e in smk_entries(config, tier):
        for method in operating_points(e, smk_switches(config)):
            out += [f"results/{tier}/exadmm/runs/{e['dataset']}/{e['split']}/{method}/seed{s}/metrics.json"
                    for s in e["seeds"]]
    return out


def smk_histories(config: Mapping[str, Any], tier: str) -> list[str]:
    """history.json of the base exADMM runs (figure 3)."""
    return [f"results/{tier}/exadmm/runs/{e['dataset']}/{e['split']}/exadmm/seed{s}/history.json"
            for e in smk_entries(config, tier) if "exadmm" in e for s in e["seeds"]]


def smk_targets(config: Mapping[str, Any], tier: str) -> list[str]:
    """Default targets of the tier (empty when the tier has no exadmm entries)."""
    if not smk_entries(config, tier):
        return []
    base = f"results/{tier}/exadmm"
    targets = [f"{base}/figures/fig1_tradeoff.pdf", f"{base}/figures/fig3_convergence.pdf",
               f"{base}/table4_best_points.md", f"{base}/scorecard.md"]
    scal = config["exadmm"]["tiers"][tier].get("scalability")
    if scal:
        targets.append(f"{base}/figures/fig2_scalability_{scal['dataset']}.pdf")
    return targets


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


# ------------------------------------------------------------------ reading runs
def load_runs(run_files: Sequence[str | Path]) -> pd.DataFrame:
    """One row per run: identity, family, test metrics (``test:<key>``), validation metrics (``val:<key>``)."""
    rows = []
    for f in run_files:
        d = Path(f).parent if str(f).endswith(".json") else Path(f)
        m = read_record_json(d / "metrics.json")
        row = {"dir": str(d), "dataset": m["dataset"], "method": m["method"], "seed": m["seed"],
               "family": m.get("family", m["method"].split("_")[0])}
        row.update({f"test:{k}": v for k, v in m["overall"].items()})
        if (d / "validation.json").exists():
            row.update({f"val:{k}": v for k, v in read_record_json(d / "validation.json")["overall"].items()})
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_over_seeds(frame: pd.DataFrame) -> pd.DataFrame:
    numeric = [c for c in frame.columns if c.startswith(("test:", "val:"))]
    return frame.groupby(["dataset", "family", "method"], as_index=False)[numeric].mean()


# ------------------------------------------------------------------ figures and table
#: Families in the paper's order (legends; their colours are fixed across exADMM's figures).
FAMILY_LABELS = {"ials": "iALS", "exadmm": "exADMM", "fairrec": "FairRec"}
#: Metric names as the paper writes them.
METRIC_LABELS = {"ndcg": "nDCG", "recall_liang": "Recall", "gini": "Gini", "coverage": "Coverage"}


def family_colors() -> dict[str, str]:
    """iALS, exADMM, FairRec: the same colour in every exADMM figure."""
    from recrepro.reporting.plotting import fixed_colors

    return fixed_colors(FAMILIES)


def _is_code_step(method: str) -> bool:
    """An exADMM point run with the released code's U-step (``exadmm_code``, ``exadmm_code_sw<i>``)."""
    return method == "exadmm_code" or method.startswith("exadmm_code_")


def _tradeoff_series() -> list[tuple[str, Any, str, str]]:
    """Figure 1's series: (family, which of its methods, marker, legend label). exADMM's points under
    the released code's U-step are squares of exADMM's colour, and its points with the exact per-user
    curvature diamonds, apart from our default step's (docs/deviations.md#exadmm-u-step-size)."""
    def exact(m: str) -> bool:
        return m == "exadmm_exact" or m.startswith("exadmm_exact_")

    return [("ials", lambda m: True, "o", FAMILY_LABELS["ials"]),
            ("exadmm", lambda m: not _is_code_step(m) and not exact(m), "o", FAMILY_LABELS["exadmm"]),
            ("exadmm", _is_code_step, "s", f"{FAMILY_LABELS['exadmm']}, released code's U-step"),
            ("exadmm", exact, "D", f"{FAMILY_LABELS['exadmm']}, exact curvature"),
            ("fairrec", lambda m: True, "o", FAMILY_LABELS["fairrec"])]


def figure_tradeoff(run_files, out_pdf, out_png, *, tier: str, ks: Sequence[int]) -> None:
    """Figure 1: per dataset and K, NDCG@K and Recall@K against Gini@K and Coverage@K (test, seed mean).

    One row per (dataset, K), columns nDCG vs Gini, nDCG vs Coverage, Recall vs Gini, Recall vs
    Coverage; one marker per operating point (filled; exADMM under the released code's U-step:
    squares). The numbers measured with the official
    code (``expected/exadmm.yaml``) are drawn as hollow markers where both coordinates are given.
    """
    from recrepro.reporting.plotting import figure_legend, new_figure, plot_published, published_handles, save_figure
    from recrepro.scorecard import published_value, published_values

    frame = _mean_over_seeds(load_runs(run_files))
    datasets = sorted(frame["dataset"].unique())
    panels = [(y, x) for y in ("ndcg", "recall_liang") for x in ("gini", "coverage")]
    n_rows = len(datasets) * len(ks)
    fig, axes = new_figure(ncols=len(panels), nrows=n_rows, width=7.5, height=1.9 * n_rows + 0.3)
    axes = np.atleast_2d(axes)
    colors = family_colors()
    published = published_values("exadmm")
    drawn_published = False
    row = 0
    for dataset in datasets:
        sub = frame[frame["dataset"] == dataset]
        for k in ks:
            for col, (y, x) in enumerate(panels):
                ax = axes[row, col]
                for family, series, marker, label in _tradeoff_series():
                    pts = sub[(sub["family"] == family) & sub["method"].map(series)] if f"test:{x}@{k}" in sub \
                        else sub.iloc[0:0]
                    if pts.empty or f"test:{y}@{k}" not in pts:
                        continue
                    pts = pts.sort_values(f"test:{x}@{k}")
                    ax.plot(pts[f"test:{x}@{k}"], pts[f"test:{y}@{k}"], marker=marker, linestyle="none", markersize=4,
                            color=colors[family], label=label)
                    for method in sorted(set(pts["method"])):
                        px = published_value(published, dataset, method, f"{x}@{k}")
                        py = published_value(published, dataset, method, f"{y}@{k}")
                        if px is not None and py is not None:
                            plot_published(ax, px, py, color=colors[family])
                            drawn_published = True
                ax.set_xlabel(f"{METRIC_LABELS[x]}@{k}")
                ax.set_ylabel(f"{METRIC_LABELS[y]}@{k}")
                if col == 0:
                    ax.set_title(f"{dataset}, K = {k}", loc="left", fontsize=9)
            row += 1
    figure_legend(fig, loc="outside upper center",
                  extra=published_handles("official code") if drawn_published else None)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=",".join(datasets),
                caption="accuracy vs exposure concentration, one point per operating point (test, seed mean)"
                        + ("; hollow: values measured with the official code" if drawn_published else ""))


#: Line colours of the convergence figure's terms (fixed; the datasets differ by dash).
CONVERGENCE_TERMS = {
    "residual_V": "‖ΔV‖", "residual_U": "‖ΔU‖", "residual_s": "‖Δs‖", "residual_w": "‖Δw‖ = ‖ū − s‖",
    "loss": "total", "loss_observed": "observed", "loss_unobserved": "unobserved", "loss_reg": "L2",
    "loss_expo": "exposure Λ‖Vū‖²",
}


def figure_convergence(history_files, out_pdf, out_png, *, tier: str) -> None:
    """Figure 3: exADMM residuals (left) and objective terms (right) per epoch, log scale.

    Colour = term, dash = dataset; one legend for the figure. The first history file of each
    dataset is drawn (the rule gives the base exADMM run of every seed; the curves of the seeds
    look alike).
    """
    from recrepro.reporting.plotting import (FIXED_METHOD_COLORS, KEY_COLOR, LINESTYLES, figure_legend, method_styles,
                                   new_figure, save_figure)

    fig, axes = new_figure(ncols=2, width=7.0, height=3.2)
    # colour and marker per term (nine terms, eight colours); the dash is the dataset's
    styles = {term: {"color": style["color"], "marker": style["marker"]}
              for term, style in method_styles(list(CONVERGENCE_TERMS)).items()}
    # the ninth term would wrap round to the first one's colour (‖ΔV‖: blue, a look-alike marker): neutral grey
    styles["loss_expo"]["color"] = FIXED_METHOD_COLORS["random"]
    datasets: list[str] = []
    for f in history_files:
        hist = pd.DataFrame(read_history(Path(f).parent, Path(f).name)["train"])
        d = read_record_json(Path(f).parent / "metrics.json")["dataset"]
        if d in datasets:
            continue  # one seed per dataset: further seeds would stack identical-looking lines
        datasets.append(d)
        dash = LINESTYLES[(len(datasets) - 1) % len(LINESTYLES)]
        for ax, keys in ((axes[0], ("residual_V", "residual_U", "residual_s", "residual_w")),
                         (axes[1], ("loss", "loss_observed", "loss_unobserved", "loss_reg", "loss_expo"))):
            for key in keys:
                if key in hist:
                    ax.semilogy(hist["epoch"], hist[key].clip(lower=1e-12), linestyle=dash, linewidth=1.2,
                                markersize=3, markevery=max(1, len(hist) // 8), label=CONVERGENCE_TERMS[key],
                                **styles[key])
    axes[0].set(xlabel="epoch", ylabel="residual (Frobenius / 2-norm)", title="(a) residuals")
    axes[1].set(xlabel="epoch", ylabel="objective term", title="(b) objective")
    extra = None
    if len(datasets) > 1:  # the dash of each dataset, in the same legend
        from matplotlib.lines import Line2D

        extra = ([Line2D([], [], color=KEY_COLOR, linestyle=LINESTYLES[i % len(LINESTYLES)])
                  for i in range(len(datasets))], datasets)
    figure_legend(fig, extra=extra, ncols=5)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=",".join(sorted(set(datasets))),
                caption="exADMM convergence: ‖ΔV‖, ‖ΔU‖, ‖Δs‖, ‖Δw‖ = ‖ū−s‖ and objective terms per epoch"
                        + ("; line style: dataset" if len(datasets) > 1 else ""))


def table_best(run_files, out_md, out_csv, *, tier: str, select: str,
               ks: Sequence[int] = (20, 100)) -> pd.DataFrame:
    """Table 4: per dataset and family, the operating point with the best validation ``select`` metric.

    Columns: the test metrics of :data:`DEFAULT_METRICS` at the cut-offs ``ks``.
    """
    frame = _mean_over_seeds(load_runs(run_files))
    rows = []
    for (dataset, family), grp in frame.groupby(["dataset", "family"]):
        key = f"val:{select}"
        best = grp.loc[grp[key].idxmax()] if key in grp else grp.iloc[0]
        rows.append({"dataset": dataset, "family": family, "method": best["method"],
                     f"val {select}": best.get(key, np.nan),
                     **{c[5:]: best[c] for c in grp.columns if c.startswith("test:")}})
    table = pd.DataFrame(rows)
    wanted = [f"{m}@{k}" for k in ks for m in DEFAULT_METRICS]
    cols = ["dataset", "family", "method", f"val {select}"] + [c for c in wanted if c in table.columns]
    table = table[cols]
    write_text(out_csv, table.to_csv(index=False))
    md = [f"# exADMM table 4 ({tier} tier): validation-selected operating points (by {select}), test metrics",
          "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in table.iterrows():
        md.append("| " + " | ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in r.tolist()) + " |")
    write_text(out_md, "\n".join(md) + "\n")
    return table


def scalability(split_dir, out_json, *, entry: Mapping[str, Any], dims: Sequence[int],
                user_fractions: Sequence[float], epochs: int, device: str = "cpu", seed: int = 0) -> dict:
    """Figure 2's timings: mean seconds per training epoch of iALS and exADMM vs d and vs number of users.

    FairRec's cost is iALS's epoch plus its post-processing (reported separately, once).
    Users are subsampled (without replacement, seed ``seed``) from the training users. Writes
    ``out_json``, the record :func:`figure_scalability` draws from: the timings, the dataset,
    the epochs, FairRec's k, the device, the threads and a run record's provenance block
    (:func:`recrepro.records.build_provenance`).
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
    provenance = build_provenance(
        meta={"dataset": dataset, "kind": "exadmm_scalability"}, config_slice={"entry": dict(entry), **settings},
        split_manifest=Path(split_dir) / "manifest.json", seed=seed, device=device, started_at=started_at)
    record = {"dataset": dataset, "records": records, "epochs": epochs,
              "fairrec_k": fair_k, "device": device, "threads": torch.get_num_threads(), "provenance": provenance}
    write_json(out_json, record)
    return record


def figure_scalability(record_json, out_pdf, out_png, *, tier: str) -> None:
    """Figure 2's two panels (seconds per epoch vs d, vs users) from :func:`scalability`'s record."""
    from recrepro.reporting.plotting import figure_legend, new_figure, save_figure

    record = read_json(record_json)
    caption = (f"seconds per training epoch (mean of {record['epochs']}); FairRec = iALS epoch + one "
               f"post-processing pass (k {record['fairrec_k']}); {record['threads']} threads, {record['device']}")
    frame = pd.DataFrame(record["records"])
    fig, axes = new_figure(ncols=2, width=7.0, height=3.0)
    colors = family_colors()
    for family in FAMILIES:
        a = frame[(frame.family == family) & (frame.axis == "dim")]
        axes[0].plot(a["dim"], a["seconds"], marker="o", color=colors[family], label=FAMILY_LABELS[family])
        b = frame[(frame.family == family) & (frame.axis == "users")]
        axes[1].plot(b["n_users"], b["seconds"], marker="o", color=colors[family], label=FAMILY_LABELS[family])
    axes[0].set(xlabel="embedding size d", title="(a) vs embedding size")
    axes[1].set(xlabel="training users", title="(b) vs number of users")
    for ax in axes:
        # log: FairRec's post-processing is seconds where an iALS / exADMM epoch is a tenth of one
        ax.set_yscale("log")
        ax.set_ylabel("seconds / epoch (log)")
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=record["dataset"], caption=caption)
