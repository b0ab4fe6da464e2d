"""The small run of exadmm for tests/test_gpu.py (CPU against CUDA)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.papers.exadmm.exadmm import ExADMM


def run(train: sp.csr_matrix, val: sp.csr_matrix, device: str) -> np.ndarray:
    """The learned scores (or parameters) of the paper's small run on ``device``."""
    users = np.arange(train.shape[0])
    model = ExADMM(dim=4, epochs=3, seed=0, exposure_reg=1e-3, admm_penalty=0.1, device=device,
                   dtype=torch.float64).fit(train)
    return model.score(users)
