"""Array kernels of FedRAP's lazy paper path (:mod:`recrepro.papers.fedrap.lazy`).

Pure functions over the private tables' columns and the lazy maps' coefficients: index
permutations, the server's sorted column magnitudes, the per-client sums a round's streaming pass
accumulates, the next round's row norms and the final writes.  Kept apart from
:class:`~recrepro.papers.fedrap.lazy.LazyPaperPath` so that the class holds the round's control
flow and this module the arithmetic it calls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from recrepro.papers.fedrap.config import L1_THRESHOLD

__all__ = ["_to_orig", "_to_device", "_f32", "_lazy_value", "_n_up", "_server_columns", "_sorted_abs", "_lazy_sums", "_lazy_next_norms", "_lazy_writes"]


def _to_orig(values: np.ndarray, cperm: np.ndarray) -> np.ndarray:
    """Per-client values from the permuted order (single-batch clients first) to the caller's."""
    out = np.empty_like(values)
    out[cperm] = values
    return out


def _to_device(value: Any, dev: torch.device) -> Any:
    """``value`` (tensors in dicts, lists and tuples) with its tensors on ``dev``."""
    if isinstance(value, torch.Tensor):
        return value.to(dev)
    if isinstance(value, dict):
        return {k: _to_device(v, dev) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, dev) for v in value)
    return value


def _f32(values: np.ndarray, dev: torch.device) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.float32, device=dev)


def _lazy_value(coef: tuple[np.ndarray, ...], own: torch.Tensor, C0v: torch.Tensor, D0v: torch.Tensor) -> torch.Tensor:
    """The lazy map's ``C_T = α C0 + β D0 − γ sign C0`` at rows (``[m, d]``) or entries (``[m]``) of
    the permuted clients ``own``; ``coef = (α, β, γ)``."""
    alpha, beta, gamma = coef
    dev = C0v.device
    col = (lambda a: _f32(a, dev)[own]) if D0v.dim() == 1 else (lambda a: _f32(a, dev)[own][:, None])
    out = C0v * col(alpha)                                 # in place below: fewer [m, d] temporaries
    return out.addcmul_(D0v, col(beta)).addcmul_(torch.sign(C0v), col(gamma), value=-1.0)


def _n_up(values: torch.Tensor) -> int:
    """Entries above the sparsity threshold."""
    return int(torch.count_nonzero(values.abs() > L1_THRESHOLD))


def _server_columns(C0: torch.Tensor) -> dict[str, Any]:
    """The server's table as the passes over the private tables read it: ``C0``, ``S0 = sign C0``,
    both flat, stacked (``CS [2, n d]``), the flat ``|C0|`` and its number of zeros; the screens
    read the small ``|C0|`` in ascending order (:func:`_sorted_abs`)."""
    S0 = torch.sign(C0)
    C0f, S0f = C0.reshape(-1), S0.reshape(-1)
    absC0f = C0.abs().reshape(-1)
    return {"C0": C0, "S0": S0, "C0f": C0f, "S0f": S0f, "CS": torch.stack([C0f, S0f]), "absC0f": absC0f,
            "n_zero": int(torch.count_nonzero(absC0f == 0)), "sorted_upto": -np.inf}


def _sorted_abs(cols: dict[str, Any], upto: float) -> tuple[torch.Tensor, torch.Tensor]:
    """An ascending prefix of the flat ``|C0|`` of ``cols`` that holds every entry ``≤ upto``:
    ``(values, positions)``.

    The screens of the sign bound and of the upload count read only the small ``|C0|`` (a few
    thousand of ``n d``), so only those are sorted (a full sort of ``|C0|`` costs as much as a
    tenth of a pass); the prefix is cached in ``cols`` and widened (at least doubled) when a
    later use reaches further.  Counting positions ``≤ x`` in it is exact for ``x ≤ upto``.
    """
    upto = float(upto)
    if upto > cols["sorted_upto"]:
        cut = max(upto, 2 * cols["sorted_upto"])
        absf = cols["absC0f"]
        sel = torch.nonzero(absf <= cut).squeeze(1) if np.isfinite(cut) else None
        values, order = torch.sort(absf if sel is None else absf[sel])
        cols.update(abs_sorted=values, abs_order=order if sel is None else sel[order], sorted_upto=cut)
    return cols["abs_sorted"], cols["abs_order"]


def _lazy_sums(cperm: np.ndarray, sc: np.ndarray, sq: torch.Tensor, dots: torch.Tensor, cols: dict[str, Any],
               exact: tuple[tuple[torch.Tensor, ...], ...]) -> dict[str, np.ndarray]:
    """Per-client sums over the lazily mapped entries (all − sampled rows − replayed), permuted order.

    From the start-of-round statistics (``sq`` = ‖stored D0‖², ``dots`` = (⟨C0, stored D0⟩,
    ⟨s, stored D0⟩), caller's order; ``sc`` the lazy scales) less the entries stepped exactly
    (``exact``: ``(own, D0, C0, item)`` of the rows, ``(own, D0, C0, None)`` of the replayed
    entries; a row's ``C0`` sums are those of its item), in true units:
    ``DD = Σ D0²``, ``DC = Σ D0 C0``, ``Ds = Σ s D0``, ``CC = Σ C0²``, ``Cs = Σ |C0|``, ``ss = Σ s²``
    (``s = sign C0``), and what the loss needs of them: ``E2 = Σ (D0 − C0)² = DD − 2 DC + CC``,
    ``sE = Σ s (D0 − C0) = Ds − Cs``, ``sX = Σ s (D0 + C0) = Ds + Cs``, ``n = ss``.
    """
    B = cperm.size
    sq_p, dots_p = sq.numpy()[cperm], dots.numpy()[cperm]
    C64 = cols["C0"].double()
    out = {"DD": sc ** 2 * sq_p, "DC": sc * dots_p[:, 0], "Ds": sc * dots_p[:, 1],
           "CC": np.full(B, float((C64 ** 2).sum())), "Cs": np.full(B, float(C64.abs().sum())),
           "ss": np.full(B, float(torch.count_nonzero(cols["S0f"])))}

    names = ("DD", "DC", "Ds", "CC", "Cs", "ss")
    C0 = cols["C0"]
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
        per_client = torch.zeros((B, len(names)), dtype=torch.float64).index_add_(0, own.cpu(),
                                                                                   rowdots.double().cpu())
        for j, name in enumerate(names):
            out[name] -= per_client[:, j].numpy()
    out.update(E2=out["DD"] - 2 * out["DC"] + out["CC"], sE=out["Ds"] - out["Cs"], sX=out["Ds"] + out["Cs"],
               n=out["ss"])
    return out


def _lazy_next_norms(cperm: np.ndarray, sums: dict[str, np.ndarray], coef: tuple[np.ndarray, ...],
                     start: tuple[np.ndarray, np.ndarray], writes: dict[str, Any], cols: dict[str, Any],
                     fold: np.ndarray) -> dict[str, np.ndarray]:
    """``‖D‖²`` and a bound on ``max |D|`` of the tables as the end-of-round pass leaves them, without
    a kernel over them (caller's order, stored units of the next round).

    The lazily mapped entries hold ``D_T = α D0 + β C0 + δ s`` (``coef``), so over them
    ``‖D_T‖² = α² DD + β² CC + δ² ss + 2αβ DC + 2αδ Ds + 2βδ Cs`` (the sums of :func:`_lazy_sums`);
    the exact rows and entries (``writes``) add their own squares.  In stored units
    (``stored' = stored + (β C0 + δ s)/(α scale)``) ``max |stored'| ≤ max |stored| + (|β| max|C0| + |δ|)/(α scale)``
    over the mapped entries (``start`` = (that bound at the start of the round, the last exact
    value)), the exact values count as they are; a relative margin covers float32 rounding.
    ``fold`` is the factor the pass multiplies a client's stored table by (its scale, where the
    scale drifted; else 1).  Returns ``{"sq", "amax", "ref"}`` (``ref``: the last exact max, rescaled).
    """
    alpha, beta, _, delta, new_scale = coef
    amax0, ref0 = start
    B = cperm.size
    lazy = (alpha ** 2 * sums["DD"] + beta ** 2 * sums["CC"] + delta ** 2 * sums["ss"]
            + 2 * alpha * beta * sums["DC"] + 2 * alpha * delta * sums["Ds"] + 2 * beta * delta * sums["Cs"])
    sq = _to_orig(lazy / new_scale ** 2, cperm)
    max_c = float(cols["absC0f"].max()) if cols["absC0f"].numel() else 0.0
    has_sign = float(cols["n_zero"] < cols["absC0f"].numel())
    bound = amax0 + _to_orig((np.abs(beta) * max_c + np.abs(delta) * has_sign) / new_scale, cperm)
    for client, _, values, _ in (writes["rows"], writes["entries"]):
        if client.numel():
            v = values if values.dim() == 2 else values[:, None]
            row_sq = torch.linalg.vector_norm(v, dim=1).double() ** 2
            sq = sq + torch.zeros(B, dtype=torch.float64).index_add_(0, client.cpu(), row_sq.cpu()).numpy()
            row_max = torch.maximum(v.amax(1), v.amin(1).neg_())   # (abs + amax: ~4x slower)
            top = torch.zeros(B, device=v.device).scatter_reduce_(0, client, row_max, "amax")
            bound = np.maximum(bound, top.double().cpu().numpy())
    return {"sq": sq * fold ** 2, "amax": bound * (1 + 1e-6) * fold, "ref": ref0 * fold}


def _lazy_writes(cperm: np.ndarray, rows: tuple[torch.Tensor, ...], entries: tuple[torch.Tensor, ...],
                 B: int) -> dict[str, tuple]:
    """The exact rows ``(own, item, stored values [m, d])`` and entries ``(own, pos, stored values [m])``
    of permuted clients ``own``, sorted by the caller's client, with a pointer per caller client
    (``[B + 1]``): what :meth:`LazyPaperPath._lazy_end_pass` writes over the map, block by block."""
    out = {}
    for name, (own, index, values) in (("rows", rows), ("entries", entries)):
        client = torch.as_tensor(cperm, device=own.device)[own]
        order = torch.argsort(client, stable=True)
        client = client[order]
        ptr = torch.searchsorted(client, torch.arange(B + 1, device=own.device)).tolist()
        out[name] = (client, index[order], values[order], ptr)
    return out
