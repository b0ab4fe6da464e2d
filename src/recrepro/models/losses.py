"""Training losses of the PRISM paper (Loveland et al., KDD 2025, Appendix B.4).

All functions take already-looked-up embeddings (rows of the batch) and return a scalar
tensor, the **mean** over the batch (the paper writes sums; the official code and every
optimiser setting in the paper use batch means).

- :func:`bpr_loss` — Eq. (6), dot-product similarity, one negative per positive.
- :func:`ssm_loss` — Eq. (7), sampled softmax with cosine similarity over temperature τ.
- :func:`alignment` / :func:`uniformity` / :func:`directau_loss` — Eqs. (8)-(9),
  DirectAU (Wang et al., KDD 2022) on L2-normalised embeddings.
- :func:`mawu_loss` — Eq. (10), margin-aware alignment plus separately weighted user and
  item uniformity.

Uniformity is computed from the Gram matrix of the normalised rows
(‖x − y‖² = 2 − 2 x·y), i.e. one ``B × d`` by ``d × B`` matmul instead of ``torch.pdist``:
the same value, a dense BLAS kernel.
"""

from __future__ import annotations

import math
import threading

import torch
import torch.nn.functional as F

__all__ = ["alignment", "bpr_loss", "directau_loss", "mawu_loss", "ssm_loss", "uniformity"]


def bpr_loss(user: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    r"""BPR, Eq. (6): :math:`-\operatorname{mean}\ln\sigma(u\cdot i - u\cdot i')`.

    Parameters
    ----------
    user, pos, neg:
        ``[B, d]`` user, positive-item and negative-item embeddings.
    """
    diff = (user * pos).sum(-1) - (user * neg).sum(-1)
    return -F.logsigmoid(diff).mean()


def ssm_loss(user: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, tau: float = 0.2) -> torch.Tensor:
    r"""Sampled softmax, Eq. (7), with cosine similarity over temperature ``tau``.

    .. math:: -\operatorname{mean}_{(u,i)} \log
              \frac{e^{\cos(u,i)/\tau}}{e^{\cos(u,i)/\tau} + \sum_{i'\in S} e^{\cos(u,i')/\tau}}

    Parameters
    ----------
    user, pos:
        ``[B, d]``.
    neg:
        ``[B, N, d]`` negatives per positive (N = 10 in the paper, 20 in the code).
    tau:
        Temperature (0.2 in the paper).
    """
    u = F.normalize(user, dim=-1)
    p = F.normalize(pos, dim=-1)
    n = F.normalize(neg, dim=-1)
    pos_logit = (u * p).sum(-1, keepdim=True) / tau  # [B, 1]
    neg_logit = torch.einsum("bd,bnd->bn", u, n) / tau  # [B, N]
    logits = torch.cat([pos_logit, neg_logit], dim=1)
    return (torch.logsumexp(logits, dim=1) - pos_logit.squeeze(1)).mean()


def alignment(user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
    r"""DirectAU alignment, Eq. (8): :math:`\operatorname{mean}\|\tilde u - \tilde i\|^2` of normalised rows."""
    u = F.normalize(user, dim=-1)
    i = F.normalize(item, dim=-1)
    return (u - i).pow(2).sum(-1).mean()


def uniformity(x: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    r"""Uniformity, Eq. (9): :math:`\log \operatorname{mean}_{a<b} e^{-t\|\tilde x_a-\tilde x_b\|^2}`.

    Over all unordered pairs of distinct rows of ``x`` (as ``torch.pdist``), rows
    L2-normalised first; uses ‖x̃_a − x̃_b‖² = 2 − 2 x̃_a·x̃_b.  Fewer than two rows
    give 0.
    """
    n = x.shape[0]
    if n < 2:
        return x.sum() * 0.0
    return _UnitUniformity.apply(F.normalize(x, dim=-1), float(t))


class _UnitUniformity(torch.autograd.Function):
    r"""``log mean_{a≠b} exp(−t‖z_a − z_b‖²)`` of unit rows ``z`` with a hand-written backward.

    With ``E_ab = exp(−t(2 − 2 z_a·z_b)) = e^{−2t} E'_ab``, ``E'_ab = exp(2t z_a·z_b)``
    (``E_aa = 0``) and ``S = Σ E``, the value is ``log S − log(n(n−1))`` (the ordered-pair
    mean equals the unordered one) and ``∂/∂z_a = (4t/S)(E z)_a = (4t/S')(E' z)_a`` with
    ``S' = Σ E'``: the constant ``e^{−2t}`` only shifts the log.  Entries of ``E'`` lie in
    ``[e^{−2t}, e^{2t}]`` (no overflow for the usual t ≤ 10).

    The forward pass computes ``G = E' [z | 1]`` (the gradient direction and, in its last
    column, the row sums that give ``S'``) block by block over the upper triangle of the
    symmetric ``E'``: each ``block × (n − lo)`` panel is one ``mm`` plus an in-place ``exp``
    and feeds both its rows and, transposed, its columns.  That halves the ``exp`` and the
    Gram products of a full ``E'``, keeps each panel cache-sized instead of a B×B matrix
    in memory, and leaves nothing but ``G`` for the backward (a scaling).

    On CPU the panels are written into one reused workspace (:func:`_panel_workspace`)
    rather than a fresh ``block × n`` tensor each: a panel of a 4,096-row batch is ~7 MB,
    which the allocator maps and zero-fills anew on every allocation (≈ 5 % of a paper-tier
    DirectAU step, docs/performance.md).  The same ``mm`` with ``out=`` gives the same bits.
    """

    block = 512  # rows per panel: measured fastest of 512/1024/2048 at B = 4096, d = 64 (docs/performance.md)

    @staticmethod
    def forward(ctx, z: torch.Tensor, t: float) -> torch.Tensor:
        n, d = z.shape
        scaled = z * (2.0 * t)
        z_one = torch.cat([z, z.new_ones(n, 1)], dim=1)
        g = z.new_zeros(n, d + 1)
        block = _UnitUniformity.block
        work = _panel_workspace(min(block, n) * n, z)
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            # rows lo:hi, columns lo:n
            if work is None:
                panel = torch.mm(scaled[lo:hi], z[lo:].T).exp_()
            else:
                out = work[: (hi - lo) * (n - lo)].view(hi - lo, n - lo)
                panel = torch.mm(scaled[lo:hi], z[lo:].T, out=out).exp_()
            panel.diagonal(0).zero_()  # E'_aa = 0: distinct pairs only
            g[lo:hi].addmm_(panel, z_one[lo:])
            if hi < n:  # the mirrored lower-triangle part of the same entries
                g[hi:].addmm_(panel[:, hi - lo :].T, z_one[lo:hi])
        total = g[:, d].sum()
        ctx.save_for_backward(g[:, :d], total)
        ctx.t = t
        return total.log() - 2.0 * t - math.log(n * (n - 1))

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        g, total = ctx.saved_tensors
        return g * (grad_out * 4.0 * ctx.t / total), None


_WORKSPACE = threading.local()


def _panel_workspace(numel: int, like: torch.Tensor) -> torch.Tensor | None:
    """A flat CPU buffer of at least ``numel`` elements of ``like``'s dtype, kept per thread.

    ``None`` for a tensor off the CPU (CUDA's caching allocator already reuses memory).
    The buffer grows by a quarter
    beyond the request so that batches of slightly different sizes do not reallocate it.
    Its contents are scratch: nothing keeps a view of it past one forward pass.
    """
    if like.device.type != "cpu":
        return None
    buf = getattr(_WORKSPACE, "buf", None)
    if buf is None or buf.dtype != like.dtype or buf.numel() < numel:
        buf = torch.empty(numel + numel // 4, dtype=like.dtype)
        _WORKSPACE.buf = buf
    return buf


def directau_loss(user: torch.Tensor, item: torch.Tensor, gamma: float = 1.0,
                  user_unique: torch.Tensor | None = None, item_unique: torch.Tensor | None = None) -> torch.Tensor:
    r"""DirectAU: ``alignment + γ · (unif(U_b) + unif(I_b)) / 2`` (Wang et al. 2022; paper Eqs. 8-9).

    Parameters
    ----------
    user, item:
        ``[B, d]`` embeddings of the batch's positive pairs.
    gamma:
        Uniformity weight γ (the paper cross-validates {1, 2, 5}).
    user_unique, item_unique:
        Embeddings of the batch's *distinct* users/items for the uniformity terms (the
        official code's choice); default: ``user`` / ``item`` as given.
    """
    uu = user if user_unique is None else user_unique
    ii = item if item_unique is None else item_unique
    return alignment(user, item) + gamma * (uniformity(uu) + uniformity(ii)) / 2.0


def mawu_loss(user: torch.Tensor, item: torch.Tensor, margin_user: torch.Tensor, margin_item: torch.Tensor,
              gamma_user: float = 1.0, gamma_item: float = 1.0,
              user_unique: torch.Tensor | None = None, item_unique: torch.Tensor | None = None) -> torch.Tensor:
    r"""MAWU, Eq. (10): :math:`-\operatorname{mean}\cos(\theta_{u,i} + M_u + M_i)` + γ_u·unif(U) + γ_i·unif(I).

    Parameters
    ----------
    user, item:
        ``[B, d]`` embeddings of positive pairs.
    margin_user, margin_item:
        ``[B]`` learnable margins ``M_u``, ``M_i`` of the rows.
    gamma_user, gamma_item:
        Separate uniformity weights.
    """
    cos = (F.normalize(user, dim=-1) * F.normalize(item, dim=-1)).sum(-1)
    theta = torch.acos(cos.clamp(-1.0 + 1e-6, 1.0 - 1e-6))
    align = -torch.cos(theta + margin_user + margin_item).mean()
    uu = user if user_unique is None else user_unique
    ii = item if item_unique is None else item_unique
    return align + gamma_user * uniformity(uu) + gamma_item * uniformity(ii)
