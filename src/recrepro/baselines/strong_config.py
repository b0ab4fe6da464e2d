"""What the configuration (``config.yaml: strong_baselines``) gives the strong baselines' jobs: the
workflow's rules read their protocols, grids, seeds and records through these helpers (imported at
parse time: no torch, no pandas)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["entry_evaluation", "entry_models", "grid_records", "job_key", "ledger_path", "papers", "protocol_entry",
           "table_protocols", "tier_block", "tune_params", "walks_past_edges"]


def tier_block(config: Mapping[str, Any], tier: str) -> dict[str, Any]:
    """``config.strong_baselines.tiers.<tier>`` (empty when the tier has none)."""
    return dict(config.get("strong_baselines", {}).get("tiers", {}).get(tier, {}))


def protocol_entry(config: Mapping[str, Any], tier: str, dataset: str, protocol: str, split: str) -> dict[str, Any]:
    """The tier's protocol entry of ``dataset/protocol/split``."""
    for entry in tier_block(config, tier).get("protocols", []):
        if (entry["dataset"], entry["protocol"], entry["split"]) == (dataset, protocol, split):
            return entry
    raise ValueError(f"no strong_baselines protocol {dataset}/{protocol}/{split} in tier {tier!r}")


def entry_evaluation(config: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's evaluation section: a name under ``evaluation.splits``, or the section itself."""
    evaluation = entry["evaluation"]
    return dict(config["evaluation"]["splits"][evaluation] if isinstance(evaluation, str) else evaluation)


def entry_models(config: Mapping[str, Any], tier: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Model -> ``{grid, fixed}``: the tier's models with the protocol's own overrides."""
    return {**tier_block(config, tier).get("models", {}), **entry.get("models", {})}


def papers(config: Mapping[str, Any], tier: str) -> list[str]:
    """The papers with a strong-baselines protocol in the tier."""
    return list(dict.fromkeys(e["paper"] for e in tier_block(config, tier).get("protocols", [])))


def grid_records(config: Mapping[str, Any], tier: str, paper: str) -> list[str]:
    """Every ``grid.json`` of ``paper``'s protocols in the tier."""
    return [f"results/{tier}/baselines/strong/{e['dataset']}/{e['protocol']}/{e['split']}/{m}/split{s}/grid.json"
            for e in tier_block(config, tier).get("protocols", []) if e["paper"] == paper
            for m in entry_models(config, tier, e) for s in e["split_seeds"]]


def tune_params(config: Mapping[str, Any], tier: str, dataset: str, protocol: str, split: str, model: str
                ) -> dict[str, Any]:
    """What ``recrepro strong tune`` needs for one job: evaluation, grid, fixed, beyond, select, seeds.
    A model that does not walk past its grid's edges on the protocol (:func:`walks_past_edges`)
    searches its grid only (``beyond`` empty)."""
    entry = protocol_entry(config, tier, dataset, protocol, split)
    search = entry_models(config, tier, entry)[model]
    return {"evaluation": entry_evaluation(config, entry), "grid": search.get("grid", {}),
            "fixed": search.get("fixed", {}),
            "beyond": search.get("beyond", {}) if walks_past_edges(entry, model) else {},
            "select": entry["select"],
            "seeds": ",".join(str(s) for s in entry["seeds"])}


def walks_past_edges(entry: Mapping[str, Any], model: str) -> bool:
    """Whether ``model``'s pick on the protocol ``entry`` walks past its grid's edges: ``beyond_edges``
    true (the default) for every model, false for none, a list of models for those it names (gowalla:
    EASE alone, one matrix inverse a point, where iALS's and RP3beta's walks would cost hours more)."""
    walk = entry.get("beyond_edges", True)
    return model in walk if isinstance(walk, (list, tuple)) else bool(walk)


def ledger_path(checkpoints: str, tier: str, dataset: str, protocol: str, split: str, model: str,
                split_seed: int | str) -> str:
    """The ledger of the grid points a ``strong_tune`` job has scored (``recrepro strong tune --checkpoint``)."""
    return f"{checkpoints}/{tier}/strong/{dataset}/{protocol}/{split}/{model}/split{split_seed}.points.json"


def job_key(wildcards: Any) -> tuple[str, str, str, str, str]:
    """``(tier, dataset, protocol, split, model)`` of a ``strong_tune`` job's wildcards."""
    return (wildcards.tier, wildcards.dataset, wildcards.protocol, wildcards.split, wildcards.model)


def table_protocols(config: Mapping[str, Any], tier: str, paper: str) -> dict[str, Any]:
    """``"<dataset>/<split>"`` -> the metrics, paper method, models, split seeds and each model's walk
    past its grid's edges that :func:`strong_table` needs."""
    return {f"{e['dataset']}/{e['split']}": {"metrics": e["metrics"], "paper_method": e.get("paper_method"),
                                               "models": list(entry_models(config, tier, e)),
                                               "split_seeds": list(e["split_seeds"]),
                                               # today's walk of each model: a record made before it says so
                                               "beyond": {m: dict(search.get("beyond", {}))
                                                          if walks_past_edges(e, m) else {}
                                                          for m, search in entry_models(config, tier, e).items()}}
            for e in tier_block(config, tier).get("protocols", []) if e["paper"] == paper}
