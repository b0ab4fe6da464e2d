"""Helpers of ``workflow/rules/exadmm*.smk``: the operating points, runs and targets a tier builds.

They only read the config (and import no torch: the Snakefile imports them). The operating points
(:func:`operating_points`) are also what :mod:`recrepro.papers.exadmm.drift` compares the records with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recrepro.papers.exadmm.run import DEFAULT_KS, DEFAULT_METRICS, MODEL_KEYS

__all__ = ["DEFAULT_KS", "DEFAULT_METRICS", "operating_points", "smk_entries", "smk_entry", "smk_histories",
           "smk_manifest", "smk_point", "smk_runs", "smk_switches", "smk_targets"]


def operating_points(entry: Mapping[str, Any], switches: Mapping[str, Any] | None = None) -> dict[str, dict]:
    """Method name -> ``{"family", "params"}`` for one dataset entry of the config.

    The base settings are methods ``ials`` and ``exadmm``; each ``sweep.<family>`` item
    overrides them and is named ``<family>_sw<i>`` (i from 1) unless it gives a ``name``.
    ``record_part`` (``test`` by default) is the held-out part whose metrics the run record
    holds (the ML-1M fixture's published numbers are on ``validation``).  FairRec points post-process
    the base iALS model: ``fairrec_sw<i>`` with ``min_assignment_prop`` from the sweep.
    """
    switches = dict(switches or {})
    points: dict[str, dict] = {}
    for family in ("ials", "exadmm"):
        if family not in entry:
            continue
        base = dict(entry[family])
        if family == "exadmm":
            base = {**{k: v for k, v in switches.items() if k in MODEL_KEYS["exadmm"]}, **base}
        points[family] = {"family": family, "params": base}
        for i, override in enumerate(entry.get("sweep", {}).get(family, []), start=1):
            override = dict(override)
            name = override.pop("name", f"{family}_sw{i}")
            points[name] = {"family": family, "params": {**base, **override}}
    if "ials" in entry:
        for i, override in enumerate(entry.get("sweep", {}).get("fairrec", []), start=1):
            override = dict(override)
            name = override.pop("name", f"fairrec_sw{i}")
            points[name] = {"family": "fairrec", "params": {"base": dict(entry["ials"]), **override}}
    record = entry.get("record_part", "test")
    for point in points.values():
        point["record_part"] = record
    return points


# ------------------------------------------------------------------ workflow helpers
# (used by workflow/rules/exadmm.smk; they only read the config)
def smk_entries(config: Mapping[str, Any], tier: str) -> list[dict]:
    """The tier's dataset entries of the ``exadmm`` config block."""
    return list(config.get("exadmm", {}).get("tiers", {}).get(tier, {}).get("datasets", []))


def smk_switches(config: Mapping[str, Any]) -> dict[str, str]:
    block = config.get("exadmm", {})
    return {"strength_scaling": block.get("strength_scaling", "n2"),
            "u_step_hessian": block.get("u_step_hessian", "full"),
            "u_step_size": block.get("u_step_size", "lipschitz")}


def smk_entry(config: Mapping[str, Any], tier: str, dataset: str) -> dict:
    for entry in smk_entries(config, tier):
        if entry["dataset"] == dataset:
            return entry
    raise ValueError(f"exadmm: no {tier} entry for dataset {dataset!r}")


def smk_point(config: Mapping[str, Any], tier: str, dataset: str, method: str) -> dict:
    return operating_points(smk_entry(config, tier, dataset), smk_switches(config))[method]


def smk_manifest(config: Mapping[str, Any], data_root: str, tier: str, dataset: str) -> str:
    """The split manifest an entry trains on (``<data>/splits/<dataset>/<protocol>/<split>/seed<k>``)."""
    e = smk_entry(config, tier, dataset)
    return f"{data_root}/splits/{dataset}/{e['protocol']}/{e['split']}/seed{e['split_seed']}/manifest.json"


def smk_runs(config: Mapping[str, Any], tier: str) -> list[str]:
    """metrics.json of every operating point and seed of the tier."""
    out = []
    for e in smk_entries(config, tier):
        for method in operating_points(e, smk_switches(config)):
            out += [f"results/{tier}/exadmm/runs/{e['dataset']}/{e['split']}/{method}/seed{s}/metrics.json"
                    for s in e["seeds"]]
    return out


def smk_histories(config: Mapping[str, Any], tier: str) -> list[str]:
    """history.json of the base exADMM runs (figure 3)."""
    return [f"results/{tier}/exadmm/runs/{e['dataset']}/{e['split']}/exadmm/seed{s}/history.json"
            for e in smk_entries(config, tier) if "exadmm" in e for s in e["seeds"]]


def smk_targets(config: Mapping[str, Any], tier: str) -> list[str]:
    """Default targets of the tier (empty when the tier has no exadmm entries)."""
    if not smk_entries(config, tier):
        return []
    base = f"results/{tier}/exadmm"
    targets = [f"{base}/figures/fig1_tradeoff.pdf", f"{base}/figures/fig3_convergence.pdf",
               f"{base}/table4_best_points.md", f"{base}/scorecard.md"]
    scal = config["exadmm"]["tiers"][tier].get("scalability")
    if scal:
        targets.append(f"{base}/figures/fig2_scalability_{scal['dataset']}.pdf")
    return targets


# ----------------------------------------------------------------- what the shared workflow and tests read
# Every paper's rules.py defines these (docs/adding-a-paper.md): the compute page, the scorecard's
# seed count, the leak audit and the smoke checks' test read them through the registry, not a list.

#: The paper's smallest smoke-tier jobs' outputs: a second run must give byte-identical files
#: (tests/test_workflow.py).
SMALLEST_SMOKE_RUNS = ("results/smoke/exadmm/runs/synthetic/strong_generalization/ials/seed98765/metrics.json",)
#: The training rules that ask for a GPU under ``--config device=cuda`` (tests/test_resources.py).
GPU_RULES = ("exadmm_train", "exadmm_scalability")


def run_records(config: Mapping[str, Any], tier: str) -> list[str]:
    """Every run record the tier's DAG makes for this paper (the compute page prices the missing ones)."""
    return smk_runs(config, tier)


def seeds_required(config: Mapping[str, Any], tier: str) -> int:
    """Seeds per cell in ``tier`` (the scorecard calls fewer a cap)."""
    entries = config["exadmm"]["tiers"][tier]["datasets"]
    return max(len(e.get("seeds", [0])) for e in entries) if entries else 1


def training_pools(variants: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, tuple[str, ...]]:
    """``{pool label: parts a training negative may not be}``: iALS samples no negatives."""
    return {"no sampled negatives (iALS)": ()}


def smoke_methods(config: Mapping[str, Any]) -> set[str]:
    """The methods the smoke tier gives the scorecard."""
    return {r.split("/")[-3] for r in smk_runs(config, "smoke")}
