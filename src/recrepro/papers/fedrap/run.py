"""FedRAP (Li, Long & Zhou, ICLR 2024): the training driver, what ``recrepro fedrap train`` calls.

The verb (:mod:`recrepro.papers.fedrap.cli`, called by ``workflow/rules/fedrap_runs.smk``) runs
:func:`run_variant`:

``train``
    Train one variant (``fedrap``, ``fedrap_code``, ``fedmf``, ``pfedrec``, ``mf``, ...)
    on a ``leave_one_out`` split with a training seed.  After every round each user's
    own model scores the 99 fixed negatives plus the validation and the test item
    (``evaluate_sampled``, pessimistic ties as FedRAP's ``utils/metrics.py``).  The run
    record holds the **test** metrics at the round with the best **validation** HR@10
    (model selection on validation; later round wins a tie).  For comparison the
    metrics.json also carries the code's rule — the round with the best *test* HR@10
    (``>=``) — under keys prefixed ``code_best_test_`` (labelled as test-selected).
    ``history.parquet`` beside the record has the per-round curves (validation/test
    HR@10 and NDCG@10, training loss, λ, μ, sparsity of C, bytes uploaded, seconds).
    The embeddings figure's run also writes ``projection.parquet`` (:func:`embedding_projection`).

The runs' settings come from the config (:mod:`recrepro.papers.fedrap.rules`); the tables and figures
are drawn from the records (:mod:`~recrepro.papers.fedrap.tables`, :mod:`~recrepro.papers.fedrap.figures`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from recrepro.io import write_parquet
from recrepro.records import NonFiniteError, write_history
from recrepro.papers.fedrap.tuning import parse_grid_run

if TYPE_CHECKING:
    from recrepro.evaluation.on_split import SplitData

# recrepro.evaluation / records / runs (torch) are imported inside the functions: the leak audit
# (recrepro.papers.leaks) reads NEGATIVE_POOL_PARTS here without loading a trainer.

__all__ = ["KS", "NEGATIVE_POOL_PARTS", "embedding_projection", "run_variant"]

KS = [10]
# negative_pool -> the split parts whose (user, item) pairs a training negative may not be
NEGATIVE_POOL_PARTS = {"train": ["train"], "all_interactions": ["train", "validation", "test"]}


def _eval_both(model, split: SplitData, ties: str) -> tuple[Any, Any]:
    """Validation and test results of ``model`` from one scoring pass over the users."""
    from recrepro.evaluation import evaluate_sampled

    val, test, neg = split.part("validation"), split.part("test"), split.part("negatives")
    users = np.union1d(val["user"].to_numpy(), test["user"].to_numpy())
    rows = np.zeros((split.n_users, split.n_items), np.float32)
    if hasattr(model, "score_pairs"):
        # only the candidates are read: score the (user, item) pairs of the 99 negatives and
        # the held-out items instead of every user's full row
        pu = np.concatenate([neg["user"].to_numpy(), val["user"].to_numpy(), test["user"].to_numpy()])
        pi = np.concatenate([neg["item"].to_numpy(), val["item"].to_numpy(), test["item"].to_numpy()])
        for lo in range(0, pu.size, 1 << 20):
            rows[pu[lo:lo + (1 << 20)], pi[lo:lo + (1 << 20)]] = model.score_pairs(pu[lo:lo + (1 << 20)],
                                                                                  pi[lo:lo + (1 << 20)])
    else:
        for lo in range(0, users.size, 4096):
            u = users[lo:lo + 4096]
            rows[u] = model.score(u)

    def source(u):
        return rows[u]

    return (evaluate_sampled(source, val, neg, KS, ties=ties),
            evaluate_sampled(source, test, neg, KS, ties=ties))


def _last_best_round(history: pd.DataFrame, column: str) -> int:
    """Round with the largest ``column``; the later round wins a tie (the code's ``>=``)."""
    values = history[column].to_numpy()
    return int(history["round"].to_numpy()[len(values) - 1 - int(np.argmax(values[::-1]))])


class _RoundResults:
    """Test per-user results of every evaluated round (the record keeps the selected round's).

    Carried across rounds, so it is part of a checkpoint (``state_dict`` / ``load_state_dict``:
    columns as numpy arrays, which :mod:`recrepro.runtime.checkpoints` stores exactly).
    """

    def __init__(self) -> None:
        self.per_user: dict[int, pd.DataFrame] = {}

    def state_dict(self) -> dict[int, dict[str, np.ndarray]]:
        return {int(a): {str(c): frame[c].to_numpy() for c in frame.columns} for a, frame in self.per_user.items()}

    def load_state_dict(self, state: Mapping[int, Mapping[str, np.ndarray]]) -> None:
        self.per_user = {int(a): pd.DataFrame(dict(cols)) for a, cols in state.items()}


def run_variant(*, split_dir: str | Path, variant: str, settings: dict[str, Any], seed: int,
                out_dir: str | Path, meta: dict[str, Any], evaluation: dict[str, Any],
                device: str = "cpu", benchmark_file: str | None = None,
                memory_budget_mb: float | None = None, checkpoint: str | Path | None = None,
                projection: str | Path | None = None) -> dict[str, Any]:
    """Train ``variant`` with ``settings``, evaluate every round, write the run record.

    ``projection``: where to write the embeddings figure's ``projection.parquet`` of the final
    model (:func:`_save_projection`); ``None`` (default): none is written -- one run of a tier is
    drawn, and a file in every committed record would cost a disk block each for nothing.

    ``checkpoint``: a file the model saves its state (and the per-round results so far) to
    after every round / epoch and resumes from when restarted (:mod:`recrepro.runtime.checkpoints`);
    deleted once the record is written.  A resumed run writes the same record, history and
    embeddings as an uninterrupted one, except wall-clock fields (``seconds``,
    ``seconds_per_round``, provenance times).
    """
    from recrepro.runtime.checkpoints import earlier_usage, remove_checkpoint
    from recrepro.papers.fedrap.variants import make_variant
    from recrepro.records import write_run_record
    from recrepro.evaluation.on_split import SplitData

    started = time.time()
    settings = dict(settings)
    pool = settings.pop("negative_pool", "train")
    # Items a training negative may not be: the training positives (He et al. 2017's NCF code,
    # the precedent the paper cites) or, as mtics/FedRAP's ``negative_items``, everything the user
    # ever interacted with -- the held-out validation/test items included, which a private per-user
    # item table learns to exploit (docs/deviations.md#fedrap-negative-pool).
    if pool not in NEGATIVE_POOL_PARTS:
        raise ValueError(f"fedrap: negative_pool must be one of {sorted(NEGATIVE_POOL_PARTS)}, not {pool!r}")
    split = SplitData(split_dir)
    train = split.csr(["train"])
    touched = split.csr(NEGATIVE_POOL_PARTS[pool])
    ties = evaluation.get("ties", "pessimistic")
    model = make_variant(settings, seed=seed, device=device, memory_budget_mb=memory_budget_mb)
    results = _RoundResults()

    def eval_fn(m, a):
        val, test = _eval_both(m, split, ties)
        results.per_user[a] = test.per_user
        return {"val_hr@10": val.overall["hr@10"], "val_ndcg@10": val.overall["ndcg@10"],
                "test_hr@10": test.overall["hr@10"], "test_ndcg@10": test.overall["ndcg@10"],
                "_counts": test.counts}

    resume = {} if checkpoint is None else {"checkpoint": Path(checkpoint), "checkpoint_state": results}
    diverged = None
    try:
        model.fit(train, touched=touched, eval_fn=eval_fn, **resume)
    except NonFiniteError as err:
        # A grid point whose training blows up is a result of the grid (the README's ML-100K flags
        # do on amazon-video): its record keeps the rounds before, marked, and it is never picked.
        # Any other run stops with the error.
        if parse_grid_run(variant) is None:
            raise
        diverged = {"round": len(model.history) + 1, "error": str(err)}
        print(f"WARNING: {variant} diverged in round {diverged['round']}: {err}; recorded as diverged "
              "(the grid never picks it)", file=sys.stderr)
    per_round_users = results.per_user  # read after fit: a restore replaces the dict
    hist = pd.DataFrame([{k: v for k, v in h.items() if not k.startswith("_")} for h in model.history],
                        columns=None if model.history else ["round"])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_history(out_dir, hist, "history.parquet")
    if "val_hr@10" in hist and hist["val_hr@10"].notna().any():
        best_val, overall, selection = _select_round(hist, settings, pool)
        if projection is not None:
            _save_projection(model, Path(projection))
        per_user = per_round_users[best_val][["user", "hr@10", "ndcg@10"]]
        counts = dict(model.history[best_val - 1].get("_counts", {}))
    else:
        # diverged before its first evaluated round: a record with no metric at all (never a made-up
        # one), which says so; the tuning table lists the point as diverged
        overall, per_user, counts = {}, pd.DataFrame({"user": pd.Series(dtype=np.int64)}), {}
        selection = {"selected_round": None, "selected_by": "validation hr@10", "rounds_trained": len(hist),
                     "round_cap": settings.get("round_cap"), "mode": settings.get("mode"), "negative_pool": pool}
        if projection is not None:
            _save_projection(None, Path(projection))
    if diverged is not None:
        selection["diverged"] = diverged
    counts.setdefault("n_users_skipped_no_targets", 0)
    write_run_record(
        out_dir, overall=overall, strata={}, per_user=per_user, counts=counts,
        meta={**split.describe(), **meta, "method": variant, **selection},
        config_slice={"variant": variant, "settings": settings, "evaluation": evaluation,
                      "memory_budget_mb": memory_budget_mb,
                      # how paper mode's dense steps ran, where any did (fused or eager: equal to rounding)
                      "dense_update": getattr(model, "dense_update_used", None)},
        split_manifest=split.dir / "manifest.json", seed=seed, device=device, started_at=started,
        wall_seconds=time.time() - started, benchmark_file=benchmark_file,
        earlier=earlier_usage(checkpoint))
    remove_checkpoint(checkpoint)  # the record is complete: a rerun must not resume a finished run
    return {"overall": overall, **selection}


def _select_round(hist: pd.DataFrame, settings: dict[str, Any], pool: str
                  ) -> tuple[int, dict[str, float], dict[str, Any]]:
    """The round validation selects, its test metrics, and the selection fields of the record's meta."""
    evaluated = hist.dropna(subset=["val_hr@10"])
    # validation selection: best val HR@10, later round wins a tie (as the code's >=)
    best_val = _last_best_round(evaluated, "val_hr@10")
    best_test = _last_best_round(evaluated, "test_hr@10")
    row = evaluated.set_index("round")
    overall = {"hr@10": float(row.loc[best_val, "test_hr@10"]), "ndcg@10": float(row.loc[best_val, "test_ndcg@10"])}
    selection = {
        "selected_round": best_val,
        "selected_by": "validation hr@10",
        "val_hr@10_at_selected": float(row.loc[best_val, "val_hr@10"]),
        "val_ndcg@10_at_selected": float(row.loc[best_val, "val_ndcg@10"]),
        "code_best_test_round": best_test,
        "code_best_test_hr@10": float(row.loc[best_test, "test_hr@10"]),
        "code_best_test_ndcg@10": float(row.loc[best_test, "test_ndcg@10"]),
        "code_best_test_val_hr@10": float(row.loc[best_test, "val_hr@10"]),
        "last_round_test_hr@10": float(evaluated["test_hr@10"].iloc[-1]),
        "rounds_trained": int(hist["round"].max()),
        "round_cap": settings.get("round_cap"),
        "mode": settings.get("mode"),
        "negative_pool": pool,
        "dp_noise": settings.get("dp_noise") if settings.get("dp_clip") or settings.get("dp_noise") else None,
        "dp_clip": settings.get("dp_clip"),
        "dp_epsilon": (float(hist["dp_epsilon"].dropna().iloc[-1])
                       if "dp_epsilon" in hist and hist["dp_epsilon"].notna().any() else None),
        "seconds_per_round": float(hist["seconds"].mean()) if "seconds" in hist else None,
    }
    return best_val, overall, selection


def embedding_projection(C: np.ndarray, D: np.ndarray | None, users: np.ndarray | None,
                         n_items: int = 300) -> pd.DataFrame:
    """PCA (not t-SNE: deterministic and fast) of item embeddings for the embeddings figure.

    ``n_items`` random items (fixed generator) of the global table ``C`` and of each private
    table ``D[k]`` (user ``users[k]``) are projected on the top-2 principal axes of their
    union. Returns columns ``table`` (``"C"`` or ``"D"``), ``user`` (-1 for C), ``pc1``, ``pc2``:
    the run record keeps this projection, never the tables themselves (they are model weights).
    """
    items = np.random.default_rng(0).choice(C.shape[0], min(n_items, C.shape[0]), replace=False)
    n_private = 0 if D is None else D.shape[0]
    parts = [C[items]] + [D[k][items] for k in range(n_private)]
    stacked = np.concatenate(parts).astype(np.float64)
    centred = stacked - stacked.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    proj = centred @ vt[:2].T
    table = np.repeat(np.array(["C"] + ["D"] * n_private), items.size)
    user = np.repeat(np.array([-1] + [int(u) for u in (users if users is not None else [])], dtype=np.int64),
                     items.size)
    return pd.DataFrame({"table": table, "user": user, "pc1": proj[:, 0], "pc2": proj[:, 1]})


def _save_projection(model, path: Path, n_users: int = 3) -> None:
    """``projection.parquet`` for the embeddings figure: :func:`embedding_projection` of the global
    table C and, for FedRAP, the private tables D⁽ⁱ⁾ of the first ``n_users`` users (empty for MF/NCF)."""
    C = getattr(model, "C", None)
    frame = pd.DataFrame({"table": pd.Series(dtype=str), "user": pd.Series(dtype=np.int64),
                          "pc1": pd.Series(dtype=float), "pc2": pd.Series(dtype=float)})
    if C is not None and hasattr(C, "cpu") and getattr(getattr(model, "config", None), "has_private_items", False):
        users = np.arange(min(n_users, model.n_users))
        frame = embedding_projection(C.detach().cpu().numpy(), model.private_items(users).cpu().numpy(), users)
    write_parquet(path, frame)
