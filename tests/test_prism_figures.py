"""PRISM Figs. 3-11: specs from the config and figure tables from hand-made run records."""

from __future__ import annotations

import json

import pytest

from recrepro.papers.prism import rules as wf
from recrepro.papers.prism.figures import draw_figure, figure_theory


def _run(root, method, seed, *, val, test, pop, unpop, epochs=5, curves=None):
    d = root / "runs" / method / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({
        "dataset": "toy", "split": "random_ratio", "method": method, "seed": seed, "tier": "smoke",
        "overall": {"ndcg@20": test},
        "strata": {"popular": {"ndcg@20": pop}, "neutral": {"ndcg@20": test - pop - unpop},
                   "unpopular": {"ndcg@20": unpop}}}))
    history = {"best_val_ndcg": val, "best_epoch": epochs, "seconds_per_epoch": 1.0}
    if curves:
        history.update(curves)
    (d / "history.json").write_text(json.dumps(history))
    return d


def test_fig9_picks_wd_on_validation_and_averages_per_seed_ratios(tmp_path):
    dirs = []
    for seed in (1, 2):
        dirs.append(_run(tmp_path, "mf_bpr_wd0", seed, val=0.1, test=0.30, pop=0.2, unpop=0.02))
        dirs.append(_run(tmp_path, "mf_bpr_wd1em6", seed, val=0.2, test=0.20, pop=0.1, unpop=0.02 * seed))
        dirs.append(_run(tmp_path, "mf_ipl_wd0", seed, val=0.0, test=0.10, pop=0.05, unpop=0.025))
    spec = {"kind": "debias", "groups": {"BPR": ["mf_bpr_wd0", "mf_bpr_wd1em6"], "IPL": ["mf_ipl_wd0"],
                                          "MACR": ["mf_macr_wd0"]}}
    frame = draw_figure(spec, dirs, tmp_path / "f.pdf", tmp_path / "f.png", tier="smoke", dataset="toy")
    rows = frame.set_index("label")
    assert rows.loc["BPR", "method"] == "mf_bpr_wd1em6"           # best validation, not best test
    assert rows.loc["BPR", "ratio_mean"] == pytest.approx(0.3)     # mean of 0.2 and 0.4
    assert rows.loc["BPR", "ndcg_mean"] == pytest.approx(0.2)
    assert rows.loc["IPL", "ratio_mean"] == pytest.approx(0.5) and rows.loc["IPL", "n_seeds"] == 2
    assert "MACR" not in rows.index                                # no runs: no point
    assert (tmp_path / "f.pdf").stat().st_size > 0 and (tmp_path / "f.png").exists()


def test_fig4_and_fig5_from_alpha_runs(tmp_path):
    dirs = [_run(tmp_path, "mf_directau_prism", s, val=0.3, test=0.3, pop=0.2, unpop=0.01, epochs=4 + s)  # 5 and 6 epochs
            for s in (1, 2)]
    dirs += [_run(tmp_path, "mf_directau_prism_a000", s, val=0.2, test=0.2, pop=0.1, unpop=0.05, epochs=10)
             for s in (1, 2)]
    dirs += [_run(tmp_path, "mf_directau_wd1em6", s, val=0.25, test=0.28, pop=0.2, unpop=0.01, epochs=20)
             for s in (1, 2)]
    spec = {"kind": "epochs", "alphas": {"α=0": "mf_directau_prism_a000", "α=1": "mf_directau_prism"},
            "tuned_candidates": ["mf_directau_wd0", "mf_directau_wd1em6"]}
    frame = draw_figure(spec, dirs, tmp_path / "4.pdf", tmp_path / "4.png", tier="smoke", dataset="toy")
    rows = frame.set_index("label")
    assert rows.loc["α=1", "epochs_mean"] == pytest.approx(5.5) and rows.loc["α=1", "epochs_sd"] > 0
    assert rows.loc["tuned wd (λ 1e-06)", "epochs_mean"] == 20
    spec = {"kind": "alpha", "alphas": {"0": "mf_directau_prism_a000", "1": "mf_directau_prism"}}
    frame = draw_figure(spec, dirs, tmp_path / "5.pdf", tmp_path / "5.png", tier="smoke", dataset="toy")
    unpop = frame[frame["series"] == "unpopular"].set_index("alpha")["mean"]
    assert unpop[0.0] == pytest.approx(0.05) and unpop[1.0] == pytest.approx(0.01)


def test_fig6_reads_both_curves(tmp_path):
    d = _run(tmp_path, "mf_directau_wd0", 1, val=0.3, test=0.3, pop=0.2, unpop=0.01,
             curves={"val_ndcg": [0.1, 0.2, 0.3], "val_ndcg_cosine": [0.25, 0.26, 0.26]})
    spec = {"kind": "curves", "curves": [["λ = 0", "mf_directau_wd0", 1]]}
    frame = draw_figure(spec, [d], tmp_path / "6.pdf", tmp_path / "6.png", tier="smoke", dataset="toy")
    assert len(frame) == 6
    assert frame[frame["scores"] == "val_ndcg_cosine"]["ndcg"].tolist() == [0.25, 0.26, 0.26]


def test_fig7_theory_grid(tmp_path):
    grid = figure_theory(tmp_path / "7.pdf", tmp_path / "7.png", tier="smoke", lr=1e-3, weight_decay=1e-6,
                         norm=1.0, cosine=0.9, max_degree=1e3, batch_fractions=[1e-4, 1.0])
    # degree 1 at |B|/|E| = 1e-4: P = 1e-4, ranking 1e-4 × 1e-6 × 0.19 < decay 2e-9 -> shrinks;
    # at |B| = |E| every item is in the batch: 1.9e-7 − 2e-9 > 0 -> grows
    low = grid[(grid["degree"] == 1.0)].sort_values("batch_fraction")
    assert low["change"].iloc[0] < 0 < low["change"].iloc[-1]
    assert low["change"].iloc[-1] == pytest.approx(1e-6 * 0.19 + 1e-9 * (1e-9 - 2))
    assert (tmp_path / "7.pdf").exists()


def test_extra_figure_specs_share_runs(repo_root):
    import yaml

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    spec, methods = wf.figure_spec(config, "smoke", "synthetic", "fig3_batched_wd")
    assert methods == ["mf_directau_wd0", "mf_directau_bwd1em6", "mf_directau_bwd1em4"]
    _, methods = wf.figure_spec(config, "smoke", "synthetic", "fig4_epochs")
    assert "mf_directau_prism" in methods and "mf_directau_prism_a025" in methods  # α = 1 is Table 1's run
    spec, _ = wf.figure_spec(config, "smoke", "synthetic", "fig9_debias")
    assert spec["groups"]["IPL"] == ["mf_ipl_wd0"] and spec["groups"]["PRISM + DirectAU"] == ["mf_directau_prism"]
    # smoke: Figs. 3-11 read the first seed only
    assert all(r.endswith("/seed123/metrics.json") for r in wf.figure_runs(config, "smoke", "synthetic", "fig11_nlmf"))
    distinct = {r for fig in wf.EXTRA_FIGURES for r in wf.figure_runs(config, "smoke", "synthetic", fig)}
    new = distinct - set(wf.all_runs(config, "smoke"))
    # batched 2 + α 4 + LightGCN 3 + debias 3 + SSM/MAWU 6 + NL-MF 9 = 27 new runs (one seed)
    assert len(new) == 27
    # the compute page's job list holds them too (every run the DAG makes), each once
    every = wf.every_run(config, "smoke")
    assert set(every) == set(wf.all_runs(config, "smoke")) | distinct and len(every) == len(set(every))
    targets = wf.targets(config, "paper")
    assert "results/paper/prism/figures/fig9_debias_gowalla.pdf" in targets
    assert "results/paper/prism/figures/fig7_theorem31.pdf" in targets
    args = wf.theory_args(config, "paper")
    assert args[args.index("--weight-decay") + 1] == "1e-06"


def test_only_fig6_runs_pay_for_cosine_validation():
    from recrepro.papers.prism.run import _records_cosine
    from recrepro.papers.prism.methods import parse_method

    assert _records_cosine(parse_method("mf_directau_wd1em6"), "fig6")
    assert _records_cosine(parse_method("mf_directau_wd0"), "fig6")
    assert not _records_cosine(parse_method("mf_directau_bwd1em6"), "fig6")
    assert not _records_cosine(parse_method("mf_directau_prism"), "fig6")
    assert not _records_cosine(parse_method("mf_bpr_wd1em6"), "fig6")
    assert not _records_cosine(parse_method("lightgcn_directau_wd0"), "fig6")
    assert _records_cosine(parse_method("mf_bpr_wd0"), True)


def test_published_values_are_overlaid_where_the_paper_gives_them(tmp_path, monkeypatch):
    """Issue 26: Table 1's cells (and the epochs §5.2.1 states) as hollow markers, only on their dataset."""
    import recrepro.reporting.plotting as plotting

    saved = []
    real_save = plotting.save_figure
    monkeypatch.setattr(plotting, "save_figure", lambda fig, *a, **k: (saved.append(fig), real_save(fig, *a, **k)))

    def published(fig):
        return [(float(line.get_xdata()[0]), float(line.get_ydata()[0]))
                for ax in fig.axes for line in ax.lines if line.get_gid() == "recrepro-published"]

    dirs = [_run(tmp_path, "mf_directau_prism", s, val=0.3, test=0.12, pop=0.05, unpop=0.01) for s in (1, 2)]
    dirs += [_run(tmp_path, "mf_directau_prism_a000", s, val=0.2, test=0.2, pop=0.1, unpop=0.05) for s in (1, 2)]
    dirs += [_run(tmp_path, f"mf_directau_wd{wd}", s, val=v, test=0.11, pop=0.05, unpop=0.01, epochs=200)
             for s in (1, 2) for wd, v in (("0", 0.1), ("1em6", 0.3))]
    alpha = {"kind": "alpha", "alphas": {"0": "mf_directau_prism_a000", "1": "mf_directau_prism"}}
    epochs = {"kind": "epochs", "alphas": {"α=1": "mf_directau_prism"},
              "tuned_candidates": ["mf_directau_wd0", "mf_directau_wd1em6"]}
    wd = {"kind": "wd", "backbone": "mf", "losses": ["directau"], "weight_decays": [0.0, 1e-6]}
    for spec in (alpha, epochs, wd):
        draw_figure(spec, dirs, tmp_path / "g.pdf", tmp_path / "g.png", tier="paper", dataset="gowalla")
    fig5, fig4, fig1 = saved
    assert published(fig5) == [(1.0, pytest.approx(0.1210))]       # Table 1: MF + DirectAU, PRISM, Gowalla
    assert published(fig4) == [(249.0, pytest.approx(0.1176))]     # §5.2.1: 249 epochs; Table 1: tuned wd
    assert published(fig1) == [(1.0, pytest.approx(0.1176))]       # at our tuned λ (1e-6: x position 1)
    legend = [t.get_text() for t in fig1.legends[0].get_texts()]
    assert "ours (filled)" in legend and any(t.startswith("published") for t in legend)
    # a dataset the paper does not report: nothing overlaid, no published key in the legend
    saved.clear()
    draw_figure(alpha, dirs, tmp_path / "t.pdf", tmp_path / "t.png", tier="smoke", dataset="synthetic")
    assert published(saved[0]) == []
    assert not any(t.get_text().startswith("published") for t in saved[0].legends[0].get_texts())


def test_seeds_note_says_which_seeds_a_caption_averages():
    import pandas as pd

    from recrepro.papers.prism.figures import seeds_note

    one = pd.DataFrame({"method": ["a", "b"], "seed": [123, 123]})
    assert seeds_note(one) == "seed 123"
    full = pd.DataFrame({"method": ["a"] * 3 + ["b"] * 3, "seed": [123, 246, 492] * 2})
    assert seeds_note(full) == "seeds 123, 246, 492"
    # b misses two seeds: the caption must not read as if every point averaged three
    partial = pd.DataFrame({"method": ["a", "a", "a", "b"], "seed": [123, 246, 492, 123]})
    assert seeds_note(partial) == "1–3 seeds per point (of 123, 246, 492)"
    assert seeds_note(pd.DataFrame()) == "no runs"


def test_unrun_note_names_the_sweep_points_without_a_record():
    import pandas as pd

    from recrepro.papers.prism.figures import unrun_note

    runs = pd.DataFrame({"method": ["a000", "a100", "s0"], "seed": [123, 123, 123]})
    alphas = {"0": "a000", "0.25": "a025", "0.5": "a050", "1": "a100"}
    assert unrun_note(runs, {"α ": alphas}) == "no run record yet: α 0.25, 0.5"
    grids = {"SSM λ ": {"0": "s0", "1e-8": "s8"}, "MAWU λ ": {"0": "m0", "1e-8": "m8"}}
    assert unrun_note(runs, grids) == "no run record yet: SSM λ 1e-8 and MAWU λ 0, 1e-8"
    # every point ran (on any seed): no clause, so a complete figure's caption is unchanged
    assert unrun_note(runs, {"": {"α=0": "a000", "α=1": "a100"}}) == ""
    assert unrun_note(pd.DataFrame(), {"": {"α=0": "a000"}}) == "no run record yet: α=0"


def test_a_sparse_alpha_sweep_says_so_in_its_caption(tmp_path, monkeypatch):
    from recrepro.reporting import plotting as plotting
    from recrepro.papers.prism.figures import figure_alpha

    dirs = [_run(tmp_path, method, 123, val=0.2, test=0.2, pop=0.1, unpop=0.05)
            for method in ("mf_directau_prism_a000", "mf_directau_prism")]
    captions = []
    monkeypatch.setattr(plotting, "save_figure", lambda fig, *a, caption="", **k: captions.append(caption))
    alphas = {"0": "mf_directau_prism_a000", "0.5": "mf_directau_prism_a050", "1": "mf_directau_prism"}
    figure_alpha(dirs, tmp_path / "f.pdf", tmp_path / "f.png", tier="smoke", dataset="toy", alphas=alphas)
    assert captions[0].endswith("(seed 123); no run record yet: α 0.5")


def test_figure_and_table_modules_import_no_torch(fresh_python):
    # a redraw from records runs a dozen PRISM figure/table jobs; torch's import was most of each
    script = ("import sys; import recrepro.papers.prism.figures, recrepro.papers.prism.tables, "
              "recrepro.papers.prism.rules, recrepro.papers.prism.cli; print('torch' in sys.modules)")
    assert fresh_python(script) == "False"


def test_fig4_names_the_tuned_pick_by_weight_decay_and_learning_rate(tmp_path):
    dirs = [_run(tmp_path, "mf_directau_prism_lr1em2", 1, val=0.3, test=0.3, pop=0.2, unpop=0.01, epochs=28),
            _run(tmp_path, "mf_directau_wd1em8_lr1em2", 1, val=0.29, test=0.29, pop=0.2, unpop=0.01, epochs=182),
            _run(tmp_path, "mf_directau_wd1em6", 1, val=0.28, test=0.3, pop=0.2, unpop=0.01, epochs=200)]
    spec = {"kind": "epochs", "alphas": {"α=1": "mf_directau_prism_lr1em2"}, "lr": 0.01,
            "tuned_candidates": ["mf_directau_wd1em6", "mf_directau_wd1em8_lr1em2"]}
    rows = draw_figure(spec, dirs, tmp_path / "4.pdf", tmp_path / "4.png", tier="paper", dataset="toy").set_index("label")
    # the best validation score over λ × lr, not the best test score
    assert rows.loc["tuned wd (λ 1e-08, lr 0.01)", "epochs_mean"] == 182
    assert rows.loc["α=1", "epochs_mean"] == 28


def test_the_alpha_points_run_at_the_learning_rate_of_the_prism_pick(repo_root):
    import yaml

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    chosen = {"mf_directau_prism": "mf_directau_prism_lr1em2", "mf_directau": "mf_directau_wd1em8_lr1em2"}
    assert wf.alpha_lr(chosen) == 0.01 and wf.alpha_lr({}) is None and wf.alpha_lr(None) is None
    spec, methods = wf.figure_spec(config, "paper", "gowalla", "fig5_alpha", chosen)
    assert spec["alphas"] == {"0": "mf_directau_prism_a000_lr1em2", "0.25": "mf_directau_prism_a025_lr1em2",
                              "0.5": "mf_directau_prism_a050_lr1em2", "0.75": "mf_directau_prism_a075_lr1em2",
                              "1": "mf_directau_prism_lr1em2"}
    assert spec["lr"] == 0.01
    # without a pick (the tier's own lr): the tier's runs, the caption's lr the tier's
    spec, _ = wf.figure_spec(config, "paper", "gowalla", "fig5_alpha")
    assert spec["alphas"]["0.25"] == "mf_directau_prism_a025" and spec["lr"] == 0.001
    # Fig. 4's tuned weight decay is Table 1's pick over the λ × lr grid (the run P4 reads), not a
    # second pick over every grid point on the figure's seeds (most of which never run there)
    spec, methods = wf.figure_spec(config, "paper", "gowalla", "fig4_epochs", chosen)
    assert spec["tuned_candidates"] == ["mf_directau_wd1em8_lr1em2"]
    spec, _ = wf.figure_spec(config, "paper", "gowalla", "fig4_epochs")  # before the selection: λ at the tier's lr
    assert spec["tuned_candidates"] == ["mf_directau_wd0", "mf_directau_wd1em8", "mf_directau_wd1em6",
                                        "mf_directau_wd1em4"]
    # every run Fig. 4 asks for once picked is priced on the compute page
    fig4 = wf.figure_runs(config, "paper", "gowalla", "fig4_epochs", chosen)
    priced = set(wf.every_run(config, "paper")) | set(wf.picked_runs(config, "paper", {"gowalla": chosen}))
    assert fig4 and set(fig4) <= priced
    # P5's table: every α at the pick's lr on every seed
    sweep = wf.alpha_sweep_runs(config, "paper", "gowalla", chosen)
    assert len(sweep) == 15 and all("_lr1em2/seed" in r for r in sweep)
    assert wf.alpha_sweep_arg(config, "paper", chosen)["lr"] == 0.01
    # the compute page prices the sweep once the selection has picked, not the tier-lr α runs before
    assert "mf_directau_prism_a025_lr1em2" in " ".join(wf.picked_runs(config, "paper", {"gowalla": chosen}))
    assert not any("prism_a025/" in r for r in wf.every_run(config, "paper"))


def test_the_alpha_sweep_table_has_a_row_per_alpha_and_seed(tmp_path):
    from recrepro.papers.prism.alpha import alpha_sweep_table

    dirs = [_run(tmp_path, "mf_directau_prism_lr1em2", s, val=0.3, test=0.3, pop=0.2, unpop=0.01 * s, epochs=20 + s)
            for s in (1, 2)]
    dirs += [_run(tmp_path, "mf_directau_prism_a000_lr1em2", 1, val=0.2, test=0.2, pop=0.1, unpop=0.05)]
    dirs += [_run(tmp_path, "mf_ssm_prism", 1, val=0.2, test=0.2, pop=0.1, unpop=0.05)]  # not in the sweep
    alphas = {"0": "mf_directau_prism_a000_lr1em2", "0.5": "mf_directau_prism_a050_lr1em2",
              "1": "mf_directau_prism_lr1em2"}
    table = alpha_sweep_table(dirs, alphas, tmp_path / "a.md", tmp_path / "a.csv", tier="paper", dataset="toy",
                              series="mf_directau_prism", lr=0.01)
    assert list(zip(table["alpha"], table["seed"])) == [(0.0, 1), (1.0, 1), (1.0, 2)]
    assert set(table["method"]) == {"mf_directau_prism"} and set(table["lr"]) == {0.01}
    assert table.loc[2, "ndcg@20[unpopular]"] == pytest.approx(0.02) and table.loc[2, "epochs_to_best"] == 22
    assert table.loc[0, "ndcg@20[neutral]"] == pytest.approx(0.05)
    md = (tmp_path / "a.md").read_text()
    assert "| 0.5 | `mf_directau_prism_a050_lr1em2` | not run |" in md and "lr 0.01" in md
    assert "| 1 | `mf_directau_prism_lr1em2` | 1, 2 | 0.3 ± 0 |" in md
    import pandas as pd

    assert pd.read_csv(tmp_path / "a.csv").shape == (3, 13)


def test_the_alpha_picked_on_validation_is_copied_as_tunedalpha_on_every_seed(tmp_path):
    from recrepro.papers.prism.alpha import TUNED_ALPHA, alpha_sweep_table

    # α 0.5 has the best validation score on the selection seed 1 (0.31), α 1 the best test score;
    # α 0 is best on validation on average but ran on seed 2 alone, so it does not compete
    dirs = [_run(tmp_path, "mf_directau_prism_lr1em2", s, val=0.30, test=0.40, pop=0.3, unpop=0.01) for s in (1, 2)]
    dirs += [_run(tmp_path, "mf_directau_prism_a050_lr1em2", s, val=0.31, test=0.35, pop=0.2, unpop=0.05 * s)
             for s in (1, 2)]
    dirs += [_run(tmp_path, "mf_directau_prism_a000_lr1em2", 2, val=0.9, test=0.2, pop=0.1, unpop=0.05)]
    alphas = {"0": "mf_directau_prism_a000_lr1em2", "0.5": "mf_directau_prism_a050_lr1em2",
              "1": "mf_directau_prism_lr1em2"}
    root = tmp_path / "tuned_alpha"
    (root / "stale" / "seed9").mkdir(parents=True)  # an earlier pick's alias: the table owns the folder
    alpha_sweep_table(dirs, alphas, tmp_path / "a.md", tmp_path / "a.csv", tier="paper", dataset="toy",
                      series="mf_directau_prism", lr=0.01, tuned_root=root, seeds=[1])
    written = sorted(p.relative_to(root).as_posix() for p in root.rglob("metrics.json"))
    assert written == [f"{TUNED_ALPHA}/seed1/metrics.json", f"{TUNED_ALPHA}/seed2/metrics.json"]
    metrics = json.loads((root / TUNED_ALPHA / "seed2" / "metrics.json").read_text())
    assert metrics["method"] == TUNED_ALPHA and metrics["selected_method"] == "mf_directau_prism_a050_lr1em2"
    assert metrics["strata"]["unpopular"]["ndcg@20"] == pytest.approx(0.10)
    assert metrics["budget"] == "α picked over 2 of 3 strengths"
    md = (tmp_path / "a.md").read_text()
    assert "**0.5**" in md and "| 0.5 (picked) |" in md
    # the ratio column: 0.05/0.2 and 0.10/0.2 -> 0.375 ± 0.18
    assert "| 0.375 ± 0.18 |" in md
    # no selection seed ran: no pick, and the folder is emptied all the same
    alpha_sweep_table(dirs, alphas, tmp_path / "a.md", tmp_path / "a.csv", tier="paper", dataset="toy",
                      series="mf_directau_prism", lr=0.01, tuned_root=root, seeds=[7])
    assert not any(root.iterdir()) and "none is picked" in (tmp_path / "a.md").read_text()
    # an α that diverged on the selection seed is never picked (its best score predates the blow-up)
    metrics_path = tmp_path / "runs" / "mf_directau_prism_a050_lr1em2" / "seed1" / "metrics.json"
    metrics = json.loads(metrics_path.read_text())
    metrics_path.write_text(json.dumps({**metrics, "diverged": {"epoch": 3, "why": "non-finite loss"}}))
    table = alpha_sweep_table(dirs, alphas, tmp_path / "a.md", tmp_path / "a.csv", tier="paper", dataset="toy",
                              series="mf_directau_prism", lr=0.01, tuned_root=root, seeds=[1])
    assert json.loads((root / TUNED_ALPHA / "seed1" / "metrics.json").read_text())["selected_method"] \
        == "mf_directau_prism_lr1em2"
    assert "| 1, 2 |" in (tmp_path / "a.md").read_text() and "1 (diverged), 2" in (tmp_path / "a.md").read_text()


def test_the_tuned_aliases_are_known_names_before_their_records_exist(repo_root):
    # a claim may name mf_directau_tunedalpha while no α pick has been written (a partial sweep): the
    # name is planned, so the claims page is not refused as if it were a typo; and the aliases are not jobs
    import yaml

    from recrepro.scorecard.claimnames import _planned

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    aliases = wf.alias_records(config, "paper")
    named = set(_planned("prism", aliases))
    assert {("gowalla", "mf_directau_tunedalpha"), ("gowalla", "mf_ssm_tunedprism"),
            ("yelp2018", "nlmf_mawu_tunedwd"), ("gowalla", "nlmf_ssm_tunedprism")} <= named
    assert ("gowalla", "lightgcn_ssm_tunedprism") not in named  # not a Table 1 backbone: no lr search
    assert not set(aliases) & set(wf.run_records(config, "paper"))
