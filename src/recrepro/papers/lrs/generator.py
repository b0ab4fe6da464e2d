"""Synthetic linear LRS data (paper eq. (1)) and the error metrics of the figures.

Model: ``t`` users, ``m`` samples each, ``x_ij ~ N(0, I_d)``,
``y_ij = <x_ij, Theta*_i> + z_ij``, ``Theta*_i = U* w*_i + b*_i``, ``z_ij ~ N(0, sigma^2)``.

Our choices (the paper's constants could not be read; see ``docs/deviations.md#lrs-generator``):
``U*`` is the Q factor of a ``d x r`` standard Gaussian matrix (a uniformly random orthonormal
basis, incoherent with high probability); ``w*_i ~ N(0, I_r)``; ``b*_i`` has a uniformly random
support of size ``k`` with entries ``sign * b_scale * Uniform[0.5, 1]`` (bounded away from zero so
that the support is identifiable at any noise level well below ``b_scale / 2``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class LRSSpec:
    """Sizes and scales of one synthetic LRS problem."""

    d: int = 50
    r: int = 3
    k: int = 3
    t: int = 2000
    m: int = 40
    sigma: float = 0.0
    b_scale: float = 1.0
    seed: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class LRSData:
    """Per-user design matrices, responses and the true parameters (all torch float64)."""

    X: torch.Tensor       # (t, m, d)
    y: torch.Tensor       # (t, m)
    U: torch.Tensor       # (d, r) orthonormal
    W: torch.Tensor       # (t, r)
    B: torch.Tensor       # (t, d), k-sparse rows
    spec: LRSSpec

    @property
    def theta(self) -> torch.Tensor:
        """``Theta*`` as a ``(t, d)`` matrix: row ``i`` is ``U* w*_i + b*_i``."""
        return self.W @ self.U.T + self.B

    def to(self, device: str) -> "LRSData":
        return LRSData(*(v.to(device) for v in (self.X, self.y, self.U, self.W, self.B)), spec=self.spec)

    def subsample(self, m: int) -> "LRSData":
        """The first ``m`` samples of every user (nested designs across an ``m`` sweep)."""
        spec = LRSSpec(**{**self.spec.as_dict(), "m": m})
        return LRSData(self.X[:, :m], self.y[:, :m], self.U, self.W, self.B, spec)


def generate(spec: LRSSpec, *, device: str = "cpu") -> LRSData:
    """Draw one LRS problem from ``spec`` (deterministic in ``spec.seed``).

    Draws ``U*``, ``W*``, ``B*``, then ``X`` and the noise, from one ``numpy`` ``default_rng``
    stream in that order; the same seed gives the same parameters whatever ``m`` and ``sigma``.
    """
    if not (1 <= spec.r <= spec.d and 0 <= spec.k <= spec.d and spec.t >= 1 and spec.m >= 1):
        raise ValueError(f"bad LRS sizes {spec}")
    rng = np.random.default_rng(spec.seed)
    U, _ = np.linalg.qr(rng.standard_normal((spec.d, spec.r)))
    W = rng.standard_normal((spec.t, spec.r))
    B = np.zeros((spec.t, spec.d))
    if spec.k:
        # k distinct coordinates per user: argsort of uniforms (vectorised sampling without replacement)
        support = np.argsort(rng.random((spec.t, spec.d)), axis=1)[:, : spec.k]
        values = rng.choice([-1.0, 1.0], size=(spec.t, spec.k)) * spec.b_scale * rng.uniform(0.5, 1.0, (spec.t, spec.k))
        np.put_along_axis(B, support, values, axis=1)
    X = rng.standard_normal((spec.t, spec.m, spec.d))
    theta = W @ U.T + B
    y = np.einsum("imd,id->im", X, theta) + spec.sigma * rng.standard_normal((spec.t, spec.m))
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float64, device=device)  # noqa: E731
    return LRSData(as_t(X), as_t(y), as_t(U), as_t(W), as_t(B), spec)


# ------------------------------------------------------------------------------ metrics


def parameter_error(theta_hat: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Per-user relative error ``||Theta_hat_i - Theta*_i||_2 / ||Theta*_i||_2`` (shape ``(t,)``)."""
    return torch.linalg.vector_norm(theta_hat - theta, dim=1) / torch.linalg.vector_norm(theta, dim=1)


def subspace_distance(U_hat: torch.Tensor, U: torch.Tensor) -> float:
    """``||(I - U_hat U_hat^T) U*||_2`` (spectral norm; ``U_hat`` orthonormalised first).

    0 when the column spaces agree, 1 when some direction of ``U*`` is orthogonal to ``U_hat``.
    """
    Q, _ = torch.linalg.qr(U_hat)
    residual = U - Q @ (Q.T @ U)
    return float(torch.linalg.matrix_norm(residual, ord=2))


def support_scores(B_hat: torch.Tensor, B: torch.Tensor, tol: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-user precision and recall of ``supp(b_hat_i)`` against ``supp(b*_i)``.

    A user with an empty estimated (true) support gets precision (recall) 1.
    """
    est = B_hat.abs() > tol
    true = B != 0
    hits = (est & true).sum(dim=1).to(torch.float64)
    n_est = est.sum(dim=1).to(torch.float64)
    n_true = true.sum(dim=1).to(torch.float64)
    precision = torch.where(n_est > 0, hits / n_est.clamp(min=1), torch.ones_like(hits))
    recall = torch.where(n_true > 0, hits / n_true.clamp(min=1), torch.ones_like(hits))
    return precision, recall
