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
