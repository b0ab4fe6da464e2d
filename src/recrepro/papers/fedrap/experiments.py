"""FedRAP experiment drivers: federated runs, dataset statistics, results table, curves.

The verbs ``recrepro fedrap <verb>`` (:mod:`recrepro.papers.fedrap.cli`, called by
``workflow/rules/fedrap*.smk``) run these functions:

``run``
    Train one variant (``fedrap``, ``fedrap_code``, ``fedmf``, ``pfedrec``, ``mf``, ...)
    on a ``leave_one_out`` split with a training seed.  After every round each user's
    own model scores the 99 fixed negatives plus the validation and the test item
    (``evaluate_sampled``, pessimistic ties as FedRAP's ``utils/metrics.py``).  The run
    record holds the **test** metrics at the round with the best **validation** HR@10
    (model selection on validation; later round wins a tie).  For comparison the
    metrics.json also carries the code's rule — the round with the best *test* HR@10
    (``>=``) — under keys prefixed ``code_best_test_`` (labelled as test-selected).
    ``history.parquet`` beside the record has the per-round curves (validation/test
    HR@10 and NDCG@10, training loss, λ, μ, sparsity of C, bytes uploaded, seconds).
``stats``, ``table``
    Dataset statistics and the results table: :mod:`recrepro.papers.fedrap.tables`.
``figure``
    Learning curves (validation HR@10 per round), sparsity of C and upload size per round.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from recrepro.io import write_parquet
from recrepro.records import NonFiniteError, read_history, write_history
from recrepro.papers.fedrap.tables import runs_frame
from recrepro.papers.fedrap.tuning import parse_grid_run
from recrepro.papers.rules import protocol_split_dir, protocol_splits, variant_settings

if TYPE_CHECKING:
    from recrepro.evaluation.on_split import SplitData

# recrepro.evaluation / records / runs (torch) are imported inside the functions: the rule
# file imports the helpers below while Snakemake parses the workflow.

__all__ = ["run_variant", "dataset_stats", "rule_embedding_run", "rule_grid_runs", "rule_runs", "rule_settings",
           "rule_split_dir", "rule_splits"]

KS = [10]
# negative_pool -> the split parts whose (user, item) pairs a training negative may not be
NEGATIVE_POOL_PARTS = {"train": ["train"], "all_interactions": ["train", "validation", "test"]}


def _eval_both(model, split: SplitData, ties: str) -> tuple[Any, Any]:
    """Validation and test results of ``model`` from one scoring pass over the users."""
    from recrepro.evaluation import evaluate_sampled

    val, test, neg = split.part("validation"), split.part("test"), split.part("negatives")
    users = np.union1d(val["user"].to_numpy(), test["user"].to_numpy())
    rows = np.zeros((split.n_users, split.n_items), np.float32)
    if hasattr(model, "score_pairs"):
        # only the candidates are read: score the (user, item) pairs of the 99 negatives and
        # the held-out items instead of every user's full row
        pu = np.concatenate([neg["user"].to_numpy(), val["user"].to_numpy(), test["user"].to_numpy()])
        pi = np.concatenate([neg["item"].to_numpy(), val["item"].to_numpy(), test["item"].to_numpy()])
        for lo in range(0, pu.size, 1 << 20):
            rows[pu[lo:lo + (1 << 20)], pi[lo:lo + (1 << 20)]] = model.score_pairs(pu[lo:lo + (1 << 20)],
                                                                                  pi[lo:lo + (1 << 20)])
    else:
        for lo in range(0, users.size, 4096):
            u = users[lo:lo + 4096]
            rows[u] = model.score(u)

    def source(u):
        return rows[u]

    return (evaluate_sampled(source, val, neg, KS, ties=ties),
            evaluate_sampled(source, test, neg, KS, ties=ties))


def _last_best_round(history: pd.DataFrame, column: str) -> int:
    """Round with the largest ``column``; the later round wins a tie (the code's ``>=``)."""
    values = history[column].to_numpy()
    return int(history["round"].to_numpy()[len(values) - 1 - int(np.argmax(values[::-1]))])


class _RoundResults:
    """Test per-user results of every evaluated round (the record keeps the selected round's).

    Carried across rounds, so it is part of a checkpoint (``state_dict`` / ``load_state_dict``:
    columns as numpy arrays, which :mod:`recrepro.runtime.checkpoints` stores exactly).
    """

    def __init__(self) -> None:
        self.per_user: dict[int, pd.DataFrame] = {}

    def state_dict(self) -> dict[int, dict[str, np.ndarray]]:
        return {int(a): {str(c): frame[c].to_numpy() for c in frame.columns} for a, frame in self.per_user.items()}

    def load_state_dict(self, state: Mapping[int, Mapping[str, np.ndarray]]) -> None:
        self.per_user = {int(a): pd.DataFrame(dict(cols)) for a, cols in state.items()}


def run_variant(*, split_dir: str | Path, variant: str, settings: dict[str, Any], seed: int,
                out_dir: str | Path, meta: dict[str, Any], evaluation: dict[str, Any],
                device: str = "cpu", benchmark_file: str | None = None,
                memory_budget_mb: float | None = None, checkpoint: str | Path | None = None,
                projection: str | Path | None = None) -> dict[str, Any]:
    """Train ``variant`` with ``settings``, evaluate every round, write the run record.

    ``projection``: where to write the embeddings figure's ``projection.parquet`` of the final
    model (:func:`_save_projection`); ``None`` (default): none is written -- one run of a tier is
    drawn, and a file in every committed record would cost a disk block each for nothing.

    ``checkpoint``: a file the model saves its state (and the per-round results so far) to
    after every round / epoch and resumes from when restarted (:mod:`recrepro.runtime.checkpoints`);
    deleted once the record is written.  A resumed run writes the same record, history and
    embeddings as an uninterrupted one, except wall-clock fields (``seconds``,
    ``seconds_per_round``, provenance times).
    """
    from recrepro.runtime.checkpoints import earlier_usage, remove_checkpoint
    from recrepro.papers.fedrap.variants import make_variant
    from recrepro.records import write_run_record
    from recrepro.evaluation.on_split import SplitData

    started = time.time()
    settings = dict(settings)
    pool = settings.pop("negative_pool", "train")
    # Items a training negative may not be: the training positives (He et al. 2017's NCF code,
    # the precedent the paper cites) or, as mtics/FedRAP's ``negative_items``, everything the user
    # ever interacted with -- the held-out validation/test items included, which a private per-user
    # item table learns to exploit (docs/deviations.md#fedrap-negative-pool).
    if pool not in NEGATIVE_POOL_PARTS:
        raise ValueError(f"fedrap: negative_pool must be one of {sorted(NEGATIVE_POOL_PARTS)}, not {pool!r}")
    split = SplitData(split_dir)
    train = split.csr(["train"])
    touched = split.csr(NEGATIVE_POOL_PARTS[pool])
    ties = evaluation.get("ties", "pessimistic")
    model = make_variant(settings, seed=seed, device=device, memory_budget_mb=memory_budget_mb)
    results = _RoundResults()

    def eval_fn(m, a):
        val, test = _eval_both(m, split, ties)
        results.per_user[a] = test.per_user
        return {"val_hr@10": val.overall["hr@10"], "val_ndcg@10": val.overall["ndcg@10"],
                "test_hr@10": test.overall["hr@10"], "test_ndcg@10": test.overall["ndcg@10"],
                "_counts": test.counts}

    resume = {} if checkpoint is None else {"checkpoint": Path(checkpoint), "checkpoint_state": results}
    diverged = None
    try:
        model.fit(train, touched=touched, eval_fn=eval_fn, **resume)
    except NonFiniteError as err:
        # A grid point whose training blows up is a result of the grid (the README's ML-100K flags
        # do on amazon-video): its record keeps the rounds before, marked, and it is never picked.
        # Any other run stops with the error.
        if parse_grid_run(variant) is None:
            raise
        diverged = {"round": len(model.history) + 1, "error": str(err)}
        print(f"WARNING: {variant} diverged in round {diverged['round']}: {err}; recorded as diverged "
              "(the grid never picks it)", file=sys.stderr)
    per_round_users = results.per_user  # read after fit: a restore replaces the dict
    hist = pd.DataFrame([{k: v for k, v in h.items() if not k.startswith("_")} for h in model.history],
                        columns=None if model.history else ["round"])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_history(out_dir, hist, "history.parquet")
    if "val_hr@10" in hist and hist["val_hr@10"].notna().any():
        best_val, overall, selection = _select_round(hist, settings, pool)
        if projection is not None:
            _save_projection(model, Path(projection))
        per_user = per_round_users[best_val][["user", "hr@10", "ndcg@10"]]
        counts = dict(model.history[best_val - 1].get("_counts", {}))
    else:
        # diverged before its first evaluated round: a record with no metric at all (never a made-up
        # one), which says so; the tuning table lists the point as diverged
        overall, per_user, counts = {}, pd.DataFrame({"user": pd.Series(dtype=np.int64)}), {}
        selection = {"selected_round": None, "selected_by": "validation hr@10", "rounds_trained": len(hist),
                     "round_cap": settings.get("round_cap"), "mode": settings.get("mode"), "negative_pool": pool}
        if projection is not None:
            _save_projection(None, Path(projection))
    if diverged is not None:
        selection["diverged"] = diverged
    counts.setdefault("n_users_skipped_no_targets", 0)
    write_run_record(
        out_dir, overall=overall, strata={}, per_user=per_user, counts=counts,
        meta={**split.describe(), **meta, "method": variant, **selection},
        config_slice={"variant": variant, "settings": settings, "evaluation": evaluation,
                      "memory_budget_mb": memory_budget_mb,
                      # how paper mode's dense steps ran, where any did (fused or eager: equal to rounding)
                      "dense_update": getattr(model, "dense_update_used", None)},
        split_manifest=split.dir / "manifest.json", seed=seed, device=device, started_at=started,
        wall_seconds=time.time() - started, benchmark_file=benchmark_file,
        earlier=earlier_usage(checkpoint))
    remove_checkpoint(checkpoint)  # the record is complete: a rerun must not resume a finished run
    return {"overall": overall, **selection}


def _select_round(hist: pd.DataFrame, settings: dict[str, Any], pool: str
                  ) -> tuple[int, dict[str, float], dict[str, Any]]:
    """The round validation selects, its test metrics, and the selection fields of the record's meta."""
    evaluated = hist.dropna(subset=["val_hr@10"])
    # validation selection: best val HR@10, later round wins a tie (as the code's >=)
    best_val = _last_best_round(evaluated, "val_hr@10")
    best_test = _last_best_round(evaluated, "test_hr@10")
    row = evaluated.set_index("round")
    overall = {"hr@10": float(row.loc[best_val, "test_hr@10"]), "ndcg@10": float(row.loc[best_val, "test_ndcg@10"])}
    selection = {
        "selected_round": best_val,
        "selected_by": "validation hr@10",
        "val_hr@10_at_selected": float(row.loc[best_val, "val_hr@10"]),
        "val_ndcg@10_at_selected": float(row.loc[best_val, "val_ndcg@10"]),
        "code_best_test_round": best_test,
        "code_best_test_hr@10": float(row.loc[best_test, "test_hr@10"]),
        "code_best_test_ndcg@10": float(row.loc[best_test, "test_ndcg@10"]),
        "code_best_test_val_hr@10": float(row.loc[best_test, "val_hr@10"]),
        "last_round_test_hr@10": float(evaluated["test_hr@10"].iloc[-1]),
        "rounds_trained": int(hist["round"].max()),
        "round_cap": settings.get("round_cap"),
        "mode": settings.get("mode"),
        "negative_pool": pool,
        "dp_noise": settings.get("dp_noise") if settings.get("dp_clip") or settings.get("dp_noise") else None,
        "dp_clip": settings.get("dp_clip"),
        "dp_epsilon": (float(hist["dp_epsilon"].dropna().iloc[-1])
                       if "dp_epsilon" in hist and hist["dp_epsilon"].notna().any() else None),
        "seconds_per_round": float(hist["seconds"].mean()) if "seconds" in hist else None,
    }
    return best_val, overall, selection


def embedding_projection(C: np.ndarray, D: np.ndarray | None, users: np.ndarray | None,
                         n_items: int = 300) -> pd.DataFrame:
    """PCA (not t-SNE: deterministic and fast) of item embeddings for the embeddings figure.

    ``n_items`` random items (fixed generator) of the global table ``C`` and of each private
    table ``D[k]`` (user ``users[k]``) are projected on the top-2 principal axes of their
    union. Returns columns ``table`` (``"C"`` or ``"D"``), ``user`` (-1 for C), ``pc1``, ``pc2``:
    the run record keeps this projection, never the tables themselves (they are model weights).
    """
    items = np.random.default_rng(0).choice(C.shape[0], min(n_items, C.shape[0]), replace=False)
    n_private = 0 if D is None else D.shape[0]
    parts = [C[items]] + [D[k][items] for k in range(n_private)]
    stacked = np.concatenate(parts).astype(np.float64)
    centred = stacked - stacked.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    proj = centred @ vt[:2].T
    table = np.repeat(np.array(["C"] + ["D"] * n_private), items.size)
    user = np.repeat(np.array([-1] + [int(u) for u in (users if users is not None else [])], dtype=np.int64),
                     items.size)
    return pd.DataFrame({"table": table, "user": user, "pc1": proj[:, 0], "pc2": proj[:, 1]})


def _save_projection(model, path: Path, n_users: int = 3) -> None:
    """``projection.parquet`` for the embeddings figure: :func:`embedding_projection` of the global
    table C and, for FedRAP, the private tables D⁽ⁱ⁾ of the first ``n_users`` users (empty for MF/NCF)."""
    C = getattr(model, "C", None)
    frame = pd.DataFrame({"table": pd.Series(dtype=str), "user": pd.Series(dtype=np.int64),
                          "pc1": pd.Series(dtype=float), "pc2": pd.Series(dtype=float)})
    if C is not None and hasattr(C, "cpu") and getattr(getattr(model, "config", None), "has_private_items", False):
        users = np.arange(min(n_users, model.n_users))
        frame = embedding_projection(C.detach().cpu().numpy(), model.private_items(users).cpu().numpy(), users)
    write_parquet(path, frame)


# ----------------------------------------------------------------------------- rule helpers
def rule_splits(config: Mapping[str, Any], tier: str) -> list[tuple[str, str, int]]:
    """(dataset, split, split_seed) of the tier's ``fedrap``-protocol data entries."""
    return protocol_splits(config, tier, "fedrap")


def rule_split_dir(config: Mapping[str, Any], tier: str, dataset: str, split: str) -> str:
    return protocol_split_dir(config, tier, "fedrap", dataset, split)


def rule_settings(config: dict[str, Any], tier: str, dataset: str, variant: str) -> dict[str, Any]:
    """Tier settings < per-dataset settings < the variant's own (method, mode, ...) < a tuning point.

    ``<grid>-gNN`` is point NN of a validation grid, a ``tuning.tuned`` name its grid's pick
    (:mod:`recrepro.papers.fedrap.tuning`).
    """
    from recrepro.papers.fedrap.tuning import grid_point, parse_grid_run, tuned_point, tuning_block

    base = {"negative_pool": config.get("fedrap", {}).get("negative_pool", "train")}
    point: dict[str, Any] = {}
    grid_run = parse_grid_run(variant)
    if grid_run is not None:
        point = grid_point(config, tier, *grid_run)
        variant = grid_run[0]
    elif variant in tuning_block(config, tier).get("tuned", {}):
        variant, point, _ = tuned_point(config, tier, dataset, variant)
    settings, conf = variant_settings(config, "fedrap", tier, dataset, variant, base)
    settings.update(point)
    cap = conf.get("round_cap")
    if cap:
        # a compute cap below the paper's 100 rounds: recorded with the run, shown in the table
        for key in ("rounds", "epochs"):
            if key in settings:
                settings[key] = min(int(settings[key]), int(cap))
        settings["round_cap"] = int(cap)
    return settings


def rule_runs(config: dict[str, Any], tier: str) -> list[str]:
    """metrics.json of every (dataset, variant, seed) run of the tier."""
    from recrepro.papers.fedrap.tuning import tuned_runs

    conf = config.get("fedrap", {}).get("tiers", {}).get(tier, {})
    splits = rule_splits(config, tier)
    return [f"results/{tier}/fedrap/runs/{d}/{s}/{v}/seed{seed}/metrics.json"
            for d, s, _ in splits
            for v in conf.get("variants", []) for seed in conf.get("seeds", [0])] + \
        tuned_runs(config, tier, splits, conf.get("seeds", [0]))


def rule_grid_runs(config: dict[str, Any], tier: str) -> list[str]:
    """metrics.json of the tier's validation-grid runs (:mod:`recrepro.papers.fedrap.tuning`)."""
    from recrepro.papers.fedrap.tuning import tuning_grid_runs

    return tuning_grid_runs(config, tier, rule_splits(config, tier))


def rule_embedding_run(config: dict[str, Any], tier: str) -> tuple[str, str] | None:
    """(dataset, projection.parquet) of the PCA figure: the first dataset's ``fedrap`` (else
    ``fedrap_code``) run with the tier's first seed; ``None`` if the tier has neither."""
    conf = config.get("fedrap", {}).get("tiers", {}).get(tier, {})
    variants = conf.get("variants", [])
    splits = rule_splits(config, tier)
    name = next((v for v in ("fedrap", "fedrap_code") if v in variants), None)
    if name is None or not splits:
        return None
    d, s, _ = splits[0]
    seed = conf.get("seeds", [0])[0]
    return d, f"results/{tier}/fedrap/runs/{d}/{s}/{name}/seed{seed}/projection.parquet"


# ----------------------------------------------------------------------------- tables
#: the parts whose items :func:`dataset_stats` checks against the training items
# ----------------------------------------------------------------------------- figure
MAIN_METHODS = ("fedrap", "fedrap_code", "fedrap_pool", "fedrap_code_pool", "fedmf", "pfedrec", "fedncf", "mf", "ncf")
#: Every FedRAP method in the legends' order (the paper's: FedRAP, federated baselines, centralised).
METHOD_ORDER = (*MAIN_METHODS, "fedncf_sgd", "fedrap_no", "fedrap_l2", "fedrap_fixed", "fedrap_sin", "fedrap_square",
                "fedrap_frac", "fedrap_code_no", "fedrap_code_l2", "fedrap_code_tanh", "fedrap_dp_low", "fedrap_dp",
                "fedrap_dp_high", "fedrap_dp_clip", "fedrap_dp_noise")
#: The order colours are handed out in (strongest first): a method has the same colour and marker in
#: every FedRAP figure.
COLOR_ORDER = ("fedrap", "fedmf", "pfedrec", "fedncf", "mf", "ncf", "fedrap_code", "fedrap_pool", "fedrap_code_pool",
               *METHOD_ORDER[len(MAIN_METHODS):])
#: The six panels of the curves figure per dataset: (history column, y label).
CURVE_PANELS = (("val_hr@10", "validation HR@10"), ("val_ndcg@10", "validation NDCG@10"),
                ("train_loss", "training loss (clients' mean)"), ("seconds", "wall s / round (training)"),
                ("c_sparsity", "sparsity of C (%), |C| ≤ 1e-4"), ("upload", "upload per round (MiB)"))


def _published_curve_points(dataset: str) -> dict[tuple[str, str], tuple[int, float]]:
    """``{(method, metric): (round, value)}`` of the published test values that name their round."""
    import re

    from recrepro.scorecard import expected_path, load_expected

    points = {}
    for entry in load_expected(expected_path("fedrap")).entries:
        found = re.search(r"round (\d+)", entry.source)
        if entry.published is not None and entry.dataset == dataset and found:
            points[(entry.method, entry.metric)] = (int(found.group(1)), float(entry.published))
    return points


def curves_figure(run_dirs: Sequence[str | Path], out_pdf: str, out_png: str, tier: str,
                  official_files: Sequence[str | Path] = ()) -> None:
    """Per dataset (two rows of three panels): validation HR@10 and NDCG@10, training loss and wall
    seconds per round, sparsity of C and upload size per round (mean over seeds); one legend.

    A method is drawn at its validation-grid pick (``<method>_tuned``, labelled "(tuned)") on a
    dataset where that run is recorded, else at its fixed flags (the README's).

    Published test values that name their round (the maintainer's logs in ``expected/fedrap.yaml``)
    are hollow markers at that round on the HR@10 / NDCG@10 panels.  The released code's own
    validation curves (``official_files``, ``benchmarks/official_fedrap.py``) are hollow squares in
    the colour of our run with the same flags, where that run is drawn.
    """
    from matplotlib.lines import Line2D

    from recrepro.reporting.plotting import (figure_legend, method_styles, new_figure, plot_published, published_handles,
                                   save_figure)

    runs = runs_frame(run_dirs)
    tuned = {f"{m}_tuned": m for m in MAIN_METHODS}
    if runs["method"].isin(MAIN_METHODS).any():
        runs = runs[runs["method"].isin([*MAIN_METHODS, *tuned])]
    runs = _prefer_tuned(runs, tuned)
    datasets = list(dict.fromkeys(runs["dataset"]))
    methods = [m for m in METHOD_ORDER if m in set(runs["method"])] + sorted(set(runs["method"]) - set(METHOD_ORDER))
    styles = method_styles([*COLOR_ORDER, *methods])
    fig, axes = new_figure(3, 2 * len(datasets), width=7.5, height=4.4 * len(datasets) + 0.6)
    axes = np.atleast_2d(axes)
    drawn_published = drawn_official = False
    for row, dataset in enumerate(datasets):
        panel_axes = list(axes[2 * row]) + list(axes[2 * row + 1])
        sub = runs[runs["dataset"] == dataset]
        for method in methods:
            hists = [read_history(d, "history.parquet") for d in sub[sub["method"] == method]["dir"]]
            if not hists:
                continue
            h = pd.concat(hists).groupby("round").mean(numeric_only=True).reset_index()
            drawn = sub[sub["method"] == method]["drawn"].iloc[0]
            kw = {**styles[method], "label": drawn if drawn == method else f"{method} (tuned)", "lw": 1.2,
                  "markersize": 3,
                  "markevery": max(1, len(h) // 10)}
            for ax, (column, _) in zip(panel_axes, CURVE_PANELS, strict=True):
                if column == "upload":
                    if "upload_bytes_sparse" in h and h["upload_bytes_sparse"].notna().any():
                        ax.plot(h["round"], h["upload_bytes_sparse"] / 2**20, **kw)
                        ax.plot(h["round"], h["upload_bytes_dense"] / 2**20, color=kw["color"], lw=0.8, ls=":")
                    continue
                if column not in h or not h[column].notna().any():
                    continue
                ax.plot(h["round"], (100 if column == "c_sparsity" else 1) * h[column], **kw)
        drawn_official |= _draw_official(panel_axes, official_files, dataset, set(sub["drawn"]), styles)
        for (method, metric), (rnd, value) in _published_curve_points(dataset).items():
            column = {"hr@10": 0, "ndcg@10": 1}.get(metric)
            if column is not None and method in styles:
                plot_published(panel_axes[column], rnd, value, color=styles[method]["color"])
                drawn_published = True
        for k, (ax, (_, ylabel)) in enumerate(zip(panel_axes, CURVE_PANELS, strict=True)):
            ax.set(xlabel="round (MF/NCF: epoch)", ylabel=ylabel)
            if k == 0:
                ax.set_title(dataset, loc="left", fontsize=9)
        panel_axes[5].set_title("sparse (solid) vs dense (dotted)", fontsize=7)
        panel_axes[3].set_title("shared machine: indicative", fontsize=7)
    extra = published_handles("maintainer's log, test HR/NDCG") if drawn_published else ([], [])
    if drawn_official:
        extra = ([*extra[0], Line2D([], [], color="0.3", marker="s", markerfacecolor="none", linestyle="none")],
                 [*extra[1], "released code, same flags (validation)"])
    figure_legend(fig, extra=extra if extra[0] else None, ncols=3)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=", ".join(datasets),
                caption="FedRAP vs baselines: learning curves, loss, time, sparsity of C, communication per round; "
                        "(tuned): at the validation-grid pick, else the released code's default flags for the dataset"
                        + ("; hollow: published test values at their round" if drawn_published else "")
                        + ("; hollow squares: the released code's run" if drawn_official else ""))


def _draw_official(panel_axes: Sequence[Any], official_files: Sequence[str | Path], dataset: str,
                   drawn: set[str], styles: Mapping[str, Mapping[str, Any]]) -> bool:
    """The released code's validation HR@10 / NDCG@10 on ``dataset`` as hollow squares (every tenth
    round) on the first two panels, for each curve whose flags match a run drawn there."""
    from recrepro.papers.fedrap.comparison import OFFICIAL_FLAGS, official_curves

    done = False
    for fields, official in official_curves(official_files):
        variant = OFFICIAL_FLAGS[fields["flags"]]
        if fields["dataset"] != dataset or variant not in drawn:
            continue
        step = 10 if len(official) >= 20 else 1  # a short curve (a run under way): every round
        every = official[(official["round"] - 1) % step == 0]
        for ax, column in zip(panel_axes[:2], ("val_hr@10", "val_ndcg@10"), strict=True):
            if column in every:
                ax.plot(every["round"], every[column], marker="s", linestyle="none", markersize=4,
                        markerfacecolor="none", color=styles[variant]["color"], gid="recrepro-published")
                done = True
    return done


def _prefer_tuned(runs: pd.DataFrame, tuned: Mapping[str, str]) -> pd.DataFrame:
    """Per dataset, a method's runs at its grid pick (``tuned``: run method -> method) replace its
    fixed-flag runs; ``method`` becomes the method's name and ``drawn`` the run's."""
    runs = runs.assign(drawn=runs["method"], method=runs["method"].map(lambda m: tuned.get(m, m)))
    has_tuned = runs[runs["drawn"] != runs["method"]].groupby("dataset")["method"].agg(set)
    keep = [row.drawn != row.method or row.method not in has_tuned.get(row.dataset, set())
            for row in runs.itertuples(index=False)]
    return runs[keep]


ABLATION_ORDER = ("fedrap", "fedrap_no", "fedrap_l2", "fedrap_fixed", "fedrap_sin", "fedrap_square", "fedrap_frac",
                  "fedrap_code", "fedrap_code_no", "fedrap_code_l2", "fedrap_code_tanh")


def ablation_figure(run_dirs: Sequence[str | Path], out_pdf: str, out_png: str, tier: str) -> None:
    """Top: test HR@10 of FedRAP, its ablations (FedRAP-No: μ = 0, FedRAP-L2) and curricula
    (mean ± sd over seeds), one bar per dataset.  Bottom: test HR@10 against the DP noise
    standard deviation per entry σ·clip, each point labelled with the ε (δ = 1e-5) of the run's Gaussian
    mechanism, and its clip where it is not 1 (the pre-release code's setting: σ 1, clip 0.1); FedRAP
    without DP as a dotted level, noise without a clip (no ε) as diamonds off the curve."""
    from recrepro.reporting.plotting import figure_legend, fixed_colors, new_figure, note_no_data, save_figure

    runs = runs_frame(run_dirs)
    names = [v for v in ABLATION_ORDER if v in set(runs["method"])]
    # only the datasets with a bar or a DP point: a legend entry with nothing drawn misleads
    shown = runs["method"].isin(names) | runs["dp_noise"].notna()
    datasets = [d for d in dict.fromkeys(runs["dataset"]) if d in set(runs.loc[shown, "dataset"])]
    colors = fixed_colors(datasets)  # bars and lines are datasets here
    fig, axes = new_figure(1, 2, width=6.5, height=6.0)
    ax_ab, ax_dp = np.ravel(axes)
    dp_drawn = False
    labelled: list[pd.DataFrame] = []  # each dataset's points on its noise curve
    width = 0.8 / max(len(datasets), 1)
    for j, dataset in enumerate(datasets):
        sub = runs[runs["dataset"] == dataset]
        agg = sub.groupby("method")["hr@10"].agg(["mean", "std"])
        xs = np.arange(len(names)) + j * width
        ax_ab.bar(xs, [agg["mean"].get(n, np.nan) for n in names], width,
                  yerr=[agg["std"].get(n, 0.0) if np.isfinite(agg["std"].get(n, np.nan)) else 0.0 for n in names],
                  color=colors[dataset], label=dataset, error_kw={"elinewidth": 0.8})
        dp = sub[sub["dp_noise"].notna() | (sub["method"] == "fedrap")].copy()
        # noise std per entry: σ·clip, or the std itself where nothing is clipped; no DP: 0
        dp["std"] = dp["dp_noise"].where(dp["dp_clip"].isna(), dp["dp_noise"] * dp["dp_clip"]).fillna(0.0)
        dp["clip"] = dp["dp_clip"].fillna(np.inf)  # no DP, or noise without a clip: nothing clipped
        if len(dp) > 1:
            g = (dp.groupby(["std", "clip"]).agg(hr=("hr@10", "mean"), eps=("dp_epsilon", "mean"))
                 .reset_index().sort_values(["std", "clip"], ascending=[True, False]))
            unclipped = ~np.isfinite(g["clip"]) & (g["std"] > 0)  # off the line: no privacy guarantee
            no_dp = ~np.isfinite(g["clip"]) & (g["std"] == 0)
            on_line = ~unclipped & ~no_dp
            # no DP is the reference level, not a point of the noise curve (it has no clip): a dotted
            # line, so the curve does not drop from it at σ·clip = 0 and the datasets' labels cannot collide
            for hr in g.loc[no_dp, "hr"]:
                ax_dp.axhline(hr, color=colors[dataset], linestyle=":", linewidth=1.0)
            ax_dp.plot(g.loc[on_line, "std"], g.loc[on_line, "hr"], marker="o", color=colors[dataset],
                       label=dataset)
            ax_dp.plot(g.loc[unclipped, "std"], g.loc[unclipped, "hr"], marker="D", linestyle="none",
                       color=colors[dataset])
            dp_drawn = True
            labelled.append(g[on_line])
    _label_dp_settings(ax_dp, labelled)
    ax_ab.set_xticks(np.arange(len(names)) + width * (len(datasets) - 1) / 2, names, rotation=30, ha="right")
    ax_ab.set(ylabel="test HR@10", title="(a) ablations and curricula (paper mode unless *_code*)")
    ax_ab.grid(False, axis="x")
    ax_dp.margins(x=0.06, y=0.1)  # room for the labels under and beside the outer points
    ax_dp.set(xlabel="noise std per entry σ·clip (clip 1 unless labelled; δ = 1e-5)", ylabel="test HR@10",
              title="(b) DP on the upload of C (dotted: no DP; ◆: noise, no clip, no ε)")
    if not names:
        note_no_data(ax_ab, "no run of FedRAP, its ablations or curricula is recorded")
    if not dp_drawn:
        note_no_data(ax_dp, "no DP run recorded (fedrap_dp_code, fedrap_dp_low, fedrap_dp, fedrap_dp_high,\n"
                            "fedrap_dp_clip, fedrap_dp_noise beside fedrap on the same dataset)")
    figure_legend(fig, title="dataset")
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=", ".join(datasets),
                caption="FedRAP ablations, curricula and differential privacy")


def _label_dp_settings(ax: Any, curves: Sequence[pd.DataFrame]) -> None:
    """One label per DP setting (noise std, clip) of the curves, however many datasets ran it: its ε
    (the datasets' values joined where they differ) and its clip where it is not 1, above the highest
    of its points; the clip without noise under the lowest, clear of the small stds' labels.  A label
    per dataset and point had stacked the datasets' identical labels onto each other."""
    if not curves:
        return
    points = pd.concat(curves, ignore_index=True)
    for (std, clip), part in points.groupby(["std", "clip"], sort=True):
        if std == 0:
            ax.annotate(f"clip {clip:g}, no noise", (std, part["hr"].min()), fontsize=7,
                        textcoords="offset points", xytext=(3, -9))
            continue
        eps = " / ".join(dict.fromkeys(f"{e:.3g}" for e in part["eps"]))
        ax.annotate(f"ε={eps}" + ("" if clip == 1 else f", clip {clip:g}"), (std, part["hr"].max()), fontsize=7,
                    textcoords="offset points", xytext=(3, 3))


def embeddings_figure(projection_path: str | Path, out_pdf: str, out_png: str, tier: str, dataset: str) -> None:
    """PCA of item embeddings: the global C against the private D⁽ⁱ⁾ of a few users, from the
    run's ``projection.parquet`` (:func:`embedding_projection`)."""
    from recrepro.reporting.plotting import figure_legend, new_figure, save_figure, scatter

    data = pd.read_parquet(projection_path)
    fig, ax = new_figure(1, 1, width=5.0, height=4.2)
    if not (data["table"] == "D").any():
        ax.text(0.5, 0.5, "no private item tables in this run", ha="center")
    else:
        groups = [("C (global)", data[data["table"] == "C"])]
        groups += [(f"D⁽ⁱ⁾, user {u}", part) for u, part in data[data["table"] == "D"].groupby("user", sort=True)]
        markers = ["o", "^", "s", "D", "v"]
        from recrepro.reporting.plotting import fixed_colors

        colors = fixed_colors([label for label, _ in groups])
        for k, (label, block) in enumerate(groups):
            scatter(ax, block["pc1"], block["pc2"], s=5, alpha=0.6, marker=markers[k % len(markers)], label=label,
                    color=colors[label])
        proj = data[["pc1", "pc2"]].to_numpy()
        # a few rows that a user trained hard (|D − C| grown large) would squash the rest: show the
        # central 98% of the points and say how many fall outside
        lo, hi = np.percentile(proj, 1, axis=0), np.percentile(proj, 99, axis=0)
        pad = 0.1 * (hi - lo)
        outside = int((((proj < lo - pad) | (proj > hi + pad)).any(1)).sum())
        ax.set_xlim(lo[0] - pad[0], hi[0] + pad[0])
        ax.set_ylim(lo[1] - pad[1], hi[1] + pad[1])
        n_items = int((data["table"] == "C").sum())
        ax.set(xlabel="PC 1", ylabel="PC 2")
        ax.set_title(f"{n_items} random items; {outside} points outside the view", fontsize=8)
        figure_legend(fig, ncols=4)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=dataset,
                caption="PCA of FedRAP's global item table C vs the private D⁽ⁱ⁾ (first seed, last round)")
