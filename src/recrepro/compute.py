"""``docs/compute.md``: what the paper tier costs, what ran, what remains — from the records.

Each run record's ``provenance.json`` holds its wall time, threads, device and peak memory.
Grouped by paper, dataset and method family (the method name up to its first ``_``
suffix that names a setting), these give measured CPU-hours per job; the jobs of the tier
that have no record yet are priced at the mean of the same group (else of the same paper and
dataset), and marked "no data here" when the mirror lacked their dataset
(``results/<tier>/datasets.json``).

    recrepro report compute --expected-runs runs.json --availability results/paper/datasets.json --out docs/compute.md
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import read_json
from recrepro.records import PROVENANCE_FILE

__all__ = ["compute_table", "compute_markdown"]


def _run_identity(path: str | Path) -> dict[str, str] | None:
    """paper, dataset, method of ``results/<tier>/<paper>/runs/<dataset>/.../<method>/seed<k>/...``."""
    parts = Path(path).parts
    if "runs" not in parts:
        return None
    i = parts.index("runs")
    tail = [p for p in parts[i + 1:] if not p.endswith(".json") and not p.endswith(".parquet")]
    if len(tail) < 3 or not tail[-1].startswith("seed"):
        return None
    return {"paper": parts[i - 1], "dataset": tail[0], "method": tail[-2],
            "run_dir": str(Path(*parts[:i + 1 + len(tail)]))}


def compute_table(expected_runs: Sequence[str], results_root: str | Path = ".") -> pd.DataFrame:
    """One row per expected run: identity, whether its record exists, and its measured cost."""
    rows = []
    root = Path(results_root)
    for path in dict.fromkeys(expected_runs):
        ident = _run_identity(path)
        if ident is None:
            continue
        run_dir = root / ident["run_dir"]
        prov_path = run_dir / PROVENANCE_FILE
        row: dict[str, Any] = {**ident, "recorded": (run_dir / "metrics.json").is_file()}
        if row["recorded"] and prov_path.is_file():
            prov = read_json(prov_path)
            threads = (prov.get("threads") or {}).get("torch_num_threads") or 1
            wall = float(prov.get("wall_seconds") or 0.0)
            # measured CPU time where the record has it; older records: wall × threads (an upper bound)
            cpu = prov.get("cpu_seconds")
            row.update({"wall_hours": wall / 3600,
                        "cpu_hours": (float(cpu) if cpu is not None else wall * int(threads)) / 3600,
                        "threads": int(threads), "peak_rss_mb": prov.get("peak_rss_mb"),
                        "device": prov.get("device_name") or prov.get("device") or "cpu"})
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    for col in ("wall_hours", "cpu_hours", "peak_rss_mb", "threads", "device"):
        if col not in frame:
            frame[col] = pd.NA
    frame["family"] = frame["method"].str.replace(r"_(wd|bwd|sw|a)[0-9a-z]*$", "", regex=True)
    return frame


def _published_cells(papers: Sequence[str]) -> set[tuple[str, str, str]]:
    """(paper, dataset, method) of every expected entry with a published value."""
    from recrepro.scorecard import expected_path, load_expected

    cells = set()
    for paper in papers:
        try:
            expected = load_expected(expected_path(paper))
        except (FileNotFoundError, ValueError):
            continue
        cells |= {(paper, e.dataset, e.method) for e in expected.entries if e.published is not None}
    return cells


def queue_priority(frame: pd.DataFrame, published: set[tuple[str, str, str]]) -> pd.Series:
    """1: a run of a published cell on its first seed; 2: its other seeds; 3: everything else (figure sweeps).

    A tuned-weight-decay cell (``<backbone>_<loss>_tunedwd``) needs its grid runs
    (``<backbone>_<loss>_wd*``) on the first seed; its other seeds follow the pick.
    """
    first_seed = frame.assign(seed=frame["run_dir"].str.extract(r"seed(\d+)$")[0].astype(int)) \
        .groupby(["paper", "dataset"])["seed"].transform("min")
    seeds = frame["run_dir"].str.extract(r"seed(\d+)$")[0].astype(int)
    tuned = frame["method"].str.replace(r"_wd[0-9a-z]+$", "_tunedwd", regex=True)
    is_published = [(p, d, m) in published or (p, d, t) in published
                    for p, d, m, t in zip(frame["paper"], frame["dataset"], frame["method"], tuned)]
    grid_other_seed = (frame["method"] != tuned) & (seeds != first_seed)
    priority = pd.Series(3, index=frame.index)
    priority[pd.Series(is_published, index=frame.index) & (seeds == first_seed)] = 1
    priority[pd.Series(is_published, index=frame.index) & (seeds != first_seed) & ~grid_other_seed] = 2
    return priority


def _hours(x: float) -> str:
    return f"{x:.2f}" if x >= 0.01 else ("0" if x == 0 else "<0.01")


def compute_markdown(frame: pd.DataFrame, availability: Mapping[str, str]) -> str:
    """The markdown of ``docs/compute.md`` (see the module docstring)."""
    lines = _intro_lines()
    if frame.empty:
        return "\n".join(lines + ["No paper-tier jobs."]) + "\n"
    done = frame[frame["recorded"]]
    lines += _recorded_lines(done)
    todo = frame[~frame["recorded"]].copy()
    if len(todo):
        todo["estimate"] = _estimates(todo, done)
        lines += _remaining_lines(todo, availability)
        here = todo[[availability.get(d, "missing") != "missing" for d in todo["dataset"]]].copy()
        if len(here):
            here["priority"] = queue_priority(here, _published_cells(sorted(set(frame["paper"]))))
            lines += _queue_lines(here)
    lines += [f"Recorded: {len(done)} of {len(frame)} paper-tier jobs, "
              f"{_hours(float(done['cpu_hours'].astype(float).sum()))} CPU-hours.", ""]
    return "\n".join(lines)


def _intro_lines() -> list[str]:
    """The page's title and its paragraphs on how it is made and how to run the queue."""
    return [
        "# Compute: the paper tier",
        "",
        "Generated from the run records under `results/paper/` (their `provenance.json`: wall time, torch "
        "threads, device, peak memory) and the paper tier's list of jobs; redraw with "
        "`snakemake --cores 2 docs/compute.md --config tier=paper from_records=true`. CPU-hours are wall "
        "hours × torch threads of each job; a job not run yet is priced at the mean of the recorded jobs of "
        "the same paper, dataset and method family (else of the same paper and dataset; else not priced).",
        "",
        "Running the queue: ask Snakemake for the records of a row below (`--config tier=paper "
        "'data={mirror: <folder>}'`; add `device=cuda` on a GPU). Training jobs checkpoint every epoch or "
        "round under `checkpoints/` and resume after a kill, so long cells can run in pieces on machines "
        "that stop jobs; a finished record is complete and can be committed at once (`git add results/paper`: "
        "`.gitignore` keeps weights, checkpoints and the large per-user and per-item files out). Then "
        "`snakemake --cores 2 --config tier=paper from_records=true` redraws the tables, figures, "
        "scorecards, `results/paper/README.md` and this page.",
        "",
    ]


def _recorded_lines(done: pd.DataFrame) -> list[str]:
    """The "Recorded" table: measured cost per paper and dataset."""
    lines = ["## Recorded", "",
             "| paper | dataset | jobs | CPU-hours | wall hours | mean CPU-h / job | peak RSS (MB) | device |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for (paper, dataset), g in done.groupby(["paper", "dataset"], sort=True):
        cpu = g["cpu_hours"].astype(float)
        rss = pd.to_numeric(g["peak_rss_mb"], errors="coerce")
        devices = ", ".join(sorted({str(d) for d in g["device"].dropna()}))
        lines.append(f"| {paper} | {dataset} | {len(g)} | {_hours(cpu.sum())} | {_hours(g['wall_hours'].astype(float).sum())} | "
                     f"{_hours(cpu.mean())} | {rss.max():.0f} | {devices} |")
    lines.append("")
    return lines


def _estimates(todo: pd.DataFrame, done: pd.DataFrame) -> list[float | None]:
    """CPU-hours of each job not run yet: the mean of its family's records, else its dataset's, else None."""
    family_mean = done.groupby(["paper", "dataset", "family"])["cpu_hours"].mean()
    dataset_mean = done.groupby(["paper", "dataset"])["cpu_hours"].mean()

    def price(r: Any) -> float | None:
        for table, key in ((family_mean, (r.paper, r.dataset, r.family)), (dataset_mean, (r.paper, r.dataset))):
            if key in table.index and pd.notna(table[key]):
                return float(table[key])
        return None

    return [price(r) for r in todo.itertuples(index=False)]


def _remaining_lines(todo: pd.DataFrame, availability: Mapping[str, str]) -> list[str]:
    """The "Remaining" table and its total over the priced jobs."""
    lines = ["## Remaining", "",
             "| paper | dataset | data here | jobs | priced jobs | estimated CPU-hours |",
             "|---|---|---|---:|---:|---:|"]
    total, unpriced = 0.0, 0
    for (paper, dataset), g in todo.groupby(["paper", "dataset"], sort=True):
        here = availability.get(dataset, "missing")
        est = g["estimate"].dropna()
        total += float(est.sum())
        unpriced += int(g["estimate"].isna().sum())
        lines.append(f"| {paper} | {dataset} | {'yes' if here != 'missing' else 'no'} | {len(g)} | {len(est)} | "
                     f"{_hours(float(est.sum())) if len(est) else 'not measured'} |")
    lines += ["", f"Remaining: {len(todo)} jobs; the {len(todo) - unpriced} priced ones ≈ {_hours(total)} CPU-hours "
              f"on this tier's settings; {unpriced} jobs have no measured job of their kind yet.", ""]
    return lines


def _queue_lines(here: pd.DataFrame) -> list[str]:
    """The "Queue" table: the jobs whose data is here, in :func:`queue_priority` order."""
    names = {1: "published cells, first seed", 2: "published cells, other seeds",
             3: "figure sweeps and unpublished runs"}
    lines = ["## Queue (data here, in order)", "",
             "What to run next with the data at hand: published cells at the paper's budget on one seed, then "
             "their other seeds (a tuned weight decay's other seeds follow its pick on the first seed), then "
             "the figures' sweeps. Ask Snakemake for the run records of a row, e.g. "
             "`snakemake --cores 2 results/paper/<paper>/runs/<dataset>/.../<method>/seed<k>/metrics.json "
             "--config tier=paper`.", "",
             "| order | paper | dataset | jobs | estimated CPU-hours | methods |", "|---:|---|---|---:|---:|---|"]
    for (prio, paper, dataset), g in here.groupby(["priority", "paper", "dataset"], sort=True):
        est = g["estimate"].dropna()
        methods = sorted(set(g["method"]))
        shown = ", ".join(f"`{m}`" for m in methods[:6]) + (f" and {len(methods) - 6} more" if len(methods) > 6 else "")
        lines.append(f"| {prio}: {names[prio]} | {paper} | {dataset} | {len(g)} | "
                     f"{_hours(float(est.sum())) if len(est) else 'not measured'} | {shown} |")
    lines.append("")
    return lines
