"""The strong simple baselines themselves (:mod:`recrepro.baselines.strong`): which models, their classes,
how one is made from a grid point, and how a point's settings are written."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the models are imported on use: the rules import the strong-baseline modules at parse time
    from recrepro.models.base import Recommender

__all__ = ["MODELS", "MODEL_CLASSES", "make_model", "model_class", "setting_floors", "settings_text"]

#: Models and whether a seed changes their fit.
MODELS = {"mostpop": False, "itemknn": False, "rp3beta": False, "ease": False, "ials": True}


#: Each strong baseline's class: (module under recrepro.models, class name); imported on use.
MODEL_CLASSES = {"mostpop": ("baselines", "MostPopular"), "itemknn": ("itemknn", "ItemKNN"),
                 "rp3beta": ("rp3beta", "RP3beta"), "ease": ("ease", "EASE"), "ials": ("ials", "IALS")}


def model_class(name: str) -> type[Recommender]:
    """The class of the strong baseline ``name``."""
    if name not in MODEL_CLASSES:
        raise ValueError(f"unknown strong baseline {name!r}; known: {', '.join(MODELS)}")
    module, cls = MODEL_CLASSES[name]
    return getattr(importlib.import_module(f"recrepro.models.{module}"), cls)


def make_model(name: str, settings: Mapping[str, Any], seed: int = 0, device: str = "cpu") -> Recommender:
    """The model ``name`` with ``settings`` (a grid point merged over the fixed settings)."""
    cls = model_class(name)
    if name == "mostpop":
        return cls()
    if name == "ease":
        return cls(device=device, **settings)
    if name == "ials":
        return cls(seed=seed, device=device, log_losses=False, **settings)
    return cls(**settings)


def setting_floors(model: str) -> dict[str, float]:
    """The strong baseline ``model``'s :attr:`~recrepro.models.base.Recommender.SETTING_FLOORS`."""
    return dict(model_class(model).SETTING_FLOORS)


def settings_text(settings: Mapping[str, Any]) -> str:
    """``"alpha=0.5, k=200"``: a grid point's settings, sorted by name, floats as ``{:g}`` writes them."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(settings.items()))
