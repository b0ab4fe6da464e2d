"""The start-of-round statistics of FedRAP's lazy paper path: what a round needs of the private tables.

Before its local epochs a round needs, per participant, ``‖D‖²``, ``⟨C0, D⟩``, ``⟨sign C0, D⟩`` and a
bound on ``max |D|`` (the loss's closed form and the screens), the group sums ``G_K`` of the
uploads' lazy part, and the entries whose ``C`` may change sign during the round (replayed step by
step).  Usually the previous round's end-of-round pass took them
(:mod:`~recrepro.papers.fedrap.lazy.next_round`); otherwise :func:`stats_pass` reads the tables
once.  The bound on sign changes is derived in
:meth:`~recrepro.papers.fedrap.lazy.path.LazyPath.local_train`.
"""

from __future__ import annotations

import numpy as np
import torch

from recrepro.models.federated.clients import RowLayout
from recrepro.papers.fedrap.lazy.kernels import f32, sorted_abs
from recrepro.papers.fedrap.lazy.state import Entries, ReplayEntries, RoundContext, ServerColumns, SignBound, TableStats
from recrepro.papers.fedrap.lazy.steps import regulariser_schedule
from recrepro.papers.fedrap.training_path import FedRAPModel

__all__ = ["BLOCK_BYTES", "REPLAY_ENTRY_BYTES", "REPLAY_MIN_MB", "add_risk", "block_stats", "new_table_stats",
           "replay_cap", "replay_entries", "round_context", "sign_bound", "stats_pass"]

#: bytes of private tables per block of the streaming passes (a few clients; sized for the caches)
BLOCK_BYTES = 8 << 20
#: bytes a replayed entry costs at the peak of a round: the pass's list (client, position, value:
#: 20), its sorted copy and step tables (client, position, D0, C0, X, E: 32), the steps' temporaries
#: and the end-of-round values (~28). The replay may hold max(``memory_budget_mb``, ``REPLAY_MIN_MB``)
#: / this many entries (the floor: a budget small enough to put the tables on disk still replays)
REPLAY_ENTRY_BYTES = 80
REPLAY_MIN_MB = 256.0


def sign_bound(model: FedRAPModel, counts: np.ndarray, sc: np.ndarray, lam: float, mu: float,
               lr_args: float) -> SignBound:
    """The bound on sign changes, over each client's longest possible schedule.

    An entry of client i may change sign this round unless ``|C0| U_i > |stored D0| V_i + Q_i``
    (see :meth:`~recrepro.papers.fedrap.lazy.path.LazyPath.local_train`; ``counts`` the clients'
    samples, ``sc`` their lazy scales, ``lr_args`` the round's learning rate), in the order of
    ``counts``.
    """
    cfg = model.config
    B = counts.size
    K = cfg.local_epochs * (-(-counts // cfg.batch_size))             # most steps per client
    n_max = int(K.max()) if B else 0
    sched = regulariser_schedule(cfg, model.n_items, n_max, lam, mu, lr_args)
    can_flip = mu > 0 and n_max >= 2
    U = np.full(B, np.inf)
    V = np.zeros(B)
    Q = np.full(B, -1.0)                                              # -1: never at risk
    if can_flip:
        u = (sched.PX + sched.PE) / 2
        v = (sched.PE - sched.PX) / 2
        q = (sched.QX + sched.QE) / 2
        u_min = np.minimum.accumulate(u[1:])                          # over k = 1..K-1
        v_max, q_max = np.maximum.accumulate(v[1:]), np.maximum.accumulate(q[1:])
        multi_step = K >= 2
        last = np.maximum(K - 2, 0)
        # margins: the replayed/dense float32 values differ from exact ones by rounding
        U = np.where(multi_step, u_min[last] * (1 - 1e-5), np.inf)
        V = np.where(multi_step, v_max[last] * (1 + 1e-5) * sc, 0.0)
        Q = np.where(multi_step, q_max[last] * (1 + 1e-5) + 1e-6, -1.0)
    return SignBound(U, V, Q, can_flip)


def round_context(model: FedRAPModel, cols: ServerColumns, users: np.ndarray, counts: np.ndarray,
                  scale: np.ndarray, lam: float, mu: float, lr_args: float) -> RoundContext:
    """What the start-of-round statistics of a round depend on, and what they need.

    ``cols`` the round's server table, ``users`` its participants (``counts`` their samples,
    ``scale`` their lazy scales at its start), ``lam``, ``mu``, ``lr_args`` its weights and learning
    rate: the sign bound (:func:`sign_bound`), the schedule groups and the participants' positions,
    per user id (:class:`~recrepro.papers.fedrap.lazy.state.RoundContext`).
    """
    cfg, dev, n_users = model.config, model.device, model.n_users
    bound = sign_bound(model, counts, scale, lam, mu, lr_args)
    K = cfg.local_epochs * (-(-counts // cfg.batch_size))
    group_steps, group = np.unique(K, return_inverse=True)

    def per_user(values: np.ndarray, others: float) -> torch.Tensor:
        out = np.full(n_users, others)
        out[users] = values
        return f32(out, dev)

    grp = np.full(n_users, -1, np.int64)
    grp[users] = group
    member = np.zeros(n_users, bool)
    member[users] = True
    position = np.full(n_users, -1, np.int64)
    position[users] = np.arange(users.size)
    return RoundContext(cols=cols, users=users.copy(), counts=np.asarray(counts).copy(), scale=scale.copy(),
                        lam=lam, mu=mu, lr_args=lr_args, can_flip=bound.can_flip, U=per_user(bound.U, np.inf),
                        V=per_user(bound.V, 0.0), Q=per_user(bound.Q, -1.0), gweight=per_user(scale, 0.0),
                        group=torch.as_tensor(grp, device=dev), group_steps=group_steps, member=member,
                        position=torch.as_tensor(position, device=dev))


def new_table_stats(model: FedRAPModel, ctx: RoundContext) -> TableStats:
    """Empty start-of-round statistics for ``ctx``'s round (per user id, :class:`TableStats`)."""
    n_users, nd = model.n_users, model.n_items * model.config.dim
    return TableStats(sq=torch.zeros(n_users, dtype=torch.float64),
                      dots=torch.zeros((n_users, 2), dtype=torch.float64),
                      amax=torch.zeros(n_users, dtype=torch.float64), ref=torch.zeros(n_users, dtype=torch.float64),
                      G=torch.zeros((len(ctx.group_steps), nd), device=model.device))


def replay_cap(model: FedRAPModel) -> int:
    """The most entries the replay may hold: max(budget, ``REPLAY_MIN_MB``) / ``REPLAY_ENTRY_BYTES``."""
    return int(max(model.config.memory_budget_mb, REPLAY_MIN_MB) * 2**20 // REPLAY_ENTRY_BYTES)


def add_risk(model: FedRAPModel, acc: TableStats, part: Entries) -> None:
    """Append one block's entries at risk to ``acc``, or once they pass the memory budget drop
    them all and mark ``acc.overflow`` (the round then runs dense:
    :class:`~recrepro.papers.fedrap.lazy.path.ReplayTooLarge`)."""
    if acc.overflow:
        return
    acc.risk_n += int(part[0].numel())
    if acc.risk_n > replay_cap(model):
        acc.risk, acc.overflow = [], True
        return
    acc.risk.append(part)


def block_stats(model: FedRAPModel, flat: torch.Tensor, block_users: np.ndarray, ctx: RoundContext,
                acc: TableStats) -> None:
    """Start-of-round statistics of one block of stored tables ``flat`` ``[b, n d]`` (users
    ``block_users``), into ``acc``: per user ``‖D‖²``, ``(⟨C, D⟩, ⟨sign C, D⟩)`` and ``max |D|``
    (stored units), the entries that may change sign (``(client, position, stored D)``, the client
    as its position among the round's participants; -1: none), and the
    group sums ``G_K += scale_i · stored_i`` (true ``D``) of the round's participants.
    """
    dev = flat.device
    cols = ctx.cols
    u = torch.as_tensor(block_users)
    ud = u.to(dev)
    acc.sq[u] = torch.linalg.vector_norm(flat, dim=1).double().cpu() ** 2
    acc.dots[u] = torch.mm(cols.CS, flat.T).T.double().cpu()
    top = torch.maximum(flat.amax(1), flat.amin(1).neg_())  # (aminmax is ~15x slower here)
    acc.amax[u] = acc.ref[u] = top.double().cpu()
    grp, gw = ctx.group[ud], ctx.gweight[ud]
    G = acc.G
    if G.shape[0] == 1:
        G[0].addmv_(flat.T, gw * (grp == 0))
    elif G.shape[0]:
        onehot = (grp[None, :] == torch.arange(G.shape[0], device=dev)[:, None]).to(flat.dtype)
        G.addmm_(onehot.mul_(gw), flat)
    if ctx.can_flip:
        U, V, Q = ctx.U[ud], ctx.V[ud], ctx.Q[ud]
        # screen: only columns whose |C| is below the block's largest threshold can fail
        # the bound (|D| v + q ≥ |C| u); the exact test runs on those columns alone
        reach = ((top * V + Q) / U).max().reshape(1)
        abs_sorted, abs_order = sorted_abs(cols, reach)
        cand = abs_order[:int(torch.searchsorted(abs_sorted, reach, right=True))]
        if cand.numel():
            sub = flat.index_select(1, cand)
            lhs = torch.abs(sub).mul_(V[:, None]).add_(Q[:, None])
            risky = lhs >= cols.absC0f[cand] * U[:, None]
            rows, hit = torch.nonzero(risky, as_tuple=True)
            if rows.numel():
                add_risk(model, acc, (ctx.position[ud[rows]], cand[hit], sub[rows, hit]))


def stats_pass(model: FedRAPModel, users: np.ndarray, ctx: RoundContext, acc: TableStats | None = None) -> TableStats:
    """A read-only pass over the private tables of ``users`` taking their start-of-round
    statistics (:func:`block_stats`) in cache-sized blocks; returns ``acc``."""
    acc = new_table_stats(model, ctx) if acc is None else acc
    nd = model.n_items * model.config.dim
    for lo, hi, table in model.private_blocks(users, BLOCK_BYTES):
        block_stats(model, table.to(model.device).reshape(hi - lo, nd), users[lo:hi], ctx, acc)
    return acc


def replay_entries(model: FedRAPModel, acc: TableStats, users: np.ndarray, lay: RowLayout, scale_p: torch.Tensor,
                   cols: ServerColumns) -> ReplayEntries:
    """The entries to replay this round: those the bound flagged (``acc.risk``) outside the rows the
    clients sample, grouped by permuted client (``scale_p``: the clients' lazy scales, permuted)."""
    dev, d, n_items = model.device, model.config.dim, model.n_items
    B, cperm = users.size, lay.cperm
    if acc.risk:
        # the pass lists each entry's client as its position among the participants (caller's order)
        r_client, r_pos, r_val = (torch.cat(parts) for parts in zip(*acc.risk))
        in_order = r_client.numel() < 2 or not bool((r_client[1:] < r_client[:-1]).any())
        crank = np.empty(B, np.int64)
        crank[cperm] = np.arange(B)
        client = torch.as_tensor(crank, device=dev)[r_client.clamp(min=0)]   # permuted order
        # drop the entries of sampled rows (stepped as rows)
        touched = torch.zeros(B * n_items, dtype=torch.bool, device=dev)
        touched[torch.as_tensor(lay.r_owner * n_items + lay.r_item, device=dev)] = True
        keep = ~touched[client * n_items + r_pos // d] & (r_client >= 0)
        if in_order:
            # group by permuted client: in the caller's order both the single-batch clients and
            # the others are in permuted order, so a stable partition groups them (no sort)
            single = client < lay.B1
            order = torch.cat([torch.nonzero(keep & single).squeeze(1), torch.nonzero(keep & ~single).squeeze(1)])
        else:                                             # (the pass also read other clients' tables)
            order = torch.nonzero(keep).squeeze(1)
            order = order[torch.argsort(client[order], stable=True)]
        e_own, e_pos = client[order], r_pos[order]
        e_D0 = r_val[order] * scale_p.to(dev, torch.float32)[e_own]
    else:
        e_own = torch.zeros(0, dtype=torch.int64, device=dev)
        e_pos = torch.zeros(0, dtype=torch.int64, device=dev)
        e_D0 = torch.zeros(0, device=dev)
    e_crow = torch.as_tensor(np.concatenate([[0], np.cumsum(np.bincount(e_own.cpu().numpy(), minlength=B))]),
                             device=dev)
    return ReplayEntries(own=e_own, pos=e_pos, D0=e_D0, C0=cols.C0f.index_select(0, e_pos), crow=e_crow)
