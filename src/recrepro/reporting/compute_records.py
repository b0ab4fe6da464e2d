"""What each of a tier's jobs cost, from its record (``docs/compute.md``: :mod:`recrepro.reporting.compute_page`):
the job's identity from its record's path, and its wall and CPU hours, threads, device and peak memory
from its ``provenance.json`` (a tuned baseline's job: its ``grid.json`` and test runs)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.io import read_json
from recrepro.records import PROVENANCE_FILE, read_timings

__all__ = ["ASSEMBLED_FROM_POINTS", "GRID_POINT_PATTERN", "SEED_PATTERN", "STRONG", "compute_table", "grid_point_rows",
           "method_family", "run_identity"]


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


def run_identity(path: str | Path) -> dict[str, str] | None:
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
        ident = run_identity(path)
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

