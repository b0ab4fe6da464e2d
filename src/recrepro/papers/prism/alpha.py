"""The α sweep's table (Fig. 5, claim P5): PRISM's strength α at the learning rate Table 1's PRISM pick chose.

Loveland et al. (§5.2.2, Fig. 5) scale PRISM's initial norms by its strength α (the initial row
norms are α·ln(deg + 2), users and items) and read the stratified test NDCG@20 along α. The paper
tunes the learning rate per cell over {0.1, 0.01, 0.001} and does not say Fig. 5 uses another, so
the sweep runs every α at the learning rate of Table 1's PRISM pick of the same row (MF + DirectAU;
``rules.alpha_lr``). This module writes one row per (α, seed), every seed that ran, so that the
claim's trend test pairs the seeds (Fig. 5 draws the tier's figure seeds of the same runs).

The paper's numbers for P5 (§5.2.2: the unpopular/popular NDCG@20 ratio +75.98 %, overall +1.7 %) are
those of "the best performing model (selected by validation NDCG@20)" along α. :func:`alpha_sweep_table`
makes that pick the way Table 1 picks its learning rates (the highest mean validation NDCG@20 over the
selection's seeds, α = 1 included) and copies the picked α's runs, every seed, as
``mf_directau_tunedalpha`` for the claim's checks against tuned weight decay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import shutil
from pathlib import Path

import pandas as pd

from recrepro.io import write_text
from recrepro.papers.prism.tables import copy_as, load_prism_runs

__all__ = ["ALPHA_SWEEP_COLUMNS", "TUNED_ALPHA", "alpha_sweep_table", "pick_alpha"]

#: The alias of the α picked on validation (its runs, every seed), beside Table 1's ``mf_directau_tunedwd``.
TUNED_ALPHA = "mf_directau_tunedalpha"

#: The table's metric columns: test NDCG@20 overall and per popularity stratum (the strata are additive
#: shares of the overall value, as the run records give them), and the epochs to the best validation epoch.
ALPHA_SWEEP_COLUMNS = ("ndcg@20", "ndcg@20[popular]", "ndcg@20[neutral]", "ndcg@20[unpopular]", "epochs_to_best",
                       "val_ndcg@20")


def pick_alpha(table: pd.DataFrame, alphas: Mapping[str, str], seeds: Sequence[int]) -> tuple[str | None, int]:
    """The α whose runs have the highest mean validation NDCG@20 over ``seeds`` (the selection's), and how
    many of the sweep's α had a record on every one of them; ``(None, 0)`` when none had.

    Only α that ran on every selection seed compete (a mean over fewer seeds is another quantity), and
    never one that diverged on any of them (as Table 1's points: its best score predates the blow-up);
    ties go to the larger α, the paper's default strength."""
    complete = {}
    for alpha, method in alphas.items():
        part = table[(table["run"] == method) & table["seed"].isin(list(seeds))]
        if seeds and set(part["seed"]) == set(seeds) and part["val_ndcg@20"].notna().all() \
                and not part["diverged"].astype(bool).any():
            complete[alpha] = float(part["val_ndcg@20"].mean())
    if not complete:
        return None, 0
    best = max(complete, key=lambda a: (complete[a], float(a)))
    return best, len(complete)


def alpha_sweep_table(run_dirs: Sequence[Path], alphas: Mapping[str, str], out_md: Path, out_csv: Path, *,
                      tier: str, dataset: str, series: str, lr: float, tuned_root: Path | None = None,
                      seeds: Sequence[int] = ()) -> pd.DataFrame:
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
    tuned_root:
        Where the α picked on validation (:func:`pick_alpha` over ``seeds``) is copied as
        :data:`TUNED_ALPHA`, every seed it ran; the folder is emptied first (it holds one pick only).
    seeds:
        The selection's seeds (Table 1's), on which α is picked.
    """
    runs = load_prism_runs(run_dirs)
    by_method = {method: float(alpha) for alpha, method in alphas.items()}
    rows = []
    for _, run in runs[runs["method"].isin(list(by_method))].iterrows() if len(runs) else []:
        rows.append({"dataset": dataset, "method": series, "alpha": by_method[run["method"]], "lr": lr,
                     "seed": int(run["seed"]), "run": run["method"], "ndcg@20": run["ndcg"],
                     **{f"ndcg@20[{s}]": run.get(f"ndcg_{s}") for s in ("popular", "neutral", "unpopular")},
                     "epochs_to_best": run["epochs_to_best"], "val_ndcg@20": run["best_val_ndcg"],
                     "diverged": bool(run.get("diverged", False)), "run_dir": run["run_dir"]})
    table = pd.DataFrame(rows, columns=["dataset", "method", "alpha", "lr", "seed", "run", *ALPHA_SWEEP_COLUMNS,
                                        "diverged", "run_dir"])
    table = table.sort_values(["alpha", "seed"], kind="stable").reset_index(drop=True)
    picked, n_complete = pick_alpha(table, alphas, seeds)
    if tuned_root is not None:
        _write_tuned_alpha(table, alphas, picked, n_complete, Path(tuned_root))
    table = table.drop(columns="run_dir")
    write_text(out_csv, table.to_csv(index=False, lineterminator="\n"))
    write_text(out_md, _markdown(table, alphas, tier=tier, dataset=dataset, lr=lr, picked=picked, seeds=seeds))
    return table


def _write_tuned_alpha(table: pd.DataFrame, alphas: Mapping[str, str], picked: str | None, n_complete: int,
                       tuned_root: Path) -> None:
    # the rule owns the folder: an alias of an earlier pick must not outlive it (as Table 1's)
    if tuned_root.exists():
        shutil.rmtree(tuned_root)
    tuned_root.mkdir(parents=True)
    if picked is None:
        return
    budget = f"α picked over {n_complete} of {len(alphas)} strengths" if n_complete < len(alphas) else ""
    for _, row in table[table["run"] == alphas[picked]].iterrows():
        copy_as(Path(row["run_dir"]), tuned_root / TUNED_ALPHA / f"seed{row['seed']}", TUNED_ALPHA, row["run"],
                budget=budget)


def _markdown(table: pd.DataFrame, alphas: Mapping[str, str], *, tier: str, dataset: str, lr: float,
              picked: str | None, seeds: Sequence[int]) -> str:
    on = ("seed " + ", ".join(str(s) for s in seeds)) if seeds else "the selection's seeds"
    pick_text = (f"The α picked on validation ({on}; the paper's \"best performing model (selected by validation "
                 f"NDCG@20)\"): **{float(picked):g}** (`{TUNED_ALPHA}` in the scorecard)." if picked is not None
                 else f"No α has run on {on} yet, so none is picked.")
    lines = [f"# PRISM α sweep, {dataset} ({tier} tier)", "",
             f"MF + DirectAU + PRISM, no weight decay, lr {lr:g} (the learning rate of Table 1's PRISM pick); test "
             "NDCG@20 overall and per popularity stratum (additive shares), the unpopular/popular ratio of those "
             "shares, and the best validation NDCG@20, mean ± sd over the seeds that ran. "
             "Fig. 5 draws the tier's figure seeds of these runs; claim P5 tests the trend over every seed (`alpha_sweep_"
             f"{dataset}.csv`, one row per α and seed). {pick_text}", "",
             "| α | run | seeds | NDCG@20 | popular | neutral | unpopular | unpopular / popular | epochs to best "
             "| validation NDCG@20 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for alpha, method in alphas.items():
        part = table[table["run"] == method]
        ratio = pd.to_numeric(part["ndcg@20[unpopular]"], errors="coerce") \
            / pd.to_numeric(part["ndcg@20[popular]"], errors="coerce")
        cells = [_mean_sd(part[c]) for c in ALPHA_SWEEP_COLUMNS[:4]] + [_mean_sd(ratio)] \
            + [_mean_sd(part[c]) for c in ALPHA_SWEEP_COLUMNS[4:]]
        ran = ", ".join(f"{s} (diverged)" if d else str(s) for s, d in zip(part["seed"], part["diverged"])) \
            or "not run"
        mark = " (picked)" if alpha == picked else ""
        lines.append(f"| {float(alpha):g}{mark} | `{method}` | {ran} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _mean_sd(values: pd.Series) -> str:
    values = pd.to_numeric(values, errors="coerce").dropna()
    if values.empty:
        return "–"
    if len(values) == 1:
        return f"{values.iloc[0]:.4g}"
    return f"{values.mean():.4g} ± {values.std(ddof=1):.2g}"
