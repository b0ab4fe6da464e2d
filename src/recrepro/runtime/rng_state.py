"""Random generator states, as a checkpoint stores them (tensors, dicts of ints): one explicit
generator's (:func:`generator_state`) and the process's global ones (:func:`global_rng_state`), so
that a resumed run draws exactly the numbers an uninterrupted one would have drawn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["generator_state", "global_rng_state", "set_generator_state", "set_global_rng_state"]


def generator_state(gen: np.random.Generator | torch.Generator) -> Any:
    """The state of one explicit generator: numpy's ``bit_generator.state`` or torch's ByteTensor."""
    if isinstance(gen, np.random.Generator):
        return gen.bit_generator.state
    return gen.get_state()


def set_generator_state(gen: np.random.Generator | torch.Generator, state: Any) -> None:
    """Restore a state from :func:`generator_state` into ``gen`` (in place)."""
    if isinstance(gen, np.random.Generator):
        gen.bit_generator.state = state
    else:
        gen.set_state(state)


def global_rng_state() -> dict[str, Any]:
    """torch's global CPU generator (and CUDA's when initialised) and numpy's legacy global state."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(legacy=False)}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_global_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of :func:`global_rng_state`."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
