"""The price of a tier's jobs not run yet (``docs/compute.md``: :mod:`recrepro.reporting.compute_page`): the
mean CPU-hours of the recorded jobs nearest to each (its method, its own rounds timed in part, its
family, its family's cost ratios, its dataset), and apart from those a scaled estimate from another
dataset's records."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from recrepro.datasets.registry import DATASETS
from recrepro.io import read_yaml_entries
from recrepro.reporting.compute_records import STRONG

__all__ = ["PARTIAL_RATES", "ComputeRatesError", "dataset_sizes", "estimates", "partial_rates", "scaled_estimates"]

#: jobs timed only in part (:func:`partial_rates`)
PARTIAL_RATES = Path(__file__).resolve().parents[1] / "expected" / "compute.yaml"
_PARTIAL_KEYS = {"paper", "dataset", "methods", "cpu_seconds_per_step", "steps", "measured", "source"}


class ComputeRatesError(ValueError):
    """``expected/compute.yaml`` (or the file given instead) is malformed."""


def partial_rates(path: str | Path = PARTIAL_RATES) -> list[dict[str, Any]]:
    """The jobs timed only in part: ``partial`` entries of ``path`` (see the file's header), validated.

    A measured round of the job itself prices it better than any extrapolation from other methods or
    datasets: FedRAP's paper objective at LastFM's pick runs its rounds on the dense path, about 80 times
    the cost its released-code mode's records and the other datasets' cost ratios imply.
    """
    out = []
    for where, entry in read_yaml_entries(path, "partial", _PARTIAL_KEYS, ComputeRatesError):
        methods = entry["methods"]
        if not (isinstance(methods, list) and methods and all(isinstance(m, str) and m for m in methods)):
            raise ComputeRatesError(f"{where}: 'methods' must be a non-empty list of names")
        for key in ("cpu_seconds_per_step", "steps"):
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ComputeRatesError(f"{where}: '{key}' must be a positive number, got {value!r}")
        out.append(dict(entry))
    return out



def dataset_sizes() -> dict[str, int]:
    """Interactions of each registered dataset whose description states them."""
    return {name: spec.n_interactions for name, spec in DATASETS.items() if spec.n_interactions}



def estimates(todo: pd.DataFrame, done: pd.DataFrame, partial: Sequence[Mapping[str, Any]] = (),
               assembled: set[tuple[str, str, str]] = frozenset()) -> list[tuple[float | None, str | None]]:
    """CPU-hours of each job not run yet and what priced it: the mean of its own method's records (its
    other seeds, ``"method"``), else the job's own rounds timed in part (``"partial"``,
    :func:`partial_rates`), else its family's (``"family"``), else its family's cost relative to the
    families that ran beside it on other datasets, applied to theirs here (``"ratio"``,
    :func:`_ratio_prices`), else its dataset's (``"dataset"``: other methods' jobs only, which can be far
    off), else ``(None, None)``.

    The method comes first because a family spans a grid whose points train for very different
    numbers of epochs (PRISM's weight decay 1e-2 stops after a few dozen, 1e-6 after 250): a
    tuned pick's other seeds cost what its first seed did, not the grid's mean. The ratio comes before
    the dataset's mean because a family can cost many times its siblings: FedRAP's paper objective
    took 6.5 times its released-code mode's CPU on ml-100k and 12 times on amazon-video, so where only
    the released-code mode has run its dataset's mean prices it at a fraction of what it costs.
    """
    method_mean = done.groupby(["paper", "dataset", "method"])["cpu_hours"].mean()
    family_mean = done.groupby(["paper", "dataset", "family"])["cpu_hours"].mean()
    dataset_mean = done.groupby(["paper", "dataset"])["cpu_hours"].mean()
    ratio_price = _ratio_prices(family_mean)

    def timed_in_part(r: Any) -> float | None:
        for entry in partial:
            if (entry["paper"], entry["dataset"]) == (r.paper, r.dataset) and \
                    any(fnmatch.fnmatchcase(r.method, pattern) for pattern in entry["methods"]):
                return float(entry["cpu_seconds_per_step"]) * float(entry["steps"]) / 3600.0
        return None

    def price(r: Any) -> tuple[float | None, str | None]:
        key = (r.paper, r.dataset, r.method)
        if key in assembled:    # its grid points are the jobs (``assembled``: (paper, dataset, method))
            return 0.0, "assembled"
        if key in method_mean.index and pd.notna(method_mean[key]):
            return float(method_mean[key]), "method"
        if (hours := timed_in_part(r)) is not None:
            return hours, "partial"
        for basis, table, key in (("family", family_mean, (r.paper, r.dataset, r.family)),
                                  ("ratio", ratio_price, (r.paper, r.dataset, r.family)),
                                  ("dataset", dataset_mean, (r.paper, r.dataset))):
            if key in table.index and pd.notna(table[key]):
                return float(table[key]), basis
        return None, None

    return [price(r) for r in todo.itertuples(index=False)]


def _ratio_prices(family_mean: pd.Series) -> pd.Series:
    """(paper, dataset, family) -> CPU-hours for the families with no record on a dataset: the geometric
    mean, over every other family G recorded on that dataset and every other dataset D' where both ran,
    of cost(family, D') / cost(G, D') × cost(G, dataset).

    A cost ratio between two methods of one paper carries across datasets far better than a level does
    (their steps differ by a factor, the dataset scales both); the geometric mean keeps one outlying
    pair from dominating.
    """
    frame = family_mean.rename("hours").reset_index()
    frame = frame[frame["hours"] > 0]
    out: dict[tuple[str, str, str], float] = {}
    for paper, g in frame.groupby("paper"):
        cost = g.set_index(["dataset", "family"])["hours"]
        datasets, families = set(g["dataset"]), set(g["family"])
        for dataset in datasets:
            here = set(g.loc[g["dataset"] == dataset, "family"])
            for family in families - here:
                logs = [math.log(cost[(other, family)] / cost[(other, sibling)] * cost[(dataset, sibling)])
                        for sibling in here for other in datasets - {dataset}
                        if (other, family) in cost.index and (other, sibling) in cost.index]
                if logs:
                    out[(paper, dataset, family)] = math.exp(sum(logs) / len(logs))
    index = pd.MultiIndex.from_tuples(list(out), names=["paper", "dataset", "family"]) if out else \
        pd.MultiIndex.from_tuples([], names=["paper", "dataset", "family"])
    return pd.Series(list(out.values()), index=index, dtype=float)


def scaled_estimates(todo: pd.DataFrame, done: pd.DataFrame, sizes: Mapping[str, int],
                      hours: str = "cpu_hours", every_job: bool = False) -> tuple[list[float | None], list[str | None]]:
    """The scaled estimate of each job that :func:`estimates` left unpriced, and its reference dataset.

    The reference of a paper and method family is the dataset, among those it has records on and
    whose size is known, with the most interactions (the nearest in scale to the large datasets
    that lack data here). The estimate is the family's mean CPU-hours there × interactions of the
    job's dataset / interactions of the reference: training steps per epoch grow with
    interactions. A family with no record anywhere falls back, as :func:`estimates` does, to the
    paper: the mean of all its recorded jobs on the paper's largest recorded dataset. None where
    the paper has no reference either or the job's dataset has no known size.

    ``hours`` names the records' column to scale (``wall_hours`` of GPU records: GPU-hours);
    ``every_job`` scales every row, priced or not (the GPU estimate: no job is priced in GPU-hours).

    Returns
    -------
    tuple
        Hours (or None) and reference dataset name (or None), one each per row of ``todo``.
    """
    family_mean = done.groupby(["paper", "family", "dataset"])[hours].mean()
    reference: dict[tuple[str, str], tuple[str, int, float]] = {}
    for (paper, family, dataset), mean in family_mean.items():  # sorted: a tie in size keeps the first name
        n = sizes.get(dataset)
        if n and pd.notna(mean) and ((paper, family) not in reference or n > reference[(paper, family)][1]):
            reference[(paper, family)] = (dataset, n, float(mean))
    paper_mean = done.groupby(["paper", "dataset"])[hours].mean()
    paper_reference: dict[str, tuple[str, int, float]] = {}
    for (paper, dataset), mean in paper_mean.items():
        n = sizes.get(dataset)
        if n and pd.notna(mean) and (paper not in paper_reference or n > paper_reference[paper][1]):
            paper_reference[paper] = (dataset, n, float(mean))
    values: list[float | None] = []
    names: list[str | None] = []
    for r in todo.itertuples(index=False):
        ref = reference.get((r.paper, r.family)) or paper_reference.get(r.paper)
        n = sizes.get(r.dataset)
        # a tuned baseline is not linear in interactions (EASE inverts an items × items matrix; every
        # grid point ranks all items for every user): no scaled estimate rather than a wrong one
        if (pd.notna(r.estimate) and not every_job) or ref is None or not n or r.paper == STRONG:
            values.append(None)
            names.append(None)
        else:
            values.append(ref[2] * n / ref[1])
            names.append(ref[0])
    return values, names

