"""The strong baselines' grid records against today's configuration (recrepro.baselines.strong.record_drift):
a changed grid, validation metric, evaluation or seed list is named on the records it touches, a
deterministic model is not asked for seeds it never runs, and every committed record is current (or,
where only a walk switched on later lags, queued and marked)."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recrepro.config import load_config
from recrepro.baselines.strong import protocol_entry, record_drift

IALS = "paper/baselines/strong/ml-100k/fedrap/leave_one_out/ials/split0"
EASE = "paper/baselines/strong/ml-100k/fedrap/leave_one_out/ease/split0"


@pytest.fixture(scope="module")
def config(repo_root):
    return load_config(repo_root / "config.yaml")


@pytest.fixture
def records(tmp_path, repo_root):
    """Copies of two committed grid records (iALS: one record per seed; EASE: deterministic, one)."""
    for rel in (IALS, EASE):
        src = repo_root / "results" / rel
        if not (src / "grid.json").is_file():
            pytest.skip(f"no committed record {rel}")
        shutil.copytree(src, tmp_path / rel, ignore=shutil.ignore_patterns("*.parquet"))
    return tmp_path


def _differences(drift):
    """The drift rows other than a walk list the record provably did not need (made before the walk
    past the grid's edges, its pick inside every walked setting's range: the same record)."""
    return drift[~((drift["setting"] == "search.beyond") & drift["same_record"])].reset_index(drop=True)


def _entry(config):
    return protocol_entry(config, "paper", "ml-100k", "fedrap", "leave_one_out")


def test_copied_records_are_current(records, config):
    assert len(list(records.glob("**/seed*/provenance.json"))) == 3 + 1   # iALS on 3 seeds, EASE on one
    drift = record_drift(config, "paper", records)
    # made before the walk past the grid's edges: only the walk list differs, and it adds no point
    assert set(drift["setting"]) <= {"search.beyond"} and drift["same_record"].all()


def test_a_record_picked_on_an_edge_the_walk_goes_past_is_outdated(records, config):
    """A grid record made before the walk existed is the same record when its pick sits inside every
    walked setting's range; moved onto an edge (its scores rewritten by hand), it must be tuned again."""
    import json

    grid_file = records / IALS / "grid.json"
    summary = json.loads(grid_file.read_text())
    summary.pop("beyond", None)
    select = f"val:{summary['select']}"
    assert not record_drift(config, "paper", records)["same_record"].eq(False).any()
    # the point with the largest alpha0 and the smallest l2 now scores best: an edge in both
    corner = max(range(len(summary["points"])), key=lambda i: (summary["points"][i]["settings"]["alpha0"],
                                                                -summary["points"][i]["settings"]["l2"]))
    summary["points"][corner][select] = 1.0
    grid_file.write_text(json.dumps(summary))
    drift = record_drift(config, "paper", records)
    outdated = drift[~drift["same_record"]]
    assert set(outdated["setting"]) == {"search.beyond"} and outdated["record"].str.contains("/ials/").all()
    assert len(outdated) == 1 + 3  # the grid record and its three seeds' records
    assert outdated["why"].str.contains("today's walk goes on to alpha0=0.3").all()


def test_a_walked_record_is_replayed_under_todays_list():
    """A record walked under one list is the same under another when the walk, replayed on the
    record's own scores, visits exactly the points it scored; a longer list past its pick is not."""
    from recrepro.baselines.strong import _same_without_walk

    def row(lam, score, walked=False):
        return {"settings": {"lam": lam}, "val:auc": score, **({"beyond": True} if walked else {})}

    summary = {"select": "auc", "points": [row(1.0, 0.1), row(10.0, 0.2), row(100.0, 0.3, True), row(1000.0, 0.25, True)]}
    old = {"lam": [0.1, 100.0, 1000.0]}
    same, why = _same_without_walk(summary, None, "search.beyond", old, {"lam": [0.01, 0.1, 100.0, 1000.0, 1e4]})
    assert same and "visits exactly the points it scored" in why   # inside at 100: the longer list adds nothing
    same, why = _same_without_walk(summary, None, "search.beyond", old, {"lam": [100.0, 500.0]})
    assert not same and "lam=500" in why                           # another step between 100 and 1000
    same, why = _same_without_walk(summary, None, "search.beyond", old, {"lam": [100.0]})
    assert not same and "does not reach" in why                    # 1000 is past today's list
    ended = {"select": "auc", "points": [row(1.0, 0.1), row(10.0, 0.2), row(100.0, 0.3, True)]}
    same, why = _same_without_walk(ended, None, "search.beyond", {"lam": [100.0]}, {"lam": [100.0, 1000.0]})
    assert not same and "lam=1000" in why                          # it ended on its list's end; today's goes on
    assert _same_without_walk(ended, None, "search.grid", {}, {}) is None


def test_a_changed_grid_is_named_on_the_grid_and_on_every_seed_record(records, config):
    changed = copy.deepcopy(config)
    entry = _entry(changed)
    models = entry.setdefault("models", {})
    ease = copy.deepcopy(models.get("ease") or changed["strong_baselines"]["tiers"]["paper"]["models"]["ease"])
    ease["grid"]["lam"] = [*ease["grid"]["lam"], 99999.0]
    ease.pop("beyond", None)  # 99999 would sit inside its range
    models["ease"] = ease
    drift = _differences(record_drift(changed, "paper", records))
    assert set(drift["setting"]) == {"search.grid"}
    assert sorted(drift["record"].str.rsplit("/", n=1).str[-1]) == ["seed0", "split0"]
    assert drift["record"].str.contains("/ease/").all() and not drift["same_record"].any()
    assert drift["now"].iloc[0]["lam"][-1] == 99999.0


def test_a_changed_validation_metric_or_evaluation_is_outdated(records, config):
    changed = copy.deepcopy(config)
    entry = _entry(changed)
    entry["select"] = "ndcg@10"
    drift = _differences(record_drift(changed, "paper", records))
    assert set(drift["setting"]) == {"search.select"} and len(drift) == 2 + 3 + 1  # 2 grids; iALS 3 seeds, EASE 1
    evaluation = changed["evaluation"]["splits"][entry["evaluation"]] if isinstance(entry["evaluation"], str) \
        else entry["evaluation"]
    evaluation["ks"] = [5]
    drift = _differences(record_drift(changed, "paper", records))
    assert "evaluation.ks" in set(drift["setting"])
    assert set(drift.loc[drift["setting"] == "evaluation.ks", "record"].str.rsplit("/", n=1).str[-1]) == {
        "seed0", "seed1", "seed2"}


def test_more_seeds_outdate_a_seeded_model_only(records, config):
    changed = copy.deepcopy(config)
    entry = _entry(changed)
    entry["seeds"] = [*entry["seeds"], 7]
    drift = _differences(record_drift(changed, "paper", records))
    assert drift[["setting", "same_record"]].values.tolist() == [["seeds.tested", False]]
    assert "/ials/" in drift["record"].iloc[0] and drift["now"].iloc[0][-1] == 7


def test_a_record_the_configuration_no_longer_has_is_listed_not_outdated(records, config):
    changed = copy.deepcopy(config)
    tier = changed["strong_baselines"]["tiers"]["paper"]
    tier["protocols"] = [e for e in tier["protocols"]
                         if (e["dataset"], e["protocol"]) != ("ml-100k", "fedrap")]
    drift = record_drift(changed, "paper", records)
    assert len(drift) == 2 and drift["same_record"].all() and set(drift["setting"]) == {"protocol"}


def test_the_verb_exits_1_on_an_outdated_record(records, tmp_path, config, repo_root):
    import yaml

    changed = copy.deepcopy(config)
    _entry(changed)["select"] = "ndcg@10"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(changed))
    done = subprocess.run([sys.executable, "-m", "recrepro", "strong", "drift", "--tier", "paper", "--config", str(cfg),
                           "--results", str(records)], capture_output=True, text=True, cwd=repo_root)
    assert done.returncode == 1 and "OUTDATED" in done.stdout and "search.select" in done.stdout


def test_every_committed_record_is_current_or_queued_and_marked(repo_root, config):
    """A record the configuration has moved past (a walk switched on later: gowalla's EASE) is queued in
    docs/compute.md and marked in its paper's table, never read there as today's pick."""
    root = repo_root / "results"
    assert len(list((root / "paper/baselines/strong").glob("*/*/*/*/split*/grid.json"))) > 0
    drift = record_drift(config, "paper", root)
    outdated = drift[~drift["same_record"].astype(bool)] if not drift.empty else drift
    assert set(outdated["setting"]) <= {"search.beyond"}, outdated.to_string()  # only walks may lag
    compute = (repo_root / "docs/compute.md").read_text()
    for record in sorted({r for r in outdated["record"] if not r.rsplit("/", 1)[-1].startswith("seed")}):
        rel = Path(record).relative_to(repo_root).as_posix() if Path(record).is_absolute() else record
        assert f"`{rel}/grid.json`" in compute, f"{rel} is outdated but not queued in docs/compute.md"
        dataset, split, model = Path(rel).parts[4], Path(rel).parts[6], Path(rel).parts[7]
        paper = next(e["paper"] for e in config["strong_baselines"]["tiers"]["paper"]["protocols"]
                     if (e["dataset"], e["split"]) == (dataset, split))
        table = (root / "paper" / paper / "tables/strong_baselines.csv").read_text()
        marked = [line for line in table.splitlines() if f",{split},{model}," in line and f"{dataset}," in line]
        assert marked and all("made before today's walk" in line for line in marked), rel
