"""Differential privacy of clients' uploads: the Gaussian mechanism and its (ε, δ).
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["gaussian_epsilon", "gaussian_mechanism"]


def gaussian_epsilon(noise_multiplier: float, rounds: int, delta: float) -> float:
    """(ε, δ) of ``rounds`` adaptive compositions of the Gaussian mechanism (Rényi DP).

    Each round releases a client's clipped upload plus Gaussian noise of
    ``noise_multiplier × clip``: RDP ``ε_α = α / (2σ²)`` per round (Mironov 2017), summed
    over rounds, converted with ``ε = min_α  R·α/(2σ²) + log(1/δ)/(α − 1)``.  No subsampling
    amplification is claimed (conservative when ``client_ratio < 1``).  ``inf`` without noise.
    """
    if noise_multiplier <= 0 or rounds <= 0:
        return float("inf") if rounds > 0 else 0.0
    alphas = np.concatenate([np.linspace(1.001, 10, 9000), np.linspace(10, 10000, 99901)])
    eps = rounds * alphas / (2 * noise_multiplier**2) + math.log(1 / delta) / (alphas - 1)
    return float(eps.min())


def gaussian_mechanism(uploads: torch.Tensor, reference: torch.Tensor, clip: float | None, noise: float,
                       rng: np.random.Generator) -> torch.Tensor:
    """Clip each client's update ``uploads[i] − reference`` to Frobenius norm ``clip`` and add
    ``N(0, (noise·clip)²)`` noise to every entry (Gaussian mechanism on the upload, per client,
    before aggregation).  ``clip=None``: nothing is clipped and the noise's std is ``noise``
    itself (noise on the upload without a privacy guarantee: the update's norm is unbounded).
    ``uploads`` is ``[B, ...]``, ``reference`` (the server's table) one upload's shape; the noise
    generator is seeded from ``rng``."""
    delta = uploads - reference[None]
    if clip is not None:
        norms = torch.linalg.vector_norm(delta, dim=(1, 2))
        delta.mul_(torch.clamp(clip / torch.clamp(norms, min=1e-12), max=1.0)[:, None, None])
    if noise > 0:
        gen = torch.Generator(device=delta.device).manual_seed(int(rng.integers(2**62)))
        std = noise * clip if clip is not None else noise
        delta.add_(torch.randn(delta.shape, generator=gen, device=delta.device), alpha=std)
    return delta.add_(reference[None])
