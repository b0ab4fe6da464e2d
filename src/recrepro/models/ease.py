"""EASE: embarrassingly shallow autoencoder, closed form.

Steck, "Embarrassingly shallow autoencoders for sparse data" (WWW 2019), eq. (8):

    P = (XᵀX + λI)⁻¹,      B = I − P · diagMat(1 ⊘ diag(P)),

i.e. ``B_ij = −P_ij / P_jj`` off the diagonal and ``B_jj = 0``; a user's scores are
``x_u B``.  The inverse is a Cholesky factorisation and inversion in place (LAPACK
``potrf``/``potri``), so only one ``n_items × n_items`` matrix is held: 8·n² bytes in float64,
4·n² in float32 (gowalla's 40,981 items: 6.7 GB).  On a GPU (``device="cuda"``) the same
factorisation runs in torch (:func:`torch.linalg.cholesky`, :func:`torch.cholesky_inverse`):
about 3·n² numbers on the card and 2·n² in host memory, seconds where one CPU core takes tens
of minutes for gowalla.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg.lapack as lapack
import scipy.sparse as sp

from recrepro.models.itemitem import ItemItemRecommender

__all__ = ["EASE", "ease_weights"]


def ease_weights(matrix: sp.csr_matrix, lam: float, dtype: str = "float64", block: int = 2048,
                 device: str = "cpu") -> np.ndarray:
    """``B`` of Steck 2019 eq. (8) for the binary ``matrix`` ``[n_users, n_items]``, in ``dtype``;
    the inverse on ``device`` (``cpu``: LAPACK in place; a CUDA device: torch, :func:`_weights_torch`).

    Raises ``ValueError`` when ``XᵀX + λI`` is not positive definite (``λ <= 0`` with a
    rank-deficient ``X``).
    """
    if float(lam) < 0:
        raise ValueError(f"EASE needs lambda >= 0, got {lam}")
    x = matrix.astype(dtype)
    g = (x.T @ x).toarray()
    g[np.diag_indices(g.shape[0])] += lam
    if device != "cpu":
        import torch

        a = torch.from_numpy(g).to(device)
        del g  # the host copy goes before B comes back
        return _weights_torch(a, lam)
    p = _inverse_in_place(g, lam)
    n = p.shape[0]
    # potri fills the lower triangle: mirror it to the upper one, block by block (no n² temporary)
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        d = p[lo:hi, lo:hi]
        d[:] = np.tril(d) + np.tril(d, -1).T
        p[lo:hi, hi:] = p[hi:, lo:hi].T
    # p is Fortran-ordered (LAPACK's in-place result) and now symmetric, so its transpose is the same
    # matrix in C order: the layout a user's CSR row times W reads row by row. Scoring through the
    # Fortran-ordered array strides across every row for each history item (gowalla: 41k x 41k,
    # ~8 of a grid point's 18 minutes; a 2,048-user batch at 20,000 items: 4.8 s against 0.34 s)
    w = p.T
    diag = np.diag(w).copy()
    w /= -diag[None, :]
    w[np.diag_indices(n)] = 0.0
    return w


def _inverse_in_place(g: np.ndarray, lam: float) -> np.ndarray:
    """The lower triangle of ``g⁻¹`` for the symmetric positive definite ``g``, in ``g``'s memory.

    LAPACK works in place only on a Fortran-ordered array; f2py copies any other, which doubles the
    memory (gowalla: 13.4 GB instead of 6.7 GB in float32).  ``g`` is symmetric, so its transpose is
    the same matrix: the Fortran-ordered one of the two views is handed on (scipy's ``toarray()`` of
    ``XᵀX`` is Fortran-ordered already; a C-ordered ``g`` is passed as ``g.T``).
    """
    a = g if g.flags.f_contiguous else g.T
    potrf, potri = (lapack.dpotrf, lapack.dpotri) if a.dtype == np.float64 else (lapack.spotrf, lapack.spotri)
    c, info = potrf(a, lower=1, overwrite_a=1, clean=0)
    if info != 0:
        raise ValueError(f"EASE: X^T X + {lam} I is not positive definite (potrf info {info}); raise lambda")
    p, info = potri(c, lower=1, overwrite_c=1)
    if info != 0:
        raise ValueError(f"EASE: inversion failed (potri info {info})")
    return p


def _weights_torch(a: Any, lam: float) -> np.ndarray:
    """``B`` of eq. (8) from ``a = XᵀX + λI`` (a torch tensor) on ``a``'s device: Cholesky, its
    inverse and the column scaling there, ``B`` copied to host memory."""
    import torch

    chol, info = torch.linalg.cholesky_ex(a)
    if int(info) != 0:
        raise ValueError(f"EASE: X^T X + {lam} I is not positive definite (cholesky info {int(info)}); raise lambda")
    p = torch.cholesky_inverse(chol)
    del chol
    p /= -torch.diagonal(p).clone()[None, :]
    p.fill_diagonal_(0.0)
    return p.cpu().numpy()


class EASE(ItemItemRecommender):
    """EASE^R with L2 weight ``lam`` (Steck 2019 eq. 8; see the module docstring).

    Parameters
    ----------
    lam:
        L2 weight ``λ`` on ``B``.
    dtype:
        ``"float64"`` or ``"float32"`` (halves the memory; for large item sets).
    device:
        Where the inverse runs: ``cpu`` (LAPACK) or a CUDA device (torch); the weights and the
        scoring stay in host memory either way.
    """

    def __init__(self, lam: float = 100.0, dtype: str = "float64", device: str = "cpu") -> None:
        if dtype not in ("float64", "float32"):
            raise ValueError(f"EASE dtype must be float64 or float32, got {dtype!r}")
        self.lam, self.dtype, self.device = float(lam), dtype, str(device)

    def fit(self, train: sp.csr_matrix, **kwargs: Any) -> EASE:
        matrix = self._set_history(train)
        self.W = ease_weights(matrix, self.lam, self.dtype, device=self.device)
        return self
