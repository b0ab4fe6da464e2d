"""FedRAP's lazy paper path: the paper's full-matrix regularisers without dense per-step passes.

In paper mode with private tables (the default) the full-matrix regularisers touch every
entry of every client's ``D_i`` and ``C_i`` at every step, but between two BCE touches an
entry follows a per-client affine map as long as ``sign(C)`` is constant.  The sampled rows
train as in the row path (:mod:`recrepro.papers.fedrap.rows`), entries whose ``C`` may cross
zero are replayed step by step, all others get the composed map once per round; exact up to
float rounding, one read-modify-write streaming pass over the private tables per round
(:meth:`LazyPaperPath._local_train_lazy`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from recrepro.models.federated.clients import LocalEpochs, client_batches, row_layout
from recrepro.models.federated.simulation import check_finite_fast
from recrepro.papers.fedrap.config import L1_THRESHOLD
from recrepro.papers.fedrap.lazy_kernels import (
    _to_orig,
    _to_device,
    _f32,
    _lazy_value,
    _n_up,
    _server_columns,
    _sorted_abs,
    _lazy_sums,
    _lazy_next_norms,
    _lazy_writes,
)
from recrepro.papers.fedrap.lazy_next import LazyNextRound
from recrepro.papers.fedrap.lazy_steps import PaperModeSteps
from recrepro.records import check_finite

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

__all__ = ["LazyPaperPath", "ReplayTooLarge"]

#: bytes of private tables per block of the streaming passes (a few clients; sized for the caches)
BLOCK_BYTES = 8 << 20
#: bytes a replayed entry costs at the peak of a round: the pass's list (client, position, value:
#: 20), its sorted copy and step tables (client, position, D0, C0, X, E: 32), the steps' temporaries
#: and the end-of-round values (~28). The replay may hold max(``memory_budget_mb``, ``REPLAY_MIN_MB``)
#: / this many entries (the floor: a budget small enough to put the tables on disk still replays)
REPLAY_ENTRY_BYTES = 80
REPLAY_MIN_MB = 256.0


class ReplayTooLarge(RuntimeError):
    """The entries that may change sign this round exceed the memory budget (a strong L1 step, e.g.
    μ = 1 at a large ``lr_args`` on LastFM, puts nearly every entry of every client at risk): the
    round runs on the dense path, chunked under the budget, instead (exact as well)."""


class LazyPaperPath(LazyNextRound, PaperModeSteps):
    """The lazy paper path of :class:`~recrepro.papers.fedrap.fedrap.FederatedRecommender` (a
    mixin: it reads the model's ``config``, parameters, private tables and learning rates).
    """

    def round_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The simulation's round state plus the statistics the last pass took for the next round.

        They are part of what the next round computes from (their closed forms and a fresh
        start-of-round pass agree only to float rounding), so a run resumed from a checkpoint
        continues bit for bit as the uninterrupted one (``tests/test_resume.py``).
        """
        state, arrays = super().round_state()
        # the rounds after one whose replay passed the budget run dense: a resumed run as well
        state["replay_over_budget"] = bool(getattr(self, "_replay_over_budget", False))
        carried = getattr(self, "_lazy_next", None)
        if carried is not None and carried["D"] is self.D and carried["D_version"] == self.D._version:
            state["lazy_next"] = {"ctx": carried["ctx"], "acc": carried["acc"]}
        return state, arrays

    def load_round_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`round_state`: the carried statistics belong to the tables just loaded."""
        super().load_round_state(state)
        self._replay_over_budget = bool(state.get("replay_over_budget", False))
        carried = state.get("lazy_next")
        if carried is None or self.D is None:
            self._lazy_next = None
            return
        # a checkpoint loads on the CPU: back to the model's device, except the per-user sums (CPU)
        acc = {k: v if k in ("sq", "dots", "amax", "ref") else _to_device(v, self.device)
               for k, v in carried["acc"].items()}
        self._lazy_next = {"ctx": _to_device(carried["ctx"], self.device), "acc": acc, "D": self.D,
                           "D_version": self.D._version}

    def _lazy_schedule(self, n_steps: int, lam: float, mu: float,
                       lr_args: float | None = None) -> dict[str, np.ndarray]:
        """Composite regulariser map after ``k = 0..n_steps`` steps of a client (float64).

        Between BCE touches an entry of client i follows (``X = D + C``, ``E = D − C``,
        ``s = sign C``, ``lr_k`` the client's k-th learning rate, ``sh = 1 − lr·l2``,
        ``g = sh + 4 lr λ/(n d)``, ``ν = μ/(n d)``)::

            X ← sh X − lr ν s,      E ← g E + lr ν s

        so, while s is constant, ``X_k = PX_k X_0 − s QX_k`` and ``E_k = PE_k E_0 + s QE_k``.
        Returns ``PX, PE, QX, QE`` of length ``n_steps + 1`` for the learning-rate schedule
        ``lr_k = lr_args · batch_decay^k`` (as float32, like the steps themselves; ``lr_args``
        defaults to the model's current one).
        """
        cfg = self.config
        nd = float(self.n_items * cfg.dim)
        k = np.arange(n_steps)
        lr_args = self.lr_args if lr_args is None else lr_args
        lr = (lr_args * cfg.batch_decay ** k).astype(np.float32).astype(np.float64)
        sh = 1.0 - lr * cfg.l2
        g = sh + 4.0 * lr * lam / nd
        m = lr * mu / nd
        out = {name: np.empty(n_steps + 1) for name in ("PX", "PE", "QX", "QE")}
        px, pe, qx, qe = 1.0, 1.0, 0.0, 0.0
        for step in range(n_steps + 1):  # a loop over local steps (≤ local_epochs × batches), not entries
            out["PX"][step], out["PE"][step], out["QX"][step], out["QE"][step] = px, pe, qx, qe
            if step < n_steps:
                px, qx = sh[step] * px, sh[step] * qx + m[step]
                pe, qe = g[step] * pe, g[step] * qe + m[step]
        return out

    # Long on purpose: epochs and the pass share in-place row/entry tensors whose update order keeps it exact
    def _local_train_lazy(self, users: np.ndarray, owner: np.ndarray, item: np.ndarray, label: np.ndarray,
                          lam: float, mu: float, rng: np.random.Generator) -> dict[str, Any]:
        """Paper mode (full-matrix regularisers) without dense per-step passes; exact.

        Paper-mode gradients of client i at every local step (poster objective, normalised by
        ``n d`` = n_items·d; ``a_k = wt_k(σ(s_k) − r_k)/n_batch`` on the batch rows, 0 elsewhere)::

            ∂L/∂D = a w − 2λ(D − C)/(n d),   ∂L/∂C = a w + 2λ(D − C)/(n d) + μ sign(C)/(n d)

        i.e. with ``X = D + C``, ``E = D − C``, ``s = sign C``, ``sh = 1 − lr·l2``,
        ``g = sh + 4 lr λ/(n d)``, ``ν = μ/(n d)``::

            X ← sh X − 2 lr a w − lr ν s,      E ← g E + lr ν s.

        Three kinds of entries:

        * the **rows the client samples** this round (compact ``[M, d]`` tables as in the
          row path): stepped exactly, every step of the client, by :meth:`_paper_row_step`;
        * **entries that may change sign** (``C`` can cross zero during the round) in the
          other rows: found by a conservative bound and replayed step by step as a flat list
          (:meth:`_paper_entry_step`);
        * **all other entries**: ``a = 0`` and ``s`` constant, so the map is affine with
          per-client scalars (:meth:`_lazy_schedule`), applied once at the end of the round;
          their share of the loss (``−λ‖D − C‖²``, ``μ‖C‖₁``, needed by the early stop) is a
          closed form in per-client sums of the start-of-round tables.

        The sign bound: after k steps ``C_k = u_k C_0 − v_k D_0 − s q_k`` (``u = (PX+PE)/2``,
        ``v = (PE−PX)/2 ≥ 0``, ``q = (QX+QE)/2``), so ``s·C_k ≥ |C_0| u_k − |D_0| v_k − q_k``;
        an entry is replayed unless this is positive (with a margin for rounding) for every
        ``k < K_i``, ``K_i`` = the client's most steps this round (early stop only shortens).

        **One pass per round.**  The uploads' lazy part is ``Σ_i C_T,i = C0 Σα − s Σγ + Σ_i β_i D0_i``;
        ``β_i`` depends only on how many steps client i took, so ``Σ_i β_i D0_i`` comes from sums
        ``G_K = Σ_{i: K_i = K} D0_i`` per schedule length, formed when the tables were last streamed
        (clients that stopped early: ``(β_i − β_K) D0_i`` read from their own tables).  The next
        server table ``C' = Σ_i C_i / B`` is therefore known *before* the end-of-round pass, and that
        one read-modify-write pass (:meth:`_lazy_end_pass`) applies this round's map, writes the
        exact rows, counts the uploads' entries above the threshold and takes the *next* round's
        start-of-round statistics for the participants that round will sample
        (:meth:`_lazy_next_context`): ``⟨C', D⟩``, ``⟨sign C', D⟩`` and the entries the sign bound
        flags from the block; ``‖D‖²`` and a bound on ``max |D|`` in closed form from this round's
        sums (:func:`_lazy_next_norms`), and ``G_K`` from the rows (:meth:`_lazy_next_groups`) or,
        where that costs more, from the block.  They are used only if everything they depend on
        is unchanged when that round starts (:meth:`_lazy_cached_stats`); otherwise (the first
        round, a changed state) a separate start-of-round pass takes them (:meth:`_lazy_stats_pass`).

        Returns ``{"c_sum": Σ_i C_i (float64 [n_items, d]), "nnz": entries with |C_i| > 1e-4,
        "loss": [B], "lazy": what :meth:`dense_uploads` needs}``.
        """
        cfg, dev = self.config, self.device
        B, d, n_items = users.size, cfg.dim, self.n_items
        lay = row_layout(owner, item, label, B, n_items, cfg.batch_size)
        cperm = lay["cperm"]
        users_p = users[cperm]
        own_t = torch.as_tensor(lay["r_owner"], device=dev)
        item_t = torch.as_tensor(lay["r_item"], device=dev)
        users_t = torch.as_tensor(users_p, device=dev)
        w = self.w[users_t].clone()
        scale_p = self.D_scale[torch.as_tensor(users_p)].clone()          # float64, permuted order
        sc = scale_p.numpy()
        counts_o = _to_orig(lay["counts"], cperm)
        # start-of-round statistics: taken by the previous round's pass when still valid, else a pass now
        stats = self._lazy_cached_stats(users, counts_o, lam, mu)
        if stats is None:
            cols = _server_columns(self.C)
            ctx = self._lazy_context(cols, users, counts_o, _to_orig(sc, cperm), lam, mu, self.lr_args)
            stats = {"ctx": ctx, "acc": self._lazy_stats_pass(users, ctx)}
        if stats["acc"].get("overflow"):
            # nothing is written yet this round (and no random draw made): the caller reruns it dense
            raise ReplayTooLarge(f"round {self.round}: {stats['acc']['risk_n']:,} or more entries may change sign, "
                                 f"over the {self._replay_cap():,} the memory budget allows")
        cols = stats["ctx"]["cols"]                                       # of a table equal to self.C
        C0 = cols["C0"]
        u_cpu = torch.as_tensor(users)
        sq, dots, amax, amax_ref = (stats["acc"][k][u_cpu] for k in ("sq", "dots", "amax", "ref"))
        store_idx = torch.as_tensor(users_p[lay["r_owner"]] * n_items + lay["r_item"])
        Dr0 = self._private_rows(store_idx).to(dev)
        Dr0.mul_(scale_p.to(dev, torch.float32)[own_t][:, None])
        Cr0 = C0.index_select(0, item_t)
        X, E = Dr0 + Cr0, Dr0 - Cr0

        ent = self._lazy_entries(stats["acc"], users, lay, scale_p, cols)
        e_own, e_pos, e_D0, e_C0 = ent["own"], ent["pos"], ent["D0"], ent["C0"]
        Xe, Ee = e_D0 + e_C0, e_D0 - e_C0
        sums = _lazy_sums(cperm, sc, sq, dots, cols, ((own_t, Dr0, Cr0, item_t), (e_own, e_D0, e_C0, None)))
        rows = {"X": X, "E": E, "own": own_t, "lab": torch.as_tensor(lay["r_label"], device=dev),
                "crow": torch.as_tensor(np.concatenate([[0], np.cumsum(lay["rows_per"])]), device=dev)}
        maps, prev_mean, steps = self._lazy_epochs(lay, w, rows, {"X": Xe, "E": Ee, "own": e_own, "crow": ent["crow"]},
                                                   sums, owner.size, lam, mu, rng)

        # ---- end of round: the uploads' sum first (the next server table), then the one pass
        PX, PE, QX, QE = maps["PX"], maps["PE"], maps["QX"], maps["QE"]
        alpha, beta = (PX + PE) / 2, (PX - PE) / 2            # C_T = α C0 + β D0 − γ s
        gamma, delta = (QX + QE) / 2, (QE - QX) / 2           # D_T = α D0 + β C0 + δ s
        new_scale = sc * alpha
        Cr = torch.sub(X, E).mul_(0.5)
        Dr = X.add_(E).mul_(0.5)
        Ce, De = torch.sub(Xe, Ee).mul_(0.5), Xe.add_(Ee).mul_(0.5)
        del E, Ee
        check_finite_fast("client item rows", Cr, f"round {self.round}")

        beta_d0, alpha_d0 = self._lazy_beta_d0(users, _to_orig(alpha, cperm), _to_orig(beta, cperm),
                                               _to_orig(steps, cperm), _to_orig(sc, cperm), stats)
        c_sum = (C0.double() * alpha.sum() - cols["S0"].double() * gamma.sum()).add_(beta_d0.view(n_items, d))
        # the exact values of the rows and replayed entries replace the lazy map's
        lazy_r = _lazy_value((alpha, beta, gamma), own_t, Cr0, Dr0)
        c_sum.index_add_(0, item_t, (Cr - lazy_r).double())
        nnz_exact = _n_up(Cr) - _n_up(lazy_r)
        if Ce.numel():
            lazy_e = _lazy_value((alpha, beta, gamma), e_own, e_C0, e_D0)
            c_sum.view(-1).index_add_(0, e_pos, (Ce - lazy_e).double())
            nnz_exact += _n_up(Ce) - _n_up(lazy_e)

        # scales that drift far from 1 are folded into the stored tables by the pass
        drift = (new_scale < 1e-3) | (new_scale > 1e3)
        final_scale = np.where(drift, 1.0, new_scale)
        coef = (alpha, beta, gamma, delta, new_scale)
        nxt = self._lazy_next_context(c_sum, B, users, _to_orig(final_scale, cperm), lam, mu)
        if nxt is not None:
            nxt["G"] = self._lazy_next_groups(users_p, stats, nxt, alpha_d0, coef, cols,
                                              (own_t, item_t, Dr, Dr0, Cr0), (e_own, e_pos, De, e_D0, e_C0))
        ns = _f32(new_scale, dev)
        writes = _lazy_writes(cperm, (own_t, item_t, Dr.div_(ns[own_t][:, None])),
                              (e_own, e_pos, De.div_(ns[e_own])), B)
        norms = (_lazy_next_norms(cperm, sums, coef, (amax.numpy(), amax_ref.numpy()), writes, cols,
                                  _to_orig(np.where(drift, new_scale, 1.0), cperm))
                 if nxt is not None else None)
        nnz, nxt_acc = self._lazy_end_pass(users, cperm, sc, amax, cols, coef, writes, _to_orig(drift, cperm),
                                           nxt, norms)
        nnz += nnz_exact
        self.D_scale[torch.as_tensor(users_p)] = torch.as_tensor(final_scale)
        # the next round's statistics, valid while D (its version counter), C, D_scale, ... are unchanged
        self._lazy_next = (None if nxt is None
                           else {"ctx": nxt, "acc": nxt_acc, "D": self.D, "D_version": self.D._version})
        self.w[users_t] = w
        loss_out = np.empty(B)
        loss_out[cperm] = np.nan_to_num(prev_mean)
        orig = torch.as_tensor(cperm, device=dev)
        return {"c_sum": c_sum, "nnz": nnz, "loss": torch.as_tensor(loss_out),
                "lazy": {"users": users, "C0": C0, "alpha": _to_orig(alpha, cperm), "beta": _to_orig(beta, cperm),
                         "gamma": _to_orig(gamma, cperm), "delta": _to_orig(delta, cperm),
                         "rows": (orig[own_t], item_t, Cr), "entries": (orig[e_own], e_pos, Ce)}}

    def _lazy_sign_bound(self, counts: np.ndarray, sc: np.ndarray, lam: float, mu: float,
                         lr_args: float | None = None) -> dict[str, Any]:
        """The bound on sign changes, over each client's longest possible schedule.

        An entry of client i may change sign this round unless ``|C0| U_i > |stored D0| V_i + Q_i``
        (see :meth:`_local_train_lazy`; ``counts`` the clients' samples, ``sc`` their lazy scales,
        ``lr_args`` the round's learning rate, default the current one).  Returns ``{"U", "V", "Q",
        "can_flip"}`` in the order of ``counts`` (``can_flip`` false: no entry can, ``μ = 0`` or
        fewer than two steps).
        """
        cfg = self.config
        B = counts.size
        K = cfg.local_epochs * (-(-counts // cfg.batch_size))             # most steps per client
        n_max = int(K.max()) if B else 0
        sched = self._lazy_schedule(n_max, lam, mu, lr_args)
        can_flip = mu > 0 and n_max >= 2
        U = np.full(B, np.inf)
        V = np.zeros(B)
        Q = np.full(B, -1.0)                                              # -1: never at risk
        if can_flip:
            u = (sched["PX"] + sched["PE"]) / 2
            v = (sched["PE"] - sched["PX"]) / 2
            q = (sched["QX"] + sched["QE"]) / 2
            u_min = np.minimum.accumulate(u[1:])                          # over k = 1..K-1
            v_max, q_max = np.maximum.accumulate(v[1:]), np.maximum.accumulate(q[1:])
            multi_step = K >= 2
            last = np.maximum(K - 2, 0)
            # margins: the replayed/dense float32 values differ from exact ones by rounding
            U = np.where(multi_step, u_min[last] * (1 - 1e-5), np.inf)
            V = np.where(multi_step, v_max[last] * (1 + 1e-5) * sc, 0.0)
            Q = np.where(multi_step, q_max[last] * (1 + 1e-5) + 1e-6, -1.0)
        return {"U": U, "V": V, "Q": Q, "can_flip": can_flip}

    def _lazy_context(self, cols: dict[str, Any], users: np.ndarray, counts: np.ndarray, scale: np.ndarray,
                      lam: float, mu: float, lr_args: float) -> dict[str, Any]:
        """What the start-of-round statistics of a round depend on, and what they need.

        ``cols`` the round's server table (:func:`_server_columns`), ``users`` its participants
        (``counts`` their samples, ``scale`` their lazy scales at its start), ``lam``, ``mu``,
        ``lr_args`` its weights and learning rate.  Per-user arrays (indexed by user id; others
        never at risk, in no group): the sign bound ``U``, ``V``, ``Q`` (:meth:`_lazy_sign_bound`),
        the schedule group (index into ``group_steps``, the distinct ``K_i`` = local epochs ×
        batches) and its weight (the lazy scale: the group sums are of true ``D0``), the position
        among ``users`` (-1: not a participant).
        """
        cfg, dev, n_users = self.config, self.device, self.n_users
        bound = self._lazy_sign_bound(counts, scale, lam, mu, lr_args)
        K = cfg.local_epochs * (-(-counts // cfg.batch_size))
        group_steps, group = np.unique(K, return_inverse=True)
        per_user = {"U": np.full(n_users, np.inf), "V": np.zeros(n_users), "Q": np.full(n_users, -1.0),
                    "gweight": np.zeros(n_users)}
        for name in ("U", "V", "Q"):
            per_user[name][users] = bound[name]
        per_user["gweight"][users] = scale
        grp = np.full(n_users, -1, np.int64)
        grp[users] = group
        member = np.zeros(n_users, bool)
        member[users] = True
        position = np.full(n_users, -1, np.int64)
        position[users] = np.arange(users.size)
        return {"cols": cols, "users": users.copy(), "counts": np.asarray(counts).copy(), "scale": scale.copy(),
                "lam": lam, "mu": mu, "lr_args": lr_args, "can_flip": bound["can_flip"],
                **{k: _f32(v, dev) for k, v in per_user.items()},
                "group": torch.as_tensor(grp, device=dev), "group_steps": group_steps, "member": member,
                "position": torch.as_tensor(position, device=dev)}

    def _lazy_new_acc(self, ctx: dict[str, Any]) -> dict[str, Any]:
        """Empty start-of-round statistics (per user id; see :meth:`_lazy_block_stats`; ``ref``: the
        last exact ``max |D|``, against which the carried bound is checked)."""
        n_users, nd = self.n_users, self.n_items * self.config.dim
        return {"sq": torch.zeros(n_users, dtype=torch.float64), "dots": torch.zeros((n_users, 2), dtype=torch.float64),
                "amax": torch.zeros(n_users, dtype=torch.float64), "ref": torch.zeros(n_users, dtype=torch.float64),
                "risk": [], "G": torch.zeros((len(ctx["group_steps"]), nd), device=self.device),
                "risk_n": 0, "overflow": False}

    def _replay_cap(self) -> int:
        """The most entries the replay may hold: max(budget, ``REPLAY_MIN_MB``) / ``REPLAY_ENTRY_BYTES``."""
        return int(max(self.config.memory_budget_mb, REPLAY_MIN_MB) * 2**20 // REPLAY_ENTRY_BYTES)

    def _lazy_add_risk(self, acc: dict[str, Any], part: tuple[torch.Tensor, ...]) -> None:
        """Append one block's entries at risk to ``acc``, or once they pass the memory budget drop
        them all and mark ``acc["overflow"]`` (the round then runs dense: :class:`ReplayTooLarge`)."""
        if acc["overflow"]:
            return
        acc["risk_n"] += int(part[0].numel())
        if acc["risk_n"] > self._replay_cap():
            acc["risk"], acc["overflow"] = [], True
            return
        acc["risk"].append(part)

    def _lazy_block_stats(self, flat: torch.Tensor, block_users: np.ndarray, ctx: dict[str, Any],
                          acc: dict[str, Any]) -> None:
        """Start-of-round statistics of one block of stored tables ``flat`` ``[b, n d]`` (users
        ``block_users``), into ``acc``: per user ``‖D‖²``, ``(⟨C, D⟩, ⟨sign C, D⟩)`` and ``max |D|``
        (stored units), the entries that may change sign (``(client, position, stored D)``, the client
        as its position among the round's participants; -1: none), and the
        group sums ``G_K += scale_i · stored_i`` (true ``D``) of the round's participants.
        """
        dev = flat.device
        cols = ctx["cols"]
        u = torch.as_tensor(block_users)
        ud = u.to(dev)
        acc["sq"][u] = torch.linalg.vector_norm(flat, dim=1).double().cpu() ** 2
        acc["dots"][u] = torch.mm(cols["CS"], flat.T).T.double().cpu()
        top = torch.maximum(flat.amax(1), flat.amin(1).neg_())  # (aminmax is ~15x slower here)
        acc["amax"][u] = acc["ref"][u] = top.double().cpu()
        grp, gw = ctx["group"][ud], ctx["gweight"][ud]
        G = acc["G"]
        if G.shape[0] == 1:
            G[0].addmv_(flat.T, gw * (grp == 0))
        elif G.shape[0]:
            onehot = (grp[None, :] == torch.arange(G.shape[0], device=dev)[:, None]).to(flat.dtype)
            G.addmm_(onehot.mul_(gw), flat)
        if ctx["can_flip"]:
            U, V, Q = ctx["U"][ud], ctx["V"][ud], ctx["Q"][ud]
            # screen: only columns whose |C| is below the block's largest threshold can fail
            # the bound (|D| v + q ≥ |C| u); the exact test runs on those columns alone
            reach = ((top * V + Q) / U).max().reshape(1)
            abs_sorted, abs_order = _sorted_abs(cols, reach)
            cand = abs_order[:int(torch.searchsorted(abs_sorted, reach, right=True))]
            if cand.numel():
                sub = flat.index_select(1, cand)
                lhs = torch.abs(sub).mul_(V[:, None]).add_(Q[:, None])
                risky = lhs >= cols["absC0f"][cand] * U[:, None]
                rows, hit = torch.nonzero(risky, as_tuple=True)
                if rows.numel():
                    self._lazy_add_risk(acc, (ctx["position"][ud[rows]], cand[hit], sub[rows, hit]))

    def _lazy_stats_pass(self, users: np.ndarray, ctx: dict[str, Any],
                         acc: dict[str, Any] | None = None) -> dict[str, Any]:
        """A read-only pass over the private tables of ``users`` taking their start-of-round
        statistics (:meth:`_lazy_block_stats`) in cache-sized blocks; returns ``acc``."""
        acc = self._lazy_new_acc(ctx) if acc is None else acc
        nd = self.n_items * self.config.dim
        for lo, hi, table in self._private_blocks(users, BLOCK_BYTES):
            self._lazy_block_stats(table.to(self.device).reshape(hi - lo, nd), users[lo:hi], ctx, acc)
        return acc

    def _lazy_cached_stats(self, users: np.ndarray, counts: np.ndarray, lam: float,
                           mu: float) -> dict[str, Any] | None:
        """The statistics the previous round's pass took for this round, if still valid.

        Valid when this is the round they were taken for, with the same participants (and sample
        counts), weights, learning rate, server table (bit for bit) and lazy scales, and the
        private tables have not been written since (same tensor, same version counter); else
        ``None`` (and a start-of-round pass takes them).  Used once.
        """
        cache, self._lazy_next = getattr(self, "_lazy_next", None), None
        if cache is None:
            return None
        ctx = cache["ctx"]
        valid = (ctx["round"] == self.round and cache["D"] is self.D and cache["D_version"] == self.D._version
                 and ctx["lam"] == lam and ctx["mu"] == mu and ctx["lr_args"] == self.lr_args
                 and np.array_equal(ctx["users"], users) and np.array_equal(ctx["counts"], counts)
                 and np.array_equal(ctx["scale"], self.D_scale[torch.as_tensor(users)].numpy())
                 and ctx["C"].shape == self.C.shape and ctx["C"].device == self.C.device
                 and bool(torch.equal(ctx["C"], self.C)))
        return {"ctx": ctx, "acc": cache["acc"]} if valid else None

    def _lazy_entries(self, acc: dict[str, Any], users: np.ndarray, lay: dict[str, Any], scale_p: torch.Tensor,
                      cols: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The entries to replay this round: those the bound flagged (``acc["risk"]``) outside the
        rows the clients sample, grouped by permuted client: ``{"own", "pos", "D0", "C0", "crow"}``."""
        dev, d = self.device, self.config.dim
        B, cperm = users.size, lay["cperm"]
        if acc["risk"]:
            # the pass lists each entry's client as its position among the participants (caller's order)
            r_client, r_pos, r_val = (torch.cat(parts) for parts in zip(*acc["risk"]))
            in_order = r_client.numel() < 2 or not bool((r_client[1:] < r_client[:-1]).any())
            crank = np.empty(B, np.int64)
            crank[cperm] = np.arange(B)
            client = torch.as_tensor(crank, device=dev)[r_client.clamp(min=0)]   # permuted order
            # drop the entries of sampled rows (stepped as rows)
            touched = torch.zeros(B * self.n_items, dtype=torch.bool, device=dev)
            touched[torch.as_tensor(lay["r_owner"] * self.n_items + lay["r_item"], device=dev)] = True
            keep = ~touched[client * self.n_items + r_pos // d] & (r_client >= 0)
            if in_order:
                # group by permuted client: in the caller's order both the single-batch clients and
                # the others are in permuted order, so a stable partition groups them (no sort)
                single = client < lay["B1"]
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
        return {"own": e_own, "pos": e_pos, "D0": e_D0, "C0": cols["C0f"].index_select(0, e_pos), "crow": e_crow}

    def _lazy_beta_d0(self, users: np.ndarray, alpha: np.ndarray, beta: np.ndarray, steps: np.ndarray,
                      sc: np.ndarray, stats: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """``Σ_i β_i D0_i`` (float64, flat ``[n d]``) over the clients ``users`` and ``Σ_{i ∈ K} α_i D0_i``
        per schedule group (float64 ``[groups, n d]``; caller's order: ``alpha``, ``beta``, the
        ``steps`` each took, lazy scales ``sc``).

        ``α_i``, ``β_i`` are functions of the number of steps alone (every client's k-th step has the
        same learning rate), so with ``(α_K, β_K)`` those of the clients of schedule group ``K`` that
        ran all ``K`` steps (the most common value: exact whatever it is) the sums are
        ``Σ_K β_K G_K + Σ_i (β_i − β_K(i)) D0_i`` and ``α_K G_K + Σ_{i ∈ K} (α_i − α_K) D0_i``; the
        second sums run over the clients that stopped early (none, usually) and read their tables.
        """
        ctx, acc = stats["ctx"], stats["acc"]
        dev, nd = self.device, self.n_items * self.config.dim
        grp = ctx["group"][torch.as_tensor(users, device=dev)].cpu().numpy()
        n_groups = len(ctx["group_steps"])
        ref_a, ref_b = np.ones(n_groups), np.zeros(n_groups)
        for g, k in enumerate(ctx["group_steps"]):  # a loop over schedule lengths (a few), not clients
            full = (grp == g) & (steps == k)
            if full.any():
                pairs, n = np.unique(np.stack([alpha[full], beta[full]], 1), axis=0, return_counts=True)
                ref_a[g], ref_b[g] = pairs[np.argmax(n)]
        G = acc["G"].double()
        beta_sum = (torch.as_tensor(ref_b, device=dev)[:, None] * G).sum(0)
        alpha_g = torch.as_tensor(ref_a, device=dev)[:, None] * G
        odd = np.flatnonzero((beta != ref_b[grp]) | (alpha != ref_a[grp]))
        if odd.size:
            # row 0: (β_i − β_K) scale_i, row 1 + K: (α_i − α_K) scale_i of the clients in group K
            coef = np.zeros((1 + n_groups, odd.size))
            coef[0] = (beta - ref_b[grp])[odd] * sc[odd]
            coef[1 + grp[odd], np.arange(odd.size)] = (alpha - ref_a[grp])[odd] * sc[odd]
            coef = _f32(coef, dev)
            corr = torch.zeros((1 + n_groups, nd), device=dev)
            for lo, hi, table in self._lazy_read_blocks(users[odd]):
                corr.addmm_(coef[:, lo:hi], table.to(dev).reshape(hi - lo, nd))
            beta_sum += corr[0].double()
            alpha_g += corr[1:].double()
        return beta_sum, alpha_g

    def _lazy_read_blocks(self, users: np.ndarray, block_bytes: int = BLOCK_BYTES):
        """Yield ``(lo, hi, stored tables of users[lo:hi])`` as copies, read-only, in blocks (the
        pages of a disk-backed table are released after each)."""
        step = max(1, block_bytes // (self.n_items * self.config.dim * 4))
        for lo in range(0, users.size, step):
            hi = min(users.size, lo + step)
            yield lo, hi, self.D[torch.as_tensor(users[lo:hi])]
            self._drop_private_pages()

    def _lazy_epochs(self, lay: dict[str, Any], w: torch.Tensor, rows: dict[str, torch.Tensor],
                     ents: dict[str, torch.Tensor], sums: dict[str, np.ndarray], n_samples: int, lam: float,
                     mu: float, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The local epochs (as the row path; every step also maps the client's non-batch rows).

        Steps the sampled rows (``rows``: ``X``, ``E``, ``own``, ``lab``, ``crow``) and the
        replayed entries (``ents``: ``X``, ``E``, ``own``, ``crow``) in place, and the per-client
        affine map of the other entries.  Returns the map (``PX, PE, QX, QE``, permuted order),
        each client's last mean local loss (NaN: no batch) and the number of steps it took.
        """
        cfg, dev = self.config, self.device
        bs, nd = cfg.batch_size, self.n_items * cfg.dim
        counts, M, B1, M1 = lay["counts"], lay["M"], lay["B1"], lay["M1"]
        s_row, s_owner, r_mult = lay["s_row"], lay["s_owner"], lay["r_mult"]
        X, E, own_t, lab_t, crow = rows["X"], rows["E"], rows["own"], rows["lab"], rows["crow"]
        Xe, Ee, e_own, e_crow = ents["X"], ents["E"], ents["own"], ents["crow"]
        B = counts.size
        PX, PE, QX, QE = np.ones(B), np.ones(B), np.zeros(B), np.zeros(B)
        bufs = {"wf": torch.empty_like(X), "t": torch.empty_like(X), "s": torch.empty_like(X)}
        schedule = LocalEpochs(counts, bs, cfg.local_epochs, cfg.tol, cfg.batch_decay)
        for epoch in schedule.epochs():
            batch_of = np.empty(n_samples, np.int64)
            batch_of[lay["s_sorted"]] = client_batches(lay["s_owner_sorted"], counts, bs, rng)
            for t, n_t, step_on in schedule.steps():
                lo, c0 = (0, 0) if t == 0 else (M1, B1)   # later batches: big clients only (the tail)
                el = int(e_crow[c0])
                mask = (batch_of == t) & step_on[s_owner]
                wt = r_mult if mask.all() else np.bincount(s_row[mask], minlength=M).astype(np.float32)
                n_c = np.where(step_on, n_t, 0)[c0:]
                lr_scale = torch.as_tensor(schedule.lr_scale(step_on)[c0:], device=dev)
                lr_arg = (self.lr_args * lr_scale).to(torch.float32)
                sl = slice(lo, M)
                bce, e2, l1 = self._paper_row_step(
                    w[c0:], X[sl], E[sl], own_t[sl] - c0, lab_t[sl], torch.as_tensor(wt[lo:], device=dev),
                    torch.as_tensor(n_c, dtype=torch.float32, device=dev), crow[c0:] - lo, lam, mu,
                    lr_scale, lr_arg, {k: v[:M - lo] for k, v in bufs.items()})
                e2, l1 = e2.double().cpu().numpy(), l1.double().cpu().numpy()
                if Xe.numel() > el:
                    re2, rl1 = self._paper_entry_step(Xe[el:], Ee[el:], e_own[el:] - c0, e_crow[c0:] - el,
                                                      lam, mu, lr_arg)
                    e2, l1 = e2 + re2.double().cpu().numpy(), l1 + rl1.double().cpu().numpy()
                # lazily mapped entries: their sums at the pre-step values, then advance the map
                cs = slice(c0, B)
                e2 += (PE[cs] ** 2 * sums["E2"][cs] + 2 * PE[cs] * QE[cs] * sums["sE"][cs]
                       + QE[cs] ** 2 * sums["n"][cs])
                l1 += (PX[cs] * sums["sX"][cs] - PE[cs] * sums["sE"][cs] - (QX[cs] + QE[cs]) * sums["n"][cs]) / 2
                lr64 = lr_arg.double().cpu().numpy()
                sh = 1.0 - lr64 * cfg.l2
                g = sh + 4.0 * lr64 * lam / nd
                m = lr64 * mu / nd
                PX[cs], QX[cs] = sh * PX[cs], sh * QX[cs] + m
                PE[cs], QE[cs] = g * PE[cs], g * QE[cs] + m
                batch_loss = bce.double().cpu().numpy() - lam * e2 / nd + mu * l1 / nd
                schedule.record(step_on, batch_loss, n_c, c0)
            check_finite("client parameters", w, f"round {self.round} local epoch {epoch}")
            check_finite("client losses", schedule.loss_acc, f"round {self.round} local epoch {epoch}")
        del bufs
        return {"PX": PX, "PE": PE, "QX": QX, "QE": QE}, schedule.prev_mean, schedule.steps_done.copy()


    # Long on purpose: one read-modify-write pass does this round's end and the next round's start per block
    def _lazy_end_pass(self, users: np.ndarray, cperm: np.ndarray, sc: np.ndarray, amax: torch.Tensor,
                       cols: dict[str, Any], coef: tuple[np.ndarray, ...], writes: dict[str, Any],
                       drift: np.ndarray, nxt: dict[str, Any] | None,
                       norms: dict[str, np.ndarray] | None) -> tuple[int, dict[str, Any] | None]:
        """The end-of-round pass over the private tables: the lazy map on every stored entry, the
        exact rows and entries over it, and the next round's start-of-round statistics.

        ``coef`` = ``(α, β, γ, δ, new scale)`` per client (permuted order): ``C_T = α C0 + β D0 − γ s``,
        ``D_T = α D0 + β C0 + δ s``; ``amax`` (caller's order, stored units) bounds ``max |D0|``.
        Per block of clients: counts the uploads' entries above the threshold (lazily mapped values
        of every entry; the caller corrects for the exact ones), writes
        ``stored' = stored + (β C0 + δ s)/(α scale)``, then the exact rows and replayed entries
        (``writes``, :func:`_lazy_writes`, stored units), and folds the scale of the clients in
        ``drift`` (caller's order) into their tables.  With ``nxt`` (:meth:`_lazy_next_context`)
        it then takes the next round's statistics of the finished block: ``⟨C', D⟩``,
        ``⟨sign C', D⟩``, the group sums (unless :meth:`_lazy_next_groups` gave them) and the
        entries that may change sign (:meth:`_lazy_block_next`); ``‖D‖²`` and the bound on ``max |D|`` come from ``norms``
        (:func:`_lazy_next_norms`, no kernel over the block).  The next round's participants
        outside ``users`` get a read-only pass after (:meth:`_lazy_stats_pass`).  Returns the count
        and the statistics (``None`` without ``nxt``).
        """
        dev, n_items, d = self.device, self.n_items, self.config.dim
        nd = n_items * d
        B = users.size
        alpha, beta, gamma, delta, new_scale = coef
        CS, n_zero, n_all = cols["CS"], cols["n_zero"], cols["absC0f"].numel()
        alpha_o, gamma_o = _to_orig(alpha, cperm), _to_orig(gamma, cperm)
        beta_st = _f32(_to_orig(beta * sc, cperm), dev)       # β D0 = (β·scale) stored
        up_coef = _f32(np.stack([alpha_o, -gamma_o], 1), dev)
        d_coef = _f32(_to_orig(np.stack([beta, delta], 1) / new_scale[:, None], cperm), dev)
        ns_o = _f32(_to_orig(new_scale, cperm), dev)
        step = max(1, BLOCK_BYTES // (nd * 4))                # the blocks of _private_blocks
        starts = np.arange(0, B, step)
        # entries with |C_i| > 1e-4 among the lazily mapped uploads C = s(α|C0| − γ) + β D0: certain
        # from |C0| alone unless |α|C0| − γ| is within |β|·max|D0| of the threshold (then exact);
        # the band of |C0| to evaluate, per block (vectorised: few small ops inside the loop)
        thr = L1_THRESHOLD
        reach = np.abs(_to_orig(beta, cperm)) * _to_orig(sc, cperm) * amax.numpy()
        band = np.stack([np.minimum.reduceat((gamma_o - thr - reach) / alpha_o, starts) * (1 - 1e-6) - 1e-12,
                         np.maximum.reduceat((gamma_o + thr + reach) / alpha_o, starts) * (1 + 1e-6) + 1e-12], 1)
        hi_cut = (gamma_o + thr) / alpha_o
        abs_sorted, abs_order = _sorted_abs(cols, max(hi_cut.max(initial=0.0), band[:, 1].max(initial=0.0)))
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
        (r_cl, _, r_val, r_ptr), (e_cl, _, e_val, e_ptr) = writes["rows"], writes["entries"]
        r_loc = (r_cl % step) * n_items + writes["rows"][1]
        e_loc = (e_cl % step) * nd + writes["entries"][1]
        nxt_prep = self._lazy_next_prep(users, starts, nxt, norms) if nxt is not None else None
        for blk, (lo, hi, table) in enumerate(self._private_blocks(users, BLOCK_BYTES)):   # end-of-round pass
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
            if r_ptr[hi] > r_ptr[lo]:
                flat.view(-1, d).index_copy_(0, r_loc[r_ptr[lo]:r_ptr[hi]], r_val[r_ptr[lo]:r_ptr[hi]])
            if e_ptr[hi] > e_ptr[lo]:
                flat.view(-1).index_copy_(0, e_loc[e_ptr[lo]:e_ptr[hi]], e_val[e_ptr[lo]:e_ptr[hi]])
            fold = np.flatnonzero(drift[lo:hi])
            if fold.size:                                     # true = scale · stored: the scale becomes 1
                f = torch.as_tensor(fold, device=dev)
                flat[f] = flat[f] * ns_o[lo + f][:, None]
            if nxt_prep is not None and nxt_prep["blocks"][blk]:
                self._lazy_block_next(flat, lo, hi, blk, nxt, nxt_prep)
            if flat.data_ptr() != table.data_ptr():           # a table on another device
                table.copy_(flat.view_as(table))
        if nxt is None:
            return nnz, None
        acc = nxt_prep["acc"]
        u_cpu = torch.as_tensor(users)
        acc["dots"][u_cpu] = nxt_prep["dots"].double().cpu()
        acc["amax"][u_cpu] = nxt_prep["amax"].cpu()
        acc["ref"][u_cpu] = nxt_prep["ref"].cpu()
        rest = np.setdiff1d(nxt["users"], users)              # next round's participants not in this one
        if rest.size:
            self._lazy_stats_pass(rest, nxt, acc)
        return nnz, acc
