"""The suite's file order for the two xdist workers (tests/conftest.py): the long files go first, and the
smoke run is made once per session whichever worker asks for it (``made_once``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from conftest import HEAVY_FIRST, REPO, heavy_first_order, made_once, session_shared_dir


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
    # (this file as the other one: a light import, and not among the heavy files)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/test_ci_order.py", "tests/test_workflow.py"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert ids, proc.stdout[-2000:] + proc.stderr[-2000:]
    first_other = next(i for i, line in enumerate(ids) if line.startswith("tests/test_ci_order.py"))
    assert all(line.startswith("tests/test_workflow.py") for line in ids[:first_other])
    assert first_other > 0
    # and within the file, the smoke run's tests first (the run starts with the file)
    assert ids[0] == "tests/test_workflow.py::test_smoke_tier_builds_every_split_and_the_scorecard", ids[:3]


def test_the_smoke_run_tests_open_their_file():
    """The smoke run is the suite's longest step: the tests that read it come first in tests/test_workflow.py,
    so it starts as soon as the file's worker does, and the short tests of the file fill in after it."""
    import ast

    tree = ast.parse((REPO / "tests" / "test_workflow.py").read_text())
    tests = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    uses_smoke = [any(arg.arg == "smoke_run" for arg in node.args.args) for node in tests]
    assert uses_smoke[0] and True in uses_smoke and False in uses_smoke, [t.name for t in tests]
    assert uses_smoke == sorted(uses_smoke, reverse=True), [t.name for t in tests]  # no smoke test after the rest


class _Factory:
    """What ``made_once`` uses of pytest's ``tmp_path_factory``: the worker's basetemp."""

    def __init__(self, base):
        self.base = base

    def getbasetemp(self):
        self.base.mkdir(parents=True, exist_ok=True)
        return self.base


def test_a_shared_folder_is_made_once_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    calls = []

    def make(folder):
        calls.append(folder)
        (folder / "out.txt").write_text("made")

    first = made_once(_Factory(tmp_path / "popen-gw0"), "thing", make)
    second = made_once(_Factory(tmp_path / "popen-gw1"), "thing", make)  # another worker, same session
    assert first == second == tmp_path / "thing" and len(calls) == 1
    assert (second / "out.txt").read_text() == "made"


def test_a_failed_make_is_not_repeated_and_names_its_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    calls = []

    def make(folder):
        calls.append(folder)
        raise AssertionError("snakemake failed: rule prism_train")

    with pytest.raises(AssertionError, match="rule prism_train"):
        made_once(_Factory(tmp_path / "popen-gw0"), "thing", make)
    with pytest.raises(AssertionError, match=r"(?s)thing failed earlier in this session.*rule prism_train"):
        made_once(_Factory(tmp_path / "popen-gw1"), "thing", make)
    assert len(calls) == 1


def test_without_xdist_the_shared_folder_is_the_sessions_own(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert session_shared_dir(_Factory(tmp_path / "pytest-7")) == tmp_path / "pytest-7"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert session_shared_dir(_Factory(tmp_path / "pytest-7" / "popen-gw1")) == tmp_path / "pytest-7"


def test_two_workers_asking_at_once_make_it_once(tmp_path):
    """Two processes (as two xdist workers) ask for the same folder at the same moment: one makes it while
    the other waits on the lock, then reuses it."""
    code = textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        sys.path.insert(0, {str(REPO / "tests")!r})
        from conftest import made_once
        root, worker = Path({str(tmp_path)!r}), os.environ["PYTEST_XDIST_WORKER"]

        class Factory:
            def getbasetemp(self):
                (root / f"popen-{{worker}}").mkdir(exist_ok=True)
                return root / f"popen-{{worker}}"

        def make(folder):
            with open(root / "makes.log", "a") as fh:
                fh.write(worker + "\\n")
            time.sleep(2.0)
            (folder / "out.txt").write_text("made")

        while time.time() < {time.time() + 3.0}:  # both ask at the same moment (once both have started)
            time.sleep(0.01)
        print(made_once(Factory(), "run", make) / "out.txt")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], env={"PYTEST_XDIST_WORKER": worker, "PATH": ""},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for worker in ("gw0", "gw1")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert [out.strip() for out, _ in outs] == [str(tmp_path / "run" / "out.txt")] * 2
    assert (tmp_path / "makes.log").read_text().split() in (["gw0"], ["gw1"])  # made once
