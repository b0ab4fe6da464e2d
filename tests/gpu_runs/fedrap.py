"""The small run of fedrap for tests/test_gpu.py (CPU against CUDA)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.fedrap import FederatedRecommender


def run(train: sp.csr_matrix, val: sp.csr_matrix, device: str) -> np.ndarray:
    """The learned scores (or parameters) of the paper's small run on ``device``."""
    users = np.arange(train.shape[0])
    model = FederatedRecommender(FederatedConfig(dim=4, rounds=2, local_epochs=2, seed=0, client_ratio=0.5,
                                                 lr_args=5.0, device=device))
    model.fit(train)
    return model.score(users)
