"""Helpers of ``workflow/rules/lambdaopt*.smk``: the tier's splits, runs, settings and figures' inputs.

They only read the config (and the committed curves of the released code: :func:`official_curve_files`);
the Snakefile imports them, so they import no torch. :func:`rule_settings` is also what
:mod:`recrepro.papers.lambdaopt.drift` compares the records with.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recrepro.papers.lambdaopt.grid import GRID_POINT, grid_point_names, grid_point_settings
from recrepro.papers.rules import protocol_split_dir, protocol_splits, variant_settings

__all__ = ["official_curve_files", "rule_first_seed", "rule_grid_points", "rule_grid_runs", "rule_group_records",
           "rule_run_dir", "rule_runs", "rule_sensitivity_epochs", "rule_settings", "rule_split_dir", "rule_splits",
           "rule_tier"]


def rule_splits(config: Mapping[str, Any], tier: str) -> list[tuple[str, str, int]]:
    """(dataset, split, split_seed) of the tier's ``lambdaopt``-protocol data entries."""
    return protocol_splits(config, tier, "lambdaopt")


def rule_split_dir(config: Mapping[str, Any], tier: str, dataset: str, split: str) -> str:
    return protocol_split_dir(config, tier, "lambdaopt", dataset, split)


def rule_settings(config: Mapping[str, Any], tier: str, dataset: str, variant: str) -> dict[str, Any]:
    """switches < tier settings < per-dataset settings < the variant's own keys; a grid point
    ``<variant>-gNN`` (:mod:`recrepro.papers.lambdaopt.grid`): its variant's, at the NN-th λ alone."""
    point = GRID_POINT.match(variant)
    if point is not None:
        return grid_point_settings(rule_settings(config, tier, dataset, point["variant"]), variant)
    switches = config.get("lambdaopt", {}).get("switches", {})
    settings, conf = variant_settings(config, "lambdaopt", tier, dataset, variant, switches)
    cap = conf.get("epoch_cap")
    if cap is not None and "epochs" in settings:     # compute cap (config comment, docs/deviations.md)
        settings["epochs"] = min(int(settings["epochs"]), int(cap))
    if settings.get("method") not in VALIDATION_LEARNERS:    # nothing of theirs learns on validation
        settings.pop("select_share", None)
    return settings


#: Methods whose λ learns on the validation loss (λOpt, SGDA): ``select_share`` holds part of the
#: validation out of their λ step for the stopping rule; the others stop on the whole validation.
VALIDATION_LEARNERS = ("lambdaopt", "sgda")


def rule_sensitivity_epochs(config: Mapping[str, Any], tier: str) -> int:
    """Epochs of the sensitivity curves, under the tier's ``epoch_cap``."""
    conf = rule_tier(config, tier)
    epochs = int(conf["sensitivity"]["epochs"])
    return epochs if conf.get("epoch_cap") is None else min(epochs, int(conf["epoch_cap"]))


def rule_runs(config: Mapping[str, Any], tier: str, dataset: str | None = None) -> list[str]:
    """metrics.json of every (dataset, variant, seed) run of the tier."""
    conf = config.get("lambdaopt", {}).get("tiers", {}).get(tier, {})
    return [f"results/{tier}/lambdaopt/runs/{d}/{s}/{v}/seed{seed}/metrics.json"
            for d, s, _ in rule_splits(config, tier) if dataset in (None, d)
            for v in conf.get("variants", []) for seed in conf.get("seeds", [0])]


def rule_grid_points(config: Mapping[str, Any], tier: str, dataset: str, variant: str) -> list[str]:
    """The grid points' run names MF-λFix's record is assembled from on the datasets of the tier's
    ``lambdafix_per_lambda`` (one job per λ); ``[]`` elsewhere and for other methods (one job)."""
    if dataset not in rule_tier(config, tier).get("lambdafix_per_lambda", []):
        return []
    return grid_point_names(variant, rule_settings(config, tier, dataset, variant))


def rule_grid_runs(config: Mapping[str, Any], tier: str) -> list[str]:
    """metrics.json of every grid point's run of the tier (jobs of their own: the compute page prices them)."""
    conf = rule_tier(config, tier)
    return [f"results/{tier}/lambdaopt/runs/{d}/{s}/{p}/seed{seed}/metrics.json"
            for d, s, _ in rule_splits(config, tier) for v in conf.get("variants", [])
            for p in rule_grid_points(config, tier, d, v) for seed in conf.get("seeds", [0])]


def rule_tier(config: Mapping[str, Any], tier: str) -> dict[str, Any]:
    """The ``lambdaopt.tiers.<tier>`` block."""
    return config.get("lambdaopt", {}).get("tiers", {}).get(tier, {})


def rule_first_seed(config: Mapping[str, Any], tier: str) -> int:
    return rule_tier(config, tier).get("seeds", [0])[0]


def rule_run_dir(config: Mapping[str, Any], tier: str, dataset: str, method: str) -> str:
    """Run directory of ``method`` on ``dataset`` for the tier's first seed (figures)."""
    split = [s for d, s, _ in rule_splits(config, tier) if d == dataset][0]
    return f"results/{tier}/lambdaopt/runs/{dataset}/{split}/{method}/seed{rule_first_seed(config, tier)}"


def rule_group_records(config: Mapping[str, Any], tier: str, dataset: str, which: int) -> list[str]:
    """per_user.parquet of the groups figure's ``which``-th method (``lambdaopt.tiers.<tier>.groups``)
    on ``dataset``, one per seed of the tier: the figure's table pairs the seeds (claim L4)."""
    first = rule_run_dir(config, tier, dataset, rule_tier(config, tier)["groups"][which])
    base = first[: first.rindex("/seed")]
    return [f"{base}/seed{seed}/per_user.parquet" for seed in rule_tier(config, tier).get("seeds", [0])]


def official_curve_files(tier: str) -> list[str]:
    """The released code's curves committed for ``tier`` (``benchmarks/official_lambdaopt.py``)."""
    folder = Path(f"results/{tier}/lambdaopt/official")
    return sorted(str(p) for pattern in ("*.jsonl", "*.jsonl.gz") for p in folder.glob(pattern))


# ----------------------------------------------------------------- what the shared workflow and tests read
# Every paper's rules.py defines these (docs/adding-a-paper.md): the compute page, the scorecard's
# seed count, the leak audit and the smoke checks' test read them through the registry, not a list.

#: The paper's smallest smoke-tier jobs' outputs: a second run must give byte-identical files
#: (tests/test_workflow.py).
SMALLEST_SMOKE_RUNS = ("results/smoke/lambdaopt/runs/synthetic/temporal_user_ratio/sgda/seed0/metrics.json",)
#: The training rules that ask for a GPU under ``--config device=cuda`` (tests/test_resources.py).
GPU_RULES = ("lambdaopt_train", "lambdaopt_sensitivity")


def run_records(config: Mapping[str, Any], tier: str) -> list[str]:
    """Every run record the tier's DAG makes for this paper (the compute page prices the missing ones)."""
    return rule_runs(config, tier) + rule_grid_runs(config, tier)


def seeds_required(config: Mapping[str, Any], tier: str) -> int:
    """Seeds per cell in ``tier`` (the scorecard calls fewer a cap)."""
    return len(config["lambdaopt"]["tiers"][tier].get("seeds", [0]))


def training_pools(variants: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, tuple[str, ...]]:
    """The MF step's negatives avoid the training positives, the λ step's the training and validation
    positives (the λ step trains on validation by design)."""
    return {"MF step (training positives excluded)": ("train",),
            "λ step (training and validation positives excluded)": ("train", "validation")}


def smoke_methods(config: Mapping[str, Any]) -> set[str]:
    """The methods the smoke tier gives the scorecard."""
    return {r.split("/")[-3] for r in rule_runs(config, "smoke")}
