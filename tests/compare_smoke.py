"""Is the smoke tier unchanged? Compare two smoke runs' metrics and tables byte for byte.

A refactoring must not change what the pipeline computes (issue 24). Run the smoke tier on the
code before and after, then compare::

    python tests/compare_smoke.py run ccf2d34 /tmp/smoke-before     # a copy of that commit, smoke tier
    python tests/compare_smoke.py run HEAD /tmp/smoke-after
    python tests/compare_smoke.py compare /tmp/smoke-before /tmp/smoke-after

``run`` copies the commit's tracked files (``git archive``) to a fresh folder and runs
``snakemake --cores N`` there at low priority: the jobs import that copy's ``src/`` (the workflow
puts it first on ``PYTHONPATH``), so an editable install of another checkout does not leak in.
``compare`` takes two checkout folders (or their ``results/smoke`` folders) and compares every
``metrics.json`` byte for byte, and every table (``*.md``, ``*.csv``: results tables, scorecards,
summaries) byte for byte but for its wall-clock columns (:data:`WALL_CLOCK_COLUMN`, e.g. PRISM
Table 1's ``tuned_seconds_per_epoch``, FedRAP's ``s/round``): those differ between any two runs
of the same code. Figures, logs and provenance (with its timings) are left out for the same
reason (dates, hosts, seconds). It exits 1 when a file differs or is on one side only, and
prints which.

Not collected by pytest (not ``test_*.py``): one smoke run takes minutes.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import subprocess
import sys
from pathlib import Path

#: What a smoke run computes, as files: run metrics and the tables drawn from them.
COMPARED_PATTERNS = ("**/metrics.json", "**/*.md", "**/*.csv")

#: Table columns that hold wall-clock time (their header), blanked before tables are compared.
WALL_CLOCK_COLUMN = re.compile(r"seconds|^s/\w+$")


def smoke_results(folder: Path) -> Path:
    """``folder/results/smoke`` when ``folder`` is a checkout, else ``folder`` itself."""
    inside = folder / "results" / "smoke"
    return inside if inside.is_dir() else folder


def compared_files(results: Path) -> set[Path]:
    """The compared files below ``results``, relative to it."""
    return {path.relative_to(results) for pattern in COMPARED_PATTERNS for path in results.glob(pattern)
            if path.is_file()}


def _csv_without_wall_clock(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    keep = [i for i, name in enumerate(rows[0] if rows else []) if not WALL_CLOCK_COLUMN.search(name.strip())]
    return [[row[i] for i in keep if i < len(row)] for row in rows]


def _markdown_without_wall_clock(text: str) -> list[str]:
    """The lines of ``text``; in each pipe table, the wall-clock columns (by header) are dropped."""
    lines = text.splitlines()
    out: list[str] = []
    drop: set[int] = set()
    for n, line in enumerate(lines):
        if not line.startswith("|"):
            drop = set()
            out.append(line)
            continue
        cells = line.strip().strip("|").split("|")
        is_header = n + 1 < len(lines) and re.fullmatch(r"\|?[\s:|-]+\|?", lines[n + 1] or "x") is not None
        if is_header:
            drop = {i for i, cell in enumerate(cells) if WALL_CLOCK_COLUMN.search(cell.strip())}
        out.append("|".join(cell for i, cell in enumerate(cells) if i not in drop))
    return out


def same_result(before: Path, after: Path) -> bool:
    """Byte-identical, or for a table identical once its wall-clock columns are dropped."""
    old, new = before.read_bytes(), after.read_bytes()
    if old == new:
        return True
    if before.suffix == ".csv":
        return _csv_without_wall_clock(old.decode()) == _csv_without_wall_clock(new.decode())
    if before.suffix == ".md":
        return _markdown_without_wall_clock(old.decode()) == _markdown_without_wall_clock(new.decode())
    return False


def compare(before: Path, after: Path) -> list[str]:
    """One line per difference between the smoke results of ``before`` and ``after`` (empty: identical)."""
    before, after = smoke_results(before), smoke_results(after)
    old, new = compared_files(before), compared_files(after)
    problems = [f"only before: {path}" for path in sorted(old - new)]
    problems += [f"only after: {path}" for path in sorted(new - old)]
    problems += [f"differs: {path}" for path in sorted(old & new)
                 if not same_result(before / path, after / path)]
    if not old:
        problems.append(f"nothing to compare under {before}")
    return problems


def run_smoke(rev: str, dest: Path, cores: int) -> int:
    """Copy commit ``rev`` of this repository to ``dest`` and run the smoke tier there."""
    repo = Path(__file__).resolve().parents[1]
    if dest.exists() and any(dest.iterdir()):
        raise SystemExit(f"{dest} is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    snakemake = Path(sys.executable).with_name("snakemake")
    return subprocess.run(["nice", "-n", "10", str(snakemake), "--cores", str(cores)], cwd=dest).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the smoke tier on a copy of a commit")
    p.add_argument("rev")
    p.add_argument("dest", type=Path)
    p.add_argument("--cores", type=int, default=2)
    p = sub.add_parser("compare", help="compare two smoke runs' metrics.json and tables")
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        return run_smoke(args.rev, args.dest, args.cores)
    problems = compare(args.before, args.after)
    n = len(compared_files(smoke_results(args.before)))
    print("\n".join(problems) if problems else
          f"identical: {n} files (metrics.json byte for byte; tables byte for byte but for wall-clock columns)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
