"""PRISM training throughput: our trainer's epoch vs straightforward loops (issue 5, acceptance 4).

    python benchmarks/bench_prism.py --split-dir data/splits/gowalla/prism/random_ratio/seed123 \
        [--batches 20] [--threads 2]

Times ``--batches`` training steps (MF, d 64, full-table coupled weight decay 1e-6, batch 4,096)
and extrapolates to one epoch, for

* DirectAU, ours: uniformity from the Gram matrix (one B×d·d×B matmul) vs the official code's
  ``torch.pdist`` formulation, both with dense Adam;
* BPR, ours (fused Adam) vs a bare loop with ``Adam(fused=True)`` and with the default Adam.

Prints one JSON line per case.  Evaluation is not included (it is the shared batched core).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

from recrepro.models.mf import MFNet
from recrepro.papers.prism.trainer import TrainSettings, _edges, _make_optimizer, batch_loss
from recrepro.runs import SplitData


def _pdist_uniformity(x: torch.Tensor) -> torch.Tensor:
    return torch.pdist(F.normalize(x, dim=-1), p=2).pow(2).mul(-2).exp().mean().log()


def _pdist_directau(net, users, items, gamma=1.0):
    u, i = net.user_emb[users], net.item_emb[items]
    align = (F.normalize(u, dim=-1) - F.normalize(i, dim=-1)).pow(2).sum(-1).mean()
    uu, ii = net.user_emb[torch.unique(users)], net.item_emb[torch.unique(items)]
    return align + gamma * (_pdist_uniformity(uu) + _pdist_uniformity(ii)) / 2


def _bare_bpr(net, users, items, negs):
    u, p, n = net.user_emb[users], net.item_emb[items], net.item_emb[negs[:, 0]]
    return -F.logsigmoid((u * p).sum(-1) - (u * n).sum(-1)).mean()


def time_case(name, train, loss_fn, settings, optimizer_kind, batches, batch_size):
    n_users, n_items = train.shape
    net = MFNet(n_users, n_items, 64, seed=0)
    params = list(net.parameters())
    if optimizer_kind == "ours":
        opt = _make_optimizer(params, settings)
    elif optimizer_kind == "fused":
        opt = torch.optim.Adam(params, lr=1e-3, weight_decay=settings.weight_decay, fused=True)
    else:
        opt = torch.optim.Adam(params, lr=1e-3, weight_decay=settings.weight_decay)
    users, items = _edges(train)
    gen = torch.Generator().manual_seed(0)
    order = torch.randperm(users.numel(), generator=gen)
    times = []
    for b in range(batches + 2):  # two warm-up steps
        idx = order[b * batch_size:(b + 1) * batch_size]
        bu, bi = users[idx], items[idx]
        negs = torch.randint(n_items, (idx.numel(), 1), generator=gen)
        start = time.perf_counter()
        loss = loss_fn(net, bu, bi, negs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if b >= 2:
            times.append(time.perf_counter() - start)
    per_batch = float(np.median(times))
    n_batches = int(np.ceil(users.numel() / batch_size))
    return {"case": name, "median_batch_s": round(per_batch, 5), "epoch_s_extrapolated": round(per_batch * n_batches, 2),
            "batches_per_epoch": n_batches, "threads": torch.get_num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split-dir", required=True)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train = SplitData(args.split_dir).csr(["train"])
    wd = 1e-6
    dau = TrainSettings(loss="directau", weight_decay=wd, wd_mode="coupled")
    bpr = TrainSettings(loss="bpr", weight_decay=wd, wd_mode="coupled")
    cases = [
        ("directau_ours", lambda n, u, i, g: batch_loss(n, u, i, None, dau), dau, "ours"),
        ("directau_pdist_loop", lambda n, u, i, g: _pdist_directau(n, u, i), dau, "default"),
        ("bpr_ours", lambda n, u, i, g: batch_loss(n, u, i, g, bpr), bpr, "ours"),
        ("bpr_bare_fused_adam", _bare_bpr, bpr, "fused"),
        ("bpr_bare_default_adam", _bare_bpr, bpr, "default"),
    ]
    for name, fn, settings, kind in cases:
        print(json.dumps(time_case(name, train, fn, settings, kind, args.batches, args.batch_size)), flush=True)


if __name__ == "__main__":
    main()
