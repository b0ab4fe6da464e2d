"""exADMM's run record on a tiny strong-generalisation split: each evaluated part's metrics, and the
per-user rows of a part other than the record's (the strong-baselines table's paired test reads them)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from recrepro.io import read_json


def test_a_record_keeps_the_per_user_rows_of_its_other_part(tmp_path):
    from recrepro.datasets import load_raw
    from recrepro.datasets.synthetic import SyntheticSpec, generate_synthetic
    from recrepro.io import write_parquet
    from recrepro.papers.exadmm.run import run_point
    from recrepro.datasets.preprocessing import preprocess, read_interactions, resolve_recipe, write_preprocessed
    from recrepro.datasets.splits import make_split, write_split

    frame = generate_synthetic(SyntheticSpec(seed=5, users=60, items=40, min_user_interactions=8))
    recipe = resolve_recipe({"exadmm": {"default": {"positive": None, "filter": {
        "mode": "items_then_users", "item_min": 0, "user_min": 5}}}}, "exadmm", "synthetic", {})
    write_parquet(tmp_path / "raw" / "interactions.parquet", frame)
    write_preprocessed(preprocess(load_raw("synthetic", tmp_path / "raw"), recipe), tmp_path / "processed")
    data = read_interactions(tmp_path / "processed")
    made = make_split(data, "strong_generalization", {"heldout_users": 10}, 3)
    write_split(made, tmp_path / "split", {"dataset": "synthetic", "protocol": "exadmm", "seed": 3})
    out = tmp_path / "run"
    run_point(split_dir=tmp_path / "split", method="ials", family="ials",
              params={"dim": 4, "alpha0": 0.1, "l2": 0.01, "epochs": 2, "log_losses": False}, seed=0, out_dir=out,
              ks=[5], metrics=["ndcg", "recall_liang"], meta={"tier": "smoke", "paper": "exadmm"},
              record_part="validation", parts=("validation", "test"))
    record = read_json(out / "metrics.json")["overall"]
    assert record == read_json(out / "validation.json")["overall"]
    test_rows = pd.read_parquet(out / "test_per_user.parquet")
    assert not (out / "validation_per_user.parquet").exists()  # the record's own part is per_user.parquet
    # the other part's rows are its own users and average to its metrics
    assert set(test_rows["user"]).isdisjoint(pd.read_parquet(out / "per_user.parquet")["user"])
    assert np.isclose(test_rows["ndcg@5"].mean(), read_json(out / "test.json")["overall"]["ndcg@5"])
