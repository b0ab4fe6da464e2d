"""FedRAP's variant registry: a run's settings (``method`` plus the model's keys) -> a model.
"""

from __future__ import annotations

from typing import Any

from recrepro.models.base import Recommender
from recrepro.papers.fedrap.central import MF_KEYS, CentralMF, CentralNCF
from recrepro.papers.fedrap.config import FederatedConfig
from recrepro.papers.fedrap.fedncf import FedNCF
from recrepro.papers.fedrap.fedrap import FederatedRecommender

__all__ = ["make_variant"]


def make_variant(settings: dict[str, Any], *, seed: int, device: str = "cpu",
                 memory_budget_mb: float | None = None) -> Recommender:
    """A model from a variant's settings (``method`` plus FederatedConfig / CentralMF keys)."""
    settings = dict(settings)
    settings.pop("round_cap", None)  # already applied to rounds/epochs (papers.fedrap.rules.rule_settings)
    method = settings.pop("method")
    if method == "mf":
        kw = {k: settings[k] for k in MF_KEYS if k in settings}
        if "rounds" in settings and "epochs" not in kw:
            kw["epochs"] = settings["rounds"]
        if "lr_mf" in settings:
            kw["lr"] = settings["lr_mf"]
        return CentralMF(seed=seed, device=device, **kw)
    if method == "ncf":
        kw = {k: settings[k] for k in MF_KEYS if k in settings and k != "init_std"}
        if "rounds" in settings and "epochs" not in kw:
            kw["epochs"] = settings["rounds"]
        if "lr_mf" in settings:
            kw["lr"] = settings["lr_mf"]
        return CentralNCF(seed=seed, device=device, **kw)
    settings.pop("lr_mf", None)
    settings.pop("epochs", None)
    if memory_budget_mb is not None:
        settings.setdefault("memory_budget_mb", memory_budget_mb)
    config = FederatedConfig(method=method, seed=seed, device=device, **settings)
    if method == "fedncf":
        return FedNCF(config)
    return FederatedRecommender(config)
