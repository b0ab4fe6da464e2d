"""Helpers shared by the paper rule files: which of the tier's splits a paper trains on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def protocol_splits(config: Mapping[str, Any], tier: str, protocol: str) -> list[tuple[str, str, int]]:
    """(dataset, split, first split seed) of the tier's data entries made with ``protocol``."""
    return [(e["dataset"], e["split"], e.get("seeds", [0])[0])
            for e in config["tiers"][tier]["data"] if e["protocol"] == protocol]


def protocol_split_dir(config: Mapping[str, Any], tier: str, protocol: str, dataset: str, split: str) -> str:
    """The split directory of ``dataset``/``split`` under ``protocol`` (first seed), as the data rules write it."""
    for d, s, seed in protocol_splits(config, tier, protocol):
        if (d, s) == (dataset, split):
            return f"{config['data']['root']}/splits/{d}/{protocol}/{s}/seed{seed}"
    raise ValueError(f"{protocol}: no {tier} {protocol} split for {dataset}/{split}")


def variant_settings(config: Mapping[str, Any], paper: str, tier: str, dataset: str, variant: str,
                     base: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A variant's settings, layered ``base < tier settings < per-dataset settings < the variant's keys``.

    ``config[paper]`` holds ``variants: {name: keys}`` and ``tiers: {tier: {settings, datasets}}``.
    Returns the settings and the tier's block (its compute caps are the paper's own business).
    Raises ``ValueError`` naming the known variants when ``variant`` is not one of them.
    """
    block = config.get(paper, {})
    if variant not in block.get("variants", {}):
        raise ValueError(f"{paper}: unknown variant {variant!r}; known: {sorted(block.get('variants', {}))}")
    conf = block.get("tiers", {}).get(tier, {})
    settings = dict(base)
    settings.update(conf.get("settings", {}))
    settings.update(conf.get("datasets", {}).get(dataset, {}))
    settings.update(block["variants"][variant])
    return settings, conf
