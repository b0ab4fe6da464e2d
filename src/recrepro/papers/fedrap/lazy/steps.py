"""FedRAP's paper-mode SGD steps on the rows and entries the lazy path steps exactly, and its local epochs.

:class:`~recrepro.papers.fedrap.lazy.path.LazyPath` composes the regulariser maps of the entries
whose ``sign(C)`` cannot change; these kernels step the rest: a stepping client's sampled rows
(BCE plus the full-matrix regularisers, :func:`paper_row_step`) and the replayed entries that may
cross zero (:func:`paper_entry_step`); :func:`local_epochs` runs them in the row path's schedule and
advances the map of all other entries.
"""

from __future__ import annotations

import numpy as np
import torch

from recrepro.models.federated.clients import LocalEpochs, RowLayout, client_batches
from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.lazy.state import MappedSums, RegulariserMap, ReplayEntries
from recrepro.papers.fedrap.rows import RowBuffers, RowTables, rows_bce
from recrepro.papers.fedrap.training_path import FedRAPModel
from recrepro.records import check_finite

__all__ = ["local_epochs", "paper_entry_step", "paper_row_step", "regulariser_schedule"]


def regulariser_schedule(cfg: FederatedConfig, n_items: int, n_steps: int, lam: float, mu: float,
                         lr_args: float) -> RegulariserMap:
    """Composite regulariser map after ``k = 0..n_steps`` steps of a client (float64).

    Between BCE touches an entry of client i follows (``X = D + C``, ``E = D − C``,
    ``s = sign C``, ``lr_k`` the client's k-th learning rate, ``sh = 1 − lr·l2``,
    ``g = sh + 4 lr λ/(n d)``, ``ν = μ/(n d)``)::

        X ← sh X − lr ν s,      E ← g E + lr ν s

    so, while s is constant, ``X_k = PX_k X_0 − s QX_k`` and ``E_k = PE_k E_0 + s QE_k``.
    Returns ``PX, PE, QX, QE`` of length ``n_steps + 1`` for the learning-rate schedule
    ``lr_k = lr_args · batch_decay^k`` (as float32, like the steps themselves).
    """
    nd = float(n_items * cfg.dim)
    k = np.arange(n_steps)
    lr = (lr_args * cfg.batch_decay ** k).astype(np.float32).astype(np.float64)
    sh = 1.0 - lr * cfg.l2
    g = sh + 4.0 * lr * lam / nd
    m = lr * mu / nd
    out = RegulariserMap(*(np.empty(n_steps + 1) for _ in range(4)))
    px, pe, qx, qe = 1.0, 1.0, 0.0, 0.0
    for step in range(n_steps + 1):  # a loop over local steps (≤ local_epochs × batches), not entries
        out.PX[step], out.PE[step], out.QX[step], out.QE[step] = px, pe, qx, qe
        if step < n_steps:
            px, qx = sh[step] * px, sh[step] * qx + m[step]
            pe, qe = g[step] * pe, g[step] * qe + m[step]
    return out


def paper_row_step(model: FedRAPModel, w, X, E, own, lab, wt, n_c, crow, lam, mu, lr_scale, lr_arg,
                   bufs: RowBuffers) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One paper-mode SGD step of clients ``0..len(w)`` on their sampled rows, in place.

    As the row path's step (:meth:`~recrepro.papers.fedrap.rows.RowPath._row_step`), but the
    full-matrix regularisers act on every row of a stepping client (not only its batch rows):
    ``X ← sh X − 2 lr a_k w_i − lr ν s``, ``E ← g E + lr ν s`` (``g = sh + 4 lr λ/(n d)``,
    ``ν = μ/(n d)``, ``s = sign C``; see :meth:`~recrepro.papers.fedrap.lazy.path.LazyPath.local_train`).
    Returns per client the batch BCE, and ``Σ (D − C)²`` and ``Σ |C|`` over these rows at the
    pre-step values (the caller adds the other entries' shares and forms the loss).
    """
    cfg = model.config
    nd = float(model.n_items * cfg.dim)
    wf = torch.index_select(w, 0, own, out=bufs.wf)

    def seg(values):  # per-client sums of a row vector
        return torch.segment_reduce(values, "sum", offsets=crow, axis=0)

    loss, a_k, g_w, _, _ = rows_bce(torch.einsum("kd,kd->k", X, wf), X, own, lab, wt, n_c, crow)
    lr_net = (model.lr_network * lr_scale).to(torch.float32)
    lr_k = lr_arg.index_select(0, own)
    e2 = seg(torch.einsum("kd,kd->k", E, E))
    T = torch.sub(X, E, out=bufs.t)                       # 2C
    S = torch.sign(T, out=bufs.s)
    l1 = seg(torch.einsum("kd,kd->k", T, S)) / 2
    sh = 1 - lr_k * cfg.l2
    X.mul_(sh[:, None])
    X.addcmul_(wf, (-2 * lr_k * a_k)[:, None])
    E.mul_((sh + 4 * lam / nd * lr_k)[:, None])
    if mu:
        m_k = lr_k * (mu / nd)
        X.addcmul_(S, (-m_k)[:, None])
        E.addcmul_(S, m_k[:, None])
    w.sub_(lr_net[:, None] * (g_w + cfg.l2 * w))
    return loss, e2, l1


def paper_entry_step(cfg: FederatedConfig, n_items: int, Xe, Ee, own, crow, lam, mu,
                     lr_arg) -> tuple[torch.Tensor, torch.Tensor]:
    """One paper-mode step of the replayed entries (``C`` may cross zero), in place.

    Flat entries of unsampled rows, grouped by client (``crow``): the regulariser map
    ``X ← sh X − lr ν s``, ``E ← g E + lr ν s`` with ``s = sign C`` read at this step.
    Returns per client ``Σ (D − C)²`` and ``Σ |C|`` at the pre-step values.
    """
    nd = float(n_items * cfg.dim)
    lr_k = lr_arg.index_select(0, own)

    def seg(values):
        return torch.segment_reduce(values, "sum", offsets=crow, axis=0)

    T = Xe - Ee
    S = torch.sign(T)
    e2, l1 = seg(Ee * Ee), seg(T * S) / 2
    sh = 1 - lr_k * cfg.l2
    m_k = lr_k * (mu / nd)
    Xe.mul_(sh).addcmul_(S, -m_k)
    Ee.mul_(sh + 4 * lam / nd * lr_k).addcmul_(S, m_k)
    return e2, l1


def local_epochs(model: FedRAPModel, lay: RowLayout, w: torch.Tensor, rows: RowTables, ents: ReplayEntries,
                 sums: MappedSums, n_samples: int, lam: float, mu: float,
                 rng: np.random.Generator) -> tuple[RegulariserMap, np.ndarray, np.ndarray]:
    """The local epochs (as the row path's; every step also maps the client's non-batch rows).

    Steps the sampled ``rows`` and the replayed entries ``ents`` in place, and the per-client
    affine map of the other entries (whose loss terms come from ``sums``).  Returns the map
    (permuted order), each client's last mean local loss (NaN: no batch) and the number of steps
    it took.
    """
    cfg, dev = model.config, model.device
    bs, nd = cfg.batch_size, model.n_items * cfg.dim
    counts, M, B1, M1 = lay.counts, lay.M, lay.B1, lay.M1
    X, E, own_t, lab_t, crow = rows.X, rows.E, rows.own, rows.lab, rows.crow
    Xe, Ee, e_own, e_crow = ents.X, ents.E, ents.own, ents.crow
    B = counts.size
    PX, PE, QX, QE = np.ones(B), np.ones(B), np.zeros(B), np.zeros(B)
    bufs = RowBuffers.like(X)
    schedule = LocalEpochs(counts, bs, cfg.local_epochs, cfg.tol, cfg.batch_decay)
    for epoch in schedule.epochs():
        batch_of = np.empty(n_samples, np.int64)
        batch_of[lay.s_sorted] = client_batches(lay.s_owner_sorted, counts, bs, rng)
        for t, n_t, step_on in schedule.steps():
            lo, c0 = (0, 0) if t == 0 else (M1, B1)   # later batches: big clients only (the tail)
            el = int(e_crow[c0])
            mask = (batch_of == t) & step_on[lay.s_owner]
            wt = lay.r_mult if mask.all() else np.bincount(lay.s_row[mask], minlength=M).astype(np.float32)
            n_c = np.where(step_on, n_t, 0)[c0:]
            lr_scale = torch.as_tensor(schedule.lr_scale(step_on)[c0:], device=dev)
            lr_arg = (model.lr_args * lr_scale).to(torch.float32)
            sl = slice(lo, M)
            bce, e2, l1 = paper_row_step(
                model, w[c0:], X[sl], E[sl], own_t[sl] - c0, lab_t[sl], torch.as_tensor(wt[lo:], device=dev),
                torch.as_tensor(n_c, dtype=torch.float32, device=dev), crow[c0:] - lo, lam, mu,
                lr_scale, lr_arg, bufs.head(M - lo))
            e2, l1 = e2.double().cpu().numpy(), l1.double().cpu().numpy()
            if Xe.numel() > el:
                re2, rl1 = paper_entry_step(cfg, model.n_items, Xe[el:], Ee[el:], e_own[el:] - c0,
                                            e_crow[c0:] - el, lam, mu, lr_arg)
                e2, l1 = e2 + re2.double().cpu().numpy(), l1 + rl1.double().cpu().numpy()
            # lazily mapped entries: their sums at the pre-step values, then advance the map
            cs = slice(c0, B)
            e2 += (PE[cs] ** 2 * sums.E2[cs] + 2 * PE[cs] * QE[cs] * sums.sE[cs]
                   + QE[cs] ** 2 * sums.n[cs])
            l1 += (PX[cs] * sums.sX[cs] - PE[cs] * sums.sE[cs] - (QX[cs] + QE[cs]) * sums.n[cs]) / 2
            lr64 = lr_arg.double().cpu().numpy()
            sh = 1.0 - lr64 * cfg.l2
            g = sh + 4.0 * lr64 * lam / nd
            m = lr64 * mu / nd
            PX[cs], QX[cs] = sh * PX[cs], sh * QX[cs] + m
            PE[cs], QE[cs] = g * PE[cs], g * QE[cs] + m
            batch_loss = bce.double().cpu().numpy() - lam * e2 / nd + mu * l1 / nd
            schedule.record(step_on, batch_loss, n_c, c0)
        check_finite("client parameters", w, f"round {model.round} local epoch {epoch}")
        check_finite("client losses", schedule.loss_acc, f"round {model.round} local epoch {epoch}")
    del bufs
    return RegulariserMap(PX, PE, QX, QE), schedule.prev_mean, schedule.steps_done.copy()
