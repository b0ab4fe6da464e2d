"""Score sources: turn embeddings, a model or a callable into batches of score rows.

Every batch comes back as a float32 ``torch.Tensor`` ``[b, n_items]`` that the caller
owns and may overwrite (the evaluators write ``-inf`` into excluded cells).  On the
``"numpy"`` backend the tensor shares memory with a NumPy buffer that is allocated once
and reused for every batch, so peak memory is ``batch_size × n_items × 4`` bytes plus a
float64 block of at most ``_F64_BLOCK_ROWS × n_items × 8`` bytes, never
``n_users × n_items``.

Why float64 then float32
------------------------
BLAS kernels pick different code paths for different matrix shapes, so a float32 dot
product can differ in the last bit depending on how many users share a batch (measured
on this machine: ~20 % of the float32 scores of a user change between batch sizes 1, 7
and 2048 with OpenBLAS sgemm).  Those last-bit differences reorder near-ties and would
make metrics depend on ``batch_size``.  Dot products are therefore accumulated in
float64 and rounded once to float32: the float64 results differ only at ~1e-16 relative,
which survives the rounding with probability ~1e-7 per score (measured: 1 score in
10.5 million differs between batch size 1 and 256, none between 7, 100 and 256), and the
torch and NumPy backends then agree bit for bit on the rounded scores as well.  Scores
from a callable are rounded to float32 the same way; whether *they* depend on the batch
size is up to the callable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

import numpy as np
import torch

__all__ = ["ScoreSource", "embedding_pair", "resolve_score_source", "resolve_backend"]

Backend = Literal["numpy", "torch"]

# Rows per float64 matmul block: bounds the float64 scratch buffer (512 × 41k × 8 B = 168 MB
# for Gowalla) while keeping the matmul large enough to run at full BLAS speed.
_F64_BLOCK_ROWS = 512


class ScoreSource(Protocol):
    """What the evaluators need from a score source."""

    n_items: int

    def scores(self, user_ids: np.ndarray) -> torch.Tensor:
        """float32 ``[len(user_ids), n_items]`` scores, owned by the caller."""
        ...


def resolve_backend(device: str | torch.device, backend: str = "auto") -> Backend:
    """``"auto"`` → NumPy/OpenBLAS on CPU (measured ~2.5× faster than torch's CPU matmul
    for d = 64 on the 2-core machine), torch on any other device (``"cuda"``)."""
    device = torch.device(device)
    if backend == "auto":
        return "numpy" if device.type == "cpu" else "torch"
    if backend not in ("numpy", "torch"):
        raise ValueError(f"backend must be 'auto', 'numpy' or 'torch', got {backend!r}")
    if backend == "numpy" and device.type != "cpu":
        raise ValueError("the numpy backend only runs on device='cpu'")
    return backend  # type: ignore[return-value]


def _to_numpy(array: Any) -> np.ndarray:
    if isinstance(array, torch.Tensor):
        return array.detach().cpu().numpy()
    return np.asarray(array)


def _to_tensor(array: Any, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(array, torch.Tensor):
        return array.detach().to(device=device, dtype=dtype)
    return torch.as_tensor(np.asarray(array), device=device, dtype=dtype)


class _NumpyEmbeddingSource:
    """score = user_emb[u] · item_emb[i], float64 OpenBLAS matmul, rounded to float32.

    Besides these exact scores (:meth:`scores`) it offers a fast float32 approximation
    (:meth:`approx_scores`, one sgemm) with a rigorous per-user error bound
    (:meth:`error_bound`) and exact scores of selected items (:meth:`exact_scores_at`);
    :func:`recrepro.evaluation.ranking.select_topk_refined` combines them into the exact
    top-K at float32 speed.
    """

    def __init__(self, user_emb: Any, item_emb: Any, max_batch: int) -> None:
        self.user_emb = _to_numpy(user_emb)
        item = _to_numpy(item_emb)
        if self.user_emb.ndim != 2 or item.ndim != 2 or self.user_emb.shape[1] != item.shape[1]:
            raise ValueError(f"embedding shapes do not match: user {self.user_emb.shape}, item {item.shape}")
        self.item_emb64 = np.ascontiguousarray(item, dtype=np.float64)
        self.item_emb32 = np.ascontiguousarray(item, dtype=np.float32)
        self.n_items, self.dim = self.item_emb64.shape
        self._max_item_norm = float(np.sqrt((self.item_emb64**2).sum(axis=1)).max()) if self.n_items else 0.0
        self._out = np.empty((max(1, max_batch), self.n_items), dtype=np.float32)
        self._block: np.ndarray | None = None

    def _exact_into(self, user_ids: np.ndarray, out: np.ndarray) -> None:
        if self._block is None:
            self._block = np.empty((min(_F64_BLOCK_ROWS, max(2, self._out.shape[0])), self.n_items))
        item_t = self.item_emb64.T
        b = len(user_ids)
        for start in range(0, b, self._block.shape[0]):
            stop = min(b, start + self._block.shape[0])
            users64 = self.user_emb[user_ids[start:stop]].astype(np.float64)
            if users64.shape[0] == 1:
                # A single row would go through gemv, whose summation order differs from
                # gemm's; a duplicated row keeps it on the gemm path like other batches.
                users64 = np.repeat(users64, 2, axis=0)
            block = self._block[: users64.shape[0]]
            np.matmul(users64, item_t, out=block)
            np.copyto(out[start:stop], block[: stop - start], casting="same_kind")

    def scores(self, user_ids: np.ndarray) -> torch.Tensor:
        """Exact scores (float64 accumulation, one rounding to float32) in the reused buffer."""
        b = len(user_ids)
        if b > self._out.shape[0]:
            raise ValueError(f"batch of {b} users exceeds the buffer of {self._out.shape[0]}")
        out = self._out[:b]
        self._exact_into(user_ids, out)
        return torch.from_numpy(out)

    def exact_rows(self, user_ids: np.ndarray) -> np.ndarray:
        """Exact scores in a freshly allocated array (for the few rows that need them)."""
        out = np.empty((len(user_ids), self.n_items), dtype=np.float32)
        self._exact_into(user_ids, out)
        return out

    def approx_scores(self, user_ids: np.ndarray) -> torch.Tensor:
        """float32 sgemm scores in the reused buffer (last bits depend on the batch)."""
        b = len(user_ids)
        if b > self._out.shape[0]:
            raise ValueError(f"batch of {b} users exceeds the buffer of {self._out.shape[0]}")
        out = self._out[:b]
        np.matmul(self.user_emb[user_ids].astype(np.float32, copy=False), self.item_emb32.T, out=out)
        return torch.from_numpy(out)

    def error_bound(self, user_ids: np.ndarray) -> np.ndarray:
        """Per user, a bound on ``|approx score - exact score|`` over all items (float64).

        Any summation order satisfies ``|fl(x·y) - x·y| <= γ_n Σ|x_i y_i|`` with
        ``γ_n = n u / (1 - n u)``, ``u = 2**-24`` (Higham, *Accuracy and Stability of
        Numerical Algorithms*, §3.1); ``n = d + 2`` also covers rounding float64 inputs to
        float32, and ``Σ|x_i y_i| <= ||x|| max_j ||y_j||`` (Cauchy–Schwarz).  The exact
        score's own rounding (half an ulp) and the float64 error are covered by the
        factor 2 and the absolute term.
        """
        unit = 2.0**-24
        n_terms = self.dim + 2
        gamma = n_terms * unit / (1.0 - n_terms * unit)
        users64 = self.user_emb[user_ids].astype(np.float64)
        norms = np.sqrt((users64**2).sum(axis=1))
        return 2.0 * gamma * norms * self._max_item_norm + 1e-30

    def exact_scores_at(self, user_ids: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Exact float32-rounded scores of ``items[b, c]`` for ``user_ids[b]``."""
        users64 = self.user_emb[user_ids].astype(np.float64)
        return np.einsum("bd,bcd->bc", users64, self.item_emb64[items]).astype(np.float32)


class _TorchEmbeddingSource:
    """Same as :class:`_NumpyEmbeddingSource` with torch on ``device`` (float64 mm → float32)."""

    def __init__(self, user_emb: Any, item_emb: Any, device: torch.device) -> None:
        self.device = device
        self.user_emb = _to_tensor(user_emb, device, torch.float64)
        self.item_emb = _to_tensor(item_emb, device, torch.float64)
        if self.user_emb.ndim != 2 or self.item_emb.ndim != 2 or self.user_emb.shape[1] != self.item_emb.shape[1]:
            raise ValueError(
                f"embedding shapes do not match: user {tuple(self.user_emb.shape)}, item {tuple(self.item_emb.shape)}"
            )
        self.n_items = int(self.item_emb.shape[0])

    def scores(self, user_ids: np.ndarray) -> torch.Tensor:
        index = torch.as_tensor(user_ids, device=self.device, dtype=torch.long)
        return (self.user_emb.index_select(0, index) @ self.item_emb.T).to(torch.float32)


class _CallableSource:
    """Wraps ``score_batch(user_ids) -> [b, n_items]`` (NumPy or torch)."""

    def __init__(self, fn: Callable[[np.ndarray], Any], n_items: int, backend: Backend, device: torch.device,
                 max_batch: int) -> None:
        self.fn = fn
        self.n_items = n_items
        self.backend = backend
        self.device = device
        self._out = np.empty((max(1, max_batch), n_items), dtype=np.float32) if backend == "numpy" else None

    def scores(self, user_ids: np.ndarray) -> torch.Tensor:
        raw = self.fn(user_ids)
        b = len(user_ids)
        if tuple(raw.shape) != (b, self.n_items):
            raise ValueError(f"score_batch returned shape {tuple(raw.shape)}, expected {(b, self.n_items)}")
        if self.backend == "numpy":
            out = self._out[:b]
            # Always copy: the evaluators overwrite excluded cells with -inf and must not
            # touch an array the model still owns.
            np.copyto(out, _to_numpy(raw), casting="same_kind")
            return torch.from_numpy(out)
        if isinstance(raw, torch.Tensor):
            return raw.detach().to(device=self.device, dtype=torch.float32, copy=True).contiguous()
        return torch.tensor(np.asarray(raw), device=self.device, dtype=torch.float32)


def embedding_pair(score_source: Any) -> tuple[Any, Any] | None:
    """``(user_emb, item_emb)`` when ``score_source`` scores by a dot product, else ``None``.

    That is a pair ``(user_emb, item_emb)`` itself, or an object whose ``user_factors`` and
    ``item_factors`` are both not ``None`` (a dot-product :class:`recrepro.models.base.Recommender`).
    """
    if isinstance(score_source, (tuple, list)) and len(score_source) == 2:
        return score_source
    if getattr(score_source, "user_factors", None) is not None and getattr(score_source, "item_factors", None) is not None:
        return (score_source.user_factors, score_source.item_factors)
    return None


def resolve_score_source(score_source: Any, n_items: int, *, backend: Backend, device: str | torch.device,
                         max_batch: int) -> ScoreSource:
    """Build a :class:`ScoreSource` from what the caller passed.

    Accepted, in this order of precedence:

    1. a pair ``(user_emb [n_users, d], item_emb [n_items, d])`` (NumPy or torch): dot product;
    2. an object whose ``user_factors`` and ``item_factors`` are both not ``None``
       (a :class:`recrepro.models.base.Recommender` of the dot-product kind): dot product;
    3. an object with a ``score(user_ids)`` method (any other ``Recommender``);
    4. a callable ``score_batch(user_ids: np.ndarray) -> [b, n_items]``.
    """
    device = torch.device(device)
    embeddings = embedding_pair(score_source)
    if embeddings is not None:
        source: ScoreSource
        if backend == "numpy":
            source = _NumpyEmbeddingSource(embeddings[0], embeddings[1], max_batch)
        else:
            source = _TorchEmbeddingSource(embeddings[0], embeddings[1], device)
        if source.n_items != n_items:
            raise ValueError(f"item embeddings have {source.n_items} rows but the interactions have {n_items} items")
        return source
    score_method = getattr(score_source, "score", None)
    if callable(score_method):
        return _CallableSource(score_method, n_items, backend, device, max_batch)
    if callable(score_source):
        return _CallableSource(score_source, n_items, backend, device, max_batch)
    raise TypeError(
        "score_source must be (user_emb, item_emb), a Recommender, or a callable score_batch(user_ids); "
        f"got {type(score_source).__name__}"
    )
