"""Row gathers (recrepro.models.gather): a training's gradients do not depend on the number of CPU threads.

``table[idx]``'s backward adds repeated rows from several threads at once on a multi-threaded CPU,
so two runs with the same seed differed in the last bits after one batch and drifted apart over
an epoch.  These tests compare, bit for bit, the gradients of one batch on two threads (several
times) with those on one thread, for every backbone and the losses that gather (DirectAU's unique
rows, MAWU's margins, BPR's negatives), and the gathers with the advanced indexing they replace.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.models.backbones import build_net
from recrepro.models.gather import add_rows_into_zeros, gather_rows
from recrepro.models.mf_bpr import MFBPR
from recrepro.papers.prism.trainer import TrainSettings, batch_loss

N_USERS, N_ITEMS, BATCH = 6000, 8000, 4096


@pytest.fixture
def threads():
    """``threads(n)`` sets torch's thread count; the count before the test is restored after."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def _batch(seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    # 4096 rows over 1,500 users and 2,000 items: every row repeats, across the whole batch
    users = torch.randint(1500, (BATCH,), generator=gen)
    items = torch.randint(2000, (BATCH,), generator=gen)
    negs = torch.randint(N_ITEMS, (BATCH, 1), generator=gen)
    return users, items, negs


def _train_matrix() -> sp.csr_matrix:
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(N_USERS, size=40000), rng.integers(N_ITEMS, size=40000)
    m = sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(N_USERS, N_ITEMS))
    m.data[:] = 1.0
    return m


def _grads(backbone: str, loss: str) -> list[torch.Tensor]:
    net = build_net(backbone, N_USERS, N_ITEMS, 32, seed=0,
                    train=_train_matrix() if backbone == "lightgcn" else None)
    margins = None
    params = list(net.parameters())
    if loss == "mawu":
        gen = torch.Generator().manual_seed(2)
        margins = (torch.nn.Parameter(torch.rand(N_USERS, generator=gen)),
                   torch.nn.Parameter(torch.rand(N_ITEMS, generator=gen)))
        params += list(margins)
    users, items, negs = _batch()
    settings = TrainSettings(backbone=backbone, loss=loss, weight_decay=1e-6)
    out = batch_loss(net, users, items, negs if loss == "bpr" else None, settings, margins)
    return list(torch.autograd.grad(out, params))


@pytest.mark.parametrize("loss", ["directau", "mawu", "bpr"])
@pytest.mark.parametrize("backbone", ["mf", "nlmf", "lightgcn"])
def test_prism_batch_gradients_are_the_same_on_one_and_two_threads(backbone, loss, threads):
    """The gathered tables' gradients (embeddings, MAWU's margins) have the same bits on one and on two
    threads, and every gradient has the same bits on every run at one thread count. NL-MF's tower
    weights are a matmul summed over the batch, whose split by thread changes its last bits on some
    CPUs: across thread counts only the gathered tables are compared (README: records are byte-identical
    at the same thread count)."""
    names = [n for n, _ in build_net(backbone, N_USERS, N_ITEMS, 32, seed=0,
                                      train=_train_matrix() if backbone == "lightgcn" else None).named_parameters()]
    names += ["user_margin", "item_margin"] if loss == "mawu" else []
    gathered = [i for i, n in enumerate(names) if "tower" not in n]
    assert gathered and len(names) == len(_grads(backbone, loss))
    threads(1)
    reference = _grads(backbone, loss)
    threads(2)
    first = _grads(backbone, loss)
    assert all(torch.equal(reference[i], first[i]) for i in gathered), (backbone, loss)
    for _ in range(2):
        again = _grads(backbone, loss)
        assert all(torch.equal(a, b) for a, b in zip(first, again)), (backbone, loss)


def test_mf_bpr_step_gradients_are_the_same_on_one_and_two_threads(threads):
    users, items, negs = _batch()

    def grads() -> list[torch.Tensor]:
        model = MFBPR({"dim": 32, "lam": 0.01}, seed=0)
        model.init_params(N_USERS, N_ITEMS)
        from recrepro.models.mf_bpr import bpr_loss

        out = bpr_loss(model.P, model.Q, users, items, negs[:, 0]) + model.penalty(
            model.P, model.Q, users, items, negs[:, 0])
        return list(torch.autograd.grad(out, [model.P, model.Q]))

    threads(1)
    reference = grads()
    threads(2)
    for _ in range(3):
        assert all(torch.equal(a, b) for a, b in zip(reference, grads()))


@pytest.mark.parametrize("shape", [(50, 8), (50,)])
def test_gather_rows_is_advanced_indexing_bit_for_bit_on_one_thread(shape, threads):
    threads(1)
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(*shape, generator=gen, requires_grad=True)
    idx = torch.tensor([3, 7, 3, 0, 49, 7, 3, 12])
    upstream = torch.randn(idx.numel(), *shape[1:], generator=gen)
    ours = gather_rows(table, idx)
    plain = table[idx]
    assert torch.equal(ours, plain)
    (g_ours,) = torch.autograd.grad(ours, table, upstream)
    (g_plain,) = torch.autograd.grad(plain, table, upstream)
    assert torch.equal(g_ours, g_plain)
    assert torch.equal(add_rows_into_zeros(table.detach(), idx, upstream), g_plain)
    assert g_plain[3].abs().sum() > 0 and g_plain[1].abs().sum() == 0   # repeats added, others zero
