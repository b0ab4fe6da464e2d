"""Every committed λOpt, FedRAP, PRISM and exADMM run record was made under the settings ``config.yaml``
gives its job today, and was scored by the evaluation the config gives its split.

A config change that is not followed by reruns would otherwise leave records on the results pages
that no longer answer to the config beside them: a silently wrong number.  Snakemake's params trigger
catches this only where its metadata is (the machine that ran the job), never on a fresh clone.

A difference is allowed only where the record itself shows that it changes nothing:

* λOpt ``wait_for_gain`` (absent in the records made before it): it only acts while a run's best
  validation AUC is still its first evaluation, so a record whose curve beat that value within the
  patience is what the rule gives (docs/deviations.md#lambdaopt-video-init).
* λOpt ``gain_margin`` (absent in the records made before it): a record whose every curve cleared
  the margin or ran to the cap is what the rule gives (the drift module's test).
* FedRAP ``negative_pool``: the driver records it in ``metrics.json``, not in the provenance settings.
* PRISM ``device``: a record made on a GPU (``--config device=cuda``) answers to the same job.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

import pytest

from recrepro.config import load_config
from recrepro.paperlist import paper_keys

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "results" / "paper"


def _records(paper: str) -> list[Path]:
    return sorted((RUNS / paper / "runs").glob("*/*/*/seed*/provenance.json"))


def _neutral_lambdaopt(key: str, values: tuple, metrics: dict, run_dir: Path) -> bool:
    """Whether ``gain_margin`` (``values``: recorded, today's) could not have acted on this run (every
    curve cleared it or ran to the cap: :func:`recrepro.papers.lambdaopt.drift.same_without_margin`),
    or ``wait_for_gain`` could not have: its validation curve beat its first
    value (in the first phase) less than ``patience`` epochs after it, so patience never came due
    while the first evaluation was the best (read from the committed curve, ``history.parquet``)."""
    if key == "gain_margin" and values[0] is None:   # made when any gain counted: the drift module's rule
        from recrepro.papers.lambdaopt.drift import same_without_margin

        recorded = json.loads((run_dir / "provenance.json").read_text())["config"]["settings"]
        return same_without_margin(run_dir, recorded, float(values[1]))[0]
    if key != "wait_for_gain":
        return False
    import pandas as pd

    stop = metrics.get("stopping") or {}
    patience = stop.get("patience")
    if patience is None:                    # no patience: the rule has nothing to hold back
        return True
    history = pd.read_parquet(run_dir / "history.parquet")
    history = history[history["val_auc"].notna() & (history["phase"].fillna(0) == 0)]
    if history.empty:
        return False
    # λFix trains one curve per λ of its grid (``lam``), each under its own rule
    curves = [c for _, c in history.groupby("lam", sort=False)] if "lam" in history else [history]
    for curve in curves:
        first_epoch, first_value = curve["epoch"].iloc[0], curve["val_auc"].iloc[0]
        gains = curve.loc[curve["val_auc"] > first_value, "epoch"]
        if gains.empty:                     # never beaten: it may have run to the cap, not stopped
            if len(curves) > 1 or stop.get("stopped") != "cap" or int(stop.get("phases") or 1) != 1:
                return False
        elif gains.iloc[0] - first_epoch >= int(patience):
            return False
    return True


def _rule_settings(paper: str):
    """The paper's ``rule_settings(config, tier, dataset, variant)`` (a run's settings as its rule gives
    them: λOpt's and FedRAP's), from its rule helpers (``rules``, else ``experiments``), or None where
    they have none."""
    for name in ("rules", "experiments"):
        module = f"recrepro.papers.{paper}.{name}"
        if importlib.util.find_spec(module) is not None:
            found = getattr(importlib.import_module(module), "rule_settings", None)
            if found is not None:
                return found
    return None


def settings_differences(paper: str, provenance: Path, config: dict) -> dict[str, tuple]:
    """The settings keys on which the record and today's config disagree, neutral ones left out."""
    rule_settings = _rule_settings(paper)
    dataset, _split, method = provenance.parts[-5:-2]
    recorded = json.loads(provenance.read_text())["config"]
    got = dict(recorded["settings"])
    want = dict(rule_settings(config, "paper", dataset, method))
    got["evaluation"], want["evaluation"] = recorded.get("evaluation"), config["evaluation"]["splits"][_split]
    metrics = json.loads((provenance.parent / "metrics.json").read_text())
    if paper == "fedrap":
        got.setdefault("negative_pool", metrics.get("negative_pool"))
    diff = {k: (got.get(k), want.get(k)) for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)}
    if paper == "lambdaopt":
        diff = {k: v for k, v in diff.items() if not _neutral_lambdaopt(k, v, metrics, provenance.parent)}
    return diff


@pytest.mark.parametrize("paper", paper_keys())
def test_committed_records_answer_to_todays_config(paper):
    if _rule_settings(paper) is None:
        pytest.skip(f"{paper}: its rule helpers have no rule_settings (PRISM's and exADMM's records: the next test)")
    records = _records(paper)
    if not records:
        pytest.skip(f"no committed {paper} records")
    config = load_config(ROOT / "config.yaml")
    stale = {str(p.parent.relative_to(RUNS)): d for p in records if (d := settings_differences(paper, p, config))}
    assert not stale, f"records made under other settings than config.yaml gives (rerun them): {stale}"


def prism_differences(provenance: Path, config: dict) -> dict[str, tuple]:
    """Where a PRISM record's trainer settings, switches or evaluation differ from today's config."""
    from recrepro.papers.prism.rules import tier_conf
    from recrepro.papers.prism.run import settings_for

    dataset, _protocol, split, method, seed = provenance.parts[-6:-1]
    recorded = json.loads(provenance.read_text())["config"]
    got = dict(recorded["settings"])
    _backbone, want = settings_for(method, tier_conf(config, "paper"), config["prism"]["switches"],
                                   int(seed.removeprefix("seed")), got.get("device", "cpu"), dataset)
    got.update({f"switches.{k}": v for k, v in recorded.get("switches", {}).items()})
    want.update({f"switches.{k}": v for k, v in config["prism"]["switches"].items()})
    got["evaluation"], want["evaluation"] = recorded.get("evaluation"), config["evaluation"]["splits"][split]
    return {k: (got.get(k), want.get(k)) for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)}


def exadmm_differences(provenance: Path, config: dict) -> dict[str, tuple]:
    """Where an exADMM record's model family or parameters differ from its operating point today."""
    from recrepro.papers.exadmm.rules import smk_point

    dataset, _split, method = provenance.parts[-5:-2]
    got = json.loads(provenance.read_text())["config"]
    want = smk_point(config, "paper", dataset, method)
    return {k: (got.get(k), want.get(k)) for k in ("family", "params") if got.get(k) != want.get(k)}


@pytest.mark.parametrize("paper, pattern, differences", [
    pytest.param("prism", "*/*/*/*/seed*/provenance.json", prism_differences, id="prism"),
    pytest.param("exadmm", "*/*/*/seed*/provenance.json", exadmm_differences, id="exadmm"),
])
def test_committed_prism_and_exadmm_records_answer_to_todays_config(paper, pattern, differences):
    records = sorted((RUNS / paper / "runs").glob(pattern))
    if not records:
        pytest.skip(f"no committed {paper} records")
    config = load_config(ROOT / "config.yaml")
    stale = {str(p.parent.relative_to(RUNS)): d for p in records if (d := differences(p, config))}
    assert not stale, f"records made under other settings than config.yaml gives (rerun them): {stale}"


def _copied(record: Path, tmp_path: Path, depth: int) -> tuple[Path, dict]:
    """A committed provenance.json copied under ``tmp_path`` with its last ``depth`` path parts (the
    checks read dataset, split and method from them), and its content to edit."""
    copy = tmp_path.joinpath(*record.parts[-depth:])
    copy.parent.mkdir(parents=True)
    recorded = json.loads(record.read_text())
    copy.write_text(json.dumps(recorded))
    return copy, recorded


def test_the_prism_and_exadmm_checks_can_fail(tmp_path):
    """A PRISM record trained at another learning rate or scored at another cut-off, and an exADMM
    record fitted with another regularisation, are found; the committed ones' own settings are not."""
    config = load_config(ROOT / "config.yaml")
    copy, recorded = _copied(next((RUNS / "prism" / "runs").glob("*/*/*/*/seed*/provenance.json")), tmp_path, 7)
    assert prism_differences(copy, config) == {}
    recorded["config"]["settings"]["lr"] = 0.1
    recorded["config"]["evaluation"] = {**recorded["config"]["evaluation"], "ks": [10]}
    copy.write_text(json.dumps(recorded))
    assert set(prism_differences(copy, config)) == {"lr", "evaluation"}

    copy, recorded = _copied(next((RUNS / "exadmm" / "runs").glob("*/*/*/seed*/provenance.json")), tmp_path, 6)
    assert exadmm_differences(copy, config) == {}
    recorded["config"]["params"] = {**recorded["config"]["params"], "l2": 123.0}
    copy.write_text(json.dumps(recorded))
    assert set(exadmm_differences(copy, config)) == {"params"}


def test_the_check_can_fail(tmp_path):
    """A record whose learning rate differs from the config's, and a λOpt record whose curve stayed
    below its first value for longer than the patience, without the wait-for-gain rule the config
    now asks for, are both found; one that gained within the patience is not."""
    import pandas as pd

    config = load_config(ROOT / "config.yaml")
    from recrepro.papers.lambdaopt.rules import rule_settings

    run = tmp_path / "lambdaopt" / "runs" / "ml-100k" / "temporal_user_ratio" / "lambdaopt_du" / "seed0"
    run.mkdir(parents=True)
    settings = rule_settings(config, "paper", "ml-100k", "lambdaopt_du")
    old = {k: v for k, v in settings.items() if k != "wait_for_gain"}
    evaluation = config["evaluation"]["splits"]["temporal_user_ratio"]
    (run / "provenance.json").write_text(json.dumps({"config": {"settings": old, "evaluation": evaluation}}))
    (run / "metrics.json").write_text(json.dumps({"stopping": {"stopped": "patience", "patience": 100,
                                                               "best_epoch": 338, "eval_every": 1}}))

    def curve(gain_at):
        epochs = list(range(0, 400, 5))
        values = [0.51 if e == 0 else (0.60 if e >= gain_at else 0.50) for e in epochs]
        pd.DataFrame({"epoch": epochs, "val_auc": values, "phase": 0}).to_parquet(run / "history.parquet")

    curve(gain_at=80)                        # beat 0.51 80 epochs after it: patience never came due
    assert settings_differences("lambdaopt", run / "provenance.json", config) == {}
    curve(gain_at=150)                       # 150 epochs below it: the old rule stopped where the new one waits
    assert settings_differences("lambdaopt", run / "provenance.json", config) == {"wait_for_gain": (None, True)}
    (run / "provenance.json").write_text(json.dumps({"config": {"settings": {**settings, "lr": 0.5},
                                                                 "evaluation": evaluation}}))
    assert settings_differences("lambdaopt", run / "provenance.json", config) == {"lr": (0.5, settings["lr"])}
    (run / "provenance.json").write_text(json.dumps({"config": {"settings": settings,
                                                                 "evaluation": {**evaluation, "ks": [10]}}}))
    assert set(settings_differences("lambdaopt", run / "provenance.json", config)) == {"evaluation"}
