"""Array kernels of FedRAP's lazy paper path (:mod:`recrepro.papers.fedrap.lazy`).

Pure functions over the private tables' columns and the lazy maps' coefficients: index
permutations, the server's sorted column magnitudes, the per-client sums a round's streaming pass
accumulates, the next round's row norms and the final writes.  Kept apart from
:class:`~recrepro.papers.fedrap.lazy.path.LazyPath` so that the path holds the round's control
flow and this module the arithmetic it calls.
"""

from __future__ import annotations

import numpy as np
import torch

from recrepro.papers.fedrap.config import L1_THRESHOLD
from recrepro.papers.fedrap.lazy.state import (ExactWrites, MapCoefficients, MappedSums, NextNorms, ServerColumns,
                                               SortedWrites)

__all__ = ["count_uploaded", "exact_writes", "f32", "mapped_c", "mapped_sums", "next_norms", "server_columns",
           "sorted_abs", "to_caller_order"]


def to_caller_order(values: np.ndarray, cperm: np.ndarray) -> np.ndarray:
    """Per-client values from the permuted order (single-batch clients first) to the caller's."""
    out = np.empty_like(values)
    out[cperm] = values
    return out


def f32(values: np.ndarray, dev: torch.device) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.float32, device=dev)


def mapped_c(coef: MapCoefficients, own: torch.Tensor, C0v: torch.Tensor, D0v: torch.Tensor) -> torch.Tensor:
    """The lazy map's ``C_T = α C0 + β D0 − γ sign C0`` at rows (``[m, d]``) or entries (``[m]``) of
    the permuted clients ``own``."""
    alpha, beta, gamma = coef.alpha, coef.beta, coef.gamma
    dev = C0v.device
    col = (lambda a: f32(a, dev)[own]) if D0v.dim() == 1 else (lambda a: f32(a, dev)[own][:, None])
    out = C0v * col(alpha)                                 # in place below: fewer [m, d] temporaries
    return out.addcmul_(D0v, col(beta)).addcmul_(torch.sign(C0v), col(gamma), value=-1.0)


def count_uploaded(values: torch.Tensor) -> int:
    """Entries above the sparsity threshold."""
    return int(torch.count_nonzero(values.abs() > L1_THRESHOLD))


def server_columns(C0: torch.Tensor) -> ServerColumns:
    """The server's table as the passes over the private tables read it: ``C0``, ``S0 = sign C0``,
    both flat, stacked (``CS [2, n d]``), the flat ``|C0|`` and its number of zeros; the screens
    read the small ``|C0|`` in ascending order (:func:`sorted_abs`)."""
    S0 = torch.sign(C0)
    C0f, S0f = C0.reshape(-1), S0.reshape(-1)
    absC0f = C0.abs().reshape(-1)
    return ServerColumns(C0=C0, S0=S0, C0f=C0f, S0f=S0f, CS=torch.stack([C0f, S0f]), absC0f=absC0f,
                         n_zero=int(torch.count_nonzero(absC0f == 0)))


def sorted_abs(cols: ServerColumns, upto: float) -> tuple[torch.Tensor, torch.Tensor]:
    """An ascending prefix of the flat ``|C0|`` of ``cols`` that holds every entry ``≤ upto``:
    ``(values, positions)``.

    The screens of the sign bound and of the upload count read only the small ``|C0|`` (a few
    thousand of ``n d``), so only those are sorted (a full sort of ``|C0|`` costs as much as a
    tenth of a pass); the prefix is cached in ``cols`` and widened (at least doubled) when a
    later use reaches further.  Counting positions ``≤ x`` in it is exact for ``x ≤ upto``.
    """
    upto = float(upto)
    if upto > cols.sorted_upto:
        cut = max(upto, 2 * cols.sorted_upto)
        absf = cols.absC0f
        sel = torch.nonzero(absf <= cut).squeeze(1) if np.isfinite(cut) else None
        values, order = torch.sort(absf if sel is None else absf[sel])
        cols.abs_sorted, cols.abs_order, cols.sorted_upto = values, order if sel is None else sel[order], cut
    return cols.abs_sorted, cols.abs_order


def mapped_sums(cperm: np.ndarray, sc: np.ndarray, sq: torch.Tensor, dots: torch.Tensor, cols: ServerColumns,
                exact: tuple[tuple[torch.Tensor, ...], ...]) -> MappedSums:
    """Per-client sums over the lazily mapped entries (all − sampled rows − replayed), permuted order.

    From the start-of-round statistics (``sq`` = ‖stored D0‖², ``dots`` = (⟨C0, stored D0⟩,
    ⟨s, stored D0⟩), caller's order; ``sc`` the lazy scales) less the entries stepped exactly
    (``exact``: ``(own, D0, C0, item)`` of the rows, ``(own, D0, C0, None)`` of the replayed
    entries; a row's ``C0`` sums are those of its item), in true units:
    ``DD = Σ D0²``, ``DC = Σ D0 C0``, ``Ds = Σ s D0``, ``CC = Σ C0²``, ``Cs = Σ |C0|``, ``ss = Σ s²``
    (``s = sign C0``), and what the loss needs of them: ``E2 = Σ (D0 − C0)² = DD − 2 DC + CC``,
    ``sE = Σ s (D0 − C0) = Ds − Cs``, ``sX = Σ s (D0 + C0) = Ds + Cs``, ``n = ss``
    (:class:`~recrepro.papers.fedrap.lazy.state.MappedSums`).
    """
    B = cperm.size
    sq_p, dots_p = sq.numpy()[cperm], dots.numpy()[cperm]
    C64 = cols.C0.double()
    # DD, DC, Ds, CC, Cs, ss over all entries, less those stepped exactly below
    totals = [sc ** 2 * sq_p, sc * dots_p[:, 0], sc * dots_p[:, 1], np.full(B, float((C64 ** 2).sum())),
              np.full(B, float(C64.abs().sum())), np.full(B, float(torch.count_nonzero(cols.S0f)))]
    C0 = cols.C0
    per_item = torch.stack([(C0 * C0).sum(1), C0.abs().sum(1), (C0 != 0).sum(1).to(C0.dtype)], 1)
    for own, D0v, C0v, item in exact:
        if own.numel() == 0:
            continue
        S0v = torch.sign(C0v)
        if item is not None:   # rows: per-row dot products (einsum: ~5x faster than a product and a sum)
            rowdots = torch.cat([torch.stack([torch.einsum("kd,kd->k", a, b) for a, b in
                                              ((D0v, D0v), (D0v, C0v), (S0v, D0v))], 1),
                                 per_item.index_select(0, item)], 1)
        else:
            rowdots = torch.stack([D0v * D0v, D0v * C0v, S0v * D0v, C0v * C0v, S0v * C0v, S0v * S0v], 1)
        per_client = torch.zeros((B, len(totals)), dtype=torch.float64).index_add_(0, own.cpu(),
                                                                                    rowdots.double().cpu())
        for j, total in enumerate(totals):
            total -= per_client[:, j].numpy()
    return MappedSums(*totals)


def next_norms(cperm: np.ndarray, sums: MappedSums, coef: MapCoefficients, start: tuple[np.ndarray, np.ndarray],
               writes: ExactWrites, cols: ServerColumns, fold: np.ndarray) -> NextNorms:
    """``‖D‖²`` and a bound on ``max |D|`` of the tables as the end-of-round pass leaves them, without
    a kernel over them (caller's order, stored units of the next round).

    The lazily mapped entries hold ``D_T = α D0 + β C0 + δ s`` (``coef``), so over them
    ``‖D_T‖² = α² DD + β² CC + δ² ss + 2αβ DC + 2αδ Ds + 2βδ Cs`` (the sums of :func:`mapped_sums`);
    the exact rows and entries (``writes``) add their own squares.  In stored units
    (``stored' = stored + (β C0 + δ s)/(α scale)``) ``max |stored'| ≤ max |stored| + (|β| max|C0| + |δ|)/(α scale)``
    over the mapped entries (``start`` = (that bound at the start of the round, the last exact
    value)), the exact values count as they are; a relative margin covers float32 rounding.
    ``fold`` is the factor the pass multiplies a client's stored table by (its scale, where the
    scale drifted; else 1).  ``ref`` in the result: the last exact max, rescaled.
    """
    alpha, beta, delta, new_scale = coef.alpha, coef.beta, coef.delta, coef.new_scale
    amax0, ref0 = start
    B = cperm.size
    lazy = (alpha ** 2 * sums.DD + beta ** 2 * sums.CC + delta ** 2 * sums.ss
            + 2 * alpha * beta * sums.DC + 2 * alpha * delta * sums.Ds + 2 * beta * delta * sums.Cs)
    sq = to_caller_order(lazy / new_scale ** 2, cperm)
    max_c = float(cols.absC0f.max()) if cols.absC0f.numel() else 0.0
    has_sign = float(cols.n_zero < cols.absC0f.numel())
    bound = amax0 + to_caller_order((np.abs(beta) * max_c + np.abs(delta) * has_sign) / new_scale, cperm)
    for part in (writes.rows, writes.entries):
        client, values = part.client, part.values
        if client.numel():
            v = values if values.dim() == 2 else values[:, None]
            row_sq = torch.linalg.vector_norm(v, dim=1).double() ** 2
            sq = sq + torch.zeros(B, dtype=torch.float64).index_add_(0, client.cpu(), row_sq.cpu()).numpy()
            row_max = torch.maximum(v.amax(1), v.amin(1).neg_())   # (abs + amax: ~4x slower)
            top = torch.zeros(B, device=v.device).scatter_reduce_(0, client, row_max, "amax")
            bound = np.maximum(bound, top.double().cpu().numpy())
    return NextNorms(sq=sq * fold ** 2, amax=bound * (1 + 1e-6) * fold, ref=ref0 * fold)


def exact_writes(cperm: np.ndarray, rows: tuple[torch.Tensor, ...], entries: tuple[torch.Tensor, ...],
                 B: int) -> ExactWrites:
    """The exact rows ``(own, item, stored values [m, d])`` and entries ``(own, pos, stored values [m])``
    of permuted clients ``own``, sorted by the caller's client, with a pointer per caller client
    (``[B + 1]``): what :meth:`~recrepro.papers.fedrap.lazy.path.LazyPath.end_pass` writes over the
    map, block by block."""
    out = []
    for own, index, values in (rows, entries):
        client = torch.as_tensor(cperm, device=own.device)[own]
        order = torch.argsort(client, stable=True)
        client = client[order]
        ptr = torch.searchsorted(client, torch.arange(B + 1, device=own.device)).tolist()
        out.append(SortedWrites(client, index[order], values[order], ptr))
    return ExactWrites(*out)
