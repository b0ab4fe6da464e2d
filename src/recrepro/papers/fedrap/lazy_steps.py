"""FedRAP's paper-mode SGD steps on the rows and entries the lazy path steps exactly.

:class:`~recrepro.papers.fedrap.lazy.LazyPaperPath` composes the regulariser maps of the entries
whose ``sign(C)`` cannot change; these two kernels step the rest: a stepping client's sampled rows
(BCE plus the full-matrix regularisers, :meth:`PaperModeSteps._paper_row_step`) and the replayed
entries that may cross zero (:meth:`PaperModeSteps._paper_entry_step`). Kept apart from the pass
logic so that each module reads on its own.
"""

from __future__ import annotations

import torch

from recrepro.papers.fedrap.rows import rows_bce

__all__ = ["PaperModeSteps"]


class PaperModeSteps:
    """Paper-mode step kernels (a mixin: they read the model's ``config``, ``n_items`` and
    ``lr_network``)."""

    def _paper_row_step(self, w, X, E, own, lab, wt, n_c, crow, lam, mu, lr_scale, lr_arg,
                        bufs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One paper-mode SGD step of clients ``0..len(w)`` on their sampled rows, in place.

        As :meth:`_row_step`, but the full-matrix regularisers act on every row of a stepping
        client (not only its batch rows): ``X ← sh X − 2 lr a_k w_i − lr ν s``,
        ``E ← g E + lr ν s`` (``g = sh + 4 lr λ/(n d)``, ``ν = μ/(n d)``, ``s = sign C``;
        see :meth:`_local_train_lazy`).  Returns per client the batch BCE, and ``Σ (D − C)²``
        and ``Σ |C|`` over these rows at the pre-step values (the caller adds the other
        entries' shares and forms the loss).
        """
        cfg = self.config
        nd = float(self.n_items * cfg.dim)
        wf = torch.index_select(w, 0, own, out=bufs["wf"])

        def seg(values):  # per-client sums of a row vector
            return torch.segment_reduce(values, "sum", offsets=crow, axis=0)

        loss, a_k, g_w, _, _ = rows_bce(torch.einsum("kd,kd->k", X, wf), X, own, lab, wt, n_c, crow)
        lr_net = (self.lr_network * lr_scale).to(torch.float32)
        lr_k = lr_arg.index_select(0, own)
        e2 = seg(torch.einsum("kd,kd->k", E, E))
        T = torch.sub(X, E, out=bufs["t"])                    # 2C
        S = torch.sign(T, out=bufs["s"])
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

    def _paper_entry_step(self, Xe, Ee, own, crow, lam, mu, lr_arg) -> tuple[torch.Tensor, torch.Tensor]:
        """One paper-mode step of the replayed entries (``C`` may cross zero), in place.

        Flat entries of unsampled rows, grouped by client (``crow``): the regulariser map
        ``X ← sh X − lr ν s``, ``E ← g E + lr ν s`` with ``s = sign C`` read at this step.
        Returns per client ``Σ (D − C)²`` and ``Σ |C|`` at the pre-step values.
        """
        cfg = self.config
        nd = float(self.n_items * cfg.dim)
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
