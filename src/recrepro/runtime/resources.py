"""What a job asks a cluster for: memory, run time and GPUs, from the dataset's size.

``workflow/rules/common.smk`` wraps :func:`estimate` for the rules' ``resources:`` blocks, so that
no rule carries its own magic numbers. The estimates are deliberately coarse upper bounds of what
the code holds at its peak (documented per kind below), scaled by the Snakemake ``attempt`` so that
a job killed for memory or time is retried with more (``retries`` in ``profiles/slurm``).

Sizes come, in this order, from the processed ``stats.json`` when it already exists, from the
synthetic generator's settings, or from :data:`DATASET_SIZES` (the registry's published counts,
before any filtering, so an over-estimate).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DATASET_SIZES", "KINDS", "DatasetSize", "dataset_size", "estimate"]


@dataclass(frozen=True)
class DatasetSize:
    users: int
    items: int
    interactions: int


# Published raw counts (src/recrepro/datasets/catalogue.yaml descriptions); train + test where split.
DATASET_SIZES: Mapping[str, DatasetSize] = {
    "ml-100k": DatasetSize(943, 1_682, 100_000),
    "ml-1m": DatasetSize(6_040, 3_706, 1_000_209),
    "ml-10m": DatasetSize(69_878, 10_677, 10_000_054),
    "ml-20m": DatasetSize(138_493, 26_744, 20_000_263),
    "hetrec2011-lastfm-2k": DatasetSize(1_892, 17_632, 92_834),
    "gowalla": DatasetSize(29_858, 40_981, 1_027_370),
    "yelp2018": DatasetSize(31_668, 38_048, 1_561_406),
    "amazon-book": DatasetSize(52_643, 91_599, 2_984_108),
    "ml-1m-exadmm-split": DatasetSize(6_034, 3_468, 575_198),
    "epinions": DatasetSize(40_163, 139_738, 664_824),
    "msd": DatasetSize(1_019_318, 384_546, 48_373_586),
    "amazon-fine-food": DatasetSize(256_059, 74_258, 568_454),
    "amazon-video": DatasetSize(8_072, 11_830, 63_836),
    "tafeng": DatasetSize(32_266, 23_812, 817_741),
    "qb-article": DatasetSize(24_516, 7_355, 348_736),
}
_UNKNOWN = DatasetSize(100_000, 100_000, 10_000_000)

#: kind -> what it covers
KINDS = {
    "light": "plots, tables, scorecards: a few small files in memory",
    "data": "fetch / preprocess / split: a pandas table of the interactions, a few copies",
    "evaluate": "full ranking in user batches: CSR of the interactions + batch x items scores",
    "train": "a torch factor model: parameters + optimiser state + the evaluation above",
    "sweep": "synthetic linear-algebra sweeps (lrs): small dense matrices",
}

_MB = 1e6


def dataset_size(dataset: str | None, config: Mapping | None = None, data_root: str | Path | None = None,
                 protocol: str | None = None) -> DatasetSize:
    """Users, items and interactions of ``dataset`` (see the module docstring for the sources)."""
    if dataset and data_root is not None and protocol:
        stats = Path(data_root) / "processed" / dataset / protocol / "stats.json"
        if stats.is_file():
            try:
                s = json.loads(stats.read_text())
                return DatasetSize(int(s["users"]), int(s["items"]), int(s["interactions"]))
            except (ValueError, KeyError, OSError):
                pass
    if dataset == "synthetic":
        spec = dict((config or {}).get("data", {}).get("synthetic", {}))
        users, items = int(spec.get("users", 600)), int(spec.get("items", 400))
        return DatasetSize(users, items, math.ceil(users * items * float(spec.get("density", 0.08))))
    if dataset is None:
        return DatasetSize(1_000, 1_000, 100_000)
    return DATASET_SIZES.get(dataset, _UNKNOWN)


def estimate(kind: str, size: DatasetSize, *, attempt: int = 1, batch_size: int = 2048, dim: int = 256,
             extra_mb: float = 0.0, gpu: bool = False) -> dict[str, int]:
    """``{"mem_mb": ..., "runtime": ...}`` (runtime in minutes) for one job.

    Memory (bytes, before the 1 GB interpreter base and the attempt factor):

    - ``data``: 200 per interaction (parsing, filtering and splitting hold about five copies of
      a 40-byte row);
    - ``evaluate``: 40 per interaction (the fit and exclusion CSR matrices) plus
      ``3 x batch_size x items x 4`` (scores, mask and top-k of one user batch) plus ``extra_mb``
      (a model's own fit, e.g. EASE's ``items x items`` matrix: :func:`recrepro.baselines.strong.fit_memory_mb`);
    - ``train``: ``evaluate`` plus ``16 x (users + items) x dim`` (float32 parameters, gradients and
      two Adam moments) plus ``extra_mb`` (a rule's own buffer, e.g. FedRAP's ``memory_budget_mb``);
    - ``light`` and ``sweep``: the base only.

    Run time (minutes) grows with the interactions (data, train) or with users x items (evaluate);
    a GPU job is assumed 5 x faster at training. Both scale with ``attempt``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown resource kind {kind!r}; one of {sorted(KINDS)}")
    attempt = max(int(attempt), 1)
    n, u, i = size.interactions, size.users, size.items
    base = 1000.0
    score_mb = 3 * batch_size * i * 4 / _MB
    csr_mb = 40 * n / _MB
    if kind == "data":
        mem, minutes = base + 200 * n / _MB, 10 + 2 * n / 1e6
    elif kind == "evaluate":
        mem, minutes = base + csr_mb + score_mb + extra_mb, 10 + 2 * u * i / 1e9
    elif kind == "train":
        params_mb = 16 * (u + i) * dim / _MB
        mem = base + csr_mb + score_mb + params_mb + extra_mb
        minutes = 30 + 2 * u * i / 1e9 + (30 if not gpu else 6) * n / 1e6
    elif kind == "sweep":
        mem, minutes = base + extra_mb, 30
    else:  # light
        mem, minutes = base, 10
    return {"mem_mb": int(math.ceil(mem * attempt / 100.0) * 100), "runtime": int(math.ceil(minutes * attempt))}
