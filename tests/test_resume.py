"""Resumable training: a run killed after k epochs / rounds and restarted from its checkpoint
ends exactly (bit for bit) where an uninterrupted run ends.

The kill is simulated in-process by making the k-th checkpoint write raise right after the
file is in place (a kill between epochs), or by an ``on_epoch`` hook that raises before the
epoch's checkpoint (a kill in the middle of an epoch: the epoch is trained again); one test
SIGKILLs a real ``recrepro prism train`` process.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import build_synthetic_split
import scipy.sparse as sp
import torch

from recrepro.runtime import checkpoints as C
from recrepro.io import write_json
from recrepro.papers.prism import trainer as T

WALL_CLOCK = {"epoch_seconds", "seconds_per_epoch", "seconds_to_best"}


class Killed(Exception):
    """Stands in for SIGKILL."""


def kill_after_saves(monkeypatch, k: int) -> dict[str, int]:
    """Make the ``k``-th checkpoint write raise :class:`Killed` once the file is in place."""
    real = C.save_checkpoint
    count = {"saves": 0}

    def save(*args, **kwargs):
        out = real(*args, **kwargs)
        count["saves"] += 1
        if count["saves"] == k:
            raise Killed(f"killed after checkpoint {k}")
        return out

    monkeypatch.setattr(C, "save_checkpoint", save)
    return count


def _planted(n_users=50, n_items=40, seed=0):
    rng = np.random.default_rng(seed)
    groups_u = rng.integers(0, 4, n_users)
    dense = (groups_u[:, None] == (np.arange(n_items) % 4)[None, :]) & (rng.random((n_users, n_items)) < 0.7)
    rows, cols = np.nonzero(dense)
    perm = rng.permutation(rows.size)
    cut = int(0.8 * rows.size)

    def mk(idx):
        return sp.csr_matrix((np.ones(idx.size, np.float32), (rows[idx], cols[idx])), shape=(n_users, n_items))

    return mk(perm[:cut]), mk(perm[cut:])


def _assert_same_run(a, b) -> None:
    (net_a, hist_a), (net_b, hist_b) = a, b
    sa, sb = net_a.state_dict(), net_b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name
    assert hist_a.keys() == hist_b.keys()
    for key in hist_a.keys() - WALL_CLOCK:
        assert hist_a[key] == hist_b[key], key
    assert len(hist_a["epoch_seconds"]) == len(hist_b["epoch_seconds"])


# ------------------------------------------------------------------------------------ PRISM

PRISM_CASES = {
    "directau_coupled_wd": {"loss": "directau", "weight_decay": 1e-4, "wd_mode": "coupled", "batch_size": 128},
    "ssm_in_batch": {"loss": "ssm", "n_negatives": 4, "negatives": "in_batch", "batch_size": 128},
    "bpr_prism_alpha": {"loss": "bpr", "alpha": 0.5, "batch_size": 128},
    "mawu_margins": {"loss": "mawu", "batch_size": 128},
    "nlmf_bpr_batched_wd": {"backbone": "nlmf", "loss": "bpr", "weight_decay": 1e-3, "wd_mode": "batched",
                            "batch_size": 128},
}


def _settings(case: dict, **over) -> T.TrainSettings:
    base = {"dim": 8, "lr": 0.03, "epochs": 6, "patience": 10, "seed": 3, "fused_adam": False}
    return T.TrainSettings(**{**base, **case, **over})


@pytest.mark.parametrize("case", list(PRISM_CASES))
def test_prism_resume_after_kill_is_exact(case, tmp_path, monkeypatch, one_torch_thread):
    train, val = _planted()
    settings = _settings(PRISM_CASES[case])
    reference = T.train(train, val, settings)
    ckpt = tmp_path / "run.ckpt"
    kill_after_saves(monkeypatch, 3)
    with pytest.raises(Killed):
        T.train(train, val, settings, checkpoint=ckpt)
    monkeypatch.undo()
    assert C.load_checkpoint(ckpt, key=T.checkpoint_key(train, val, settings))["epoch"] == 3
    epochs_seen = []
    resumed = T.train(train, val, settings, checkpoint=ckpt, on_epoch=lambda e, s: epochs_seen.append(e))
    assert epochs_seen == [4, 5, 6]  # continued after the checkpointed epoch, not from scratch
    _assert_same_run(reference, resumed)


def test_prism_kill_inside_an_epoch_retrains_that_epoch(tmp_path, one_torch_thread):
    train, val = _planted()
    settings = _settings(PRISM_CASES["ssm_in_batch"])
    reference = T.train(train, val, settings)

    def die(epoch, score):
        if epoch == 4:  # before epoch 4's checkpoint: a restart trains epoch 4 again
            raise Killed

    with pytest.raises(Killed):
        T.train(train, val, settings, checkpoint=tmp_path / "c", on_epoch=die)
    _assert_same_run(reference, T.train(train, val, settings, checkpoint=tmp_path / "c"))


def test_prism_resume_of_an_early_stopped_run_goes_to_the_end(tmp_path, monkeypatch, one_torch_thread):
    train, val = _planted()
    # a negligible lr stops improving at once: the run stops `patience` epochs after the best
    settings = _settings({"loss": "directau", "lr": 1e-7, "batch_size": 256}, epochs=30, patience=2)
    reference = T.train(train, val, settings)
    assert reference[1]["epochs_run"] < 30
    kill_after_saves(monkeypatch, reference[1]["epochs_run"])  # killed right after the final checkpoint
    with pytest.raises(Killed):
        T.train(train, val, settings, checkpoint=tmp_path / "c")
    monkeypatch.undo()
    epochs_seen = []
    resumed = T.train(train, val, settings, checkpoint=tmp_path / "c", on_epoch=lambda e, s: epochs_seen.append(e))
    assert epochs_seen == []  # nothing left to train
    _assert_same_run(reference, resumed)


def test_prism_checkpoint_of_other_settings_is_ignored_with_a_warning(tmp_path, monkeypatch, caplog,
                                                                      one_torch_thread):
    train, val = _planted()
    settings = _settings(PRISM_CASES["bpr_prism_alpha"])
    kill_after_saves(monkeypatch, 2)
    with pytest.raises(Killed):
        T.train(train, val, _settings(PRISM_CASES["bpr_prism_alpha"], lr=0.01), checkpoint=tmp_path / "c")
    monkeypatch.undo()
    epochs_seen = []
    with caplog.at_level(logging.WARNING, logger="recrepro.runtime.checkpoints"):
        run = T.train(train, val, settings, checkpoint=tmp_path / "c", on_epoch=lambda e, s: epochs_seen.append(e))
    assert "other settings" in caplog.text and str(tmp_path / "c") in caplog.text
    assert epochs_seen == [1, 2, 3, 4, 5, 6]  # started over
    _assert_same_run(T.train(train, val, settings), run)
    # ... and the stale file was overwritten with this run's state
    assert C.load_checkpoint(tmp_path / "c", key=T.checkpoint_key(train, val, settings))["epoch"] == 6


def test_prism_truncated_checkpoint_is_ignored_with_a_warning(tmp_path, monkeypatch, caplog, one_torch_thread):
    train, val = _planted()
    settings = _settings(PRISM_CASES["directau_coupled_wd"])
    kill_after_saves(monkeypatch, 2)
    with pytest.raises(Killed):
        T.train(train, val, settings, checkpoint=tmp_path / "c")
    monkeypatch.undo()
    size = (tmp_path / "c").stat().st_size
    with open(tmp_path / "c", "r+b") as fh:
        fh.truncate(size // 2)
    with caplog.at_level(logging.WARNING, logger="recrepro.runtime.checkpoints"):
        run = T.train(train, val, settings, checkpoint=tmp_path / "c")
    assert "unreadable" in caplog.text and str(tmp_path / "c") in caplog.text
    _assert_same_run(T.train(train, val, settings), run)


# ------------------------------------------------------------------------------ checkpoints


def test_checkpoint_round_trip_types_and_atomic_side_files(tmp_path):
    rng = np.random.default_rng(1)
    rng.random(3)
    state = {"n": np.int64(3), "x": np.float32(0.5), "arr": np.arange(4, dtype=np.uint32), "t": torch.arange(3),
             "rng": C.generator_state(rng), "nested": {"a": [1, (2.5, None)], 7: "s"}}
    path = tmp_path / "sub" / "x.ckpt"
    C.save_checkpoint(path, state, key="k", arrays={"D": np.ones((2, 3), np.float32)})
    C.save_checkpoint(path, state, key="k", arrays={"D": np.full((2, 3), 2, np.float32)})
    assert len(list(path.parent.iterdir())) == 2  # the checkpoint + the newest side file only
    out = C.load_checkpoint(path, key="k")
    assert type(out["n"]) is np.int64 and type(out["x"]) is np.float32 and out["arr"].dtype == np.uint32
    assert out["nested"] == {"a": [1, (2.5, None)], 7: "s"} and torch.equal(out["t"], torch.arange(3))
    assert np.array_equal(out["D"], np.full((2, 3), 2, np.float32))
    again = np.random.default_rng(99)
    C.set_generator_state(again, out["rng"])
    assert again.random() == rng.random()
    with pytest.raises(TypeError, match=r"state\['bad'\]"):
        C.save_checkpoint(path, {"bad": object()}, key="k")
    assert C.load_checkpoint(path, key="k") is not None  # a failed save leaves the old file
    C.remove_checkpoint(path)
    assert list(path.parent.iterdir()) == []
    assert C.load_checkpoint(path, key="k") is None


def test_usage_ledger_sums_the_earlier_pieces_of_a_run(tmp_path, caplog):
    path = tmp_path / "run.ckpt"
    wall, cpu = [100.0], [50.0]
    clocks = {"clock": lambda: wall[0], "cpu_clock": lambda: cpu[0]}

    def piece(saves, key="k"):
        """One process: load, then a save after each (wall, cpu) step; its Checkpointer."""
        ckpt = C.Checkpointer(path, key, **clocks)
        ckpt.load()
        for dw, dc in saves:
            wall[0] += dw
            cpu[0] += dc
            ckpt.save({"epoch": 1})
        return ckpt

    first = piece([(10.0, 8.0), (5.0, 4.0)])
    assert first.earlier == {"pieces": 0, "wall_seconds": 0.0, "cpu_seconds": 0.0}
    assert C.earlier_usage(path) == first.earlier and first.earlier_code == []
    wall[0] += 7.0  # work after the last save is redone by the next piece, not counted
    second = piece([(20.0, 16.0)])
    assert second.earlier == {"pieces": 1, "wall_seconds": 15.0, "cpu_seconds": 12.0}
    # the current piece is never in it; the earlier piece's code is (one entry: the pieces ran the same code)
    assert C.earlier_usage(path) == {**second.earlier, "code": [C.code_fingerprint()]}
    assert second.earlier_code == [C.code_fingerprint()]
    third = piece([])  # resumes the final checkpoint and saves nothing more
    assert third.earlier == {"pieces": 2, "wall_seconds": 35.0, "cpu_seconds": 28.0}
    assert third.earlier_code == [C.code_fingerprint()] * 2
    # files without a ledger add nothing
    assert C.earlier_usage(path, None, tmp_path / "other.ckpt") == {**third.earlier, "code": [C.code_fingerprint()]}
    # two models trained one after another (λ-Fix's grid), the run killed twice: seconds add, pieces do not
    grid = tmp_path / "run.ckpt.lam1"
    write_json(C.usage_path(grid), {"key": "k", "earlier": {"pieces": 2, "wall_seconds": 1.0, "cpu_seconds": 0.5},
                                    "current": None})
    assert C.earlier_usage(path, grid) == {"pieces": 2, "wall_seconds": 36.0, "cpu_seconds": 28.5,
                                           "code": [C.code_fingerprint()]}
    C.remove_checkpoint(grid)
    assert C.earlier_usage(tmp_path / "other.ckpt") is None
    # a checkpoint written before the ledger: its earlier piece is counted, its times unknown
    C.usage_path(path).unlink()
    assert piece([]).earlier == {"pieces": 1, "wall_seconds": None, "cpu_seconds": None}
    # other settings: the checkpoint is ignored, and so are the earlier pieces
    with caplog.at_level("WARNING"):
        assert piece([], key="other").earlier == {"pieces": 0, "wall_seconds": 0.0, "cpu_seconds": 0.0}
    C.remove_checkpoint(path)
    assert list(tmp_path.iterdir()) == []


def test_settings_key_and_throttle():
    assert C.settings_key({"a": 1, "b": (1, 2)}) == C.settings_key({"b": [1, 2], "a": 1})
    assert C.settings_key({"a": 1}) != C.settings_key({"a": 2})
    m = sp.random(5, 4, density=0.5, format="csr", random_state=0)
    m2 = m.copy()
    m2.data[0] += 1
    assert C.data_fingerprint(m) == C.data_fingerprint(m.copy()) != C.data_fingerprint(m2)
    now = [0.0]
    th = C.Throttle(10.0, clock=lambda: now[0])
    assert not th.ready()
    now[0] = 10.0
    assert th.ready() and not th.ready()
    assert th.ready(force=True)
    assert all(C.Throttle().ready() for _ in range(3))
    # a write of w seconds spaces the next ones so that writing is at most 2 % of the time: 50 w
    now[0] = 0.0
    th = C.Throttle(clock=lambda: now[0], max_overhead=0.02)   # the package's default (tests pin 0: conftest)
    assert th.ready()
    th.wrote(4.0)
    now[0] = 199.0
    assert not th.ready()
    now[0] = 200.0
    assert th.ready()
    th.wrote(0.04)  # λOpt's state after 0.3 s epochs: every few epochs, not every one
    now[0] = 201.9
    assert not th.ready()
    now[0] = 202.0
    assert th.ready()
    th.wrote(600.0)  # never more than max_seconds (600 s) apart
    now[0] = 802.0
    assert th.ready()
    # min_seconds still spaces cheap writes out
    now[0] = 0.0
    th = C.Throttle(30.0, clock=lambda: now[0], max_overhead=0.02)
    th.wrote(0.001)
    now[0] = 29.0
    assert not th.ready()



def test_checkpoint_writes_default_to_two_percent_of_the_time(monkeypatch):
    monkeypatch.undo()  # the suite pins every-epoch writes (conftest); the package's default is 2 %
    assert C.WRITE_OVERHEAD == 0.02
    now = [0.0]
    th = C.Throttle(clock=lambda: now[0])
    th.wrote(0.1)
    now[0] = 4.9
    assert not th.ready()
    now[0] = 5.0
    assert th.ready()

# ------------------------------------------------------------------------------- federated


def _fed_data(n_users=24, n_items=40, seed=0):
    rng = np.random.default_rng(seed)
    dense = rng.random((n_users, n_items)) < 0.25
    dense[np.arange(n_users), rng.integers(0, n_items, n_users)] = True  # every client has data
    train = sp.csr_matrix(dense.astype(np.float32))
    return train, train


FED_CASES = {
    "fedrap_paper_dense": {"method": "fedrap", "mode": "paper"},
    "fedrap_paper_memmap": {"method": "fedrap", "mode": "paper", "memory_budget_mb": 0.005},
    "fedrap_paper_square_dp": {"method": "fedrap", "mode": "paper", "curriculum": "square", "dp_clip": 1.0,
                               "dp_noise": 0.1, "client_ratio": 0.5},
    "fedrap_code": {"method": "fedrap", "mode": "code"},
    "pfedrec": {"method": "pfedrec", "mode": "code"},
    "fedncf": {"method": "fedncf", "mode": "code"},
}


def _fed_model(case: dict, tmp_path: Path):
    from recrepro.papers.fedrap.config import FederatedConfig
    from recrepro.papers.fedrap.fedncf import FedNCF
    from recrepro.papers.fedrap.fedrap import FederatedRecommender

    cfg = FederatedConfig(**{"dim": 4, "rounds": 7, "local_epochs": 2, "batch_size": 8, "num_negatives": 2,
                             "lr_network": 0.3, "lr_args": 20.0, "seed": 5, "scratch_dir": str(tmp_path), **case})
    return (FedNCF if cfg.method == "fedncf" else FederatedRecommender)(cfg)


def _fed_snapshot(model) -> dict[str, torch.Tensor]:
    out = {name: getattr(model, name) for name in ("w", "b", "C")}
    if getattr(model, "pm", None) is not None:
        out.update(pm=model.pm, Cm=model.Cm, **{f"net.{k}": v for k, v in model.net.items()})
    if model.D is not None:
        out["D"] = model.private_items(np.arange(model.n_users))
    return out


def _assert_same_fed(a, b) -> None:
    sa, sb = _fed_snapshot(a), _fed_snapshot(b)
    assert sa.keys() == sb.keys()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name
    assert a.round == b.round and a.lr_network == b.lr_network and a.weights_prev == b.weights_prev
    strip = lambda h: [{k: v for k, v in row.items() if k != "seconds"} for row in h]  # noqa: E731
    assert strip(a.history) == strip(b.history)


@pytest.mark.parametrize("case", list(FED_CASES))
def test_federated_resume_after_kill_is_exact(case, tmp_path, monkeypatch, one_torch_thread):
    train, touched = _fed_data()
    evals = []

    def eval_fn(m, a):
        evals.append(a)
        return {"score": float(m.score_pairs(np.arange(3), np.arange(3)).sum())}

    reference = _fed_model(FED_CASES[case], tmp_path).fit(train, touched, eval_fn=eval_fn)
    if case == "fedrap_paper_memmap":
        assert reference.private_storage == "memmap"
    ckpt = tmp_path / "fed.ckpt"
    kill_after_saves(monkeypatch, 3)
    with pytest.raises(Killed):
        _fed_model(FED_CASES[case], tmp_path).fit(train, touched, eval_fn=eval_fn, checkpoint=ckpt)
    monkeypatch.undo()
    evals.clear()
    resumed = _fed_model(FED_CASES[case], tmp_path).fit(train, touched, eval_fn=eval_fn, checkpoint=ckpt)
    assert evals == [4, 5, 6, 7]
    _assert_same_fed(reference, resumed)


def test_federated_checkpoint_of_other_settings_is_ignored(tmp_path, monkeypatch, caplog, one_torch_thread):
    train, touched = _fed_data()
    kill_after_saves(monkeypatch, 2)
    with pytest.raises(Killed):
        _fed_model({"method": "fedrap", "mode": "code", "lam": 0.3}, tmp_path).fit(train, touched,
                                                                                  checkpoint=tmp_path / "c")
    monkeypatch.undo()
    with caplog.at_level(logging.WARNING, logger="recrepro.runtime.checkpoints"):
        run = _fed_model(FED_CASES["fedrap_code"], tmp_path).fit(train, touched, checkpoint=tmp_path / "c")
    assert "other settings" in caplog.text
    _assert_same_fed(_fed_model(FED_CASES["fedrap_code"], tmp_path).fit(train, touched), run)


@pytest.mark.parametrize("method", ["mf", "ncf"])
def test_centralised_upper_bounds_resume_exactly(method, tmp_path, monkeypatch, one_torch_thread):
    from recrepro.papers.fedrap.variants import make_variant

    train, touched = _fed_data()
    settings = {"method": method, "dim": 4, "epochs": 5, "batch_size": 16, "lr": 0.01}
    reference = make_variant(settings, seed=2).fit(train, touched)
    kill_after_saves(monkeypatch, 2)
    with pytest.raises(Killed):
        make_variant(settings, seed=2).fit(train, touched, checkpoint=tmp_path / "c")
    monkeypatch.undo()
    resumed = make_variant(settings, seed=2).fit(train, touched, checkpoint=tmp_path / "c")
    assert np.array_equal(reference.score(np.arange(24)), resumed.score(np.arange(24)))
    assert reference.history == resumed.history


# --------------------------------------------------------------------------- FedRAP driver

FED_EVAL = {"mode": "sampled", "fit": ["train"], "target": "test", "ks": [10], "ties": "pessimistic"}


@pytest.fixture(scope="module")
def fedrap_split(tmp_path_factory):
    """A tiny leave-one-out split (as tests/test_fedrap_pipeline.py's)."""
    from recrepro.datasets.synthetic import SyntheticSpec

    spec = SyntheticSpec(seed=3, users=60, items=300, density=0.06, latent_rank=4)
    return build_synthetic_split(tmp_path_factory.mktemp("fedrap_resume"), spec, "fedrap", 10, "leave_one_out", 0)


def _assert_two_pieces(out: Path) -> None:
    """The record of a run killed once prices both pieces (the killed one up to its last save)."""
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["pieces"] == 2 and prov["earlier_pieces"]["pieces"] == 1
    assert 0 < prov["earlier_pieces"]["wall_seconds"] < prov["wall_seconds"]


def _run_files(out: Path) -> dict[str, bytes]:
    """Every file of a run record but the wall-clock one (provenance.json, with the timings), as bytes."""
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())
            if p.is_file() and p.name != "provenance.json"}


@pytest.mark.parametrize("variant,settings", [
    ("fedrap", {"method": "fedrap", "mode": "paper", "lam": 0.5, "mu": 0.2}),
    ("fedrap_code", {"method": "fedrap", "mode": "code"}),
    ("mf", {"method": "mf", "epochs": 5, "lr_mf": 0.01}),
])
def test_fedrap_driver_resumes_to_the_same_record(fedrap_split, variant, settings, tmp_path, monkeypatch,
                                                  one_torch_thread):
    from recrepro.papers.fedrap import run as driver

    settings = {"dim": 4, "rounds": 5, "local_epochs": 2, **settings}
    kw = {"split_dir": fedrap_split, "variant": variant, "settings": settings, "seed": 0, "evaluation": FED_EVAL,
          "meta": {"tier": "smoke", "paper": "fedrap"}}
    driver.run_variant(out_dir=tmp_path / "ref", **kw)
    ckpt = tmp_path / "run.ckpt"
    kill_after_saves(monkeypatch, 2)
    with pytest.raises(Killed):
        driver.run_variant(out_dir=tmp_path / "resumed", checkpoint=ckpt, **kw)
    monkeypatch.undo()
    assert ckpt.exists()
    driver.run_variant(out_dir=tmp_path / "resumed", checkpoint=ckpt, **kw)
    assert not ckpt.exists() and not list(tmp_path.glob("run.ckpt*"))  # removed with the record
    _assert_two_pieces(tmp_path / "resumed")
    files = _run_files(tmp_path / "ref")
    assert "metrics.json" in files and "per_user.parquet" in files
    assert files == _run_files(tmp_path / "resumed")  # byte for byte


# --------------------------------------------------------------------- a real killed process

PRISM_EVAL = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test", "ks": [20]}


@pytest.fixture(scope="module")
def prism_split(tmp_path_factory):
    """A tiny random_ratio split (train / validation / test) of synthetic data."""
    from recrepro.datasets import load_raw
    from recrepro.datasets.synthetic import SyntheticSpec, generate_synthetic
    from recrepro.io import write_parquet
    from recrepro.datasets.preprocessing import preprocess, read_interactions, resolve_recipe, write_preprocessed
    from recrepro.datasets.splits import make_split, write_split

    root = tmp_path_factory.mktemp("prism_resume")
    frame = generate_synthetic(SyntheticSpec(seed=5, users=150, items=120, density=0.1, latent_rank=4))
    recipe = resolve_recipe({"prism": {"default": {"positive": None, "filter": {"mode": "none"}}}},
                            "prism", "synthetic", {})
    write_parquet(root / "raw" / "interactions.parquet", frame)
    write_preprocessed(preprocess(load_raw("synthetic", root / "raw"), recipe), root / "processed")
    split = make_split(read_interactions(root / "processed"), "random_ratio", {}, 0)
    write_split(split, root / "split", {"dataset": "synthetic", "protocol": "prism", "seed": 0})
    return root / "split"


def _prism_cli(split_dir: Path, out_dir: Path, checkpoint: Path | None, epochs: int) -> list[str]:
    tier = {"dim": 8, "lr": 0.01, "epochs": epochs, "patience": 10_000, "batch_size": {"directau": 64}}
    switches = {"nlmf_relu": True, "ssm_negatives": "paper", "negatives": "uniform", "strata_degrees": "train"}
    cmd = [sys.executable, "-m", "recrepro", "prism", "train", "--split-dir", str(split_dir),
           "--method", "mf_directau_wd1em6", "--seed", "0", "--out-dir", str(out_dir),
           "--tier-conf", json.dumps(tier), "--switches", json.dumps(switches),
           "--evaluation", json.dumps(PRISM_EVAL), "--meta", json.dumps({"tier": "smoke", "paper": "prism"})]
    return cmd + (["--checkpoint", str(checkpoint)] if checkpoint else [])


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_prism_cli_sigkilled_and_rerun_writes_the_same_record(prism_split, tmp_path):
    # one thread everywhere: the same reduction order in every process, and no fight for the cores; the
    # package copied, so that both processes run one version of the code whatever is edited meanwhile (a
    # checkpoint is resumed only by the code that wrote it)
    src = tmp_path / "src"
    shutil.copytree(Path(C.__file__).parents[1], src / "recrepro", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(src)}
    epochs = 60
    ref = subprocess.run(_prism_cli(prism_split, tmp_path / "ref", None, epochs), env=env, capture_output=True,
                         text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr[-2000:]
    ckpt = tmp_path / "ckpt" / "run.ckpt"
    out = tmp_path / "resumed"
    proc = subprocess.Popen(_prism_cli(prism_split, out, ckpt, epochs), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        ledger = C.usage_path(ckpt)
        # kill once the ledger holds a saved epoch's times: the rerun then counts this piece
        while proc.poll() is None and time.monotonic() < deadline and not (
                ledger.exists() and json.loads(ledger.read_text() or "{}").get("current")):
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    payload = torch.load(ckpt, weights_only=True)  # the file a kill left behind is a whole checkpoint
    killed_at = payload["state"]["epoch"]
    assert 1 <= killed_at < epochs and not (out / "metrics.json").exists()
    rerun = subprocess.run(_prism_cli(prism_split, out, ckpt, epochs), env=env, capture_output=True, text=True,
                           timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resuming from checkpoint" in rerun.stderr, [line for line in rerun.stderr.splitlines() if "WARNING" in line]
    assert not ckpt.exists() and not ledger.exists()  # removed once the record was written
    # the record prices both pieces: its times sum the killed piece's (up to its last save) and the rerun's
    prov = json.loads((out / "provenance.json").read_text())
    earlier = prov["earlier_pieces"]
    assert prov["pieces"] == 2 and earlier["pieces"] == 1 and earlier["wall_seconds"] > 0
    assert prov["wall_seconds"] > earlier["wall_seconds"] and prov["cpu_seconds"] > earlier["cpu_seconds"] > 0
    assert "pieces" not in json.loads((tmp_path / "ref" / "provenance.json").read_text())
    files = _run_files(tmp_path / "ref")
    assert {"metrics.json", "per_user.parquet", "history.json"} <= files.keys()
    assert files == _run_files(out)  # byte for byte


# ----------------------------------------------------------------------------------- λOpt


@pytest.mark.parametrize("case", [
    {"method": "lambdafix", "lam": 0.01},
    {"method": "lambdaopt", "granularity": "dui"},
    {"method": "lambdaopt", "granularity": "d", "assumed_batch": "separate", "sim_penalty": "full_table",
     "assumed_grad": "current_lambda"},
])
def test_lambdaopt_resume_after_kill_is_exact(case, tmp_path, monkeypatch, one_torch_thread):
    from recrepro.papers.lambdaopt.mf_lambdaopt import LambdaOptConfig, MFLambdaOpt
    from recrepro.models.mf_bpr import BPRConfig, MFBPR

    train, val = _planted(40, 30)
    common = {"dim": 4, "epochs": 5, "batch_size": 32, "lr": 0.01, "init_std": 0.1}

    def model():
        settings = {**common, **case}
        if settings.pop("method") == "lambdafix":
            return MFBPR(BPRConfig.from_mapping(settings), seed=4)
        return MFLambdaOpt(LambdaOptConfig.from_mapping({**settings, "val_batch_size": 10}), seed=4)

    reference = model().fit(train, validation=val)
    kill_after_saves(monkeypatch, 2)
    with pytest.raises(Killed):
        model().fit(train, validation=val, checkpoint=tmp_path / "c")
    monkeypatch.undo()
    resumed = model().fit(train, validation=val, checkpoint=tmp_path / "c")
    assert torch.equal(reference.P, resumed.P) and torch.equal(reference.Q, resumed.Q)
    strip = lambda h: [{k: v for k, v in row.items() if k != "seconds"} for row in h]  # noqa: E731
    assert strip(reference.history) == strip(resumed.history)
    if case["method"] == "lambdaopt":
        assert torch.equal(reference.lam_user, resumed.lam_user) and torch.equal(reference.lam_item, resumed.lam_item)


def test_models_without_declared_checkpoint_state_refuse_checkpoints(tmp_path):
    from recrepro.models.mf_bpr import MFBPR

    class Undeclared(MFBPR):
        """A subclass that may carry state its parent's checkpoint does not know of."""

    train, _ = _planted(20, 15)
    with pytest.raises(NotImplementedError, match="Undeclared"):
        Undeclared({"dim": 2, "epochs": 1}).fit(train, checkpoint=tmp_path / "c")


@pytest.mark.parametrize("settings", [
    {"method": "lambdafix", "lambdafix_grid": [0.0, 0.01]},
    {"method": "lambdaopt", "granularity": "dui", "val_batch_size": 64},
    # the converging budget (recrepro.papers.lambdaopt.stopping): the monitor's curve and best epoch resume too
    {"method": "lambdafix", "lambdafix_grid": [0.0, 0.01], "epochs": 12, "patience": 2},
    {"method": "lambdaopt", "granularity": "dui", "val_batch_size": 64, "epochs": 12, "patience": 2,
     "trajectory_every": 3},
    {"method": "sgda", "epochs": 12, "patience": 2, "val_batch_size": 64},
    {"method": "amf", "epochs": 12, "patience": 2},
])
def test_lambdaopt_driver_resumes_to_the_same_record(prism_split, settings, tmp_path, monkeypatch,
                                                     one_torch_thread):
    from recrepro.papers.lambdaopt import run as driver

    evaluation = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test",
                  "ks": [20], "metrics": ["auc", "ndcg"], "rank_ties": "optimistic"}
    kw = {"split_dir": prism_split, "variant": settings["method"], "seed": 0, "evaluation": evaluation,
          "meta": {"tier": "smoke", "paper": "lambdaopt"},
          "settings": {"dim": 4, "epochs": 4, "batch_size": 128, "lr": 0.01, "init_std": 0.1, **settings}}
    driver.run_variant(out_dir=tmp_path / "ref", **kw)
    kill_after_saves(monkeypatch, 6 if settings["method"] == "lambdafix" else 2)  # lambdafix: in the 2nd λ
    with pytest.raises(Killed):
        driver.run_variant(out_dir=tmp_path / "resumed", checkpoint=tmp_path / "run.ckpt", **kw)
    monkeypatch.undo()
    driver.run_variant(out_dir=tmp_path / "resumed", checkpoint=tmp_path / "run.ckpt", **kw)
    assert not list(tmp_path.glob("run.ckpt*"))
    _assert_two_pieces(tmp_path / "resumed")
    files = _run_files(tmp_path / "ref")
    assert "metrics.json" in files and files == _run_files(tmp_path / "resumed")
    if "patience" in settings:
        stopping = json.loads(files["metrics.json"])["stopping"]
        assert stopping["stopped"] in ("patience", "cap") and 1 <= stopping["best_epoch"] <= stopping["epochs_trained"]
