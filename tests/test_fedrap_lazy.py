"""FedRAP paper mode: the lazy full-matrix regularisers equal the dense reference path.

The lazy path streams the private tables once per round: the end-of-round pass also takes the
next round's start-of-round statistics (``recrepro.papers.fedrap.lazy.path``).  The tests below run
several rounds so that rounds 2+ use those carried statistics, and check that they are used.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import recrepro.papers.fedrap.lazy.next_round as lazy_next_module
import recrepro.papers.fedrap.lazy.start as lazy_start_module
from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.fedrap import FederatedRecommender
from recrepro.papers.fedrap.lazy.path import LazyResult

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


def _config(path, mu, client_ratio, budget_mb=2048.0, scratch=None, **overrides):
    # large steps relative to |C| (lr μ/(n d) = 0.05 per step, |C| ~ 0.3): many entries of C
    # cross zero within a round, so the replayed set is exercised, not only the affine map
    settings = dict(method="fedrap", mode="paper", paper_path=path, dim=4, rounds=3, local_epochs=4,
                    batch_size=8, num_negatives=2, lr_network=0.3, lr_args=30.0, lam=0.1, mu=mu,
                    l2=1e-3, curriculum="fixed", init_std=0.3, tol=1e-3, seed=1, client_ratio=client_ratio,
                    memory_budget_mb=budget_mb, scratch_dir=scratch)
    settings.update(overrides)
    return FederatedConfig(**settings)


class _Spy:
    """Records what the lazy path did: its results, whether each round used the statistics the
    previous round's pass took, the steps of the clients, whether the group sums came from the
    rows and whether a lazy scale was folded into the tables."""

    def __init__(self, model):
        self.results, self.cached, self.steps, self.row_groups, self.folded = [], [], [], [], []
        path = model.lazy_path
        for name in ("local_train", "cached_stats", "upload_d0_sums", "end_pass"):
            setattr(path, name, self._wrap(path, name, getattr(path, name)))

    def _wrap(self, path, name, inner):
        def call(*args, **kwargs):
            out = inner(*args, **kwargs)
            if name == "local_train":
                self.results.append(out)
                if path.carried is not None:  # the next round's group sums: from the rows (or the pass)
                    self.row_groups.append(path.carried.stats.context.group_sums is not None)
            elif name == "cached_stats":
                self.cached.append(out is not None)
            elif name == "upload_d0_sums":
                _, users, _, _, steps, _, stats = args
                group = stats.context.group[torch.as_tensor(users)].numpy()
                self.steps.append((steps, stats.context.group_steps[group]))
            else:
                self.folded.append(bool(np.any(args[8])))
            return out
        return call


def _fit(train, path, mu, client_ratio, budget_mb=2048.0, scratch=None, **overrides):
    model = FederatedRecommender(_config(path, mu, client_ratio, budget_mb, scratch, **overrides))
    spy = _Spy(model) if path == "lazy" else None
    return model.fit(train), spy


def _hr_ndcg_at_10(model, train, held_out):
    scores = model.score(np.arange(train.shape[0]))
    scores[train.nonzero()] = -np.inf
    rank = (scores > scores[np.arange(scores.shape[0]), held_out][:, None]).sum(1)
    hit = rank < 10
    return hit.mean(), np.where(hit, 1 / np.log2(rank + 2), 0.0).mean()


def _assert_equal_paths(lazy, dense, train):
    users = np.arange(train.shape[0])
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


@pytest.mark.parametrize("mu,client_ratio,memmap,row_groups", [
    (0.4, 1.0, False, False), (0.4, 1.0, False, True), (0.4, 0.5, False, True), (0.0, 1.0, False, True),
    (0.4, 1.0, True, False), (0.4, 1.0, True, True)])
def test_lazy_paper_path_equals_dense(mu, client_ratio, memmap, row_groups, tmp_path, monkeypatch):
    # row_groups: the next round's group sums from the rows (as on Video/LastFM) instead of the pass
    monkeypatch.setattr(lazy_next_module, "GROUP_ROW_COST", 0 if row_groups else 10 ** 9)
    train = _data()
    # memmap: the private tables (30 x 60 x 4 floats) above a 16 KB budget live on disk
    lazy, spy = _fit(train, "lazy", mu, client_ratio, *((16 / 1024, str(tmp_path)) if memmap else ()))
    assert lazy.private_storage == ("memmap" if memmap else "dense")
    dense, _ = _fit(train, "dense", mu, client_ratio)
    assert spy.results  # the lazy path ran
    # one pass per round: rounds 2 and 3 used the statistics of the previous round's pass
    assert spy.cached == [False, True, True]
    assert any(spy.row_groups) == (row_groups and client_ratio == 1.0)
    _assert_equal_paths(lazy, dense, train)
    if mu > 0:
        # replayed entries exist and some of them really changed sign during a round
        crossed = 0
        for result in spy.results:
            owner, pos, values = result.uploads.entries
            start = torch.sign(result.uploads.C0.reshape(-1)[pos])
            crossed += int((torch.sign(values) != start).sum())
        assert crossed > 0


@pytest.mark.parametrize("dp_clip,dp_noise,rounds", [(0.5, 0.0, 3), (0.5, 0.5, 2), (None, 0.05, 2)])
def test_lazy_paper_path_with_dp_equals_dense(dp_clip, dp_noise, rounds):
    """DP (clip every client's update C_i − C, add Gaussian noise) on the lazy path: the uploads are
    formed from the lazy map and give the dense path's rounds. The previous round's cached statistics
    assume the un-noised server table, so every round takes its own start pass (correct, and checked
    by the cache's bit-for-bit test of C). With noise, 2 rounds: by the third, an entry of some C_i
    that a step leaves within float error of zero takes the other sign in one of the paths (TOL above)."""
    train = _data()
    dp = dict(dp_clip=dp_clip, dp_noise=dp_noise, rounds=rounds)  # None: noise with no clip
    lazy, spy = _fit(train, "lazy", 0.4, 1.0, **dp)
    dense, _ = _fit(train, "dense", 0.4, 1.0, **dp)
    assert spy.results and spy.cached == [False] * rounds
    _assert_equal_paths(lazy, dense, train)
    assert [h["dp_epsilon"] for h in lazy.history] == [h["dp_epsilon"] for h in dense.history]
    # the clip or the noise bites: without DP the server table ends elsewhere
    plain, _ = _fit(train, "lazy", 0.4, 1.0, rounds=rounds)
    assert float((plain.C - lazy.C).abs().max()) > 10 * TOL


def test_lazy_dp_uploads_in_slices_of_clients_equal_all_at_once(monkeypatch):
    """Where a round's dense uploads do not fit the memory budget at once they are formed, clipped and
    summed a slice of clients at a time (the clip is per client: without noise, the same round)."""
    train = _data()
    whole, _ = _fit(train, "lazy", 0.4, 1.0, dp_clip=0.5, dp_noise=0.0)
    slices = []
    real = LazyResult.upload_slices

    def spy(self, model, chunk):
        for up in real(self, model, 7):  # 30 clients in slices of 7
            slices.append(up.shape[0])
            yield up

    monkeypatch.setattr(LazyResult, "upload_slices", spy)
    sliced, _ = _fit(train, "lazy", 0.4, 1.0, dp_clip=0.5, dp_noise=0.0)
    assert slices == [7, 7, 7, 7, 2] * 3
    torch.testing.assert_close(sliced.C, whole.C, atol=1e-6, rtol=0)
    assert [h["upload_bytes_sparse"] for h in sliced.history] == [h["upload_bytes_sparse"] for h in whole.history]


@pytest.mark.parametrize("tol,row_groups", [(0.3, True), (0.3, False), (0.25, True)])
def test_lazy_paper_path_with_early_stops_equals_dense(tol, row_groups, monkeypatch):
    # clients that stop early do not follow their schedule group's map: their share of the uploads
    # (and of the next round's group sums) is read from their own tables
    monkeypatch.setattr(lazy_next_module, "GROUP_ROW_COST", 0 if row_groups else 10 ** 9)
    train = _data()
    lazy, spy = _fit(train, "lazy", 0.4, 1.0, rounds=4, tol=tol)
    dense, _ = _fit(train, "dense", 0.4, 1.0, rounds=4, tol=tol)
    early = [int((steps < full).sum()) for steps, full in spy.steps]
    assert sum(early[:-1]) > 0  # early stops before the last round (their group sums are used after)
    assert spy.cached == [False, True, True, True]
    _assert_equal_paths(lazy, dense, train)


def test_lazy_paper_path_with_drifting_scales_equals_dense(monkeypatch):
    # strong weight decay: the lazy scales of the big clients leave [1e-3, 1e3] and are folded into
    # their stored tables by the pass, which also takes the next round's statistics of those tables
    monkeypatch.setattr(lazy_next_module, "GROUP_ROW_COST", 0)
    train = _data()
    lazy, spy = _fit(train, "lazy", 0.4, 1.0, l2=0.015)
    dense, _ = _fit(train, "dense", 0.4, 1.0, l2=0.015)
    assert any(spy.folded[:-1]) and spy.cached == [False, True, True]
    _assert_equal_paths(lazy, dense, train)


@pytest.mark.parametrize("row_groups", [False, True])
def test_carried_statistics_equal_a_fresh_start_pass(row_groups, monkeypatch):
    # what the end-of-round pass (and the closed forms beside it) leave for the next round equals
    # what a separate start-of-round pass over the same tables takes
    monkeypatch.setattr(lazy_next_module, "GROUP_ROW_COST", 0 if row_groups else 10 ** 9)
    train = _data()
    model, _ = _fit(train, "lazy", 0.4, 1.0)
    carried = model.lazy_path.carried
    ctx, acc = carried.stats.context, carried.stats.tables
    users = ctx.users
    assert ctx.round == model.round and torch.equal(ctx.C, model.C)
    fresh = lazy_start_module.stats_pass(model, users, ctx)
    u = torch.as_tensor(users)
    torch.testing.assert_close(acc.sq[u], fresh.sq[u], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(acc.dots[u], fresh.dots[u], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(acc.G.double(), fresh.G.double(), rtol=0, atol=1e-5)
    # max |D|: a bound (never below the exact value), within the slack of the last exact value
    assert bool((acc.amax[u] >= fresh.amax[u]).all())
    assert bool((acc.amax[u] <= lazy_next_module.AMAX_SLACK * acc.ref[u] * (1 + 1e-6)).all())
    # the entries that may change sign next round: the same set
    def risky(a):
        user, pos, _ = (torch.cat(parts) for parts in zip(*a.risk))
        return set(zip(user.tolist(), pos.tolist()))
    assert risky(acc) == risky(fresh) and len(risky(fresh)) > 0


def test_lazy_dense_uploads_match_dense_path():
    # one local_train call from the same state: the per-client uploads and private tables agree
    train = _data()
    models = {path: _fit(train, path, 0.4, 1.0)[0] for path in ("lazy", "dense")}
    ref = models["dense"]
    users = np.arange(train.shape[0])
    for m in models.values():  # same starting state for the extra round
        m.C, m.w = ref.C.clone(), ref.w.clone()
        m.D[:] = ref.private_items(users)
        m.D_scale[:] = 1.0
        m.lr_args, m.lr_network = ref.lr_args, ref.lr_network
    spy = _Spy(models["lazy"])
    owner, item, label = ref.round_samples(users, np.random.default_rng(4))
    outs = {path: m.local_train(users, owner, item, label, 0.1, 0.4, np.random.default_rng(9))
            for path, m in models.items()}
    assert spy.cached == [False]  # the state changed since the last pass: its statistics are not used
    torch.testing.assert_close(outs["lazy"].dense_uploads(models["lazy"]), outs["dense"].dense_uploads(models["dense"]),
                               atol=TOL, rtol=0)
    torch.testing.assert_close(models["lazy"].private_items(users), models["dense"].private_items(users),
                               atol=TOL, rtol=0)
    np.testing.assert_allclose(outs["lazy"].loss.numpy(), outs["dense"].loss.numpy(), rtol=1e-5, atol=1e-6)
    # the lazy path's own upload sum equals the sum of its dense uploads
    torch.testing.assert_close(outs["lazy"].c_sum, outs["lazy"].dense_uploads(models["lazy"]).sum(0).double(),
                               atol=1e-4, rtol=0)


def test_carried_statistics_are_dropped_when_the_state_changes():
    train = _data()
    model, spy = _fit(train, "lazy", 0.4, 1.0)
    assert model.lazy_path.carried is not None
    model.D[0, 0, 0] += 0.5  # a write to the private tables after the last pass
    model.train_round()
    assert spy.cached == [False, True, True, False]
    model.train_round()      # untouched since: the carried statistics are used again
    assert spy.cached[-1] is True


def test_memmap_rows_in_pieces_equal_plain_indexing(tmp_path, monkeypatch):
    import recrepro.models.federated.storage as storage

    monkeypatch.setattr(storage, "_MEMMAP_PIECE_BYTES", 2 << 20)  # one 2 MB region per piece
    model = FederatedRecommender(FederatedConfig(dim=8, memory_budget_mb=1.0, scratch_dir=str(tmp_path)))
    model.init_state(80, 4096)  # 10.5 MB of private tables: a disk-backed memmap, 6 regions
    assert model.private_storage == "memmap"
    gen = torch.Generator().manual_seed(0)
    model.D.copy_(torch.randn(model.D.shape, generator=gen))
    index = torch.randint(0, 80 * 4096, (5000,), generator=gen)
    torch.testing.assert_close(model.private_rows(index), model.D.view(-1, 8)[index], rtol=0, atol=0)
    unique = torch.unique(index)[torch.randperm(torch.unique(index).numel(), generator=gen)]
    values = torch.randn(unique.numel(), 8, generator=gen)
    model.write_private_rows(unique, values)
    torch.testing.assert_close(model.D.view(-1, 8)[unique], values, rtol=0, atol=0)
    entries = torch.randperm(80 * 4096 * 8, generator=gen)[:3000]
    model.write_private_rows(entries, torch.arange(3000, dtype=torch.float32), width=1)
    torch.testing.assert_close(model.D.view(-1)[entries], torch.arange(3000, dtype=torch.float32), rtol=0, atol=0)


@pytest.mark.parametrize("entry_bytes,lazy_rounds", [(2 ** 40, 0), (330_382, 1)])
def test_rounds_whose_replay_passes_the_budget_run_dense_and_equal_the_dense_path(
        entry_bytes, lazy_rounds, monkeypatch, capsys):
    # the replay list may hold memory_budget_mb / REPLAY_ENTRY_BYTES entries: 2**40 bytes an entry
    # leaves room for none (every round with an entry at risk runs dense); 330,382 leaves ~6,500, which
    # round 1's start-of-round pass stays under and round 2's statistics (taken by round 1's end
    # pass, carried) do not: a lazy round, then dense ones, as LastFM at μ = 1 (22 GB before this)
    monkeypatch.setattr(lazy_start_module, "REPLAY_ENTRY_BYTES", entry_bytes)
    train = _data()
    lazy, spy = _fit(train, "lazy", 0.4, 1.0, rounds=4)
    dense, _ = _fit(train, "dense", 0.4, 1.0, rounds=4)
    fallbacks = capsys.readouterr().err.count("this round and the later ones run on the dense paper path")
    assert len(spy.results) == lazy_rounds          # the lazy rounds that finished
    # one overflow: the later rounds run dense without a start-of-round pass to find it again
    assert fallbacks == 1 and lazy.replay_over_budget
    assert len(spy.cached) == lazy_rounds + 1
    _assert_equal_paths(lazy, dense, train)


def test_a_resumed_run_keeps_to_the_dense_path_after_an_overflow(monkeypatch, tmp_path):
    # killed after round 2 of 4 (round 1 lazy, round 2 over the budget), resumed: rounds 3-4 run
    # dense as in the uninterrupted run, bit for bit
    import recrepro.runtime.checkpoints as checkpoints

    monkeypatch.setattr(lazy_start_module, "REPLAY_ENTRY_BYTES", 330_382)
    train = _data()
    whole, _ = _fit(train, "lazy", 0.4, 1.0, rounds=4)
    real, saves = checkpoints.save_checkpoint, []

    def save_then_die(*args, **kwargs):
        out = real(*args, **kwargs)
        saves.append(1)
        if len(saves) == 2:
            raise KeyboardInterrupt("killed after round 2")
        return out

    ckpt = tmp_path / "run.ckpt"
    monkeypatch.setattr(checkpoints, "save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        FederatedRecommender(_config("lazy", 0.4, 1.0, rounds=4)).fit(train, checkpoint=ckpt)
    monkeypatch.setattr(checkpoints, "save_checkpoint", real)
    resumed = FederatedRecommender(_config("lazy", 0.4, 1.0, rounds=4))
    spy = _Spy(resumed)
    resumed.fit(train, checkpoint=ckpt)
    assert resumed.round == 4 and resumed.replay_over_budget and spy.results == [] and spy.cached == []
    assert torch.equal(resumed.C, whole.C) and torch.equal(resumed.w, whole.w)
