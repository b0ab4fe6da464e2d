"""λOpt's converging budget (recrepro.papers.lambdaopt.stopping): patience and cap on a known
validation curve, and the driver's record at the best validation epoch (hand-checked)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_resume import prism_split  # noqa: F401  (the tiny split fixture)

from recrepro.papers.lambdaopt.stopping import ValidationMonitor


class Scripted:
    """A model whose snapshot is the number of epochs it has trained."""

    def __init__(self):
        self.epochs = 0

    def snapshot(self):
        return {"epochs": self.epochs}


def drive(curve, patience, cap, eval_every=1, model=None, wait_for_gain=False, gain_margin=0.0):
    """Feed ``curve`` (validation AUC after epoch 1, 2, …) to a monitor; the epochs trained."""
    model = model or Scripted()
    values = iter(curve)
    mon = ValidationMonitor(lambda m: next(values), patience=patience, cap=cap, eval_every=eval_every,
                            wait_for_gain=wait_for_gain, gain_margin=gain_margin)
    for epoch in range(cap):
        model.epochs = epoch + 1
        if mon.update(model, epoch):
            break
    return mon


def test_patience_stops_after_patience_epochs_without_a_strict_improvement():
    #          epoch: 1    2    3    4     5     6     7
    mon = drive([0.5, 0.6, 0.7, 0.65, 0.66, 0.69, 0.99], patience=3, cap=20)
    # best 0.7 after epoch 3; epochs 4, 5, 6 do not beat it -> stop after epoch 6 (6 - 3 = 3)
    assert (mon.stopped, mon.best_epoch, mon.best_value, mon.epochs_done) == ("patience", 3, 0.7, 6)
    assert mon.best_snapshot == {"epochs": 3}
    assert [r["epoch"] for r in mon.curve] == [1, 2, 3, 4, 5, 6]
    assert mon.summary()["epochs_trained"] == 6 and mon.summary()["stopped"] == "patience"


def test_a_tie_is_no_improvement_and_the_cap_ends_a_rising_curve():
    mon = drive([0.5, 0.5, 0.5, 0.5], patience=2, cap=10)
    assert (mon.stopped, mon.best_epoch, mon.epochs_done) == ("patience", 1, 3)
    mon = drive([0.1, 0.2, 0.3, 0.4, 0.5], patience=2, cap=5)
    assert (mon.stopped, mon.best_epoch, mon.best_value, mon.epochs_done) == ("cap", 5, 0.5, 5)
    mon = drive([0.1, 0.3, 0.2, 0.2, 0.2], patience=None, cap=5)       # no patience: to the cap, best kept
    assert (mon.stopped, mon.best_epoch, mon.epochs_done) == ("cap", 2, 5)


def test_a_gain_within_the_margin_does_not_start_the_patience_clock():
    # a plateau's wobble: 0.5101 beats 0.51 by 1e-4 after epoch 2 (amazon-video's lambdaopt_dui_code)
    #        epoch: 1     2       3      4      5     6     7     8     9     10
    curve = [0.510, 0.5101, 0.505, 0.506, 0.509, 0.515, 0.521, 0.530, 0.529, 0.528, 0.527, 0.526]
    anygain = drive(curve, patience=3, cap=12, wait_for_gain=True)
    assert (anygain.stopped, anygain.best_epoch, anygain.epochs_done) == ("patience", 2, 5)   # 5 - 2 = 3
    held = drive(curve, patience=3, cap=12, wait_for_gain=True, gain_margin=0.01)
    # 0.515 (epoch 6) is 0.005 above 0.51: not yet; 0.521 (epoch 7) is 0.011 above: gained. Best 0.530
    # after epoch 8, stop after epoch 11
    assert (held.stopped, held.best_epoch, held.best_value, held.epochs_done) == ("patience", 8, 0.530, 11)
    assert held.summary()["gain_margin"] == 0.01 and anygain.summary()["gain_margin"] == 0.0
    assert held.summary()["first_val_auc"] == 0.510
    # strictly more than the margin: exactly 0.01 above is not a gain (values exact in binary)
    edge = drive([0.5, 0.5078125, 0.5, 0.5, 0.5], patience=2, cap=5, wait_for_gain=True, gain_margin=0.0078125)
    assert (edge.stopped, edge.best_epoch, edge.epochs_done) == ("cap", 2, 5)
    # the margin is part of the checkpoint key when set, absent at 0 (keys made without it stay valid)
    assert held.settings()["gain_margin"] == 0.01 and "gain_margin" not in anygain.settings()
    with pytest.raises(ValueError, match="gain_margin"):
        ValidationMonitor(lambda m: 0.5, patience=3, cap=5, gain_margin=-0.1)


def test_wait_for_gain_holds_patience_until_the_first_value_is_beaten():
    # amazon-video's shape: a dip below the first value, then a climb past it
    #            epoch: 1     2     3     4     5     6     7     8     9
    curve = [0.51, 0.50, 0.49, 0.49, 0.50, 0.52, 0.53, 0.53, 0.53, 0.53, 0.53]
    plain = drive(curve, patience=3, cap=11)
    assert (plain.stopped, plain.best_epoch, plain.epochs_done) == ("patience", 1, 4)   # 4 - 1 = 3: ended in the dip
    held = drive(curve, patience=3, cap=11, wait_for_gain=True)
    # 0.52 after epoch 6 beats 0.51: the clock starts there; best 0.53 after epoch 7, stop after 10
    assert (held.stopped, held.best_epoch, held.best_value, held.epochs_done) == ("patience", 7, 0.53, 10)
    assert held.summary()["wait_for_gain"] is True and plain.summary()["wait_for_gain"] is False
    # never beaten: to the cap, the first evaluation still the best
    flat = drive([0.51, 0.50, 0.50, 0.51, 0.50, 0.49], patience=2, cap=6, wait_for_gain=True)
    assert (flat.stopped, flat.best_epoch, flat.epochs_done) == ("cap", 1, 6)
    # a run that learns from the start stops exactly as without the rule
    rising = [0.5, 0.6, 0.7, 0.65, 0.66, 0.69, 0.99]
    a, b = drive(rising, patience=3, cap=20), drive(rising, patience=3, cap=20, wait_for_gain=True)
    assert (a.stopped, a.best_epoch, a.epochs_done) == (b.stopped, b.best_epoch, b.epochs_done) == ("patience", 3, 6)
    # the rule is part of the checkpoint key only when on (keys of runs made without it stay valid)
    assert "wait_for_gain" not in a.settings() and b.settings()["wait_for_gain"] is True


def test_eval_every_evaluates_every_kth_epoch_and_the_last():
    #  evaluated after epochs 2, 4, 6 (cap 7 -> also 7)
    mon = drive([0.3, 0.5, 0.4, 0.45], patience=10, cap=7, eval_every=2)
    assert [r["epoch"] for r in mon.curve] == [2, 4, 6, 7]
    assert (mon.stopped, mon.best_epoch, mon.best_snapshot) == ("cap", 4, {"epochs": 4})


def test_a_plateau_can_start_a_new_phase_and_the_best_is_then_of_that_phase():
    class TwoPhase(Scripted):
        training_phase = 0
        switch_at = None

        def on_plateau(self, epoch):
            if self.training_phase:
                return False
            self.switch_at = epoch + 1
            return True

    model = TwoPhase()
    values = iter([0.9, 0.8, 0.8, 0.5, 0.6, 0.55, 0.55, 0.55])
    mon = ValidationMonitor(lambda m: next(values), patience=2, cap=20)
    for epoch in range(20):
        model.epochs = epoch + 1
        if model.switch_at is not None and epoch >= model.switch_at:
            model.training_phase = 1
        if mon.update(model, epoch):
            break
    # phase 0: best 0.9 after epoch 1, plateau after epoch 3 -> phase 1 from epoch 4 (0.9 forgotten):
    # best 0.6 after epoch 5, stop after epoch 7
    assert model.switch_at == 3
    assert (mon.stopped, mon.best_epoch, mon.best_value, mon.epochs_done, mon.phase) == ("patience", 5, 0.6, 7, 1)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="patience"):
        ValidationMonitor(lambda m: 0.0, patience=0, cap=3)
    with pytest.raises(ValueError, match="eval_every"):
        ValidationMonitor(lambda m: 0.0, patience=1, cap=3, eval_every=0)


# --------------------------------------------------------------------------------- the driver
@pytest.fixture(scope="module")
def small_split(prism_split):
    return prism_split


EVALUATION = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test",
              "ks": [50, 100], "metrics": ["auc", "pp_hr", "pp_ndcg"], "rank_ties": "optimistic"}
BASE = {"dim": 4, "batch_size": 128, "lr": 0.01, "init_std": 0.1}


@pytest.mark.parametrize("settings", [
    {"method": "lambdafix", "lambdafix_grid": [0.0]},
    {"method": "lambdaopt", "granularity": "dui", "val_batch_size": 64, "trajectory_every": 2},
])
def test_driver_reports_the_best_validation_epoch_and_keeps_the_last(small_split, settings, tmp_path, monkeypatch,
                                                                    one_torch_thread):
    """A scripted validation curve peaking after epoch 3 with patience 3: the run stops after
    epoch 6; its test metrics are those of the same model trained 3 epochs without the rule,
    ``last_epoch`` those of 6 epochs."""
    from recrepro.papers.lambdaopt import run as driver

    curve = iter([0.50, 0.60, 0.70, 0.65, 0.66, 0.69, 0.99, 0.99])
    monkeypatch.setattr(driver, "_validation_auc", lambda *a, **k: next(curve))
    kw = {"split_dir": small_split, "variant": settings["method"], "seed": 0, "evaluation": EVALUATION,
          "meta": {"tier": "smoke", "paper": "lambdaopt"}}
    res = driver.run_variant(out_dir=tmp_path / "rule", settings={**BASE, **settings, "epochs": 20, "patience": 3},
                             **kw)
    assert (res["stopped"], res["best_epoch"]) == ("patience", 3)
    monkeypatch.undo()
    rec = json.loads((tmp_path / "rule" / "metrics.json").read_text())
    assert rec["stopping"]["epochs_trained"] == 6 and rec["stopping"]["best_val_auc"] == 0.70
    for epochs, got in ((3, rec["overall"]), (6, rec["last_epoch"])):
        driver.run_variant(out_dir=tmp_path / f"plain{epochs}", settings={**BASE, **settings, "epochs": epochs}, **kw)
        plain = json.loads((tmp_path / f"plain{epochs}" / "metrics.json").read_text())["overall"]
        assert set(got) >= {"auc", "pp_hr@50", "pp_hr@100", "pp_ndcg@50", "pp_ndcg@100"}
        for metric in ("auc", "pp_hr@50", "pp_hr@100", "pp_ndcg@50", "pp_ndcg@100"):
            assert got[metric] == plain[metric], (epochs, metric)
    assert rec["overall"]["auc"] != rec["last_epoch"]["auc"]        # the two epochs differ: the check can fail
    import pandas as pd

    hist = pd.read_parquet(tmp_path / "rule" / "history.parquet")
    epochs_rows = hist[hist["epoch"].notna()]
    assert epochs_rows["epoch"].tolist() == [0, 1, 2, 3, 4, 5]
    assert np.allclose(epochs_rows["val_auc"], [0.50, 0.60, 0.70, 0.65, 0.66, 0.69])
    if settings["method"] == "lambdaopt":
        traj = pd.read_parquet(tmp_path / "rule" / "trajectory.parquet")
        assert sorted(traj["epoch"].unique()) == [0, 2, 4]


def test_checkpoint_key_includes_the_stopping_rule(small_split):
    from recrepro.models.mf_bpr import MFBPR
    from recrepro.evaluation.on_split import SplitData

    train = SplitData(small_split).csr(["train"])
    model = MFBPR({**BASE, "epochs": 4})
    a = ValidationMonitor(lambda m: 0.0, patience=3, cap=4)
    b = ValidationMonitor(lambda m: 0.0, patience=5, cap=4)
    keys = {model.checkpoint_key(train, None), model.checkpoint_key(train, None, a), model.checkpoint_key(train, None, b)}
    assert len(keys) == 3
    assert torch.equal(MFBPR({**BASE, "epochs": 1}).fit(train).snapshot()["P"],
                       MFBPR({**BASE, "epochs": 1}).fit(train).P)


def test_the_held_out_share_of_validation_is_disjoint_complete_and_fixed_by_the_seed():
    import scipy.sparse as sp

    from recrepro.papers.lambdaopt.run import held_out_validation

    rng = np.random.default_rng(3)
    validation = sp.random(50, 40, density=0.2, format="csr", random_state=rng, data_rvs=lambda n: np.ones(n))
    learn, held = held_out_validation(validation, 0.5, seed=7)
    assert learn.multiply(held).nnz == 0                                   # no interaction in both parts
    assert ((learn + held) != validation).nnz == 0                         # and none lost
    assert 0.35 < held.nnz / validation.nnz < 0.65
    again_learn, again_held = held_out_validation(validation, 0.5, seed=7)
    assert (again_held != held).nnz == 0 and (again_learn != learn).nnz == 0
    assert (held_out_validation(validation, 0.5, seed=8)[1] != held).nnz > 0
    with pytest.raises(ValueError, match="select_share"):
        held_out_validation(validation, 1.0, seed=7)


def test_a_validation_learner_stops_on_the_held_out_share_and_learns_on_the_rest(small_split, tmp_path, monkeypatch,
                                                                                 one_torch_thread):
    """λOpt with ``select_share``: its λ step sees only the learning share of the validation, the
    stopping rule scores only the held-out share (with the learning share masked), and the record
    says so; λFix under the same settings ignores the share."""
    from recrepro.papers.lambdaopt import run as driver
    from recrepro.papers.lambdaopt.mf_lambdaopt import MFLambdaOpt
    from recrepro.evaluation.on_split import SplitData

    validation = SplitData(small_split).csr(["validation"])
    learn, held = driver.held_out_validation(validation, 0.5, seed=0)
    seen = {}
    real_fit = MFLambdaOpt.fit

    def spy_fit(self, train, validation=None, **kw):
        seen["fit_validation"] = validation
        return real_fit(self, train, validation=validation, **kw)

    def spy_auc(model, held_out, section, device, batch_size):
        seen["exclude"], seen["targets"] = held_out
        return 0.5

    monkeypatch.setattr(MFLambdaOpt, "fit", spy_fit)
    monkeypatch.setattr(driver, "_held_out_auc", spy_auc)
    monkeypatch.setattr(driver, "_validation_auc", lambda *a, **k: pytest.fail("scored the whole validation"))
    kw = {"split_dir": small_split, "seed": 0, "evaluation": EVALUATION, "meta": {"tier": "smoke", "paper": "lambdaopt"}}
    settings = {**BASE, "method": "lambdaopt", "granularity": "dui", "val_batch_size": 64, "epochs": 3, "patience": 2,
                "select_share": 0.5}
    driver.run_variant(out_dir=tmp_path / "dui", variant="lambdaopt_dui", settings=settings, **kw)
    assert (seen["fit_validation"] != learn).nnz == 0 and (seen["targets"] != held).nnz == 0
    train = SplitData(small_split).csr(["train"])
    assert ((seen["exclude"] > 0) != ((train + learn) > 0)).nnz == 0
    rec = json.loads((tmp_path / "dui" / "metrics.json").read_text())
    assert rec["select_share"] == 0.5 and rec["n_select_targets"] == held.nnz

    monkeypatch.undo()
    calls = []
    monkeypatch.setattr(driver, "_held_out_auc", lambda *a, **k: pytest.fail("lambdafix learns nothing on validation"))
    monkeypatch.setattr(driver, "_validation_auc", lambda *a, **k: calls.append(1) or 0.5)
    driver.run_variant(out_dir=tmp_path / "fix", variant="lambdafix",
                       settings={**BASE, "method": "lambdafix", "lambdafix_grid": [0.0], "epochs": 2, "patience": 2,
                                 "select_share": 0.5}, **kw)
    assert calls and "select_share" not in json.loads((tmp_path / "fix" / "metrics.json").read_text())


def test_only_the_validation_learners_settings_carry_the_select_share():
    from recrepro.config import load_config
    from recrepro.papers.lambdaopt.rules import rule_settings

    from pathlib import Path

    config = load_config(Path(__file__).resolve().parents[1] / "config.yaml")
    shares = {v: rule_settings(config, "paper", "ml-100k", v).get("select_share")
              for v in ("lambdafix", "neumf", "amf", "sgda", "lambdaopt_dui")}
    assert shares == {"lambdafix": None, "neumf": None, "amf": None, "sgda": 0.5, "lambdaopt_dui": 0.5}


def test_the_results_table_says_where_and_why_each_seed_stopped(tmp_path):
    import json

    import pandas as pd

    from recrepro.papers.lambdaopt.tables import stopping_summary, table_markdown

    runs = []
    for method, seed, stop in (("lambdaopt_dui", 0, {"stopped": "patience", "best_epoch": 1425, "eval_every": 5}),
                               ("lambdaopt_du", 0, {"stopped": "patience", "best_epoch": 5, "eval_every": 5}),
                               ("sgda", 0, {"stopped": "cap", "best_epoch": 3185, "eval_every": 5}),
                               ("sgda", 1, {"stopped": "patience", "best_epoch": 900, "eval_every": 5}),
                               ("lambdaopt_d", 0, {"stopped": "cap", "best_epoch": 5, "eval_every": 5}),
                               # to the cap, its best 0.004 above its first value: not past the margin
                               ("lambdaopt_di", 0, {"stopped": "cap", "best_epoch": 2000, "eval_every": 5,
                                                    "first_val_auc": 0.508, "best_val_auc": 0.512,
                                                    "gain_margin": 0.01}),
                               ("lambdaopt_di", 1, {"stopped": "cap", "best_epoch": 2000, "eval_every": 5,
                                                    "first_val_auc": 0.508, "best_val_auc": 0.612,
                                                    "gain_margin": 0.01}),
                               ("neumf", 0, None)):
        d = tmp_path / method / f"seed{seed}"
        d.mkdir(parents=True)
        meta = {"dataset": "toy", "method": method, "seed": seed, **({"stopping": stop} if stop else {})}
        (d / "metrics.json").write_text(json.dumps(meta))
        runs.append(d)
    # a record from before the first value was kept: its history's first evaluation (0.508 again)
    d = tmp_path / "lambdaopt_di" / "seed2"
    d.mkdir()
    (d / "metrics.json").write_text(json.dumps({"dataset": "toy", "method": "lambdaopt_di", "seed": 2, "stopping": {
        "stopped": "cap", "best_epoch": 2000, "eval_every": 5, "best_val_auc": 0.515, "gain_margin": 0.01}}))
    pd.DataFrame({"epoch": [4.0, 9.0], "val_auc": [0.508, 0.515]}).to_parquet(d / "history.parquet")
    runs.append(d)
    stops = stopping_summary(runs)
    assert stops == {("toy", "lambdaopt_dui"): "1425 (patience)",
                     ("toy", "lambdaopt_du"): "5 (patience), at its first evaluation",
                     ("toy", "sgda"): "3185 (cap); 900 (patience)",
                     ("toy", "lambdaopt_d"): "5 (cap), never above its first evaluation",
                     ("toy", "lambdaopt_di"): ("2000 (cap), never more than 0.01 above its first evaluation; 2000 (cap); "
                                                 "2000 (cap), never more than 0.01 above its first evaluation")}
    agg = pd.DataFrame([{"dataset": "toy", "method": m, "metric": "auc", "mean": 0.6, "std": float("nan"),
                         "count": 1} for m in ("lambdaopt_dui", "lambdaopt_du", "neumf")])
    md = table_markdown(agg, "paper", stops=stops)
    assert "| lambdaopt_du | 0.6000 | – | – | – | – | 5 (patience), at its first evaluation |" in md
    assert "| neumf | 0.6000 | – | – | – | – | – |" in md
    assert "best epoch (rule)" not in table_markdown(agg, "paper")


def test_the_sensitivity_table_carries_its_budget_and_an_outdated_one_is_marked(small_split, tmp_path, monkeypatch,
                                                                               one_torch_thread):
    """A sweep under patience 2 ends each curve by the rule and every row names the budget (cap 9,
    patience 2); the figure's caption repeats it, and a table made under another cap, or before rows
    carried their budget, is marked on the figure."""
    import matplotlib.pyplot as plt

    from recrepro.papers.lambdaopt import figures
    from recrepro.papers.lambdaopt import run as driver

    monkeypatch.setattr(driver, "_validation_auc", lambda *a, **k: 0.5)  # flat: patience ends it
    table = driver.sensitivity(split_dir=small_split, settings={**BASE, "patience": 2}, lambdas=[1e-3, 0.0], epochs=9,
                               seed=0, evaluation=EVALUATION)
    assert sorted(table["lam"].unique()) == [0.0, 1e-3]
    assert table.groupby("lam")["epoch"].max().tolist() == [3, 3]     # epoch 1 sets the best; 2 more without gain
    assert (table["epoch_cap"] == 9).all() and (table["patience"] == 2).all()
    assert figures.sensitivity_budget(table, 9) == ("curves to epoch 3 (patience 2, cap 9)", False)
    assert figures.sensitivity_budget(table, 3200) == ("curves to epoch 3 (patience 2, cap 9)", True)
    old = table.drop(columns=["epoch_cap", "patience"])
    assert figures.sensitivity_budget(old, 9) == ("curves to epoch 3, budget not recorded", True)
    assert figures.sensitivity_budget(old) == ("curves to epoch 3, budget not recorded", False)

    texts = []
    real = plt.Axes.text
    monkeypatch.setattr(plt.Axes, "text", lambda self, x, y, s, *a, **k: (texts.append(s), real(self, x, y, s, *a, **k))[1])
    figures.figure_sensitivity(table, str(tmp_path / "s.pdf"), str(tmp_path / "s.png"), "smoke", "toy", epochs=9)
    assert not any("another budget" in t for t in texts)
    figures.figure_sensitivity(old, str(tmp_path / "o.pdf"), str(tmp_path / "o.png"), "smoke", "toy", epochs=9)
    assert any("another budget" in t for t in texts)


def test_a_sensitivity_sweep_killed_midway_resumes_each_curve_to_the_same_table(small_split, tmp_path, monkeypatch,
                                                                               one_torch_thread):
    """The amazon-video sweep runs four curves to the cap (hours): killed in its second curve, it
    resumes that curve from its last epoch and skips the finished first, to the uninterrupted table."""
    import pandas as pd

    from recrepro.cli.main import main as recrepro
    from recrepro.papers.lambdaopt import run as driver

    settings = {**BASE, "patience": 50}
    kwargs = dict(split_dir=small_split, settings=settings, lambdas=[1e-3, 0.0], epochs=6, seed=0,
                  evaluation=EVALUATION)
    whole = driver.sensitivity(**kwargs)
    assert whole.groupby("lam")["epoch"].max().tolist() == [6, 6]
    ckpt = tmp_path / "ckpt" / "sensitivity.ckpt"
    real_monitor, updates = driver.make_monitor, []

    def dying_monitor(*args, **kw):
        monitor = real_monitor(*args, **kw)
        update = monitor.update

        def counted(model, epoch):
            updates.append(epoch)
            if len(updates) == 6 + 3:       # the second curve's third epoch
                raise KeyboardInterrupt("killed")
            return update(model, epoch)
        monitor.update = counted
        return monitor

    monkeypatch.setattr(driver, "make_monitor", dying_monitor)
    with pytest.raises(KeyboardInterrupt):
        driver.sensitivity(**kwargs, checkpoint=ckpt)
    files = driver.sensitivity_checkpoints(ckpt, kwargs["lambdas"])
    assert [f.is_file() for f in files] == [True, True]
    updates.clear()
    resumed = driver.sensitivity(**kwargs, checkpoint=ckpt)
    assert len(updates) == 6 - 2          # the first curve from its file; the second from its third epoch
    pd.testing.assert_frame_equal(resumed, whole)
    # the command removes the files once its table is written
    monkeypatch.setattr(driver, "make_monitor", real_monitor)
    out = tmp_path / "val_auc.parquet"
    assert recrepro(["lambdaopt", "train", "--mode", "sensitivity", "--split-dir", str(small_split), "--settings", json.dumps(settings),
                     "--lambdas", "[0.001, 0.0]", "--epochs", "6", "--seed", "0", "--evaluation", json.dumps(EVALUATION),
                     "--checkpoint", str(ckpt), "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out), whole)
    assert not any(f.exists() for f in files)
