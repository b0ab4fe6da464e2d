"""The small run of lrs for tests/test_gpu.py (CPU against CUDA)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from recrepro.papers.lrs.amht_lrs import AMHTConfig, amht_lrs
from recrepro.papers.lrs.generator import LRSSpec, generate


def run(train: sp.csr_matrix, val: sp.csr_matrix, device: str) -> np.ndarray:
    """The learned scores (or parameters) of the paper's small run on ``device``."""
    data = generate(LRSSpec(d=20, r=2, k=2, t=120, m=30, seed=0))
    res = amht_lrs(data.X.to(device), data.y.to(device), AMHTConfig(r=2, k=2, iterations=5))
    return res.theta.cpu().numpy()
