"""The shared PRISM trainer: Adam, weight decay modes, PRISM init, early stopping.

Loveland et al. (KDD 2025), §3.1 and Appendix B.1: embeddings Xavier-uniform (or PRISM,
Eq. 4), Adam, up to ``epochs`` epochs, early stopping on validation NDCG@20 with patience
``patience``, best epoch restored.  Weight decay:

``coupled``
    Adam's ``weight_decay`` on **every** parameter (L2 added to the gradient, not AdamW):
    the full-table update the paper's Theorem 3.1 analyses.  Kept dense on purpose.
``batched``
    ``(λ/2)(Σ‖u‖² + Σ‖i‖²)`` over the *distinct* users and items of the batch (positives
    and negatives), on their final embeddings (paper §3.3 / official ``--batched_wd``).
``none``
    No weight decay.

Losses: ``bpr``, ``ssm``, ``directau``, ``mawu`` (:mod:`recrepro.models.losses`) and the
debiasing baselines of Appendix D.2 (:mod:`recrepro.papers.prism.debias`): ``ipl`` (BPR + IPL's
``λ_f·std(C_i/Q_i^{2−β})``), ``resn`` (BPR + ReSN's spectral penalty on the batch's distinct
users and items) and ``macr`` (MACR's BCE multi-task loss; the net is wrapped in
:class:`~recrepro.papers.prism.debias.MACRNet`, whose tables rank by the counterfactual score).

Each epoch records its training seconds and the validation NDCG@20 (dot-product scores,
training items masked), computed by the batched evaluation core.  ``check_finite``
guards the loss every step and the embedding tables every epoch.

Resuming (``checkpoint=PATH``, :mod:`recrepro.runtime.checkpoints`): after every epoch — after the
validation and early-stopping bookkeeping — the trainer writes the epoch number, the net's
and Adam's state, MAWU's margins, the explicit generator ``gen`` (negatives, edge order),
torch's global RNG, the history so far, ``best``/``best_epoch``/``bad`` and the best epoch's
net and margins.  A restarted run restores all of it and continues with the next epoch
(straight to the end if the saved run had already stopped), so it returns the very same
net and history as an uninterrupted run; only ``epoch_seconds`` (wall clock) of the epochs
trained after the restart differ.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from recrepro.runtime.checkpoints import (Checkpointer, data_fingerprint, global_rng_state, set_global_rng_state,
                                  settings_key)
from recrepro.evaluation import evaluate_full_ranking
from recrepro.papers.prism import debias as D
from recrepro.models import losses as L
from recrepro.models.backbones import build_net
from recrepro.models.gather import gather_rows
from recrepro.records import NonFiniteError, check_finite

__all__ = ["TrainSettings", "checkpoint_key", "draw_negatives", "train"]

log = logging.getLogger(__name__)

LOSSES = ("bpr", "ssm", "directau", "mawu", "ipl", "resn", "macr")
WD_MODES = ("coupled", "batched", "none")
NEGATIVES = ("uniform", "in_batch")


@dataclass
class TrainSettings:
    """Everything that determines a training run (one cell of a sweep).

    Attributes
    ----------
    backbone: ``mf`` | ``nlmf`` | ``lightgcn``.
    loss: ``bpr`` | ``ssm`` | ``directau`` | ``mawu`` | ``ipl`` | ``resn`` | ``macr`` (App. D.2 baselines).
    alpha: PRISM strength α (Eq. 4); ``None`` = plain Xavier-uniform init (the baseline).
    weight_decay, wd_mode: λ and how it is applied (``coupled`` | ``batched`` | ``none``).
    n_negatives: negatives per positive (BPR 1; SSM 10 per the paper, 20 in the code).
    negatives: ``uniform`` over all items (the paper's approximate sampling) or
        ``in_batch`` (the official code: uniform over the distinct items of the batch's positives;
        :func:`draw_negatives`).
    gamma: DirectAU uniformity weight; gamma_user / gamma_item: MAWU's two weights.
    nlmf_relu: ReLU between the non-linear MF tower layers (paper) or not (code).
    ipl_weight, ipl_exponent: IPL's λ_f and popularity exponent β.
    resn_weight: ReSN's penalty weight.
    macr_alpha, macr_beta, macr_c: MACR's item/user-module loss weights and the
        counterfactual constant c of its ranking score.
    record_cosine: also record the validation NDCG@20 of cosine scores each epoch
        (Fig. 6; model selection always uses the dot product).
    """

    backbone: str = "mf"
    loss: str = "bpr"
    dim: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    wd_mode: str = "coupled"
    alpha: float | None = None
    batch_size: int = 16384
    epochs: int = 1000
    patience: int = 10
    n_negatives: int = 1
    negatives: str = "uniform"
    tau: float = 0.2
    gamma: float = 1.0
    gamma_user: float = 1.0
    gamma_item: float = 1.0
    nlmf_relu: bool = True
    ipl_weight: float = 0.1
    ipl_exponent: float = 1.5
    resn_weight: float = 1e-3
    macr_alpha: float = 1e-3
    macr_beta: float = 1e-3
    macr_c: float = 1.0
    record_cosine: bool = False
    layers: int = 3
    seed: int = 0
    device: str = "cpu"
    eval_k: int = 20
    eval_batch_size: int = 2048
    fused_adam: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; known: {LOSSES}")
        if self.wd_mode not in WD_MODES:
            raise ValueError(f"unknown wd_mode {self.wd_mode!r}; known: {WD_MODES}")
        if self.negatives not in NEGATIVES:
            raise ValueError(f"unknown negatives {self.negatives!r}; known: {NEGATIVES}")
        if self.weight_decay < 0:
            raise ValueError("weight_decay must be >= 0")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _edges(train: sp.csr_matrix) -> tuple[torch.Tensor, torch.Tensor]:
    users = np.repeat(np.arange(train.shape[0], dtype=np.int64), np.diff(train.indptr))
    return torch.from_numpy(users), torch.from_numpy(train.indices.astype(np.int64))


def _make_optimizer(params: list[torch.nn.Parameter], settings: TrainSettings) -> torch.optim.Optimizer:
    coupled = settings.weight_decay if settings.wd_mode == "coupled" else 0.0
    if settings.fused_adam:
        try:
            return torch.optim.Adam(params, lr=settings.lr, weight_decay=coupled, fused=True)
        except (RuntimeError, TypeError, ValueError):  # fused kernel unavailable for this device/dtype
            pass
    return torch.optim.Adam(params, lr=settings.lr, weight_decay=coupled)


def batch_loss(net: torch.nn.Module, users: torch.Tensor, items: torch.Tensor, negs: torch.Tensor | None,
               settings: TrainSettings, margins: tuple[torch.Tensor, torch.Tensor] | None = None,
               item_degree: torch.Tensor | None = None) -> torch.Tensor:
    """The loss of one batch of positive pairs (plus batched weight decay when configured).

    Parameters
    ----------
    users, items:
        ``[B]`` indices of the positive pairs.
    negs:
        ``[B, N]`` negative item indices (BPR/SSM), else ``None``.
    margins:
        MAWU's ``(user_margins [n_users], item_margins [n_items])``.
    item_degree:
        ``[n_items]`` training degrees (IPL's ``Q_i``).
    """
    enc_u, enc_i = net.encoders()
    u = enc_u(users)
    p = enc_i(items)
    need_unique = settings.loss in ("directau", "mawu", "resn") or (
        settings.wd_mode == "batched" and settings.weight_decay > 0)
    if need_unique:
        uniq_u = torch.unique(users)
        all_items = items if negs is None else torch.cat([items, negs.reshape(-1)])
        uniq_i_pos = torch.unique(items)
        uu = enc_u(uniq_u)
        ii_pos = enc_i(uniq_i_pos)
    if settings.loss in ("bpr", "ipl", "resn"):
        n = enc_i(negs[:, 0])
        loss = L.bpr_loss(u, p, n)
        if settings.loss == "ipl":
            loss = loss + settings.ipl_weight * D.ipl_regulariser((u * p).sum(-1), items, item_degree,
                                                                  settings.ipl_exponent)
        elif settings.loss == "resn":
            batch_items = torch.unique(torch.cat([items, negs[:, 0]]))
            loss = loss + settings.resn_weight * D.resn_regulariser(uu, enc_i(batch_items))
    elif settings.loss == "macr":
        loss = D.macr_loss(u, p, enc_i(negs[:, 0]), net.w_user, net.w_item, settings.macr_alpha, settings.macr_beta)
    elif settings.loss == "ssm":
        n = enc_i(negs.reshape(-1)).reshape(negs.shape[0], negs.shape[1], -1)
        loss = L.ssm_loss(u, p, n, tau=settings.tau)
    elif settings.loss == "directau":
        loss = L.directau_loss(u, p, gamma=settings.gamma, user_unique=uu, item_unique=ii_pos)
    else:
        mu, mi = margins
        loss = L.mawu_loss(u, p, gather_rows(mu, users), gather_rows(mi, items), settings.gamma_user,
                           settings.gamma_item, user_unique=uu, item_unique=ii_pos)
    if settings.wd_mode == "batched" and settings.weight_decay > 0:
        ii_all = enc_i(torch.unique(all_items))
        loss = loss + (settings.weight_decay / 2.0) * (uu.pow(2).sum() + ii_all.pow(2).sum())
    return loss


def validation_ndcg(net: torch.nn.Module, exclude: sp.csr_matrix, target: sp.csr_matrix, k: int,
                    batch_size: int, device: str, cosine: bool = False) -> float:
    """NDCG@k of dot-product (or cosine) scores on ``target`` with ``exclude`` masked (evaluation core)."""
    with torch.no_grad():
        users, items = net.final_tables()
        if cosine:
            users, items = F.normalize(users, dim=1), F.normalize(items, dim=1)
        result = evaluate_full_ranking((users.detach(), items.detach()), exclude, target, [k],
                                       batch_size=batch_size, device=device, metrics=["ndcg"])
    return float(result.overall[f"ndcg@{k}"])


def checkpoint_key(train_matrix: sp.csr_matrix, validation: sp.csr_matrix | None, settings: TrainSettings) -> str:
    """The :func:`~recrepro.runtime.checkpoints.settings_key` of a run: its settings and its data."""
    return settings_key({"trainer": "prism", "settings": settings.as_dict(),
                         "data": data_fingerprint(train_matrix, validation)})


def draw_negatives(batch_items: torch.Tensor, n_items: int, n_neg: int, negatives: str,
                   gen: torch.Generator) -> torch.Tensor:
    """``n_neg`` negatives per positive of the batch (``len(batch_items) × n_neg`` item ids).

    ``uniform``: uniform over all items, a sampled positive not rejected (the paper's "approximate
    negative sampling"). ``in_batch``: uniform over the *distinct* items among the batch's positives,
    as the released loader draws from the batch subgraph's nodes (``randint(len(n_id))``): an item
    in the batch is as likely as any other there however often it occurs (popular items are more
    often in a batch, but not drawn in proportion to their count in it).
    """
    shape = (batch_items.numel(), n_neg)
    if negatives == "uniform":
        return torch.randint(n_items, shape, generator=gen)
    pool = torch.unique(batch_items)
    return pool[torch.randint(pool.numel(), shape, generator=gen)]


def _train_epoch(net: torch.nn.Module, optimizer: torch.optim.Optimizer, e_users: torch.Tensor,
                 e_items: torch.Tensor, settings: TrainSettings, margins: tuple[torch.Tensor, torch.Tensor] | None,
                 item_deg_t: torch.Tensor, gen: torch.Generator, n_neg: int, epoch: int) -> float:
    """One pass over the training edges in a shuffled order (``gen``), ``n_neg`` negatives per edge
    drawn as ``settings.negatives`` says; returns the mean batch loss."""
    device = item_deg_t.device
    n_items = item_deg_t.numel()
    n_edges = e_users.numel()
    net.train()
    order = torch.randperm(n_edges, generator=gen)
    total, batches = 0.0, 0
    for start in range(0, n_edges, settings.batch_size):
        idx = order[start:start + settings.batch_size]
        bu, bi = e_users[idx], e_items[idx]
        negs = draw_negatives(bi, n_items, n_neg, settings.negatives, gen).to(device) if n_neg else None
        loss = batch_loss(net, bu.to(device), bi.to(device), negs, settings, margins, item_deg_t)
        check_finite("training loss", loss, f"epoch {epoch}, batch starting at edge {start}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if margins is not None:
            with torch.no_grad():
                margins[0].clamp_(0.0, 1.0)
                margins[1].clamp_(0.0, 1.0)
        total += float(loss.detach())
        batches += 1
    return total / max(batches, 1)


@dataclass
class _Fit:
    """What one run trains: the net (on its device), Adam, MAWU's margins, the training edges, the items'
    training degrees (IPL's ``Q_i``), the explicit generator (negatives, edge order) and the negatives per edge."""

    net: torch.nn.Module
    optimizer: torch.optim.Optimizer
    margins: tuple[torch.nn.Parameter, torch.nn.Parameter] | None
    e_users: torch.Tensor
    e_items: torch.Tensor
    item_deg_t: torch.Tensor
    gen: torch.Generator
    n_neg: int


@dataclass
class _Progress:
    """Where a run stands, as a checkpoint saves it: the history so far, the best validation score, its
    epoch and the epochs since (``bad``), the best epoch's net and margins, and the epoch to go on with
    (``finished``: the saved run had stopped)."""

    history: dict[str, Any]
    best_state: dict[str, Any]
    best: float = -np.inf
    best_epoch: int = 0
    bad: int = 0
    best_margins: tuple[torch.Tensor, torch.Tensor] | None = None
    start_epoch: int = 1
    finished: bool = False


def _setup(train_matrix: sp.csr_matrix, settings: TrainSettings) -> _Fit:
    """Seed torch and the explicit generator, build the net (PRISM's init, MACR's wrapper) on the device,
    MAWU's margins and Adam, in the order every run draws its random numbers in."""
    torch.manual_seed(settings.seed)
    gen = torch.Generator().manual_seed(settings.seed)
    n_users, n_items = train_matrix.shape
    net = build_net(settings.backbone, n_users, n_items, settings.dim, settings.seed, train=train_matrix,
                    nlmf_relu=settings.nlmf_relu, layers=settings.layers)
    user_deg = np.diff(train_matrix.indptr).astype(np.float64)
    item_deg = np.bincount(train_matrix.indices, minlength=n_items).astype(np.float64)
    if settings.alpha is not None:
        net.apply_prism(user_deg, item_deg, settings.alpha)
    if settings.loss == "macr":
        net = D.MACRNet(net, settings.dim, c=settings.macr_c, seed=settings.seed)
    device = torch.device(settings.device)
    item_deg_t = torch.as_tensor(item_deg, dtype=torch.float32, device=device)
    net = net.to(device)
    params = list(net.parameters())
    margins = None
    if settings.loss == "mawu":
        margins = (torch.nn.Parameter(torch.zeros(n_users, device=device)),
                   torch.nn.Parameter(torch.zeros(n_items, device=device)))
        params += list(margins)
    optimizer = _make_optimizer(params, settings)
    e_users, e_items = _edges(train_matrix)
    n_neg = 0 if settings.loss in ("directau", "mawu") else max(1, settings.n_negatives if settings.loss == "ssm" else 1)
    return _Fit(net, optimizer, margins, e_users, e_items, item_deg_t, gen, n_neg)


def _restore(saved: dict[str, Any], fit: _Fit, progress: _Progress) -> None:
    """Put a checkpoint's state back: the net, Adam, MAWU's margins, both generators and the progress."""
    fit.net.load_state_dict(saved["net"])
    fit.optimizer.load_state_dict(saved["optimizer"])
    if fit.margins is not None:
        with torch.no_grad():
            fit.margins[0].copy_(saved["margins"][0])
            fit.margins[1].copy_(saved["margins"][1])
    fit.gen.set_state(saved["gen"])
    set_global_rng_state(saved["global_rng"])
    progress.history = saved["history"]
    progress.best, progress.best_epoch, progress.bad = saved["best"], saved["best_epoch"], saved["bad"]
    progress.best_state = saved["best_state"]
    progress.best_margins = saved["best_margins"]
    progress.start_epoch, progress.finished = saved["epoch"] + 1, saved["finished"]


def _state(fit: _Fit, progress: _Progress, epoch: int, stop: bool) -> dict[str, Any]:
    """The checkpoint of the run after ``epoch`` (:func:`_restore` reads it back)."""
    return {"epoch": epoch, "finished": stop, "net": fit.net.state_dict(), "optimizer": fit.optimizer.state_dict(),
            "margins": None if fit.margins is None else (fit.margins[0].detach(), fit.margins[1].detach()),
            "gen": fit.gen.get_state(), "global_rng": global_rng_state(), "history": progress.history,
            "best": progress.best, "best_epoch": progress.best_epoch, "bad": progress.bad,
            "best_state": progress.best_state, "best_margins": progress.best_margins}


def _train_checked(fit: _Fit, settings: TrainSettings, epoch: int, progress: _Progress,
                   ckpt: Checkpointer | None) -> bool:
    """Train ``epoch`` and record its seconds and mean loss; ``False`` when it diverged (recorded in the
    history, and the checkpoint of the epoch before marked finished)."""
    started = time.perf_counter()
    try:
        mean_loss = _train_epoch(fit.net, fit.optimizer, fit.e_users, fit.e_items, settings, fit.margins,
                                 fit.item_deg_t, fit.gen, fit.n_neg, epoch)
        check_finite("user embeddings", fit.net.user_emb, f"epoch {epoch}")
        check_finite("item embeddings", fit.net.item_emb, f"epoch {epoch}")
    except NonFiniteError as err:
        # a learning rate that blows the run up is a result of the search (the paper's lr grid
        # reaches 0.1): the record keeps the epochs before it, says where and why, and is never
        # picked (tables.select_weight_decay); the model is the best validated one before it
        progress.history["diverged"] = {"epoch": int(epoch), "error": str(err)}
        log.warning("diverged in epoch %d: %s; recorded as diverged (never picked)", epoch, err)
        if ckpt is not None:
            ckpt.save(lambda: _state(fit, progress, epoch - 1, True), final=True)
        return False
    progress.history["epoch_seconds"].append(time.perf_counter() - started)
    progress.history["loss"].append(mean_loss)
    return True


def _validate(fit: _Fit, train_matrix: sp.csr_matrix, validation: sp.csr_matrix | None, settings: TrainSettings,
              epoch: int, progress: _Progress, on_epoch: Any) -> bool:
    """Score ``epoch`` on validation and keep the best epoch's state; whether the run stops after it
    (the epoch limit, or ``patience`` epochs without a better score)."""
    history = progress.history
    stop = epoch == settings.epochs
    if validation is None:
        progress.best_epoch = epoch
        return stop
    score = validation_ndcg(fit.net, train_matrix, validation, settings.eval_k, settings.eval_batch_size,
                            settings.device)
    history["val_ndcg"].append(score)
    if settings.record_cosine:
        history["val_ndcg_cosine"].append(validation_ndcg(fit.net, train_matrix, validation, settings.eval_k,
                                                          settings.eval_batch_size, settings.device, cosine=True))
    if on_epoch is not None:
        on_epoch(epoch, score)
    log.info("epoch %d loss %.5f val ndcg@%d %.5f (%.2fs)", epoch, history["loss"][-1], settings.eval_k,
             score, history["epoch_seconds"][-1])
    if score > progress.best:
        progress.best, progress.best_epoch, progress.bad = score, epoch, 0
        progress.best_state = copy.deepcopy(fit.net.state_dict())
        if fit.margins is not None:
            progress.best_margins = (fit.margins[0].detach().clone(), fit.margins[1].detach().clone())
    else:
        progress.bad += 1
        stop = stop or progress.bad >= settings.patience
    return stop


def _finish(fit: _Fit, validation: sp.csr_matrix | None, progress: _Progress) -> dict[str, Any]:
    """Restore the best epoch's net (when validated), and add the run's summary to its history."""
    history, best, best_epoch = progress.history, progress.best, progress.best_epoch
    if validation is not None:
        fit.net.load_state_dict(progress.best_state)
    fit.net.eval()
    history.update({
        "best_epoch": int(best_epoch),
        "epochs_run": len(history["epoch_seconds"]),
        "best_val_ndcg": float(best) if np.isfinite(best) else None,
        "seconds_per_epoch": float(np.mean(history["epoch_seconds"])) if history["epoch_seconds"] else None,
        "seconds_to_best": float(np.sum(history["epoch_seconds"][:best_epoch])),
        "margins_restored": progress.best_margins is not None,
    })
    return history


def train(train_matrix: sp.csr_matrix, validation: sp.csr_matrix | None, settings: TrainSettings,
          *, on_epoch: Any = None, checkpoint: str | Path | None = None,
          checkpoint_min_seconds: float = 0.0) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Train a backbone on ``train_matrix``; early-stop on ``validation`` (if given).

    Parameters
    ----------
    on_epoch:
        ``on_epoch(epoch, val_ndcg)`` after each validated epoch (before the early-stopping
        bookkeeping and the checkpoint of that epoch).
    checkpoint:
        Resume from / save to this file (module docstring); ``None``: no checkpointing.
        A file written for other settings or data, or an unreadable one, is ignored with a
        warning.  The caller deletes it once the run's record is written
        (:func:`recrepro.runtime.checkpoints.remove_checkpoint`).
    checkpoint_min_seconds:
        Write at most every this many seconds (default 0: after every epoch; the epoch the
        run stops at is always written).

    Returns
    -------
    (net, history)
        ``net`` with the best epoch's parameters restored; ``history`` holds
        ``val_ndcg`` (per epoch), ``epoch_seconds`` (training time per epoch, evaluation
        excluded), ``loss``, ``best_epoch`` (1-based: epochs to the best validation
        score), ``epochs_run``, ``seconds_per_epoch`` and ``init_item_norms`` summary.

    Seeding, resuming and the epoch loop share the RNG and early-stopping state (:class:`_Fit`,
    :class:`_Progress`) in the order a resumed run replays exactly.
    """
    fit = _setup(train_matrix, settings)
    history: dict[str, Any] = {"val_ndcg": [], "epoch_seconds": [], "loss": [], "settings": settings.as_dict()}
    if settings.record_cosine:
        history["val_ndcg_cosine"] = []
    progress = _Progress(history=history, best_state=copy.deepcopy(fit.net.state_dict()))
    ckpt = None
    if checkpoint is not None:
        ckpt = Checkpointer(checkpoint, checkpoint_key(train_matrix, validation, settings),
                            min_seconds=checkpoint_min_seconds)
        saved = ckpt.load()
        if saved is not None:
            _restore(saved, fit, progress)
    for epoch in range(progress.start_epoch, settings.epochs + 1):
        if progress.finished:
            break
        if not _train_checked(fit, settings, epoch, progress, ckpt):
            break
        stop = _validate(fit, train_matrix, validation, settings, epoch, progress, on_epoch)
        if ckpt is not None:
            # the state *after* this epoch's bookkeeping: a restart continues with epoch + 1
            ckpt.save(lambda: _state(fit, progress, epoch, stop), final=stop)
        if stop:
            break
    return fit.net, _finish(fit, validation, progress)
