"""Shared fixtures: the real-data mirror (skipped with a reason when absent), the repo root, and the smoke run
(one per test session, shared by the xdist workers: ``made_once``)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The files that take minutes, longest first (`--junitxml` of a full run on 6 Dec 2026 at load ≈ 5: the smoke
# run's file 767 s, the redraw's 284, reliability III 194, Slurm 171 (mostly waiting on the cluster, so early,
# beside the others' CPU), FedRAP's lazy path 109, reliability 82; every other file under 45 s).
# `pytest -n 2 --dist loadfile` hands files to the two workers in collection order; a long file reached
# last runs alone at the end and sets the wall time, so these go first and the rest fill in around them.
HEAVY_FIRST = (
    "test_workflow.py",
    "test_reference_records.py",
    "test_slurm.py",
    "test_reliability_iii.py",
    "test_fedrap_lazy.py",
    "test_reliability.py",
    "test_resources.py",
    "test_realdata_protocols.py",
    "test_resume.py",
    "test_cli.py",
)


def heavy_first_order(paths: list[str]) -> list[int]:
    """Indices that put test files named in ``HEAVY_FIRST`` first, in its order; stable otherwise."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    return sorted(range(len(paths)), key=lambda i: rank.get(Path(paths[i]).name, len(rank)))


def pytest_configure(config):
    # xdist would otherwise re-sort files by their number of tests, which puts the few-test smoke-run
    # file last; every worker collects the same order below, so the scheduler keeps it.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    order = heavy_first_order([str(item.path) for item in items])
    items[:] = [items[i] for i in order]


def mirror_path() -> Path | None:
    """``$RECREPRO_MIRROR`` or ``../shared/datasets`` beside the checkout, if present."""
    env = os.environ.get("RECREPRO_MIRROR")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "datasets")
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    return None


@pytest.fixture
def one_torch_thread():
    """Small batched torch ops run fastest on one thread (and do not fight other jobs); restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture
def fresh_python(repo_root, tmp_path):
    """Run ``code`` in a new interpreter that sees only ``src/`` (no installed package, no PATH)
    and return the last line it prints: what a module imports shows only in a fresh process."""
    import subprocess
    import sys

    def run(code: str) -> str:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={"PYTHONPATH": str(repo_root / "src"), "PATH": ""}, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.strip().splitlines()[-1]

    return run


def snakemake(*args: str, cwd: Path = REPO, check: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
    """``python -m snakemake --snakefile Snakefile *args`` with this interpreter's scripts first on PATH
    (the rules run the interpreter that runs Snakemake); a failure raises with the console's end."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), *args]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def session_shared_dir(tmp_path_factory) -> Path:
    """A folder every process of this test session sees: under pytest-xdist each worker's basetemp is
    ``<session basetemp>/popen-gwN``, so their parent; without xdist the session's own basetemp (its
    parent holds earlier sessions, which must not be reused)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(tmp_path_factory, name: str, make) -> Path:
    """``make(folder)`` once per test session, whichever xdist worker asks first; a worker that asks
    while another makes it waits (a file lock) and reuses the folder. A failed ``make`` is recorded:
    every later ask fails with its message instead of repeating a run of many minutes.

    A worker killed while making leaves no mark of success (its lock goes with the process): the next
    ask starts over in a fresh folder."""
    root = session_shared_dir(tmp_path_factory)
    folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes (or the process dies)
        if failed.exists():
            raise AssertionError(f"{name} failed earlier in this session:\n{failed.read_text()}")
        if not done.exists():
            if folder.exists():
                shutil.rmtree(folder)  # a half-made one
            folder.mkdir()
            try:
                make(folder)
            except BaseException as exc:
                failed.write_text(f"{type(exc).__name__}: {exc}"[-8000:])
                raise
            done.touch()
    return folder


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The smoke tier (`snakemake --cores 2`, README's first command) in a fresh folder: ONE run per test
    session, shared by every test that reads it (tests/test_workflow.py), on any xdist worker.
    Tests copy out of it what they change."""
    def make(work: Path) -> None:
        snakemake("--cores", "2", "--directory", str(work), "--configfile", str(REPO / "config.yaml"), timeout=2400)

    return made_once(tmp_path_factory, "smoke", make)


@pytest.fixture(scope="session")
def mirror() -> Path:
    path = mirror_path()
    if path is None:
        pytest.skip("real-data mirror not found: set RECREPRO_MIRROR or place ../shared/datasets beside the checkout")
    return path


@pytest.fixture(scope="session")
def pipeline(mirror, tmp_path_factory):
    """fetch (mirror only) -> preprocess -> split, as the rules do, into a temporary data root."""
    from recrepro.config import load_config
    from recrepro.datasets import fetch_dataset, load_raw
    from recrepro.datasets.preprocessing import preprocess, read_interactions, resolve_recipe, write_preprocessed
    from recrepro.datasets.splits import make_split, write_split

    root = tmp_path_factory.mktemp("data")
    cfg = load_config(REPO / "config.yaml")
    cache: dict = {}

    def processed(dataset: str, protocol: str) -> Path:
        out = root / "processed" / dataset / protocol
        if (dataset, protocol) not in cache:
            raw_dir = root / "raw" / dataset
            fetch_dataset(dataset, raw_dir, mirror=mirror, urls_allowed=False)
            recipe = resolve_recipe(cfg["protocols"], protocol, dataset, cfg["switches"])
            write_preprocessed(preprocess(load_raw(dataset, raw_dir), recipe), out)
            cache[(dataset, protocol)] = out
        return out

    def split(dataset: str, protocol: str, name: str, seed: int, params: dict | None = None,
              tag: str = "") -> Path:
        out = root / "splits" / dataset / protocol / name / f"seed{seed}{tag}"
        split_obj = make_split(read_interactions(processed(dataset, protocol)), name, params or {}, seed)
        write_split(split_obj, out, {"dataset": dataset, "protocol": protocol, "seed": seed})
        return out

    return processed, split


def build_synthetic_split(root: Path, spec, protocol: str, user_min: int, split: str, seed: int) -> Path:
    """Generate synthetic interactions from ``spec``, preprocess them (users with ``>= user_min``
    interactions) and write one ``split`` of them under ``root/split``; returns that folder.

    The tiny real-pipeline split several tests train on (raw -> processed -> split, as the rules do).
    """
    from recrepro.datasets import load_raw
    from recrepro.datasets.synthetic import generate_synthetic
    from recrepro.io import write_parquet
    from recrepro.datasets.preprocessing import preprocess, read_interactions, resolve_recipe, write_preprocessed
    from recrepro.datasets.splits import make_split, write_split

    frame = generate_synthetic(spec)
    filt = {"mode": "items_then_users", "item_min": 0, "user_min": user_min}
    recipe = resolve_recipe({protocol: {"default": {"positive": None, "filter": filt}}}, protocol, "synthetic", {})
    write_parquet(root / "raw" / "interactions.parquet", frame)
    write_preprocessed(preprocess(load_raw("synthetic", root / "raw"), recipe), root / "processed")
    made = make_split(read_interactions(root / "processed"), split, {}, seed)
    write_split(made, root / "split", {"dataset": "synthetic", "protocol": protocol, "seed": seed})
    return root / "split"


@pytest.fixture(autouse=True)
def checkpoint_every_epoch(monkeypatch):
    """In-process trainers write a checkpoint after every epoch / round, as the resume tests count on
    (the package's default spaces cheap writes out to keep them to 2 % of the wall time: a test's
    millisecond epochs would then checkpoint only now and then).  The default is tested on its own."""
    import recrepro.runtime.checkpoints as checkpoints

    monkeypatch.setattr(checkpoints, "WRITE_OVERHEAD", 0.0)
