"""Every committed λOpt and FedRAP run record was made under the settings ``config.yaml`` gives its
job today.

A config change that is not followed by reruns would otherwise leave records on the results pages
that no longer answer to the config beside them: a silently wrong number.  Snakemake's params trigger
catches this only where its metadata is (the machine that ran the job), never on a fresh clone.

A difference is allowed only where the record itself shows that it changes nothing:

* λOpt ``wait_for_gain`` (absent in the records made before it): it only acts on a run whose
  validation AUC never beat its first evaluation, so a record whose best epoch is past its first
  evaluation, or that ran to the cap, is what the rule gives (docs/deviations.md#lambdaopt-video-init).
* FedRAP ``negative_pool``: the driver records it in ``metrics.json``, not in the provenance settings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recrepro.config import load_config

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "results" / "paper"


def _records(paper: str) -> list[Path]:
    return sorted((RUNS / paper / "runs").glob("*/*/*/seed*/provenance.json"))


def _neutral_lambdaopt(key: str, metrics: dict) -> bool:
    if key != "wait_for_gain":
        return False
    stop = metrics.get("stopping") or {}
    first = int(stop.get("eval_every") or 1)
    return stop.get("stopped") == "cap" or (stop.get("best_epoch") or 0) > first


def settings_differences(paper: str, provenance: Path, config: dict) -> dict[str, tuple]:
    """The settings keys on which the record and today's config disagree, neutral ones left out."""
    if paper == "lambdaopt":
        from recrepro.papers.lambdaopt.experiments import rule_settings
    else:
        from recrepro.papers.fedrap.experiments import rule_settings
    dataset, _split, method = provenance.parts[-5:-2]
    got = dict(json.loads(provenance.read_text())["config"]["settings"])
    want = dict(rule_settings(config, "paper", dataset, method))
    metrics = json.loads((provenance.parent / "metrics.json").read_text())
    if paper == "fedrap":
        got.setdefault("negative_pool", metrics.get("negative_pool"))
    diff = {k: (got.get(k), want.get(k)) for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)}
    if paper == "lambdaopt":
        diff = {k: v for k, v in diff.items() if not _neutral_lambdaopt(k, metrics)}
    return diff


@pytest.mark.parametrize("paper", ["lambdaopt", "fedrap"])
def test_committed_records_answer_to_todays_config(paper):
    records = _records(paper)
    if not records:
        pytest.skip(f"no committed {paper} records")
    config = load_config(ROOT / "config.yaml")
    stale = {str(p.parent.relative_to(RUNS)): d for p in records if (d := settings_differences(paper, p, config))}
    assert not stale, f"records made under other settings than config.yaml gives (rerun them): {stale}"


def test_the_check_can_fail(tmp_path):
    """A record whose learning rate differs from the config's, and a λOpt record that stopped at
    its first evaluation without the wait-for-gain rule the config now asks for, are both found."""
    config = load_config(ROOT / "config.yaml")
    from recrepro.papers.lambdaopt.experiments import rule_settings

    run = tmp_path / "lambdaopt" / "runs" / "ml-100k" / "temporal_user_ratio" / "lambdaopt_du" / "seed0"
    run.mkdir(parents=True)
    settings = rule_settings(config, "paper", "ml-100k", "lambdaopt_du")
    old = {k: v for k, v in settings.items() if k != "wait_for_gain"}
    (run / "provenance.json").write_text(json.dumps({"config": {"settings": old}}))
    (run / "metrics.json").write_text(json.dumps({"stopping": {"stopped": "patience", "best_epoch": 338,
                                                               "eval_every": 1}}))
    assert settings_differences("lambdaopt", run / "provenance.json", config) == {}
    (run / "metrics.json").write_text(json.dumps({"stopping": {"stopped": "patience", "best_epoch": 1,
                                                               "eval_every": 1}}))
    assert settings_differences("lambdaopt", run / "provenance.json", config) == {"wait_for_gain": (None, True)}
    (run / "provenance.json").write_text(json.dumps({"config": {"settings": {**settings, "lr": 0.5}}}))
    assert settings_differences("lambdaopt", run / "provenance.json", config) == {"lr": (0.5, settings["lr"])}
