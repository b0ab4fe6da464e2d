"""FedRAP driver: run records, validation model selection, tables; real-data statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import build_synthetic_split

from recrepro.io import read_json
from recrepro.papers.fedrap import figures, rules
from recrepro.papers.fedrap import run as driver
from recrepro.papers.fedrap import tables

EVAL = {"mode": "sampled", "fit": ["train"], "target": "test", "ks": [10], "ties": "pessimistic"}


@pytest.fixture(scope="module")
def tiny_split(tmp_path_factory):
    from recrepro.datasets.synthetic import SyntheticSpec

    spec = SyntheticSpec(seed=3, users=120, items=300, density=0.08, latent_rank=4)
    return build_synthetic_split(tmp_path_factory.mktemp("fedrap"), spec, "fedrap", 10, "leave_one_out", 0)


def test_the_embeddings_projection_is_written_only_where_asked(tiny_split, tmp_path):
    settings = {"method": "fedrap", "mode": "paper", "dim": 4, "rounds": 2, "local_epochs": 1}
    driver.run_variant(split_dir=tiny_split, variant="fedrap", settings=settings, seed=0, out_dir=tmp_path / "plain",
                       meta={"tier": "smoke", "paper": "fedrap"}, evaluation=EVAL)
    assert not (tmp_path / "plain" / "projection.parquet").exists()  # a record has none by default
    driver.run_variant(split_dir=tiny_split, variant="fedrap", settings=settings, seed=0, out_dir=tmp_path / "drawn",
                       meta={"tier": "smoke", "paper": "fedrap"}, evaluation=EVAL,
                       projection=tmp_path / "drawn" / "projection.parquet")
    frame = pd.read_parquet(tmp_path / "drawn" / "projection.parquet")
    # the global table C and three users' private tables D(i), two principal components each
    assert set(frame["table"]) == {"C", "D"} and list(frame.columns) == ["table", "user", "pc1", "pc2"]
    assert sorted(frame.loc[frame["table"] == "D", "user"].unique()) == [0, 1, 2]
    # the record is the same with or without the projection beside it
    assert (tmp_path / "plain" / "metrics.json").read_bytes() == (tmp_path / "drawn" / "metrics.json").read_bytes()


def test_run_record_selects_on_validation(tiny_split, tmp_path):
    result = driver.run_variant(
        split_dir=tiny_split, variant="fedrap_code",
        settings={"method": "fedrap", "mode": "code", "dim": 4, "rounds": 3, "local_epochs": 2},
        seed=0, out_dir=tmp_path / "run", meta={"tier": "smoke", "paper": "fedrap"}, evaluation=EVAL)
    hist = pd.read_parquet(tmp_path / "run" / "history.parquet")
    assert list(hist["round"]) == [1, 2, 3]
    assert hist["lambda"].tolist() == [0.1] * 3  # code mode: constant λ from round 0
    metrics = read_json(tmp_path / "run" / "metrics.json")
    sel = metrics["selected_round"]
    best = hist["val_hr@10"].max()
    # later round wins a tie; the reported test metrics are those of the selected round
    assert sel == hist.loc[hist["val_hr@10"] == best, "round"].max()
    row = hist.set_index("round").loc[sel]
    assert metrics["overall"]["hr@10"] == pytest.approx(row["test_hr@10"])
    assert metrics["code_best_test_hr@10"] == pytest.approx(hist["test_hr@10"].max())
    assert result["selected_by"] == "validation hr@10"
    per_user = pd.read_parquet(tmp_path / "run" / "per_user.parquet")
    assert per_user["hr@10"].mean() == pytest.approx(metrics["overall"]["hr@10"])
    # table and figure from the run
    agg = tables.results_table([tmp_path / "run"])
    assert agg.loc[0, "hr_mean"] == pytest.approx(metrics["overall"]["hr@10"])
    # the sparsity of C, read off the history at the selected round and the last
    assert agg.loc[0, "c_sparsity_selected"] == pytest.approx(row["c_sparsity"])
    assert agg.loc[0, "c_sparsity_last"] == pytest.approx(hist["c_sparsity"].iloc[-1])
    md = tables.table_markdown(agg, tables.dataset_stats([tiny_split]), "smoke")
    assert "fedrap_code" in md and "test-selected" in md


def test_dataset_stats_counts_cold_held_out_items_by_hand(tmp_path):
    # train items {0, 1, 2}; validation 0 / 5: one of two cold; test 3 / 4 / 1: two of three;
    # negatives 1, 2, 6, 7: two of four. A split without negatives gets NaN, and the table a blank.
    parts = {"train": ([0, 0, 1, 2], [0, 1, 2, 1]), "validation": ([0, 1], [0, 5]),
             "test": ([0, 1, 2], [3, 4, 1]), "negatives": ([0, 0, 1, 1], [1, 2, 6, 7])}
    for name, with_negatives in (("full", True), ("bare", False)):
        d = tmp_path / name
        d.mkdir()
        files = {}
        for part, (users, items) in parts.items():
            if part == "negatives" and not with_negatives:
                continue
            pd.DataFrame({"user": users, "item": items}).to_parquet(d / f"{part}.parquet")
            files[f"{part}.parquet"] = {"rows": len(users)}
        (d / "manifest.json").write_text(
            f'{{"dataset": "{name}", "n_users": 3, "n_items": 8, "files": {pd.Series(files).to_json()}}}')
    stats = tables.dataset_stats([tmp_path / "full", tmp_path / "bare"])
    assert stats.loc[0, ["validation_cold", "test_cold", "negatives_cold"]].tolist() == pytest.approx([1 / 2, 2 / 3, 1 / 2])
    assert stats.loc[1, "test_cold"] == pytest.approx(2 / 3) and np.isnan(stats.loc[1, "negatives_cold"])
    md = tables.table_markdown(pd.DataFrame(), stats, "smoke")
    assert "| full | 9 | 3 | 6 | 50.00% | 50.0 % | 66.7 % | 50.0 % |" in md
    assert "| bare | 9 | 3 | 6 | 50.00% | 50.0 % | 66.7 % |  |" in md


def test_paper_mode_curriculum_in_history(tiny_split, tmp_path):
    driver.run_variant(split_dir=tiny_split, variant="fedrap",
                       settings={"method": "fedrap", "mode": "paper", "dim": 4, "rounds": 2, "local_epochs": 1,
                                 "lam": 0.5, "mu": 0.2},
                       seed=1, out_dir=tmp_path / "p", meta={"tier": "smoke", "paper": "fedrap"}, evaluation=EVAL)
    hist = pd.read_parquet(tmp_path / "p" / "history.parquet")
    np.testing.assert_allclose(hist["lambda"], [0.0, 0.5 * np.tanh(0.1)])
    np.testing.assert_allclose(hist["mu"], [0.0, 0.2 * np.tanh(0.1)])


@pytest.mark.parametrize("pool", ["train", "all_interactions"])
def test_negative_pool_decides_what_training_negatives_avoid(tiny_split, tmp_path, monkeypatch, pool):
    import recrepro.papers.fedrap.variants as models
    from recrepro.evaluation.on_split import SplitData

    seen = {}
    real = models.make_variant

    def spy(settings, **kw):
        assert "negative_pool" not in settings  # a driver switch, not a model setting
        model = real(settings, **kw)
        fit = model.fit

        def fit_spy(train, touched=None, eval_fn=None):
            seen["train"], seen["touched"] = train.copy(), touched.copy()
            return fit(train, touched=touched, eval_fn=eval_fn)

        model.fit = fit_spy
        return model

    monkeypatch.setattr(models, "make_variant", spy)
    driver.run_variant(split_dir=tiny_split, variant="fedmf",
                       settings={"method": "fedmf", "mode": "code", "dim": 4, "rounds": 1, "local_epochs": 1,
                                 "negative_pool": pool},
                       seed=0, out_dir=tmp_path / pool, meta={"tier": "smoke", "paper": "fedrap"}, evaluation=EVAL)
    split = SplitData(tiny_split)
    held = split.csr(["validation", "test"])
    train, touched = seen["train"], seen["touched"]
    assert held.nnz > 0
    if pool == "train":
        assert (touched != train).nnz == 0  # held-out items may be drawn as negatives
    else:
        # the released code's pool: every held-out (user, item) pair is excluded as well
        assert touched.nnz == train.nnz + held.nnz
        assert touched.multiply(held).nnz == held.nnz
    assert read_json(tmp_path / pool / "metrics.json")["negative_pool"] == pool


@pytest.mark.parametrize("variant, blow_up", [("fedmf-g03", 2), ("fedmf-g04", 0), ("fedmf", 2)])
def test_a_grid_point_that_diverges_is_recorded_as_diverged_and_any_other_run_stops(tiny_split, tmp_path,
                                                                                    monkeypatch, variant, blow_up):
    import recrepro.papers.fedrap.variants as models
    from recrepro.records import NonFiniteError

    real = models.make_variant

    def blows_up_in_round_3(settings, **kw):
        model = real(settings, **kw)
        train_round = model.train_round

        def step():
            if model.round == blow_up:
                raise NonFiniteError(f"inf in client losses at round {blow_up + 1} local epoch 1 (0 NaN and 1 "
                                     "infinite of 8 values)")
            return train_round()

        model.train_round = step
        return model

    monkeypatch.setattr(models, "make_variant", blows_up_in_round_3)
    kw = dict(split_dir=tiny_split, variant=variant,
              settings={"method": "fedmf", "mode": "code", "dim": 4, "rounds": 5, "local_epochs": 1},
              seed=0, out_dir=tmp_path / variant, meta={"tier": "smoke", "paper": "fedrap"}, evaluation=EVAL,
              checkpoint=tmp_path / f"{variant}.ckpt")
    if variant == "fedmf":
        with pytest.raises(NonFiniteError, match="round 3"):
            driver.run_variant(**kw)
        assert not (tmp_path / variant / "metrics.json").exists()
        return
    driver.run_variant(**kw)
    metrics = read_json(tmp_path / variant / "metrics.json")
    if blow_up == 0:
        # diverged before any evaluated round: a record with no metric, never a made-up one
        assert metrics["diverged"]["round"] == 1 and metrics["overall"] == {} and metrics["selected_round"] is None
        assert len(pd.read_parquet(tmp_path / variant / "history.parquet")) == 0
        assert len(pd.read_parquet(tmp_path / variant / "per_user.parquet")) == 0
        from recrepro.papers.fedrap import tuning

        frame = tuning.grid_frame([tmp_path / variant])
        assert frame["diverged_round"].tolist() == [1] and frame["val_hr@10"].isna().all()
        block = {"grids": {"fedmf": {"product": {"lr_network": [0.5, 0.1, 0.01, 0.001, 1e-4]}}}}
        md = tuning.tuning_markdown(tuning.tuning_table(block, [tmp_path / variant]), block, "smoke")
        assert "| g04 | lr_network=0.0001 | — | — | — | — | — | diverged in round 1 (never picked) |" in md
        return
    assert metrics["diverged"]["round"] == 3 and "inf in client losses" in metrics["diverged"]["error"]
    assert metrics["rounds_trained"] == 2 and metrics["selected_round"] in (1, 2)
    assert list(pd.read_parquet(tmp_path / variant / "history.parquet")["round"]) == [1, 2]
    assert not (tmp_path / f"{variant}.ckpt").exists()  # a rerun does not resume into the same blow-up


def test_negative_pool_default_and_variant_override(repo_root):
    import yaml

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    assert config["fedrap"]["negative_pool"] == "train"
    assert rules.rule_settings(config, "paper", "ml-100k", "fedrap")["negative_pool"] == "train"
    assert rules.rule_settings(config, "paper", "ml-100k", "fedrap_code_pool")["negative_pool"] == "all_interactions"
    with pytest.raises(ValueError, match="negative_pool"):
        driver.run_variant(split_dir="unused", variant="x", settings={"method": "fedmf", "negative_pool": "test"},
                           seed=0, out_dir="unused", meta={}, evaluation=EVAL)


def test_every_configured_variant_builds_a_model_in_every_tier(repo_root):
    import yaml

    from recrepro.papers.fedrap.variants import make_variant

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    built = {}
    for tier, conf in config["fedrap"]["tiers"].items():
        for dataset in ["synthetic", *conf.get("datasets", {})]:
            for variant in config["fedrap"]["variants"]:
                settings = rules.rule_settings(config, tier, dataset, variant)
                settings.pop("negative_pool")  # the driver's, not the model's
                built[tier, dataset, variant] = make_variant(settings, seed=0)
    ncf = built["paper", "ml-100k", "fedncf"].config
    # FedNCF's own Adam step overrides the dataset's SGD flags; fedncf_sgd keeps them
    assert (ncf.client_optimizer, ncf.lr_network, ncf.l2) == ("adam", 1e-3, 0.0)
    sgd = built["paper", "ml-100k", "fedncf_sgd"].config
    assert (sgd.client_optimizer, sgd.lr_network, sgd.lr_args) == ("sgd", 1e-4, 1000.0)


@pytest.mark.realdata
@pytest.mark.parametrize("dataset,counts,sparsity,cold", [
    # poster Table 1: 93.70%; cold held-out items: 1 of 943 users' validation item, 3 of their test items
    ("ml-100k", [100_000, 943, 1_682], 0.9370, [1 / 943, 3 / 943]),
    # 99.72%; most held-out artists have no other listener (docs/deviations.md#fedrap-lastfm-held-out)
    ("hetrec2011-lastfm-2k", [92_780, 1_874, 17_612], 0.9972, [1061 / 1874, 1187 / 1874]),
    ("amazon-video", [23_181, 1_372, 7_957], 0.9979, [297 / 1372, 379 / 1372]),  # 99.79%
])
def test_dataset_statistics_match_the_poster(pipeline, dataset, counts, sparsity, cold):
    _, split = pipeline
    out = split(dataset, "fedrap", "leave_one_out", 0)
    stats = tables.dataset_stats([Path(out)])
    assert stats.loc[0, ["ratings", "users", "items"]].tolist() == counts
    assert stats.loc[0, "sparsity"] == pytest.approx(sparsity, abs=5e-5)
    assert stats.loc[0, ["validation_cold", "test_cold"]].tolist() == pytest.approx(cold, abs=1e-12)


def test_a_dp_runs_clip_comes_from_its_record_else_its_provenance(tmp_path):
    """The DP panel draws the noise std σ·clip, so every DP run must name its clip: records that predate
    the field take it from the settings in their provenance; a DP run naming none is an error."""
    import json

    from recrepro.papers.fedrap.tables import _dp_clip

    assert _dp_clip(tmp_path, {"dp_noise": None}) is None
    assert _dp_clip(tmp_path, {"dp_noise": 1.0, "dp_clip": 0.1}) == 0.1
    (tmp_path / "provenance.json").write_text(json.dumps({"config": {"settings": {"dp_clip": 0.5, "dp_noise": 1.0}}}))
    assert _dp_clip(tmp_path, {"dp_noise": 1.0}) == 0.5
    (tmp_path / "provenance.json").write_text(json.dumps({"config": {"settings": {"dp_noise": 1.0}}}))
    with pytest.raises(ValueError, match="no dp_clip"):
        _dp_clip(tmp_path, {"dp_noise": 1.0})


def test_a_clip_without_noise_records_no_epsilon_and_draws_apart_from_no_dp(tiny_split, tmp_path):
    # fedrap_dp_clip: the clip alone guarantees nothing, so no ε (an ε of inf would be refused by the
    # record writer at the end of the run); the DP panel labels it apart from the run without DP
    base = {"method": "fedrap", "mode": "paper", "dim": 4, "rounds": 2, "local_epochs": 1}
    for name, extra in (("fedrap", {}), ("fedrap_dp_clip", {"dp_clip": 1.0, "dp_noise": 0.0}),
                        ("fedrap_dp", {"dp_clip": 1.0, "dp_noise": 1.0}), ("fedrap_dp_noise", {"dp_noise": 0.1})):
        driver.run_variant(split_dir=tiny_split, variant=name, settings={**base, **extra}, seed=0,
                           out_dir=tmp_path / name, meta={"tier": "smoke", "paper": "fedrap"}, evaluation=EVAL)
    clip_only = read_json(tmp_path / "fedrap_dp_clip" / "metrics.json")
    assert clip_only["dp_noise"] == 0.0 and clip_only["dp_epsilon"] is None
    assert read_json(tmp_path / "fedrap_dp" / "metrics.json")["dp_epsilon"] > 0
    from recrepro.papers.fedrap.tables import _dp_clip

    # noise without a clip (the pre-release code's): recorded as DP with no clip and no ε, and it trains
    # otherwise than the run without DP (a noise setting with no clip was once dropped without a word)
    noise_only = read_json(tmp_path / "fedrap_dp_noise" / "metrics.json")
    assert noise_only["dp_noise"] == 0.1 and noise_only["dp_clip"] is None and noise_only["dp_epsilon"] is None
    assert _dp_clip(tmp_path / "fedrap_dp_noise", noise_only) is None
    no_dp = read_json(tmp_path / "fedrap" / "metrics.json")
    assert no_dp["dp_noise"] is None
    losses = {n: pd.read_parquet(tmp_path / n / "history.parquet")["train_loss"].tolist()
              for n in ("fedrap", "fedrap_dp_noise")}
    assert losses["fedrap"][0] == losses["fedrap_dp_noise"][0]  # round 1 trains from the same C
    assert losses["fedrap"][1] != losses["fedrap_dp_noise"][1]  # round 2 from the noisy average
    import matplotlib.pyplot as plt

    drawn, levels, diamonds = {}, [], []
    real_annotate, real_axhline, real_plot = plt.Axes.annotate, plt.Axes.axhline, plt.Axes.plot

    def spy(self, text, xy, **kw):
        drawn[text] = xy
        return real_annotate(self, text, xy, **kw)

    def spy_level(self, y=0, *args, **kw):
        levels.append(y)
        return real_axhline(self, y, *args, **kw)

    def spy_plot(self, *args, **kw):
        if kw.get("marker") == "D":
            diamonds.extend(list(args[0]))
        return real_plot(self, *args, **kw)

    plt.Axes.annotate, plt.Axes.axhline, plt.Axes.plot = spy, spy_level, spy_plot
    try:
        figures.ablation_figure([tmp_path / n for n in ("fedrap", "fedrap_dp_clip", "fedrap_dp", "fedrap_dp_noise")],
                               str(tmp_path / "a.pdf"), str(tmp_path / "a.png"), "smoke")
    finally:
        plt.Axes.annotate, plt.Axes.axhline, plt.Axes.plot = real_annotate, real_axhline, real_plot
    assert "clip 1, no noise" in drawn and any(t.startswith("ε=") for t in drawn)
    # no DP: a dotted level at FedRAP's own HR@10, not a point the noise curve starts from
    assert levels == [pytest.approx(read_json(tmp_path / "fedrap" / "metrics.json")["overall"]["hr@10"])]
    assert diamonds == [pytest.approx(0.1)]  # noise without a clip: at its own std, not σ·clip


def test_dp_settings_are_labelled_once_whatever_the_datasets():
    from recrepro.papers.fedrap.figures import _label_dp_settings

    class Axes:
        def __init__(self):
            self.labels = []

        def annotate(self, text, xy, **kw):
            self.labels.append((text, xy, kw["xytext"]))

    inf = float("inf")
    ml = pd.DataFrame({"std": [0.0, 0.1, 1.0], "clip": [1.0, 0.1, 1.0], "hr": [0.113, 0.125, 0.121],
                       "eps": [inf, 98.0, 98.0]})
    video = pd.DataFrame({"std": [0.0, 0.1, 0.3], "clip": [1.0, 0.1, 1.0], "hr": [0.100, 0.106, 0.101],
                          "eps": [inf, 97.5, 716.0]})
    ax = Axes()
    _label_dp_settings(ax, [ml, video])
    # one label per setting: the clip without noise under the lowest of its points, the others above the
    # highest; ε of the datasets joined where they differ
    assert ax.labels == [("clip 1, no noise", (0.0, 0.100), (3, -9)),
                         ("ε=98 / 97.5, clip 0.1", (0.1, 0.125), (3, 3)),
                         ("ε=716", (0.3, 0.101), (3, 3)),
                         ("ε=98", (1.0, 0.121), (3, 3))]
    empty = Axes()
    _label_dp_settings(empty, [])
    assert empty.labels == []
