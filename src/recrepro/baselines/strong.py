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
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from recrepro.evaluation.exposure import lower_is_better
from recrepro.baselines.grid import beyond_edges, check_beyond, expand_grid, grid_edges, pick_point
from recrepro.io import read_json, read_yaml_entries, sha256_file, write_json, write_text

if TYPE_CHECKING:  # the rules import this module for its config helpers: no torch, no pandas at parse time
    import pandas as pd

    from recrepro.models.base import Recommender
    from recrepro.evaluation.on_split import SplitData

__all__ = ["MODELS", "PointLedger", "ReferencesError", "beyond_edges", "expand_grid", "grid_edges", "load_references", "make_model",
           "model_class", "pick_point", "record_drift", "setting_floors", "strong_table", "tune_and_test", "validation_section"]

#: Models and whether a seed changes their fit.
MODELS = {"mostpop": False, "itemknn": False, "rp3beta": False, "ease": False, "ials": True}
#: Metrics of the whole set of top-K lists (exposure), with no per-user value to pair.
LIST_METRICS = ("coverage", "gini", "gini_pos")
#: Published numbers of methods the pipeline does not run, shown beside a protocol's baselines
REFERENCES_FILE = Path(__file__).resolve().parents[1] / "expected" / "strong.yaml"
_REFERENCE_KEYS = {"dataset", "split", "method", "source", "note", "values"}
TABLE_COLUMNS = ["dataset", "split", "method", "settings", "budget", "pick_edges", "metric", "mean", "sd", "n_seeds",
                 "covers_seeds", "paper_method", "paper_mean", "paper_n_seeds", "p_value", "p_note"]


#: Each strong baseline's class: (module under recrepro.models, class name); imported on use.
MODEL_CLASSES = {"mostpop": ("baselines", "MostPopular"), "itemknn": ("itemknn", "ItemKNN"),
                 "rp3beta": ("rp3beta", "RP3beta"), "ease": ("ease", "EASE"), "ials": ("ials", "IALS")}


def model_class(name: str) -> type[Recommender]:
    """The class of the strong baseline ``name``."""
    if name not in MODEL_CLASSES:
        raise ValueError(f"unknown strong baseline {name!r}; known: {', '.join(MODELS)}")
    module, cls = MODEL_CLASSES[name]
    return getattr(importlib.import_module(f"recrepro.models.{module}"), cls)


def make_model(name: str, settings: Mapping[str, Any], seed: int = 0, device: str = "cpu") -> Recommender:
    """The model ``name`` with ``settings`` (a grid point merged over the fixed settings)."""
    cls = model_class(name)
    if name == "mostpop":
        return cls()
    if name == "ease":
        return cls(device=device, **settings)
    if name == "ials":
        return cls(seed=seed, device=device, log_losses=False, **settings)
    return cls(**settings)


def setting_floors(model: str) -> dict[str, float]:
    """The strong baseline ``model``'s :attr:`~recrepro.models.base.Recommender.SETTING_FLOORS`."""
    return dict(model_class(model).SETTING_FLOORS)


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


def _settings_text(settings: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(settings.items()))


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
    ledger = PointLedger(checkpoint, {
        "model": model, "points": list(points), "evaluation": dict(val_eval), "select": select,
        "seed": int(seeds[0]), "batch_size": int(batch_size), **({"beyond": dict(beyond)} if beyond else {}),
        "split_manifest_sha256": sha256_file(split.dir / "manifest.json")})
    rows, best, best_model, resumed = [], -np.inf, None, []

    def score(i: int, settings: dict[str, Any], walked: bool) -> None:
        nonlocal best, best_model
        if (row := ledger.row(i, settings)) is not None:
            rows.append(row)
            resumed.append(i)
            print(f"{model} point {i} {_settings_text(settings)}: validation {select} "
                  f"{row[f'val:{select}']:.5f} (from the checkpoint)", flush=True)
            if row[f"val:{select}"] > best:  # its model was not kept: refitted at the pick
                best, best_model = row[f"val:{select}"], None
            return
        started, cpu_started = time.perf_counter(), time.process_time()
        fitted = make_model(model, settings, seeds[0], device).fit(train)
        fit_seconds = time.perf_counter() - started
        result = _evaluate(fitted, split, val_eval, device, batch_size)
        if select not in result.overall:
            raise ValueError(f"select metric {select!r} not among the validation metrics {sorted(result.overall)}")
        value = float(result.overall[select])
        rows.append({"point": i, "settings": settings, f"val:{select}": value, "fit_seconds": fit_seconds,
                     "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu_started,
                     **({"beyond": True} if walked else {})})
        ledger.add(rows[-1])
        print(f"{model} point {i} {_settings_text(settings)}: validation {select} {value:.5f}"
              + (" (past the grid's edge)" if walked else ""), flush=True)
        if value > best:  # strict: the first of equal scores stays (pick_point's rule)
            # refit: not needed again; a large model (EASE on gowalla: 6.7 GB) is not kept beside the
            # next point's fit, which would double the job's peak memory: it is refitted at the pick
            keep = not refit and _array_bytes(fitted) <= KEEP_BEST_BYTES
            best, best_model = value, (fitted if keep else None)
        del fitted

    for i, settings in enumerate(points):
        score(i, settings, walked=False)
    n_grid = len(points)
    while steps := beyond_edges(points, [r[f"val:{select}"] for r in rows], beyond):
        for settings in steps:
            points.append(settings)
            score(len(points) - 1, settings, walked=True)
    pick = pick_point([r[f"val:{select}"] for r in rows])
    chosen = points[pick]
    run_seeds = list(seeds) if MODELS[model] else [seeds[0]]
    runs = []
    for seed in run_seeds:
        started = time.time()
        if seed == seeds[0] and best_model is not None:
            fitted = best_model
        else:
            fitted = make_model(model, chosen, seed, device).fit(split.csr(evaluation["fit"]) if refit else train)
        result = _evaluate(fitted, split, evaluation, device, batch_size)
        run_dir = out_dir / f"seed{seed}"
        write_split_record(
            run_dir, split, result,
            meta={"method": model, **meta, "settings": chosen, "settings_text": _settings_text(chosen),
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
    if resumed:
        summary["resumed_points"] = resumed
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


# ----------------------------------------------------------------------------- the rules' helpers
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
    A protocol with ``beyond_edges: false`` searches its grid only (``beyond`` empty)."""
    entry = protocol_entry(config, tier, dataset, protocol, split)
    search = entry_models(config, tier, entry)[model]
    return {"evaluation": entry_evaluation(config, entry), "grid": search.get("grid", {}),
            "fixed": search.get("fixed", {}),
            "beyond": search.get("beyond", {}) if entry.get("beyond_edges", True) else {},
            "select": entry["select"],
            "seeds": ",".join(str(s) for s in entry["seeds"])}


def job_key(wildcards: Any) -> tuple[str, str, str, str, str]:
    """``(tier, dataset, protocol, split, model)`` of a ``strong_tune`` job's wildcards."""
    return (wildcards.tier, wildcards.dataset, wildcards.protocol, wildcards.split, wildcards.model)


def table_protocols(config: Mapping[str, Any], tier: str, paper: str) -> dict[str, Any]:
    """``"<dataset>/<split>"`` -> the metrics and paper method :func:`strong_table` needs."""
    return {f"{e['dataset']}/{e['split']}": {"metrics": e["metrics"], "paper_method": e.get("paper_method"),
                                               "models": list(entry_models(config, tier, e)),
                                               "split_seeds": list(e["split_seeds"])}
            for e in tier_block(config, tier).get("protocols", []) if e["paper"] == paper}


# ----------------------------------------------------------------------------- table
def _paired_p(ours: Sequence[Path], theirs: Sequence[Path], metric: str,
              part: str | None = None) -> tuple[float | None, str]:
    """Two-sided paired t-test over users of ``metric`` (each side averaged over its seeds).

    ``part``: the paper's method's held-out part compared (its ``<part>_per_user.parquet``, where
    its record is of another part: exADMM's fixture records validation and compares test).
    """
    import pandas as pd
    from scipy import stats

    def per_user(dirs: Sequence[Path], name: str = "per_user.parquet") -> pd.Series | str:
        frames = []
        for d in dirs:
            f = Path(d) / name
            if name != "per_user.parquet" and not f.exists() and _record_part(Path(d)) == part:
                f = Path(d) / "per_user.parquet"  # the record is of that part already
            if not f.exists():
                return "missing"
            frame = pd.read_parquet(f)
            if metric not in frame.columns:
                return "not per user"
            frames.append(frame.set_index("user")[metric])
        return pd.concat(frames, axis=1).mean(axis=1) if frames else "missing"

    if metric.split("@")[0] in LIST_METRICS:
        return None, f"{metric} is a property of all users' lists, not a per-user value"
    # the paper's side first: the note must not depend on which git-ignored files a checkout holds
    b = per_user(theirs, f"{part}_per_user.parquet" if part else "per_user.parquet")
    if isinstance(b, str):
        return None, (f"per-user rows of the paper's method's {part} part not kept" if part else
                      "per-user rows of the paper's method not kept (git-ignored)")
    a = per_user(ours)
    if isinstance(a, str):
        return None, "no per-user rows of the baseline"
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    if len(joined) < 2 or np.allclose(joined["a"], joined["b"]):
        return None, "fewer than two users, or identical per-user values"
    return float(stats.ttest_rel(joined["a"], joined["b"]).pvalue), f"paired t-test over {len(joined)} users"


def _numbered(name: str, prefix: str) -> int | None:
    """``k`` of a folder named ``<prefix><k>`` (``split123``, ``seed0``), else ``None``."""
    rest = name[len(prefix):]
    return int(rest) if name.startswith(prefix) and rest.isdigit() else None


def _paired_over_splits(grids: Sequence[tuple[Path, Mapping[str, Any]]], paper_dirs: Sequence[Path], metric: str,
                        part: str | None, why_not_users: str) -> tuple[float | None, str]:
    """Where no per-user rows can be paired: a two-sided paired t-test over the protocol's splits, when
    each split seed has its own split and the paper's method ran one seed per split under the split's
    number (PRISM's random splits: its ``seed123`` trained on split 123). Each side's value on a split
    is its mean over the runs there. Else ``(None, why_not_users)``."""
    from scipy import stats

    ours: dict[int, float] = {}
    for grid_file, grid in grids:
        split = _numbered(grid_file.parent.name, "split")
        if split is None:
            return None, why_not_users
        values = [_run_metrics(grid_file.parent / r).get(metric, np.nan) for r in grid["runs"]]
        ours[split] = float(np.nanmean(values))
    theirs = {k: _run_metrics(d, part).get(metric, np.nan) for d in paper_dirs
              if (k := _numbered(d.name, "seed")) is not None}
    common = sorted(k for k in set(ours) & set(theirs) if np.isfinite(ours[k]) and np.isfinite(theirs[k]))
    if len(common) < 2:
        return None, why_not_users
    a, b = np.array([ours[k] for k in common]), np.array([theirs[k] for k in common])
    if np.allclose(a - b, (a - b)[0]):
        return None, f"{why_not_users}; constant differences over {len(common)} splits"
    return float(stats.ttest_rel(a, b).pvalue), f"paired t-test over {len(common)} splits ({why_not_users.split(' (')[0]})"


def _on_the_rows_splits(grids: Sequence[tuple[Path, Mapping[str, Any]]], paper_dirs: Sequence[Path],
                        split_seeds: Sequence[int]) -> list[Path]:
    """The paper's runs on the splits a row's grids ran, where each split seed has its own split and the
    paper's ``seed<k>`` trained on split k (PRISM's random splits): a baseline run on split 123 alone is
    set beside the paper's method on split 123, not beside its mean over three splits.  Else every run."""
    if len(split_seeds) < 2:
        return list(paper_dirs)
    ran = {k for f, _ in grids if (k := _numbered(f.parent.name, "split")) is not None}
    seeds = {d: k for d in paper_dirs if (k := _numbered(d.name, "seed")) is not None}
    if len(seeds) != len(paper_dirs) or not set(seeds.values()) <= set(map(int, split_seeds)):
        return list(paper_dirs)
    kept = [d for d in paper_dirs if seeds[d] in ran]
    return kept or list(paper_dirs)


def _record_part(run_dir: Path) -> str | None:
    """The held-out part a run record scores (its provenance's ``target``, ``<part>_te``), if it says."""
    path = run_dir / "provenance.json"
    target = str((read_json(path).get("config") or {}).get("target", "")) if path.exists() else ""
    return target[:-3] if target.endswith("_te") else None


def _run_metrics(run_dir: Path, part: str | None = None) -> dict[str, float]:
    if part:
        return read_json(run_dir / f"{part}.json")["overall"]
    return read_json(run_dir / "metrics.json")["overall"]


def _paper_runs(spec: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
                results_root: str | Path) -> tuple[dict[str, Any], list[Path]]:
    """The paper's method to compare and its seeds' run folders: ``spec`` is one method or a list in
    preference order (e.g. FedRAP at its validation-grid pick, else at the README's flags), of which
    the first with records is taken (none recorded: the first, with no runs)."""
    if not spec:
        return {}, []
    candidates = [spec] if isinstance(spec, Mapping) else list(spec)
    for candidate in candidates:
        dirs = sorted((Path(results_root) / candidate["runs"]).glob("seed*"))
        dirs = [d for d in dirs if (d / "metrics.json").exists()]
        if dirs:
            return dict(candidate), dirs
    return dict(candidates[0]), []


class ReferencesError(ValueError):
    """``expected/strong.yaml`` is malformed (the message names the entry and what is wrong)."""


def load_references(path: str | Path = REFERENCES_FILE) -> list[dict[str, Any]]:
    """The published reference rows of ``path`` (see its header), validated: each names a dataset, a
    split, a method, its source and a note, and gives finite values per metric."""
    out = []
    for where, entry in read_yaml_entries(path, "references", _REFERENCE_KEYS, ReferencesError):
        values = entry["values"]
        if not isinstance(values, Mapping) or not values or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) for v in values.values()):
            raise ReferencesError(f"{where}: 'values' must map metrics to numbers, got {values!r}")
        out.append({**entry, "values": {str(k): float(v) for k, v in values.items()}})
    return out


def strong_table(grid_files: Sequence[str | Path], entry: Mapping[str, Any], *, results_root: str | Path,
                 out_md: Path, out_csv: Path, title: str,
                 references: Sequence[Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """The strong-baselines table of one paper from ``grid.json`` records.

    ``entry`` maps ``"<dataset>/<split>"`` to that protocol's ``metrics`` (reported),
    ``paper_method`` (its run directory relative to ``results_root``, the name and the part
    whose metrics it compares) — the config's protocol entries — and, where given, its ``models``
    and ``split_seeds``: a configured model with no grid record gets a "not run" row (no mean) on a
    protocol where another model ran, and one recorded on fewer splits than configured says so, so
    that "the strongest baseline" never silently means the strongest of those that happened to run.
    ``references`` (default: :func:`load_references`): published numbers of methods not run here,
    printed under their protocol's block in the Markdown only (the CSV, which the claims read, holds
    the baselines alone).
    """
    import pandas as pd

    groups: dict[tuple[str, str, str], list[tuple[Path, dict]]] = {}
    for grid_file in sorted(map(Path, grid_files)):
        grid = read_json(grid_file)
        groups.setdefault((grid["dataset"], grid["split"], grid["model"]), []).append((grid_file, grid))
    rows = []
    for (dataset, split, model), grids in groups.items():
        proto = entry[f"{dataset}/{split}"]
        # one grid per split seed (PRISM's three random splits): the runs of all of them
        run_dirs = [f.parent / r for f, g in grids for r in g["runs"]]
        picks = list(dict.fromkeys(_settings_text(g["settings"]) or "-" for _, g in grids))
        sizes = list(dict.fromkeys(_points_text(g) for _, g in sorted(grids, key=lambda fg: fg[1]["grid_points"])))
        n_splits = len(proto.get("split_seeds") or []) or len(grids)
        edges = pick_edges(grids)
        # past a walk, the edge is where the walk's list ended, not the configured grid's
        where = "the end of its walk" if any(g.get("beyond_points") for _, g in grids) else "the grid's edge"
        budget = (f"{' / '.join(sizes)}, picked on validation {grids[0][1]['select']}"
                  + (f" of each of {len(grids)} splits" if len(grids) > 1 else "")
                  + (f" ({len(grids)} of {n_splits} splits run)" if len(grids) < n_splits else "")
                  + (f"; pick on {where} in {edges}: a better point may lie beyond" if edges else ""))
        paper, paper_dirs = _paper_runs(proto.get("paper_method"), results_root)
        # a deterministic model gives the same numbers at every training seed: one run per split
        # stands for all of them once every split has run (else it is as short as it looks)
        covers = all(g.get("deterministic", False) for _, g in grids) and len(grids) >= n_splits
        paper_dirs = _on_the_rows_splits(grids, paper_dirs, proto.get("split_seeds") or [])
        for metric in proto["metrics"]:
            values = [_run_metrics(d).get(metric, np.nan) for d in run_dirs]
            theirs = [_run_metrics(d, paper.get("part")).get(metric, np.nan) for d in paper_dirs]
            if paper_dirs:
                p, note = _paired_p(run_dirs, paper_dirs, metric, paper.get("part"))
                if p is None and "not kept" in note:
                    p, note = _paired_over_splits(grids, paper_dirs, metric, paper.get("part"), note)
            else:
                p, note = None, "no records of the paper's method on this split"
            rows.append({
                "dataset": dataset, "split": split, "method": model, "settings": " / ".join(picks),
                "budget": budget, "pick_edges": edges, "metric": metric, "mean": float(np.nanmean(values)),
                "sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0, "n_seeds": len(values),
                "covers_seeds": covers, "paper_method": paper.get("method", ""),
                "paper_mean": float(np.nanmean(theirs)) if theirs else np.nan, "paper_n_seeds": len(theirs),
                "p_value": p, "p_note": note})
    rows += _not_run_rows(entry, _ran_models(groups), results_root)
    frame = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    if frame.empty:
        raise ValueError("strong_table: no grid records given")
    frame = frame.sort_values(["dataset", "split", "metric", "method"], kind="stable").reset_index(drop=True)
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    write_text(out_csv, frame.to_csv(index=False, float_format="%.6g"))
    write_text(Path(out_md), render_markdown(frame, title, load_references() if references is None else references))
    return frame


def _points_text(grid: Mapping[str, Any]) -> str:
    """``"16-point grid"``, or ``"16-point grid and 3 points past its edges"`` after a walk."""
    walked = int(grid.get("beyond_points") or 0)
    text = f"{grid['grid_points'] - walked}-point grid"
    return text + (f" and {walked} point{'' if walked == 1 else 's'} past its edges" if walked else "")


def pick_edges(grids: Sequence[tuple[Path, Mapping[str, Any]]]) -> str:
    """The searched settings at whose range's end the pick of one model's grids sits, e.g.
    ``"alpha (smallest), k (largest)"``; an edge that only some splits' picks sit on says on how many.
    Empty when every pick is inside its grid (or the grid searched one point); a smallest value at
    the model's floor (ItemKNN's shrink 0, RP3beta's β 0) is no edge."""
    counts: dict[str, int] = {}
    for _, grid in grids:
        settings = [point["settings"] for point in grid.get("points", [])]
        searched = set(grid.get("grid") or {})
        floors = setting_floors(grid["model"]) if grid.get("model") in MODELS else {}
        for edge in grid_edges(settings, {k: v for k, v in grid["settings"].items() if k in searched}, floors):
            counts[edge] = counts.get(edge, 0) + 1
    return ", ".join(edge + (f" on {n} of {len(grids)} splits" if n < len(grids) else "")
                     for edge, n in counts.items())


def _ran_models(groups: Mapping[tuple[str, str, str], Any]) -> dict[tuple[str, str], set[str]]:
    ran: dict[tuple[str, str], set[str]] = {}
    for dataset, split, model in groups:
        ran.setdefault((dataset, split), set()).add(model)
    return ran


def _not_run_rows(entry: Mapping[str, Any], ran: Mapping[tuple[str, str], set[str]],
                  results_root: str | Path) -> list[dict[str, Any]]:
    """A "not run" row per metric for each configured model without a grid record, on the protocols
    where another model ran (a protocol with none stays out of the table)."""
    rows = []
    for (dataset, split), models in sorted(ran.items()):
        proto = entry[f"{dataset}/{split}"]
        missing = [m for m in proto.get("models") or [] if m not in models]
        if not missing:
            continue
        paper, paper_dirs = _paper_runs(proto.get("paper_method"), results_root)
        paper_runs = [_run_metrics(d, paper.get("part")) for d in paper_dirs]
        for model in missing:
            for metric in proto["metrics"]:
                theirs = [run.get(metric, np.nan) for run in paper_runs]
                rows.append({
                    "dataset": dataset, "split": split, "method": model, "settings": "", "budget": "not run", "pick_edges": "",
                    "metric": metric, "mean": np.nan, "sd": np.nan, "n_seeds": 0, "covers_seeds": False,
                    "paper_method": paper.get("method", ""),
                    "paper_mean": float(np.nanmean(theirs)) if theirs else np.nan, "paper_n_seeds": len(theirs),
                    "p_value": None, "p_note": "not run"})
    return rows


def render_markdown(frame: pd.DataFrame, title: str, references: Sequence[Mapping[str, Any]] = ()) -> str:
    """The table as Markdown, one section per dataset/split; the best baseline per metric in bold, and
    under a section the published references for its dataset and split (:func:`load_references`)."""
    import pandas as pd

    lines = [f"# {title}", "",
             "Tuned simple baselines on the paper's own split, with its evaluator (issue 48): each model's "
             "grid is searched on the validation part with the paper's metric, and the pick is tested "
             "on every seed (deterministic models: one run per split, which stands for every seed). `paper` is our reproduction's run of the "
             "paper's method on the same split; `p` a two-sided paired t-test over users where both "
             "sides' per-user rows exist, else over the splits where each split seed has its own split and "
             "both sides ran on several (PRISM's random splits; `p_note` in the CSV says which). Bold: the best baseline per metric (Gini: the lowest). A configured "
             "model shown as not run leaves the strongest baseline open: the claims then never say the "
             "paper's method beats it.", ""]
    for (dataset, split), block in frame.groupby(["dataset", "split"], sort=True):
        lines += [f"## {dataset} · {split}", "",
                  "| metric | method | settings | budget | mean ± sd (n) | paper method | paper | p |",
                  "|---|---|---|---|---|---|---|---|"]
        for metric, rows in block.groupby("metric", sort=True):
            best = rows["mean"].min() if lower_is_better(metric) else rows["mean"].max()
            for _, r in rows.iterrows():
                if not r["n_seeds"]:
                    value = "not run"
                else:
                    n = f"{r['n_seeds']}, deterministic: every seed" if r["covers_seeds"] else r["n_seeds"]
                    value = f"{r['mean']:.4f} ± {r['sd']:.4f} ({n})"
                if r["mean"] == best:
                    value = f"**{value}**"
                paper = "" if pd.isna(r["paper_mean"]) else f"{r['paper_mean']:.4f} ({r['paper_n_seeds']})"
                if r["p_value"] is None or pd.isna(r["p_value"]):
                    p = f"– ({r['p_note']})"
                else:  # a t-test's p below the smallest double prints as 0
                    p = f"{r['p_value']:.2g}" if r["p_value"] > 0 else "< 1e-300"
                lines.append(f"| {metric} | {r['method']} | {r['settings']} | {r['budget']} | {value} | "
                             f"{r['paper_method']} | {paper} | {p} |")
        lines.append("")
        for ref in references:
            if (ref["dataset"], ref["split"]) == (dataset, split):
                shown = ", ".join(f"{metric} {value:.4f}" for metric, value in ref["values"].items())
                lines += [f"Published reference, not run here (never judged): **{ref['method']}** {shown} "
                          f"({ref['source']}; {ref['note']}).", ""]
    return "\n".join(lines)


def record_drift(config: Mapping[str, Any], tier: str, results_root: str | Path = "results") -> pd.DataFrame:
    """Every setting in which a strong-baseline record under ``results_root/<tier>/baselines/strong``
    differs from what ``config`` gives its protocol and model today, one row each
    (:func:`recrepro.records.drift.compare_settings`; empty when every record is current).

    Compared: the grid, the fixed settings and the validation metric (``grid.json`` and each seed's
    ``provenance.json``), the evaluation section (each seed's) and the seeds tested (``grid.json``;
    a deterministic model's first only).  A grid record whose protocol or model the configuration no
    longer has is listed as such but not as outdated: no table reads it.  The grid job does not rerun
    when its parameters change on a fresh clone (Snakemake's parameter memory is local), so without
    this check a pick made on yesterday's grid would sit in today's table.
    """
    from recrepro.records.drift import compare_settings, drift_frame

    rows: list[dict[str, Any]] = []
    for grid_file in sorted(Path(results_root, tier, "baselines", "strong").glob("*/*/*/*/split*/grid.json")):
        run_dir = grid_file.parent
        dataset, protocol, split, model = run_dir.parts[-5:-1]
        try:
            now = tune_params(config, tier, dataset, protocol, split, model)
        except (KeyError, ValueError):
            rows.append({"record": str(run_dir), "setting": "protocol", "recorded": f"{dataset}/{protocol}/{split}/{model}",
                         "now": None, "same_record": True,
                         "why": "not in the configuration today: no table reads it (delete it, or restore the entry)"})
            continue
        seeds = [int(s) for s in str(now["seeds"]).split(",")]
        search_now = {"grid": now["grid"], "fixed": now["fixed"], "beyond": now["beyond"] or {},
                      "select": now["select"]}
        summary = read_json(grid_file)
        # a record made before the walk past the edges existed has no "beyond": it walked nowhere
        recorded = {"search": {**{k: summary.get(k) for k in search_now}, "beyond": summary.get("beyond") or {}},
                    "seeds": {"tested": summary.get("seeds")}}
        wanted = {"search": search_now, "seeds": {"tested": seeds if MODELS.get(model, True) else seeds[:1]}}
        same_walk = functools.partial(_same_without_walk, summary)
        rows += compare_settings(run_dir, recorded, wanted, same_walk)
        for prov_file in sorted(run_dir.glob("seed*/provenance.json")):
            slice_ = read_json(prov_file).get("config") or {}
            rows += compare_settings(prov_file.parent,
                                     {"search": {**{k: slice_.get(k) for k in search_now},
                                                 "beyond": slice_.get("beyond") or {}},
                                      "evaluation": slice_.get("evaluation") or {}},
                                     {"search": search_now, "evaluation": now["evaluation"]}, same_walk)
    return drift_frame(rows)


def _same_without_walk(summary: Mapping[str, Any], run_dir: Path, setting: str, old: Any,
                       new: Any) -> tuple[bool, str] | None:
    """Whether a grid record made with the walk list ``old`` is the record the list ``new`` makes:
    so when the walk replayed under ``new`` from the record's grid points, on the record's own
    scores, steps to exactly the points the record walked to and stops there (a record made before
    the walk existed walked nowhere: the same when ``new`` adds no point, :func:`beyond_edges`)."""
    import json

    if setting != "search.beyond":
        return None
    rows = summary.get("points", [])
    score = {json.dumps(r["settings"], sort_keys=True): r[f"val:{summary['select']}"] for r in rows}
    points = [r["settings"] for r in rows if not r.get("beyond")]
    scores = [r[f"val:{summary['select']}"] for r in rows if not r.get("beyond")]
    while steps := beyond_edges(points, scores, new):
        missing = [s for s in steps if json.dumps(s, sort_keys=True) not in score]
        if missing:
            return False, f"today's walk goes on to {_settings_text(missing[0])}, which it never scored: tune it again"
        points += steps
        scores += [score[json.dumps(s, sort_keys=True)] for s in steps]
    if len(points) < len(rows):
        return False, "it walked to points today's list does not reach: tune it again"
    return True, ("today's walk, replayed on its scores, visits exactly the points it scored"
                  + (" (none past the grid)" if not old else "") + ": the same record")
