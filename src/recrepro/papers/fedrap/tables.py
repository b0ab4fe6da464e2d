"""FedRAP's tables: dataset statistics and the results table (the verbs ``stats`` and ``table``).

``stats``
    Dataset statistics (#ratings, #users, #items, sparsity, how cold the evaluation is) of split
    directories.
``table``
    HR@10 / NDCG@10 per dataset and method (mean ± sd over seeds) as Markdown and CSV, read from the
    run records (:func:`runs_frame`, also what the figures of :mod:`recrepro.papers.fedrap.figures`
    read).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recrepro.records import read_history

__all__ = ["COLD_PARTS", "dataset_stats", "results_table", "runs_frame", "table_markdown"]

COLD_PARTS = ("validation", "test", "negatives")


def dataset_stats(split_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """#ratings (all parts), #users, #items (with an interaction) and sparsity per split, and how cold
    the evaluation is: ``<part>_cold``, the share of the rows of each of :data:`COLD_PARTS` (the held-out
    validation and test items, the sampled evaluation negatives) whose item has no training interaction
    (NaN for a part the split lacks). A model can score such an item only from its initialisation and
    from being drawn as a negative (docs/deviations.md#fedrap-lastfm-held-out)."""
    from recrepro.evaluation.on_split import SplitData

    rows = []
    for d in split_dirs:
        split = SplitData(d)
        frame = pd.concat([split.part(p)[["user", "item"]] for p in ("train", "validation", "test")])
        n_r, n_u, n_i = len(frame), frame["user"].nunique(), frame["item"].nunique()
        trained = np.zeros(split.n_items, dtype=bool)
        trained[split.part("train")["item"].to_numpy()] = True
        cold = {f"{p}_cold": float(np.mean(~trained[split.part(p)["item"].to_numpy()]))
                if f"{p}.parquet" in split.manifest["files"] and len(split.part(p)) else np.nan
                for p in COLD_PARTS}
        rows.append({"dataset": split.manifest.get("dataset", Path(d).name), "ratings": n_r, "users": n_u,
                     "items": n_i, "sparsity": 1 - n_r / (n_u * n_i), **cold})
    return pd.DataFrame(rows)


def runs_frame(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    from recrepro.records import read_metrics

    rows = []
    for d in run_dirs:
        m = read_metrics(Path(d))
        sparsity = _c_sparsity(Path(d), m.get("selected_round"))
        rows.append({"dataset": m["dataset"], "method": m["method"], "seed": m["seed"], **sparsity,
                     "hr@10": m["overall"]["hr@10"], "ndcg@10": m["overall"]["ndcg@10"],
                     "selected_round": m.get("selected_round"),
                     "code_best_test_round": m.get("code_best_test_round"),
                     "code_best_test_hr@10": m.get("code_best_test_hr@10"),
                     "code_best_test_ndcg@10": m.get("code_best_test_ndcg@10"),
                     "seconds_per_round": m.get("seconds_per_round"),
                     "rounds_trained": m.get("rounds_trained"), "dp_noise": m.get("dp_noise"),
                     "dp_clip": _dp_clip(Path(d), m), "dp_epsilon": m.get("dp_epsilon"), "mode": m.get("mode"),
                     "dir": str(d)})
    return pd.DataFrame(rows)


def _dp_clip(run_dir: Path, metrics: Mapping[str, Any]) -> float | None:
    """The DP clip norm of a run (None without DP, or with noise and no clip): its record's, else the
    settings in its provenance (records written before the metrics carried it)."""
    if metrics.get("dp_noise") is None:
        return None
    if "dp_clip" in metrics:  # null: noise without a clip
        return None if metrics["dp_clip"] is None else float(metrics["dp_clip"])
    prov = run_dir / "provenance.json"
    settings = (json.loads(prov.read_text()).get("config") or {}).get("settings") or {} if prov.is_file() else {}
    if settings.get("dp_clip") is None:  # such records predate noise without a clip
        raise ValueError(f"{run_dir}: a DP run whose record and provenance name no dp_clip")
    return float(settings["dp_clip"])


def _c_sparsity(run_dir: Path, selected_round: Any) -> dict[str, float]:
    """The share of entries of the server's item table C with |C| ≤ 1e-4 (the released code's sparsity)
    at the selected round and the last, from the run's history (NaN where the method has no C)."""
    history = run_dir / "history.parquet"
    if not history.is_file():
        return {"c_sparsity_selected": np.nan, "c_sparsity_last": np.nan}
    h = read_history(run_dir, "history.parquet")
    if "c_sparsity" not in h or not h["c_sparsity"].notna().any():
        return {"c_sparsity_selected": np.nan, "c_sparsity_last": np.nan}
    at = h.loc[h["round"] == selected_round, "c_sparsity"]
    return {"c_sparsity_selected": float(at.iloc[0]) if len(at) else np.nan,
            "c_sparsity_last": float(h["c_sparsity"].dropna().iloc[-1])}


def results_table(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    runs = runs_frame(run_dirs)
    agg = runs.groupby(["dataset", "method"], sort=False).agg(
        seeds=("seed", "count"), hr_mean=("hr@10", "mean"), hr_sd=("hr@10", "std"),
        ndcg_mean=("ndcg@10", "mean"), ndcg_sd=("ndcg@10", "std"),
        selected_round=("selected_round", "mean"),
        code_best_test_hr=("code_best_test_hr@10", "mean"),
        code_best_test_ndcg=("code_best_test_ndcg@10", "mean"),
        code_best_test_round=("code_best_test_round", "mean"),
        seconds_per_round=("seconds_per_round", "mean"),
        rounds=("rounds_trained", "max"),
        c_sparsity_selected=("c_sparsity_selected", "mean"),
        c_sparsity_last=("c_sparsity_last", "mean")).reset_index()
    return agg


def _fmt(mean: float, sd: float) -> str:
    return f"{mean:.4f}" if not np.isfinite(sd) else f"{mean:.4f} ± {sd:.4f}"


def table_markdown(agg: pd.DataFrame, stats: pd.DataFrame | None, tier: str, comparison: str = "") -> str:
    """``tables/results.md``: the comparison block (:mod:`recrepro.papers.fedrap.comparison`) first, then
    every run of the tier, then the dataset statistics."""
    lines = [f"# FedRAP reproduction — results ({tier} tier)", ""]
    if comparison:
        lines += [comparison, "## Every run", ""]
    lines += ["Test HR@10 / NDCG@10 (1 positive + 99 fixed negatives, ties pessimistic) at the round with the",
             "best **validation** HR@10, mean ± sd over seeds. The last columns give the released code's rule",
             "(round with the best **test** HR@10) for comparison: *test-selected, optimistic*.", ""]
    if "rounds" in agg and agg["rounds"].notna().any():
        lines += [f"Rounds trained (MF/NCF: epochs): {', '.join(sorted({str(int(x)) for x in agg['rounds'].dropna()}))}"
                  " (column `rounds`; fewer than the paper's 100 where `fedrap.tiers.<tier>.round_cap` is set).", ""]
    lines += ["Column `C ≤ 1e-4`: the share of the server's item table C with |C| ≤ 1e-4 (the released code's "
              "sparsity measure) at the selected round, mean over seeds; blank for a method without C.", ""]
    lines += ["| dataset | method | seeds | rounds | HR@10 | NDCG@10 | sel. round | code best-test HR@10 | NDCG@10 | round "
              "| s/round | C ≤ 1e-4 |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in agg.itertuples():
        rounds = "" if "rounds" not in agg or not np.isfinite(r.rounds) else f"{r.rounds:.0f}"
        sparse = getattr(r, "c_sparsity_selected", np.nan)
        sparse = f"{100 * sparse:.2f} %" if np.isfinite(sparse) else ""
        lines.append(f"| {r.dataset} | {r.method} | {r.seeds} | {rounds} | {_fmt(r.hr_mean, r.hr_sd)} | "
                     f"{_fmt(r.ndcg_mean, r.ndcg_sd)} | {r.selected_round:.0f} | {r.code_best_test_hr:.4f} | "
                     f"{r.code_best_test_ndcg:.4f} | {r.code_best_test_round:.0f} | {r.seconds_per_round:.2f} | {sparse} |")
    if stats is not None and len(stats):
        lines += ["", "## Dataset statistics (after preprocessing; poster Table 1)", "",
                  "Cold columns: the share of the held-out validation and test items, and of the sampled evaluation "
                  "negatives, that never occur in training (no model learns them from a positive; "
                  "docs/deviations.md#fedrap-lastfm-held-out).",
                  "", "| dataset | #ratings | #users | #items | sparsity | cold: validation | cold: test | cold: negatives |",
                  "|---|---|---|---|---|---|---|---|"]
        for s in stats.itertuples():
            cold = " | ".join(_share(getattr(s, f"{p}_cold", np.nan)) for p in COLD_PARTS)
            lines.append(f"| {s.dataset} | {s.ratings:,} | {s.users:,} | {s.items:,} | {100 * s.sparsity:.2f}% | {cold} |")
    return "\n".join(lines) + "\n"


def _share(value: float) -> str:
    """A share as a percentage with one decimal; blank when unknown (a statistics file from before the column)."""
    return f"{100 * value:.1f} %" if value is not None and np.isfinite(value) else ""
