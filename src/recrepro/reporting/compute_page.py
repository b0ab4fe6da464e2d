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
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.datasets.availability import reachable
from recrepro.datasets.registry import DATASETS
from recrepro.io import read_json, read_yaml_entries
from recrepro.records import PROVENANCE_FILE, read_timings

__all__ = ["compute_markdown", "compute_table", "method_family"]


#: the ``paper`` of a tuned simple baseline's job (issue 48): one job per model and split, its grid on
#: validation and the pick's test on every seed (``results/<tier>/baselines/strong/.../split<s>/grid.json``)
STRONG = "strong"

#: a job's seed (a run's training seed; a tuned baseline's split seed) at the end of its folder
SEED_PATTERN = r"(?:seed|split)(\d+)$"

#: a validation-grid point's run (``<method>-gNN``)
GRID_POINT_PATTERN = r"-g\d+$"

#: papers whose grid points are each one setting of a job that elsewhere trains the whole grid, and whose
#: ``<method>`` record is then assembled from its points' (λOpt's MF-λFix one job per λ:
#: :mod:`recrepro.papers.lambdaopt.grid`): the assembly costs nothing, its points are the jobs
ASSEMBLED_FROM_POINTS = ("lambdaopt",)

#: jobs timed only in part (:func:`partial_rates`)
PARTIAL_RATES = Path(__file__).resolve().parents[1] / "expected" / "compute.yaml"
_PARTIAL_KEYS = {"paper", "dataset", "methods", "cpu_seconds_per_step", "steps", "measured", "source"}


class ComputeRatesError(ValueError):
    """``expected/compute.yaml`` (or the file given instead) is malformed."""


def partial_rates(path: str | Path = PARTIAL_RATES) -> list[dict[str, Any]]:
    """The jobs timed only in part: ``partial`` entries of ``path`` (see the file's header), validated.

    A measured round of the job itself prices it better than any extrapolation from other methods or
    datasets: FedRAP's paper objective at LastFM's pick runs its rounds on the dense path, about 80 times
    the cost its released-code mode's records and the other datasets' cost ratios imply.
    """
    out = []
    for where, entry in read_yaml_entries(path, "partial", _PARTIAL_KEYS, ComputeRatesError):
        methods = entry["methods"]
        if not (isinstance(methods, list) and methods and all(isinstance(m, str) and m for m in methods)):
            raise ComputeRatesError(f"{where}: 'methods' must be a non-empty list of names")
        for key in ("cpu_seconds_per_step", "steps"):
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ComputeRatesError(f"{where}: '{key}' must be a positive number, got {value!r}")
        out.append(dict(entry))
    return out


def _run_identity(path: str | Path) -> dict[str, str] | None:
    """paper, dataset, method of ``results/<tier>/<paper>/runs/<dataset>/.../<method>/seed<k>/...``, or
    of a tuned baseline's ``results/<tier>/baselines/strong/<dataset>/<protocol>/<split>/<model>/split<s>/grid.json``
    (paper :data:`STRONG`), and the protocol whose preprocessed data it needs (a trained paper's own;
    a baseline's from its path): a reconstructed form in the mirror serves some protocols only."""
    parts = Path(path).parts
    if "strong" in parts and parts[-1] == "grid.json":
        i = parts.index("strong")
        tail = parts[i + 1:-1]
        if parts[i - 1] == "baselines" and len(tail) == 5 and tail[-1].startswith("split"):
            # the split in the name: a dataset may have two protocols (gowalla: PRISM's and LightGCN's)
            return {"paper": STRONG, "dataset": tail[0], "method": f"{tail[3]} · {tail[2]}",
                    "protocol": tail[1], "run_dir": str(Path(*parts[:-1]))}
        return None
    if "runs" not in parts:
        return None
    i = parts.index("runs")
    tail = [p for p in parts[i + 1:] if not p.endswith(".json") and not p.endswith(".parquet")]
    if len(tail) < 3 or not tail[-1].startswith("seed"):
        return None
    paper = parts[i - 1]
    # the data a job needs: its paper's preprocessing, or the protocol a baseline's path names
    protocol = tail[1] if paper == "baselines" and len(tail) >= 5 else paper
    return {"paper": paper, "dataset": tail[0], "method": tail[-2], "protocol": protocol,
            "run_dir": str(Path(*parts[:i + 1 + len(tail)]))}


#: Per-epoch / per-round wall seconds in a record's timings (PRISM's ``history.json``;
#: FedRAP's and λOpt's ``history.parquet``).
STEP_SECONDS_KEYS = ("epoch_seconds", "seconds")


def _step_seconds(run_dir: Path) -> float | None:
    """Sum of the record's per-epoch / per-round seconds over every piece it ran in, or None."""
    # rows that are not epochs (λ-Fix's grid rows beside its epochs) hold no seconds: NaN / null
    found = [float(x) for entry in read_timings(run_dir).values() if isinstance(entry, dict)
             for key, v in entry.items() if key in STEP_SECONDS_KEYS and isinstance(v, list)
             for x in v if isinstance(x, (int, float)) and math.isfinite(x)]
    return sum(found) if found else None


def _whole_run_seconds(prov: Mapping[str, Any], run_dir: Path) -> tuple[float, float | None, bool]:
    """Wall and CPU seconds of the whole run, and whether they were estimated.

    A record's ``wall_seconds`` and ``cpu_seconds`` sum its pieces when the earlier ones were
    measured (:mod:`recrepro.runtime.checkpoints`, the usage ledger).  A record resumed from a
    checkpoint without a ledger measured only its last piece, while its per-epoch seconds
    cover every piece: where they add up to more than its wall time, the run's wall time is
    taken as their sum and its CPU time scaled by the last piece's CPU / wall ratio
    (a lower bound: the earlier pieces' start-up is not in it).
    """
    wall = float(prov.get("wall_seconds") or 0.0)
    cpu = prov.get("cpu_seconds")
    earlier = prov.get("earlier_pieces")
    if earlier is not None and earlier.get("wall_seconds") is not None:
        return wall, cpu, False  # measured over every piece
    if prov.get("grid_points"):
        # assembled from its grid points' records (ASSEMBLED_FROM_POINTS): their epochs' seconds are in its
        # history, their cost in their own records; its own is the assembly's
        return wall, cpu, False
    steps = _step_seconds(run_dir)
    if steps is None or steps <= wall:
        return wall, cpu, False
    return steps, (None if cpu is None or wall <= 0 else float(cpu) * steps / wall), True


def _strong_usage(split_dir: Path) -> dict[str, Any]:
    """A tuned baseline's job cost: wall time = its grid points' seconds + its test runs' (their
    ``provenance.json``); CPU time = the largest of the test runs' (each measures the whole process,
    the grid included, so the last one's is the job's), plus the CPU seconds of the points an earlier,
    killed process scored (``resumed_points``: that process's time is not in the test runs')."""
    grid = read_json(split_dir / "grid.json")
    provs = [read_json(split_dir / run / PROVENANCE_FILE) for run in grid.get("runs", [])
             if (split_dir / run / PROVENANCE_FILE).is_file()]
    wall = sum(float(p.get("seconds") or 0.0) for p in grid.get("points", []) if isinstance(p, dict))
    wall += sum(float(p.get("wall_seconds") or 0.0) for p in provs)
    cpus = [float(p["cpu_seconds"]) for p in provs if p.get("cpu_seconds") is not None]
    threads = max([int((p.get("threads") or {}).get("torch_num_threads") or 1) for p in provs] or [1])
    points = {int(p["point"]): p for p in grid.get("points", []) if isinstance(p, dict) and "point" in p}
    earlier = [points[i] for i in grid.get("resumed_points", []) if i in points]
    if cpus and earlier:
        cpus = [max(cpus) + sum(float(p.get("cpu_seconds", float(p.get("seconds") or 0.0) * threads))
                                for p in earlier)]
    device = next((str(p.get("device")) for p in provs if p.get("device")), "cpu")
    rss = [float(p["peak_rss_mb"]) for p in provs if p.get("peak_rss_mb") is not None]
    return {"wall_hours": wall / 3600, "pieces_estimated": False,
            "cpu_hours": (max(cpus) if cpus else wall * threads) / 3600, "threads": threads,
            "peak_rss_mb": max(rss) if rss else None,
            "device": next((str(p.get("device_name")) for p in provs if p.get("device_name")), device),
            "device_type": device.split(":")[0]}


def compute_table(expected_runs: Sequence[str], results_root: str | Path = ".") -> pd.DataFrame:
    """One row per expected run (or tuned baseline's job): identity, whether its record exists, and its
    measured cost."""
    rows = []
    root = Path(results_root)
    for path in dict.fromkeys(expected_runs):
        ident = _run_identity(path)
        if ident is None:
            continue
        run_dir = root / ident["run_dir"]
        if ident["paper"] == STRONG:
            row: dict[str, Any] = {**ident, "recorded": (run_dir / "grid.json").is_file()}
            if row["recorded"]:
                row.update(_strong_usage(run_dir))
            rows.append(row)
            continue
        prov_path = run_dir / PROVENANCE_FILE
        row = {**ident, "recorded": (run_dir / "metrics.json").is_file()}
        if row["recorded"] and prov_path.is_file():
            prov = read_json(prov_path)
            threads = (prov.get("threads") or {}).get("torch_num_threads") or 1
            wall, cpu, estimated = _whole_run_seconds(prov, run_dir)
            # measured CPU time where the record has it; older records: wall × threads (an upper bound)
            row.update({"wall_hours": wall / 3600, "pieces_estimated": estimated,
                        "cpu_hours": (float(cpu) if cpu is not None else wall * int(threads)) / 3600,
                        "threads": int(threads), "peak_rss_mb": prov.get("peak_rss_mb"),
                        "device": prov.get("device_name") or prov.get("device") or "cpu",
                        # "cuda:0" -> "cuda": what kind of hours the record's wall time is
                        "device_type": str(prov.get("device") or "cpu").split(":")[0],
                        "assembled": bool(prov.get("grid_points"))})
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    for col in ("wall_hours", "cpu_hours", "peak_rss_mb", "threads", "device", "device_type"):
        if col not in frame:
            frame[col] = pd.NA
    frame["pieces_estimated"] = (frame["pieces_estimated"].fillna(False).astype(bool)
                                 if "pieces_estimated" in frame else False)
    frame["assembled"] = frame["assembled"].fillna(False).astype(bool) if "assembled" in frame else False
    frame["family"] = method_family(frame["method"])
    # one λ of MF-λFix's grid costs a fraction of the one job that trains the whole grid elsewhere
    points = grid_point_rows(frame)
    frame.loc[points, "family"] = frame.loc[points, "family"] + "_point"
    return frame


def grid_point_rows(frame: pd.DataFrame) -> pd.Series:
    """Which rows are one grid point of a record assembled from its points (MF-λFix's ``lambdafix-gNN``)."""
    return frame["paper"].isin(ASSEMBLED_FROM_POINTS) & frame["method"].str.contains(GRID_POINT_PATTERN)


def method_family(methods: pd.Series) -> pd.Series:
    """The method family of each run name: the name without the parts that name a setting of the
    same training loop — a weight decay, strength or sweep point (``_wd1em6``, ``_a025``, ``_sw2``), a
    validation-grid point (``-g07``), the tuned pick (``_tuned``) and the released code's negative
    pool (``_pool``), which cost what the family's other runs cost per step. A learning rate
    (``_lr1em2``) stays: it sets how many epochs a run takes (PRISM's runs at lr 0.01 stop within tens
    of epochs where those at 1e-3 take hundreds), so runs at one learning rate price each other.

    >>> import pandas as pd
    >>> method_family(pd.Series(["mf_bpr_wd1em6", "fedmf-g03", "pfedrec_pool_tuned", "fedrap_code_pool",
    ...                          "mf_ssm_wd1em6_lr1em2", "mf_ssm_prism_a025_lr1em1"])).tolist()
    ['mf_bpr', 'fedmf', 'pfedrec', 'fedrap_code', 'mf_ssm_lr1em2', 'mf_ssm_prism_lr1em1']
    """
    return (methods.str.replace(r"-g\d+$", "", regex=True)
            .str.replace(r"_tuned$", "", regex=True)
            .str.replace(r"_pool(?=_|$)", "", regex=True)
            .str.replace(r"_(wd|bwd|sw|a)[0-9a-z]*(?=(_lr[0-9a-z]+)?$)", "", regex=True))


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


def queue_priority(frame: pd.DataFrame, published: set[tuple[str, str, str]],
                   picked: set[tuple[str, str, str]] | frozenset = frozenset(),
                   claimed: set[tuple[str, str, str]] | frozenset = frozenset()) -> pd.Series:
    """0: a validation-grid point (``<method>-gNN``), a tuned simple baseline's job (paper :data:`STRONG`),
    a comparison at a grid's pick (``<method>_tuned``)
    or, on its first seed, a run that a claim's check names (``claimed``: (paper, dataset, method
    pattern), dataset ``*`` for any; the runs a claim's verdict waits for); 1: a run of a published cell
    on its first seed; 2: its other seeds, and a claimed run's other seeds; 3: everything else (figure
    sweeps).

    A tuned-weight-decay cell (``<backbone>_<loss>_tunedwd``) needs its grid runs
    (``<backbone>_<loss>_wd*``) on the first seed; its other seeds follow the pick: a grid run
    on another seed is 2 when ``picked`` (paper, dataset, method) names its method as the
    cell's pick, else 3 (a figure's sweep).
    """
    seeds = frame["run_dir"].str.extract(SEED_PATTERN)[0].astype(int)
    first_seed = seeds.groupby([frame["paper"], frame["dataset"]]).transform("min")
    tuned = frame["method"].str.replace(r"_wd[0-9a-z]+$", "_tunedwd", regex=True)
    is_published = pd.Series([(p, d, m) in published or (p, d, t) in published
                              for p, d, m, t in zip(frame["paper"], frame["dataset"], frame["method"], tuned)],
                             index=frame.index)
    is_picked = pd.Series([(p, d, m) in picked for p, d, m in zip(frame["paper"], frame["dataset"], frame["method"])],
                          index=frame.index)
    grid_other_seed = (frame["method"] != tuned) & (seeds != first_seed) & ~is_picked
    priority = pd.Series(3, index=frame.index)
    priority[is_published & (seeds == first_seed)] = 1
    priority[is_published & (seeds != first_seed) & ~grid_other_seed] = 2
    is_claimed = pd.Series([_claimed(claimed, p, d, m) for p, d, m in
                            zip(frame["paper"], frame["dataset"], frame["method"])], index=frame.index, dtype=bool)
    priority[is_claimed & (seeds != first_seed) & (priority > 2)] = 2
    priority[is_claimed & (seeds == first_seed)] = 0
    priority[frame["method"].str.contains(r"(?:-g\d{2,}|_tuned)$", regex=True)] = 0
    priority[frame["paper"] == STRONG] = 0  # a tuned baseline's grid: what a "beats the strongest" claim waits for
    return priority


def _claimed(claimed: set[tuple[str, str, str]] | frozenset, paper: str, dataset: str, method: str) -> bool:
    return any(p == paper and d in ("*", dataset) and fnmatch.fnmatchcase(method, pattern)
               for p, d, pattern in claimed)


def _claimed_runs(papers: Sequence[str]) -> set[tuple[str, str, str]]:
    """(paper, dataset, method pattern) of every method a claim's check compares (``method``, ``than``,
    ``methods``, ``baselines``) or a claim's pending protocol names; dataset ``*`` where the check names
    none.  Patterns are the checks' own (``ials*``).  Of ``method`` and ``than`` only the first: the
    rest are stand-ins a check reads when the first has no records (FedRAP's default-flag runs for its
    runs at the validation pick), so the queue asks for the run the check wants, not for its stand-in."""
    from recrepro.scorecard import expected_path, load_expected

    out: set[tuple[str, str, str]] = set()
    for paper in papers:
        try:
            expected = load_expected(expected_path(paper))
        except (FileNotFoundError, ValueError):
            continue
        for claim in expected.claims:
            for check in claim.checks:
                names = (*check.method[:1], *check.than[:1], *check.methods, *check.baselines)
                out |= {(paper, d, n) for d in (check.datasets or ("*",)) for n in names}
            out |= {(paper, "*", n) for pending in claim.pending for n in pending.methods}
    return out


def _hours(x: float) -> str:
    return f"{x:.2f}" if x >= 0.01 else ("0" if x == 0 else "<0.01")


def _rough(x: float) -> str:
    """A scaled estimate: one decimal, as it is an extrapolation, not a measure."""
    return f"{x:.1f}" if x >= 0.05 else _hours(x)


def _approx(x: float) -> str:
    """``≈ 1.2``; ``< 0.01`` for a total too small to round (no "≈ <0.01")."""
    text = _rough(x)
    return f"< {text[1:]}" if text.startswith("<") else f"≈ {text}"


def _dataset_sizes() -> dict[str, int]:
    """Interactions of each registered dataset whose description states them."""
    return {name: spec.n_interactions for name, spec in DATASETS.items() if spec.n_interactions}


def _on_cpu(frame: pd.DataFrame) -> pd.Series:
    """True for the records that ran on the CPU (records without provenance count as CPU; they have no hours)."""
    kind = frame["device_type"] if "device_type" in frame else pd.Series("cpu", index=frame.index)
    return kind.fillna("cpu").astype(str) == "cpu"


#: rounds a released-code curve of ``benchmarks/official_fedrap.py`` runs (its ``--rounds`` default)
OFFICIAL_ROUNDS = 100


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
                     partial: Sequence[Mapping[str, Any]] | None = None) -> str:
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
        prices = _estimates(todo, pricing, partial_rates() if partial is None else partial, assembled)
        todo["estimate"] = [price for price, _ in prices]
        todo["estimate_basis"] = [basis for _, basis in prices]
        todo["scaled"], todo["scaled_from"] = _scaled_estimates(
            todo, pricing, _dataset_sizes() if sizes is None else sizes)
        if len(on_gpu):
            # the GPU column: every job not run, scaled from the GPU records' wall hours
            todo["gpu"], todo["gpu_from"] = _scaled_estimates(
                todo, on_gpu.assign(wall_hours=on_gpu["wall_hours"].astype(float)),
                _dataset_sizes() if sizes is None else sizes, hours="wall_hours", every_job=True)
        todo["here"] = _data_here(todo, availability)
        lines += _remaining_lines(todo)
        here = todo[todo["here"]].copy()
        if len(here):
            picked = {(i["paper"], i["dataset"], i["method"]) for i in map(_run_identity, picked_runs) if i}
            # on every job, recorded or not: a dataset's first seed is the tier's, not the first one left
            papers = sorted(set(frame["paper"]))
            priority = queue_priority(frame, _published_cells(papers), picked, _claimed_runs(papers))
            here["priority"] = priority.loc[here.index]
            lines += _queue_lines(here)
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


def _estimates(todo: pd.DataFrame, done: pd.DataFrame, partial: Sequence[Mapping[str, Any]] = (),
               assembled: set[tuple[str, str, str]] = frozenset()) -> list[tuple[float | None, str | None]]:
    """CPU-hours of each job not run yet and what priced it: the mean of its own method's records (its
    other seeds, ``"method"``), else the job's own rounds timed in part (``"partial"``,
    :func:`partial_rates`), else its family's (``"family"``), else its family's cost relative to the
    families that ran beside it on other datasets, applied to theirs here (``"ratio"``,
    :func:`_ratio_prices`), else its dataset's (``"dataset"``: other methods' jobs only, which can be far
    off), else ``(None, None)``.

    The method comes first because a family spans a grid whose points train for very different
    numbers of epochs (PRISM's weight decay 1e-2 stops after a few dozen, 1e-6 after 250): a
    tuned pick's other seeds cost what its first seed did, not the grid's mean. The ratio comes before
    the dataset's mean because a family can cost many times its siblings: FedRAP's paper objective
    took 6.5 times its released-code mode's CPU on ml-100k and 12 times on amazon-video, so where only
    the released-code mode has run its dataset's mean prices it at a fraction of what it costs.
    """
    method_mean = done.groupby(["paper", "dataset", "method"])["cpu_hours"].mean()
    family_mean = done.groupby(["paper", "dataset", "family"])["cpu_hours"].mean()
    dataset_mean = done.groupby(["paper", "dataset"])["cpu_hours"].mean()
    ratio_price = _ratio_prices(family_mean)

    def timed_in_part(r: Any) -> float | None:
        for entry in partial:
            if (entry["paper"], entry["dataset"]) == (r.paper, r.dataset) and \
                    any(fnmatch.fnmatchcase(r.method, pattern) for pattern in entry["methods"]):
                return float(entry["cpu_seconds_per_step"]) * float(entry["steps"]) / 3600.0
        return None

    def price(r: Any) -> tuple[float | None, str | None]:
        key = (r.paper, r.dataset, r.method)
        if key in assembled:    # its grid points are the jobs (``assembled``: (paper, dataset, method))
            return 0.0, "assembled"
        if key in method_mean.index and pd.notna(method_mean[key]):
            return float(method_mean[key]), "method"
        if (hours := timed_in_part(r)) is not None:
            return hours, "partial"
        for basis, table, key in (("family", family_mean, (r.paper, r.dataset, r.family)),
                                  ("ratio", ratio_price, (r.paper, r.dataset, r.family)),
                                  ("dataset", dataset_mean, (r.paper, r.dataset))):
            if key in table.index and pd.notna(table[key]):
                return float(table[key]), basis
        return None, None

    return [price(r) for r in todo.itertuples(index=False)]


def _ratio_prices(family_mean: pd.Series) -> pd.Series:
    """(paper, dataset, family) -> CPU-hours for the families with no record on a dataset: the geometric
    mean, over every other family G recorded on that dataset and every other dataset D' where both ran,
    of cost(family, D') / cost(G, D') × cost(G, dataset).

    A cost ratio between two methods of one paper carries across datasets far better than a level does
    (their steps differ by a factor, the dataset scales both); the geometric mean keeps one outlying
    pair from dominating.
    """
    frame = family_mean.rename("hours").reset_index()
    frame = frame[frame["hours"] > 0]
    out: dict[tuple[str, str, str], float] = {}
    for paper, g in frame.groupby("paper"):
        cost = g.set_index(["dataset", "family"])["hours"]
        datasets, families = set(g["dataset"]), set(g["family"])
        for dataset in datasets:
            here = set(g.loc[g["dataset"] == dataset, "family"])
            for family in families - here:
                logs = [math.log(cost[(other, family)] / cost[(other, sibling)] * cost[(dataset, sibling)])
                        for sibling in here for other in datasets - {dataset}
                        if (other, family) in cost.index and (other, sibling) in cost.index]
                if logs:
                    out[(paper, dataset, family)] = math.exp(sum(logs) / len(logs))
    index = pd.MultiIndex.from_tuples(list(out), names=["paper", "dataset", "family"]) if out else \
        pd.MultiIndex.from_tuples([], names=["paper", "dataset", "family"])
    return pd.Series(list(out.values()), index=index, dtype=float)


def _from_other_methods(g: pd.DataFrame) -> str:
    """" (k from other methods' jobs; j by cost ratios; i timed in part)": the rows priced from their
    dataset's other methods only, those priced by their family's cost relative to others measured on
    other datasets, and those priced from their own rounds timed in part (:func:`partial_rates`)."""
    basis = g["estimate_basis"] if "estimate_basis" in g else pd.Series(dtype=object)
    k, j, i = (int((basis == name).sum()) for name in ("dataset", "ratio", "partial"))
    parts = ([f"{k} from other methods' jobs"] * bool(k) + [f"{j} by cost ratios"] * bool(j)
             + [f"{i} timed in part"] * bool(i))
    return f" ({'; '.join(parts)})" if parts else ""


def _scaled_estimates(todo: pd.DataFrame, done: pd.DataFrame, sizes: Mapping[str, int],
                      hours: str = "cpu_hours", every_job: bool = False) -> tuple[list[float | None], list[str | None]]:
    """The scaled estimate of each job that :func:`_estimates` left unpriced, and its reference dataset.

    The reference of a paper and method family is the dataset, among those it has records on and
    whose size is known, with the most interactions (the nearest in scale to the large datasets
    that lack data here). The estimate is the family's mean CPU-hours there × interactions of the
    job's dataset / interactions of the reference: training steps per epoch grow with
    interactions. A family with no record anywhere falls back, as :func:`_estimates` does, to the
    paper: the mean of all its recorded jobs on the paper's largest recorded dataset. None where
    the paper has no reference either or the job's dataset has no known size.

    ``hours`` names the records' column to scale (``wall_hours`` of GPU records: GPU-hours);
    ``every_job`` scales every row, priced or not (the GPU estimate: no job is priced in GPU-hours).

    Returns
    -------
    tuple
        Hours (or None) and reference dataset name (or None), one each per row of ``todo``.
    """
    family_mean = done.groupby(["paper", "family", "dataset"])[hours].mean()
    reference: dict[tuple[str, str], tuple[str, int, float]] = {}
    for (paper, family, dataset), mean in family_mean.items():  # sorted: a tie in size keeps the first name
        n = sizes.get(dataset)
        if n and pd.notna(mean) and ((paper, family) not in reference or n > reference[(paper, family)][1]):
            reference[(paper, family)] = (dataset, n, float(mean))
    paper_mean = done.groupby(["paper", "dataset"])[hours].mean()
    paper_reference: dict[str, tuple[str, int, float]] = {}
    for (paper, dataset), mean in paper_mean.items():
        n = sizes.get(dataset)
        if n and pd.notna(mean) and (paper not in paper_reference or n > paper_reference[paper][1]):
            paper_reference[paper] = (dataset, n, float(mean))
    values: list[float | None] = []
    names: list[str | None] = []
    for r in todo.itertuples(index=False):
        ref = reference.get((r.paper, r.family)) or paper_reference.get(r.paper)
        n = sizes.get(r.dataset)
        # a tuned baseline is not linear in interactions (EASE inverts an items × items matrix; every
        # grid point ranks all items for every user): no scaled estimate rather than a wrong one
        if (pd.notna(r.estimate) and not every_job) or ref is None or not n or r.paper == STRONG:
            values.append(None)
            names.append(None)
        else:
            values.append(ref[2] * n / ref[1])
            names.append(ref[0])
    return values, names


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
             "`recrepro.datasets.registry`: the raw release as its description counts it, before a paper's "
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
