"""The small run of prism for tests/test_gpu.py (CPU against CUDA)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from recrepro.papers.prism.trainer import TrainSettings, train as train_prism


def run(train: sp.csr_matrix, val: sp.csr_matrix, device: str) -> np.ndarray:
    """The learned scores (or parameters) of the paper's small run on ``device``."""
    net, _ = train_prism(train, val, TrainSettings(loss="directau", dim=8, lr=0.01, epochs=3, patience=3,
                                                   batch_size=128, seed=0, alpha=1.0, device=device))
    with torch.no_grad():
        u, i = net.final_tables()
        return (u @ i.T).cpu().numpy()
