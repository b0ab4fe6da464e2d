"""A leak audit of the splits the paper tier trains on: can a held-out (validation or test) pair
reach training, as a positive or by its exclusion from the training negatives, and do validation and
test rank against the same sampled negatives?

Measured on each split's files (:func:`audit_split`), for each training negative pool the paper's
trainers use (:func:`training_pools`): the parts whose (user, item) pairs a training negative may not
be, taken from the same constant the trainer reads where there is one (FedRAP's
``NEGATIVE_POOL_PARTS``). A held-out pair excluded from the training negatives is a leak: the model
learns, from never seeing it as a negative, that the pair is special (FedRAP's released pool gives
HR@10 1.000 on ML-100K: docs/deviations.md#fedrap-negative-pool). One JSON per split
(``results/<tier>/leak_audit/<dataset>/<protocol>/<split>/seed<k>.json``, made where the data are
here, committed), gathered by :func:`leak_table` into ``results/<tier>/leak_audit.csv`` and ``.md``;
each paper's claims page opens with its rows.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recrepro.io import read_json, write_json, write_text
from recrepro.paperlist import data_protocol_keys

__all__ = ["AUDIT_COLUMNS", "PROTOCOL_PAPER", "audit_split", "leak_table", "paper_of", "training_pools",
           "write_audit"]

#: the parts a protocol holds out (fold-in protocols: the held-out users' target parts)
HELD_OUT = ("validation", "test", "validation_te", "test_te")
#: model inputs at fold-in: a held-out user's known items (never their targets)
FOLD_IN = ("validation_tr", "test_tr")
#: which paper a protocol's split serves (``given``: a dataset's own published split)
PROTOCOL_PAPER = {p: p for p in data_protocol_keys()}
GIVEN_PAPER = {"gowalla": "prism", "ml-1m-exadmm-split": "exadmm"}
AUDIT_COLUMNS = ("paper", "dataset", "protocol", "split", "seed", "pool", "held_out_pairs", "held_out_in_training",
                 "validation_test_overlap", "held_out_excluded_from_negatives", "shared_eval_negatives",
                 "eval_negatives_that_are_positives", "verdict")


def training_pools(paper: str, variants: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, tuple[str, ...]]:
    """``{pool label: parts a training negative may not be}`` of ``paper``'s trainers, as the paper's
    ``rules.training_pools`` states them (FedRAP: each ``negative_pool`` its variants use)."""
    import importlib

    return importlib.import_module(f"recrepro.papers.{paper}.rules").training_pools(variants)


def _keys(frame: Any, n_items: int) -> np.ndarray:
    return np.unique(frame["user"].to_numpy(np.int64) * n_items + frame["item"].to_numpy(np.int64))


def _count_in(keys: np.ndarray, others: Sequence[np.ndarray]) -> int:
    if not others:
        return 0
    return int(np.isin(keys, np.concatenate(others)).sum())


def audit_split(split_dir: str | Path, pools: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The leak facts of one split, one row per training pool (counts of (user, item) pairs)."""
    from recrepro.evaluation.on_split import SplitData

    split = SplitData(split_dir)
    files = {Path(f).stem for f in split.manifest["files"]}
    keys = {name: _keys(split.part(name), split.n_items) for name in sorted(files)
            if name in ("train", "negatives", *HELD_OUT, *FOLD_IN)}
    held = [name for name in HELD_OUT if name in keys]
    held_keys = np.unique(np.concatenate([keys[n] for n in held])) if held else np.empty(0, np.int64)
    training = [keys[n] for n in ("train", *FOLD_IN) if n in keys]
    overlap = _count_in(keys["validation"], [keys["test"]]) if {"validation", "test"} <= set(keys) else 0
    positives = [keys[n] for n in keys if n != "negatives"]
    rows = []
    for label, parts in pools.items():
        excluded = [keys[p] for p in parts if p in keys and p not in ("train", *FOLD_IN)]
        in_negatives_pool = _count_in(held_keys, excluded)
        rows.append({
            "pool": label, "held_out_pairs": int(held_keys.size),
            "held_out_in_training": _count_in(held_keys, training),
            "validation_test_overlap": overlap,
            "held_out_excluded_from_negatives": in_negatives_pool,
            # one list of sampled negatives ranks both validation and test (leave-one-out protocols)
            "shared_eval_negatives": "yes" if "negatives" in keys and "validation" in keys and "test" in keys
            else "no sampled negatives",
            "eval_negatives_that_are_positives": _count_in(keys["negatives"], positives) if "negatives" in keys else 0,
        })
    seed = split.manifest.get("seed", (split.manifest.get("params") or {}).get("seed"))
    return {**split.describe(), "seed": "" if seed is None else int(seed), "rows": rows}


def write_audit(split_dir: str | Path, paper: str, out: str | Path,
                variants: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """:func:`audit_split` under ``paper``'s training pools, written as JSON (``paper`` recorded)."""
    audit = {"paper": paper, **audit_split(split_dir, training_pools(paper, variants))}
    write_json(out, audit)
    return audit


def _verdict(row: Mapping[str, Any]) -> str:
    problems = []
    if row["held_out_in_training"]:
        problems.append("held-out pairs among the training positives")
    if row["validation_test_overlap"]:
        problems.append("validation and test share pairs")
    if row["held_out_excluded_from_negatives"]:
        problems.append("held-out pairs never drawn as training negatives")
    if row["eval_negatives_that_are_positives"]:
        problems.append("sampled evaluation negatives that are positives")
    note = ("; validation and test rank against the same sampled negatives (a pick on validation is made on "
            "test's negatives)" if row["shared_eval_negatives"] == "yes" else "")
    if not problems:
        return "no leak" + note
    return "leak: " + "; ".join(problems) + note


def leak_table(audit_files: Sequence[str | Path], out_csv: str | Path, out_md: str | Path) -> list[dict[str, Any]]:
    """Gather the per-split audits into one table (CSV and Markdown), sorted by paper, dataset, split, pool."""
    rows = []
    for path in sorted(map(Path, audit_files)):
        audit = read_json(path)
        for row in audit["rows"]:
            out = {"paper": audit["paper"], "dataset": audit.get("dataset", ""), "protocol": audit.get("protocol", ""),
                   "split": audit.get("split", ""), "seed": audit.get("seed", ""), **row}
            # the λ step trains on validation by design: its validation pairs' exclusion is no leak
            if out["pool"].startswith("λ step") and out["held_out_excluded_from_negatives"]:
                out["verdict"] = "no test leak (the λ step's own positives are validation's)"
            else:
                out["verdict"] = _verdict(out)
            rows.append(out)
    rows.sort(key=lambda r: (r["paper"], r["dataset"], r["split"], str(r["seed"]), r["pool"]))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(AUDIT_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: r.get(k, "") for k in AUDIT_COLUMNS} for r in rows)
    write_text(out_csv, buffer.getvalue())
    write_text(out_md, leak_markdown(rows))
    return rows


def leak_markdown(rows: Sequence[Mapping[str, Any]], title: str = "# Leak audit") -> str:
    lines = [title, "",
             "Per split the paper tier trains on and per training negative pool its trainers use, counted on the "
             "split's files (`recrepro.papers.leaks`): held-out (validation and test) pairs among the training "
             "positives, pairs shared by validation and test, held-out pairs a training negative may never be "
             "(the model then learns that they are special), whether one list of sampled negatives ranks both "
             "validation and test, and sampled evaluation negatives that are positives anywhere. A check run "
             "under a leaking pool never counts for a claim (docs/verdicts.md).", "",
             "| paper | dataset | split | pool | held-out pairs | in training | validation ∩ test | never a negative "
             "| shared eval negatives | eval negatives that are positives | verdict |",
             "|---|---|---|---|---:|---:|---:|---:|---|---:|---|"]
    for r in rows:
        lines.append(f"| {r['paper']} | {r['dataset']} | {r['split']} (seed {r['seed']}) | {r['pool']} "
                     f"| {int(r['held_out_pairs']):,} | {int(r['held_out_in_training']):,} "
                     f"| {int(r['validation_test_overlap']):,} | {int(r['held_out_excluded_from_negatives']):,} "
                     f"| {r['shared_eval_negatives']} | {int(r['eval_negatives_that_are_positives']):,} "
                     f"| {r['verdict']} |")
    if not rows:
        lines.append("| – | – | – | – | – | – | – | – | – | – | no split audited yet |")
    return "\n".join(lines) + "\n"


def paper_of(dataset: str, protocol: str) -> str | None:
    """The paper a data entry's split serves (None: none whose trainers the audit knows)."""
    if protocol == "given":
        return GIVEN_PAPER.get(dataset)
    return PROTOCOL_PAPER.get(protocol)
