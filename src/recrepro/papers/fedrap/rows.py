"""FedRAP's row path: local training on the rows each client samples (code mode, FedMF, PFedRec).

Without the paper's full-matrix regularisers a client's local step only changes the rows of
the items in its batch (plus a per-client weight-decay shrink), so the round's distinct
(client, item) rows are gathered once into compact ``[M, d]`` tables (``M`` ≈ the round's
samples) and trained there; nothing of size ``B × n_items × d`` is formed.  About 1.4
CPU-seconds per ML-100K round (docs/performance.md).  The uploads are aggregated row-wise
(:mod:`recrepro.models.federated.aggregation`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from recrepro.models.federated.aggregation import RowUploads, row_upload_nnz, row_upload_sum, row_uploads_dense
from recrepro.models.federated.clients import LocalEpochs, RowLayout, client_batches, row_layout
from recrepro.models.federated.privacy import RoundNoise
from recrepro.models.federated.simulation import check_finite_fast
from recrepro.papers.fedrap.config import L1_THRESHOLD
from recrepro.papers.fedrap.training_path import FedRAPModel, UploadTotals, add_dense_uploads
from recrepro.records import check_finite

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

__all__ = ["RowBuffers", "RowPath", "RowResult", "RowTables", "rows_bce"]


def rows_bce(s: torch.Tensor, X: torch.Tensor, own: torch.Tensor, lab: torch.Tensor, wt: torch.Tensor,
             n_c: torch.Tensor, crow: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The BCE of a step's rows and its gradient, the start of every row step (row and lazy paths).

    Row k (logit ``s_k``, label ``r_k``, weight ``wt_k`` in its client's batch of ``n`` samples)
    belongs to client ``own[k]``; rows are sorted by client, ``crow`` is the CSR row pointer.
    Returns each client's batch BCE ``Σ_k wt_k bce_k / n`` (torch's log clamp at −100),
    ``a_k = wt_k (σ(s_k) − r_k) / n`` (∂BCE/∂s_k), each client's ``Σ_k a_k X_k`` and ``n`` (at
    least 1) per client and per row.
    """
    p = torch.sigmoid(s)
    bce = -(lab * torch.clamp(torch.log(p), min=-100) + (1 - lab) * torch.clamp(torch.log1p(-p), min=-100))
    n_safe = torch.clamp(n_c, min=1.0)
    nk = n_safe.index_select(0, own)
    loss = torch.segment_reduce(wt * bce, "sum", offsets=crow, axis=0) / n_safe
    a_k = wt * (p - lab) / nk
    M = X.shape[0]
    A = torch.sparse_csr_tensor(crow, torch.arange(M, device=X.device), a_k, size=(n_c.shape[0], M),
                                check_invariants=False)
    return loss, a_k, A @ X, n_safe, nk


@dataclass
class RowTables:
    """A round's sampled (client, item) rows as the row and lazy paths step them, rows sorted by
    permuted client (:class:`~recrepro.models.federated.clients.RowLayout`)."""

    X: torch.Tensor            #: ``[M, d]`` ``D + C`` of each row (without private tables: ``C``)
    E: torch.Tensor | None     #: ``[M, d]`` ``D − C`` (``None`` without private tables)
    own: torch.Tensor          #: ``[M]`` the row's permuted client
    lab: torch.Tensor          #: ``[M]`` its label
    crow: torch.Tensor         #: ``[B + 1]`` CSR row pointer by permuted client


@dataclass
class RowBuffers:
    """Scratch ``[M, d]`` tensors a row step writes its temporaries into (a fresh tensor per step
    costs more in page faults than the arithmetic)."""

    wf: torch.Tensor           #: each row's client vector
    t: torch.Tensor | None     #: ``X − E`` (``2C``)
    s: torch.Tensor | None     #: ``sign C``

    @classmethod
    def like(cls, X: torch.Tensor, with_private: bool = True) -> RowBuffers:
        return cls(torch.empty_like(X), *((torch.empty_like(X), torch.empty_like(X)) if with_private else (None, None)))

    def head(self, n: int) -> RowBuffers:
        """The buffers of the first ``n`` rows."""
        return RowBuffers(self.wf[:n], None if self.t is None else self.t[:n], None if self.s is None else self.s[:n])


@dataclass
class RowResult:
    """The row path's clients (caller's order): their uploads as rows, and their losses."""

    uploads: RowUploads
    loss: torch.Tensor

    def add_uploads(self, model: FedRAPModel, totals: UploadTotals, noise: RoundNoise | None) -> None:
        if noise is not None:  # DP clips each client's own upload: formed densely
            add_dense_uploads(model, totals, self.dense_uploads(model), noise)
            return
        abs_sorted = np.sort(model.C.abs().cpu().numpy().astype(np.float64).ravel())
        totals.c_sum += row_upload_sum(model.C, self.uploads)
        totals.nnz += row_upload_nnz(model.C, self.uploads, abs_sorted, L1_THRESHOLD)

    def dense_uploads(self, model: FedRAPModel) -> torch.Tensor:
        return row_uploads_dense(model.C, self.uploads)


class RowPath:
    """The row path (code mode, FedMF, PFedRec): a :class:`~recrepro.papers.fedrap.training_path.TrainingPath`
    that trains each client on the rows it samples.  Stateless: it reads and writes the model's
    parameters, private tables and learning rates."""

    def local_train(self, model: FedRAPModel, users: np.ndarray, owner: np.ndarray, item: np.ndarray,
                    label: np.ndarray, lam: float, mu: float, rng: np.random.Generator) -> RowResult:
        """Local epochs of the clients ``users`` at once, on the rows they sample (code mode).

        Without the paper's full-matrix regularisers a client's step changes only the rows
        of its batch items (BCE, the code's batch-row ``mse``/``abs`` terms) and shrinks all
        its parameters by ``1 − lr·l2`` (SGD weight decay).  So each round gathers the
        ``M`` distinct (client, item) rows of the round's samples once into compact
        ``[M, d]`` tables (every client's local C starts from the server's C; private D
        rows come from storage) and runs every step on them; the weight decay of the
        untouched rows is one scalar per client (``shrink``): the uploaded ``C_i`` is
        ``shrink_i · C`` with the compact rows written over it, and the private tables
        fold ``shrink_i`` into the lazy ``D_scale``.  Nothing of size ``B × n_items × d``
        is formed.

        Implementation.  An item a client samples twice (a repeated negative) is one row;
        mini-batches are cut from the client's *samples* (as its ``DataLoader``), and a
        row enters a step with the number of its samples in the client's batch as weight.
        A client's samples all carry the same label per item (positives are never drawn
        as negatives).  Clients with a single batch are ordered first, so the later
        batches of the big clients are a contiguous tail of the row tables.  FedRAP trains ``X = D + C`` and
        ``E = D − C`` (the score needs ``X``, the code's regulariser ``E``), which turns
        a step into a few in-place passes over preallocated buffers (see :meth:`_row_step`).
        """
        cfg, dev = model.config, model.device
        B, n_items = users.size, model.n_items
        lay = row_layout(owner, item, label, B, n_items, cfg.batch_size)
        cperm = lay.cperm
        users_p = users[cperm]

        own_t = torch.as_tensor(lay.r_owner, device=dev)
        item_t = torch.as_tensor(lay.r_item, device=dev)
        lab_t = torch.as_tensor(lay.r_label, device=dev)
        crow = torch.as_tensor(lay.row_pointer(), device=dev)
        users_t = torch.as_tensor(users_p, device=dev)
        w = model.w[users_t].clone()
        b = model.b[users_t].clone()
        X = model.C.index_select(0, item_t)               # C rows; X = D + C below
        E = None
        store_idx = None
        if cfg.has_private_items:
            store_idx = torch.as_tensor(users_p[lay.r_owner] * n_items + lay.r_item)
            Dc = model.private_rows(store_idx).to(dev)
            scale = model.D_scale[torch.as_tensor(users_p)].to(dev, torch.float32)
            if bool((scale != 1).any()):
                Dc.mul_(scale[own_t][:, None])
            E = Dc - X
            X.add_(Dc)
            del Dc
        shrink_c = torch.ones(B, dtype=torch.float64, device=dev)
        prev_mean = self._epochs(model, lay, w, b, RowTables(X, E, own_t, lab_t, crow), shrink_c, owner.size,
                                 lam, mu, rng)
        if E is not None:
            Dc = (X + E).mul_(0.5)
            Cc = X.sub_(E).mul_(0.5)
            del E
        else:
            Dc, Cc = None, X
        check_finite_fast("client item rows", Cc, f"round {model.round}")
        model.w[users_t] = w
        model.b[users_t] = b
        self._keep_private(model, users_p, lay, own_t, store_idx, Dc, Cc, shrink_c)
        # back to the caller's client order
        orig = torch.as_tensor(cperm, device=dev)
        shrink_out = torch.empty_like(shrink_c)
        shrink_out[orig] = shrink_c
        loss_out = np.empty(B)
        loss_out[cperm] = np.nan_to_num(prev_mean)
        return RowResult(RowUploads(orig[own_t], item_t, Cc, shrink_out), torch.as_tensor(loss_out))

    def _epochs(self, model: FedRAPModel, lay: RowLayout, w: torch.Tensor, b: torch.Tensor, rows: RowTables,
                shrink_c: torch.Tensor, n_samples: int, lam: float, mu: float, rng: np.random.Generator) -> np.ndarray:
        """The local epochs of the row path: every step on the ``rows`` (permuted clients) and ``w``,
        ``b``, ``shrink_c`` in place (:meth:`_row_step`).  Returns each client's last mean local loss
        (NaN: no batch).
        """
        cfg, dev = model.config, model.device
        bs = cfg.batch_size
        M, B1, M1 = lay.M, lay.B1, lay.M1
        X, E, own_t, lab_t, crow = rows.X, rows.E, rows.own, rows.lab, rows.crow
        bufs = RowBuffers.like(X, with_private=E is not None)
        schedule = LocalEpochs(lay.counts, bs, cfg.local_epochs, cfg.tol, cfg.batch_decay)
        for epoch in schedule.epochs():
            # mini-batches of samples (as the per-client DataLoader); a row's weight in a step
            # is the number of its samples in the client's batch
            batch_of = np.empty(n_samples, np.int64)
            batch_of[lay.s_sorted] = client_batches(lay.s_owner_sorted, lay.counts, bs, rng)
            for t, n_t, step_on in schedule.steps():
                lo, c0 = (0, 0) if t == 0 else (M1, B1)   # later batches: big clients only (the tail)
                mask = (batch_of == t) & step_on[lay.s_owner]
                if mask.all():
                    wt = lay.r_mult
                else:
                    wt = np.bincount(lay.s_row[mask], minlength=M).astype(np.float32)
                wt = wt[lo:]
                n_c = np.where(step_on, n_t, 0)[c0:]
                lr_scale = schedule.lr_scale(step_on)[c0:]
                sl = slice(lo, M)
                out = self._row_step(
                    model, w[c0:], b[c0:], X[sl], None if E is None else E[sl], own_t[sl] - c0, lab_t[sl],
                    torch.as_tensor(wt, device=dev), torch.as_tensor(n_c, dtype=torch.float32, device=dev),
                    crow[c0:] - lo, lam, mu, torch.as_tensor(lr_scale, device=dev), shrink_c[c0:],
                    bufs.head(M - lo))
                schedule.record(step_on, out.double().cpu().numpy(), n_c, c0)
            check_finite("client parameters", w, f"round {model.round} local epoch {epoch}")
            check_finite("client losses", schedule.loss_acc, f"round {model.round} local epoch {epoch}")
        del bufs
        return schedule.prev_mean

    @staticmethod
    def _keep_private(model: FedRAPModel, users_p: np.ndarray, lay: RowLayout, own_t: torch.Tensor,
                      store_idx: torch.Tensor | None, Dc: torch.Tensor | None, Cc: torch.Tensor,
                      shrink_c: torch.Tensor) -> None:
        """Write the trained private rows back (FedRAP's ``D`` rows ``Dc``; PFedRec's fine-tuned copy
        ``shrink_i · C`` with its rows ``Cc`` over it), folding ``shrink_c`` into ``D_scale``."""
        cfg, dev = model.config, model.device
        d, n_items = cfg.dim, model.n_items
        users_cpu = torch.as_tensor(users_p)
        shrink_cpu = shrink_c.cpu()
        if Dc is not None:
            # D and C of a client share the learning rate and weight decay: same shrink
            new_scale = model.D_scale[users_cpu] * shrink_cpu
            model.D_scale[users_cpu] = new_scale
            stored = Dc.div_(new_scale.to(dev, torch.float32)[own_t][:, None])
            model.write_private_rows(store_idx, stored)
            small = users_p[(new_scale < 1e-3).numpy()]
            if small.size:
                model.materialise_private(small)
        elif cfg.keeps_personal_copy:
            # PFedRec: the client keeps its fine-tuned copy: shrink_i · C with its rows written over
            model.D[users_cpu] = model.C.to(model.D.device)[None]
            model.D_scale[users_cpu] = shrink_cpu
            stored = Cc / shrink_c.to(torch.float32)[own_t][:, None]
            store = torch.as_tensor(users_p[lay.r_owner] * n_items + lay.r_item)
            model.D.view(-1, d).index_copy_(0, store.to(model.D.device), stored.to(model.D.device))

    @staticmethod
    def _row_step(model: FedRAPModel, w, b, X, E, own, lab, wt, n_c, crow, lam, mu, lr_scale, shrink_c,
                  bufs: RowBuffers) -> torch.Tensor:
        """One SGD step of clients ``0..len(w)`` on their rows ``X`` (``E``), in place.

        Row k belongs to client ``own[k]`` (rows sorted by client, ``crow`` the CSR row
        pointer); ``wt[k]`` is its multiplicity in the client's current batch (0 if not in
        it), ``n_c`` the batch size of each client, ``lr_scale`` the per-client learning-rate
        factor (0: client not stepping).  With ``a_k = wt_k (σ(s_k) − r_k)/n``,
        ``c_k = 2λ wt_k/(n d)``, ``m_k = μ wt_k/(n d)`` and ``sh = 1 − lr·l2`` the code's
        gradients (``∂/∂D = a w − c (D−C)``, ``∂/∂C = a w + c (D−C) + m sign C``) give::

            X ← sh X − lr (2 a_k w_i + m_k sign C)        (X = D + C; without D: X ← sh X − lr a_k w_i)
            E ← (sh + 2 lr c_k) E + lr m_k sign C          (E = D − C)
            (L2 ablation: 2 m_k C in place of m_k sign C)
            w_i ← w_i − lr_net (Σ_k a_k X_k + l2 w_i),   b_i ← b_i − lr_net (Σ_k a_k + l2 b_i)

        Returns the clients' batch losses (the code's BCE + batch-row regularisers).
        """
        cfg = model.config
        d = cfg.dim
        wf = torch.index_select(w, 0, own, out=bufs.wf)

        def seg(values):  # per-client sums of a row vector
            return torch.segment_reduce(values, "sum", offsets=crow, axis=0)

        s = torch.einsum("kd,kd->k", X, wf)
        if cfg.use_bias:
            s = s + b.index_select(0, own)
        loss, a_k, g_w, n_safe, nk = rows_bce(s, X, own, lab, wt, n_c, crow)
        g_b = seg(a_k)
        lr_arg = (model.lr_args * lr_scale).to(torch.float32)
        lr_net = (model.lr_network * lr_scale).to(torch.float32)
        lr_k = lr_arg.index_select(0, own)
        sh = (1 - lr_arg * cfg.l2).index_select(0, own) if cfg.l2 else None
        if E is not None:
            c_k = 2 * lam * wt / (nk * d)
            m_k = mu * wt / (nk * d)
            loss = loss - lam * seg(wt * torch.einsum("kd,kd->k", E, E)) / (n_safe * d)
            T = torch.sub(X, E, out=bufs.t)            # 2C
            if cfg.method == "fedrap_l2":
                loss = loss + mu * seg(wt * torch.einsum("kd,kd->k", T, T) / 4) / (n_safe * d)
                reg, reg_scale = T, lr_k * m_k            # 2 m C = m T
            elif mu:
                S = torch.sign(T, out=bufs.s)
                loss = loss + mu * seg(wt * torch.einsum("kd,kd->k", T, S) / 2) / (n_safe * d)
                reg, reg_scale = S, lr_k * m_k
            else:
                reg = None
            e_fac = 1 + 2 * lr_k * c_k if sh is None else sh + 2 * lr_k * c_k
            if sh is not None:
                X.mul_(sh[:, None])
            X.addcmul_(wf, (-2 * lr_k * a_k)[:, None])
            E.mul_(e_fac[:, None])
            if reg is not None:
                X.addcmul_(reg, (-reg_scale)[:, None])
                E.addcmul_(reg, reg_scale[:, None])
        else:
            if sh is not None:
                X.mul_(sh[:, None])
            X.addcmul_(wf, (-lr_k * a_k)[:, None])
        if cfg.l2:
            shrink_c.mul_(1 - lr_arg.to(torch.float64) * cfg.l2)
        w.sub_(lr_net[:, None] * (g_w + cfg.l2 * w))
        if cfg.use_bias:
            b.sub_(lr_net * (g_b + cfg.l2 * b))
        return loss
