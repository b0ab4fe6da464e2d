"""Helpers of ``workflow/rules/prism.smk``: which runs, figures and tables a tier builds.

Every function takes the (validated) Snakemake ``config`` and a tier name.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from recrepro.papers.prism.methods import method_name

__all__ = [
    "all_runs", "entries", "fig1_methods", "fig2_runs", "runs", "table_methods", "targets", "tier_conf",
    "tuned_dirs",
]


def tier_conf(config: Mapping[str, Any], tier: str) -> Mapping[str, Any]:
    return config["prism"]["tiers"][tier]


def entries(config: Mapping[str, Any], tier: str) -> Iterator[tuple[str, str, str, list[int]]]:
    """(dataset, protocol, split, seeds) of the tier's data entries with protocol ``prism``."""
    for entry in config["tiers"][tier]["data"]:
        if entry["protocol"] == "prism":
            yield entry["dataset"], entry["protocol"], entry["split"], list(entry.get("seeds", [0]))


def entry(config: Mapping[str, Any], tier: str, dataset: str) -> tuple[str, str, str, list[int]]:
    for item in entries(config, tier):
        if item[0] == dataset:
            return item
    raise ValueError(f"no prism data entry for {dataset} in tier {tier}")


def run(config: Mapping[str, Any], tier: str, dataset: str, method: str, seed: int) -> str:
    _, protocol, split, _ = entry(config, tier, dataset)
    return f"results/{tier}/prism/runs/{dataset}/{protocol}/{split}/{method}/seed{seed}/metrics.json"


def runs(config: Mapping[str, Any], tier: str, dataset: str, methods: list[str]) -> list[str]:
    seeds = entry(config, tier, dataset)[3]
    return [run(config, tier, dataset, m, s) for m in methods for s in seeds]


def fig1_methods(config: Mapping[str, Any], tier: str) -> list[str]:
    conf = tier_conf(config, tier)
    return [method_name(conf["backbone"], loss, weight_decay=wd)
            for loss in conf["figure1_losses"] for wd in conf["weight_decays"]]


def fig2_runs(config: Mapping[str, Any], tier: str, dataset: str) -> tuple[list[str], list[str]]:
    """Panel titles and runs of Fig. 2 (first seed; λ = magnitude_wd and λ = 0 per loss)."""
    conf = tier_conf(config, tier)
    seed = entry(config, tier, dataset)[3][0]
    titles, paths = [], []
    for loss in conf["figure1_losses"]:
        for wd in (conf["magnitude_wd"], 0.0):
            titles.append(f"{loss}, wd {wd:g}")
            paths.append(run(config, tier, dataset, method_name(conf["backbone"], loss, weight_decay=wd), seed))
    return titles, paths


def fig2_titles_arg(config: Mapping[str, Any], tier: str, dataset: str) -> str:
    return " ".join(shlex.quote(t) for t in fig2_runs(config, tier, dataset)[0])


def table_methods(config: Mapping[str, Any], tier: str) -> list[str]:
    conf = tier_conf(config, tier)
    table = conf["table"]
    methods: list[str] = []
    for backbone in table["backbones"]:
        for loss in table["losses"]:
            methods.append(method_name(backbone, loss, alpha=table.get("alpha", 1.0)))
            methods += [method_name(backbone, loss, weight_decay=wd) for wd in conf["weight_decays"]]
    return list(dict.fromkeys(methods))


def tuned_dirs(config: Mapping[str, Any], tier: str) -> list[str]:
    table = tier_conf(config, tier)["table"]
    return [f"results/{tier}/prism/tuned/{dataset}/{b}_{l}_tunedwd/seed{s}"
            for dataset, _, _, seeds in entries(config, tier)
            for b in table["backbones"] for l in table["losses"] for s in seeds]


def all_runs(config: Mapping[str, Any], tier: str) -> list[str]:
    methods = fig1_methods(config, tier) + table_methods(config, tier)
    out: list[str] = []
    for dataset, _, _, _ in entries(config, tier):
        out += runs(config, tier, dataset, methods)
    return list(dict.fromkeys(out))


def targets(config: Mapping[str, Any], tier: str) -> list[str]:
    out: list[str] = []
    for dataset, _, _, _ in entries(config, tier):
        out += [f"results/{tier}/prism/figures/fig1_weight_decay_{dataset}.pdf",
                f"results/{tier}/prism/figures/fig2_magnitudes_{dataset}.pdf",
                f"results/{tier}/prism/tables/table1_{dataset}.md"]
    out.append(f"results/{tier}/prism/scorecard.md")
    return out
