"""What a checkpoint is keyed by: the run's settings and data (:func:`settings_key`,
:func:`data_fingerprint`) and the code that computes (:func:`code_fingerprint`, :func:`is_computing`).

A checkpoint is resumed only under the very same settings key and only by the same code that trains
(:mod:`recrepro.runtime.checkpoints`, "The code that wrote a checkpoint").
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["code_fingerprint", "data_fingerprint", "is_computing", "settings_key"]


def _json_default(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, (Path, torch.device, torch.dtype)):
        return str(obj)
    raise TypeError(f"settings_key: cannot encode {type(obj).__name__} {obj!r}")


def settings_key(obj: Any) -> str:
    """sha256 (hex) of the canonical JSON of ``obj`` (sorted keys, no whitespace).

    Dataclasses, numpy scalars/arrays, paths and sets are encoded; tuples become lists.
    Put everything that changes the trajectory in ``obj`` (settings, seed, device,
    :func:`data_fingerprint` of the training data): a checkpoint is resumed only under the
    very same key.
    """
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True,
                      default=_json_default)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def data_fingerprint(*matrices: Any) -> str:
    """sha256 over the shape and CSR arrays of each matrix (``None`` allowed).

    Cheap next to training (~40 ms for 10M interactions) and tells two datasets of the
    same shape apart, so a checkpoint of another split is never resumed.
    """
    import scipy.sparse as sp

    h = hashlib.sha256()
    for m in matrices:
        if m is None:
            h.update(b"none;")
            continue
        csr = sp.csr_matrix(m)
        csr.sort_indices()
        h.update(repr(csr.shape).encode())
        for part in (csr.indptr.astype(np.int64), csr.indices.astype(np.int64), csr.data.astype(np.float64)):
            h.update(np.ascontiguousarray(part).data)
        h.update(b";")
    return h.hexdigest()


#: What a run computes with, by path under the package (a folder ends in ``/``): a change in one of
#: these can change what a run trains. Everything else reads, draws or reports (``cli/``,
#: ``records/``, ``reporting/``, ``scorecard/``, ``paperlist.py``), or is the data stage, whose output
#: every checkpoint key holds already (``datasets/``: :func:`data_fingerprint`).
_COMPUTING_PATHS = ("__init__.py", "config.py", "io.py", "runtime/", "models/", "evaluation/", "baselines/",
                    "papers/")
#: Inside those, what only reads or draws: a figure, each paper's record checks (``drift.py``), tables,
#: figures and rule helpers, the shared rule helpers and the leak audit.
_NOT_COMPUTING_PATHS = ("baselines/figure.py", "papers/rules.py", "papers/leaks.py", "papers/*/drift.py",
                        "papers/*/figures.py", "papers/*/tables.py", "papers/*/rules.py")
#: Modules of a paper package that every ``recrepro`` process loads or that never train: the command
#: line registers each paper's verbs (``cli``), the drift checks read records.
_PAPER_MODULES_NOT_TRAINING = frozenset({"cli", "drift"})


def is_computing(path: str) -> bool:
    """Whether the module at ``path`` (relative to the package, POSIX) is code a run computes with."""
    from fnmatch import fnmatchcase

    inside = any(path == p or (p.endswith("/") and path.startswith(p)) for p in _COMPUTING_PATHS)
    return inside and not any(fnmatchcase(path, p) for p in _NOT_COMPUTING_PATHS)


def _papers_in_use() -> frozenset[str]:
    """The paper packages (``recrepro.papers.<name>``) this process has loaded a module of, other than
    the ones every process loads to register its verbs.

    A paper's code never imports another paper (the import-linter contract ``papers-independent``),
    and one process trains one paper's run (or none: the strong baselines sit below the papers), so
    the code of a paper it has not loaded cannot change what it trains.
    """
    import sys

    used = set()
    for name in list(sys.modules):
        parts = name.split(".")
        if len(parts) >= 4 and parts[:2] == ["recrepro", "papers"] and parts[3] not in _PAPER_MODULES_NOT_TRAINING:
            used.add(parts[2])
    return frozenset(used)


def _git_commit(folder: Path) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--verify", "HEAD"], capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> dict[str, Any]:
    """The code this process trains with: ``{"source_sha256", "commit", "recrepro"}``.

    ``source_sha256`` is the sha256 over the relative path and bytes of every ``.py`` file of
    the installed ``recrepro`` package that a run computes with (:func:`is_computing`: by package
    and path, ``_COMPUTING_PATHS`` less ``_NOT_COMPUTING_PATHS``), less the packages of the papers
    this process does not train (:func:`_papers_in_use`: an edit to λOpt leaves a FedRAP
    checkpoint resumable), sorted by path: it changes with any edit to
    what trains, committed or not.  ``commit`` is the checkout's git commit (``None`` outside a
    checkout).  Taken once per process, at the first save or load, when the run's paper is
    loaded (the code a process runs is the code it loaded), ~10 ms.
    """
    import recrepro

    root = Path(recrepro.__file__).resolve().parent
    papers = _papers_in_use()
    h = hashlib.sha256()
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root)
        if not is_computing(rel.as_posix()):
            continue
        if len(rel.parts) > 2 and rel.parts[0] == "papers" and rel.parts[1] not in papers:
            continue
        h.update(rel.as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return {"source_sha256": h.hexdigest(), "commit": _git_commit(root),
            "recrepro": getattr(recrepro, "__version__", None)}
