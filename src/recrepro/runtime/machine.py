"""The machine a run ran on, for its ``provenance.json`` (:mod:`recrepro.records`): the code's git
state, library versions, thread pools, the host and its CPU, memory and CPU time used.

Each of these can change a number or explain why two records of one configuration differ: another
commit, another library version, another thread count (parallel sums in another order) or another
kind of CPU (kernels that dispatch on its SIMD level). None of them ever raises over a missing
fact: a record is never lost to its description.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import resource
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["THREAD_ENV_VARS", "VERSIONED_DISTRIBUTIONS", "git_state", "host_description", "library_versions",
           "peak_rss_mb", "process_cpu_seconds", "thread_settings"]

#: Environment variables that set BLAS/OpenMP thread pools (they change float results).
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)

#: Distributions whose versions go into provenance (recrepro is read from the package).
VERSIONED_DISTRIBUTIONS = ("numpy", "scipy", "pandas", "pyarrow", "torch")


def git_state(repo_dir: str | Path | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the git checkout holding ``repo_dir``.

    Parameters
    ----------
    repo_dir:
        A folder inside the checkout; defaults to the folder of the installed
        ``recrepro`` package (so an editable install reports the project's commit).

    Returns
    -------
    dict
        ``{"commit": str | None, "dirty": bool | None}``. Both are ``None`` when git is
        absent, the folder is not a checkout, or the repository has no commit yet;
        this function never raises. ``dirty`` counts untracked, non-ignored files too,
        because an untracked module can change what runs.
    """
    folder = Path(repo_dir) if repo_dir is not None else Path(__file__).resolve().parent
    commit = _git(folder, "rev-parse", "--verify", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git(folder, "status", "--porcelain")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def _git(folder: Path, *args: str) -> str | None:
    try:
        completed = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.strip()


def library_versions() -> dict[str, str | None]:
    """Versions of Python, the numeric stack, torch and recrepro (``None`` if absent).

    Read from distribution metadata, so torch is not imported just to be versioned.
    """
    import recrepro

    versions: dict[str, str | None] = {"python": platform.python_version()}
    for distribution in VERSIONED_DISTRIBUTIONS:
        try:
            versions[distribution] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            versions[distribution] = None
    versions["recrepro"] = recrepro.__version__
    torch = sys.modules.get("torch")
    versions["torch_cuda"] = getattr(getattr(torch, "version", None), "cuda", None) if torch else None
    return versions


def thread_settings() -> dict[str, Any]:
    """Thread-pool settings that can change floating-point results.

    ``torch_num_threads``/``torch_num_interop_threads`` are ``None`` when the process
    never imported torch (then torch did not compute anything in it).
    """
    torch = sys.modules.get("torch")
    settings: dict[str, Any] = {
        "torch_num_threads": int(torch.get_num_threads()) if torch is not None else None,
        "torch_num_interop_threads": int(torch.get_num_interop_threads()) if torch is not None else None,
        "cpu_count": os.cpu_count(),
    }
    for variable in THREAD_ENV_VARS:
        settings[variable] = os.environ.get(variable)
    return settings


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (``getrusage``; KiB on Linux, bytes on macOS)."""
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    bytes_per_unit = 1 if sys.platform == "darwin" else 1024
    return round(max_rss * bytes_per_unit / (1024 * 1024), 1)


def process_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its finished children so far.

    The measure of a run's work on a shared machine: other jobs stretch its wall time, not this."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 3)


def _device_name(device: str) -> str | None:
    torch = sys.modules.get("torch")
    if torch is None or not str(device).startswith("cuda"):
        return None
    try:
        return str(torch.cuda.get_device_name(torch.device(device)))
    except Exception:  # noqa: BLE001 - a name is a nicety; never fail a finished run over it
        return None


def host_description() -> dict[str, str | None]:
    """The machine a record ran on: hostname, OS, CPU model and the widest SIMD level the CPU offers
    (``AVX512``, ``AVX2``, ``SSE4.2``, from ``/proc/cpuinfo``; elsewhere torch's dispatch level when
    torch is loaded, else None), which numpy's and torch's kernels dispatch to.

    The CPU matters for reproducing a number: two CPUs that dispatch to different SIMD levels round
    some reductions differently, and a long chaotic training (100 federated rounds) carries a 1e-9
    difference of its first round to a different selected round and a visibly different score, so
    two records of one configuration agree bit for bit only on the same kind of CPU.
    """
    model, flags = None, set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model is None:
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
                if model is not None and flags:
                    break
    except OSError:
        pass
    simd = next((name for name, flag in (("AVX512", "avx512f"), ("AVX2", "avx2"), ("SSE4.2", "sse4_2"))
                 if flag in flags), None)
    torch = sys.modules.get("torch")
    if simd is None and torch is not None:
        try:
            simd = str(torch.backends.cpu.get_cpu_capability())
        except (AttributeError, RuntimeError):
            simd = None
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "cpu": model or platform.processor() or None, "cpu_simd": simd}
