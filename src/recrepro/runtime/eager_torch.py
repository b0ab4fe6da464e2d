"""Keep ``torch._dynamo`` (the ``torch.compile`` tracer) out of the command-line processes.

Every ``torch.optim`` optimizer imports ``torch._dynamo`` on its first call (``Optimizer`` methods
are wrapped in ``torch._disable_dynamo`` and ``step`` calls ``torch._dynamo.graph_break()``). That
import costs 3-4 s of CPU, about as much as ``import torch`` itself, and a smoke-tier training job
trains for under a second: it was a third of the smoke run's CPU time.

Nothing in recrepro compiles. Outside compilation both calls the optimizers make are identities:
``torch._dynamo.disable(fn)`` returns a wrapper that just calls ``fn``, and ``graph_break()`` does
nothing. So the ``recrepro`` command registers a stand-in module that provides exactly those two,
before torch is imported. Any other attribute asked of it loads the real ``torch._dynamo`` in its
place (and from then on ``import torch._dynamo`` gives the real one), so code that does need the
tracer still gets it. ``RECREPRO_TORCH_DYNAMO=1`` turns the stand-in off.

Only the command-line entry point calls :func:`defer_dynamo`; importing recrepro as a library
changes nothing.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["DYNAMO_ENV", "defer_dynamo", "load_dynamo"]

#: Set to 1 to load the real ``torch._dynamo`` as torch does by default.
DYNAMO_ENV = "RECREPRO_TORCH_DYNAMO"
_NAME = "torch._dynamo"


def _disable(fn: Callable | None = None, recursive: bool = True, **kwargs: Any) -> Callable:
    """``torch._dynamo.disable`` outside compilation: ``fn`` itself (or a decorator returning it)."""
    return fn if fn is not None else (lambda f: f)


def _graph_break(*args: Any, **kwargs: Any) -> None:
    """``torch._dynamo.graph_break`` outside compilation: nothing."""


def load_dynamo() -> types.ModuleType:
    """The real ``torch._dynamo``, put in the stand-in's place where it is registered.

    Code that compiles calls this first: ``torch.compile`` imports submodules of
    ``torch._dynamo`` (``torch._dynamo.backends``), which the stand-in, a plain module, has not.
    """
    if sys.modules.get(_NAME) is _STAND_IN:
        del sys.modules[_NAME]
        torch = sys.modules.get("torch")
        if torch is not None and getattr(torch, "__dict__", {}).get("_dynamo") is _STAND_IN:
            delattr(torch, "_dynamo")
    return importlib.import_module(_NAME)


def _load_real(name: str) -> Any:
    if name.startswith("__"):  # the import system probes dunders (``__file__``, ``__path__``)
        raise AttributeError(name)
    return getattr(load_dynamo(), name)


_STAND_IN = types.ModuleType(_NAME, "recrepro's stand-in for torch._dynamo (recrepro.runtime.eager_torch)")
_STAND_IN.disable = _disable
_STAND_IN.graph_break = _graph_break
_STAND_IN.__getattr__ = _load_real


def defer_dynamo() -> bool:
    """Register the stand-in unless the real module is loaded or ``RECREPRO_TORCH_DYNAMO=1``.

    Returns
    -------
    bool
        Whether the stand-in is now the registered ``torch._dynamo``.
    """
    if os.environ.get(DYNAMO_ENV, "").strip() in {"1", "true", "yes"}:
        return False
    if _NAME not in sys.modules:
        sys.modules[_NAME] = _STAND_IN
    return sys.modules[_NAME] is _STAND_IN
