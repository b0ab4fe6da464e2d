"""Method names of the PRISM runs and the settings they stand for.

A run directory's ``<method>`` encodes backbone, loss and regularisation, e.g.

=========================  ==========================================================
``mf_bpr_wd0``             MF + BPR, no weight decay, Xavier init
``mf_directau_wd1em6``     coupled (full-table, Adam) weight decay λ = 1e-6
``mf_directau_bwd1em6``    batched weight decay λ = 1e-6 (in-batch rows only)
``mf_ssm_prism``           PRISM α = 1, no weight decay (Table 1's "PRISM")
``mf_directau_prism_a025`` PRISM α = 0.25, no weight decay (Figs. 4-5)
``mf_directau_tunedwd``    the coupled-wd run with the best validation NDCG@20
``mf_ipl_wd0``             IPL on BPR (App. D.2); likewise ``resn`` and ``macr`` (BCE)
``nlmflinear_ssm_prism``   non-linear MF as the official code builds it (no ReLU)
``mf_ssm_wd1em6_lr1em2``   at learning rate 1e-2 instead of the tier's (``_lr<tag>``:
                           Table 1's learning-rate search, ``table.lr_search``)
``mf_ssm_tunedprism``      the PRISM run (over the searched learning rates) with the
                           best validation NDCG@20
=========================  ==========================================================

λ = 0 is one setting whatever the mode: ``method_name(..., weight_decay=0, batched=True)``
is ``..._wd0`` too, so the batched sweep (Fig. 3) reuses the λ = 0 run of Fig. 1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["method_name", "parse_method", "table_arms", "wd_tag"]

_BACKBONES = ("mf", "nlmf", "nlmflinear", "lightgcn")
_LOSSES = ("bpr", "ssm", "directau", "mawu", "ipl", "resn", "macr")
_PATTERN = re.compile(
    r"^(?P<backbone>mf|nlmf|nlmflinear|lightgcn)_(?P<loss>bpr|ssm|directau|mawu|ipl|resn|macr)_"
    r"(?:(?:(?P<mode>wd|bwd)(?P<wd>0|\d+em\d+)|(?P<prism>prism)(?:_a(?P<alpha>\d{3}))?)(?:_lr(?P<lr>\d+em\d+))?"
    r"|(?P<tuned>tunedwd|tunedprism))$"
)


def wd_tag(weight_decay: float) -> str:
    """``0 -> "0"``, ``1e-6 -> "1em6"``, ``5e-4 -> "5em4"`` (mantissa must be an integer)."""
    if weight_decay == 0:
        return "0"
    mantissa, exponent = f"{weight_decay:.0e}".split("e")
    if float(f"{mantissa}e{exponent}") != weight_decay or int(exponent) >= 0:
        raise ValueError(f"weight decay {weight_decay} is not of the form k·10^-n")
    return f"{int(mantissa)}em{-int(exponent)}"


def _wd_value(tag: str) -> float:
    if tag == "0":
        return 0.0
    mantissa, exponent = tag.split("em")
    return float(f"{mantissa}e-{exponent}")


def method_name(backbone: str, loss: str, *, weight_decay: float = 0.0, batched: bool = False,
                alpha: float | None = None, lr: float | None = None) -> str:
    """The run name of a configuration (see the module docstring); ``lr=None``: the tier's learning rate."""
    if backbone not in _BACKBONES or loss not in _LOSSES:
        raise ValueError(f"unknown backbone/loss {backbone!r}/{loss!r}")
    suffix = "" if lr is None else f"_lr{wd_tag(lr)}"
    if alpha is not None:
        base = f"{backbone}_{loss}_prism" if alpha == 1.0 else f"{backbone}_{loss}_prism_a{round(alpha * 100):03d}"
        return base + suffix
    return f"{backbone}_{loss}_{'bwd' if batched and weight_decay > 0 else 'wd'}{wd_tag(weight_decay)}{suffix}"


def parse_method(name: str) -> dict[str, Any]:
    """Inverse of :func:`method_name`: ``backbone, loss, weight_decay, wd_mode, alpha, lr`` (``lr``:
    ``None`` for the tier's learning rate)."""
    match = _PATTERN.match(name)
    if not match or match["tuned"]:
        raise ValueError(f"{name!r} is not a trainable PRISM method name")
    spec: dict[str, Any] = {"backbone": match["backbone"], "loss": match["loss"],
                            "lr": None if match["lr"] is None else _wd_value(match["lr"])}
    if match["prism"]:
        spec.update(alpha=1.0 if match["alpha"] is None else int(match["alpha"]) / 100.0,
                    weight_decay=0.0, wd_mode="none")
    else:
        wd = _wd_value(match["wd"])
        spec.update(alpha=None, weight_decay=wd,
                    wd_mode=("batched" if match["mode"] == "bwd" else "coupled") if wd > 0 else "none")
    return spec


def table_arms(backbone: str, loss: str, weight_decays: Sequence[float], alpha: float,
               extra_lrs: Sequence[float] = ()) -> tuple[dict[str, tuple[float, float | None]], dict[str, float | None]]:
    """Table 1's two arms of one row, in grid order (λ within lr, the tier's lr first): the weight-decay
    candidates ``{method: (λ, lr)}`` and the PRISM candidates ``{method: lr}``; ``lr`` ``None`` is the
    tier's, ``extra_lrs`` the searched ones besides it (``table.lr_search``)."""
    lrs: list[float | None] = [None, *[float(x) for x in extra_lrs]]
    wd = {method_name(backbone, loss, weight_decay=w, lr=lr): (float(w), lr) for lr in lrs for w in weight_decays}
    prism = {method_name(backbone, loss, alpha=alpha, lr=lr): lr for lr in lrs}
    return wd, prism
