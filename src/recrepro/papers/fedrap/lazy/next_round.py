"""The next round's statistics, taken during this round's pass of FedRAP's lazy paper path.

:class:`~recrepro.papers.fedrap.lazy.path.LazyPath` streams every client's private tables once per
round; while a block is in memory it also takes what the next round's sign screen and group sums
need (its participants and schedule are known: ``sample_clients`` on round ``a + 1``'s stream), so
that round starts without a pass of its own.  These functions plan and take those statistics; the
pass and the map they describe are in :mod:`recrepro.papers.fedrap.lazy.path`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from recrepro.models.federated.sampling import sample_clients
from recrepro.papers.fedrap.lazy.kernels import f32, server_columns, sorted_abs
from recrepro.papers.fedrap.lazy.start import add_risk, new_table_stats, round_context
from recrepro.papers.fedrap.lazy.state import (MapCoefficients, NextNorms, RoundContext, RoundStatistics,
                                               ServerColumns, TableStats)
from recrepro.papers.fedrap.training_path import FedRAPModel

__all__ = ["AMAX_SLACK", "GROUP_ROW_COST", "NextRoundPlan", "block_next", "next_context", "next_group_sums",
           "plan_next"]

#: an upper bound on max |D| is carried from round to round; a block recomputes it once it exceeds
#: this multiple of the last exact value (a loose bound only widens the screens of the sign bound and
#: of the |C_i| > 1e-4 count)
AMAX_SLACK = 1.25
#: the next round's group sums come from the rows (a few [M, d] operations) rather than from the
#: pass (one more kernel over all B n d entries) when GROUP_ROW_COST · M < B · n_items (Video,
#: LastFM: yes; ML-100K: its ~0.5 M rows against 1.6 M client-items make the pass cheaper)
GROUP_ROW_COST = 6


@dataclass
class NextRoundPlan:
    """What :func:`block_next` reads while the end-of-round pass streams the tables: per client of the
    pass (caller's order) the next round's sign-bound coefficients and group weights, and per block
    which of its work it does (:func:`plan_next`)."""

    acc: TableStats            #: the next round's statistics, filled by the pass
    position: torch.Tensor     #: each client's position among the next round's participants (-1: none)
    U: torch.Tensor            #: the next round's sign bound
    V: torch.Tensor
    Q: torch.Tensor
    weights: torch.Tensor | None   #: ``[groups, B]`` group weights (``None``: the sums came from the rows)
    dots: torch.Tensor         #: ``[B, 2]`` ``(⟨C', D⟩, ⟨sign C', D⟩)``, filled by the pass
    amax: torch.Tensor         #: bound on ``max |D|``, exact where recomputed
    ref: torch.Tensor          #: the last exact ``max |D|``
    blocks: list[bool]         #: the block holds a next-round participant
    refresh: list[bool]        #: the block recomputes ``max |D|``
    n_cand: list[int]          #: columns of the sorted ``|C'|`` the block's sign screen reads


def next_context(model: FedRAPModel, c_sum: torch.Tensor, B: int, users: np.ndarray, final_scale: np.ndarray,
                 lam: float, mu: float) -> RoundContext | None:
    """The next round's :func:`~recrepro.papers.fedrap.lazy.start.round_context`, as the model's
    ``train_round`` will set it up.

    Its server table ``(Σ_i C_i / B)`` in float32 (this call's clients are all the round's
    participants), participants (``sample_clients`` on the stream of round ``a + 1``),
    ``(λ, μ)`` (the curriculum after this round's), learning rate (``× decay_rate``), sample
    counts (positives × (1 + negatives)) and lazy scales (``final_scale`` for ``users``).
    ``None`` without training data.  Checked again when that round starts.
    """
    cfg = model.config
    train = getattr(model, "train_csr", None)
    if train is None:
        return None
    a = model.round + 1
    nxt_users = sample_clients(model.n_users, cfg.client_ratio, np.random.default_rng([cfg.seed, 1, a]))
    lam_n, mu_n = cfg.weights(a, (lam, mu))
    counts = np.diff(train.indptr)[nxt_users] * (1 + cfg.num_negatives)
    C_next = (c_sum / B).to(torch.float32)
    scale = model.D_scale.numpy().copy()
    scale[users] = final_scale
    ctx = round_context(model, server_columns(C_next), nxt_users, counts, scale[nxt_users], lam_n, mu_n,
                        model.lr_args * cfg.decay_rate)
    ctx.C, ctx.round = C_next, a
    return ctx


def next_group_sums(model: FedRAPModel, users_p: np.ndarray, stats: RoundStatistics, nxt: RoundContext,
                    alpha_d0: torch.Tensor, coef: MapCoefficients, cols: ServerColumns,
                    rows: tuple[torch.Tensor, ...], entries: tuple[torch.Tensor, ...]) -> torch.Tensor | None:
    """The next round's group sums ``G_K = Σ_{i ∈ K} D_i`` of the tables this round leaves, without
    a kernel over them (float64 ``[groups, n d]``), or ``None`` where the pass must take them.

    When the next round has the same participants and schedule groups (always without client
    sampling: the sample counts do not change), ``Σ_{i ∈ K} D_T,i`` over the lazily mapped
    entries is ``Σ α_i D0_i + (Σ β_i) C0 + (Σ δ_i) s`` (``alpha_d0`` from
    :meth:`~recrepro.papers.fedrap.lazy.path.LazyPath.upload_d0_sums`), and the exact rows and
    entries add their difference to the map's value.  That costs a few operations on the
    ``[M, d]`` rows: done only if the rows are few against the tables (``GROUP_ROW_COST · M < B n``),
    else the pass adds ``scale_i · stored_i`` per block (one more kernel over the tables).
    ``users_p``: the clients (permuted order); ``rows``: ``(own, item, D exact, D0, C0)``,
    ``entries``: ``(own, pos, D exact, D0, C0)``.
    """
    ctx = stats.context
    if (GROUP_ROW_COST * rows[0].numel() >= users_p.size * model.n_items
            or not np.array_equal(np.sort(nxt.users), np.sort(users_p))
            or not np.array_equal(nxt.group_steps, ctx.group_steps)):
        return None
    dev, d, nd = model.device, model.config.dim, model.n_items * model.config.dim
    u_dev = torch.as_tensor(users_p, device=dev)
    grp = ctx.group[u_dev]
    if not torch.equal(grp, nxt.group[u_dev]):
        return None
    alpha, beta, delta = coef.alpha, coef.beta, coef.delta
    n_groups = alpha_d0.shape[0]
    grp_np = grp.cpu().numpy()
    sums = np.stack([np.bincount(grp_np, weights=beta, minlength=n_groups),
                     np.bincount(grp_np, weights=delta, minlength=n_groups)], 1)
    out = alpha_d0 + torch.mm(torch.as_tensor(sums, device=dev), cols.CS.double())
    corr = torch.zeros(n_groups * nd, device=dev)
    for (owner, index, exact, D0v, C0v), width in ((rows, d), (entries, 1)):
        if owner.numel() == 0:
            continue
        col = (lambda a: f32(a, dev)[owner][:, None]) if width == d else (lambda a: f32(a, dev)[owner])
        lazy = D0v * col(alpha)                            # the map's D_T = α D0 + β C0 + δ s
        lazy.addcmul_(C0v, col(beta)).addcmul_(torch.sign(C0v), col(delta))
        at = grp[owner] * (nd // width) + index
        (corr.view(-1, d) if width == d else corr).index_add_(0, at, torch.sub(exact, lazy, out=lazy))
    return out.add_(corr.view(n_groups, nd).double())


def plan_next(model: FedRAPModel, users: np.ndarray, starts: np.ndarray, nxt: RoundContext,
              norms: NextNorms) -> NextRoundPlan:
    """What :func:`block_next` reads, per client of ``users`` (caller's order) and per block
    (``starts``): the next round's sign-bound coefficients and group weights, the carried
    ``‖D‖²`` and ``max |D|`` bound (``norms``), which blocks hold a next-round participant,
    which recompute ``max |D|`` (bound above ``AMAX_SLACK`` × the last exact value) and how
    many columns of the sorted ``|C'|`` the sign screen reads (vectorised before the pass)."""
    dev = model.device
    cols = nxt.cols
    acc = new_table_stats(model, nxt)
    u_cpu, u_dev = torch.as_tensor(users), torch.as_tensor(users, device=dev)
    acc.sq[u_cpu] = torch.as_tensor(norms.sq)
    member = nxt.member[users]
    refresh = member & ~(norms.amax <= AMAX_SLACK * norms.ref)
    U, V, Q = nxt.U[u_dev], nxt.V[u_dev], nxt.Q[u_dev]
    amax = torch.as_tensor(norms.amax, device=dev)
    n_cand = np.zeros(starts.size, np.int64)
    if nxt.can_flip:
        # |D| ≤ amax: the columns with |C'| below (amax v + q)/u can fail the bound
        reach = ((amax.to(torch.float32) * V + Q) / U).cpu().numpy()
        block_reach = torch.as_tensor(np.maximum.reduceat(reach, starts), device=dev)
        n_cand = torch.searchsorted(sorted_abs(cols, block_reach.max())[0], block_reach,
                                    right=True).cpu().numpy()
    G = acc.G
    grp, gw = nxt.group[u_dev], nxt.gweight[u_dev]
    weights = (grp[None, :] == torch.arange(G.shape[0], device=dev)[:, None]).to(torch.float32) * gw
    if nxt.group_sums is not None:                     # the group sums are known (next_group_sums)
        acc.G, weights = nxt.group_sums, None
    return NextRoundPlan(acc=acc, position=nxt.position[u_dev], U=U, V=V, Q=Q, weights=weights,
                         dots=torch.zeros((users.size, 2), device=dev), amax=amax,
                         ref=torch.as_tensor(norms.ref, device=dev),
                         blocks=np.maximum.reduceat(member, starts).tolist(),
                         refresh=np.maximum.reduceat(refresh, starts).tolist(), n_cand=n_cand.tolist())


def block_next(model: FedRAPModel, flat: torch.Tensor, lo: int, hi: int, blk: int, nxt: RoundContext,
               plan: NextRoundPlan) -> None:
    """The next round's statistics of the finished block ``flat`` (clients ``lo:hi`` of the pass,
    stored units): ``(⟨C', D⟩, ⟨sign C', D⟩)``, the group sums ``G_K += scale · stored``, the
    entries that may change sign (as :func:`~recrepro.papers.fedrap.lazy.start.block_stats`) and,
    where the carried bound got loose, the exact ``max |D|``."""
    cols, G = nxt.cols, plan.acc.G
    plan.dots[lo:hi] = torch.mm(cols.CS, flat.T).T
    weights = plan.weights                             # None: the sums came from the rows
    if weights is not None and G.shape[0] == 1:
        G[0].addmv_(flat.T, weights[0, lo:hi])
    elif weights is not None and G.shape[0]:
        G.addmm_(weights[:, lo:hi], flat)
    if plan.refresh[blk]:
        top = torch.maximum(flat.amax(1), flat.amin(1).neg_()).double()
        plan.amax[lo:hi] = top
        plan.ref[lo:hi] = top
    n_cand = plan.n_cand[blk]
    if n_cand:
        cand = cols.abs_order[:n_cand]                 # (sorted by plan_next)
        sub = flat.index_select(1, cand)
        U, V, Q = plan.U[lo:hi], plan.V[lo:hi], plan.Q[lo:hi]
        lhs = torch.abs(sub).mul_(V[:, None]).add_(Q[:, None])
        hit = torch.nonzero((lhs >= cols.abs_sorted[:n_cand] * U[:, None]).view(-1)).squeeze(1)
        if hit.numel():
            rows = hit // n_cand
            add_risk(model, plan.acc, (plan.position[lo:hi][rows], cand[hit - rows * n_cand], sub.view(-1)[hit]))
