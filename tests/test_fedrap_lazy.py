"""FedRAP paper mode: the lazy full-matrix regularisers equal the dense reference path."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.fedrap import FederatedRecommender

# float32 rounding over 3 rounds of ~12 steps; a sign decision of an entry whose C passes within
# ~1e-7 of zero can go either way in either path, which is why the test stays at a few rounds
TOL = 2e-5


def _data():
    rng = np.random.default_rng(0)
    n_users, n_items = 30, 60
    dense = rng.random((n_users, n_items)) < 0.1
    dense[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    dense[:3, :25] = True  # three clients with several mini-batches (longer local schedules)
    return sp.csr_matrix(dense.astype(np.float32))


def _fit(train, path, mu, client_ratio, captured=None, budget_mb=2048.0, scratch=None):
    # large steps relative to |C| (lr μ/(n d) = 0.05 per step, |C| ~ 0.3): many entries of C
    # cross zero within a round, so the replayed set is exercised, not only the affine map
    cfg = FederatedConfig(method="fedrap", mode="paper", paper_path=path, dim=4, rounds=3, local_epochs=4,
                          batch_size=8, num_negatives=2, lr_network=0.3, lr_args=30.0, lam=0.1, mu=mu,
                          l2=1e-3, curriculum="fixed", init_std=0.3, tol=1e-3, seed=1, client_ratio=client_ratio,
                          memory_budget_mb=budget_mb, scratch_dir=scratch)
    model = FederatedRecommender(cfg)
    if captured is not None:
        inner = model._local_train_lazy

        def spy(*args, **kwargs):
            result = inner(*args, **kwargs)
            captured.append(result)
            return result

        model._local_train_lazy = spy
    return model.fit(train)


def _hr_ndcg_at_10(model, train, held_out):
    scores = model.score(np.arange(train.shape[0]))
    scores[train.nonzero()] = -np.inf
    rank = (scores > scores[np.arange(scores.shape[0]), held_out][:, None]).sum(1)
    hit = rank < 10
    return hit.mean(), np.where(hit, 1 / np.log2(rank + 2), 0.0).mean()


@pytest.mark.parametrize("mu,client_ratio,memmap", [(0.4, 1.0, False), (0.4, 0.5, False), (0.0, 1.0, False),
                                                     (0.4, 1.0, True)])
def test_lazy_paper_path_equals_dense(mu, client_ratio, memmap, tmp_path):
    train = _data()
    captured = []
    # memmap: the private tables (30 x 60 x 4 floats) above a 16 KB budget live on disk
    lazy = _fit(train, "lazy", mu, client_ratio, captured, *((16 / 1024, str(tmp_path)) if memmap else ()))
    assert lazy.private_storage == ("memmap" if memmap else "dense")
    dense = _fit(train, "dense", mu, client_ratio)
    users = np.arange(train.shape[0])
    assert captured  # the lazy path ran
    torch.testing.assert_close(lazy.C, dense.C, atol=TOL, rtol=0)
    torch.testing.assert_close(lazy.private_items(users), dense.private_items(users), atol=TOL, rtol=0)
    torch.testing.assert_close(lazy.w, dense.w, atol=TOL, rtol=0)
    for a, b in zip(lazy.history, dense.history, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-5, abs=1e-6)
        assert a["c_sparsity"] == b["c_sparsity"]
        assert abs(a["upload_bytes_sparse"] - b["upload_bytes_sparse"]) <= 8 * 2  # ≤ 2 entries at 1e-4
    held_out = np.random.default_rng(3).integers(0, train.shape[1], train.shape[0])
    np.testing.assert_allclose(_hr_ndcg_at_10(lazy, train, held_out), _hr_ndcg_at_10(dense, train, held_out),
                               atol=1e-12)
    if mu > 0:
        # replayed entries exist and some of them really changed sign during a round
        crossed = 0
        for result in captured:
            owner, pos, values = result["lazy"]["entries"]
            start = torch.sign(result["lazy"]["C0"].reshape(-1)[pos])
            crossed += int((torch.sign(values) != start).sum())
        assert crossed > 0


def test_lazy_dense_uploads_match_dense_path():
    # one local_train call from the same state: the per-client uploads and private tables agree
    train = _data()
    models = {path: _fit(train, path, 0.4, 1.0) for path in ("lazy", "dense")}
    ref = models["dense"]
    users = np.arange(train.shape[0])
    for m in models.values():  # same starting state for the extra round
        m.C, m.w = ref.C.clone(), ref.w.clone()
        m.D[:] = ref.private_items(users)
        m.D_scale[:] = 1.0
        m.lr_args, m.lr_network = ref.lr_args, ref.lr_network
    owner, item, label = ref.round_samples(users, np.random.default_rng(4))
    outs = {path: m.local_train(users, owner, item, label, 0.1, 0.4, np.random.default_rng(9))
            for path, m in models.items()}
    torch.testing.assert_close(models["lazy"].dense_uploads(outs["lazy"]), models["dense"].dense_uploads(outs["dense"]),
                               atol=TOL, rtol=0)
    torch.testing.assert_close(models["lazy"].private_items(users), models["dense"].private_items(users),
                               atol=TOL, rtol=0)
    np.testing.assert_allclose(outs["lazy"]["loss"].numpy(), outs["dense"]["loss"].numpy(), rtol=1e-5, atol=1e-6)
    # the lazy path's own upload sum equals the sum of its dense uploads
    torch.testing.assert_close(outs["lazy"]["c_sum"], models["lazy"].dense_uploads(outs["lazy"]).sum(0).double(),
                               atol=1e-4, rtol=0)


def test_memmap_rows_in_pieces_equal_plain_indexing(tmp_path, monkeypatch):
    import recrepro.models.federated.storage as storage

    monkeypatch.setattr(storage, "_MEMMAP_PIECE_BYTES", 2 << 20)  # one 2 MB region per piece
    model = FederatedRecommender(FederatedConfig(dim=8, memory_budget_mb=1.0, scratch_dir=str(tmp_path)))
    model.init_state(80, 4096)  # 10.5 MB of private tables: a disk-backed memmap, 6 regions
    assert model.private_storage == "memmap"
    gen = torch.Generator().manual_seed(0)
    model.D.copy_(torch.randn(model.D.shape, generator=gen))
    index = torch.randint(0, 80 * 4096, (5000,), generator=gen)
    torch.testing.assert_close(model._private_rows(index), model.D.view(-1, 8)[index], rtol=0, atol=0)
    unique = torch.unique(index)[torch.randperm(torch.unique(index).numel(), generator=gen)]
    values = torch.randn(unique.numel(), 8, generator=gen)
    model._write_private_rows(unique, values)
    torch.testing.assert_close(model.D.view(-1, 8)[unique], values, rtol=0, atol=0)
    entries = torch.randperm(80 * 4096 * 8, generator=gen)[:3000]
    model._write_private_rows(entries, torch.arange(3000, dtype=torch.float32), width=1)
    torch.testing.assert_close(model.D.view(-1)[entries], torch.arange(3000, dtype=torch.float32), rtol=0, atol=0)
