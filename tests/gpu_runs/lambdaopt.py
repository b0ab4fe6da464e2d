"""The small run of lambdaopt for tests/test_gpu.py (CPU against CUDA)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from recrepro.papers.lambdaopt.mf_lambdaopt import MFLambdaOpt


def run(train: sp.csr_matrix, val: sp.csr_matrix, device: str) -> np.ndarray:
    """The learned scores (or parameters) of the paper's small run on ``device``."""
    users = np.arange(train.shape[0])
    model = MFLambdaOpt(dict(dim=4, epochs=2, batch_size=32, val_batch_size=16, granularity="dui",
                             device=device), seed=0)
    model.fit(train, validation=val)
    return model.score(users)
