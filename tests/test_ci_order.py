"""The suite's file order for the two xdist workers (tests/conftest.py): the long files go first."""

from __future__ import annotations

from conftest import HEAVY_FIRST, REPO, heavy_first_order


def test_every_heavy_file_exists():
    # a renamed file would silently drop out of the front of the queue and slow CI again
    missing = [name for name in HEAVY_FIRST if not (REPO / "tests" / name).is_file()]
    assert not missing, missing


def test_heavy_files_first_in_their_order_and_the_rest_stable():
    paths = ["tests/test_a.py", "tests/test_cli.py", "tests/test_b.py", "tests/test_workflow.py",
             "tests/test_cli.py", "tests/test_a.py"]
    assert [paths[i] for i in heavy_first_order(paths)] == [
        "tests/test_workflow.py", "tests/test_cli.py", "tests/test_cli.py",
        "tests/test_a.py", "tests/test_b.py", "tests/test_a.py"]


def test_collection_puts_the_smoke_run_file_first_whatever_order_it_is_given_in():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/test_metrics.py", "tests/test_workflow.py"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert ids, proc.stdout[-2000:] + proc.stderr[-2000:]
    first_metrics = next(i for i, line in enumerate(ids) if line.startswith("tests/test_metrics.py"))
    assert all(line.startswith("tests/test_workflow.py") for line in ids[:first_metrics])
    assert first_metrics > 0
