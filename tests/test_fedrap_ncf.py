"""FedNCF / centralised NCF baselines of FedRAP: vectorised FedNCF round = per-client loop + FedAvg."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from recrepro.models.federated.clients import client_batches
from recrepro.papers.fedrap.central import CentralNCF
from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.fedncf import FedNCF
from recrepro.papers.fedrap.ncf import NET, bce, neumf_logits


def _reference_round(model0: FedNCF, train: sp.csr_matrix) -> dict[str, torch.Tensor]:
    """Per-client torch.optim.SGD (or Adam) + ExponentialLR + autograd, then the unweighted FedAvg."""
    cfg = model0.config
    coo = train.tocoo()
    owner, item = coo.row.astype(np.int64), coo.col.astype(np.int64)
    counts = np.bincount(owner, minlength=train.shape[0])
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rng = np.random.default_rng([cfg.seed, 1, 0])  # the round's stream (no negatives drawn: k = 0)
    epochs = [client_batches(owner, counts, cfg.batch_size, rng) for _ in range(cfg.local_epochs)]
    uploads = []
    for u in range(train.shape[0]):
        p = {"pg": model0.w[u].clone(), "pm": model0.pm[u].clone(), "qg": model0.C.clone(), "qm": model0.Cm.clone()}
        p.update({k: v.clone() for k, v in model0.net.items()})
        p = {k: torch.nn.Parameter(v) for k, v in p.items()}
        groups = [{"params": [p["qg"], p["qm"]], "lr": model0.lr_args},
                  {"params": [p[k] for k in ("pg", "pm", *NET)], "lr": model0.lr_network}]
        opt = (torch.optim.Adam(groups) if cfg.client_optimizer == "adam"
               else torch.optim.SGD(groups, weight_decay=cfg.l2))
        sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=cfg.batch_decay)
        mine = np.arange(starts[u], starts[u] + counts[u])
        for batch_of in epochs:
            for t in range(int(batch_of[mine].max()) + 1):
                it = torch.as_tensor(item[mine[batch_of[mine] == t]])
                n = it.numel()
                logit = neumf_logits(p["pg"].expand(n, -1), p["pm"].expand(n, -1), p["qg"][it], p["qm"][it],
                                     {k: p[k] for k in NET})
                loss = torch.nn.functional.binary_cross_entropy(torch.sigmoid(logit), torch.ones(n))
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        uploads.append({k: v.detach() for k, v in p.items()})
    avg = {k: torch.stack([up[k] for up in uploads]).mean(0) for k in ("qg", "qm", *NET)}
    avg["pg"] = torch.stack([up["pg"] for up in uploads])
    avg["pm"] = torch.stack([up["pm"] for up in uploads])
    return avg


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_fedncf_round_equals_per_client_loop_and_fedavg(optimizer):
    rng = np.random.default_rng(4)
    dense = (rng.random((20, 7)) < 0.5).astype(np.float32)
    dense[:, 0] = 1.0
    dense[0] = 1.0  # client 0 has 7 samples: 3 batches of 3, the others 1-3 batches
    # 20 clients share 8 buckets: within a bucket some clients step while others wait (masked)
    train = sp.csr_matrix(dense)
    lrs = {"lr_network": 0.3, "lr_args": 0.7, "l2": 0.01} if optimizer == "sgd" else \
        {"lr_network": 0.05, "lr_args": 0.2, "l2": 0.0}
    model = FedNCF(FederatedConfig(method="fedncf", dim=4, rounds=1, local_epochs=2, batch_size=3, num_negatives=0,
                                   tol=0.0, init_std=0.5, seed=2, client_optimizer=optimizer, **lrs))
    model.train_csr, model.touched = train, train
    model.init_state(*train.shape)
    C0 = model.C.clone()
    ref = _reference_round(model, train)
    model.train_round()
    # the round moved the shared rows by more than the tolerance below
    assert float((model.C - C0).abs().max()) > 1e-2
    np.testing.assert_allclose(model.C.numpy(), ref["qg"].numpy(), atol=1e-6)
    np.testing.assert_allclose(model.Cm.numpy(), ref["qm"].numpy(), atol=1e-6)
    np.testing.assert_allclose(model.w.numpy(), ref["pg"].numpy(), atol=1e-6)
    np.testing.assert_allclose(model.pm.numpy(), ref["pm"].numpy(), atol=1e-6)
    for k in NET:
        np.testing.assert_allclose(model.net[k].numpy(), ref[k].numpy(), atol=1e-6)
    # scores: full rows agree with the pair scorer; the round changed the server tables
    np.testing.assert_allclose(model.score(np.array([1, 3]))[:, [2, 5]],
                               model.score_pairs([1, 1, 3, 3], [2, 5, 2, 5]).reshape(2, 2), atol=1e-7)


def test_bce_of_a_saturated_logit_is_clamped_with_a_zero_gradient():
    # σ(40) rounds to exactly 1 in float32: log(1 - p) = -inf, clamped to -100 (BCELoss), and the
    # gradient is 0, not the NaN of autograd through clamp(log1p(-p))
    logit = torch.tensor([40.0, 0.0], requires_grad=True)
    loss = bce(logit, torch.tensor([0.0, 1.0]))
    loss.sum().backward()
    np.testing.assert_allclose(loss.detach().numpy(), [100.0, np.log(2)], rtol=1e-6)
    np.testing.assert_allclose(logit.grad.numpy(), [0.0, -0.5], atol=1e-7)


def test_fedncf_adam_needs_zero_l2_and_fedncf():
    with pytest.raises(ValueError, match="l2=0"):
        FederatedConfig(method="fedncf", client_optimizer="adam", l2=1e-4)
    with pytest.raises(ValueError, match="fedncf"):
        FederatedConfig(method="fedmf", client_optimizer="adam", l2=0.0)


def test_neumf_logits_by_hand_and_central_ncf_learns():
    d = 2
    net = {"W1": torch.eye(4, 2), "b1": torch.zeros(2), "W2": torch.ones(2, 1), "b2": torch.tensor([-1.0]),
           "h": torch.tensor([1.0, 2.0, 3.0]), "h0": torch.tensor(0.5)}
    pg, pm = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, -1.0]])
    qg, qm = torch.tensor([[0.5, 0.5]]), torch.tensor([[1.0, 1.0]])
    # gmf = (0.5, 1); z1 = relu([3, -1, 1, 1] @ eye(4,2)) = (3, 0); z2 = relu(3 - 1) = 2
    # logit = 1*0.5 + 2*1 + 3*2 + 0.5 = 9
    assert float(neumf_logits(pg, pm, qg, qm, net)[0]) == 9.0
    rng = np.random.default_rng(0)
    blocks = np.kron(np.eye(2), np.ones((10, 10)))  # two user groups, two item groups
    train = sp.csr_matrix((blocks * (rng.random((20, 20)) < 0.7)).astype(np.float32))
    m = CentralNCF(dim=d * 4, epochs=12, lr=0.02, batch_size=128, seed=1).fit(train)
    s = m.score(np.arange(20))
    assert s[:10, :10].mean() > s[:10, 10:].mean() + 0.2 and s[10:, 10:].mean() > s[10:, :10].mean() + 0.2
    assert m.history[-1]["train_loss"] < m.history[0]["train_loss"]


def test_fedncf_adam_step_is_bit_for_bit_the_plain_update():
    """The in-place Adam step gives exactly the plain expressions' numbers (records stay comparable),
    with clients that do not step (``on`` = 0) left untouched, moments included."""
    from recrepro.papers.fedrap.fedncf import _ADAM_BETAS, _ADAM_EPS, _adam_step

    def plain(v, g, m, s, lr, on, t):
        b1, b2 = _ADAM_BETAS
        on, lr = on.view(-1, 1, 1), lr.view(-1, 1, 1)
        m.add_(on * (1 - b1) * (g - m))
        s.add_(on * (1 - b2) * (g * g - s))
        bc1 = (1 - b1 ** t).float().view(-1, 1, 1)
        bc2 = (1 - b2 ** t).sqrt().float().view(-1, 1, 1)
        v.sub_(lr / bc1 * m / (s.sqrt() / bc2 + _ADAM_EPS))

    gen = torch.Generator().manual_seed(1)
    v, m, s = torch.randn(12, 9, 4, generator=gen), torch.zeros(12, 9, 4), torch.zeros(12, 9, 4)
    ours = [v.clone(), m.clone(), s.clone()]
    lr = torch.rand(12, generator=gen) * 1e-2
    on = torch.tensor([1.0, 0.0] * 6)
    for step in range(1, 6):
        g = torch.randn(12, 9, 4, generator=gen)
        t = torch.full((12,), float(step), dtype=torch.float64)
        plain(v, g, m, s, lr, on, t)
        _adam_step(*ours[:1], g, *ours[1:], lr, on, t)
    assert torch.equal(ours[0], v) and torch.equal(ours[1], m) and torch.equal(ours[2], s)
    assert float((v[0] - ours[0][0]).abs().max()) == 0.0 and float(m[0].abs().max()) > 0
    assert float(m[1].abs().max()) == 0.0  # a client that never steps keeps zero moments
