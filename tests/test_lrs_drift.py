"""AMHT-LRS's acceptance records against today's configuration (recrepro.papers.lrs.drift): a record
is compared on what it reads (its own acceptance setting, the convergence override, the algorithm,
the ridge), so a change to another setting or to the sweeps' grids leaves it current."""

from __future__ import annotations

import copy
import json

import pytest

from recrepro.config import load_config
from recrepro.papers.lrs.drift import record_drift


@pytest.fixture(scope="module")
def config(repo_root):
    return load_config(repo_root / "config.yaml")


@pytest.fixture
def records(tmp_path, config):
    """One provenance per acceptance setting, written under today's paper-tier block."""
    block = config["lrs"]["tiers"]["paper"]
    for split, method in (("noiseless", "amht_lrs"), ("noisy", "altmin"), ("floor", "oracle"),
                          ("private", "private_amht_lrs")):
        run = tmp_path / "paper/lrs/runs/synthetic" / split / method / "seed0"
        run.mkdir(parents=True)
        (run / "provenance.json").write_text(json.dumps({"config": block}))
    return tmp_path


def _changed(config, root, edit):
    """The drift of the records under ``root`` once ``edit`` has changed a copy of the paper tier's block."""
    changed = copy.deepcopy(config)
    edit(changed["lrs"]["tiers"]["paper"])
    return record_drift(changed, "paper", root)


def test_records_of_todays_block_are_current(records, config):
    assert record_drift(config, "paper", records).empty


def test_a_change_reaches_only_the_records_that_read_it(records, config):
    def split_of(drift):
        return sorted(drift["record"].str.split("/").str[-3])

    noisy = _changed(config, records, lambda b: b["acceptance"]["noisy"].update(m=99))
    assert split_of(noisy) == ["noisy"] and noisy["setting"].tolist() == ["acceptance.setting"]
    assert noisy["now"].iloc[0]["m"] == 99 and not noisy["same_record"].any()
    # the run-to-convergence override is read by every setting but the private one
    override = _changed(config, records, lambda b: b["acceptance"]["algorithm"].update(iterations=7))
    assert split_of(override) == ["floor", "noiseless", "noisy"]
    # the tier's algorithm and ridge by all four
    ridge = _changed(config, records, lambda b: b.update(ridge=3.0))
    assert split_of(ridge) == ["floor", "noiseless", "noisy", "private"] and set(ridge["setting"]) == {"tier.ridge"}
    # the sweeps' grids by none
    assert _changed(config, records, lambda b: b.update(m_grid=[1, 2], t_grid=[3])).empty


def test_every_committed_record_is_current(repo_root, config):
    assert len(list((repo_root / "results/paper/lrs/runs").glob("synthetic/*/*/seed*/provenance.json"))) > 0
    drift = record_drift(config, "paper", repo_root / "results")
    assert drift.empty, drift.to_string()
