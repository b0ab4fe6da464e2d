"""FedRAP's comparison table (the paper's Table 2 layout): methods × datasets, one block per negative pool.

Rows are methods, columns datasets × (HR@10, NDCG@10) as mean ± sd over seeds; the best federated
method of each column is in bold.  One block per training-negative pool: ``train`` (leak-free, the
default) and ``all_interactions`` (the released code's pool, which never draws a user's held-out items:
docs/deviations.md#fedrap-negative-pool).  Under the table, paired t-tests over seeds of each FedRAP
row against each baseline row of the same block and tuning (tuned against tuned, default flags
against default flags).  The tuned rows are the validation-grid picks
(:mod:`recrepro.papers.fedrap.tuning`); their pick is named in the row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["COMPARISON_ROWS", "COMPARISON_DATASETS", "best_baseline_rows", "comparison_frame", "comparison_markdown",
           "official_agreement", "official_curve_files", "official_curves", "official_figure", "official_markdown",
           "paired_rows"]

#: columns, in the poster's order (any other dataset after them); TaFeng stays out (docs/deviations.md#fedrap-tafeng-qb)
COMPARISON_DATASETS = ("ml-100k", "amazon-video", "hetrec2011-lastfm-2k")
#: left out of the comparison: the poster's rows cannot be rebuilt from the public files
EXCLUDED_DATASETS = ("tafeng", "qb-article")
#: (pool, tuning, method, label, federated, proposed)
COMPARISON_ROWS: tuple[tuple[str, str, str, str, bool, bool], ...] = (
    ("train", "tuned", "fedrap_tuned", "FedRAP (paper objective)", True, True),
    ("train", "tuned", "fedrap_code_tuned", "FedRAP (released code)", True, True),
    ("train", "tuned", "fedmf_tuned", "FedMF", True, False),
    ("train", "tuned", "pfedrec_tuned", "PFedRec", True, False),
    ("train", "tuned", "fedncf_tuned", "FedNCF", True, False),
    ("train", "readme", "fedrap", "FedRAP (paper objective)", True, True),
    ("train", "readme", "fedrap_code", "FedRAP (released code)", True, True),
    ("train", "readme", "fedmf", "FedMF", True, False),
    ("train", "readme", "pfedrec", "PFedRec", True, False),
    ("train", "readme", "fedncf", "FedNCF", True, False),
    ("train", "central", "mf", "MF (centralised)", False, False),
    ("train", "central", "ncf", "NCF (centralised)", False, False),
    ("all_interactions", "tuned", "fedrap_pool_tuned", "FedRAP (paper objective)", True, True),
    ("all_interactions", "tuned", "fedrap_code_pool_tuned", "FedRAP (released code)", True, True),
    ("all_interactions", "tuned", "fedmf_pool_tuned", "FedMF", True, False),
    ("all_interactions", "tuned", "pfedrec_pool_tuned", "PFedRec", True, False),
    ("all_interactions", "tuned", "fedncf_pool_tuned", "FedNCF", True, False),
    ("all_interactions", "readme", "fedrap_pool", "FedRAP (paper objective)", True, True),
    ("all_interactions", "readme", "fedrap_code_pool", "FedRAP (released code)", True, True),
    ("all_interactions", "ml1m", "fedrap_code_pool_ml1m", "FedRAP (released code)", True, True),
    ("all_interactions", "readme", "fedmf_pool", "FedMF", True, False),
    ("all_interactions", "readme", "pfedrec_pool", "PFedRec", True, False),
    ("all_interactions", "readme", "fedncf_pool", "FedNCF", True, False),
)
POOL_TITLES = {"train": "training negatives avoid the training positives only (leak-free, default)",
               "all_interactions": "the released code's pool, which never draws a user's held-out items as training negatives (a leak)"}
TUNING_TITLES = {"tuned": "tuned on validation", "readme": "default flags", "ml1m": "maintainer's ML-1M log flags",
                 "central": "centralised upper bound"}
METRICS = ("hr@10", "ndcg@10")


def comparison_frame(run_dirs: Sequence[str | Path], grid: bool = False) -> pd.DataFrame:
    """One row per run record: dataset, method, seed, HR@10, NDCG@10 (test, at the validation-selected round).

    ``grid``: the records are validation-grid runs, whose diverged points have no test metrics (NaN
    there); any other record without them is an error, never a blank cell."""
    from recrepro.records import read_metrics

    rows = []
    for d in run_dirs:
        m = read_metrics(Path(d))
        overall = m.get("overall") or {}     # a diverged grid record has no test metrics
        if not grid and not {"hr@10", "ndcg@10"} <= set(overall):
            raise ValueError(f"{d}: the record has no test hr@10 / ndcg@10")
        rows.append({"dataset": m["dataset"], "method": m["method"], "seed": int(m["seed"]),
                     "hr@10": float(overall.get("hr@10", math.nan)), "ndcg@10": float(overall.get("ndcg@10", math.nan))})
    return pd.DataFrame(rows, columns=["dataset", "method", "seed", "hr@10", "ndcg@10"])


def _cell(values: np.ndarray) -> str:
    if values.size == 0:
        return "—"
    if values.size == 1:
        return f"{values[0]:.4f} (1 seed)"
    return f"{values.mean():.4f} ± {values.std(ddof=1):.4f}"


def _values(frame: pd.DataFrame, dataset: str, method: str, metric: str) -> dict[int, float]:
    sub = frame[(frame["dataset"] == dataset) & (frame["method"] == method)]
    return dict(zip(sub["seed"].astype(int), sub[metric].astype(float)))


def paired_rows(frame: pd.DataFrame, datasets: Sequence[str]) -> pd.DataFrame:
    """Paired t-tests over seeds, HR@10 and NDCG@10: each FedRAP row against each federated baseline
    row of the same pool and tuning (seeds both ran; at least 2)."""
    out = []
    for pool in ("train", "all_interactions"):
        for tuning in ("tuned", "readme"):
            block = [r for r in COMPARISON_ROWS if r[0] == pool and r[1] == tuning]
            for _, _, ours, ours_label, _, proposed in block:
                if not proposed:
                    continue
                for _, _, base, base_label, federated, base_proposed in block:
                    if base_proposed or not federated:
                        continue
                    for dataset in datasets:
                        for metric in METRICS:
                            a, b = _values(frame, dataset, ours, metric), _values(frame, dataset, base, metric)
                            seeds = sorted(set(a) & set(b))
                            if len(seeds) < 2:
                                continue
                            x = np.array([a[s] for s in seeds])
                            y = np.array([b[s] for s in seeds])
                            p = _paired_p(x, y)
                            out.append({"pool": pool, "tuning": tuning, "dataset": dataset, "metric": metric,
                                        "method": ours, "baseline": base, "n_seeds": len(seeds),
                                        "mean_diff": float((x - y).mean()), "p_value": p})
    return pd.DataFrame(out, columns=["pool", "tuning", "dataset", "metric", "method", "baseline", "n_seeds",
                                      "mean_diff", "p_value"])


def _paired_p(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided paired t-test p-value; NaN where the differences are constant (the test is undefined)."""
    from scipy import stats

    diff = x - y
    return math.nan if np.allclose(diff, diff[0]) else float(stats.ttest_rel(x, y).pvalue)


#: significance level of the headline's verdict (two-sided paired t-test over seeds)
HEADLINE_ALPHA = 0.05


def best_baseline_rows(frame: pd.DataFrame, datasets: Sequence[str], metric: str = "hr@10") -> pd.DataFrame:
    """The headline: each tuned FedRAP row against the best tuned federated baseline of its pool and dataset.

    The best baseline is the one with the highest mean ``metric`` over its seeds (the comparison's bold
    cell when FedRAP is not it).  The verdict reads the paired t-test over the seeds both ran:
    ``FedRAP ahead`` / ``baseline ahead`` at p < :data:`HEADLINE_ALPHA`, ``no significant difference``
    above it, ``too few seeds to test`` with fewer than 2 common seeds (the means are still shown)."""
    out = []
    for pool in ("train", "all_interactions"):
        block = [r for r in COMPARISON_ROWS if r[0] == pool and r[1] == "tuned"]
        for dataset in datasets:
            means = {r[2]: (np.mean(list(v.values())), v) for r in block if not r[5] and r[4]
                     if (v := _values(frame, dataset, r[2], metric))}
            if not means:
                continue
            base = max(means, key=lambda m: means[m][0])
            base_mean, base_values = means[base]
            for _, _, ours, _, _, proposed in block:
                ours_values = _values(frame, dataset, ours, metric)
                if not proposed or not ours_values:
                    continue
                seeds = sorted(set(ours_values) & set(base_values))
                p = math.nan
                if len(seeds) >= 2:
                    p = _paired_p(np.array([ours_values[s] for s in seeds]), np.array([base_values[s] for s in seeds]))
                ours_mean = float(np.mean(list(ours_values.values())))
                if len(seeds) < 2:
                    verdict = "too few seeds to test"
                elif math.isnan(p) or p >= HEADLINE_ALPHA:
                    verdict = "no significant difference"
                else:
                    verdict = "FedRAP ahead" if ours_mean > base_mean else "baseline ahead"
                out.append({"pool": pool, "dataset": dataset, "metric": metric, "method": ours,
                            "method_mean": ours_mean, "method_seeds": len(ours_values), "baseline": base,
                            "baseline_mean": float(base_mean), "baseline_seeds": len(base_values),
                            "n_paired": len(seeds), "p_value": p, "verdict": verdict})
    return pd.DataFrame(out, columns=["pool", "dataset", "metric", "method", "method_mean", "method_seeds", "baseline",
                                      "baseline_mean", "baseline_seeds", "n_paired", "p_value", "verdict"])


def _headline_markdown(frame: pd.DataFrame, datasets: Sequence[str]) -> list[str]:
    rows = best_baseline_rows(frame, datasets)
    if not len(rows):
        return []
    lines = ["### FedRAP against the best federated baseline (tuned rows, HR@10)", "",
             "Each tuned FedRAP row against the tuned federated baseline with the highest mean test HR@10 in the "
             "same pool and dataset; difference of the means, and the paired t-test over the seeds both ran "
             f"(verdict at p < {HEADLINE_ALPHA:g}; fewer than 2 common seeds: not tested).", "",
             "| pool | dataset | FedRAP row | HR@10 | best baseline | HR@10 | difference | seeds paired | p | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows.itertuples():
        p = "—" if r.n_paired < 2 else ("undefined" if math.isnan(r.p_value) else f"{r.p_value:.3g}")
        lines.append(f"| {r.pool} | {r.dataset} | `{r.method}` | {r.method_mean:.4f} ({r.method_seeds}) | "
                     f"`{r.baseline}` | {r.baseline_mean:.4f} ({r.baseline_seeds}) | "
                     f"{r.method_mean - r.baseline_mean:+.4f} | {r.n_paired} | {p} | {r.verdict} |")
    return lines + [""]


def _grid_progress(frame: pd.DataFrame, grid: str, n_points: int | None, datasets: Sequence[str]) -> str:
    """``grid fedncf: amazon-video 2 of 4 points, ml-100k 0 of 4`` — how far a missing row's grid got."""
    from recrepro.papers.fedrap.tuning import parse_grid_run

    done = {d: {parsed[1] for m in frame.loc[frame["dataset"] == d, "method"]
                if (parsed := parse_grid_run(m)) is not None and parsed[0] == grid} for d in datasets}
    of = f" of {n_points}" if n_points is not None else ""
    return f"grid {grid}: " + ", ".join(f"{d} {len(done[d])}{of}" for d in datasets)


def comparison_markdown(frame: pd.DataFrame, tier: str, picks: Mapping[str, Mapping[str, str]] | None = None,
                        tuned: Mapping[str, Mapping[str, Any]] | None = None,
                        grids: Mapping[str, Mapping[str, Any]] | None = None,
                        grid_frame: pd.DataFrame | None = None,
                        records_picks: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """The comparison block of ``tables/results.md`` (empty string when no row has a run).

    A tuned row the config names (``tuned``) is shown even before it has a record: its cells say
    "not run" (a dataset without its record: the same), and its tuning cell how far its validation
    grid got (``grids``: the config's grids, to count their points; ``grid_frame``: the grid runs'
    records, :func:`comparison_frame`, else ``frame``'s), so a missing baseline is seen.
    ``records_picks`` (:func:`recrepro.papers.fedrap.tuning.pick_from_records` of the grid records):
    where validation now prefers another point than the config's pick (a grid extended past an
    edge, its tuned runs not redone yet), the row says so."""
    present = set(frame["method"])
    picks, tuned, grids = picks or {}, tuned or {}, grids or {}
    datasets = [d for d in COMPARISON_DATASETS if d in set(frame["dataset"])] + sorted(
        set(frame["dataset"]) - set(COMPARISON_DATASETS) - set(EXCLUDED_DATASETS))
    rows = [r for r in COMPARISON_ROWS if r[2] in present or (r[1] == "tuned" and r[2] in tuned)]
    if not any(r[2] in present for r in rows) or not datasets:
        return ""
    lines = [f"## The comparison (poster Table 2 layout; {tier} tier)", "",
             "Test HR@10 / NDCG@10 at the round with the best validation HR@10, mean ± sd over seeds; **bold**: the "
             "best federated method of the column within its block (centralised rows are not federated). Tuned rows "
             "run at each method's validation-grid pick (`tables/tuning.md`, docs/deviations.md#fedrap-tuning); the "
             "paper objective runs at the released code's pick. TaFeng is left out: the poster's row cannot be "
             "reproduced from the public file (docs/deviations.md#fedrap-tafeng-qb). \"not run\": a tuned row the "
             "config names that has no record yet (its tuning cell: how many of its grid's points have run; the "
             "queue: docs/compute.md). Default flags: the released code's own settings for the dataset "
             "(ml-100k: its README's command; hetrec2011-lastfm-2k: the maintainer's log, mtics/FedRAP issue #1; "
             "the others: train.py's defaults; `fedrap.tiers.<tier>.datasets` in config.yaml).", ""]
    head = "| method | tuning | " + " | ".join(f"{d} HR@10 | {d} NDCG@10" for d in datasets) + " |"
    for pool in ("train", "all_interactions"):
        block = [r for r in rows if r[0] == pool]
        if not block:
            continue
        best = {}
        for d in datasets:
            for metric in METRICS:
                means = {r[2]: np.mean(list(_values(frame, d, r[2], metric).values()))
                         for r in block if r[4] and _values(frame, d, r[2], metric)}
                if means:
                    best[(d, metric)] = max(means, key=means.get)
        lines += [f"### Negative pool `{pool}`: {POOL_TITLES[pool]}", "", head,
                  "|---|---|" + "---|---|" * len(datasets)]
        for _, tuning, method, label, _, _ in block:
            how = TUNING_TITLES[tuning]
            if tuning == "tuned" and method in tuned:
                grid = tuned[method].get("grid")
                # each dataset's pick by name when they differ (the columns' order), else the one pick
                chosen = {d: picks[d][grid] for d in datasets if grid in picks.get(d, {})}
                named = ", ".join(f"{d} {p}" for d, p in chosen.items())
                how = (f"tuned ({grid} {named if len(set(chosen.values())) > 1 else next(iter(chosen.values()))})"
                       if chosen else how)
                preferred = {d: (records_picks or {}).get(d, {}).get(grid) for d in chosen}
                moved = {d: q for d, q in preferred.items() if q is not None and q != chosen[d]}
                if moved:
                    how += "; validation now prefers " + ", ".join(f"{d} {b}" for d, b in moved.items()) + \
                           " (its runs not redone yet)"
                if method not in present:
                    from recrepro.papers.fedrap.tuning import grid_points

                    n = len(grid_points(grids[grid])) if grid in grids else None
                    runs = frame if grid_frame is None else grid_frame
                    how = f"not run ({_grid_progress(runs, grid, n, datasets)})"
            cells = []
            for d in datasets:
                for metric in METRICS:
                    values = np.array(list(_values(frame, d, method, metric).values()))
                    text = "not run" if values.size == 0 and tuning == "tuned" and method in tuned else _cell(values)
                    cells.append(f"**{text}**" if best.get((d, metric)) == method else text)
            lines.append(f"| {label} `{method}` | {how} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += _headline_markdown(frame, datasets)
    tests = paired_rows(frame, datasets)
    if len(tests):
        lines += ["### FedRAP against each federated baseline (paired t-test over seeds)", "",
                  "Mean difference FedRAP − baseline over the seeds both ran, and the two-sided p-value "
                  "(undefined where the differences are constant).", "",
                  "| pool | tuning | FedRAP row | baseline | dataset | metric | seeds | mean diff | p |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for t in tests.itertuples():
            p = "undefined" if math.isnan(t.p_value) else f"{t.p_value:.3g}"
            lines.append(f"| {t.pool} | {t.tuning} | `{t.method}` | `{t.baseline}` | {t.dataset} | {t.metric} | "
                         f"{t.n_seeds} | {t.mean_diff:+.4f} | {p} |")
        lines.append("")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the released code, side by side
#: flag set of ``benchmarks/official_fedrap.py`` -> our variant with the same flags and the code's negative pool
OFFICIAL_FLAGS = {"readme": "fedrap_code_pool", "ml1m": "fedrap_code_pool_ml1m"}


def official_curve_files(tier: str) -> list[str]:
    """The released code's per-round curves committed for ``tier`` (``benchmarks/official_fedrap.py``)."""
    return sorted(str(p) for p in Path(f"results/{tier}/fedrap/official").glob("*.jsonl"))


def official_curves(official_files: Sequence[str | Path]) -> list[tuple[Mapping[str, str], pd.DataFrame]]:
    """``(name fields, per-round frame)`` of each released-code curve with at least one round (a run
    just started has written none yet)."""
    import json
    import re

    curves = []
    for path in sorted(map(Path, official_files)):
        m = re.fullmatch(r"(?P<dataset>.+)_(?P<flags>[a-z0-9]+)_seed(?P<seed>\d+)\.jsonl", path.name)
        if m is None or m["flags"] not in OFFICIAL_FLAGS:
            raise ValueError(f"{path}: expected <dataset>_<{'|'.join(OFFICIAL_FLAGS)}>_seed<k>.jsonl")
        official = pd.DataFrame([json.loads(line) for line in path.read_text().splitlines() if line.strip()])
        if len(official):
            curves.append((m.groupdict(), official))
    return curves


def our_seed_band(runs_root: str | Path, dataset: str, variant: str, metric: str) -> pd.DataFrame | None:
    """Per round, the lowest and highest ``metric`` over every seed of our ``variant`` that has a history
    (columns ``low``, ``high``, ``n_seeds``; rounds all those seeds reached); None with fewer than two seeds.
    The released code draws its own random numbers, so the spread of our seeds is the yardstick for
    how far apart two runs of one code fall."""
    histories = sorted((Path(runs_root) / dataset / "leave_one_out" / variant).glob("seed*/history.parquet"))
    curves = [pd.read_parquet(h).set_index("round")[metric] for h in histories]
    if len(curves) < 2:
        return None
    frame = pd.concat(curves, axis=1, join="inner")
    return pd.DataFrame({"low": frame.min(axis=1), "high": frame.max(axis=1), "n_seeds": len(curves)})


def official_agreement(official_files: Sequence[str | Path], runs_root: str | Path) -> pd.DataFrame:
    """Per released-code curve (``official/<dataset>_<flags>_seed<k>.jsonl``): the rounds it has, the
    largest and mean per-round |Δ test HR@10| against our run of the same flags, split and seed, both
    curves' peaks, and, where our variant has two seeds or more, the share of the released rounds whose
    test HR@10 lies within our seeds' range (:func:`our_seed_band`).  Our run missing: its columns are empty."""
    rows = []
    for m, official in official_curves(official_files):
        variant = OFFICIAL_FLAGS[m["flags"]]
        row = {"dataset": m["dataset"], "flags": m["flags"], "seed": int(m["seed"]), "ours": variant,
               "rounds": len(official), "official_peak": official["test_hr@10"].max(),
               "official_peak_round": int(official.loc[official["test_hr@10"].idxmax(), "round"]),
               "official_last": official["test_hr@10"].iloc[-1]}
        history = Path(runs_root) / m["dataset"] / "leave_one_out" / variant / f"seed{m['seed']}" / "history.parquet"
        if history.is_file():
            ours = pd.read_parquet(history).set_index("round")
            common = official[official["round"].isin(ours.index)]
            delta = (common["test_hr@10"].to_numpy() - ours.loc[common["round"], "test_hr@10"].to_numpy())
            within = ours.loc[ours.index <= len(official), "test_hr@10"]
            row.update({"max_abs_delta": float(np.abs(delta).max()), "mean_abs_delta": float(np.abs(delta).mean()),
                        "round_of_max": int(common["round"].iloc[int(np.abs(delta).argmax())]),
                        "ours_peak": float(within.max()), "ours_peak_round": int(within.idxmax()),
                        "ours_last": float(ours.loc[len(official), "test_hr@10"])})
        band = our_seed_band(runs_root, m["dataset"], variant, "test_hr@10")
        if band is not None:
            inside = official.set_index("round")["test_hr@10"].reindex(band.index).dropna()
            lo, hi = band.loc[inside.index, "low"], band.loc[inside.index, "high"]
            row.update({"band_seeds": int(band["n_seeds"].iloc[0]), "band_rounds": len(inside),
                        "band_share": float(((inside >= lo) & (inside <= hi)).mean()),
                        "band_above": float((inside > hi).mean()),
                        "band_last": (float(band["low"].iloc[-1]), float(band["high"].iloc[-1]))})
        rows.append(row)
    return pd.DataFrame(rows)


def official_markdown(table: pd.DataFrame) -> str:
    if table.empty:
        return ""
    lines = ["## The released code, run on our split (`benchmarks/official_fedrap.py`)", "",
             "mtics/FedRAP's own training loop on our leave-one-out split with our 99 evaluation negatives, its "
             "negative pool, initialisation and random draws (docs/deviations.md#fedrap-mode), against our run of the "
             "same flags under the code's pool: per-round test HR@10 over the rounds the released code has run "
             "(`official/*.jsonl`). Different random draws: agreement is in distribution, not bit for bit, so the last "
             "column sets the released curve against the spread of our own seeds: the share of its rounds whose "
             "HR@10 lies between our seeds' lowest and highest, the share above our highest, and our seeds' range in "
             "the last round.", "",
             "| dataset | flags | seed | ours | rounds | max \\|Δ HR@10\\| (round) | mean \\|Δ\\| | released peak (round) "
             "| our peak (round) | released / ours at its last round | released inside our seeds' range |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.to_dict("records"):
        if "max_abs_delta" in r and pd.notna(r.get("max_abs_delta")):
            ours = (f"{r['max_abs_delta']:.4f} ({r['round_of_max']}) | {r['mean_abs_delta']:.4f} | "
                    f"{r['official_peak']:.4f} ({r['official_peak_round']}) | {r['ours_peak']:.4f} "
                    f"({r['ours_peak_round']}) | {r['official_last']:.4f} / {r['ours_last']:.4f}")
        else:
            ours = (f"— | — | {r['official_peak']:.4f} ({r['official_peak_round']}) | our run not recorded | "
                    f"{r['official_last']:.4f} / —")
        if pd.notna(r.get("band_share", np.nan)):
            low, high = r["band_last"]
            band = (f"{r['band_share']:.0%} of {int(r['band_rounds'])} rounds, above it in {r['band_above']:.0%} "
                    f"({int(r['band_seeds'])} seeds; "
                    f"last round {low:.4f}–{high:.4f})")
        else:
            band = "one seed of ours"
        lines.append(f"| {r['dataset']} | {r['flags']} | {r['seed']} | `{r['ours']}` | {r['rounds']} | {ours} | {band} |")
    return "\n".join(lines) + "\n"


def official_figure(official_files: Sequence[str | Path], runs_root: str | Path, out_pdf: str, out_png: str,
                    tier: str) -> None:
    """The released code's per-round test HR@10 and NDCG@10 (hollow markers) over our run of the same flags,
    split, seed and negative pool (line): one row per released-code curve, one column per metric."""
    from recrepro.reporting.plotting import figure_legend, new_figure, plot_published, save_figure

    curves = []
    for m, official in official_curves(official_files):
        history = (Path(runs_root) / m["dataset"] / "leave_one_out" / OFFICIAL_FLAGS[m["flags"]]
                   / f"seed{m['seed']}" / "history.parquet")
        ours = pd.read_parquet(history) if history.is_file() else None
        bands = {metric: our_seed_band(runs_root, m["dataset"], OFFICIAL_FLAGS[m["flags"]], metric)
                 for metric in ("test_hr@10", "test_ndcg@10")}
        curves.append((m, official, ours, bands))
    if not curves:
        raise ValueError("fedrap official figure: no released-code curve given")
    fig, axes = new_figure(2, len(curves), width=7.0, height=2.6 * len(curves) + 0.8)
    axes = np.atleast_2d(axes)
    for row, (m, official, ours, bands) in enumerate(curves):
        for col, (metric, label) in enumerate((("test_hr@10", "test HR@10"), ("test_ndcg@10", "test NDCG@10"))):
            ax = axes[row, col]
            band = bands[metric]
            if band is not None:
                ax.fill_between(band.index, band["low"], band["high"], color="C0", alpha=0.2, lw=0,
                                label=f"ours, range over {int(band['n_seeds'].iloc[0])} seeds")
            if ours is not None:
                ax.plot(ours["round"], ours[metric], color="C0", lw=1.2, label="ours, code mode under the code's pool")
            else:
                ax.text(0.5, 0.5, "our run not recorded", transform=ax.transAxes, ha="center", fontsize=7)
            plot_published(ax, official["round"], official[metric], color="C1", marker="o",
                           label="released code (mtics/FedRAP) on our split")
            ax.set(xlabel="round", ylabel=label)
            ax.set_title(f"{m['dataset']} · {m['flags']} flags · seed {m['seed']} ({len(official)} released rounds)",
                         loc="left", fontsize=8)
    figure_legend(fig)
    save_figure(fig, out_pdf, out_png, tier=tier, dataset=", ".join(dict.fromkeys(m["dataset"] for m, *_ in curves)),
                caption="FedRAP: the released code (hollow) against our code mode under the code's negative pool "
                        "(line; shaded: the range over our seeds where there are several), per round, same split, "
                        "evaluation negatives and flags")
