"""Differential privacy of clients' uploads: the Gaussian mechanism and its (ε, δ).
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["RoundNoise", "gaussian_epsilon", "gaussian_mechanism"]


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


class RoundNoise:
    """Standard-normal noise for a round's participants, drawn client by client in their order.

    The participants fall into fixed blocks of ``block`` clients; each block's torch generator is
    seeded from ``rng`` when its first client is noised, and each client's noise is its own draw
    of that generator.  A trainer that noises the round's clients in memory-sized chunks
    (FedRAP's dense path) therefore hands every client the same noise whatever the chunks, as
    long as it asks for the clients in order (``block`` is a fixed setting, not the memory
    budget).  On the CPU a client's draw of ``n`` normals, ``n`` a multiple of 16, is the next
    ``n`` normals of one draw over the block (torch fills normals 16 at a time from sequential
    uniforms), so one block's noise is the block-at-once draw of the earlier code.
    """

    def __init__(self, rng: np.random.Generator, block: int, device: torch.device | str = "cpu") -> None:
        self.rng, self.block, self.device = rng, max(1, int(block)), torch.device(device)
        self.next_client = 0
        self._gen: torch.Generator | None = None

    def normals(self, n_clients: int, shape: tuple[int, ...]) -> torch.Tensor:
        """``[n_clients, *shape]`` normals for the next ``n_clients`` participants."""
        out = torch.empty((n_clients, *shape), device=self.device)
        # one draw per client (a loop over a chunk's clients, each draw n_items x d numbers): a
        # client's noise must not depend on which chunk it is noised in
        for i in range(n_clients):
            if (self.next_client + i) % self.block == 0:
                self._gen = torch.Generator(device=self.device).manual_seed(int(self.rng.integers(2**62)))
            torch.randn(shape, generator=self._gen, device=self.device, out=out[i])
        self.next_client += n_clients
        return out


def gaussian_mechanism(uploads: torch.Tensor, reference: torch.Tensor, clip: float | None, noise: float,
                       normals: RoundNoise | np.random.Generator) -> torch.Tensor:
    """Clip each client's update ``uploads[i] − reference`` to Frobenius norm ``clip`` and add
    ``N(0, (noise·clip)²)`` noise to every entry (Gaussian mechanism on the upload, per client,
    before aggregation).  ``clip=None``: nothing is clipped and the noise's std is ``noise``
    itself (noise on the upload without a privacy guarantee: the update's norm is unbounded).
    ``uploads`` is ``[B, ...]``, ``reference`` (the server's table) one upload's shape; the noise
    comes from ``normals`` (a :class:`RoundNoise`, or a ``numpy`` generator that seeds one block
    of these ``B`` clients)."""
    delta = uploads - reference[None]
    if clip is not None:
        norms = torch.linalg.vector_norm(delta, dim=(1, 2))
        delta.mul_(torch.clamp(clip / torch.clamp(norms, min=1e-12), max=1.0)[:, None, None])
    if noise > 0:
        if isinstance(normals, np.random.Generator):
            normals = RoundNoise(normals, delta.shape[0], delta.device)
        std = noise * clip if clip is not None else noise
        delta.add_(normals.normals(delta.shape[0], tuple(delta.shape[1:])), alpha=std)
    return delta.add_(reference[None])
