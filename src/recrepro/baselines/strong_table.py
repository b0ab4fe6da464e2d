"""The strong-baselines table of one paper (``recrepro strong table``): per model the test mean ± sd at its
pick, beside the paper's method's records on the same split, with a paired t-test where both sides'
per-user rows (or their splits) can be paired, and the published references of methods not run here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recrepro.baselines.grid import grid_edges
from recrepro.baselines.strong_drift import _same_without_walk
from recrepro.baselines.strong_models import MODELS, setting_floors, settings_text
from recrepro.evaluation.exposure import lower_is_better
from recrepro.io import read_json, read_yaml_entries, write_text

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LIST_METRICS", "REFERENCES_FILE", "TABLE_COLUMNS", "ReferencesError", "load_references", "pick_edges",
           "render_markdown", "strong_table"]

#: Metrics of the whole set of top-K lists (exposure), with no per-user value to pair.
LIST_METRICS = ("coverage", "gini", "gini_pos")
#: Published numbers of methods the pipeline does not run, shown beside a protocol's baselines
REFERENCES_FILE = Path(__file__).resolve().parents[1] / "expected" / "strong.yaml"
_REFERENCE_KEYS = {"dataset", "split", "method", "source", "note", "values"}
TABLE_COLUMNS = ["dataset", "split", "method", "settings", "budget", "pick_edges", "metric", "mean", "sd", "n_seeds",
                 "covers_seeds", "paper_method", "paper_mean", "paper_n_seeds", "p_value", "p_note"]


def _paired_p(ours: Sequence[Path], theirs: Sequence[Path], metric: str,
              part: str | None = None) -> tuple[float | None, str]:
    """Two-sided paired t-test over users of ``metric`` (each side averaged over its seeds).

    ``part``: the paper's method's held-out part compared (its ``<part>_per_user.parquet``, where
    its record is of another part: exADMM's fixture records validation and compares test).
    """
    import pandas as pd
    from scipy import stats

    def per_user(dirs: Sequence[Path], name: str = "per_user.parquet") -> pd.Series | str:
        frames = []
        for d in dirs:
            f = Path(d) / name
            if name != "per_user.parquet" and not f.exists() and _record_part(Path(d)) == part:
                f = Path(d) / "per_user.parquet"  # the record is of that part already
            if not f.exists():
                return "missing"
            frame = pd.read_parquet(f)
            if metric not in frame.columns:
                return "not per user"
            frames.append(frame.set_index("user")[metric])
        return pd.concat(frames, axis=1).mean(axis=1) if frames else "missing"

    if metric.split("@")[0] in LIST_METRICS:
        return None, f"{metric} is a property of all users' lists, not a per-user value"
    # the paper's side first: the note must not depend on which git-ignored files a checkout holds
    b = per_user(theirs, f"{part}_per_user.parquet" if part else "per_user.parquet")
    if isinstance(b, str):
        return None, (f"per-user rows of the paper's method's {part} part not kept" if part else
                      "per-user rows of the paper's method not kept (git-ignored)")
    a = per_user(ours)
    if isinstance(a, str):
        return None, "no per-user rows of the baseline"
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    if len(joined) < 2 or np.allclose(joined["a"], joined["b"]):
        return None, "fewer than two users, or identical per-user values"
    return float(stats.ttest_rel(joined["a"], joined["b"]).pvalue), f"paired t-test over {len(joined)} users"


def _numbered(name: str, prefix: str) -> int | None:
    """``k`` of a folder named ``<prefix><k>`` (``split123``, ``seed0``), else ``None``."""
    rest = name[len(prefix):]
    return int(rest) if name.startswith(prefix) and rest.isdigit() else None


def _paired_over_splits(grids: Sequence[tuple[Path, Mapping[str, Any]]], paper_dirs: Sequence[Path], metric: str,
                        part: str | None, why_not_users: str) -> tuple[float | None, str]:
    """Where no per-user rows can be paired: a two-sided paired t-test over the protocol's splits, when
    each split seed has its own split and the paper's method ran one seed per split under the split's
    number (PRISM's random splits: its ``seed123`` trained on split 123). Each side's value on a split
    is its mean over the runs there. Else ``(None, why_not_users)``."""
    from scipy import stats

    ours: dict[int, float] = {}
    for grid_file, grid in grids:
        split = _numbered(grid_file.parent.name, "split")
        if split is None:
            return None, why_not_users
        values = [_run_metrics(grid_file.parent / r).get(metric, np.nan) for r in grid["runs"]]
        ours[split] = float(np.nanmean(values))
    theirs = {k: _run_metrics(d, part).get(metric, np.nan) for d in paper_dirs
              if (k := _numbered(d.name, "seed")) is not None}
    common = sorted(k for k in set(ours) & set(theirs) if np.isfinite(ours[k]) and np.isfinite(theirs[k]))
    if len(common) < 2:
        return None, why_not_users
    a, b = np.array([ours[k] for k in common]), np.array([theirs[k] for k in common])
    if np.allclose(a - b, (a - b)[0]):
        return None, f"{why_not_users}; constant differences over {len(common)} splits"
    return float(stats.ttest_rel(a, b).pvalue), f"paired t-test over {len(common)} splits ({why_not_users.split(' (')[0]})"


def _on_the_rows_splits(grids: Sequence[tuple[Path, Mapping[str, Any]]], paper_dirs: Sequence[Path],
                        split_seeds: Sequence[int]) -> list[Path]:
    """The paper's runs on the splits a row's grids ran, where each split seed has its own split and the
    paper's ``seed<k>`` trained on split k (PRISM's random splits): a baseline run on split 123 alone is
    set beside the paper's method on split 123, not beside its mean over three splits.  Else every run."""
    if len(split_seeds) < 2:
        return list(paper_dirs)
    ran = {k for f, _ in grids if (k := _numbered(f.parent.name, "split")) is not None}
    seeds = {d: k for d in paper_dirs if (k := _numbered(d.name, "seed")) is not None}
    if len(seeds) != len(paper_dirs) or not set(seeds.values()) <= set(map(int, split_seeds)):
        return list(paper_dirs)
    kept = [d for d in paper_dirs if seeds[d] in ran]
    return kept or list(paper_dirs)


def _record_part(run_dir: Path) -> str | None:
    """The held-out part a run record scores (its provenance's ``target``, ``<part>_te``), if it says."""
    path = run_dir / "provenance.json"
    target = str((read_json(path).get("config") or {}).get("target", "")) if path.exists() else ""
    return target[:-3] if target.endswith("_te") else None


def _run_metrics(run_dir: Path, part: str | None = None) -> dict[str, float]:
    if part:
        return read_json(run_dir / f"{part}.json")["overall"]
    return read_json(run_dir / "metrics.json")["overall"]


def _paper_runs(spec: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
                results_root: str | Path) -> tuple[dict[str, Any], list[Path]]:
    """The paper's method to compare and its seeds' run folders: ``spec`` is one method or a list in
    preference order (e.g. FedRAP at its validation-grid pick, else at the README's flags), of which
    the first with records is taken (none recorded: the first, with no runs)."""
    if not spec:
        return {}, []
    candidates = [spec] if isinstance(spec, Mapping) else list(spec)
    for candidate in candidates:
        dirs = sorted((Path(results_root) / candidate["runs"]).glob("seed*"))
        dirs = [d for d in dirs if (d / "metrics.json").exists()]
        if dirs:
            return dict(candidate), dirs
    return dict(candidates[0]), []


class ReferencesError(ValueError):
    """``expected/strong.yaml`` is malformed (the message names the entry and what is wrong)."""


def load_references(path: str | Path = REFERENCES_FILE) -> list[dict[str, Any]]:
    """The published reference rows of ``path`` (see its header), validated: each names a dataset, a
    split, a method, its source and a note, and gives finite values per metric."""
    out = []
    for where, entry in read_yaml_entries(path, "references", _REFERENCE_KEYS, ReferencesError):
        values = entry["values"]
        if not isinstance(values, Mapping) or not values or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in values.values()):
            raise ReferencesError(f"{where}: 'values' must map metrics to numbers, got {values!r}")
        out.append({**entry, "values": {str(k): float(v) for k, v in values.items()}})
    return out


def strong_table(grid_files: Sequence[str | Path], entry: Mapping[str, Any], *, results_root: str | Path,
                 out_md: Path, out_csv: Path, title: str,
                 references: Sequence[Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """The strong-baselines table of one paper from ``grid.json`` records.

    ``entry`` maps ``"<dataset>/<split>"`` to that protocol's ``metrics`` (reported),
    ``paper_method`` (its run directory relative to ``results_root``, the name and the part
    whose metrics it compares) — the config's protocol entries — and, where given, its ``models``
    and ``split_seeds``: a configured model with no grid record gets a "not run" row (no mean) on a
    protocol where another model ran, and one recorded on fewer splits than configured says so, so
    that "the strongest baseline" never silently means the strongest of those that happened to run.
    ``references`` (default: :func:`load_references`): published numbers of methods not run here,
    printed under their protocol's block in the Markdown only (the CSV, which the claims read, holds
    the baselines alone).
    """
    import pandas as pd

    groups: dict[tuple[str, str, str], list[tuple[Path, dict]]] = {}
    for grid_file in sorted(map(Path, grid_files)):
        grid = read_json(grid_file)
        groups.setdefault((grid["dataset"], grid["split"], grid["model"]), []).append((grid_file, grid))
    rows = []
    for (dataset, split, model), grids in groups.items():
        proto = entry[f"{dataset}/{split}"]
        # one grid per split seed (PRISM's three random splits): the runs of all of them
        run_dirs = [f.parent / r for f, g in grids for r in g["runs"]]
        picks = list(dict.fromkeys(settings_text(g["settings"]) or "-" for _, g in grids))
        sizes = list(dict.fromkeys(_points_text(g) for _, g in sorted(grids, key=lambda fg: fg[1]["grid_points"])))
        n_splits = len(proto.get("split_seeds") or []) or len(grids)
        edges = pick_edges(grids)
        # past a walk, the edge is where the walk's list ended, not the configured grid's
        where = "the end of its walk" if any(g.get("beyond_points") for _, g in grids) else "the grid's edge"
        budget = (f"{' / '.join(sizes)}, picked on validation {grids[0][1]['select']}"
                  + (f" of each of {len(grids)} splits" if len(grids) > 1 else "")
                  + (f" ({len(grids)} of {n_splits} splits run)" if len(grids) < n_splits else "")
                  + (f"; pick on {where} in {edges}: a better point may lie beyond" if edges else "")
                  + _walk_lag(grids, (proto.get("beyond") or {}).get(model)))
        paper, paper_dirs = _paper_runs(proto.get("paper_method"), results_root)
        # a deterministic model gives the same numbers at every training seed: one run per split
        # stands for all of them once every split has run (else it is as short as it looks)
        covers = all(g.get("deterministic", False) for _, g in grids) and len(grids) >= n_splits
        paper_dirs = _on_the_rows_splits(grids, paper_dirs, proto.get("split_seeds") or [])
        for metric in proto["metrics"]:
            values = [_run_metrics(d).get(metric, np.nan) for d in run_dirs]
            theirs = [_run_metrics(d, paper.get("part")).get(metric, np.nan) for d in paper_dirs]
            if paper_dirs:
                p, note = _paired_p(run_dirs, paper_dirs, metric, paper.get("part"))
                if p is None and "not kept" in note:
                    p, note = _paired_over_splits(grids, paper_dirs, metric, paper.get("part"), note)
            else:
                p, note = None, "no records of the paper's method on this split"
            rows.append({
                "dataset": dataset, "split": split, "method": model, "settings": " / ".join(picks),
                "budget": budget, "pick_edges": edges, "metric": metric, "mean": float(np.nanmean(values)),
                "sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0, "n_seeds": len(values),
                "covers_seeds": covers, "paper_method": paper.get("method", ""),
                "paper_mean": float(np.nanmean(theirs)) if theirs else np.nan, "paper_n_seeds": len(theirs),
                "p_value": p, "p_note": note})
    rows += _not_run_rows(entry, _ran_models(groups), results_root)
    frame = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    if frame.empty:
        raise ValueError("strong_table: no grid records given")
    frame = frame.sort_values(["dataset", "split", "metric", "method"], kind="stable").reset_index(drop=True)
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    write_text(out_csv, frame.to_csv(index=False, float_format="%.6g"))
    write_text(Path(out_md), render_markdown(frame, title, load_references() if references is None else references))
    return frame


def _walk_lag(grids: Sequence[tuple[Path, Mapping[str, Any]]], today: Mapping[str, Any] | None) -> str:
    """``"; made before today's walk past its edge on 3 of 3 splits (...)"`` where today's ``beyond``
    list would score points a record never scored (:func:`recrepro.baselines.strong_drift._same_without_walk`):
    its pick is yesterday's, and docs/compute.md queues it; empty where every record is today's or
    ``today`` is unknown (None)."""
    if today is None:
        return ""
    lagging = []
    for grid_file, grid in grids:
        verdict = _same_without_walk(grid, grid_file.parent, "search.beyond", grid.get("beyond") or {}, dict(today))
        if verdict is not None and not verdict[0]:
            lagging.append(verdict[1].split(": tune it again")[0])
    if not lagging:
        return ""
    return (f"; made before today's walk past its edge on {len(lagging)} of {len(grids)} splits "
            f"({lagging[0]}; docs/compute.md queues it)")


def _points_text(grid: Mapping[str, Any]) -> str:
    """``"16-point grid"``, or ``"16-point grid and 3 points past its edges"`` after a walk."""
    walked = int(grid.get("beyond_points") or 0)
    text = f"{grid['grid_points'] - walked}-point grid"
    return text + (f" and {walked} point{'' if walked == 1 else 's'} past its edges" if walked else "")


def pick_edges(grids: Sequence[tuple[Path, Mapping[str, Any]]]) -> str:
    """The searched settings at whose range's end the pick of one model's grids sits, e.g.
    ``"alpha (smallest), k (largest)"``; an edge that only some splits' picks sit on says on how many.
    Empty when every pick is inside its grid (or the grid searched one point); a smallest value at
    the model's floor (ItemKNN's shrink 0, RP3beta's β 0) is no edge."""
    counts: dict[str, int] = {}
    for _, grid in grids:
        settings = [point["settings"] for point in grid.get("points", [])]
        searched = set(grid.get("grid") or {})
        floors = setting_floors(grid["model"]) if grid.get("model") in MODELS else {}
        for edge in grid_edges(settings, {k: v for k, v in grid["settings"].items() if k in searched}, floors):
            counts[edge] = counts.get(edge, 0) + 1
    return ", ".join(edge + (f" on {n} of {len(grids)} splits" if n < len(grids) else "")
                     for edge, n in counts.items())


def _ran_models(groups: Mapping[tuple[str, str, str], Any]) -> dict[tuple[str, str], set[str]]:
    ran: dict[tuple[str, str], set[str]] = {}
    for dataset, split, model in groups:
        ran.setdefault((dataset, split), set()).add(model)
    return ran


def _not_run_rows(entry: Mapping[str, Any], ran: Mapping[tuple[str, str], set[str]],
                  results_root: str | Path) -> list[dict[str, Any]]:
    """A "not run" row per metric for each configured model without a grid record, on the protocols
    where another model ran (a protocol with none stays out of the table)."""
    rows = []
    for (dataset, split), models in sorted(ran.items()):
        proto = entry[f"{dataset}/{split}"]
        missing = [m for m in proto.get("models") or [] if m not in models]
        if not missing:
            continue
        paper, paper_dirs = _paper_runs(proto.get("paper_method"), results_root)
        paper_runs = [_run_metrics(d, paper.get("part")) for d in paper_dirs]
        for model in missing:
            for metric in proto["metrics"]:
                theirs = [run.get(metric, np.nan) for run in paper_runs]
                rows.append({
                    "dataset": dataset, "split": split, "method": model, "settings": "", "budget": "not run", "pick_edges": "",
                    "metric": metric, "mean": np.nan, "sd": np.nan, "n_seeds": 0, "covers_seeds": False,
                    "paper_method": paper.get("method", ""),
                    "paper_mean": float(np.nanmean(theirs)) if theirs else np.nan, "paper_n_seeds": len(theirs),
                    "p_value": None, "p_note": "not run"})
    return rows


def render_markdown(frame: pd.DataFrame, title: str, references: Sequence[Mapping[str, Any]] = ()) -> str:
    """The table as Markdown, one section per dataset/split; the best baseline per metric in bold, and
    under a section the published references for its dataset and split (:func:`load_references`)."""
    import pandas as pd

    lines = [f"# {title}", "",
             "Tuned simple baselines on the paper's own split, with its evaluator (issue 48): each model's "
             "grid is searched on the validation part with the paper's metric, and the pick is tested "
             "on every seed (deterministic models: one run per split, which stands for every seed). `paper` is our reproduction's run of the "
             "paper's method on the same split; `p` a two-sided paired t-test over users where both "
             "sides' per-user rows exist, else over the splits where each split seed has its own split and "
             "both sides ran on several (PRISM's random splits; `p_note` in the CSV says which). Bold: the best baseline per metric (Gini: the lowest). A configured "
             "model shown as not run leaves the strongest baseline open: the claims then never say the "
             "paper's method beats it.", ""]
    for (dataset, split), block in frame.groupby(["dataset", "split"], sort=True):
        lines += [f"## {dataset} · {split}", "",
                  "| metric | method | settings | budget | mean ± sd (n) | paper method | paper | p |",
                  "|---|---|---|---|---|---|---|---|"]
        for metric, rows in block.groupby("metric", sort=True):
            best = rows["mean"].min() if lower_is_better(metric) else rows["mean"].max()
            for _, r in rows.iterrows():
                if not r["n_seeds"]:
                    value = "not run"
                else:
                    n = f"{r['n_seeds']}, deterministic: every seed" if r["covers_seeds"] else r["n_seeds"]
                    value = f"{r['mean']:.4f} ± {r['sd']:.4f} ({n})"
                if r["mean"] == best:
                    value = f"**{value}**"
                paper = "" if pd.isna(r["paper_mean"]) else f"{r['paper_mean']:.4f} ({r['paper_n_seeds']})"
                if r["p_value"] is None or pd.isna(r["p_value"]):
                    p = f"– ({r['p_note']})"
                else:  # a t-test's p below the smallest double prints as 0
                    p = f"{r['p_value']:.2g}" if r["p_value"] > 0 else "< 1e-300"
                lines.append(f"| {metric} | {r['method']} | {r['settings']} | {r['budget']} | {value} | "
                             f"{r['paper_method']} | {paper} | {p} |")
        lines.append("")
        for ref in references:
            if (ref["dataset"], ref["split"]) == (dataset, split):
                shown = ", ".join(f"{metric} {value:.4f}" for metric, value in ref["values"].items())
                lines += [f"Published reference, not run here (never judged): **{ref['method']}** {shown} "
                          f"({ref['source']}; {ref['note']}).", ""]
    return "\n".join(lines)
