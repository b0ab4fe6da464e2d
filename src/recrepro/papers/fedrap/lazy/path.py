"""FedRAP's lazy paper path: the paper's full-matrix regularisers without dense per-step passes.

In paper mode with private tables (the default) the full-matrix regularisers touch every
entry of every client's ``D_i`` and ``C_i`` at every step, but between two BCE touches an
entry follows a per-client affine map as long as ``sign(C)`` is constant.  The sampled rows
train as in the row path (:mod:`recrepro.papers.fedrap.rows`), entries whose ``C`` may cross
zero are replayed step by step, all others get the composed map once per round; exact up to
float rounding, one read-modify-write streaming pass over the private tables per round
(:meth:`LazyPath.local_train`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from recrepro.models.federated.clients import RowLayout, row_layout
from recrepro.models.federated.privacy import RoundNoise
from recrepro.models.federated.simulation import check_finite_fast
from recrepro.models.federated.storage import clients_per_chunk
from recrepro.papers.fedrap.config import L1_THRESHOLD
from recrepro.papers.fedrap.lazy.kernels import (count_uploaded, exact_writes, f32, mapped_c, mapped_sums,
                                                 next_norms, server_columns, sorted_abs, to_caller_order)
from recrepro.papers.fedrap.lazy.next_round import block_next, next_context, next_group_sums, plan_next
from recrepro.papers.fedrap.lazy.start import (BLOCK_BYTES, replay_cap, replay_entries, round_context,
                                               stats_pass)
from recrepro.papers.fedrap.lazy.state import (CarriedStatistics, ExactWrites, LazyUploads, MapCoefficients,
                                               MappedSums, NextNorms, ReplayEntries, RoundContext, RoundStatistics,
                                               ServerColumns, TableStats)
from recrepro.papers.fedrap.lazy.steps import local_epochs
from recrepro.papers.fedrap.rows import RowTables
from recrepro.papers.fedrap.training_path import FedRAPModel, UploadTotals

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

__all__ = ["LazyPath", "LazyResult", "ReplayTooLarge"]


class ReplayTooLarge(RuntimeError):
    """The entries that may change sign this round exceed the memory budget (a strong L1 step, e.g.
    μ = 1 at a large ``lr_args`` on LastFM, puts nearly every entry of every client at risk): the
    round runs on the dense path, chunked under the budget, instead (exact as well)."""


@dataclass
class LazyResult:
    """The lazy path's clients (caller's order): the sum of their uploads, formed by the path itself,
    the compact uploads and their losses."""

    c_sum: torch.Tensor        #: ``Σ_i C_i`` (float64 ``[n_items, d]``)
    nnz: int                   #: uploaded entries with ``|C_i| > 1e-4``
    loss: torch.Tensor
    uploads: LazyUploads

    def add_uploads(self, model: FedRAPModel, totals: UploadTotals, noise: RoundNoise | None) -> None:
        if noise is None:
            totals.c_sum += self.c_sum
            totals.nnz += self.nnz
            return
        # DP clips every client's own upload: formed from the lazy map a slice of clients at a time
        step = clients_per_chunk(model.n_items, model.config.dim, model.config.memory_budget_mb,
                                 len(self.uploads.users))
        for up in self.upload_slices(model, step):
            up = model.privatise(up, noise)
            # float32 sums over the clients, accumulated in float64: a float64 reduction of
            # [B, n_items, d] costs 15x more (a relative 1e-7 of the sum, far below the noise)
            totals.c_sum += up.sum(0).double()
            totals.nnz += int(torch.count_nonzero(up.abs_() > L1_THRESHOLD))
            del up

    def upload_slices(self, model: FedRAPModel, chunk: int):
        """Yield the uploads ``C_i`` as ``[≤ chunk, n_items, d]`` tensors, the clients in order."""
        n = len(self.uploads.users)
        for lo in range(0, n, max(1, chunk)):
            hi = min(n, lo + max(1, chunk))
            yield self.uploads.slice(lo, hi).dense(model.D, model.D_scale)

    def dense_uploads(self, model: FedRAPModel) -> torch.Tensor:
        return self.uploads.dense(model.D, model.D_scale)


@dataclass
class RoundStart:
    """What a lazy round's start hands its local epochs and its end (clients in permuted order)."""

    users_p: np.ndarray        #: the clients
    w: torch.Tensor            #: their user vectors (trained in place)
    scale: np.ndarray          #: their lazy scales (float64)
    stats: RoundStatistics     #: the start-of-round statistics
    own: torch.Tensor          #: ``[M]`` each sampled row's client
    item: torch.Tensor         #: ``[M]`` its item
    D0: torch.Tensor           #: ``[M, d]`` the rows' true ``D`` at the start
    C0: torch.Tensor           #: ``[M, d]`` their ``C0``
    rows: RowTables            #: the rows as stepped (``X``, ``E`` in place)
    entries: ReplayEntries     #: the replayed entries
    sums: MappedSums           #: the lazily mapped entries' sums


class LazyPath:
    """The lazy paper path: a :class:`~recrepro.papers.fedrap.training_path.TrainingPath` for paper mode
    with private tables.  It keeps :attr:`carried`, the statistics this round's pass took for the
    next round (part of a checkpoint: :meth:`carried_state`)."""

    def __init__(self) -> None:
        self.carried: CarriedStatistics | None = None

    def local_train(self, model: FedRAPModel, users: np.ndarray, owner: np.ndarray, item: np.ndarray,
                    label: np.ndarray, lam: float, mu: float, rng: np.random.Generator) -> LazyResult:
        """Paper mode (full-matrix regularisers) without dense per-step passes; exact.

        Paper-mode gradients of client i at every local step (poster objective, normalised by
        ``n d`` = n_items·d; ``a_k = wt_k(σ(s_k) − r_k)/n_batch`` on the batch rows, 0 elsewhere)::

            ∂L/∂D = a w − 2λ(D − C)/(n d),   ∂L/∂C = a w + 2λ(D − C)/(n d) + μ sign(C)/(n d)

        i.e. with ``X = D + C``, ``E = D − C``, ``s = sign C``, ``sh = 1 − lr·l2``,
        ``g = sh + 4 lr λ/(n d)``, ``ν = μ/(n d)``::

            X ← sh X − 2 lr a w − lr ν s,      E ← g E + lr ν s.

        Three kinds of entries:

        * the **rows the client samples** this round (compact ``[M, d]`` tables as in the
          row path): stepped exactly, every step of the client, by
          :func:`~recrepro.papers.fedrap.lazy.steps.paper_row_step`;
        * **entries that may change sign** (``C`` can cross zero during the round) in the
          other rows: found by a conservative bound and replayed step by step as a flat list
          (:func:`~recrepro.papers.fedrap.lazy.steps.paper_entry_step`);
        * **all other entries**: ``a = 0`` and ``s`` constant, so the map is affine with
          per-client scalars (:func:`~recrepro.papers.fedrap.lazy.steps.regulariser_schedule`),
          applied once at the end of the round; their share of the loss (``−λ‖D − C‖²``,
          ``μ‖C‖₁``, needed by the early stop) is a closed form in per-client sums of the
          start-of-round tables.

        The sign bound: after k steps ``C_k = u_k C_0 − v_k D_0 − s q_k`` (``u = (PX+PE)/2``,
        ``v = (PE−PX)/2 ≥ 0``, ``q = (QX+QE)/2``), so ``s·C_k ≥ |C_0| u_k − |D_0| v_k − q_k``;
        an entry is replayed unless this is positive (with a margin for rounding) for every
        ``k < K_i``, ``K_i`` = the client's most steps this round (early stop only shortens).

        **One pass per round.**  The uploads' lazy part is ``Σ_i C_T,i = C0 Σα − s Σγ + Σ_i β_i D0_i``;
        ``β_i`` depends only on how many steps client i took, so ``Σ_i β_i D0_i`` comes from sums
        ``G_K = Σ_{i: K_i = K} D0_i`` per schedule length, formed when the tables were last streamed
        (clients that stopped early: ``(β_i − β_K) D0_i`` read from their own tables).  The next
        server table ``C' = Σ_i C_i / B`` is therefore known *before* the end-of-round pass, and that
        one read-modify-write pass (:meth:`end_pass`) applies this round's map, writes the
        exact rows, counts the uploads' entries above the threshold and takes the *next* round's
        start-of-round statistics for the participants that round will sample
        (:func:`~recrepro.papers.fedrap.lazy.next_round.next_context`): ``⟨C', D⟩``,
        ``⟨sign C', D⟩`` and the entries the sign bound flags from the block; ``‖D‖²`` and a bound
        on ``max |D|`` in closed form from this round's sums
        (:func:`~recrepro.papers.fedrap.lazy.kernels.next_norms`), and ``G_K`` from the rows
        (:func:`~recrepro.papers.fedrap.lazy.next_round.next_group_sums`) or, where that costs more,
        from the block.  They are used only if everything they depend on is unchanged when that round
        starts (:meth:`cached_stats`); otherwise (the first round, a changed state) a separate
        start-of-round pass takes them (:func:`~recrepro.papers.fedrap.lazy.start.stats_pass`).
        """
        lay = row_layout(owner, item, label, users.size, model.n_items, model.config.batch_size)
        start = self._start_round(model, users, lay, lam, mu)
        maps, prev_mean, steps = local_epochs(model, lay, start.w, start.rows, start.entries, start.sums,
                                              owner.size, lam, mu, rng)
        coef = maps.coefficients(start.scale)
        return self._end_round(model, users, lay, start, coef, prev_mean, steps, lam, mu)

    def _start_round(self, model: FedRAPModel, users: np.ndarray, lay: RowLayout, lam: float,
                     mu: float) -> RoundStart:
        """The round's start-of-round statistics (carried or taken now), the sampled rows at their
        start-of-round values, the entries to replay and the lazily mapped entries' sums."""
        dev, n_items = model.device, model.n_items
        cperm = lay.cperm
        users_p = users[cperm]
        own_t = torch.as_tensor(lay.r_owner, device=dev)
        item_t = torch.as_tensor(lay.r_item, device=dev)
        w = model.w[torch.as_tensor(users_p, device=dev)].clone()
        scale_p = model.D_scale[torch.as_tensor(users_p)].clone()          # float64, permuted order
        sc = scale_p.numpy()
        counts_o = to_caller_order(lay.counts, cperm)
        # start-of-round statistics: taken by the previous round's pass when still valid, else a pass now
        stats = self.cached_stats(model, users, counts_o, lam, mu)
        if stats is None:
            ctx = round_context(model, server_columns(model.C), users, counts_o, to_caller_order(sc, cperm), lam,
                                mu, model.lr_args)
            stats = RoundStatistics(ctx, stats_pass(model, users, ctx))
        acc = stats.tables
        if acc.overflow:
            # nothing is written yet this round (and no random draw made): the caller reruns it dense
            raise ReplayTooLarge(f"round {model.round}: {acc.risk_n:,} or more entries may change sign, "
                                 f"over the {replay_cap(model):,} the memory budget allows")
        cols = stats.context.cols                                         # of a table equal to model.C
        u_cpu = torch.as_tensor(users)
        store_idx = torch.as_tensor(users_p[lay.r_owner] * n_items + lay.r_item)
        Dr0 = model.private_rows(store_idx).to(dev)
        Dr0.mul_(scale_p.to(dev, torch.float32)[own_t][:, None])
        Cr0 = cols.C0.index_select(0, item_t)
        X, E = Dr0 + Cr0, Dr0 - Cr0
        ents = replay_entries(model, acc, users, lay, scale_p, cols)
        sums = mapped_sums(cperm, sc, acc.sq[u_cpu], acc.dots[u_cpu], cols,
                           ((own_t, Dr0, Cr0, item_t), (ents.own, ents.D0, ents.C0, None)))
        rows = RowTables(X, E, own_t, torch.as_tensor(lay.r_label, device=dev), torch.as_tensor(lay.row_pointer(),
                                                                                               device=dev))
        return RoundStart(users_p, w, sc, stats, own_t, item_t, Dr0, Cr0, rows, ents, sums)

    # Long on purpose: the uploads' sum, the exact values and the one pass share the round's tensors in order
    def _end_round(self, model: FedRAPModel, users: np.ndarray, lay: RowLayout, start: RoundStart,
                   coef: MapCoefficients, prev_mean: np.ndarray, steps: np.ndarray, lam: float,
                   mu: float) -> LazyResult:
        """The end of the round: the uploads' sum first (the next server table), then the one pass
        (:meth:`end_pass`) and the clients' state written back."""
        dev, d, n_items, B = model.device, model.config.dim, model.n_items, users.size
        cperm, sc, stats, ents = lay.cperm, start.scale, start.stats, start.entries
        cols = stats.context.cols
        C0 = cols.C0
        own_t, item_t, Dr0, Cr0 = start.own, start.item, start.D0, start.C0
        X, E = start.rows.X, start.rows.E
        Cr = torch.sub(X, E).mul_(0.5)
        Dr = X.add_(E).mul_(0.5)
        Ce, De = torch.sub(ents.X, ents.E).mul_(0.5), ents.X.add_(ents.E).mul_(0.5)
        del X, E
        start.rows.E = None                                   # folded into Cr and Dr: free it
        check_finite_fast("client item rows", Cr, f"round {model.round}")

        def caller(values: np.ndarray) -> np.ndarray:
            return to_caller_order(values, cperm)

        beta_d0, alpha_d0 = self.upload_d0_sums(model, users, caller(coef.alpha), caller(coef.beta), caller(steps),
                                                caller(sc), stats)
        c_sum = (C0.double() * coef.alpha.sum() - cols.S0.double() * coef.gamma.sum()).add_(beta_d0.view(n_items, d))
        # the exact values of the rows and replayed entries replace the lazy map's
        lazy_r = mapped_c(coef, own_t, Cr0, Dr0)
        c_sum.index_add_(0, item_t, (Cr - lazy_r).double())
        nnz_exact = count_uploaded(Cr) - count_uploaded(lazy_r)
        if Ce.numel():
            lazy_e = mapped_c(coef, ents.own, ents.C0, ents.D0)
            c_sum.view(-1).index_add_(0, ents.pos, (Ce - lazy_e).double())
            nnz_exact += count_uploaded(Ce) - count_uploaded(lazy_e)

        # scales that drift far from 1 are folded into the stored tables by the pass
        new_scale = coef.new_scale
        drift = (new_scale < 1e-3) | (new_scale > 1e3)
        final_scale = np.where(drift, 1.0, new_scale)
        nxt = next_context(model, c_sum, B, users, caller(final_scale), lam, mu)
        if nxt is not None:
            nxt.group_sums = next_group_sums(model, start.users_p, stats, nxt, alpha_d0, coef, cols,
                                             (own_t, item_t, Dr, Dr0, Cr0), (ents.own, ents.pos, De, ents.D0, ents.C0))
        ns = f32(new_scale, dev)
        writes = exact_writes(cperm, (own_t, item_t, Dr.div_(ns[own_t][:, None])),
                              (ents.own, ents.pos, De.div_(ns[ents.own])), B)
        u_cpu = torch.as_tensor(users)
        norms = (next_norms(cperm, start.sums, coef, (stats.tables.amax[u_cpu].numpy(),
                                                     stats.tables.ref[u_cpu].numpy()), writes, cols,
                            caller(np.where(drift, new_scale, 1.0)))
                 if nxt is not None else None)
        nnz, nxt_acc = self.end_pass(model, users, cperm, sc, stats.tables.amax[u_cpu], cols, coef, writes,
                                     caller(drift), nxt, norms)
        nnz += nnz_exact
        model.D_scale[torch.as_tensor(start.users_p)] = torch.as_tensor(final_scale)
        # the next round's statistics, valid while D (its version counter), C, D_scale, ... are unchanged
        self.carried = (None if nxt is None
                        else CarriedStatistics(RoundStatistics(nxt, nxt_acc), model.D, model.D._version))
        model.w[torch.as_tensor(start.users_p, device=dev)] = start.w
        loss_out = np.empty(B)
        loss_out[cperm] = np.nan_to_num(prev_mean)
        orig = torch.as_tensor(cperm, device=dev)
        uploads = LazyUploads(users, C0, caller(coef.alpha), caller(coef.beta), caller(coef.gamma),
                              caller(coef.delta), (orig[own_t], item_t, Cr), (orig[ents.own], ents.pos, Ce))
        return LazyResult(c_sum, nnz, torch.as_tensor(loss_out), uploads)

    def cached_stats(self, model: FedRAPModel, users: np.ndarray, counts: np.ndarray, lam: float,
                     mu: float) -> RoundStatistics | None:
        """The statistics the previous round's pass took for this round, if still valid.

        Valid when this is the round they were taken for, with the same participants (and sample
        counts), weights, learning rate, server table (bit for bit) and lazy scales, and the
        private tables have not been written since (same tensor, same version counter); else
        ``None`` (and a start-of-round pass takes them).  Used once.
        """
        cache, self.carried = self.carried, None
        if cache is None:
            return None
        ctx = cache.stats.context
        valid = (ctx.round == model.round and cache.belongs_to(model.D)
                 and ctx.lam == lam and ctx.mu == mu and ctx.lr_args == model.lr_args
                 and np.array_equal(ctx.users, users) and np.array_equal(ctx.counts, counts)
                 and np.array_equal(ctx.scale, model.D_scale[torch.as_tensor(users)].numpy())
                 and ctx.C.shape == model.C.shape and ctx.C.device == model.C.device
                 and bool(torch.equal(ctx.C, model.C)))
        return cache.stats if valid else None

    def carried_state(self, D: torch.Tensor | None) -> dict[str, Any] | None:
        """The carried statistics for a checkpoint (``None`` where they do not belong to the tables ``D``).

        They are part of what the next round computes from (their closed forms and a fresh
        start-of-round pass agree only to float rounding), so a run resumed from a checkpoint
        continues bit for bit as the uninterrupted one (``tests/test_resume.py``).
        """
        if self.carried is None or not self.carried.belongs_to(D):
            return None
        stats = self.carried.stats
        return {"ctx": stats.context.to_state(), "acc": stats.tables.to_state()}

    def load_carried_state(self, state: dict[str, Any] | None, D: torch.Tensor | None, dev: torch.device) -> None:
        """Inverse of :meth:`carried_state`: the statistics belong to the tables ``D`` just loaded; a
        checkpoint loads on the CPU, so back to ``dev``, except the per-user sums (CPU)."""
        if state is None or D is None:
            self.carried = None
            return
        stats = RoundStatistics(RoundContext.from_state(state["ctx"], dev), TableStats.from_state(state["acc"], dev))
        self.carried = CarriedStatistics(stats, D, D._version)

    def upload_d0_sums(self, model: FedRAPModel, users: np.ndarray, alpha: np.ndarray, beta: np.ndarray,
                       steps: np.ndarray, sc: np.ndarray, stats: RoundStatistics) -> tuple[torch.Tensor, torch.Tensor]:
        """``Σ_i β_i D0_i`` (float64, flat ``[n d]``) over the clients ``users`` and ``Σ_{i ∈ K} α_i D0_i``
        per schedule group (float64 ``[groups, n d]``; caller's order: ``alpha``, ``beta``, the
        ``steps`` each took, lazy scales ``sc``).

        ``α_i``, ``β_i`` are functions of the number of steps alone (every client's k-th step has the
        same learning rate), so with ``(α_K, β_K)`` those of the clients of schedule group ``K`` that
        ran all ``K`` steps (the most common value: exact whatever it is) the sums are
        ``Σ_K β_K G_K + Σ_i (β_i − β_K(i)) D0_i`` and ``α_K G_K + Σ_{i ∈ K} (α_i − α_K) D0_i``; the
        second sums run over the clients that stopped early (none, usually) and read their tables.
        """
        ctx, acc = stats.context, stats.tables
        dev, nd = model.device, model.n_items * model.config.dim
        grp = ctx.group[torch.as_tensor(users, device=dev)].cpu().numpy()
        n_groups = len(ctx.group_steps)
        ref_a, ref_b = np.ones(n_groups), np.zeros(n_groups)
        for g, k in enumerate(ctx.group_steps):  # a loop over schedule lengths (a few), not clients
            full = (grp == g) & (steps == k)
            if full.any():
                pairs, n = np.unique(np.stack([alpha[full], beta[full]], 1), axis=0, return_counts=True)
                ref_a[g], ref_b[g] = pairs[np.argmax(n)]
        G = acc.G.double()
        beta_sum = (torch.as_tensor(ref_b, device=dev)[:, None] * G).sum(0)
        alpha_g = torch.as_tensor(ref_a, device=dev)[:, None] * G
        odd = np.flatnonzero((beta != ref_b[grp]) | (alpha != ref_a[grp]))
        if odd.size:
            # row 0: (β_i − β_K) scale_i, row 1 + K: (α_i − α_K) scale_i of the clients in group K
            coef = np.zeros((1 + n_groups, odd.size))
            coef[0] = (beta - ref_b[grp])[odd] * sc[odd]
            coef[1 + grp[odd], np.arange(odd.size)] = (alpha - ref_a[grp])[odd] * sc[odd]
            coef = f32(coef, dev)
            corr = torch.zeros((1 + n_groups, nd), device=dev)
            for lo, hi, table in model.read_private_blocks(users[odd], BLOCK_BYTES):
                corr.addmm_(coef[:, lo:hi], table.to(dev).reshape(hi - lo, nd))
            beta_sum += corr[0].double()
            alpha_g += corr[1:].double()
        return beta_sum, alpha_g

    # Long on purpose: one read-modify-write pass does this round's end and the next round's start per block
    def end_pass(self, model: FedRAPModel, users: np.ndarray, cperm: np.ndarray, sc: np.ndarray, amax: torch.Tensor,
                 cols: ServerColumns, coef: MapCoefficients, writes: ExactWrites, drift: np.ndarray,
                 nxt: RoundContext | None, norms: NextNorms | None) -> tuple[int, TableStats | None]:
        """The end-of-round pass over the private tables: the lazy map on every stored entry, the
        exact rows and entries over it, and the next round's start-of-round statistics.

        ``coef`` per client (permuted order): ``C_T = α C0 + β D0 − γ s``, ``D_T = α D0 + β C0 + δ s``;
        ``amax`` (caller's order, stored units) bounds ``max |D0|``.
        Per block of clients: counts the uploads' entries above the threshold (lazily mapped values
        of every entry; the caller corrects for the exact ones), writes
        ``stored' = stored + (β C0 + δ s)/(α scale)``, then the exact rows and replayed entries
        (``writes``, stored units), and folds the scale of the clients in ``drift`` (caller's order)
        into their tables.  With ``nxt`` (:func:`~recrepro.papers.fedrap.lazy.next_round.next_context`)
        it then takes the next round's statistics of the finished block: ``⟨C', D⟩``,
        ``⟨sign C', D⟩``, the group sums (unless the rows gave them) and the entries that may change
        sign (:func:`~recrepro.papers.fedrap.lazy.next_round.block_next`); ``‖D‖²`` and the bound on
        ``max |D|`` come from ``norms`` (no kernel over the block).  The next round's participants
        outside ``users`` get a read-only pass after
        (:func:`~recrepro.papers.fedrap.lazy.start.stats_pass`).  Returns the count and the
        statistics (``None`` without ``nxt``).
        """
        dev, n_items, d = model.device, model.n_items, model.config.dim
        nd = n_items * d
        B = users.size
        alpha, beta, gamma, delta, new_scale = coef.alpha, coef.beta, coef.gamma, coef.delta, coef.new_scale
        CS, n_zero, n_all = cols.CS, cols.n_zero, cols.absC0f.numel()
        alpha_o, gamma_o = to_caller_order(alpha, cperm), to_caller_order(gamma, cperm)
        beta_st = f32(to_caller_order(beta * sc, cperm), dev)       # β D0 = (β·scale) stored
        up_coef = f32(np.stack([alpha_o, -gamma_o], 1), dev)
        d_coef = f32(to_caller_order(np.stack([beta, delta], 1) / new_scale[:, None], cperm), dev)
        ns_o = f32(to_caller_order(new_scale, cperm), dev)
        step = max(1, BLOCK_BYTES // (nd * 4))                # the blocks of private_blocks
        starts = np.arange(0, B, step)
        # entries with |C_i| > 1e-4 among the lazily mapped uploads C = s(α|C0| − γ) + β D0: certain
        # from |C0| alone unless |α|C0| − γ| is within |β|·max|D0| of the threshold (then exact);
        # the band of |C0| to evaluate, per block (vectorised: few small ops inside the loop)
        thr = L1_THRESHOLD
        reach = np.abs(to_caller_order(beta, cperm)) * to_caller_order(sc, cperm) * amax.numpy()
        band = np.stack([np.minimum.reduceat((gamma_o - thr - reach) / alpha_o, starts) * (1 - 1e-6) - 1e-12,
                         np.maximum.reduceat((gamma_o + thr + reach) / alpha_o, starts) * (1 + 1e-6) + 1e-12], 1)
        hi_cut = (gamma_o + thr) / alpha_o
        abs_sorted, abs_order = sorted_abs(cols, max(hi_cut.max(initial=0.0), band[:, 1].max(initial=0.0)))
        abs_np = abs_sorted.double().cpu().numpy()
        above = np.searchsorted(abs_np, hi_cut, side="right")                     # |C0| > cut: certainly above
        below = np.searchsorted(abs_np, (gamma_o - thr) / alpha_o, side="left")   # |C0| < cut: certainly below
        nnz = int((n_all - above).sum() + below.sum())
        k_band = np.searchsorted(abs_np, band, side="right")
        # a block evaluates the sorted positions [0, n_zero) (C0 = 0: lazy C = β D0, not the sign
        # formula) and [max(k_lo, n_zero), k_hi); those certain from |C0| were counted above
        blk_of = np.arange(B) // step
        for s0, s1 in ((np.zeros(B, np.int64), np.full(B, n_zero)),
                       (np.maximum(k_band[blk_of, 0], n_zero), np.maximum(k_band[blk_of, 1], n_zero))):
            nnz -= int((s1 - np.clip(above, s0, s1)).sum() + (np.clip(below, s0, s1) - s0).sum())
        k_band = k_band.tolist()
        # the exact rows/entries: positions inside their block's [b, n d] table
        rows, ents = writes.rows, writes.entries
        r_loc = (rows.client % step) * n_items + rows.index
        e_loc = (ents.client % step) * nd + ents.index
        plan = plan_next(model, users, starts, nxt, norms) if nxt is not None else None
        for blk, (lo, hi, table) in enumerate(model.private_blocks(users, BLOCK_BYTES)):   # end-of-round pass
            flat = table.to(dev).view(hi - lo, nd)
            k_lo, k_hi = k_band[blk]
            cand = (abs_order[:k_hi] if k_lo <= n_zero
                    else torch.cat([abs_order[:n_zero], abs_order[k_lo:k_hi]]))
            if cand.numel():                                  # C = (α C0 − γ s) + (β·scale) stored
                upload = torch.mm(up_coef[lo:hi], CS.index_select(1, cand))
                upload.addcmul_(flat.index_select(1, cand), beta_st[lo:hi, None])
                nnz += int(torch.count_nonzero(upload.abs_() > thr))
            flat.addmm_(d_coef[lo:hi], CS)                    # stored' = stored + (β C0 + δ s)/(α scale)
            # the exact rows and entries of this block's clients replace the map's values
            r_lo, r_hi, e_lo, e_hi = rows.ptr[lo], rows.ptr[hi], ents.ptr[lo], ents.ptr[hi]
            if r_hi > r_lo:
                flat.view(-1, d).index_copy_(0, r_loc[r_lo:r_hi], rows.values[r_lo:r_hi])
            if e_hi > e_lo:
                flat.view(-1).index_copy_(0, e_loc[e_lo:e_hi], ents.values[e_lo:e_hi])
            fold = np.flatnonzero(drift[lo:hi])
            if fold.size:                                     # true = scale · stored: the scale becomes 1
                f = torch.as_tensor(fold, device=dev)
                flat[f] = flat[f] * ns_o[lo + f][:, None]
            if plan is not None and plan.blocks[blk]:
                block_next(model, flat, lo, hi, blk, nxt, plan)
            if flat.data_ptr() != table.data_ptr():           # a table on another device
                table.copy_(flat.view_as(table))
        if plan is None:
            return nnz, None
        acc = plan.acc
        u_cpu = torch.as_tensor(users)
        acc.dots[u_cpu] = plan.dots.double().cpu()
        acc.amax[u_cpu] = plan.amax.cpu()
        acc.ref[u_cpu] = plan.ref.cpu()
        rest = np.setdiff1d(nxt.users, users)              # next round's participants not in this one
        if rest.size:
            stats_pass(model, rest, nxt, acc)
        return nnz, acc
