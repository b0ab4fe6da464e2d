"""Private AMHT-LRS in the billboard model, and its zero-concentrated-DP accountant.

Billboard model (paper §1.2; Jain et al. 2021): the server publishes ``U``; each user keeps
``(w_i, b_i)`` private and computes them locally, so only the global step touches other users'
data. Our private global step (the paper's private algorithm could not be read; see
``docs/deviations.md#lrs-private``) is a noisy, clipped gradient step::

    G_i = (1/m) X_i^T (y_i - X_i b_i - X_i U w_i) w_i^T              (d x r, user i's contribution)
    U  <- QR( U + (eta / t) [ sum_i clip_C(G_i) + N(0, (z C)^2 I_{dr}) ] ),

``clip_C(G) = G min(1, C / ||G||_F)``. Adding or removing one user moves the sum by at most ``C``
in Frobenius norm, so each step is the Gaussian mechanism with sensitivity ``Delta = C`` and noise
``sigma = z C``: ``rho = Delta^2 / (2 sigma^2) = 1 / (2 z^2)``-zCDP (Bun & Steinke 2016, Prop. 1.6).
The optional private initialisation releases ``sum_i clip_C0(M_i) + N(0, (z C0)^2 I_{d x d})`` with
``M_i = (1/m) sum_j y_ij^2 x_ij x_ij^T`` (one more mechanism). zCDP composes additively over the
``T`` (+1) mechanisms, and ``rho``-zCDP implies ``(rho + 2 sqrt(rho ln(1/delta)), delta)``-DP
(Bun & Steinke 2016, Prop. 1.3). The reported epsilon is computed from the noise actually added.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch

from recrepro.papers.lrs.amht_lrs import AMHTConfig, AMHTResult, amht_lrs, top_eigenvectors, u_gradient


# ------------------------------------------------------------------------------ accountant


def gaussian_zcdp(sensitivity: float, sigma: float) -> float:
    """zCDP of one Gaussian mechanism: ``rho = Delta^2 / (2 sigma^2)``."""
    if sigma <= 0:
        return math.inf
    return sensitivity ** 2 / (2.0 * sigma ** 2)


def compose_zcdp(rhos) -> float:
    """zCDP composes additively: ``rho = sum_j rho_j``."""
    return float(sum(rhos))


def zcdp_to_dp(rho: float, delta: float) -> float:
    """``epsilon = rho + 2 sqrt(rho ln(1/delta))`` (rho-zCDP implies (epsilon, delta)-DP)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def rho_for_epsilon(epsilon: float, delta: float) -> float:
    """The largest ``rho`` with ``zcdp_to_dp(rho, delta) <= epsilon``: ``(sqrt(L + eps) - sqrt(L))^2``, ``L = ln(1/delta)``."""
    L = math.log(1.0 / delta)
    return (math.sqrt(L + epsilon) - math.sqrt(L)) ** 2


def noise_multiplier(epsilon: float, delta: float, n_mechanisms: int) -> float:
    """``z`` such that ``n_mechanisms`` Gaussian mechanisms with ``sigma = z Delta`` spend exactly ``(epsilon, delta)``."""
    rho = rho_for_epsilon(epsilon, delta)
    return math.sqrt(n_mechanisms / (2.0 * rho))


@dataclass
class Accountant:
    """Running zCDP ledger: one ``(sensitivity, sigma)`` per released statistic."""

    delta: float
    mechanisms: list = None

    def __post_init__(self) -> None:
        self.mechanisms = [] if self.mechanisms is None else list(self.mechanisms)

    def spend(self, sensitivity: float, sigma: float) -> None:
        self.mechanisms.append((float(sensitivity), float(sigma)))

    @property
    def rho(self) -> float:
        return compose_zcdp(gaussian_zcdp(s, g) for s, g in self.mechanisms)

    @property
    def epsilon(self) -> float:
        return zcdp_to_dp(self.rho, self.delta)


# ----------------------------------------------------------------------------- algorithm


@dataclass(frozen=True)
class PrivateConfig:
    """Privacy settings. ``epsilon = inf`` runs the same clipped steps without noise."""

    epsilon: float
    delta: float = 1e-5
    clip: float = 1.0
    init_clip: float = 25.0
    step: float = 1.0
    private_init: bool = True

    def as_dict(self) -> dict:
        return asdict(self)


def clip_rows(G: torch.Tensor, C: float) -> torch.Tensor:
    """Scale each ``G[i]`` (any trailing shape) to Frobenius norm at most ``C``."""
    norms = torch.linalg.vector_norm(G.reshape(G.shape[0], -1), dim=1)
    scale = torch.clamp(C / norms.clamp(min=1e-300), max=1.0)
    return G * scale.reshape(-1, *([1] * (G.dim() - 1)))


def private_amht_lrs(X: torch.Tensor, y: torch.Tensor, cfg: AMHTConfig, priv: PrivateConfig, *,
                     seed: int = 0, monitor=None) -> tuple[AMHTResult, Accountant]:
    """Private AMHT-LRS (module doc). Returns the fit and the accountant (``.epsilon`` is the spend).

    ``cfg.init = "moments"`` with ``priv.private_init`` uses the noisy moment matrix; ``"random"``
    touches no data. The budget ``priv.epsilon`` is split evenly (equal ``z``) over the mechanisms.
    """
    t, m, d = X.shape
    gen = torch.Generator().manual_seed(int(seed))
    noisy = math.isfinite(priv.epsilon)
    use_init = cfg.init == "moments" and priv.private_init
    n_mech = cfg.iterations + (1 if use_init else 0)
    z = noise_multiplier(priv.epsilon, priv.delta, n_mech) if noisy and n_mech else 0.0
    acct = Accountant(priv.delta)

    def gauss(shape):
        return torch.randn(*shape, generator=gen, dtype=X.dtype).to(X.device)

    U0 = None
    if use_init:
        M = torch.zeros(d, d, dtype=X.dtype, device=X.device)
        for lo in range(0, t, cfg.chunk_users):
            Xc, yc = X[lo:lo + cfg.chunk_users], y[lo:lo + cfg.chunk_users]
            Mi = (Xc * (yc * yc).unsqueeze(-1)).transpose(1, 2) @ Xc / m
            M += clip_rows(Mi, priv.init_clip).sum(0)
        if noisy:
            M = M + z * priv.init_clip * gauss((d, d))
        acct.spend(priv.init_clip, z * priv.init_clip)  # sigma 0 (no noise) books an infinite rho
        U0 = top_eigenvectors(M, cfg.r)
    elif cfg.init == "moments":
        raise ValueError("a moments initialisation without private_init would leak data: use init='random'")

    def u_update(X, R, U, W, it):
        S = clip_rows(u_gradient(X, R, U, W), priv.clip).sum(0)
        if noisy:
            S = S + z * priv.clip * gauss(S.shape)
        acct.spend(priv.clip, z * priv.clip)
        return U + priv.step * S / t

    if U0 is None:
        U0 = torch.linalg.qr(gauss((d, cfg.r))).Q
    res = amht_lrs(X, y, replace(cfg, tol=0.0), U0=U0, monitor=monitor, u_update=u_update)
    return res, acct
