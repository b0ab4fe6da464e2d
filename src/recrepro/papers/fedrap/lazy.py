"""FedRAP's lazy paper path: the paper's full-matrix regularisers without dense per-step passes.

In paper mode with private tables (the default) the full-matrix regularisers touch every
entry of every client's ``D_i`` and ``C_i`` at every step, but between two BCE touches an
entry follows a per-client affine map as long as ``sign(C)`` is constant.  The sampled rows
train as in the row path (:mod:`recrepro.papers.fedrap.rows`), entries whose ``C`` may cross
zero are replayed step by step, all others get the composed map once per round; exact up to
float rounding, two streaming passes over the private tables per round
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
from recrepro.papers.fedrap.rows import rows_bce
from recrepro.records import check_finite

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

__all__ = ["LazyPaperPath"]


class LazyPaperPath:
    """The lazy paper path of :class:`~recrepro.papers.fedrap.fedrap.FederatedRecommender` (a
    mixin: it reads the model's ``config``, parameters, private tables and learning rates).
    """

    def _lazy_schedule(self, n_steps: int, lam: float, mu: float) -> dict[str, np.ndarray]:
        """Composite regulariser map after ``k = 0..n_steps`` steps of a client (float64).

        Between BCE touches an entry of client i follows (``X = D + C``, ``E = D − C``,
        ``s = sign C``, ``lr_k`` the client's k-th learning rate, ``sh = 1 − lr·l2``,
        ``g = sh + 4 lr λ/(n d)``, ``ν = μ/(n d)``)::

            X ← sh X − lr ν s,      E ← g E + lr ν s

        so, while s is constant, ``X_k = PX_k X_0 − s QX_k`` and ``E_k = PE_k E_0 + s QE_k``.
        Returns ``PX, PE, QX, QE`` of length ``n_steps + 1`` for the learning-rate schedule
        ``lr_k = lr_args · batch_decay^k`` (as float32, like the steps themselves).
        """
        cfg = self.config
        nd = float(self.n_items * cfg.dim)
        k = np.arange(n_steps)
        lr = (self.lr_args * cfg.batch_decay ** k).astype(np.float32).astype(np.float64)
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

    # Long on purpose: start pass, epochs and end pass share in-place row/entry tensors whose update order keeps it exact
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
          other rows: found once per round by a conservative bound and replayed step by step
          as a flat list (:meth:`_paper_entry_step`);
        * **all other entries**: ``a = 0`` and ``s`` constant, so the map is affine with
          per-client scalars (:meth:`_lazy_schedule`), applied once at the end of the round;
          their share of the loss (``−λ‖D − C‖²``, ``μ‖C‖₁``, needed by the early stop) is a
          closed form in per-client sums taken at the start of the round.

        The sign bound: after k steps ``C_k = u_k C_0 − v_k D_0 − s q_k`` (``u = (PX+PE)/2``,
        ``v = (PE−PX)/2 ≥ 0``, ``q = (QX+QE)/2``), so ``s·C_k ≥ |C_0| u_k − |D_0| v_k − q_k``;
        an entry is replayed unless this is positive (with a margin for rounding) for every
        ``k < K_i``, ``K_i`` = the client's most steps this round (early stop only shortens).
        Only two streaming passes over the private tables per round remain (start: sums and
        the bound; end: apply the map, sum the uploads), in cache-sized blocks.

        Returns ``{"c_sum": Σ_i C_i (float64 [n_items, d]), "nnz": entries with |C_i| > 1e-4,
        "loss": [B], "lazy": what :meth:`dense_uploads` needs}``.
        """
        cfg, dev = self.config, self.device
        B, d, n_items = users.size, cfg.dim, self.n_items
        nd = n_items * d
        lay = row_layout(owner, item, label, B, n_items, cfg.batch_size)
        cperm = lay["cperm"]
        users_p = users[cperm]
        own_t = torch.as_tensor(lay["r_owner"], device=dev)
        item_t = torch.as_tensor(lay["r_item"], device=dev)
        users_t = torch.as_tensor(users_p, device=dev)
        w = self.w[users_t].clone()
        cols = _server_columns(self.C)
        C0 = cols["C0"]
        scale_p = self.D_scale[torch.as_tensor(users_p)].clone()          # float64, permuted order
        sc = scale_p.numpy()
        store_idx = torch.as_tensor(users_p[lay["r_owner"]] * n_items + lay["r_item"])
        Dr0 = self._private_rows(store_idx).to(dev)
        Dr0.mul_(scale_p.to(dev, torch.float32)[own_t][:, None])
        Cr0 = C0.index_select(0, item_t)
        X, E = Dr0 + Cr0, Dr0 - Cr0

        bound = self._lazy_sign_bound(lay["counts"], sc, lam, mu)
        sq, dots, amax, ent = self._lazy_start_pass(users, lay, item_t, scale_p, cols, bound)
        e_own, e_pos, e_D0, e_C0 = ent["own"], ent["pos"], ent["D0"], ent["C0"]
        Xe, Ee = e_D0 + e_C0, e_D0 - e_C0
        sums = _lazy_sums(cperm, sc, sq, dots, cols, ((own_t, Dr0, Cr0), (e_own, e_D0, e_C0)))
        rows = {"X": X, "E": E, "own": own_t, "lab": torch.as_tensor(lay["r_label"], device=dev),
                "crow": torch.as_tensor(np.concatenate([[0], np.cumsum(lay["rows_per"])]), device=dev)}
        maps, prev_mean = self._lazy_epochs(lay, w, rows, {"X": Xe, "E": Ee, "own": e_own, "crow": ent["crow"]},
                                            sums, owner.size, lam, mu, rng)

        # ---- end of round: the lazy map on every entry, then the exact rows/entries over it
        PX, PE, QX, QE = maps["PX"], maps["PE"], maps["QX"], maps["QE"]
        alpha, beta = (PX + PE) / 2, (PX - PE) / 2            # C_T = α C0 + β D0 − γ s
        gamma, delta = (QX + QE) / 2, (QE - QX) / 2           # D_T = α D0 + β C0 + δ s
        new_scale = sc * alpha
        c_sum, nnz = self._lazy_end_pass(users, cperm, sc, amax, cols, (alpha, beta, gamma, delta, new_scale))

        Cr = torch.sub(X, E).mul_(0.5)
        Dr = X.add_(E).mul_(0.5)
        Ce, De = torch.sub(Xe, Ee).mul_(0.5), Xe.add_(Ee).mul_(0.5)
        del E, Ee
        check_finite_fast("client item rows", Cr, f"round {self.round}")

        # the exact values of the rows and replayed entries replace the lazy map's
        lazy_r = _lazy_value((alpha, beta, gamma), own_t, Cr0, Dr0)
        c_sum.index_add_(0, item_t, (Cr - lazy_r).double())
        nnz += _n_up(Cr) - _n_up(lazy_r)
        if Ce.numel():
            lazy_e = _lazy_value((alpha, beta, gamma), e_own, e_C0, e_D0)
            c_sum.view(-1).index_add_(0, e_pos, (Ce - lazy_e).double())
            nnz += _n_up(Ce) - _n_up(lazy_e)
        ns = _f32(new_scale, dev)
        self._write_private_rows(store_idx, Dr.div_(ns[own_t][:, None]))
        e_store = torch.as_tensor(users_p, device=dev)[e_own] * nd + e_pos
        self._write_private_rows(e_store, De.div_(ns[e_own]), width=1)
        users_cpu = torch.as_tensor(users_p)
        self.D_scale[users_cpu] = torch.as_tensor(new_scale)
        drift = users_p[(new_scale < 1e-3) | (new_scale > 1e3)]
        if drift.size:
            self._materialise_private(drift)
        self.w[users_t] = w
        loss_out = np.empty(B)
        loss_out[cperm] = np.nan_to_num(prev_mean)
        orig = torch.as_tensor(cperm, device=dev)
        return {"c_sum": c_sum, "nnz": nnz, "loss": torch.as_tensor(loss_out),
                "lazy": {"users": users, "C0": C0, "alpha": _to_orig(alpha, cperm), "beta": _to_orig(beta, cperm),
                         "gamma": _to_orig(gamma, cperm), "delta": _to_orig(delta, cperm),
                         "rows": (orig[own_t], item_t, Cr), "entries": (orig[e_own], e_pos, Ce)}}

    def _lazy_sign_bound(self, counts: np.ndarray, sc: np.ndarray, lam: float, mu: float) -> dict[str, Any]:
        """The bound on sign changes, over each client's longest possible schedule (permuted order).

        An entry of client i may change sign this round unless ``|C0| U_i > |stored D0| V_i + Q_i``
        (see :meth:`_local_train_lazy`; ``sc`` the clients' lazy scales).  Returns ``{"U", "V",
        "Q", "can_flip"}`` (``can_flip`` false: no entry can, ``μ = 0`` or fewer than two steps).
        """
        cfg = self.config
        B = counts.size
        K = cfg.local_epochs * (-(-counts // cfg.batch_size))             # most steps per client
        n_max = int(K.max()) if B else 0
        sched = self._lazy_schedule(n_max, lam, mu)
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

    def _lazy_start_pass(self, users: np.ndarray, lay: dict[str, Any], item_t: torch.Tensor, scale_p: torch.Tensor,
                         cols: dict[str, Any], bound: dict[str, Any]):
        """The start-of-round pass over the private tables of ``users``, in cache-sized blocks.

        Returns per client (caller's order, stored units) ``‖D0‖²``, ``(⟨C0, D0⟩, ⟨sign C0, D0⟩)``
        and ``max |D0|``, and the entries to replay (those that may change sign, outside the
        sampled rows), grouped by permuted client: ``{"own", "pos", "D0", "C0", "crow"}``.
        """
        dev, d = self.device, self.config.dim
        B, nd = users.size, self.n_items * d
        cperm, can_flip = lay["cperm"], bound["can_flip"]
        crank = np.empty(B, np.int64)
        crank[cperm] = np.arange(B)
        U_o, V_o, Q_o = (torch.as_tensor(_to_orig(bound[k], cperm), dtype=torch.float32, device=dev) for k in "UVQ")
        touched = torch.zeros((B, self.n_items), dtype=torch.bool, device=dev)
        touched[torch.as_tensor(cperm[lay["r_owner"]], device=dev), item_t] = True
        CS, absC0f, abs_sorted, abs_order = cols["CS"], cols["absC0f"], cols["abs_sorted"], cols["abs_order"]
        sq = torch.empty(B, dtype=torch.float64)
        dots = torch.empty((B, 2), dtype=torch.float64)
        amax = torch.empty(B, dtype=torch.float64)                        # max |stored| per client
        risk_client, risk_pos, risk_val = [], [], []
        for lo, hi, table in self._private_blocks(users):                 # start-of-round pass
            flat = table.to(dev).reshape(hi - lo, nd)
            sq[lo:hi] = torch.linalg.vector_norm(flat, dim=1).double().cpu() ** 2
            dots[lo:hi] = torch.mm(CS, flat.T).T.double().cpu()
            top = torch.maximum(flat.amax(1), flat.amin(1).neg_())  # (aminmax is ~15x slower here)
            amax[lo:hi] = top.double().cpu()
            if can_flip:
                # screen: only columns whose |C0| is below the block's largest threshold can fail
                # the bound (|D0| v + q ≥ |C0| u); the exact test runs on those columns alone
                reach = ((top * V_o[lo:hi] + Q_o[lo:hi]) / U_o[lo:hi]).max().reshape(1)
                cand = abs_order[:int(torch.searchsorted(abs_sorted, reach, right=True))]
                if cand.numel():
                    sub = flat.index_select(1, cand)
                    lhs = torch.abs(sub).mul_(V_o[lo:hi, None]).add_(Q_o[lo:hi, None])
                    risky = lhs >= absC0f[cand] * U_o[lo:hi, None]
                    risky &= ~touched[lo:hi].index_select(1, cand // d)
                    rows, cols_hit = torch.nonzero(risky, as_tuple=True)
                    if rows.numel():
                        risk_client.append(rows + lo)
                        risk_pos.append(cand[cols_hit])
                        risk_val.append(sub[rows, cols_hit])
        # the replayed entries, grouped by permuted client
        if risk_client:
            e_client = torch.as_tensor(crank, device=dev)[torch.cat(risk_client)]
            order = torch.argsort(e_client, stable=True)
            e_own, e_pos = e_client[order], torch.cat(risk_pos)[order]
            e_D0 = torch.cat(risk_val)[order] * scale_p.to(dev, torch.float32)[e_own]
        else:
            e_own = torch.zeros(0, dtype=torch.int64, device=dev)
            e_pos = torch.zeros(0, dtype=torch.int64, device=dev)
            e_D0 = torch.zeros(0, device=dev)
        e_crow = torch.as_tensor(np.concatenate([[0], np.cumsum(np.bincount(e_own.cpu().numpy(), minlength=B))]),
                                 device=dev)
        return sq, dots, amax, {"own": e_own, "pos": e_pos, "D0": e_D0, "C0": cols["C0f"].index_select(0, e_pos),
                                "crow": e_crow}

    def _lazy_epochs(self, lay: dict[str, Any], w: torch.Tensor, rows: dict[str, torch.Tensor],
                     ents: dict[str, torch.Tensor], sums: dict[str, np.ndarray], n_samples: int, lam: float,
                     mu: float, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The local epochs (as the row path; every step also maps the client's non-batch rows).

        Steps the sampled rows (``rows``: ``X``, ``E``, ``own``, ``lab``, ``crow``) and the
        replayed entries (``ents``: ``X``, ``E``, ``own``, ``crow``) in place, and the per-client
        affine map of the other entries.  Returns the map (``PX, PE, QX, QE``, permuted order)
        and each client's last mean local loss (NaN: no batch).
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
        return {"PX": PX, "PE": PE, "QX": QX, "QE": QE}, schedule.prev_mean

    def _lazy_end_pass(self, users: np.ndarray, cperm: np.ndarray, sc: np.ndarray, amax: torch.Tensor,
                       cols: dict[str, Any], coef: tuple[np.ndarray, ...]) -> tuple[torch.Tensor, int]:
        """The end-of-round pass over the private tables: the lazy map on every stored entry.

        ``coef`` = ``(α, β, γ, δ, new scale)`` per client (permuted order): ``C_T = α C0 + β D0 − γ s``,
        ``D_T = α D0 + β C0 + δ s``.  Writes ``stored' = stored + (β C0 + δ s)/(α scale)`` and
        returns ``Σ_i C_T`` (float64 ``[n_items, d]``) and how many entries of the uploads exceed
        the threshold — both for the lazily mapped values of *every* entry (the caller puts the
        exact rows and entries over them).
        """
        dev, n_items, d = self.device, self.n_items, self.config.dim
        nd = n_items * d
        alpha, beta, gamma, delta, new_scale = coef
        C0, S0, C0f, S0f, CS = cols["C0"], cols["S0"], cols["C0f"], cols["S0f"], cols["CS"]
        absC0f, abs_sorted, abs_order, n_zero = cols["absC0f"], cols["abs_sorted"], cols["abs_order"], cols["n_zero"]
        alpha_o, gamma_o = _to_orig(alpha, cperm), _to_orig(gamma, cperm)
        beta_st = _f32(_to_orig(beta * sc, cperm), dev)       # β D0 = (β·scale) stored
        up_coef = _f32(np.stack([alpha_o, -gamma_o], 1), dev)
        d_coef = _f32(_to_orig(np.stack([beta, delta], 1) / new_scale[:, None], cperm), dev)
        c_acc = torch.zeros(nd, device=dev)  # Σ_i β_i D0_i: a small correction, float32 suffices
        # entries with |C_i| > 1e-4 among the lazily mapped uploads C = s(α|C0| − γ) + β D0: certain
        # from |C0| alone unless |α|C0| − γ| is within |β|·max|D0| of the threshold (then exact)
        thr = L1_THRESHOLD
        abs_sorted64 = abs_sorted.double()
        ag = torch.as_tensor(np.stack([alpha_o, gamma_o], 1), device=dev)  # float64
        hi_cut = torch.as_tensor((gamma_o + thr) / alpha_o, device=dev)
        lo_cut = torch.as_tensor((gamma_o - thr) / alpha_o, device=dev)
        nnz = int((abs_sorted64.numel() - torch.searchsorted(abs_sorted64, hi_cut, right=True)).sum()
                  + torch.searchsorted(abs_sorted64, lo_cut, right=False).sum())
        reach_all = torch.as_tensor(np.abs(_to_orig(beta, cperm)) * _to_orig(sc, cperm), device=dev) * amax.to(dev)
        for lo, hi, table in self._private_blocks(users):     # end-of-round pass
            flat = table.to(dev).view(hi - lo, nd)
            c_acc.addmv_(flat.T, beta_st[lo:hi])
            w_blk = reach_all[lo:hi]
            band = torch.stack([((ag[lo:hi, 1] - thr - w_blk) / ag[lo:hi, 0]).min() * (1 - 1e-6) - 1e-12,
                                ((ag[lo:hi, 1] + thr + w_blk) / ag[lo:hi, 0]).max() * (1 + 1e-6) + 1e-12])
            k_lo, k_hi = torch.searchsorted(abs_sorted64, band, right=True).tolist()
            # C0 = 0 entries (lazy C = β D0, not the sign formula) are always evaluated
            cand = (abs_order[:k_hi] if k_lo == 0
                    else torch.cat([abs_order[:n_zero], abs_order[max(k_lo, n_zero):k_hi]]))
            if cand.numel():
                a_blk, g_blk = up_coef[lo:hi, 0:1], -up_coef[lo:hi, 1:2]
                abs_cand = absC0f[cand].double()
                certain = (abs_cand > hi_cut[lo:hi, None]) | (abs_cand < lo_cut[lo:hi, None])  # counted above
                exact = (flat.index_select(1, cand) * beta_st[lo:hi, None]
                         + a_blk * C0f[cand] - g_blk * S0f[cand]).abs() > thr
                nnz += int(torch.count_nonzero(exact)) - int(torch.count_nonzero(certain))
            flat.addmm_(d_coef[lo:hi], CS)                    # stored' = stored + (β C0 + δ s)/(α scale)
            if flat.data_ptr() != table.data_ptr():           # a table on another device
                table.copy_(flat.view_as(table))
        c_sum = (C0.double() * alpha.sum() - S0.double() * gamma.sum()).add_(c_acc.view(n_items, d).double())
        return c_sum, nnz

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


def _to_orig(values: np.ndarray, cperm: np.ndarray) -> np.ndarray:
    """Per-client values from the permuted order (single-batch clients first) to the caller's."""
    out = np.empty_like(values)
    out[cperm] = values
    return out


def _f32(values: np.ndarray, dev: torch.device) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.float32, device=dev)


def _lazy_value(coef: tuple[np.ndarray, ...], own: torch.Tensor, C0v: torch.Tensor, D0v: torch.Tensor) -> torch.Tensor:
    """The lazy map's ``C_T = α C0 + β D0 − γ sign C0`` at rows (``[m, d]``) or entries (``[m]``) of
    the permuted clients ``own``; ``coef = (α, β, γ)``."""
    alpha, beta, gamma = coef
    dev = C0v.device
    col = (lambda a: _f32(a, dev)[own]) if D0v.dim() == 1 else (lambda a: _f32(a, dev)[own][:, None])
    return col(alpha) * C0v + col(beta) * D0v - col(gamma) * torch.sign(C0v)


def _n_up(values: torch.Tensor) -> int:
    """Entries above the sparsity threshold."""
    return int(torch.count_nonzero(values.abs() > L1_THRESHOLD))


def _server_columns(C0: torch.Tensor) -> dict[str, Any]:
    """The server's table as the passes over the private tables read it: ``C0``, ``S0 = sign C0``,
    both flat, stacked (``CS [2, n d]``), and the flat ``|C0|`` with its sort order (a block's
    candidate columns are a prefix / a slice of it) and its number of zeros."""
    S0 = torch.sign(C0)
    C0f, S0f = C0.reshape(-1), S0.reshape(-1)
    absC0f = C0.abs().reshape(-1)
    abs_sorted, abs_order = torch.sort(absC0f)
    return {"C0": C0, "S0": S0, "C0f": C0f, "S0f": S0f, "CS": torch.stack([C0f, S0f]), "absC0f": absC0f,
            "abs_sorted": abs_sorted, "abs_order": abs_order, "n_zero": int(torch.count_nonzero(absC0f == 0))}


def _lazy_sums(cperm: np.ndarray, sc: np.ndarray, sq: torch.Tensor, dots: torch.Tensor, cols: dict[str, Any],
               exact: tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], ...]) -> dict[str, np.ndarray]:
    """Per-client sums over the lazily mapped entries (all − sampled rows − replayed), permuted order.

    From the start-of-round pass (``sq``, ``dots``; ``sc`` the lazy scales) less the entries
    stepped exactly (``exact``: ``(own, D0, C0)`` of the rows and of the replayed entries):
    ``E2 = Σ (D0 − C0)²``, ``sE = Σ s (D0 − C0)``, ``sX = Σ s (D0 + C0)``, ``n = Σ s²``.
    """
    B = cperm.size
    sq_p, dots_p = sq.numpy()[cperm], dots.numpy()[cperm]
    C0 = cols["C0"]
    sumC2, sumAbsC = float((C0.double() ** 2).sum()), float(C0.double().abs().sum())
    n_sign = float(torch.count_nonzero(cols["S0f"]))
    sD0S = sc * dots_p[:, 1]
    lazy_E2 = sc ** 2 * sq_p - 2 * sc * dots_p[:, 0] + sumC2
    lazy_sE = sD0S - sumAbsC
    lazy_sX = sD0S + sumAbsC
    lazy_n = np.full(B, n_sign)

    def per_client(own, values):  # per-client sums (float64) of per-row or per-entry values
        values = values if values.dim() == 1 else values.sum(1)
        return torch.zeros(B, dtype=torch.float64).index_add_(0, own.cpu(), values.double().cpu()).numpy()

    for own, D0v, C0v in exact:
        if own.numel() == 0:
            continue
        S0v, E0v = torch.sign(C0v), D0v - C0v
        lazy_E2 -= per_client(own, E0v * E0v)
        lazy_sE -= per_client(own, S0v * E0v)
        lazy_sX -= per_client(own, S0v * (D0v + C0v))
        lazy_n -= per_client(own, S0v * S0v)
    return {"E2": lazy_E2, "sE": lazy_sE, "sX": lazy_sX, "n": lazy_n}
