"""Preprocessing protocols: positive threshold + frequency filters + contiguous ids.

A *protocol* is a named, config-driven recipe (``protocols.<name>`` in
``config.yaml``): a default recipe plus per-dataset overrides. Each recipe matches the
preprocessing of the paper's (or its official code's) source, see
``docs/protocols.md``. :func:`preprocess` turns a :class:`RawInteractions` into an
:class:`Interactions` with contiguous int32 ids, keeping the file order of the rows.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from recrepro.datasets.container import DataFormatError, Interactions, RawInteractions
from recrepro.datasets.statistics import statistics_checks
from recrepro.io import sha256_file, write_json, write_parquet
from recrepro.paperlist import PAPERS

log = logging.getLogger(__name__)

#: The files :func:`write_preprocessed` writes and records the size and sha256 of in ``stats.json``.
PROCESSED_FILES = ("interactions.parquet", "user_map.parquet", "item_map.parquet")


class ProcessedDataError(ValueError):
    """A processed file differs from what preprocessing wrote (the message names it and both digests)."""


FilterMode = Literal["none", "items_then_users", "users_then_items", "simultaneous"]
_OPS = {">": np.greater, ">=": np.greater_equal}


@dataclass(frozen=True)
class ProtocolRecipe:
    """One protocol applied to one dataset.

    Attributes
    ----------
    positive_op, positive_threshold:
        Keep rows with ``rating <op> threshold``; ``None`` keeps every row.
    filter_mode:
        ``items_then_users``: drop items with fewer than ``item_min`` rows, then users
        with fewer than ``user_min`` rows, once (Liang et al.'s ``filter_triplets``,
        λOpt's loader). ``simultaneous``: both counts taken on the same table, then
        both filters applied at once (exADMM's Epinions). ``none``: no filter. None of
        these is an iterated k-core: the papers' sources filter once.
    merge_given_parts:
        For datasets published already split (LightGCN releases): ``True`` merges the
        parts (PRISM re-splits them), ``False`` keeps the ``part`` column.
    """

    protocol: str
    dataset: str
    positive_op: str | None = None
    positive_threshold: float | None = None
    filter_mode: FilterMode = "none"
    item_min: int = 0
    user_min: int = 0
    merge_given_parts: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# Named switches (config ``switches``) that swap a recipe for the official code's
# behaviour; each is described in docs/deviations.md.
SWITCH_OVERRIDES: dict[tuple[str, str, str], dict[tuple[str], dict[str, Any]]] = {
    # PRISM's Table 2 counts ML-1M ratings >= 3 as positives; its code keeps every rating.
    ("prism_ml1m_ratings", "prism", "ml-1m"): {("code",): {"positive": None}},
}


# Protocols whose splits order each user's rows by time (FedRAP's leave-one-out, λOpt's temporal
# split: the registry's ``time_ordered``): they need the release's timestamps, which a reconstructed
# form may lack.
TIME_ORDERED_PROTOCOLS = frozenset(paper.key for paper in PAPERS if paper.time_ordered)


class FormRefusedError(DataFormatError):
    """A reconstructed form of a dataset lacks a column the protocol needs (one line, naming both)."""


def needed_columns(recipe: ProtocolRecipe) -> tuple[str, ...]:
    """The raw columns ``recipe`` reads beyond user and item: ``rating`` for a positive
    threshold, ``timestamp`` for a time-ordered protocol."""
    return tuple(c for c, needed in (("rating", recipe.positive_op is not None),
                                     ("timestamp", recipe.protocol in TIME_ORDERED_PROTOCOLS)) if needed)


def check_form(raw: RawInteractions, recipe: ProtocolRecipe) -> None:
    """Refuse a reconstructed form that lacks what ``recipe`` needs (:class:`FormRefusedError`)."""
    form = raw.extras.get("form")
    if not form:
        return
    lacking = [c for c in needed_columns(recipe) if c in raw.extras.get("lacks", ())]
    if lacking:
        why = {"rating": (f"positives: rating {recipe.positive_op} {recipe.positive_threshold:g}"
                          if recipe.positive_op is not None else ""),
               "timestamp": "its split orders each user's rows by time"}
        raise FormRefusedError(
            f"{raw.dataset}: the reconstructed form {form!r} has no {' and no '.join(lacking)} column, which "
            f"protocol {recipe.protocol!r} needs ({'; '.join(why[c] for c in lacking)}): put the canonical files "
            f"in the mirror or allow the download (`recrepro data describe {raw.dataset}`){_switch_hint(recipe)}")


def _switch_hint(recipe: ProtocolRecipe) -> str:
    """``, or switches.<name>: <value>`` where a switch drops the positive threshold of ``recipe``."""
    for (switch, protocol, dataset), by_value in SWITCH_OVERRIDES.items():
        if (protocol, dataset) == (recipe.protocol, recipe.dataset):
            for (value,), override in by_value.items():
                if override.get("positive", "absent") is None and recipe.protocol not in TIME_ORDERED_PROTOCOLS:
                    return f", or set switches.{switch}: {value} (docs/deviations.md)"
    return ""


def entry_switches(switches: dict[str, Any] | None, tier_data: list[dict[str, Any]], dataset: str,
                   protocol: str) -> dict[str, Any]:
    """The switches of (``dataset``, ``protocol``) in a tier: the top-level ``switches``, then the
    ``switches`` of the tier's data entries for that pair (``tiers.<tier>.data[].switches``).

    Raises
    ------
    ValueError
        Two entries of the pair give different switches (they share one processed dataset).
    """
    own = {json.dumps(e.get("switches") or {}, sort_keys=True) for e in tier_data
           if (e["dataset"], e["protocol"]) == (dataset, protocol)}
    if len(own) > 1:
        raise ValueError(f"the tier's data entries of {dataset}/{protocol} give different switches: {sorted(own)}")
    return {**(switches or {}), **(json.loads(own.pop()) if own else {})}


def resolve_recipe(protocols: dict[str, Any], protocol: str, dataset: str,
                   switches: dict[str, Any] | None = None) -> ProtocolRecipe:
    """Merge ``protocols[protocol].default``, its ``datasets[dataset]`` override and any switch."""
    if protocol not in protocols:
        raise ValueError(f"unknown protocol {protocol!r}; known: {sorted(protocols)}")
    section = protocols[protocol]
    layers = [section.get("default") or {}, (section.get("datasets") or {}).get(dataset) or {}]
    for (switch, sw_protocol, sw_dataset), by_value in SWITCH_OVERRIDES.items():
        value = (switches or {}).get(switch)
        if sw_protocol == protocol and sw_dataset == dataset and (value,) in by_value:
            layers.append(by_value[(value,)])
    merged: dict[str, Any] = {}
    for part in layers:
        for key, value in part.items():
            if key == "positive":
                merged["positive_op"] = None if value is None else value["op"]
                merged["positive_threshold"] = None if value is None else float(value["threshold"])
            elif key == "filter":
                merged["filter_mode"] = value.get("mode", "none")
                merged["item_min"] = int(value.get("item_min", 0))
                merged["user_min"] = int(value.get("user_min", 0))
            else:
                merged[key] = value
    recipe = ProtocolRecipe(protocol=protocol, dataset=dataset, **merged)
    if recipe.positive_op is not None and recipe.positive_op not in _OPS:
        raise ValueError(f"protocol {protocol!r}: positive op must be one of {list(_OPS)}, got {recipe.positive_op!r}")
    return recipe


def _apply_filters(frame: pd.DataFrame, recipe: ProtocolRecipe) -> pd.DataFrame:
    mode = recipe.filter_mode

    def keep_frequent(col: str, minimum: int, table: pd.DataFrame) -> np.ndarray:
        counts = table[col].map(table[col].value_counts())
        return (counts >= minimum).to_numpy()

    if mode == "none":
        return frame
    if mode == "simultaneous":
        mask = keep_frequent("item", recipe.item_min, frame) & keep_frequent("user", recipe.user_min, frame)
        return frame[mask]
    in_turn = {"items_then_users": (("item", recipe.item_min), ("user", recipe.user_min)),
               "users_then_items": (("user", recipe.user_min), ("item", recipe.item_min))}
    if mode in in_turn:  # one pass per column, each on what the previous one kept
        for col, minimum in in_turn[mode]:
            if minimum > 0:
                frame = frame[keep_frequent(col, minimum, frame)]
        return frame
    raise ValueError(f"unknown filter mode {mode!r}")


def gini(values: np.ndarray) -> float:
    """Gini coefficient ``Σ(2i − m − 1) x_(i) / (m Σx)`` of non-negative values (sorted ascending)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    m = x.size
    if m == 0 or x.sum() == 0:
        return 0.0
    i = np.arange(1, m + 1)
    return float(np.sum((2 * i - m - 1) * x) / (m * x.sum()))


def _summary(degree: np.ndarray) -> dict[str, float]:
    if degree.size == 0:
        return {"min": 0, "max": 0, "mean": 0.0}
    return {"min": int(degree.min()), "max": int(degree.max()), "mean": float(degree.mean())}


@dataclass(frozen=True)
class Preprocessed:
    interactions: Interactions
    user_ids: pd.Series  # processed id -> the dataset's own id
    item_ids: pd.Series
    recipe: ProtocolRecipe
    form: dict[str, Any] | None = None  # the reconstructed form read (name, lacks), None: canonical files

    def stats(self) -> dict[str, Any]:
        f = self.interactions.frame
        item_degree = np.bincount(f["item"].to_numpy(), minlength=self.interactions.n_items)
        user_degree = np.bincount(f["user"].to_numpy(), minlength=self.interactions.n_users)
        out = {
            "dataset": self.recipe.dataset,
            "protocol": self.recipe.protocol,
            "users": self.interactions.n_users,
            "items": self.interactions.n_items,
            "interactions": len(f),
            "density": self.interactions.density,
            "item_popularity_gini": gini(item_degree),
            "user_degree": _summary(user_degree),
            "item_degree": _summary(item_degree),
            "recipe": self.recipe.to_dict(),
        }
        if "part" in f.columns:
            out["parts"] = {str(k): int(v) for k, v in f["part"].value_counts().sort_index().items()}
        out["raw_form"] = self.form
        # the statistics the papers print for this (dataset, protocol), compared (expected/dataset_statistics.yaml)
        out["published_checks"] = statistics_checks(out)
        return out


def preprocess(raw: RawInteractions, recipe: ProtocolRecipe) -> Preprocessed:
    """Apply ``recipe`` to ``raw`` and give contiguous ids.

    Ids are assigned in sorted order of the dataset's own ids (as ``groupby`` in the
    official scripts does), so that seeded user permutations of the papers' split
    code (which permute the sorted unique users) are reproduced exactly. Row order is
    the file order.

    Raises
    ------
    FormRefusedError
        ``raw`` is a reconstructed form lacking a column ``recipe`` needs (:func:`check_form`).
    """
    check_form(raw, recipe)
    frame = raw.frame
    if "part" in frame.columns and recipe.merge_given_parts:
        frame = frame.drop(columns="part")
    if recipe.positive_op is not None:
        frame = frame[_OPS[recipe.positive_op](frame["rating"].to_numpy(), recipe.positive_threshold)]
    frame = _apply_filters(frame, recipe)
    user_codes, user_uniques = pd.factorize(frame["user"], sort=True)
    item_codes, item_uniques = pd.factorize(frame["item"], sort=True)
    out = pd.DataFrame(
        {
            "user": user_codes.astype(np.int32),
            "item": item_codes.astype(np.int32),
            "rating": frame["rating"].to_numpy(dtype=np.float32),
            "timestamp": frame["timestamp"].to_numpy(dtype=np.int64),
        }
    )
    if "part" in frame.columns:
        out["part"] = frame["part"].astype(str).to_numpy()
    interactions = Interactions(out, n_users=len(user_uniques), n_items=len(item_uniques))
    return Preprocessed(
        interactions=interactions,
        user_ids=pd.Series(np.asarray(user_uniques), name="raw_id"),
        item_ids=pd.Series(np.asarray(item_uniques), name="raw_id"),
        recipe=recipe,
        form=({"name": raw.extras["form"], "lacks": list(raw.extras.get("lacks", ()))}
              if raw.extras.get("form") else None),
    )


def write_preprocessed(result: Preprocessed, out_dir: str | Path) -> None:
    """Write ``interactions.parquet``, ``user_map.parquet``, ``item_map.parquet`` and, last, ``stats.json``.

    ``stats.json`` records each file's size and sha256 under ``files``; :func:`read_interactions`
    checks them before a split reads the data.
    """
    out_dir = Path(out_dir)
    write_parquet(out_dir / "interactions.parquet", result.interactions.frame)
    for name, ids in (("user", result.user_ids), ("item", result.item_ids)):
        ids_frame = pd.DataFrame({name: np.arange(len(ids), dtype=np.int32), "raw_id": ids.to_numpy()})
        if ids_frame["raw_id"].dtype == object:
            ids_frame["raw_id"] = ids_frame["raw_id"].astype(str)
        write_parquet(out_dir / f"{name}_map.parquet", ids_frame)
    files = {name: {"bytes": (out_dir / name).stat().st_size, "sha256": sha256_file(out_dir / name)}
             for name in PROCESSED_FILES}
    write_json(out_dir / "stats.json", {**result.stats(), "files": files})


def verify_processed_files(processed_dir: str | Path) -> dict[str, Any]:
    """Check the processed files against the sizes and sha256 that ``stats.json`` recorded; its stats.

    The size is compared first (free), then the sha256.  A ``stats.json`` written before
    digests were recorded is taken with a WARNING (the files are not verified).

    Raises
    ------
    ProcessedDataError
        A file is missing, or its size or sha256 differs: the file and both values.
    """
    processed_dir = Path(processed_dir)
    stats_path = processed_dir / "stats.json"
    stats = json.loads(stats_path.read_text())
    files = stats.get("files")
    if not isinstance(files, dict):
        log.warning("%s records no digests of the processed files (written before they were recorded): "
                    "they are NOT verified; preprocess again to record them", stats_path)
        return stats
    for name, recorded in sorted(files.items()):
        path = processed_dir / name
        if not path.is_file():
            raise ProcessedDataError(f"{path}: missing (listed in {stats_path}); preprocess again")
        size = path.stat().st_size
        if size != recorded["bytes"]:
            raise ProcessedDataError(f"{path}: {size} bytes, but preprocessing wrote {recorded['bytes']} "
                                     f"(recorded in {stats_path}); the file changed after preprocessing - "
                                     "preprocess again (delete it and rerun)")
        actual = sha256_file(path)
        if actual != recorded["sha256"]:
            raise ProcessedDataError(f"{path}: sha256 {actual} differs from {recorded['sha256']} recorded in "
                                     f"{stats_path}; the file changed after preprocessing - preprocess again "
                                     "(delete it and rerun)")
    return stats


def read_interactions(processed_dir: str | Path) -> Interactions:
    """Read a processed dataset written by :func:`write_preprocessed`, after :func:`verify_processed_files`."""
    processed_dir = Path(processed_dir)
    stats = verify_processed_files(processed_dir)
    frame = pd.read_parquet(processed_dir / "interactions.parquet")
    return Interactions(frame, n_users=int(stats["users"]), n_items=int(stats["items"]))


__all__ = [
    "FormRefusedError",
    "ProtocolRecipe",
    "Preprocessed",
    "check_form",
    "entry_switches",
    "needed_columns",
    "resolve_recipe",
    "preprocess",
    "write_preprocessed",
    "read_interactions",
    "verify_processed_files",
    "ProcessedDataError",
    "PROCESSED_FILES",
    "gini",
]
