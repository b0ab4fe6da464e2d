"""FedRAP's dense path: every client's full ``D`` and ``C`` tables updated at every step.

``paper_path: dense`` (the reference for the lazy path), and also DP (which clips each
client's dense upload), the prox L1 update and the L2 ablation in paper mode.  The chunk's
``D[B, n_items, d]`` and ``C[B, n_items, d]`` are dense and every step updates all of them;
the chunk of clients is sized to the memory budget
(:func:`recrepro.models.federated.storage.clients_per_chunk`).

Paper mode's full-matrix step (:func:`full_matrix_step`) is the path's cost: one torch
operation is one pass over ``[B, n_items, d]``, and the eager form takes about ten reads and
writes of each table a step.  ``dense_update: fused`` (the default) runs it as one
``torch.compile``'d loop that reads ``D`` and ``C`` once and writes them once; where compiling
fails (no C++ compiler, say) the run says so on stderr and goes on eager.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from recrepro.runtime.eager_torch import load_dynamo
from recrepro.models.federated.clients import LocalEpochs, client_batches
from recrepro.models.federated.privacy import RoundNoise
from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.training_path import FedRAPModel, UploadTotals, add_dense_uploads
from recrepro.records import check_finite

__all__ = ["DenseChunk", "DensePath", "DenseResult", "EagerScratch", "full_matrix_step"]


def full_matrix_step(D: torch.Tensor, C: torch.Tensor, shrink: torch.Tensor, coef: torch.Tensor,
                     l1_step: torch.Tensor, w_sq: torch.Tensor, w_l1: torch.Tensor) -> torch.Tensor:
    """Paper mode's full-matrix regularisers and weight decay, one SGD step, in place.

    With the per-client factors (``[B, 1, 1]``) ``shrink = 1 − lr·l2``, ``coef = lr·2λ/(n d)``,
    ``l1_step = lr·μ/(n d)`` (FedRAP Eq. 4's ``−λ‖D⁽ⁱ⁾ − C‖²_F + μ‖C‖₁``, normalised by the
    table's size), at the pre-step values::

        D ← shrink·D + coef·(D − C)
        C ← shrink·C − coef·(D − C) − l1_step·sign(C)

    and returns each client's loss terms ``w_sq·‖D − C‖² + w_l1·‖C‖₁`` (``[B]``).  Written as
    one expression so that ``torch.compile`` fuses it into one pass; the scalars come in as
    tensors, so the curriculum's new λ, μ each round and a smaller last chunk reuse the
    compiled loop.
    """
    diff = D - C
    loss = w_sq * (diff * diff).sum(dim=(1, 2)) + w_l1 * C.abs().sum(dim=(1, 2))
    D.copy_(D * shrink + diff * coef)
    C.copy_(C * shrink - diff * coef - torch.sign(C) * l1_step)
    return loss


@dataclass
class EagerScratch:
    """Two ``[B, n_items, d]`` buffers the eager full-matrix step writes its temporaries into (a fresh
    200 MB tensor per step costs more in page faults than the arithmetic)."""

    buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def pair(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.buffers is None or self.buffers[0].shape != like.shape:
            self.buffers = (torch.empty_like(like), torch.empty_like(like))
        return self.buffers


@dataclass
class DenseChunk:
    """A chunk of clients' local copies on the dense path, stacked in the caller's client order.

    SGD's weight decay is a per-client scalar shrink, kept lazily: true ``C = scale_C × C`` (and
    ``D`` likewise) until :meth:`materialise` folds the scales in.
    """

    w: torch.Tensor            #: ``[B, d]``
    b: torch.Tensor            #: ``[B]``
    C: torch.Tensor            #: ``[B, n_items, d]`` the clients' copies of the server's table
    D: torch.Tensor | None     #: ``[B, n_items, d]`` their private tables (``None``: FedMF, PFedRec)
    scale_C: torch.Tensor      #: ``[B]`` float64
    scale_D: torch.Tensor      #: ``[B]`` float64
    scratch: EagerScratch = field(default_factory=EagerScratch)

    def materialise(self) -> None:
        """Apply the lazy weight-decay scales to the stored tables and reset them to 1."""
        for scale, table in ((self.scale_C, self.C), (self.scale_D, self.D)):
            if table is not None and bool((scale != 1).any()):
                table.mul_(scale.to(table.dtype)[:, None, None])
            scale.fill_(1.0)


@dataclass
class DenseResult:
    """The dense path's clients (caller's order): their uploads ``C_i`` and losses."""

    C: torch.Tensor            #: ``[B, n_items, d]``
    loss: torch.Tensor

    def add_uploads(self, model: FedRAPModel, totals: UploadTotals, noise: RoundNoise | None) -> None:
        add_dense_uploads(model, totals, self.C, noise)

    def dense_uploads(self, model: FedRAPModel) -> torch.Tensor:
        return self.C


class DensePath:
    """The dense path: a :class:`~recrepro.papers.fedrap.training_path.TrainingPath` on every client's
    full ``D`` and ``C`` tables.  It keeps the compiled full-matrix step across rounds (compiled once
    per model) and :attr:`update_used`: how paper mode's dense steps ran (``"fused"``, ``"eager"``;
    ``None`` before the first; a run record carries it).
    """

    def __init__(self) -> None:
        self.update_used: str | None = None
        self._compiled: Callable | bool | None = None   # None: not looked up yet; False: eager

    def local_train(self, model: FedRAPModel, users: np.ndarray, owner: np.ndarray, item: np.ndarray,
                    label: np.ndarray, lam: float, mu: float, rng: np.random.Generator) -> DenseResult:
        """Local epochs of the clients ``users`` at once on dense per-client tables.

        Samples are kept flat (no padding to the busiest client): each epoch draws a
        random order inside every client (``DataLoader(shuffle=True)``), mini-batch ``t``
        of all clients is one step, per-client sums are ``index_add_`` segment sums.
        """
        cfg, dev = model.config, model.device
        B = users.size
        users_t = torch.as_tensor(users, device=dev)
        counts = np.bincount(owner, minlength=B)
        bs = cfg.batch_size

        w = model.w[users_t].clone()
        b = model.b[users_t].clone()
        if cfg.has_private_items:
            model.materialise_private(users)
        C = model.C.unsqueeze(0).expand(B, -1, -1).clone()
        # contiguous, in-memory, same-device chunk: train D in place (no copy, no write-back)
        in_place = (cfg.has_private_items and model.private_storage == "dense" and model.D.device == dev
                    and B > 0 and np.array_equal(users, np.arange(users[0], users[0] + B)))
        if in_place:
            D = model.D[int(users[0]):int(users[0]) + B]
        else:
            D = model.D[users_t.cpu()].to(dev) if cfg.has_private_items else None
        chunk = DenseChunk(w, b, C, D, torch.ones(B, dtype=torch.float64, device=dev),
                           torch.ones(B, dtype=torch.float64, device=dev))

        schedule = LocalEpochs(counts, bs, cfg.local_epochs, cfg.tol, cfg.batch_decay)
        owner_t = torch.as_tensor(owner, device=dev)
        item_t = torch.as_tensor(item, device=dev)
        label_t = torch.as_tensor(label, device=dev)
        for epoch in schedule.epochs():
            batch_of = client_batches(owner, counts, bs, rng)
            for t, n_t, step_on in schedule.steps():
                sel = np.flatnonzero((batch_of == t) & step_on[owner])
                sel_t = torch.as_tensor(sel, device=dev)
                fr, fi, lab = owner_t[sel_t], item_t[sel_t], label_t[sel_t]
                n_f = torch.as_tensor(np.maximum(n_t, 1), dtype=torch.float32, device=dev)
                lr_scale = torch.as_tensor(schedule.lr_scale(step_on), dtype=torch.float32, device=dev)
                lengths = torch.as_tensor(np.where(step_on, n_t, 0), device=dev)
                out = self._step(model, chunk, fr, fi, lab, n_f, lengths, lam, mu, lr_scale)
                schedule.record(step_on, out.double().cpu().numpy(), n_t)
            check_finite("client parameters", w, f"round {model.round} local epoch {epoch}")
            check_finite("client losses", schedule.loss_acc, f"round {model.round} local epoch {epoch}")
        chunk.materialise()
        chunk.scratch = EagerScratch()
        # write back private state
        model.w[users_t] = w
        model.b[users_t] = b
        if D is not None and not in_place:
            model.D[users_t.cpu()] = D.to(model.D.device)
        elif cfg.keeps_personal_copy:
            model.D[users_t.cpu()] = C.to(model.D.device)
        return DenseResult(C, torch.as_tensor(np.nan_to_num(schedule.prev_mean)))

    def _fused_step(self, cfg: FederatedConfig) -> Callable | None:
        """The compiled :func:`full_matrix_step` (compiled once per model), or None with
        ``dense_update: eager`` or once compiling has failed."""
        fused = self._compiled
        if fused is None:
            if cfg.dense_update != "fused":
                fused = False
                self.update_used = "eager"
            else:
                try:
                    load_dynamo()  # the command line's stand-in has no compiler (recrepro.runtime.eager_torch)
                    # dynamic: the chunk's client count varies (the last chunk, sampled clients)
                    fused = torch.compile(full_matrix_step, dynamic=True)
                    self.update_used = "compiling"
                except Exception as err:  # noqa: BLE001 -- no compiler to be had: eager
                    fused = False
                    self._fall_back(err)
            self._compiled = fused
        return fused or None

    def _fall_back(self, err: Exception) -> None:
        """Say on stderr that the fused step could not be had, and go on eager."""
        self.update_used = "eager"
        last = (str(err).strip().splitlines() or [""])[-1][:200]
        print(f"fedrap: dense_update 'fused' could not compile ({type(err).__name__}: {last}); "
              "the dense steps run eager", file=sys.stderr)

    @staticmethod
    def _code_row_regularisers(cfg: FederatedConfig, Cg, Dg, delta_c, delta_d, fC, fD, nf, n_f, seg, lam, mu,
                               loss) -> torch.Tensor:
        """Code mode's batch-row regularisers (``−λ mean (D − C)²``, ``μ mean |C|`` or the L2
        ablation's ``μ mean C²``) of the gathered batch rows ``Cg``, ``Dg`` (``Dg`` is overwritten):
        added to the deltas ``delta_c``, ``delta_d`` (scaled by ``fC``, ``fD``) in place and to
        ``loss``, which is returned.  ``seg`` sums per client, ``nf``/``n_f`` the batch sizes."""
        d = cfg.dim
        diff = Dg.sub_(Cg)                               # Dg no longer needed
        denom = nf * d
        loss = loss - lam * seg(torch.einsum("kd,kd->k", diff, diff)) / (n_f * d)
        c_k = 2 * lam / denom
        delta_d.add_(torch.einsum("kd,k->kd", diff, fD * c_k))
        delta_c.sub_(torch.einsum("kd,k->kd", diff, fC * c_k))
        m_k = mu / denom
        if cfg.method == "fedrap_l2":
            loss = loss + mu * seg(torch.einsum("kd,kd->k", Cg, Cg)) / (n_f * d)
            delta_c.sub_(torch.einsum("kd,k->kd", Cg, fC * 2 * m_k))
        elif mu:
            sign = torch.sign(Cg)
            loss = loss + mu * seg(torch.einsum("kd,kd->k", Cg, sign)) / (n_f * d)  # Σ|C|
            delta_c.sub_(torch.einsum("kd,k->kd", sign, fC * m_k))
        del diff
        return loss

    def full_matrix_update(self, cfg: FederatedConfig, n_items: int, D: torch.Tensor, C: torch.Tensor, lam: float,
                           mu: float, lr_arg: torch.Tensor, loss: torch.Tensor,
                           scratch: EagerScratch) -> tuple[torch.Tensor, bool]:
        """Paper mode's full-matrix regularisers and weight decay on the dense tables ``D``, ``C``
        ``[B, n_items, d]``, in place: gradients at the pre-step values, then the updates.  Returns
        ``loss`` with their terms and whether the L1 step is the prox (applied after the batch rows).
        The eager form writes its temporaries into ``scratch``."""
        d = cfg.dim
        lr3 = lr_arg[:, None, None]
        # gradients of the full-matrix terms at the pre-step values, then in-place updates
        nd = float(n_items * d)
        # the fused step covers the L1 forms (the subgradient step in it, the prox after the rows)
        fused = self._fused_step(cfg) if cfg.method != "fedrap_l2" else None
        if fused is not None:
            prox = cfg.l1_update == "prox"
            l1_step = lr3 * (mu / nd) if mu and not prox else torch.zeros_like(lr3)
            args = (D, C, 1 - lr3 * cfg.l2, lr3 * (2 * lam / nd), l1_step,
                    torch.tensor(-lam / nd, dtype=C.dtype, device=C.device),
                    torch.tensor(mu / nd, dtype=C.dtype, device=C.device))
            if self.update_used == "fused":
                return loss + fused(*args), prox
            try:  # the first call compiles, before anything is written
                terms = fused(*args)
            except Exception as err:  # noqa: BLE001 -- whatever stops the compiler: the eager step below
                self._compiled = False
                self._fall_back(err)
            else:
                self.update_used = "fused"
                return loss + terms, prox
        l1_prox = False
        bufs = scratch.pair(D)
        diffall = torch.sub(D, C, out=bufs[0])
        loss = loss - lam * torch.linalg.vector_norm(diffall, dim=(1, 2)) ** 2 / nd
        coef = lr3 * (2 * lam / nd)
        shrink_c = 1 - lr3 * cfg.l2
        sign_c = None
        if cfg.method == "fedrap_l2":
            loss = loss + mu * torch.linalg.vector_norm(C, dim=(1, 2)) ** 2 / nd
            shrink_c = shrink_c - lr3 * (2 * mu / nd)
        else:
            loss = loss + mu * torch.linalg.vector_norm(C, ord=1, dim=(1, 2)) / nd
            sign_c = torch.sign(C, out=bufs[1])
            if cfg.l1_update == "prox":
                l1_prox = True
                sign_c = None
            elif not mu:
                sign_c = None
        D.mul_(1 - lr3 * cfg.l2).addcmul_(diffall, coef)       # D -= lr(l2 D - 2λ(D-C)/nd)
        C.mul_(shrink_c).addcmul_(diffall, -coef)              # C -= lr(l2 C + 2λ(D-C)/nd [+2μC/nd])
        if sign_c is not None:
            C.addcmul_(sign_c, -lr3 * (mu / nd))               # C -= lr μ sign(C)/nd
        del diffall, sign_c
        return loss, l1_prox

    # Long on purpose: one step's gathers, gradients and scatters share its per-sample tensors and summation order
    def _step(self, model: FedRAPModel, chunk: DenseChunk, fr, fi, lab, n_f, lengths, lam, mu,
              lr_scale) -> torch.Tensor:
        """One SGD step of every client of the ``chunk`` (in place) on the flat batch ``(fr, fi, lab)``.

        ``fr`` is the client (row of the stacked tensors) of each sample, ``fi`` its item,
        ``n_f[B]`` the clients' batch sizes, ``lengths[B]`` their samples in this step (``fr`` is
        sorted), ``lr_scale[B]`` the per-client learning-rate factor (0 = client not stepping).
        Returns each client's batch loss ``[B]``.

        Per sample k (client i, item j, n = the client's batch size), with
        ``a_k = (σ(s_k) − r_k)/n`` and, in code mode, ``c = 2λ/(n d)``, ``m = μ/(n d)``::

            ∂L/∂D_ij += a_k w_i − c (D_ij − C_ij)
            ∂L/∂C_ij += a_k w_i + c (D_ij − C_ij) + m sign(C_ij)     (L2 ablation: 2m C_ij)
            ∂L/∂w_i  += a_k (D_ij + C_ij),   ∂L/∂b_i += a_k

        The per-sample updates are formed with per-sample scalars (few passes) and
        scattered with one ``index_add_`` per table (duplicates accumulate).
        """
        cfg = model.config
        d = cfg.dim
        n_items = model.n_items
        w, b, D, C = chunk.w, chunk.b, chunk.D, chunk.C
        sC, sD = chunk.scale_C, chunk.scale_D
        key = fr * n_items + fi
        C2, D2 = C.view(-1, d), (D.view(-1, d) if D is not None else None)
        sC_k = sC[fr].to(C.dtype)
        Cg = C2.index_select(0, key).mul_(sC_k[:, None])
        if D is not None:
            sD_k = sD[fr].to(D.dtype)
            Dg = D2.index_select(0, key).mul_(sD_k[:, None])
            x = Cg + Dg
        else:
            Dg = None
            x = Cg
        wf = w.index_select(0, fr)

        def seg(values):  # per-client sums of per-sample values (fr sorted)
            return torch.segment_reduce(values, "sum", lengths=lengths, axis=0)

        s = torch.einsum("kd,kd->k", x, wf)
        if cfg.use_bias:
            s = s + b[fr]
        p = torch.sigmoid(s)
        # BCE as torch.nn.BCELoss (log clamped at -100)
        bce = -(lab * torch.clamp(torch.log(p), min=-100) + (1 - lab) * torch.clamp(torch.log1p(-p), min=-100))
        nf = n_f[fr]
        loss = seg(bce) / n_f
        a_k = (p - lab) / nf                                     # dBCE/ds
        g_w = seg(torch.einsum("kd,k->kd", x, a_k))
        g_b = seg(a_k)
        del x
        lr_net = model.lr_network * lr_scale
        lr_arg = model.lr_args * lr_scale
        lr_k = lr_arg[fr]
        # ΔC = -lr/sC (a w + c diff + m sign C),  ΔD = -lr/sD (a w - c diff)
        fC = lr_k / sC_k
        delta_c = torch.einsum("kd,k->kd", wf, -(fC * a_k))
        delta_d = None
        if Dg is not None:
            fD = lr_k / sD_k
            delta_d = torch.einsum("kd,k->kd", wf, -(fD * a_k))
            if cfg.mode == "code":
                loss = self._code_row_regularisers(cfg, Cg, Dg, delta_c, delta_d, fC, fD, nf, n_f, seg, lam, mu, loss)
        del Cg, Dg
        l1_prox = False
        # dense part: weight decay (and, paper mode, the full-matrix regularisers)
        if D is not None and cfg.mode == "paper":
            loss, l1_prox = self.full_matrix_update(cfg, n_items, D, C, lam, mu, lr_arg, loss, chunk.scratch)
        elif cfg.l2:
            # p <- p (1 - lr l2) - lr g, with p = s * stored: s <- s (1 - lr l2), stored -= lr g / s
            shrink = 1 - lr_arg.to(torch.float64) * cfg.l2
            sC.mul_(shrink)
            if D is not None:
                sD.mul_(shrink)
            # the deltas were divided by the pre-step scale: rescale to the new one
            ratio = (1 / shrink).to(C.dtype)[fr][:, None]
            delta_c.mul_(ratio)
            if delta_d is not None:
                delta_d.mul_(ratio)
        # sparse part: the batch rows (duplicates accumulate, as embedding backward)
        C2.index_add_(0, key, delta_c)
        if D is not None:
            D2.index_add_(0, key, delta_d)
        if bool((sC < 1e-3).any()):  # keep the lazy scales away from underflow
            chunk.materialise()
        if l1_prox:
            thr = (lr_arg * mu / float(n_items * d))[:, None, None]
            C.copy_(torch.sign(C) * torch.clamp(C.abs() - thr, min=0.0))
        w.sub_(lr_net[:, None] * (g_w + cfg.l2 * w))
        if cfg.use_bias:
            b.sub_(lr_net * (g_b + cfg.l2 * b))
        return loss
