"""A grid record's scored points handed to the job that tunes it again (recrepro.baselines.strong_reuse):
a walk switched on after the grid ran scores only the points the record lacks, and a record scored
otherwise than today's job would score it is refused, naming what differs."""

from __future__ import annotations

import json
import shutil

import pytest

EVALUATION = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test", "ks": [20]}
META = {"dataset": "synthetic", "protocol": "prism", "split": "random_ratio", "tier": "smoke"}


@pytest.fixture
def split(tmp_path):
    from conftest import build_synthetic_split
    from recrepro.datasets.synthetic import SyntheticSpec

    return build_synthetic_split(tmp_path / "s", SyntheticSpec(seed=3, users=80, items=50, min_user_interactions=5),
                                 "prism", 5, "random_ratio", 123)


def _job(split, tmp_path, **over):
    """Today's job: ItemKNN over k 5 and 20 (shrink 0), walking on to k 25 and 40."""
    return {"split_dir": split, "model": "itemknn", "grid": {"k": [5, 20]}, "fixed": {"shrink": 0.0},
            "evaluation": EVALUATION, "select": "ndcg@20", "seeds": [0], "batch_size": 2048,
            "beyond": {"k": [25, 40]}, "checkpoint": tmp_path / "ckpt" / "points.json", **over}


def _record(split, tmp_path, monkeypatch):
    """The grid record made before the walk: k 5 and 20, picked on its edge (k 20; the best k is 30)."""
    import recrepro.baselines.strong as strong
    from test_strong_baselines import _walk_spies

    fits = _walk_spies(monkeypatch, 30)
    strong.tune_and_test(split_dir=split, model="itemknn", grid={"k": [5, 20]}, fixed={"shrink": 0.0},
                         evaluation=EVALUATION, select="ndcg@20", seeds=[0], out_dir=tmp_path / "rec", meta=META)
    assert fits[:2] == [5, 20]
    fits.clear()
    return tmp_path / "rec" / "grid.json", fits


def test_a_walk_switched_on_later_scores_only_the_points_the_record_lacks(split, tmp_path, monkeypatch):
    import recrepro.baselines.strong as strong
    from recrepro.baselines.strong_reuse import reuse_points
    from recrepro.io import read_json

    grid_file, fits = _record(split, tmp_path, monkeypatch)
    job = _job(split, tmp_path)
    assert reuse_points(grid_file, **job) == [0, 1]
    rows = read_json(job["checkpoint"])["rows"]
    assert [r["settings"]["k"] for r in rows] == [5, 20]
    assert rows[0]["from_record"]["split"] == "the same content_sha256 in every part"
    assert rows[0]["from_record"]["record"] == str(grid_file)
    out = strong.tune_and_test(**{k: v for k, v in job.items() if k != "batch_size"}, out_dir=tmp_path / "again",
                               meta=META)
    # k 5 and 20 come from the record; the walk scores 25 (better than 20), then 40 (worse): it stops at 25
    assert fits[:2] == [25, 40] and out["resumed_points"] == [0, 1]
    assert [p["settings"]["k"] for p in out["points"]] == [5, 20, 25, 40] and out["settings"]["k"] == 25
    assert "from_record" in out["points"][0] and "from_record" not in out["points"][2]
    assert not job["checkpoint"].exists()  # the job removed its ledger once grid.json was written
    # reused again (a longer list one day), a row keeps where it was first scored
    assert reuse_points(tmp_path / "again" / "grid.json", **job) == [0, 1, 2, 3]
    assert read_json(job["checkpoint"])["rows"][0]["from_record"]["record"] == str(grid_file)


def test_a_record_scored_otherwise_is_refused_naming_what_differs(split, tmp_path, monkeypatch):
    from recrepro.baselines.strong_reuse import reuse_points

    grid_file, _ = _record(split, tmp_path, monkeypatch)
    with pytest.raises(ValueError, match="picked on 'ndcg@20', today's job on 'recall@20'"):
        reuse_points(grid_file, **_job(split, tmp_path, select="recall@20"))
    with pytest.raises(ValueError, match=r"its grid points \(2\) are not today's \(3\)"):
        reuse_points(grid_file, **_job(split, tmp_path, grid={"k": [5, 20, 50]}))
    with pytest.raises(ValueError, match="its batch size was 2048, today's 512"):
        reuse_points(grid_file, **_job(split, tmp_path, batch_size=512))
    with pytest.raises(ValueError, match="evaluation section differs"):
        reuse_points(grid_file, **_job(split, tmp_path, evaluation={**EVALUATION, "ks": [10]}))
    assert not (tmp_path / "ckpt" / "points.json").exists()  # nothing written on a refusal
    # a split with other values in a part (its content digest) is another split
    other = tmp_path / "other_split"
    shutil.copytree(split, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["files"]["test.parquet"]["content_sha256"] = "0" * 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"content differs from today's in test.parquet \(content_sha256\)"):
        reuse_points(grid_file, **_job(other, tmp_path))
    # other file digests and no content digest: only with the check the caller made, which is kept
    for entry in manifest["files"].values():
        entry.pop("content_sha256")
        entry["sha256"] = "1" * 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="say how with --split-checked"):
        reuse_points(grid_file, **_job(other, tmp_path))
    job = _job(other, tmp_path, split_checked="the same pairs in every part")
    assert reuse_points(grid_file, **job) == [0, 1]
    from recrepro.io import read_json

    assert read_json(job["checkpoint"])["rows"][1]["from_record"]["split"] == \
        "other file digests, the same pairs as checked: the same pairs in every part"
    # a ledger already holding points is a job under way or killed: not overwritten
    with pytest.raises(ValueError, match="already holds 2 scored points"):
        reuse_points(grid_file, **job)


def test_the_verb_says_which_record_it_lacks(tmp_path, repo_root, capsys):
    from recrepro.cli.main import main

    with pytest.raises(SystemExit, match="no grid record"):
        main(["strong", "reuse-points", "--tier", "paper", "--dataset", "gowalla", "--protocol", "prism",
              "--split", "random_ratio", "--model", "ease", "--split-seed", "123",
              "--config", str(repo_root / "config.yaml"), "--results", str(tmp_path)])
    with pytest.raises(SystemExit, match="no strong_baselines protocol gowalla/prism/given"):
        main(["strong", "reuse-points", "--tier", "paper", "--dataset", "gowalla", "--protocol", "prism",
              "--split", "given", "--model", "ease", "--split-seed", "123",
              "--config", str(repo_root / "config.yaml"), "--results", str(tmp_path)])


def test_a_protocol_can_walk_some_models_only():
    from recrepro.baselines.strong_config import walks_past_edges

    assert walks_past_edges({}, "ials") and not walks_past_edges({"beyond_edges": False}, "ease")
    assert walks_past_edges({"beyond_edges": ["ease"]}, "ease")
    assert not walks_past_edges({"beyond_edges": ["ease"]}, "ials")


def test_a_record_made_before_todays_walk_is_marked_in_the_table_and_queued(split, tmp_path, monkeypatch):
    from recrepro.baselines.strong import strong_table
    from recrepro.reporting.compute_page import outdated_lines

    grid_file, _ = _record(split, tmp_path, monkeypatch)
    proto = {"metrics": ["ndcg@20"], "paper_method": None, "split_seeds": [123]}

    def budget(beyond):
        frame = strong_table([grid_file], {"synthetic/random_ratio": {**proto, **beyond}}, results_root=tmp_path,
                             out_md=tmp_path / "t.md", out_csv=tmp_path / "t.csv", title="t", references=[])
        return frame["budget"].iloc[0]

    marked = budget({"beyond": {"itemknn": {"k": [25, 40]}}})
    assert marked.endswith("; made before today's walk past its edge on 1 of 1 splits (today's walk goes on to "
                           "k=25, shrink=0, which it never scored; docs/compute.md queues it)"), marked
    # no walk today, or a list the record's pick never reaches: the record is today's, nothing added
    assert "made before" not in budget({"beyond": {"itemknn": {}}})
    assert "made before" not in budget({"beyond": {"itemknn": {"k": [1, 2]}}})
    assert "made before" not in budget({})  # a caller that gives no walks
    lines = outdated_lines([{"record": "results/paper/baselines/strong/gowalla/prism/random_ratio/ease/split123/grid.json",
                             "why": "search.beyond: today's walk goes on to lam=100", "point_cpu_minutes": 18.4}])
    row = lines[-2]
    assert row.startswith("| `results/paper/baselines/strong/gowalla/prism/random_ratio/ease/split123/grid.json` | "
                          "search.beyond: today's walk goes on to lam=100 | 18 | ")
    assert ("`recrepro strong reuse-points --tier paper --dataset gowalla --protocol prism --split random_ratio "
            "--model ease --split-seed 123`") in row
    assert outdated_lines([]) == []
