"""Helpers of ``workflow/rules/lrs*.smk``: which sweeps each figure draws, the acceptance runs, the targets.

They only read the config; the Snakefile imports them, so they import no torch. The acceptance runs are
the run records :func:`recrepro.papers.lrs.run.run_acceptance` writes, one per (setting, method).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ACCEPTANCE_RUNS", "FIGURE_SWEEPS", "acceptance_records", "targets", "tier_settings"]

#: Figure file name -> the sweep whose rows it draws (``results/<tier>/lrs/sweeps/<experiment>.parquet``).
FIGURE_SWEEPS = {
    "fig1_error_vs_m": "error_vs_m",
    "fig2_error_vs_t": "error_vs_t",
    "fig3_iterations": "iterations",
    "fig4_private": "private",
    # fig. 5 reads the support scores of the AMHT-LRS rows of the error-vs-m sweep (same fits)
    "fig5_support": "error_vs_m",
}
#: (setting, method) of every acceptance run record of a seed.
ACCEPTANCE_RUNS = (
    [("noiseless", "amht_lrs")]
    + [
        ("noisy", m)
        for m in (
            "amht_lrs",
            "amht_lrs_cosamp",
            "amht_lrs_htp",
            "amht_lrs_iht",
            "altmin",
            "lowrank_ridge",
            "sparse_iht",
            "per_user_ls",
            "oracle",
        )
    ]
    + [("floor", "amht_lrs"), ("floor", "oracle")]
    + [("private", "amht_lrs"), ("private", "private_amht_lrs")]
)


def tier_settings(config: Mapping[str, Any], tier: str) -> dict[str, Any]:
    """The ``lrs.tiers.<tier>`` block (empty when the tier runs no AMHT-LRS)."""
    return config.get("lrs", {}).get("tiers", {}).get(tier, {})


def acceptance_records(config: Mapping[str, Any], tier: str) -> list[str]:
    """metrics.json of every acceptance run of the tier's seeds (what the scorecard reads)."""
    return [
        f"results/{tier}/lrs/runs/synthetic/{split}/{method}/seed{seed}/metrics.json"
        for seed in tier_settings(config, tier).get("seeds", [0])
        for split, method in ACCEPTANCE_RUNS
    ]


def targets(config: Mapping[str, Any], tier: str) -> list[str]:
    """Default targets of the tier: the figures and the scorecard (none when the tier runs no AMHT-LRS),
    and Fig. 6 where the tier has an ``ml100k`` block."""
    settings = tier_settings(config, tier)
    out = (
        [f"results/{tier}/lrs/figures/{figure}.pdf" for figure in FIGURE_SWEEPS]
        + [f"results/{tier}/lrs/scorecard.md"]
        if settings
        else []
    )
    if "ml100k" in settings:
        out.append(f"results/{tier}/lrs/figures/fig6_ml100k.pdf")
    return out


# ----------------------------------------------------------------- what the shared workflow and tests read
# Every paper's rules.py defines these (docs/adding-a-paper.md): the compute page, the scorecard's
# seed count, the leak audit and the smoke checks' test read them through the registry, not a list.

#: The paper's smallest smoke-tier jobs' outputs: a second run must give byte-identical files
#: (tests/test_workflow.py).
SMALLEST_SMOKE_RUNS = ("results/smoke/lrs/runs/acceptance_seed0.txt",)
#: The training rules that ask for a GPU under ``--config device=cuda`` (tests/test_resources.py).
GPU_RULES = ()  # AMHT-LRS trains on the CPU (small dense problems)


def run_records(config: Mapping[str, Any], tier: str) -> list[str]:
    """Every run record the tier's DAG makes for this paper (the compute page prices the missing ones)."""
    return acceptance_records(config, tier)


def seeds_required(config: Mapping[str, Any], tier: str) -> int:
    """Seeds per cell in ``tier`` (the scorecard calls fewer a cap)."""
    return len(config["lrs"]["tiers"][tier].get("seeds", [0]))


def training_pools(variants: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, tuple[str, ...]]:
    """AMHT-LRS is a regression on synthetic tasks: no split of user-item pairs, no negatives."""
    raise ValueError("leak audit: no training pools known for AMHT-LRS (no data protocol of its own)")


def smoke_methods(config: Mapping[str, Any]) -> set[str]:
    """The methods the smoke tier gives the scorecard."""
    return {method for _, method in ACCEPTANCE_RUNS}
