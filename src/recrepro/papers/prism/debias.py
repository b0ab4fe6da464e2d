"""Popularity-debiasing baselines of PRISM's Appendix D.2 (Loveland et al., KDD 2025).

The paper compares PRISM + DirectAU with three debiasing methods, "IPL and ReSN applied
to BPR, MACR with its BCE loss, as recommended in their papers".  Each is a loss option
of the PRISM trainer (:mod:`recrepro.papers.prism.trainer`): ``ipl``, ``resn``, ``macr``.

- :func:`ipl_regulariser` — IPL (Liu et al., SIGIR 2023, "Popularity Debiasing from
  Exposure to Interaction in Collaborative Filtering"): the interaction-wise popularity
  criterion asks that the ratio ``r_i = C_i / Q_i^{2−β}`` be equal across items, where
  ``C_i = Σ_{u ∈ U_i^+} σ(ŷ_ui)`` sums the predicted interaction probabilities of the
  item's positive users, ``Q_i`` is the item's training degree and ``β`` the dataset's
  popularity exponent; the loss adds ``λ_f · std_i(r_i)``.  As in PRISM's code the sums
  run over the batch's positive pairs (the IPL code sums over all training positives in
  one full-batch step); the standard deviation is over the batch's distinct positive
  items (PRISM's code takes it over the whole item table, where items without a
  positive in the batch contribute ``r = 0``): docs/deviations.md#prism-debias-baselines.
- :func:`resn_regulariser` — ReSN (Lin et al., WSDM 2025, "How Do Recommendation Models
  Amplify Popularity Bias? An Analysis from the Spectral Perspective"): penalises the
  principal singular value of the score matrix ``Y = U Vᵀ``, estimated as
  ``‖Y Yᵀ e‖² / ‖Yᵀ e‖²`` (``e`` the all-ones vector; one power-iteration step from the
  popularity direction).  Computed right to left in ``O((n_u + n_i) d)``, never forming
  ``Y``.
- :class:`MACRNet` / :func:`macr_loss` — MACR (Wei et al., KDD 2021, "Model-Agnostic
  Counterfactual Reasoning for Eliminating Popularity Bias in Recommender Systems"),
  its §3-4 (the equation numbers of that paper are not checked here): training scores ``ŷ_ui = ŷ_k · σ(ŷ_i) · σ(ŷ_u)`` fuse the matching
  score ``ŷ_k = u·i`` with an item module ``ŷ_i = w_Iᵀ i`` and a user module
  ``ŷ_u = w_Uᵀ u``; the loss is ``L_O + α L_I + β L_U`` of binary cross-entropies with
  one sampled negative per positive; ranking uses the counterfactual score
  ``(ŷ_k − c) · σ(ŷ_i) · σ(ŷ_u)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MACRNet", "ipl_regulariser", "macr_fused", "macr_loss", "resn_regulariser"]


def ipl_regulariser(pos_scores: torch.Tensor, items: torch.Tensor, item_degree: torch.Tensor,
                    exponent: float) -> torch.Tensor:
    r"""IPL's regulariser :math:`\operatorname{std}_i\, C_i / Q_i^{2-\beta}` over the batch's positive items.

    Parameters
    ----------
    pos_scores:
        ``[B]`` raw scores ``ŷ_ui`` (dot products) of the batch's positive pairs.
    items:
        ``[B]`` item index of each positive pair.
    item_degree:
        ``[n_items]`` training degrees ``Q_i`` (float).
    exponent:
        IPL's popularity exponent ``β`` (PRISM's code: 1.826 ML-1M, 1.285 Gowalla, 1.552
        Yelp2018, 1.446 Amazon-Book).

    Returns
    -------
    torch.Tensor
        The sample standard deviation (``n − 1``) of ``r_i`` over the distinct items;
        0 when the batch has fewer than two distinct items.
    """
    uniq, inverse = torch.unique(items, return_inverse=True)
    if uniq.numel() < 2:
        return pos_scores.sum() * 0.0
    c = torch.zeros(uniq.numel(), dtype=pos_scores.dtype, device=pos_scores.device)
    c = c.index_add(0, inverse, torch.sigmoid(pos_scores))
    q = item_degree[uniq].to(pos_scores.dtype).clamp_min(1.0)
    return (c / q.pow(2.0 - exponent)).std()


def resn_regulariser(users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
    r"""ReSN's spectral penalty :math:`\|U V^\top V U^\top e\|^2 / \|V U^\top e\|^2`.

    Parameters
    ----------
    users:
        ``[n_u, d]`` embeddings ``U`` (the batch's distinct users).
    items:
        ``[n_i, d]`` embeddings ``V`` (the batch's distinct items).
    """
    ue = users.sum(0)                  # Uᵀ e            [d]
    item_pop = items @ ue              # V Uᵀ e = Yᵀ e   [n_i]
    back = users @ (items.T @ item_pop)  # U Vᵀ V Uᵀ e = Y Yᵀ e [n_u]
    return back.pow(2).sum() / item_pop.pow(2).sum().clamp_min(1e-12)


def macr_fused(user: torch.Tensor, item: torch.Tensor, w_user: torch.Tensor,
               w_item: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """MACR's training logits: ``(ŷ_k·σ(ŷ_i)·σ(ŷ_u), ŷ_i, ŷ_u)`` for ``[B, d]`` rows."""
    y_u = user @ w_user
    y_i = item @ w_item
    y_k = (user * item).sum(-1)
    return y_k * torch.sigmoid(y_i) * torch.sigmoid(y_u), y_i, y_u


def _bce(pos_logit: torch.Tensor, neg_logit: torch.Tensor) -> torch.Tensor:
    return (F.softplus(-pos_logit) + F.softplus(neg_logit)).mean()


def macr_loss(user: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, w_user: torch.Tensor,
              w_item: torch.Tensor, alpha: float = 1e-3, beta: float = 1e-3) -> torch.Tensor:
    r"""MACR's multi-task loss :math:`L_O + \alpha L_I + \beta L_U` (Wei et al. 2021).

    Each term is the mean binary cross-entropy ``−ln σ(x⁺) − ln(1 − σ(x⁻))`` of a positive
    and its sampled negative: ``L_O`` on the fused logits, ``L_I`` on the item module's
    ``ŷ_i``, ``L_U`` on the user module's ``ŷ_u`` (the same user on both sides).

    Parameters
    ----------
    user, pos, neg:
        ``[B, d]`` user, positive-item and negative-item embeddings.
    w_user, w_item:
        ``[d]`` weights of the user and item modules.
    alpha, beta:
        Weights of ``L_I`` and ``L_U`` (PRISM's code and MACR's defaults: 1e-3).
    """
    fused_p, yi_p, yu_p = macr_fused(user, pos, w_user, w_item)
    fused_n, yi_n, yu_n = macr_fused(user, neg, w_user, w_item)
    return _bce(fused_p, fused_n) + alpha * _bce(yi_p, yi_n) + beta * _bce(yu_p, yu_n)


class MACRNet(nn.Module):
    """A backbone plus MACR's user and item modules (``Linear(d, 1)`` without bias).

    ``final_tables`` returns tables whose dot products are MACR's counterfactual ranking
    scores: with ``s_u = σ(w_Uᵀu)``, ``s_i = σ(w_Iᵀi)``,
    ``[s_u u, −c s_u] · [s_i i, s_i] = (u·i − c) s_u s_i`` — so the batched evaluation
    core ranks MACR unchanged.  ``user_emb`` / ``item_emb`` / ``apply_prism`` /
    ``encoders`` are the backbone's.
    """

    def __init__(self, backbone: nn.Module, dim: int, c: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        self.backbone = backbone
        gen = torch.Generator().manual_seed(int(seed) + 7919)
        bound = float(dim) ** -0.5  # nn.Linear's default U(−1/√d, 1/√d)
        self.w_user = nn.Parameter((torch.rand(dim, generator=gen) * 2.0 - 1.0) * bound)
        self.w_item = nn.Parameter((torch.rand(dim, generator=gen) * 2.0 - 1.0) * bound)
        self.c = float(c)

    @property
    def user_emb(self) -> torch.Tensor:
        return self.backbone.user_emb

    @property
    def item_emb(self) -> torch.Tensor:
        return self.backbone.item_emb

    def apply_prism(self, *args, **kwargs) -> None:
        self.backbone.apply_prism(*args, **kwargs)

    def encoders(self):
        return self.backbone.encoders()

    def matching_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The backbone's final tables (the matching score ``ŷ_k`` alone)."""
        return self.backbone.final_tables()

    def final_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        users, items = self.backbone.final_tables()
        s_u = torch.sigmoid(users @ self.w_user).unsqueeze(1)
        s_i = torch.sigmoid(items @ self.w_item).unsqueeze(1)
        return (torch.cat([users * s_u, -self.c * s_u], dim=1),
                torch.cat([items * s_i, s_i], dim=1))
