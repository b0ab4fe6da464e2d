"""``beats_strongest_baseline``: a paper's method against the strongest of its protocol's tuned simple
baselines, from ``tables/strong_baselines.csv`` (the table's own paired test) or from the protocol's
run records (a paired comparison); :mod:`~recrepro.scorecard.claims` dispatches to it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from recrepro.evaluation.exposure import lower_is_better
from recrepro.scorecard.claimbase import (
    Context,
    Result,
    STRONG_BASELINES,
    _better_evidence,
    _fmt,
    _mean,
    _missing,
    _run_dirs,
    _seeds_text,
    _tested,
)
from recrepro.scorecard.claimrecords import ClaimsError
from recrepro.scorecard.claimspec import Check
from recrepro.scorecard.evidence import AGAINST, HOLDS, INCONCLUSIVE, Evidence, paired_comparison, untested
from recrepro.scorecard.stats import matched_seeds, seed_ttest_against_summary


def _strong_from_records(check: Check, ctx: Context) -> list[Result]:
    """``beats_strongest_baseline`` with ``baselines``: the protocol's own simple baselines, read from
    the run records (a protocol the ranking baselines of tables/strong_baselines.csv do not fit)."""
    out = []
    metric, method = check.metric or "", check.method[0]
    for dataset in check.datasets:
        label = f"{dataset} {metric}"
        ours = ctx.records.seeds(dataset, check.split, method, metric)
        ran = {b: v for b in check.baselines if (v := ctx.records.seeds(dataset, check.split, b, metric))}
        not_run = [b for b in check.baselines if b not in ran]
        if not ours or not ran:
            what = [method] if not ours else not_run
            out.append(_missing(label, f"`{'`, `'.join(what)}` on {dataset} ({metric})"))
            continue
        sign = 1.0 if check.lower_is_better else -1.0
        best = min(ran, key=lambda b: (sign * _mean(ran[b]), b))
        ours_matched, theirs, left_out = matched_seeds(ours, ran[best], method, best)
        mo, mb = _mean(ours_matched), _mean(theirs)
        beats = mo < mb if check.lower_is_better else mo > mb
        if beats and not_run:
            out.append(_missing(label, f"`{'`, `'.join(not_run)}` on {dataset} (not run; `{method}` {_fmt(mo)} "
                                       f"beats the strongest of those run, `{best}` {_fmt(mb)})"))
            continue
        n = min(len(ours_matched), len(theirs))
        estimate, second = paired_comparison(ours_matched, theirs, metric, ctx.per_user,
                                             _run_dirs(ctx, dataset, check.split, method),
                                             _run_dirs(ctx, dataset, check.split, best))
        evidence = _better_evidence(estimate, second, mo, mb, n, check.lower_is_better)
        out.append(Result(label=label, status=_tested(INCONCLUSIVE, evidence), seeds=ctx.seed_pair(n),
                          stand_in=ctx.stand_in(dataset), evidence=evidence,
                          numbers=f"`{method}` {_fmt(mo)} vs strongest `{best}` {_fmt(mb)} "
                                  f"({_seeds_text(n, ctx)}{left_out})"))
    return out


def _arm_against_row(method: str, best: pd.Series, ctx: Context, dataset: str, split: str | None,
                     covers: bool) -> tuple[float, int, float | None, str, str] | None:
    """``method``'s seed mean on ``dataset`` from the run records, against the strongest baseline's
    table row ``best``: ``(mean, n_seeds, p_value, test name, method)``; None when it has no record."""
    seeds = ctx.records.seeds(dataset, split or None, method, str(best["metric"]))
    if not seeds:
        return None
    test = seed_ttest_against_summary(seeds, float(best["mean"]), float(best["sd"]), int(best["n_seeds"]), covers)
    n = len(seeds) if covers else min(len(seeds), int(best["n_seeds"]))
    if test is None:
        return _mean(seeds), n, None, "", method
    return _mean(seeds), n, test[0], f"{test[1]}: ", method


def _summary_evidence(ours: float, theirs: float, lower: bool, p_value: float | None, test: str, n: int,
                      note: str) -> Evidence:
    """Against a table row known by its mean (and the table's own paired test's p): the relative
    difference, no interval (the table keeps no standard error of the difference)."""
    effect = (ours - theirs) / abs(theirs) if theirs else ours - theirs
    unit = "relative" if theirs else "difference"
    target = (None, 0.0) if lower else (0.0, None)
    if p_value is None:
        return untested(effect, unit, note or f"{n} seed{'s' if n != 1 else ''}: no paired test", target)
    claimed = -1.0 if lower else 1.0
    return Evidence(effect=effect, unit=unit, test=test, n=n, p=p_value,
                    if_significant=HOLDS if effect * claimed > 0 else AGAINST, target=target)


def _check_strong_baseline(check: Check, ctx: Context) -> list[Result]:
    if check.baselines:
        return _strong_from_records(check, ctx)
    table = ctx.table(STRONG_BASELINES)
    if table is None:
        return [_missing(check.label or "every dataset",
                         f"the tuned simple baselines (`{ctx.paper}/{STRONG_BASELINES}`)")]
    need = {"dataset", "method", "metric", "mean", "n_seeds", "paper_method", "paper_mean"}
    if not need <= set(table.columns):
        raise ClaimsError(f"{ctx.results / STRONG_BASELINES}: lacks columns {sorted(need - set(table.columns))}")
    if check.datasets:
        table = table[table["dataset"].isin(check.datasets)]
    if check.split and "split" in table:
        table = table[table["split"] == check.split]
    if check.metric:
        table = table[table["metric"] == check.metric]
    if "split" not in table:
        table = table.assign(split="")
    out = []
    for (dataset, split, metric), rows in table.groupby(["dataset", "split", "metric"], sort=True):
        # a dataset with two protocols (gowalla: PRISM's random split, LightGCN's release) names its split
        where = f"{dataset} · {split}" if table.loc[table["dataset"] == dataset, "split"].nunique() > 1 else dataset
        # a labelled check (one arm of the paper's method) names its arm in the label and the verdict's groups
        label = f"{where} {metric}" + (f" ({check.label})" if check.label else "")
        place = f"{where} {check.label}" if check.label else ""
        lower = lower_is_better(str(metric))  # Gini: the strongest baseline exposes items most evenly
        ran = rows[np.isfinite(pd.to_numeric(rows["mean"], errors="coerce"))]
        # a configured baseline with no record (`not run`) may be the strongest: it can still contradict
        # the claim through another baseline, but never let it pass
        not_run = sorted(set(rows["method"]) - set(ran["method"]))
        if ran.empty:
            out.append(_missing(label, f"the tuned simple baselines on {where} ({metric})"))
            continue
        best = ran.sort_values(["mean", "method"], ascending=[lower, True]).iloc[0]
        covers = str(best.get("covers_seeds", False)).lower() == "true"
        if check.method:
            # another arm of the paper's method (e.g. the released code's switches) than the table's:
            # its run records against the strongest baseline's row, by a t-test over seeds
            arm = _arm_against_row(check.method[0], best, ctx, str(dataset), str(split) or check.split, covers)
            if arm is None:
                out.append(_missing(label, f"`{check.method[0]}` on {where} ({metric})"))
                continue
            ours, n, p_value, p_name, method = arm
        else:
            ours, method, p_name = float(best["paper_mean"]), str(best["paper_method"]), ""
            p_value = best.get("p_value")
            # the comparison rests on the fewer seeds of the two; a deterministic baseline's one run per
            # split stands for every seed (tables written before `covers_seeds` count its runs)
            theirs = int(best.get("paper_n_seeds", best["n_seeds"]))
            n = theirs if covers else min(int(best["n_seeds"]), theirs)
        if not np.isfinite(ours) or not np.isfinite(float(best["mean"])):
            # the paper's method (or the baseline) has no record on this split: nothing to compare
            out.append(_missing(label, f"`{method}` on {where} ({metric})"))
            continue
        p_text = "" if not isinstance(p_value, (int, float)) or pd.isna(p_value) else \
            (f", {p_name}p={float(p_value):.3g}" if p_value > 0 else f", {p_name}p<1e-300")
        beats = ours < float(best["mean"]) if lower else ours > float(best["mean"])
        if beats and not_run:
            out.append(_missing(label, f"`{'`, `'.join(not_run)}` on {where} (not run; "
                                f"`{method}` {_fmt(ours)} beats the strongest of those run, "
                                f"`{best['method']}` {_fmt(float(best['mean']))})"))
            continue
        test_name = p_name.rstrip(": ") or str(best.get("p_note") or "") or "the table's paired test"
        evidence = _summary_evidence(ours, float(best["mean"]), lower, float(p_value) if p_text else None,
                                     test_name, n, str(best.get("p_note") or ""))
        # a pick on its grid's edge may not be the baseline's best: the reader sees where. A loss to
        # such a baseline stands (a better point only widens it); a win over the baselines is
        # provisional while any of them was picked on an edge, since a point beyond may beat ours
        edges = best.get("pick_edges")
        edge_text = (f"; `{best['method']}`'s pick sits on its grid's edge in {edges}"
                     if isinstance(edges, str) and edges else "")
        on_edge = [f"`{r['method']}`" for _, r in ran.iterrows()
                   if isinstance(r.get("pick_edges"), str) and r["pick_edges"]] if beats else []
        out.append(Result(label=label, status=_tested(INCONCLUSIVE, evidence), place=place,
                          seeds=ctx.seed_pair(n), stand_in=ctx.stand_in(str(dataset)),
                          on_edge=", ".join(on_edge), evidence=evidence,
                          numbers=f"`{method}` {_fmt(ours)} vs strongest `{best['method']}` "
                                  f"{_fmt(float(best['mean']))} ({_seeds_text(n, ctx)}"
                                  f"{'; the baseline is deterministic: one run per split' if covers else ''}"
                                  f"{edge_text})"))
    return out or [_missing(check.label or "every dataset", f"rows of `{STRONG_BASELINES}` for this check")]
