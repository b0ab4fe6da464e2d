"""FedRAP's dense paper path: the fused full-matrix step (``dense_update: fused``, torch.compile)
equals the eager one, and a run whose step cannot compile goes on eager and says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.papers.fedrap import dense as dense_module
from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.dense import full_matrix_step
from recrepro.papers.fedrap.fedrap import FederatedRecommender

# float32 rounding over 3 rounds of a few steps (as tests/test_fedrap_lazy.py)
TOL = 2e-5


def _train():
    rng = np.random.default_rng(3)
    dense = rng.random((24, 50)) < 0.12
    dense[np.arange(24), rng.integers(0, 50, 24)] = True
    dense[:2, :20] = True  # two clients with several mini-batches
    return sp.csr_matrix(dense.astype(np.float32))


def _fit(dense_update, **overrides):
    # large L1 steps against |C| ~ 0.3, so entries of C cross zero (the sign term matters)
    settings = dict(method="fedrap", mode="paper", paper_path="dense", dim=4, rounds=3, local_epochs=3,
                    batch_size=8, num_negatives=2, lr_network=0.3, lr_args=30.0, lam=0.1, mu=0.5, l2=1e-3,
                    init_std=0.3, tol=1e-3, seed=2, dense_update=dense_update)
    settings.update(overrides)
    model = FederatedRecommender(FederatedConfig(**settings))
    return model.fit(_train())


def test_the_full_matrix_step_by_hand():
    # one client, one item, d = 1: D = 1, C = -0.5; shrink 0.9, coef 0.2, l1_step 0.1
    D, C = torch.tensor([[[1.0]]]), torch.tensor([[[-0.5]]])
    loss = full_matrix_step(D, C, torch.tensor([[[0.9]]]), torch.tensor([[[0.2]]]), torch.tensor([[[0.1]]]),
                            torch.tensor(-2.0), torch.tensor(3.0))
    # D - C = 1.5: D <- 0.9 + 0.3 = 1.2; C <- -0.45 - 0.3 + 0.1 (sign -1) = -0.65; loss -2·2.25 + 3·0.5
    assert D.item() == pytest.approx(1.2) and C.item() == pytest.approx(-0.65)
    assert loss.item() == pytest.approx(-3.0)


@pytest.mark.parametrize("overrides", [{}, {"mu": 0.0}, {"l1_update": "prox"}, {"client_ratio": 0.5},
                                       {"memory_budget_mb": 0.023}])
def test_fused_dense_steps_equal_the_eager_ones(overrides):
    # memory_budget_mb 0.023: chunks of 5 clients, the last of 4 (the compiled loop's client
    # count varies: storage.clients_per_chunk)
    if "memory_budget_mb" in overrides:
        from recrepro.models.federated.storage import clients_per_chunk

        assert clients_per_chunk(50, 4, overrides["memory_budget_mb"], 24) == 5
    fused, eager = _fit("fused", **overrides), _fit("eager", **overrides)
    assert fused.dense_update_used == "fused" and eager.dense_update_used == "eager"
    torch.testing.assert_close(fused.C, eager.C, atol=TOL, rtol=0)
    users = np.arange(fused.n_users)
    torch.testing.assert_close(fused.private_items(users), eager.private_items(users), atol=TOL, rtol=0)
    torch.testing.assert_close(fused.w, eager.w, atol=TOL, rtol=0)


def test_a_step_that_cannot_compile_runs_eager_and_says_so(monkeypatch, capsys):
    def broken(fn, **kwargs):
        def call(*args):
            raise RuntimeError("no C++ compiler\nCompilerError: cc not found")
        return call

    monkeypatch.setattr(dense_module.torch, "compile", broken)
    fallen, eager = _fit("fused"), _fit("eager")
    assert fallen.dense_update_used == "eager"
    assert "dense_update 'fused' could not compile (RuntimeError: CompilerError: cc not found)" in capsys.readouterr().err
    # nothing was written by the failed call: the run is the eager run, to the bit
    assert torch.equal(fallen.C, eager.C) and torch.equal(fallen.w, eager.w)


def test_an_unknown_dense_update_is_refused():
    with pytest.raises(ValueError, match="dense_update must be 'fused' or 'eager'"):
        FederatedConfig(dense_update="jit")


def test_the_fused_step_compiles_under_the_command_lines_stand_in_for_dynamo():
    # `recrepro` registers a stand-in for torch._dynamo before torch loads (recrepro.runtime.eager_torch);
    # torch.compile needs the real one, which the dense path loads in its place
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        from recrepro.runtime.eager_torch import defer_dynamo
        assert defer_dynamo()
        import sys, torch
        assert type(sys.modules["torch._dynamo"]).__name__ == "module" and not hasattr(sys.modules["torch._dynamo"], "__path__")
        sys.path.insert(0, "tests")
        from test_fedrap_dense import _fit
        print(_fit("fused", rounds=1).dense_update_used)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         cwd=str(Path(__file__).resolve().parent.parent))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "fused"
    assert "could not compile" not in out.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
def test_the_fused_step_on_cuda_equals_the_eager_one():
    # the paper tier's LastFM paper-mode rows are GPU jobs first: the compiled loop (triton there)
    # or, where it cannot compile, the eager fallback; either way the eager path's numbers
    fused, eager = _fit("fused", device="cuda"), _fit("eager", device="cuda")
    assert fused.dense_update_used in ("fused", "eager") and eager.dense_update_used == "eager"
    torch.testing.assert_close(fused.C, eager.C, atol=TOL, rtol=0)
    torch.testing.assert_close(fused.w, eager.w, atol=TOL, rtol=0)
