"""The next round's statistics, taken during this round's pass of FedRAP's lazy paper path.

:class:`~recrepro.papers.fedrap.lazy.LazyPaperPath` streams every client's private tables once per
round; while a block is in memory it also takes what the next round's sign screen and group sums
need (its participants and schedule are known: ``sample_clients`` on round ``a + 1``'s stream), so
that round starts without a pass of its own.  These are the methods that plan and take those
statistics; the pass itself and the map they describe are in :mod:`recrepro.papers.fedrap.lazy`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from recrepro.models.federated.sampling import sample_clients
from recrepro.papers.fedrap.lazy_kernels import _f32, _server_columns, _sorted_abs

__all__ = ["AMAX_SLACK", "GROUP_ROW_COST", "LazyNextRound"]

#: an upper bound on max |D| is carried from round to round; a block recomputes it once it exceeds
#: this multiple of the last exact value (a loose bound only widens the screens of the sign bound and
#: of the |C_i| > 1e-4 count)
AMAX_SLACK = 1.25
#: the next round's group sums come from the rows (a few [M, d] operations) rather than from the
#: pass (one more kernel over all B n d entries) when GROUP_ROW_COST · M < B · n_items (Video,
#: LastFM: yes; ML-100K: its ~0.5 M rows against 1.6 M client-items make the pass cheaper)
GROUP_ROW_COST = 6


class LazyNextRound:
    """Mixin of :class:`~recrepro.papers.fedrap.lazy.LazyPaperPath`: the next round's context, group
    sums and per-block statistics.  Uses the host's ``_lazy_context``, ``_lazy_new_acc`` and
    ``_lazy_add_risk``."""

    def _lazy_next_context(self, c_sum: torch.Tensor, B: int, users: np.ndarray, final_scale: np.ndarray,
                           lam: float, mu: float) -> dict[str, Any] | None:
        """The next round's :meth:`_lazy_context`, as :meth:`train_round` will set it up.

        Its server table ``(Σ_i C_i / B)`` in float32 (this call's clients are all the round's
        participants), participants (``sample_clients`` on the stream of round ``a + 1``),
        ``(λ, μ)`` (the curriculum after this round's), learning rate (``× decay_rate``), sample
        counts (positives × (1 + negatives)) and lazy scales (``final_scale`` for ``users``).
        ``None`` without training data.  Checked again when that round starts.
        """
        cfg = self.config
        train = getattr(self, "train_csr", None)
        if train is None:
            return None
        a = self.round + 1
        nxt_users = sample_clients(self.n_users, cfg.client_ratio, np.random.default_rng([cfg.seed, 1, a]))
        lam_n, mu_n = cfg.weights(a, (lam, mu))
        counts = np.diff(train.indptr)[nxt_users] * (1 + cfg.num_negatives)
        C_next = (c_sum / B).to(torch.float32)
        scale = self.D_scale.numpy().copy()
        scale[users] = final_scale
        ctx = self._lazy_context(_server_columns(C_next), nxt_users, counts, scale[nxt_users], lam_n, mu_n,
                                 self.lr_args * cfg.decay_rate)
        ctx.update(C=C_next, round=a)
        return ctx

    def _lazy_next_groups(self, users_p: np.ndarray, stats: dict[str, Any], nxt: dict[str, Any],
                          alpha_d0: torch.Tensor, coef: tuple[np.ndarray, ...], cols: dict[str, Any],
                          rows: tuple[torch.Tensor, ...], entries: tuple[torch.Tensor, ...]) -> torch.Tensor | None:
        """The next round's group sums ``G_K = Σ_{i ∈ K} D_i`` of the tables this round leaves, without
        a kernel over them (float64 ``[groups, n d]``), or ``None`` where the pass must take them.

        When the next round has the same participants and schedule groups (always without client
        sampling: the sample counts do not change), ``Σ_{i ∈ K} D_T,i`` over the lazily mapped
        entries is ``Σ α_i D0_i + (Σ β_i) C0 + (Σ δ_i) s`` (``alpha_d0`` from :meth:`_lazy_beta_d0`),
        and the exact rows and entries add their difference to the map's value.  That costs a few
        operations on the ``[M, d]`` rows: done only if the rows are few against the tables
        (``GROUP_ROW_COST · M < B n``), else the pass adds ``scale_i · stored_i`` per block (one
        more kernel over the tables).
        ``users_p``: the clients (permuted order); ``rows``: ``(own, item, D exact, D0, C0)``,
        ``entries``: ``(own, pos, D exact, D0, C0)``; ``coef`` = ``(α, β, γ, δ, new scale)``.
        """
        ctx = stats["ctx"]
        if (nxt is None or GROUP_ROW_COST * rows[0].numel() >= users_p.size * self.n_items
                or not np.array_equal(np.sort(nxt["users"]), np.sort(users_p))
                or not np.array_equal(nxt["group_steps"], ctx["group_steps"])):
            return None
        dev, d, nd = self.device, self.config.dim, self.n_items * self.config.dim
        u_dev = torch.as_tensor(users_p, device=dev)
        grp = ctx["group"][u_dev]
        if not torch.equal(grp, nxt["group"][u_dev]):
            return None
        alpha, beta, _, delta, _ = coef
        n_groups = alpha_d0.shape[0]
        grp_np = grp.cpu().numpy()
        sums = np.stack([np.bincount(grp_np, weights=beta, minlength=n_groups),
                         np.bincount(grp_np, weights=delta, minlength=n_groups)], 1)
        out = alpha_d0 + torch.mm(torch.as_tensor(sums, device=dev), cols["CS"].double())
        corr = torch.zeros(n_groups * nd, device=dev)
        for (owner, index, exact, D0v, C0v), width in ((rows, d), (entries, 1)):
            if owner.numel() == 0:
                continue
            col = (lambda a: _f32(a, dev)[owner][:, None]) if width == d else (lambda a: _f32(a, dev)[owner])
            lazy = D0v * col(alpha)                            # the map's D_T = α D0 + β C0 + δ s
            lazy.addcmul_(C0v, col(beta)).addcmul_(torch.sign(C0v), col(delta))
            at = grp[owner] * (nd // width) + index
            (corr.view(-1, d) if width == d else corr).index_add_(0, at, torch.sub(exact, lazy, out=lazy))
        return out.add_(corr.view(n_groups, nd).double())

    def _lazy_next_prep(self, users: np.ndarray, starts: np.ndarray, nxt: dict[str, Any],
                        norms: dict[str, np.ndarray]) -> dict[str, Any]:
        """What :meth:`_lazy_block_next` reads, per client of ``users`` (caller's order) and per block
        (``starts``): the next round's sign-bound coefficients and group weights, the carried
        ``‖D‖²`` and ``max |D|`` bound (``norms``), which blocks hold a next-round participant,
        which recompute ``max |D|`` (bound above ``AMAX_SLACK`` × the last exact value) and how
        many columns of the sorted ``|C'|`` the sign screen reads (vectorised before the pass)."""
        dev = self.device
        cols = nxt["cols"]
        acc = self._lazy_new_acc(nxt)
        u_cpu, u_dev = torch.as_tensor(users), torch.as_tensor(users, device=dev)
        acc["sq"][u_cpu] = torch.as_tensor(norms["sq"])
        member = nxt["member"][users]
        refresh = member & ~(norms["amax"] <= AMAX_SLACK * norms["ref"])
        U, V, Q = nxt["U"][u_dev], nxt["V"][u_dev], nxt["Q"][u_dev]
        amax = torch.as_tensor(norms["amax"], device=dev)
        n_cand = np.zeros(starts.size, np.int64)
        if nxt["can_flip"]:
            # |D| ≤ amax: the columns with |C'| below (amax v + q)/u can fail the bound
            reach = ((amax.to(torch.float32) * V + Q) / U).cpu().numpy()
            block_reach = torch.as_tensor(np.maximum.reduceat(reach, starts), device=dev)
            n_cand = torch.searchsorted(_sorted_abs(cols, block_reach.max())[0], block_reach,
                                        right=True).cpu().numpy()
        G = acc["G"]
        grp, gw = nxt["group"][u_dev], nxt["gweight"][u_dev]
        weights = (grp[None, :] == torch.arange(G.shape[0], device=dev)[:, None]).to(torch.float32) * gw
        if nxt.get("G") is not None:                           # the group sums are known (_lazy_next_groups)
            acc["G"], weights = nxt["G"], None
        return {"acc": acc, "position": nxt["position"][u_dev], "U": U, "V": V, "Q": Q, "weights": weights,
                "dots": torch.zeros((users.size, 2), device=dev), "amax": amax, "ref": torch.as_tensor(norms["ref"],
                                                                                                     device=dev),
                "blocks": np.maximum.reduceat(member, starts).tolist(),
                "refresh": np.maximum.reduceat(refresh, starts).tolist(), "n_cand": n_cand.tolist()}

    def _lazy_block_next(self, flat: torch.Tensor, lo: int, hi: int, blk: int, nxt: dict[str, Any],
                         prep: dict[str, Any]) -> None:
        """The next round's statistics of the finished block ``flat`` (clients ``lo:hi`` of the pass,
        stored units): ``(⟨C', D⟩, ⟨sign C', D⟩)``, the group sums ``G_K += scale · stored``, the
        entries that may change sign (as :meth:`_lazy_block_stats`) and, where the carried bound got
        loose, the exact ``max |D|``."""
        cols, G = nxt["cols"], prep["acc"]["G"]
        prep["dots"][lo:hi] = torch.mm(cols["CS"], flat.T).T
        weights = prep["weights"]                             # None: the sums came from the rows
        if weights is not None and G.shape[0] == 1:
            G[0].addmv_(flat.T, weights[0, lo:hi])
        elif weights is not None and G.shape[0]:
            G.addmm_(weights[:, lo:hi], flat)
        if prep["refresh"][blk]:
            top = torch.maximum(flat.amax(1), flat.amin(1).neg_()).double()
            prep["amax"][lo:hi] = top
            prep["ref"][lo:hi] = top
        n_cand = prep["n_cand"][blk]
        if n_cand:
            cand = cols["abs_order"][:n_cand]                 # (sorted by _lazy_next_prep)
            sub = flat.index_select(1, cand)
            U, V, Q = prep["U"][lo:hi], prep["V"][lo:hi], prep["Q"][lo:hi]
            lhs = torch.abs(sub).mul_(V[:, None]).add_(Q[:, None])
            hit = torch.nonzero((lhs >= cols["abs_sorted"][:n_cand] * U[:, None]).view(-1)).squeeze(1)
            if hit.numel():
                rows = hit // n_cand
                self._lazy_add_risk(prep["acc"], (prep["position"][lo:hi][rows], cand[hit - rows * n_cand],
                                                  sub.view(-1)[hit]))
