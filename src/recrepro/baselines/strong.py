"""Tuned strong simple baselines on a paper's own split, with that split's evaluator (issue 48).

Ferrari Dacrema, Cremonesi & Jannach (RecSys 2019) and Rendle et al. (RecSys 2022) ask whether
a new method beats *well-tuned* simple baselines on the paper's own split and metric.  This
module runs them: MostPop, ItemKNN (:mod:`recrepro.models.itemknn`), RP3beta
(:mod:`recrepro.models.rp3beta`), EASE (:mod:`recrepro.models.ease`) and iALS
(:mod:`recrepro.models.ials`, tuned as Rendle et al. recommend: dimension, L2 with frequency
scaling, unobserved weight α0).

``tune`` (:func:`tune_and_test`)
    Every point of a stated grid (``config.yaml: strong_baselines``) is fitted on the split's
    ``fit`` parts and scored on its **validation** part with the protocol's evaluator; the pick
    is the best point on the paper's own metric (``select``; the first in grid order wins a
    tie).  The pick is then tested on every model seed (deterministic models: once), one run
    record per seed; ``grid.json`` holds every point's validation score, the pick and the runs.
``table`` (:func:`strong_table`)
    From those records: per model the test mean ± sd at its pick, beside the paper's method's
    records on the same split, with a paired t-test over users where both sides' per-user rows
    exist.

Strong generalisation (exADMM): held-out users are folded in from their ``*_tr`` rows; the
item–item models score them from those rows with the item–item matrix fitted on ``train``,
iALS solves their rows with V fixed, as exADMM's own iALS does.

The models (:mod:`.strong_models`), the configuration's helpers for the rules (:mod:`.strong_config`),
the table (:mod:`.strong_table`) and the drift check (:mod:`.strong_drift`) are modules of their own;
their public names are importable from here too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recrepro.baselines.grid import beyond_edges, check_beyond, expand_grid, grid_edges, pick_point
from recrepro.baselines.strong_config import (
    entry_evaluation,
    entry_models,
    grid_records,
    job_key,
    ledger_path,
    papers,
    protocol_entry,
    table_protocols,
    tier_block,
    tune_params,
    walks_past_edges,
)
from recrepro.baselines.strong_drift import _same_without_walk, outdated_grids, record_drift
# tune_and_test calls make_model and _evaluate, and reads KEEP_BEST_BYTES, through this module's names
# (the tests stand in for them here)
from recrepro.baselines.strong_models import MODEL_CLASSES, MODELS, make_model, model_class, setting_floors, settings_text
from recrepro.baselines.strong_table import (
    LIST_METRICS,
    REFERENCES_FILE,
    TABLE_COLUMNS,
    ReferencesError,
    _points_text,
    load_references,
    pick_edges,
    render_markdown,
    strong_table,
)
from recrepro.io import read_json, sha256_file, write_json

if TYPE_CHECKING:  # the rules import this module for its config helpers: no torch, no pandas at parse time
    from recrepro.evaluation.on_split import SplitData
    from recrepro.models.base import Recommender

__all__ = ["MODELS", "PointLedger", "ReferencesError", "beyond_edges", "expand_grid", "grid_edges", "ledger_key",
           "load_references", "make_model", "model_class", "outdated_grids", "pick_point", "record_drift",
           "setting_floors", "strong_table", "tune_and_test", "validation_section"]


def validation_section(evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's evaluation section moved to the validation part.

    Fold-in splits (``fold_in: test_tr``): ``validation_tr`` is folded in and excluded,
    ``validation_te`` is the target.  Otherwise the target is ``validation`` and the
    ``validation`` part leaves the excluded parts (it is the target now) and the fitted parts
    (a protocol that fits its test model on ``train`` + ``validation``, e.g. ``lightgcn_given_val``,
    tunes on ``train`` alone and refits the pick).
    """
    val = dict(evaluation)
    if "fold_in" in evaluation:
        swap = lambda name: name.replace("test", "validation", 1)  # noqa: E731
        val["fold_in"] = swap(evaluation["fold_in"])
        val["exclude"] = [swap(p) for p in evaluation.get("exclude", [])]
        val["target"] = swap(evaluation["target"])
    else:
        val["target"] = "validation"
        val["fit"] = [p for p in evaluation["fit"] if p != "validation"]
        if "exclude" in evaluation:
            val["exclude"] = [p for p in evaluation["exclude"] if p != "validation"]
    return val


def _evaluate(model: Recommender, split: SplitData, evaluation: Mapping[str, Any], device: str, batch_size: int):
    from recrepro.evaluation.on_split import evaluate_on_split

    if "fold_in" in evaluation and hasattr(model, "fold_in_users"):
        model.fold_in_users(split.csr([evaluation["fold_in"]]))
    section = {k: v for k, v in evaluation.items() if k != "fold_in"}
    return evaluate_on_split(model, split, section, device=device, batch_size=batch_size)


#: a grid's best model is kept for the test run (no refit) when its arrays take at most this
KEEP_BEST_BYTES = 1 << 30


def _array_bytes(model: Any) -> int:
    """Bytes of the dense arrays (numpy, torch: both have ``shape`` and ``nbytes``) a fitted model
    holds as attributes."""
    return sum(int(v.nbytes) for v in vars(model).values() if hasattr(v, "nbytes") and hasattr(v, "shape"))


def fit_memory_mb(model: str, fixed: Mapping[str, Any] | None, n_items: int) -> float:
    """MB a strong baseline's fit holds beyond the evaluation's buffers (a job's memory request).

    EASE holds one ``n_items x n_items`` matrix (inverted in place: :mod:`recrepro.models.ease`) in
    its ``dtype``, plus about half as much again while the sparse ``XᵀX`` becomes that matrix and
    while its lower triangle is mirrored: 9.6 GB on gowalla's 40,981 items in float32.  The other
    models' fits (sparse neighbourhoods, factors) stay inside the evaluation's estimate.
    """
    if model != "ease":
        return 0.0
    itemsize = 4 if str((fixed or {}).get("dtype", "float64")) == "float32" else 8
    return 1.5 * itemsize * float(n_items) ** 2 / 2**20


class _GridSearch:
    """The grid's points scored on the validation part, in the order scored (a point the ledger has is
    taken from it), and the best model so far where it is worth keeping for the test run."""

    def __init__(self, model: str, settings_seed: int, split: SplitData, train: Any, val_eval: Mapping[str, Any],
                 select: str, ledger: PointLedger, refit: bool, device: str, batch_size: int) -> None:
        self.model, self.seed, self.split, self.train = model, settings_seed, split, train
        self.val_eval, self.select, self.ledger, self.refit = val_eval, select, ledger, refit
        self.device, self.batch_size = device, batch_size
        self.rows: list[dict[str, Any]] = []
        self.best = -np.inf
        self.best_model: Recommender | None = None
        self.resumed: list[int] = []

    def scores(self) -> list[float]:
        return [r[f"val:{self.select}"] for r in self.rows]

    def score(self, i: int, settings: dict[str, Any], walked: bool) -> None:
        model, select = self.model, self.select
        if (row := self.ledger.row(i, settings)) is not None:
            self.rows.append(row)
            self.resumed.append(i)
            print(f"{model} point {i} {settings_text(settings)}: validation {select} "
                  f"{row[f'val:{select}']:.5f} (from the checkpoint)", flush=True)
            if row[f"val:{select}"] > self.best:  # its model was not kept: refitted at the pick
                self.best, self.best_model = row[f"val:{select}"], None
            return
        started, cpu_started = time.perf_counter(), time.process_time()
        fitted = make_model(model, settings, self.seed, self.device).fit(self.train)
        fit_seconds = time.perf_counter() - started
        result = _evaluate(fitted, self.split, self.val_eval, self.device, self.batch_size)
        if select not in result.overall:
            raise ValueError(f"select metric {select!r} not among the validation metrics {sorted(result.overall)}")
        value = float(result.overall[select])
        self.rows.append({"point": i, "settings": settings, f"val:{select}": value, "fit_seconds": fit_seconds,
                          "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu_started,
                          **({"beyond": True} if walked else {})})
        self.ledger.add(self.rows[-1])
        print(f"{model} point {i} {settings_text(settings)}: validation {select} {value:.5f}"
              + (" (past the grid's edge)" if walked else ""), flush=True)
        if value > self.best:  # strict: the first of equal scores stays (pick_point's rule)
            # refit: not needed again; a large model (EASE on gowalla: 6.7 GB) is not kept beside the
            # next point's fit, which would double the job's peak memory: it is refitted at the pick
            keep = not self.refit and _array_bytes(fitted) <= KEEP_BEST_BYTES
            self.best, self.best_model = value, (fitted if keep else None)
        del fitted


def ledger_key(model: str, points: Sequence[Mapping[str, Any]], val_eval: Mapping[str, Any], select: str,
               seeds: Sequence[int], batch_size: int, beyond: Mapping[str, Sequence[Any]] | None,
               split_dir: Path) -> dict[str, Any]:
    """What a :class:`PointLedger`'s rows were scored under (the code's digest is added by the ledger)."""
    return {"model": model, "points": list(points), "evaluation": dict(val_eval), "select": select,
            "seed": int(seeds[0]), "batch_size": int(batch_size), **({"beyond": dict(beyond)} if beyond else {}),
            "split_manifest_sha256": sha256_file(Path(split_dir) / "manifest.json")}


def tune_and_test(*, split_dir: Path, model: str, grid: Mapping[str, Sequence[Any]] | None,
                  fixed: Mapping[str, Any] | None, evaluation: Mapping[str, Any], select: str,
                  seeds: Sequence[int], out_dir: Path, meta: Mapping[str, Any], device: str = "cpu",
                  batch_size: int = 2048, checkpoint: Path | None = None,
                  beyond: Mapping[str, Sequence[Any]] | None = None) -> dict[str, Any]:
    """Tune ``model`` on the validation part, test the pick on every seed, write the records.

    ``beyond``: setting -> values past the grid's range; after the grid, the pick walks outward
    through them while it sits on an edge (:func:`beyond_edges`), one scored point per step.

    Writes ``out_dir/seed<k>/`` (run records of the test part at the pick; a deterministic
    model has one, under the first seed) and then ``out_dir/grid.json``.  Returns its content.

    ``checkpoint``: a ledger of the grid points scored so far (:class:`PointLedger`), written after
    each point; a job killed mid-grid and started again scores only the points the ledger lacks
    (EASE on gowalla: about 12 CPU-minutes a point). ``grid.json`` names the points taken from it
    (``resumed_points``) and the ledger is removed once ``grid.json`` is written.
    """
    from recrepro.evaluation.on_split import SplitData, write_split_record

    if model not in MODELS:
        raise ValueError(f"unknown strong baseline {model!r}; known: {', '.join(MODELS)}")
    if not seeds:
        raise ValueError("tune_and_test needs at least one seed")
    out_dir = Path(out_dir)
    split = SplitData(split_dir)
    val_eval = validation_section(evaluation)
    train = split.csr(val_eval["fit"])
    # the test model is fitted on more than the tuned one (lightgcn_given_val: train + validation)
    refit = list(val_eval["fit"]) != list(evaluation["fit"])
    check_beyond(grid, beyond)
    points = expand_grid(grid, fixed)
    ledger = PointLedger(checkpoint, ledger_key(model, points, val_eval, select, seeds, batch_size, beyond, split.dir))
    search = _GridSearch(model, seeds[0], split, train, val_eval, select, ledger, refit, device, batch_size)
    for i, settings in enumerate(points):
        search.score(i, settings, walked=False)
    n_grid = len(points)
    while steps := beyond_edges(points, search.scores(), beyond):
        for settings in steps:
            points.append(settings)
            search.score(len(points) - 1, settings, walked=True)
    rows = search.rows
    pick = pick_point(search.scores())
    chosen = points[pick]
    run_seeds = list(seeds) if MODELS[model] else [seeds[0]]
    runs = []
    for seed in run_seeds:
        started = time.time()
        if seed == seeds[0] and search.best_model is not None:
            fitted = search.best_model
        else:
            fitted = make_model(model, chosen, seed, device).fit(split.csr(evaluation["fit"]) if refit else train)
        result = _evaluate(fitted, split, evaluation, device, batch_size)
        run_dir = out_dir / f"seed{seed}"
        write_split_record(
            run_dir, split, result,
            meta={"method": model, **meta, "settings": chosen, "settings_text": settings_text(chosen),
                  "selected_by": f"validation {select}", "grid_points": len(points),
                  f"val:{select}_at_pick": rows[pick][f"val:{select}"]},
            config_slice={"model": model, "grid": dict(grid or {}), "fixed": dict(fixed or {}),
                          **({"beyond": dict(beyond)} if beyond else {}),
                          "evaluation": dict(evaluation), "select": select, "batch_size": batch_size},
            seed=seed, device=device, started_at=started)
        runs.append(f"seed{seed}")
    summary = {"model": model, **{k: meta[k] for k in ("dataset", "protocol", "split") if k in meta},
               "select": select, "grid_points": len(points), "grid": dict(grid or {}), "fixed": dict(fixed or {}),
               "points": rows, "pick": pick, "settings": chosen, "seeds": run_seeds, "runs": runs,
               "deterministic": not MODELS[model]}
    if beyond:
        summary["beyond"] = dict(beyond)
        summary["beyond_points"] = len(points) - n_grid
    if search.resumed:
        summary["resumed_points"] = search.resumed
    write_json(out_dir / "grid.json", summary)
    ledger.remove()
    return summary


class PointLedger:
    """The grid points a :func:`tune_and_test` job has scored, kept in a JSON file between runs.

    A row is reused only when the file's ``key`` (model, every grid point's settings, the validation
    evaluation, ``select``, the seed, the batch size, the split manifest's sha256 and the source digest
    of the code that trains, :func:`recrepro.runtime.checkpoints.code_fingerprint`) equals the job's: a change
    of the grid, the split, the evaluator or the model code starts the grid again, as a training
    checkpoint does. The file is the run's like a checkpoint: one process at a time holds its lock
    (:func:`recrepro.runtime.checkpoints.acquire_lock`). ``path=None`` keeps nothing.
    """

    def __init__(self, path: str | Path | None, key: Mapping[str, Any]) -> None:
        import json

        from recrepro.runtime.checkpoints import acquire_lock, code_fingerprint

        self.path = Path(path) if path else None
        key = {**key, "code_sha256": code_fingerprint()["source_sha256"]}
        self.key = json.loads(json.dumps(key, default=str))  # as it reads back from the file
        self.rows: dict[int, dict[str, Any]] = {}
        if self.path is None:
            return
        acquire_lock(self.path)  # a second job on this grid stops here, naming the first
        if self.path.is_file():
            stored = read_json(self.path)
            if stored.get("key") == self.key:
                self.rows = {int(r["point"]): r for r in stored.get("rows", [])}
            else:
                print(f"{self.path}: written for another grid, split, evaluation or code: the grid starts again",
                      flush=True)

    def row(self, point: int, settings: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The stored row of ``point``; ``None`` when there is none or it scored other ``settings`` (a
        walk past the grid's edge numbers its points in the order it takes them)."""
        import json

        row = self.rows.get(point)
        if row is None or settings is None:
            return row
        return row if row.get("settings") == json.loads(json.dumps(dict(settings), default=str)) else None

    def add(self, row: Mapping[str, Any]) -> None:
        self.rows[int(row["point"])] = dict(row)
        if self.path is not None:
            write_json(self.path, {"key": self.key, "rows": [self.rows[i] for i in sorted(self.rows)]})

    def remove(self) -> None:
        if self.path is not None:
            from recrepro.runtime.checkpoints import release_lock

            self.path.unlink(missing_ok=True)
            release_lock(self.path)
