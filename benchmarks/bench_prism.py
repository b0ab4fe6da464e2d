"""PRISM training throughput: our trainer's epoch vs straightforward loops (issue 5, acceptance 4).

    python benchmarks/bench_prism.py --split-dir data/splits/gowalla/prism/random_ratio/seed123 \
        [--batches 20] [--threads 2]
    python benchmarks/bench_prism.py --split-dir ... --trainer [--quick] [--threads 1]

``--trainer`` (issue 21) times the real trainer, :func:`recrepro.papers.prism.trainer.train`, against
a bare loop over the same steps: per epoch, the same edge order, negatives and
:func:`~recrepro.papers.prism.trainer.batch_loss` / backward / Adam step, then one validation
ranking (:func:`~recrepro.papers.prism.trainer.validation_ndcg`) — and nothing else (no finiteness
checks, no loss bookkeeping, no best-state copy, no checkpoint).  The trainer runs as in a paper-tier
job (paper settings of the loss, per-epoch validation, an atomic checkpoint to a temporary file).
Both are timed in process CPU seconds (``CLOCK``) over their steady-state epochs (epochs 2 and 3: from the first epoch's validation to
the third's), alternating ours / bare, so the ratio is the trainer's overhead.  ``--quick`` uses a
20 % user sample of the split and MF only.  With ``device="cuda"`` (``run_all.py --device cuda``) both
train on the GPU and are timed in wall seconds after ``torch.cuda.synchronize()`` (:mod:`devclock`).

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
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from recrepro.runtime.options import add_threads
from recrepro.models.mf import MFNet
from recrepro.models.backbones import build_net
from recrepro.papers.prism.trainer import TrainSettings, _edges, _make_optimizer, batch_loss, train, validation_ndcg
from recrepro.evaluation.on_split import SplitData

from devclock import clock_label, device_label, on_cuda, stamp_fn  # benchmarks/ (on sys.path)

#: Trainer timings count this process's CPU seconds: on a shared 2-core machine the other jobs'
#: load changes wall times by ±50 % between consecutive epochs, CPU time of a one-thread run far less.
CLOCK = time.process_time

#: The paper tier's batch size per loss (config.yaml ``prism.tiers.paper.batch_size``).
PAPER_BATCH = {"bpr": 16384, "ssm": 16384, "directau": 4096, "mawu": 4096}


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


def time_case(name, train, loss_fn, settings, optimizer_kind, batches, batch_size, device: str = "cpu"):
    """Median wall seconds of one training step of ``loss_fn`` on ``device`` (CUDA: synchronised at each stamp)."""
    n_users, n_items = train.shape
    stamp = stamp_fn(device, time.perf_counter)
    net = MFNet(n_users, n_items, 64, seed=0).to(device)
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
        # indices and negatives drawn on the CPU (as the trainer does), moved before the stamp: only the step is timed
        bu, bi = users[idx].to(device), items[idx].to(device)
        negs = torch.randint(n_items, (idx.numel(), 1), generator=gen).to(device)
        start = stamp()
        loss = loss_fn(net, bu, bi, negs)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if b >= 2:
            times.append(stamp() - start)
    per_batch = float(np.median(times))
    n_batches = int(np.ceil(users.numel() / batch_size))
    return {"case": name, "median_batch_s": round(per_batch, 5), "epoch_s_extrapolated": round(per_batch * n_batches, 2),
            "batches_per_epoch": n_batches, "threads": torch.get_num_threads()}


def user_sample(train, validation, fraction: float, seed: int = 0):
    """The rows of a random ``fraction`` of users (all items kept): a smaller problem of the same shape."""
    if fraction >= 1.0:
        return train, validation
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(train.shape[0], int(train.shape[0] * fraction), replace=False))
    return train[rows], validation[rows]


def paper_settings(backbone: str, loss: str, **extra) -> TrainSettings:
    """Table 1's settings of one cell (PRISM init α 1, no weight decay, paper negatives)."""
    return TrainSettings(backbone=backbone, loss=loss, dim=64, lr=1e-3, alpha=1.0, batch_size=PAPER_BATCH[loss],
                         n_negatives=10 if loss == "ssm" else 1, wd_mode="none", seed=0, **extra)


def time_trainer(train_m, validation, settings: TrainSettings) -> float:
    """Steady-state seconds per epoch of the real trainer (epochs 2-3: training + validation + bookkeeping)
    on ``settings.device``."""
    stamps: list[float] = []
    stamp = stamp_fn(settings.device, CLOCK)
    with tempfile.TemporaryDirectory() as tmp:
        train(train_m, validation, TrainSettings(**{**settings.as_dict(), "epochs": 3, "patience": 100}),
              on_epoch=lambda epoch, score: stamps.append(stamp()),
              checkpoint=Path(tmp) / "ckpt.pt")
    return (stamps[2] - stamps[0]) / 2


def time_bare(train_m, validation, settings: TrainSettings) -> float:
    """Steady-state seconds per epoch of the bare loop: the same steps and one validation ranking, on
    ``settings.device`` (net, margins and degrees there; orders and negatives drawn on the CPU and each
    batch moved, as the trainer does)."""
    torch.manual_seed(settings.seed)
    gen = torch.Generator().manual_seed(settings.seed)
    device = torch.device(settings.device)
    stamp = stamp_fn(device, CLOCK)
    n_users, n_items = train_m.shape
    net = build_net(settings.backbone, n_users, n_items, settings.dim, settings.seed, train=train_m).to(device)
    margins = None
    params = list(net.parameters())
    if settings.loss == "mawu":
        margins = (torch.nn.Parameter(torch.zeros(n_users, device=device)),
                   torch.nn.Parameter(torch.zeros(n_items, device=device)))
        params += list(margins)
    opt = _make_optimizer(params, settings)
    users, items = _edges(train_m)
    n_neg = {"bpr": 1, "ssm": settings.n_negatives}.get(settings.loss, 0)
    degree = torch.as_tensor(np.bincount(train_m.indices, minlength=n_items), dtype=torch.float32, device=device)
    stamps = []
    for _ in range(3):
        order = torch.randperm(users.numel(), generator=gen)
        for start in range(0, users.numel(), settings.batch_size):
            idx = order[start:start + settings.batch_size]
            negs = torch.randint(n_items, (idx.numel(), n_neg), generator=gen).to(device) if n_neg else None
            loss = batch_loss(net, users[idx].to(device), items[idx].to(device), negs, settings, margins, degree)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        validation_ndcg(net, train_m, validation, settings.eval_k, settings.eval_batch_size, settings.device)
        stamps.append(stamp())
    return (stamps[2] - stamps[0]) / 2


def measure_trainer(split_dir: str | Path, *, quick: bool, backbones=("mf", "nlmf"),
                    losses=("bpr", "ssm", "directau", "mawu"), repeats: int | None = None,
                    device: str = "cpu") -> list[dict]:
    """Trainer epoch vs bare step loop + one validation ranking, per backbone and loss (goal ≤ 1.2×).

    ``device``: where both train (``"cpu"``: process CPU seconds; ``"cuda"``: synchronised wall seconds).
    """
    split = SplitData(split_dir)
    train_m, validation = user_sample(split.csr(["train"]), split.csr(["validation"]), 0.2 if quick else 1.0)
    out = []
    for backbone in (("mf",) if quick else backbones):
        for loss in losses:
            settings = paper_settings(backbone, loss, device=device)
            # alternate ours / bare (twice unless quick) and keep each one's best: slow phases of a shared machine hit both
            ours = anchor = float("inf")
            for _ in range(repeats or (1 if quick else 2)):
                ours = min(ours, time_trainer(train_m, validation, settings))
                anchor = min(anchor, time_bare(train_m, validation, settings))
            out.append({"measure": f"PRISM trainer epoch, {backbone} {loss}" + (" (20 % users)" if quick else ""),
                        "ours_s": round(ours, 3), "anchor_s": round(anchor, 3), "ratio": round(ours / anchor, 3),
                        "goal": "≤ 1.2×", "holds": ours / anchor <= 1.2, "threads": torch.get_num_threads(),
                        "clock": clock_label(device), "device": device_label(device)})
    return out


def measure_directau(split_dir: str | Path, *, batches: int = 20, device: str = "cpu") -> dict:
    """DirectAU step, ours vs the ``torch.pdist`` loop (goal ≥ 4× faster), on ``device``."""
    train_m = SplitData(split_dir).csr(["train"])
    dau = TrainSettings(loss="directau", weight_decay=1e-6, wd_mode="coupled", device=device)
    ours = time_case("directau_ours", train_m, lambda n, u, i, g: batch_loss(n, u, i, None, dau), dau, "ours",
                     batches, 4096, device)["median_batch_s"]
    anchor = time_case("directau_pdist_loop", train_m, lambda n, u, i, g: _pdist_directau(n, u, i), dau, "default",
                       batches, 4096, device)["median_batch_s"]
    row = {"measure": "DirectAU step vs torch.pdist loop", "ours_s": ours, "anchor_s": anchor,
           "ratio": round(ours / anchor, 3), "goal": "≤ 0.25× (≥ 4× faster)", "holds": ours / anchor <= 0.25,
           "threads": torch.get_num_threads(), "note": "wall-clock median step", "device": device_label(device)}
    if on_cuda(device):  # the CPU row keeps its note only (its table line is unchanged)
        row["clock"] = clock_label(device)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--split-dir", required=True)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4096)
    add_threads(parser, default=2, help="torch threads (default 2)")
    parser.add_argument("--trainer", action="store_true", help="trainer vs bare loop (module docstring)")
    parser.add_argument("--quick", action="store_true", help="with --trainer: 20 %% users, MF only")
    parser.add_argument("--repeats", type=int, default=None, help="with --trainer: ours/bare alternations")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.trainer:
        for row in measure_trainer(args.split_dir, quick=args.quick, repeats=args.repeats):
            print(json.dumps(row), flush=True)
        return
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
