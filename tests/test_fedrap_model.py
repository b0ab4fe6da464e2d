"""FedRAP's vectorised federated simulation: hand-checked steps, per-client reference, rounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.models.federated.aggregation import row_upload_nnz, row_upload_sum
from recrepro.models.federated.clients import client_batches
from recrepro.models.federated.sampling import sample_negatives
from recrepro.models.federated.storage import clients_per_chunk
from recrepro.papers.fedrap.config import FederatedConfig, curriculum_weight
from recrepro.papers.fedrap.dense import DenseResult
from recrepro.papers.fedrap.fedrap import FederatedRecommender


def _model(n_users, n_items, **kw):
    cfg = FederatedConfig(**{"dim": 2, "rounds": 1, "local_epochs": 1, "l2": 0.0, "tol": 0.0, **kw})
    m = FederatedRecommender(cfg)
    m.init_state(n_users, n_items)
    return m


def test_one_step_code_mode_by_hand():
    # one client, one positive item, d = 2, λ = μ = 0.1, lr 1, no weight decay.
    m = _model(1, 1, mode="code", lam=0.1, mu=0.1, lr_network=1.0, lr_args=1.0, num_negatives=0)
    m.w[:] = torch.tensor([[1.0, 0.0]])
    m.b[:] = 0.0
    m.D[:] = torch.tensor([[[0.5, 0.0]]])
    m.C = torch.tensor([[0.5, 1.0]])
    out = m.local_train(np.array([0]), np.array([0]), np.array([0]), np.array([1.0], np.float32),
                        0.1, 0.1, np.random.default_rng(0))
    # s = <w, D+C> + b = 1, p = sigmoid(1), dBCE/ds = p - 1 = -0.2689414
    g = 1 / (1 + math.exp(-1)) - 1
    # dL/dD = g w - 2λ(D-C)/(n d) = (g, 0) - 0.1 (0, -1)
    np.testing.assert_allclose(m.private_items([0])[0, 0].numpy(), [0.5 - g, 0.0 - 0.1], atol=1e-6)
    # dL/dC = g w + 2λ(D-C)/(n d) + μ sign(C)/(n d) = (g + 0.05, -0.1 + 0.05)
    np.testing.assert_allclose(out.dense_uploads(m)[0, 0].numpy(), [0.5 - (g + 0.05), 1.0 - (-0.05)], atol=1e-6)
    np.testing.assert_allclose(m.w[0].numpy(), [1.0 - g, -g], atol=1e-6)  # dL/dw = g (D+C) = g (1, 1)
    np.testing.assert_allclose(m.b[0].item(), -g, atol=1e-6)
    expected_loss = -math.log(1 / (1 + math.exp(-1))) - 0.1 * 0.5 + 0.1 * 0.75
    np.testing.assert_allclose(out.loss[0].item(), expected_loss, atol=1e-6)


def test_curriculum_values():
    assert curriculum_weight("tanh", 0, 0.1) == 0.0
    assert curriculum_weight("tanh", 10, 0.1) == pytest.approx(0.1 * 0.7615941559557649)
    assert curriculum_weight("tanh", 5, 2.0) == pytest.approx(2.0 * 0.46211715726000974)
    assert curriculum_weight("sin", 10, 1.0) == pytest.approx((math.sin(1.0) + 1) / 2)
    assert curriculum_weight("frac", 3, 1.0) == pytest.approx(0.25)
    assert curriculum_weight("fixed", 7, 0.3) == 0.3
    seq, prev = [], None
    for a in range(11):
        prev = curriculum_weight("square", a, 1.0, prev)
        seq.append(prev)
    assert seq == [1.0] * 5 + [0.0] * 5 + [1.0]
    cfg = FederatedConfig(mode="code", lam=0.2, mu=0.3)
    assert cfg.weights(0) == (0.2, 0.3)  # code mode: constants from round 0
    tanh_code = FederatedConfig(mode="code", code_curriculum=True, lam=0.2, mu=0.3)
    assert tanh_code.weights(0) == (0.0, 0.0) and tanh_code.weights(10)[0] == pytest.approx(0.2 * math.tanh(1.0))
    assert FederatedConfig(mode="paper", lam=0.2, mu=0.3).weights(0) == (0.0, 0.0)
    assert FederatedConfig(method="fedrap_no", mode="code", mu=0.3).weights(4)[1] == 0.0


def test_l1_prox_and_subgradient_on_c():
    # w = 0: the BCE gives C no gradient; λ = 0, μ = 1; n_items d = 2, lr_args = 1 -> step μ lr/(n d) = 0.5
    for update, expected in (("prox", [0.0, -0.2]), ("subgradient", [0.3 - 0.5, -0.7 + 0.5])):
        m = _model(1, 1, mode="paper", lam=0.0, mu=1.0, lr_args=1.0, num_negatives=0, l1_update=update)
        m.w[:] = 0.0
        m.C = torch.tensor([[0.3, -0.7]])
        out = m.local_train(np.array([0]), np.array([0]), np.array([0]), np.array([1.0], np.float32),
                            0.0, 1.0, np.random.default_rng(0))
        np.testing.assert_allclose(out.dense_uploads(m)[0, 0].numpy(), expected, atol=1e-6)


def _reference_loop(model0, users, owner, item, label, lam, mu, seed):
    """Per-client torch.optim.SGD + ExponentialLR + autograd on the code's/paper's loss."""
    cfg = model0.config
    rng = np.random.default_rng(seed)
    counts = np.bincount(owner, minlength=users.size)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    epochs = [client_batches(owner, counts, cfg.batch_size, rng) for _ in range(cfg.local_epochs)]
    results = []
    for i, u in enumerate(users):
        w = torch.nn.Parameter(model0.w[u].clone())
        b = torch.nn.Parameter(model0.b[u].clone())
        private = cfg.has_private_items
        D = torch.nn.Parameter(model0.private_items([u])[0].clone()) if private else torch.zeros_like(model0.C)
        C = torch.nn.Parameter(model0.C.clone())
        groups = [{"params": [w] + ([b] if cfg.use_bias else []), "lr": model0.lr_network},
                  {"params": [C], "lr": model0.lr_args}] + ([{"params": [D], "lr": model0.lr_args}] if private else [])
        opt = torch.optim.SGD(groups, weight_decay=cfg.l2)
        sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=cfg.batch_decay)
        mine = np.arange(starts[i], starts[i] + counts[i])
        for batch_of in epochs:
            for t in range(int(batch_of[mine].max()) + 1 if mine.size else 0):
                idx = mine[batch_of[mine] == t]
                it = torch.as_tensor(item[idx])
                r = torch.as_tensor(label[idx])
                s = ((D[it] + C[it]) * w).sum(-1) + (b if cfg.use_bias else 0.0)
                loss = torch.nn.functional.binary_cross_entropy(torch.sigmoid(s), r)
                if not private:
                    pass  # FedMF / PFedRec: BCE only
                elif cfg.mode == "code":
                    loss = loss - lam * torch.nn.functional.mse_loss(D[it], C[it]) + mu * C[it].abs().mean()
                else:
                    nd = C.numel()
                    loss = loss - lam * ((D - C) ** 2).sum() / nd + mu * C.abs().sum() / nd
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        results.append((w.detach(), b.detach(), D.detach(), C.detach()))
    return results


@pytest.mark.parametrize("mode,repeats", [("code", False), ("code", True), ("paper", False), ("paper", True)])
def test_vectorised_equals_per_client_loop(mode, repeats):
    rng = np.random.default_rng(3)
    n_users, n_items = 4, 9
    dense = (rng.random((n_users, n_items)) < 0.5).astype(np.float32)
    dense[:, 0] = 1.0
    train = sp.csr_matrix(dense)
    model = FederatedRecommender(FederatedConfig(
        dim=3, mode=mode, local_epochs=3, batch_size=3, lr_network=0.3, lr_args=0.7, l2=0.01,
        lam=0.2, mu=0.05, tol=0.0, init_std=0.5, num_negatives=0))
    model.init_state(n_users, n_items)
    # distinct starting states per client
    model.w += torch.as_tensor(rng.normal(0, 0.3, (n_users, 3)), dtype=torch.float32)
    model.D += torch.as_tensor(rng.normal(0, 0.3, (n_users, n_items, 3)), dtype=torch.float32)
    users = np.arange(n_users)
    coo = train.tocoo()
    owner, item = coo.row.astype(np.int64), coo.col.astype(np.int64)
    label = (rng.random(owner.size) < 0.6).astype(np.float32)  # mixed labels, several batches per client
    if repeats:  # some samples drawn twice by their client (repeated negatives): same item, same label
        extra = rng.choice(owner.size, owner.size // 2, replace=False)
        owner, item, label = (np.concatenate([a, a[extra]]) for a in (owner, item, label))
        srt = np.argsort(owner, kind="stable")
        owner, item, label = owner[srt], item[srt], label[srt]
    ref = _reference_loop(model, users, owner, item, label, 0.2, 0.05, seed=11)
    out = model.local_train(users, owner, item, label, 0.2, 0.05, np.random.default_rng(11))
    uploads = out.dense_uploads(model)
    for i in range(n_users):
        w, b, D, C = ref[i]
        np.testing.assert_allclose(model.w[i].numpy(), w.numpy(), atol=1e-6)
        np.testing.assert_allclose(model.b[i].numpy(), b.numpy(), atol=1e-6)
        np.testing.assert_allclose(model.private_items([i])[0].numpy(), D.numpy(), atol=1e-6)
        np.testing.assert_allclose(uploads[i].numpy(), C.numpy(), atol=1e-6)


@pytest.mark.parametrize("method", ["fedmf", "pfedrec"])
def test_baselines_vectorised_equal_per_client_loop(method):
    rng = np.random.default_rng(5)
    n_users, n_items = 4, 9
    dense = (rng.random((n_users, n_items)) < 0.5).astype(np.float32)
    dense[:, 0] = 1.0
    train = sp.csr_matrix(dense)
    model = FederatedRecommender(FederatedConfig(
        method=method, mode="code", dim=3, local_epochs=3, batch_size=3, lr_network=0.3, lr_args=0.7, l2=0.01,
        tol=0.0, init_std=0.5, num_negatives=0))
    model.init_state(n_users, n_items)
    model.w += torch.as_tensor(rng.normal(0, 0.3, (n_users, 3)), dtype=torch.float32)
    coo = train.tocoo()
    owner, item = coo.row.astype(np.int64), coo.col.astype(np.int64)
    label = (rng.random(owner.size) < 0.6).astype(np.float32)
    ref = _reference_loop(model, np.arange(n_users), owner, item, label, 0.0, 0.0, seed=7)
    out = model.local_train(np.arange(n_users), owner, item, label, 0.0, 0.0, np.random.default_rng(7))
    uploads = out.dense_uploads(model)
    for i in range(n_users):
        w, b, _, C = ref[i]
        np.testing.assert_allclose(model.w[i].numpy(), w.numpy(), atol=1e-6)
        np.testing.assert_allclose(model.b[i].numpy(), b.numpy(), atol=1e-6)
        np.testing.assert_allclose(uploads[i].numpy(), C.numpy(), atol=1e-6)
        if method == "pfedrec":  # the client keeps its fine-tuned copy for its own predictions
            np.testing.assert_allclose(model.private_items([i])[0].numpy(), C.numpy(), atol=1e-6)
    # aggregation of row uploads (no dense tensor) equals the mean of the dense uploads
    np.testing.assert_allclose(row_upload_sum(model.C, out.uploads).numpy() / n_users, uploads.mean(0).numpy(),
                               atol=1e-6)
    abs_sorted = np.sort(np.abs(model.C.numpy()).ravel().astype(np.float64))
    assert row_upload_nnz(model.C, out.uploads, abs_sorted, 1e-4) == int((uploads.abs() > 1e-4).sum())
    # candidate-only scoring equals the full rows
    u, it = np.array([0, 1, 3, 3]), np.array([2, 0, 8, 1])
    np.testing.assert_allclose(model.score_pairs(u, it), model.score(np.arange(n_users))[u, it], atol=1e-6)


def test_aggregation_and_client_sampling(monkeypatch):
    train = sp.csr_matrix(np.eye(6, 5, dtype=np.float32))
    model = FederatedRecommender(FederatedConfig(dim=2, client_ratio=0.5, rounds=1, num_negatives=1))
    model.init_state(6, 5)
    model.train_csr, model.touched = train, train
    seen = {}

    def fake_local(users, owner, item, label, lam, mu, rng):
        seen["users"] = users.copy()
        stack = torch.stack([torch.full((5, 2), float(u)) for u in users])
        return DenseResult(stack, torch.zeros(users.size))

    monkeypatch.setattr(model, "local_train", fake_local)
    info = model.train_round()
    assert info["n_participants"] == 3 and seen["users"].size == 3
    np.testing.assert_allclose(model.C.numpy(), np.full((5, 2), seen["users"].mean()), atol=1e-6)
    assert model.lr_args == pytest.approx(200 * 0.97) and model.lr_network == pytest.approx(0.5 * 0.97)
    assert info["upload_bytes_dense"] == 3 * 5 * 2 * 4


def test_negatives_avoid_touched_items_and_seed_determinism():
    rng = np.random.default_rng(0)
    touched = sp.csr_matrix((rng.random((50, 30)) < 0.3).astype(np.float32))
    users = np.repeat(np.arange(50), 20)
    neg = sample_negatives(users, touched, 4, np.random.default_rng(5))
    assert neg.shape == (1000, 4)
    assert not touched.toarray()[users[:, None], neg].any()
    np.testing.assert_array_equal(neg, sample_negatives(users, touched, 4, np.random.default_rng(5)))


def test_fit_is_deterministic_for_a_seed():
    rng = np.random.default_rng(1)
    train = sp.csr_matrix((rng.random((20, 15)) < 0.3).astype(np.float32))

    def run(seed):
        m = FederatedRecommender(FederatedConfig(dim=4, rounds=2, local_epochs=2, seed=seed, client_ratio=0.5,
                                                 lr_args=5.0))
        m.fit(train)
        return m.score(np.arange(20))

    a, b = run(0), run(0)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, run(1))


def test_memory_budget_chunks_clients_and_falls_back_to_memmap(tmp_path):
    rng = np.random.default_rng(2)
    train = sp.csr_matrix((rng.random((12, 40)) < 0.3).astype(np.float32))

    def run():
        # 12 x 40 x 4 floats = 7.5 KiB of D > 4 KiB budget: memmap; chunks of 1 client (6 tables of 640 B)
        m = FederatedRecommender(FederatedConfig(dim=4, rounds=2, local_epochs=2, memory_budget_mb=4 / 1024,
                                                 scratch_dir=str(tmp_path), lr_args=5.0))
        m.fit(train)
        return m

    a, b = run(), run()
    assert a.private_storage == "memmap"
    np.testing.assert_array_equal(a.score(np.arange(12)), b.score(np.arange(12)))
    assert np.isfinite(a.score(np.arange(12))).all()
    assert not np.allclose(np.asarray(a.D[0]), np.asarray(a.D[1]))  # private tables diverged per client


_PER_CLIENT_MB = 40 * 4 * 4 * 6 / 2**20  # storage.clients_per_chunk's estimate of one client (40 items, d = 4)


@pytest.mark.parametrize("settings", [
    {"method": "fedrap_l2", "mode": "paper"},                  # the dense paper path
    {"method": "fedrap", "mode": "code", "dp_clip": 0.5},       # a clipped (noise-free) round: chunked rows
    # noise seeded in blocks of 3 clients, against chunks of 5, 5, 2 (and 12): the blocks straddle the chunks
    {"method": "fedrap", "mode": "paper", "dp_clip": 0.5, "dp_noise": 1.0, "dp_noise_block_mb": 3 * _PER_CLIENT_MB},
    {"method": "fedrap", "mode": "code", "dp_noise": 0.1, "dp_noise_block_mb": 3 * _PER_CLIENT_MB},
], ids=["paper-dense", "code-dp-clip", "paper-dp-noise", "code-dp-noise"])
def test_chunked_rounds_match_one_chunk(tmp_path, settings):
    # a client's negatives and shuffles must not depend on which chunk it trains in: the memory
    # budget sets the chunks (5, 5, 2 clients here against 12 at once), never the numbers
    rng = np.random.default_rng(4)
    train = sp.csr_matrix((rng.random((12, 40)) < 0.3).astype(np.float32))
    per_client_mb = _PER_CLIENT_MB

    def run(budget_mb):
        m = FederatedRecommender(FederatedConfig(dim=4, rounds=2, local_epochs=3, batch_size=8, tol=0.0,
                                                 memory_budget_mb=budget_mb, scratch_dir=str(tmp_path),
                                                 **settings))
        m.fit(train)
        return m

    one, chunked = run(64.0), run(5 * per_client_mb)
    assert clients_per_chunk(40, 4, 5 * per_client_mb, 12) == 5
    assert one.private_storage == chunked.private_storage == "dense"
    # sums over chunks are grouped differently: equal to float32 rounding, not bit for bit
    np.testing.assert_allclose(chunked.score(np.arange(12)), one.score(np.arange(12)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(chunked.C.numpy(), one.C.numpy(), rtol=1e-5, atol=1e-6)
    # and a different seed is a different run (the comparison can fail)
    other = FederatedRecommender(FederatedConfig(dim=4, rounds=2, local_epochs=3, batch_size=8, tol=0.0,
                                                 memory_budget_mb=64.0, seed=1, **settings))
    other.fit(train)
    assert not np.allclose(other.score(np.arange(12)), one.score(np.arange(12)), rtol=1e-3)


def test_round_noise_is_each_clients_own_draw():
    from recrepro.models.federated.privacy import RoundNoise

    def noise(chunks, block=4):
        rn = RoundNoise(np.random.default_rng(7), block)
        return torch.cat([rn.normals(n, (5, 32)) for n in chunks])

    whole = noise([10])
    # chunks that straddle the blocks of 4 get the same numbers
    torch.testing.assert_close(noise([3, 3, 1, 3]), whole, rtol=0, atol=0)
    # a block's noise is the block-at-once draw from a generator seeded by the round's stream (the
    # earlier code's draw, which the committed DP records ran with): 5 x 32 normals per client
    seeds = np.random.default_rng(7).integers(2**62, size=3)
    first = torch.randn((4, 5, 32), generator=torch.Generator().manual_seed(int(seeds[0])))
    torch.testing.assert_close(whole[:4], first, rtol=0, atol=0)
    last = torch.randn((2, 5, 32), generator=torch.Generator().manual_seed(int(seeds[2])))
    torch.testing.assert_close(whole[8:], last, rtol=0, atol=0)
    assert not torch.equal(noise([10], block=5)[4], whole[4])  # another grouping: other numbers


def test_dp_accountant_and_clipping():
    from recrepro.models.federated.privacy import gaussian_epsilon

    # one Gaussian release, σ = 1, δ = 1e-5: min_α α/2 + ln(1e5)/(α−1) at α = 1 + sqrt(2 ln 1e5) = 5.7987
    a = 1 + math.sqrt(2 * math.log(1e5))
    assert gaussian_epsilon(1.0, 1, 1e-5) == pytest.approx(a / 2 + math.log(1e5) / (a - 1), abs=1e-4)
    assert gaussian_epsilon(1.0, 1, 1e-5) == pytest.approx(5.2985, abs=1e-3)
    assert gaussian_epsilon(2.0, 10, 1e-5) < gaussian_epsilon(1.0, 10, 1e-5)  # more noise, less ε
    assert gaussian_epsilon(0.0, 3, 1e-5) == float("inf")
    m = _model(1, 2, dp_clip=0.5, dp_noise=0.0)
    m.C = torch.zeros(2, 2)
    up = torch.tensor([[[3.0, 0.0], [0.0, 4.0]]])  # update norm 5 -> clipped to 0.5
    out = m.privatise(up.clone(), np.random.default_rng(0))
    np.testing.assert_allclose(out[0].numpy(), up[0].numpy() * 0.1, atol=1e-6)
    small = torch.tensor([[[0.3, 0.0], [0.0, 0.0]]])  # inside the ball: unchanged
    np.testing.assert_allclose(m.privatise(small.clone(), np.random.default_rng(0)).numpy(), small.numpy())
    noisy = _model(1, 2000, dp_clip=1.0, dp_noise=2.0)
    noisy.C = torch.zeros(2000, 2)
    z = noisy.privatise(torch.zeros(1, 2000, 2), np.random.default_rng(0))
    assert float(z.std()) == pytest.approx(2.0, rel=0.05)  # noise sd = σ · clip
    # no clip (the pre-release code's noise on C): the update passes whole, the noise sd is dp_noise itself
    unclipped = _model(1, 2000, dp_noise=0.1)
    assert unclipped.config.uses_dp and not _model(1, 2, dp_clip=None).config.uses_dp
    unclipped.C = torch.zeros(2000, 2)
    big = torch.full((1, 2000, 2), 3.0)  # norm ~190: a clip would shrink it
    out = unclipped.privatise(big.clone(), np.random.default_rng(0))
    assert float(out.mean()) == pytest.approx(3.0, abs=0.01) and float(out.std()) == pytest.approx(0.1, rel=0.05)


def test_settings_that_would_act_otherwise_than_written_are_refused():
    with pytest.raises(ValueError, match="acts in mode='paper'"):  # a schedule code mode would drop
        _model(1, 2, mode="code", curriculum="sin")
    assert _model(1, 2, mode="code", curriculum="sin", code_curriculum=True).config.weights(3) == \
        _model(1, 2, mode="paper", curriculum="sin").config.weights(3)
    for bad in ({"dp_noise": -0.1}, {"dp_clip": 0.0}):
        with pytest.raises(ValueError, match="dp_noise must be"):
            _model(1, 2, **bad)
