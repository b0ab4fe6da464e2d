"""The α sweep's table (Fig. 5, claim P5): PRISM's strength α at the learning rate Table 1's PRISM pick chose.

Loveland et al. (§5.2.2, Fig. 5) scale PRISM's initial norms by its strength α (the initial row
norms are α·ln(deg + 2), users and items) and read the stratified test NDCG@20 along α. The paper
tunes the learning rate per cell over {0.1, 0.01, 0.001} and does not say Fig. 5 uses another, so
the sweep runs every α at the learning rate of Table 1's PRISM pick of the same row (MF + DirectAU;
``rules.alpha_lr``). This module writes one row per (α, seed), every seed that ran, so that the
claim's trend test pairs the seeds, where Fig. 5 draws the first seed only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from recrepro.io import write_text
from recrepro.papers.prism.tables import load_prism_runs

__all__ = ["ALPHA_SWEEP_COLUMNS", "alpha_sweep_table"]

#: The table's metric columns: test NDCG@20 overall and per popularity stratum (the strata are additive
#: shares of the overall value, as the run records give them), and the epochs to the best validation epoch.
ALPHA_SWEEP_COLUMNS = ("ndcg@20", "ndcg@20[popular]", "ndcg@20[neutral]", "ndcg@20[unpopular]", "epochs_to_best")


def alpha_sweep_table(run_dirs: Sequence[Path], alphas: Mapping[str, str], out_md: Path, out_csv: Path, *,
                      tier: str, dataset: str, series: str, lr: float) -> pd.DataFrame:
    """Write the α sweep's rows (CSV) and their means per α (Markdown); return the rows.

    Parameters
    ----------
    run_dirs:
        The sweep's run records (every α, every seed that ran).
    alphas:
        α (as text, ``"0.25"``) -> the run name at that α (``mf_directau_prism_a025_lr1em2``).
    series:
        The name the rows carry in ``method`` (``mf_directau_prism``): one configuration along α, so that a
        claim's ``monotone`` check reads it ``along: alpha``; the run each row comes from is in ``run``.
    lr:
        The learning rate the sweep ran at (Table 1's PRISM pick's, or the tier's without a search).
    """
    runs = load_prism_runs(run_dirs)
    by_method = {method: float(alpha) for alpha, method in alphas.items()}
    rows = []
    for _, run in runs[runs["method"].isin(list(by_method))].iterrows() if len(runs) else []:
        rows.append({"dataset": dataset, "method": series, "alpha": by_method[run["method"]], "lr": lr,
                     "seed": int(run["seed"]), "run": run["method"], "ndcg@20": run["ndcg"],
                     **{f"ndcg@20[{s}]": run.get(f"ndcg_{s}") for s in ("popular", "neutral", "unpopular")},
                     "epochs_to_best": run["epochs_to_best"]})
    table = pd.DataFrame(rows, columns=["dataset", "method", "alpha", "lr", "seed", "run", *ALPHA_SWEEP_COLUMNS])
    table = table.sort_values(["alpha", "seed"], kind="stable").reset_index(drop=True)
    write_text(out_csv, table.to_csv(index=False, lineterminator="\n"))
    write_text(out_md, _markdown(table, alphas, tier=tier, dataset=dataset, lr=lr))
    return table


def _markdown(table: pd.DataFrame, alphas: Mapping[str, str], *, tier: str, dataset: str, lr: float) -> str:
    lines = [f"# PRISM α sweep, {dataset} ({tier} tier)", "",
             f"MF + DirectAU + PRISM, no weight decay, lr {lr:g} (the learning rate of Table 1's PRISM pick); test "
             "NDCG@20 overall and per popularity stratum (additive shares), mean ± sd over the seeds that ran. "
             "Fig. 5 draws the first seed; claim P5 tests the trend over every seed (`alpha_sweep_"
             f"{dataset}.csv`, one row per α and seed).", "",
             "| α | run | seeds | NDCG@20 | popular | neutral | unpopular | epochs to best |",
             "|---|---|---|---|---|---|---|---|"]
    for alpha, method in alphas.items():
        part = table[table["run"] == method]
        cells = [_mean_sd(part[c]) for c in ALPHA_SWEEP_COLUMNS]
        seeds = ", ".join(str(s) for s in part["seed"]) or "not run"
        lines.append(f"| {float(alpha):g} | `{method}` | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _mean_sd(values: pd.Series) -> str:
    values = pd.to_numeric(values, errors="coerce").dropna()
    if values.empty:
        return "–"
    if len(values) == 1:
        return f"{values.iloc[0]:.4g}"
    return f"{values.mean():.4g} ± {values.std(ddof=1):.2g}"
