"""Helpers of ``workflow/rules/fedrap*.smk``: the splits, runs and settings a tier builds.

They only read the config (and import no torch: the Snakefile imports them while it parses the
workflow). :func:`rule_settings` is also what :mod:`recrepro.papers.fedrap.drift` compares the
records with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recrepro.papers.rules import protocol_split_dir, protocol_splits, variant_settings

__all__ = ["rule_embedding_run", "rule_grid_runs", "rule_runs", "rule_settings", "rule_split_dir", "rule_splits"]


def rule_splits(config: Mapping[str, Any], tier: str) -> list[tuple[str, str, int]]:
    """(dataset, split, split_seed) of the tier's ``fedrap``-protocol data entries."""
    return protocol_splits(config, tier, "fedrap")


def rule_split_dir(config: Mapping[str, Any], tier: str, dataset: str, split: str) -> str:
    return protocol_split_dir(config, tier, "fedrap", dataset, split)


def rule_settings(config: dict[str, Any], tier: str, dataset: str, variant: str) -> dict[str, Any]:
    """Tier settings < per-dataset settings < the variant's own (method, mode, ...) < a tuning point.

    ``<grid>-gNN`` is point NN of a validation grid, a ``tuning.tuned`` name its grid's pick
    (:mod:`recrepro.papers.fedrap.tuning`).
    """
    from recrepro.papers.fedrap.tuning import grid_point, parse_grid_run, tuned_point, tuning_block

    base = {"negative_pool": config.get("fedrap", {}).get("negative_pool", "train")}
    point: dict[str, Any] = {}
    grid_run = parse_grid_run(variant)
    if grid_run is not None:
        point = grid_point(config, tier, *grid_run)
        variant = grid_run[0]
    elif variant in tuning_block(config, tier).get("tuned", {}):
        variant, point, _ = tuned_point(config, tier, dataset, variant)
    settings, conf = variant_settings(config, "fedrap", tier, dataset, variant, base)
    settings.update(point)
    cap = conf.get("round_cap")
    if cap:
        # a compute cap below the paper's 100 rounds: recorded with the run, shown in the table
        for key in ("rounds", "epochs"):
            if key in settings:
                settings[key] = min(int(settings[key]), int(cap))
        settings["round_cap"] = int(cap)
    return settings


def rule_runs(config: dict[str, Any], tier: str) -> list[str]:
    """metrics.json of every (dataset, variant, seed) run of the tier."""
    from recrepro.papers.fedrap.tuning import tuned_runs

    conf = config.get("fedrap", {}).get("tiers", {}).get(tier, {})
    splits = rule_splits(config, tier)
    return [f"results/{tier}/fedrap/runs/{d}/{s}/{v}/seed{seed}/metrics.json"
            for d, s, _ in splits
            for v in conf.get("variants", []) for seed in conf.get("seeds", [0])] + \
        tuned_runs(config, tier, splits, conf.get("seeds", [0]))


def rule_grid_runs(config: dict[str, Any], tier: str) -> list[str]:
    """metrics.json of the tier's validation-grid runs (:mod:`recrepro.papers.fedrap.tuning`)."""
    from recrepro.papers.fedrap.tuning import tuning_grid_runs

    return tuning_grid_runs(config, tier, rule_splits(config, tier))


def rule_embedding_run(config: dict[str, Any], tier: str) -> tuple[str, str] | None:
    """(dataset, projection.parquet) of the PCA figure: the first dataset's ``fedrap`` (else
    ``fedrap_code``) run with the tier's first seed; ``None`` if the tier has neither."""
    conf = config.get("fedrap", {}).get("tiers", {}).get(tier, {})
    variants = conf.get("variants", [])
    splits = rule_splits(config, tier)
    name = next((v for v in ("fedrap", "fedrap_code") if v in variants), None)
    if name is None or not splits:
        return None
    d, s, _ = splits[0]
    seed = conf.get("seeds", [0])[0]
    return d, f"results/{tier}/fedrap/runs/{d}/{s}/{name}/seed{seed}/projection.parquet"


# ----------------------------------------------------------------- what the shared workflow and tests read
# Every paper's rules.py defines these (docs/adding-a-paper.md): the compute page, the scorecard's
# seed count, the leak audit and the smoke checks' test read them through the registry, not a list.

#: The paper's smallest smoke-tier jobs' outputs: a second run must give byte-identical files
#: (tests/test_workflow.py).
SMALLEST_SMOKE_RUNS = ("results/smoke/fedrap/runs/synthetic/leave_one_out/fedmf/seed0/metrics.json",)
#: The training rules that ask for a GPU under ``--config device=cuda`` (tests/test_resources.py).
GPU_RULES = ("fedrap_train", "fedrap_train_projected")  # the latter: the embeddings figure's run


def run_records(config: Mapping[str, Any], tier: str) -> list[str]:
    """Every run record the tier's DAG makes for this paper (the compute page prices the missing ones)."""
    return rule_runs(config, tier) + rule_grid_runs(config, tier)


def seeds_required(config: Mapping[str, Any], tier: str) -> int:
    """Seeds per cell in ``tier`` (the scorecard calls fewer a cap)."""
    return len(config["fedrap"]["tiers"][tier].get("seeds", [0]))


def training_pools(variants: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, tuple[str, ...]]:
    """Each ``negative_pool`` the variants use, by the trainer's own table."""
    from recrepro.papers.fedrap.run import NEGATIVE_POOL_PARTS

    pools = sorted({str((v or {}).get("negative_pool", "train")) for v in (variants or {}).values()} or {"train"})
    return {f"negative_pool: {pool}": tuple(NEGATIVE_POOL_PARTS[pool]) for pool in pools}


def smoke_methods(config: Mapping[str, Any]) -> set[str]:
    """The methods the smoke tier gives the scorecard."""
    return {r.split("/")[-3] for r in rule_runs(config, "smoke")}
