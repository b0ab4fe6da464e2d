"""``docs/compute.md``: what the paper tier costs, what ran, what remains — from the records.

Each run record's ``provenance.json`` holds its wall time, threads, device and peak memory.
Grouped by paper, dataset and method family (the method name up to its first ``_``
suffix that names a setting), these give measured CPU-hours per job; the jobs of the tier
that have no record yet are priced at the mean of their method's records (their other seeds),
else of the same group, else of the same paper and dataset, and marked "no data here" when the mirror lacked their dataset
(``results/<tier>/datasets.json``). Only records that ran on the CPU enter these means: a
GPU job's hours are another resource and are shown apart.

A job with no measured job on its own dataset gets a *scaled estimate* instead, kept apart
from the measured prices: the mean of its paper and family's records on the recorded dataset
with the most interactions, times the ratio of the two datasets' interactions
(:attr:`~recrepro.datasets.registry.DatasetSpec.n_interactions`).

    recrepro report compute --expected-runs runs.json --availability results/paper/datasets.json --out docs/compute.md

What each job cost (:mod:`.compute_records`), the prices of the jobs not run yet
(:mod:`.compute_estimates`) and the order to run them in (:mod:`.compute_queue`) are modules of their
own; their public names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.datasets.availability import reachable
from recrepro.reporting.compute_estimates import (
    PARTIAL_RATES,
    ComputeRatesError,
    dataset_sizes,
    estimates,
    partial_rates,
    scaled_estimates,
)
# the queue's inputs keep their names here: the tests stand in for ``_published_cells`` on this module
from recrepro.reporting.compute_queue import claimed_runs as _claimed_runs
from recrepro.reporting.compute_queue import published_cells as _published_cells
from recrepro.reporting.compute_queue import queue_priority
from recrepro.reporting.compute_records import (
    ASSEMBLED_FROM_POINTS,
    GRID_POINT_PATTERN,
    SEED_PATTERN,
    STRONG,
    compute_table,
    grid_point_rows,
    method_family,
    run_identity,
)

__all__ = ["compute_markdown", "compute_table", "method_family"]


def _hours(x: float) -> str:
    return f"{x:.2f}" if x >= 0.01 else ("0" if x == 0 else "<0.01")


def _rough(x: float) -> str:
    """A scaled estimate: one decimal, as it is an extrapolation, not a measure."""
    return f"{x:.1f}" if x >= 0.05 else _hours(x)


def _approx(x: float) -> str:
    """``≈ 1.2``; ``< 0.01`` for a total too small to round (no "≈ <0.01")."""
    text = _rough(x)
    return f"< {text[1:]}" if text.startswith("<") else f"≈ {text}"



def _on_cpu(frame: pd.DataFrame) -> pd.Series:
    """True for the records that ran on the CPU (records without provenance count as CPU; they have no hours)."""
    kind = frame["device_type"] if "device_type" in frame else pd.Series("cpu", index=frame.index)
    return kind.fillna("cpu").astype(str) == "cpu"


#: rounds a released-code curve of ``benchmarks/official_fedrap.py`` runs (its ``--rounds`` default)
OFFICIAL_ROUNDS = 100


def outdated_lines(outdated: Sequence[Mapping[str, Any]]) -> list[str]:
    """The "Records to make again" section: each strong-baseline grid record the configuration has moved
    past (``recrepro.baselines.strong_drift.outdated_grids``), why, what a point costs and the commands
    that keep its scored points and tune it again."""
    if not outdated:
        return []
    lines = ["## Records to make again", "",
             "The configuration has moved past these tuned-baseline records (`recrepro strong drift --tier paper` "
             "names every difference). `recrepro strong reuse-points` hands a record's scored points to its job, "
             "which then scores only what the record lacks (a walk past the grid's edge: a point per step, and "
             "the pick's test run); a point costs about what the record's points cost (their mean, from "
             "`grid.json`).", "",
             "| record | why | CPU-minutes a point | commands |", "|---|---|---:|---|"]
    for entry in outdated:
        record = Path(entry["record"])
        parts = record.parts[-7:-1]  # <tier>/baselines/strong/<dataset>/<protocol>/<split>/<model>/split<k>
        dataset, protocol, split, model, split_seed = parts[-5], parts[-4], parts[-3], parts[-2], parts[-1][5:]
        tier = record.parts[-9] if len(record.parts) >= 9 else "paper"
        minutes = entry.get("point_cpu_minutes")
        command = (f"`recrepro strong reuse-points --tier {tier} --dataset {dataset} --protocol {protocol} "
                   f"--split {split} --model {model} --split-seed {split_seed}`, then "
                   f"`snakemake --cores 1 --force {record.as_posix()} --config tier={tier}`")
        lines.append(f"| `{record.as_posix()}` | {entry['why']} | {'' if minutes is None else f'{minutes:.0f}'} "
                     f"| {command} |")
    return lines + [""]


def official_lines(official_files: Sequence[str | Path]) -> list[str]:
    """The "Outside the workflow" section: each released-code curve (``benchmarks/official_fedrap.py``),
    its rounds so far of :data:`OFFICIAL_ROUNDS` and the command that resumes it from its checkpoint."""
    if not official_files:
        return []
    lines = ["## Outside the workflow", "",
             "The released FedRAP code, run on our split by `benchmarks/official_fedrap.py` (a checkout of "
             "mtics/FedRAP outside the repository; about 50 s a round on ML-100K on one CPU core). It checkpoints every "
             "round (git-ignored, under `checkpoints/official_fedrap/`) and resumes where it stopped; rerun "
             "its command with the same `--out` (on a machine without its checkpoint, delete the curve first: it "
             "restarts from round 1).", "",
             "| curve | rounds | left | command |", "|---|---:|---:|---|"]
    for path in sorted(map(Path, official_files)):
        rounds = sum(1 for line in path.read_text().splitlines() if line.strip())
        dataset, flags, seed = path.stem.rsplit("_", 2)
        command = (f"`python benchmarks/official_fedrap.py --checkout <mtics/FedRAP> --split-dir "
                   f"data/splits/{dataset}/fedrap/leave_one_out/seed0 --flags {flags} --seed {seed[4:]} "
                   f"--out {path.as_posix()}`")
        lines.append(f"| `{path.name}` | {rounds} | {max(OFFICIAL_ROUNDS - rounds, 0)} | {command} |")
    return lines + [""]



def compute_markdown(frame: pd.DataFrame, availability: Mapping[str, str],
                     sizes: Mapping[str, int] | None = None, picked_runs: Sequence[str] = (),
                     official: Sequence[str | Path] = (),
                     partial: Sequence[Mapping[str, Any]] | None = None,
                     outdated: Sequence[Mapping[str, Any]] = ()) -> str:
    """The markdown of ``docs/compute.md`` (see the module docstring).

    Parameters
    ----------
    frame:
        :func:`compute_table`'s rows.
    availability:
        Dataset -> where its data is (``"missing"`` when the mirror lacked it).
    sizes:
        Dataset -> interactions, for the scaled estimates; the registry's
        ``n_interactions`` when None.
    picked_runs:
        Run records of the weight decays picked for tuned cells (any seed): their other
        seeds are queued with the published cells' other seeds (:func:`queue_priority`).
    official:
        The released FedRAP code's per-round curves (:func:`official_lines`).
    partial:
        Jobs timed only in part (:func:`partial_rates`); the packaged ``expected/compute.yaml`` when None.
    outdated:
        Grid records the configuration has moved past (:func:`outdated_lines`).
    """
    done = frame[frame["recorded"]] if not frame.empty else frame
    on_gpu = done[~_on_cpu(done)] if not frame.empty else done
    estimated = int(done["pieces_estimated"].sum()) if "pieces_estimated" in done else 0
    lines = _intro_lines(on_gpu, estimated)
    if frame.empty:
        return "\n".join(lines + ["No paper-tier jobs."]) + "\n"
    # GPU hours are another resource: only CPU records price the jobs not run yet; nor does a record
    # assembled from its grid points' (it costs nothing, a job of its family elsewhere costs the grid)
    cpu_done = done[_on_cpu(done)]
    pricing = cpu_done[~cpu_done["assembled"]] if "assembled" in cpu_done else cpu_done
    lines += _recorded_lines(done)
    todo = frame[~frame["recorded"]].copy()
    if len(todo):
        points = frame[grid_point_rows(frame)]
        assembled = set(zip(points["paper"], points["dataset"], points["method"].str.replace(GRID_POINT_PATTERN, "",
                                                                                            regex=True)))
        prices = estimates(todo, pricing, partial_rates() if partial is None else partial, assembled)
        todo["estimate"] = [price for price, _ in prices]
        todo["estimate_basis"] = [basis for _, basis in prices]
        todo["scaled"], todo["scaled_from"] = scaled_estimates(
            todo, pricing, dataset_sizes() if sizes is None else sizes)
        if len(on_gpu):
            # the GPU column: every job not run, scaled from the GPU records' wall hours
            todo["gpu"], todo["gpu_from"] = scaled_estimates(
                todo, on_gpu.assign(wall_hours=on_gpu["wall_hours"].astype(float)),
                dataset_sizes() if sizes is None else sizes, hours="wall_hours", every_job=True)
        todo["here"] = _data_here(todo, availability)
        lines += _remaining_lines(todo)
        here = todo[todo["here"]].copy()
        if len(here):
            picked = {(i["paper"], i["dataset"], i["method"]) for i in map(run_identity, picked_runs) if i}
            # on every job, recorded or not: a dataset's first seed is the tier's, not the first one left
            papers = sorted(set(frame["paper"]))
            priority = queue_priority(frame, _published_cells(papers), picked, _claimed_runs(papers))
            here["priority"] = priority.loc[here.index]
            lines += _queue_lines(here)
    lines += outdated_lines(outdated)
    lines += official_lines(official)
    gpu = (f"; {len(on_gpu)} of them on a GPU, {_hours(float(on_gpu['wall_hours'].astype(float).sum()))} "
           "GPU-hours (wall hours), not in the CPU-hours" if len(on_gpu) else "")
    lines += [f"Recorded: {len(done)} of {len(frame)} paper-tier jobs, "
              f"{_hours(float(cpu_done['cpu_hours'].astype(float).sum()))} CPU-hours{gpu}.", ""]
    return "\n".join(lines)



def _intro_lines(on_gpu: pd.DataFrame, estimated: int = 0) -> list[str]:
    """The page's title and its paragraphs on how it is made, what its hours are and how to run the queue."""
    pieces = ("A run resumed from a checkpoint sums the times of its pieces (the checkpoint's usage "
              "ledger). ")
    if estimated:
        one = estimated == 1
        their = "its" if one else "their"
        pieces += (f"{estimated} resumed {'record predates' if one else 'records predate'} the ledger and "
                   f"measured only {their} last piece: {their} wall time is the sum of {their} per-epoch or "
                   f"per-round seconds, and {their} CPU time is that sum times the last piece's CPU / wall ratio "
                   "(a lower bound).")
    if len(on_gpu):
        names = ", ".join(sorted({str(d) for d in on_gpu["device"].dropna()}))
        devices = (f"{len(on_gpu)} records ran on a GPU ({names}): they have their own rows under Recorded, "
                   "where their wall hours are GPU-hours, and stay out of the CPU-hour means that price the "
                   "jobs not run yet. Jobs that shared one card (the paper tier runs several PRISM jobs at once "
                   "on a GPU) each count their own wall time, so these GPU-hours are an upper bound on the card's.")
    else:
        devices = ("No GPU-hours are measured yet: the device of every record is `cpu`, so every number here "
                   "is CPU-hours. A GPU run's records would be priced separately: rows of their own under "
                   "Recorded, kept out of the CPU-hour means that price the jobs not run yet.")
    return [
        "# Compute: the paper tier",
        "",
        "Generated from the run records under `results/paper/` (their `provenance.json`: wall time, CPU "
        "time, torch threads, device, peak memory) and the paper tier's list of jobs; redraw with "
        "`snakemake --cores 2 docs/compute.md --config tier=paper from_records=true`. CPU-hours are the "
        "CPU time each job measured (records from before that measure: wall hours × torch threads, an "
        "upper bound); a job not run yet is priced at the mean of the recorded jobs of the same paper, "
        "dataset and method (its other seeds; else of the same method family, else of the same paper and "
        "dataset; else not priced, and given a "
        "scaled estimate from another dataset where one can be made: see Remaining). The tuned simple "
        "baselines (paper `strong`, `docs/strong-baselines.md`) are one job per model and split: its grid "
        "searched on validation, then the pick tested on every seed; its wall time is the sum of the grid "
        "points' seconds (`grid.json`) and the test runs', its CPU time the last test run's (each measures "
        "the whole job), plus the grid points a killed job had scored before it was started again; they get no scaled estimate (EASE inverts an items × items matrix, and every grid "
        "point ranks all items for every user: their cost is not linear in interactions). " + pieces.rstrip(),
        "",
        devices,
        "",
        "Running the queue: ask Snakemake for the records of a row below (`--config tier=paper "
        "'data={mirror: <folder>}'`; add `device=cuda` on a GPU). Training jobs checkpoint after epochs or "
        "rounds (writing at most 2 % of the time) under `checkpoints/` and resume after a kill, so long cells can run in pieces on machines "
        "that stop jobs. On one GPU several training jobs can share the card (a PRISM job takes one CPU thread): "
        "`snakemake --cores 14 <records> --config device=cuda ...` runs 14 at once, since a local run limits "
        "the rules' `gpu` resource only when `--resources gpu=N` is given. On a CPU with fewer jobs left than "
        "cores, give each job the spare cores: `snakemake <records> --cores 2 --set-threads prism_train=2 "
        "--config ...` (targets first: `--set-threads` and `--config` take every argument after them). "
        "Name only records not yet run, and redraw with `from_records=true`: a committed record is older "
        "than a split made after the checkout (data fetched later), so Snakemake trains it again when it "
        "is named or a named file needs it, and replaces its committed files; `git ls-files -z results/paper "
        "| xargs -0 touch` after making the data marks the committed records as newer than their splits. "
        "A finished record is complete "
        "and can be committed at once (`git add results/paper`: "
        "`.gitignore` keeps weights, checkpoints and the large per-user and per-item files out). Then "
        "`snakemake --cores 2 --config tier=paper from_records=true` redraws the tables, figures, "
        "scorecards, `results/paper/README.md` and this page.",
        "",
    ]


def _recorded_lines(done: pd.DataFrame) -> list[str]:
    """The "Recorded" table: measured cost per paper, dataset and kind of device (CPU and GPU rows apart)."""
    lines = ["## Recorded", "",
             "| paper | dataset | jobs | CPU-hours | wall hours | mean CPU-h / job | peak RSS (MB) | device |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    kind = done["device_type"].fillna("cpu") if "device_type" in done else pd.Series("cpu", index=done.index)
    for (paper, dataset, _), g in done.assign(_kind=kind).groupby(["paper", "dataset", "_kind"], sort=True):
        cpu = g["cpu_hours"].astype(float)
        rss = pd.to_numeric(g["peak_rss_mb"], errors="coerce")
        devices = ", ".join(sorted({str(d) for d in g["device"].dropna()}))
        lines.append(f"| {paper} | {dataset} | {len(g)} | {_hours(cpu.sum())} | {_hours(g['wall_hours'].astype(float).sum())} | "
                     f"{_hours(cpu.mean())} | {rss.max():.0f} | {devices} |")
    lines.append("")
    return lines



def _from_other_methods(g: pd.DataFrame) -> str:
    """" (k from other methods' jobs; j by cost ratios; i timed in part)": the rows priced from their
    dataset's other methods only, those priced by their family's cost relative to others measured on
    other datasets, and those priced from their own rounds timed in part (:func:`partial_rates`)."""
    basis = g["estimate_basis"] if "estimate_basis" in g else pd.Series(dtype=object)
    k, j, i = (int((basis == name).sum()) for name in ("dataset", "ratio", "partial"))
    parts = ([f"{k} from other methods' jobs"] * bool(k) + [f"{j} by cost ratios"] * bool(j)
             + [f"{i} timed in part"] * bool(i))
    return f" ({'; '.join(parts)})" if parts else ""



def _scaled_cell(g: pd.DataFrame, column: str = "scaled") -> str:
    """``≈ <total> (<n> jobs, from <reference>)`` over the jobs of ``g`` with a scaled estimate in
    ``column`` (its reference datasets in ``<column>_from``), else ``""``."""
    scaled = g[column].dropna()
    if not len(scaled):
        return ""
    refs = ", ".join(sorted(set(g[f"{column}_from"].dropna())))
    return f"{_approx(float(scaled.sum()))} ({len(scaled)} job{'s' if len(scaled) != 1 else ''}, from {refs})"


def _data_here(todo: pd.DataFrame, availability: Mapping[str, str]) -> list[bool]:
    """Whether the mirror serves each job's data: the canonical files, or a reconstructed form its
    protocol accepts (ML-1M's (user, movie) pairs serve PRISM and not FedRAP, which needs the
    ratings' timestamps: :func:`recrepro.datasets.availability.reachable`)."""
    protocols = todo["protocol"] if "protocol" in todo else todo["paper"]
    return [reachable(availability.get(dataset, "missing"), dataset, str(protocol))
            for dataset, protocol in zip(todo["dataset"], protocols)]


def _remaining_lines(todo: pd.DataFrame) -> list[str]:
    """The "Remaining" table, its total over the priced jobs and, apart, over the scaled estimates
    (``todo["here"]``: :func:`_data_here`)."""
    lines = ["## Remaining", "",
             "Priced jobs and their estimated CPU-hours come from measured jobs of their own paper and dataset. "
             "The scaled estimate is for the jobs with none: the mean CPU-hours of the recorded jobs of the "
             "same paper and method family on a reference dataset (of those it has records on, the one with "
             "the most interactions; a family with no record anywhere: all the paper's recorded jobs on its "
             "largest recorded dataset) × the ratio of the two datasets' interactions (`n_interactions` in "
             "`src/recrepro/datasets/catalogue.yaml`: the raw release as its description counts it, before a paper's "
             "filters). It is linear in interactions because training steps per epoch are; full-ranking "
             "evaluation grows with users × items, and a paper may set other epochs or grids on a larger "
             "dataset, so it understates large catalogues: an order of magnitude, not a price, and never "
             "counted among the priced jobs. A priced job with no record of its own method or method "
             "family on its dataset is priced by cost ratios where its family ran beside others on other "
             "datasets (its cost there relative to each of them, times theirs here; geometric mean), else "
             "from the dataset's other methods' jobs; the priced-jobs column counts both, as their price "
             "is an extrapolation and the second can be far off (a method whose steps cost more than its "
             "dataset's other methods'). A job whose own rounds were timed but whose run has not finished here "
             "is priced from those rounds (\"timed in part\": `src/recrepro/expected/compute.yaml` says when, "
             "on what and where it is written up), ahead of both.", ""]
    gpu = "gpu" in todo
    if gpu:
        lines += ["The GPU column scales every job not run the same way from the records that ran on a GPU "
                  "(their wall hours, one job at a time on one GPU; a family with no GPU record: the paper's "
                  "GPU records on their largest dataset). Several small jobs can share one GPU, so it is an "
                  "upper bound for a queue run that way, and, like the scaled estimate, an order of magnitude.",
                  ""]
    lines += ["| paper | dataset | data here | jobs | priced jobs | estimated CPU-hours | "
              "scaled estimate (CPU-hours) |" + (" on one GPU (GPU-hours) |" if gpu else ""),
              "|---|---|---|---:|---:|---:|---|" + ("---|" if gpu else "")]
    total, unpriced = 0.0, 0
    for (paper, dataset), g in todo.groupby(["paper", "dataset"], sort=True):
        here = ("yes" if g["here"].all() else "no" if not g["here"].any()
                else f"for {int(g['here'].sum())} of {len(g)} jobs")
        est = g["estimate"].dropna()
        total += float(est.sum())
        unpriced += int(g["estimate"].isna().sum())
        lines.append(f"| {paper} | {dataset} | {here} | {len(g)} | "
                     f"{len(est)}{_from_other_methods(g)} | "
                     f"{_hours(float(est.sum())) if len(est) else 'not measured'} | {_scaled_cell(g)} |"
                     + (f" {_scaled_cell(g, 'gpu')} |" if gpu else ""))
    scaled = todo["scaled"].dropna()
    lines += ["", f"Remaining: {len(todo)} jobs; the {len(todo) - unpriced} priced ones ≈ {_hours(total)} CPU-hours "
              f"on this tier's settings; {unpriced} jobs have no measured job of their kind yet."]
    if len(scaled):
        lines[-1] += (f" Scaled estimate, apart from that total: {len(scaled)} of these {unpriced} "
                      f"{_approx(float(scaled.sum()))} CPU-hours; {unpriced - len(scaled)} have no reference "
                      "dataset or no known size.")
    if gpu and todo["gpu"].notna().any():
        lines[-1] += (f" On one GPU: {todo['gpu'].notna().sum()} of the {len(todo)} "
                      f"{_approx(float(todo['gpu'].dropna().sum()))} GPU-hours (scaled, as above).")
    lines.append("")
    return lines


def _queue_lines(here: pd.DataFrame) -> list[str]:
    """The "Queue" table: the jobs whose data is here, in :func:`queue_priority` order."""
    names = {0: "validation grids, comparisons at their picks, runs a claim names", 1: "published cells, first seed",
             2: "published cells and claimed runs, other seeds", 3: "figure sweeps and unpublished runs"}
    lines = ["## Queue (data here, in order)", "",
             "What to run next with the data at hand: the validation grids a claim's verdict waits for, the "
             "comparisons at their picks and the first seed of every run a claim's check names, then published "
             "cells at the paper's budget on one seed, then their other seeds and a claimed run's (a tuned "
             "weight decay's other seeds follow its pick on the first seed), then the figures' sweeps. Ask Snakemake for the run records of a row, e.g. "
             "`snakemake --cores 2 results/paper/<paper>/runs/<dataset>/.../<method>/seed<k>/metrics.json "
             "--config tier=paper`; for a `strong` row, its model's grid record on each split: "
             "`results/paper/baselines/strong/<dataset>/<protocol>/<split>/<model>/split<s>/grid.json`.", ""]
    gpu = "gpu" in here
    if gpu:
        lines += ["The GPU column is the Remaining table's: one job at a time on one GPU (an upper bound when "
                  "jobs share the card).", ""]
    lines += ["| order | paper | dataset | jobs | estimated CPU-hours |" + (" on one GPU (GPU-hours) |" if gpu else "")
              + " methods |", "|---:|---|---|---:|---:|" + ("---|" if gpu else "") + "---|"]
    for (prio, paper, dataset), g in here.groupby(["priority", "paper", "dataset"], sort=True):
        est = g["estimate"].dropna()
        methods = sorted(set(g["method"]))
        if prio < 3:  # the cells' runs, each with its seeds: the queue to act on, in full
            seeds = g["run_dir"].str.extract(SEED_PATTERN)[0].astype(int).groupby(g["method"]).agg(sorted)
            word = "split" if paper == STRONG else "seed"
            shown = ", ".join(f"`{m}` ({word}{'s' if len(seeds[m]) > 1 else ''} {', '.join(map(str, seeds[m]))})"
                              for m in methods)
        else:
            shown = ", ".join(f"`{m}`" for m in methods[:6]) + (f" and {len(methods) - 6} more" if len(methods) > 6
                                                                 else "")
        measured = (_hours(float(est.sum())) + _from_other_methods(g)) if len(est) else "not measured"
        scaled = _scaled_cell(g)
        lines.append(f"| {prio}: {names[prio]} | {paper} | {dataset} | {len(g)} | "
                     f"{measured}{'; scaled ' + scaled if scaled else ''} |"
                     + (f" {_scaled_cell(g, 'gpu')} |" if gpu else "") + f" {shown} |")
    lines.append("")
    return lines
