"""Every performance measure of docs/performance.md in one run: ours vs its anchor, as ratios.

    python benchmarks/run_all.py [--quick] [--threads 1] [--only prism,ials] [--device cpu|cuda|auto] [--write-doc]

Each measure runs ours and its anchor side by side in this process and machine state, and
prints one JSON line ``{"measure", "ours_s", "anchor_s", "ratio", "goal", "holds", ...}``;
a table follows at the end.  Times are **process CPU seconds** unless a row says otherwise: on a
shared 2-core machine other jobs change wall times by tens of per cent from one minute to the next,
CPU seconds of the same work far less, and a ratio of two CPU times taken in one process is what
the goals are about.  ``--threads`` sets torch's threads (and BLAS's, before numpy loads);
``--quick`` uses smaller samples and fewer repeats (≤ 10 min on 2 cores).

``--device`` (default ``cpu``) says where ours and the anchor run: ``cuda`` runs every measure with a
CUDA path (PRISM trainer and DirectAU step, full-ranking evaluation, iALS / exADMM, λOpt, FedRAP) on
the GPU, ``auto`` is ``cuda`` when torch sees one and ``cpu`` otherwise; ``cuda`` on a machine without
one is an error and runs nothing.  On CUDA the process's CPU seconds say nothing about the work, so
every stamp is the wall clock read right after ``torch.cuda.synchronize()`` (the row's ``clock``:
``wall s (cuda, synchronised)``).  A row without a same-device anchor (iALS against ``implicit``'s
CPU ALS) is reported on CUDA with ours only and a note.  Every row names its ``device`` (``cpu`` or
the GPU's name).

Data: the gowalla LightGCN files from the mirror (``RECREPRO_MIRROR``, default
``../shared/datasets``) and the splits under ``RECREPRO_DATA_ROOT`` (default ``data``):
``splits/gowalla/prism/random_ratio/seed123``, ``splits/ml-100k/lambdaopt/temporal_user_ratio/seed0``,
``splits/<dataset>/fedrap/leave_one_out/seed0``.  A measure whose data is missing is reported as
skipped, with the reason.  ``redraw`` needs no data: it redraws the committed records in fresh
copies of the checkout (``benchmarks/bench_redraw.py``), timed in its children's CPU seconds.

``--write-doc`` replaces the generated block of ``docs/performance.md`` (between the
``run_all`` markers; on CUDA the ``run_all_cuda`` markers, so the CPU table stays) with the table,
the command, the date and the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BEGIN, END = "<!-- run_all:begin -->", "<!-- run_all:end -->"
#: the block a CUDA run writes (the CPU block above is never touched by one)
CUDA_BEGIN, CUDA_END = "<!-- run_all_cuda:begin -->", "<!-- run_all_cuda:end -->"
DEVICES = ("cpu", "cuda", "auto")


def data_root() -> Path:
    return Path(os.environ.get("RECREPRO_DATA_ROOT", ROOT / "data"))


def mirror() -> Path:
    return Path(os.environ.get("RECREPRO_MIRROR", ROOT / ".." / "shared" / "datasets"))


def _split(*parts: str) -> Path:
    path = data_root() / "splits" / Path(*parts)
    if not (path / "manifest.json").exists():
        raise FileNotFoundError(f"split {path} is missing (build it with the paper tier's split rule)")
    return path


def _prism(quick: bool, device: str) -> list[dict]:
    import bench_prism

    split = _split("gowalla", "prism", "random_ratio", "seed123")
    return bench_prism.measure_trainer(split, quick=quick, device=device) + [
        bench_prism.measure_directau(split, batches=8 if quick else 20, device=device)]


def _full_ranking(quick: bool, device: str) -> list[dict]:
    import bench_full_ranking

    if not (mirror() / "gowalla" / "train.txt").exists():
        raise FileNotFoundError(f"{mirror() / 'gowalla'} has no LightGCN train.txt")
    os.environ.setdefault("RECREPRO_MIRROR", str(mirror()))
    return bench_full_ranking.measure(quick, device)


def _ials(quick: bool, device: str) -> list[dict]:
    import bench_ials

    if not (mirror() / "gowalla" / "train.txt").exists():
        raise FileNotFoundError(f"{mirror() / 'gowalla'} has no LightGCN train.txt")
    return bench_ials.measure(quick, mirror(), device)


def _lambdaopt(quick: bool, device: str) -> list[dict]:
    import bench_lambdaopt

    return bench_lambdaopt.measure(quick, str(_split("ml-100k", "lambdaopt", "temporal_user_ratio", "seed0")), device)


def _fedrap(quick: bool, device: str) -> list[dict]:
    import bench_fedrap

    return bench_fedrap.measure(quick, device) + [bench_fedrap.measure_dense_step(quick, device)]


def _strong(quick: bool, device: str) -> list[dict]:
    import bench_strong

    if not (mirror() / "gowalla" / "train.txt").exists():
        raise FileNotFoundError(f"{mirror() / 'gowalla'} has no LightGCN train.txt")
    return bench_strong.measure(quick, mirror())


def _redraw(quick: bool, device: str) -> list[dict]:
    import bench_redraw

    return bench_redraw.measure(quick, device)


#: name -> the function giving that group's rows from ``(quick, device)`` (in the order of the issue's goal table)
GROUPS: dict[str, Callable[[bool, str], list[dict]]] = {
    "prism": _prism, "full_ranking": _full_ranking, "ials": _ials, "lambdaopt": _lambdaopt, "fedrap": _fedrap,
    "redraw": _redraw, "strong": _strong,
}


def fmt(value) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def table(rows: list[dict]) -> str:
    lines = ["| measure | ours (s) | anchor (s) | ratio | goal | holds |", "|---|---:|---:|---:|---|---|"]
    for row in rows:
        holds = {True: "yes", False: "**no**", None: "—"}[row.get("holds")]
        note = f" ({row['note']})" if row.get("note") else ""
        lines.append(f"| {row['measure']}{note} | {fmt(row.get('ours_s'))} | {fmt(row.get('anchor_s'))} | "
                     f"{fmt(row.get('ratio'))} | {row.get('goal', '')} | {holds} |")
    return "\n".join(lines)


def machine(threads: int) -> str:
    import platform

    import numpy as np
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU") if Path("/proc/cpuinfo").exists() else "unknown CPU"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"{cpu}, {os.cpu_count()} cores, {device}; load average {load:.1f} at the start; Python "
            f"{platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}, {threads} thread(s)")


def resolve_device(spec: str) -> str:
    """The device a ``--device`` value runs on: ``auto`` is ``cuda`` when torch sees a GPU, else ``cpu``.

    ``cuda`` is returned as asked (:func:`main` checks that torch sees one before anything runs).
    """
    import torch

    if spec == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return spec


def write_doc(doc: Path, rows: list[dict], command: str, started: str, about: str, seconds: float,
              markers: tuple[str, str] = (BEGIN, END)) -> None:
    """Replace the generated block of ``doc`` (between ``markers``) atomically.

    Parameters
    ----------
    markers:
        The block's begin and end lines: ``(BEGIN, END)`` for the CPU table, ``(CUDA_BEGIN, CUDA_END)``
        for a CUDA run's (everything outside the block, the other block included, is kept byte for byte).
    """
    begin, end = markers
    text = doc.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"{doc} has no {begin} ... {end} block to replace")
    block = (f"{begin}\n_Generated by `{command}` on {started} ({seconds / 60:.1f} min); {about}._\n\n"
             f"{table(rows)}\n{end}")
    head, rest = text.split(begin, 1)
    tmp = doc.with_suffix(".md.tmp")
    tmp.write_text(head + block + rest.split(end, 1)[1])
    tmp.replace(doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small samples, few repeats (≤ 10 min on 2 cores)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default="", help=f"comma-separated groups of {list(GROUPS)}")
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where ours and the anchors run: cpu (default), cuda, or auto (cuda when available)")
    parser.add_argument("--write-doc", action="store_true",
                        help="update docs/performance.md's generated block (the CUDA block on cuda)")
    args = parser.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here (use --device cpu or auto)")
    device = resolve_device(args.device)
    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(HERE))
    groups = [g for g in args.only.split(",") if g] or list(GROUPS)
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        parser.error(f"unknown group(s) {unknown}; known: {list(GROUPS)}")
    started, t0, about = dt.date.today().isoformat(), time.perf_counter(), machine(args.threads)
    from devclock import device_label

    label = device_label(device)
    rows: list[dict] = []
    for name in groups:
        try:
            new = GROUPS[name](args.quick, device)
        except (FileNotFoundError, ImportError) as exc:
            new = [{"measure": name, "ours_s": None, "anchor_s": None, "ratio": None, "goal": "", "holds": None,
                    "note": f"skipped: {exc}"}]
        for row in new:
            row.setdefault("device", label)  # skipped rows, and any measure that does not name its own
            print(json.dumps(row, ensure_ascii=False), flush=True)
        rows += new
    seconds = time.perf_counter() - t0
    print(table(rows))
    print(f"{len(rows)} measures in {seconds / 60:.1f} min; {about}")
    if args.write_doc:
        command = "python benchmarks/run_all.py" + (" --quick" if args.quick else "") + f" --threads {args.threads}"
        if args.only:  # a partial table says which groups it holds
            command += f" --only {args.only}"
        markers = (BEGIN, END)
        if device != "cpu":  # a GPU table goes to its own block: the CPU table stays as measured
            command += f" --device {device}"
            markers = (CUDA_BEGIN, CUDA_END)
        write_doc(ROOT / "docs" / "performance.md", rows, command, started, about, seconds, markers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
