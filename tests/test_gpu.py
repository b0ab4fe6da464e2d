"""CUDA against CPU, per paper: ``pytest -m gpu`` (skipped with a reason where torch sees no GPU).

Each paper's small training run is made twice by :func:`run_paper`, on the CPU and on the GPU,
from the same seeds (initialisation, orders and negatives are drawn on the CPU in every trainer),
and the learned scores must agree within the stated tolerance: float32 sums run in another order
on a GPU, so a few epochs of training drift by rounding only.  The evaluation core must give the
*same* metrics on both (its reference scores are float64-accumulated, rounded once).

Without CUDA the same harness runs on the CPU twice (``test_harness_on_cpu``): the runs must be
identical, which keeps this file's code exercised on every machine.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.paperlist import PAPERS

#: max |score_cuda − score_cpu| allowed after each paper's small run (float32 papers; LRS is float64): the
#: registry's ``gpu_tolerance``
TOLERANCE = {paper.key: paper.gpu_tolerance for paper in PAPERS}

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")


def _planted(n_users: int = 60, n_items: int = 40, seed: int = 0) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    dense = (rng.integers(0, 4, n_users)[:, None] == (np.arange(n_items) % 4)[None, :]) & (
        rng.random((n_users, n_items)) < 0.7)
    rows, cols = np.nonzero(dense)
    perm = rng.permutation(rows.size)
    cut = int(0.8 * rows.size)

    def part(idx):
        return sp.csr_matrix((np.ones(idx.size, np.float32), (rows[idx], cols[idx])), shape=(n_users, n_items))

    return part(perm[:cut]), part(perm[cut:])


def run_paper(paper: str, device: str) -> np.ndarray:
    """The scores (all users × all items, or LRS's parameters) of one paper's small run on ``device``:
    ``tests/gpu_runs/<paper>.py``."""
    train, val = _planted()
    return importlib.import_module(f"gpu_runs.{paper}").run(train, val, device)


def _evaluation(device: str) -> dict[str, float]:
    from recrepro.evaluation import evaluate_full_ranking

    train, val = _planted(200, 150, seed=3)
    rng = np.random.default_rng(1)
    tables = (rng.standard_normal((200, 16)).astype(np.float32), rng.standard_normal((150, 16)).astype(np.float32))
    return evaluate_full_ranking(tables, train, val, [5, 20], batch_size=64, device=device).overall


@pytest.mark.parametrize("paper", sorted(TOLERANCE))
def test_harness_on_cpu(paper, one_torch_thread):
    """Two CPU runs of the harness are identical (the reference the GPU runs are held to)."""
    np.testing.assert_array_equal(run_paper(paper, "cpu"), run_paper(paper, "cpu"))


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("paper", sorted(TOLERANCE))
def test_small_run_on_cuda_matches_cpu(paper):
    cpu, cuda = run_paper(paper, "cpu"), run_paper(paper, "cuda")
    assert cpu.shape == cuda.shape
    assert float(np.max(np.abs(cuda - cpu))) <= TOLERANCE[paper]


@pytest.mark.gpu
@needs_cuda
def test_evaluation_core_on_cuda_is_identical_to_cpu():
    assert _evaluation("cuda") == _evaluation("cpu")


def test_device_auto_resolves_to_what_torch_sees():
    from recrepro.runtime.devices import resolve_device

    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device(None) == resolve_device("auto") and resolve_device("CPU") == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            resolve_device("cuda")


def test_cli_records_the_resolved_device():
    """``--device auto`` reaches the run as the concrete device, never the word ``auto``."""
    import argparse

    from recrepro.runtime.devices import add_device_argument

    parser = argparse.ArgumentParser()
    add_device_argument(parser)
    assert parser.parse_args([]).device in ("cpu", "cuda")
    with pytest.raises(SystemExit):
        parser.parse_args(["--device", "gpu0"])


@pytest.mark.gpu
@needs_cuda
def test_ease_on_cuda_matches_lapack():
    """EASE's inverse on the card (the paper tier's gowalla EASE jobs): B as the CPU's LAPACK gives it."""
    from recrepro.models.ease import EASE

    rng = np.random.default_rng(3)
    x = sp.csr_matrix((rng.random((400, 300)) < 0.05).astype(np.float32))
    cpu = EASE(lam=50.0, dtype="float32").fit(x).W
    cuda = EASE(lam=50.0, dtype="float32", device="cuda").fit(x).W
    assert cuda.dtype == cpu.dtype and float(np.abs(cuda - cpu).max()) < 1e-4
