"""λOpt (Chen et al., KDD 2019): the results table and its paired tests, from the run records.

``recrepro lambdaopt table`` (:mod:`recrepro.papers.lambdaopt.cli`, called by ``workflow/rules/lambdaopt.smk``):
the results table (method × metric, mean ± sd over seeds) as Markdown and CSV, with the ordering of the
four granularities, how each run stopped and the paired tests of -DUI vs λFix (:func:`paired_tests`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.papers.lambdaopt.run import TABLE_METRICS

__all__ = ["METHOD_ORDER", "TABLE_METRICS", "granularity_order", "paired_tests", "results_table", "stopping_summary",
           "table_markdown"]


#: The methods in the paper's table order (rows; the groups figure's bars).
METHOD_ORDER = ["sgda", "amf", "neumf", "lambdafix", "lambdaopt_d", "lambdaopt_du", "lambdaopt_di", "lambdaopt_dui", "lambdaopt_dui_code"]


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
