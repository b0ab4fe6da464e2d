"""``recrepro prism <verb>``: the verbs of the PRISM rules over the paper's API.

``train`` (:func:`~recrepro.papers.prism.run.run_method`), ``figure-wd``, ``figure-magnitudes``,
``select-wd``, ``table``, ``lr-search`` (every grid point of Table 1's learning-rate pick:
:func:`~recrepro.papers.prism.tables.lr_search_table`), ``figure`` (Figs. 3-11 from a spec of
:mod:`recrepro.papers.prism.rules`), ``figure-theory`` (Fig. 7) and ``drift`` (records made under other
settings than today's configuration: :mod:`recrepro.papers.prism.drift`). The options are built from
:mod:`recrepro.runtime.options`; the run, table and figure modules are imported only when a verb runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from recrepro.runtime.options import (add_dataset, add_figure_outputs, add_json, add_run_arguments, add_table_outputs,
                                      add_tier, add_verb)
from recrepro.records.drift import add_drift_verb

__all__ = ["register"]


def _run_dirs(paths: list[str]) -> list[Path]:
    if not paths:
        # a redraw from records asked for a figure or table none of whose runs has a record yet
        raise ValueError("no run records to draw from: run this figure's or table's training jobs first "
                         "(docs/compute.md lists the queue); a redraw from records draws only what has records")
    return [Path(p).parent if p.endswith(".json") else Path(p) for p in paths]


def cmd_train(args: argparse.Namespace) -> None:
    from recrepro.papers.prism.run import run_method

    run_method(split_dir=Path(args.split_dir), method=args.method, seed=args.seed, out_dir=Path(args.out_dir),
               tier_conf=args.tier_conf, switches=args.switches, evaluation=args.evaluation, meta=args.meta,
               device=args.device, batch_size=args.batch_size, benchmark_file=args.benchmark_file,
               checkpoint=Path(args.checkpoint) if args.checkpoint else None)


def cmd_figure_wd(args: argparse.Namespace) -> None:
    from recrepro.papers.prism.figures import figure_weight_decay

    frame = figure_weight_decay(_run_dirs(args.runs), Path(args.out_pdf), Path(args.out_png), tier=args.tier,
                                dataset=args.dataset, backbone=args.backbone, losses=args.losses,
                                weight_decays=args.weight_decays, batched=args.batched)
    print(frame.to_string())


def cmd_figure_magnitudes(args: argparse.Namespace) -> None:
    from recrepro.papers.prism.figures import figure_magnitudes

    panels = dict(zip(args.titles, _run_dirs(args.runs), strict=True))
    print(figure_magnitudes(panels, Path(args.out_pdf), Path(args.out_png), tier=args.tier, dataset=args.dataset))


def cmd_table(args: argparse.Namespace) -> None:
    from recrepro.io import read_json
    from recrepro.papers.prism.tables import table_prism

    frame = table_prism(_run_dirs(args.runs), Path(args.out_md), Path(args.out_csv),
                        Path(args.tuned_root) if args.tuned_root else None, tier=args.tier, dataset=args.dataset,
                        backbones=args.backbones, losses=args.losses, weight_decays=args.weight_decays,
                        alpha=args.alpha, selection=read_json(args.selection) if args.selection else None,
                        diagnostic_backbones=args.diagnostic_backbones, lr_search=args.lr_search,
                        tier_lr=args.tier_lr)
    print(frame.to_string())


def cmd_lr_search(args: argparse.Namespace) -> None:
    from recrepro.io import read_json
    from recrepro.papers.prism.tables import lr_search_table

    frame = lr_search_table(_run_dirs(args.runs), Path(args.out_md), Path(args.out_csv), tier=args.tier,
                            dataset=args.dataset, backbones=args.backbones, losses=args.losses,
                            weight_decays=args.weight_decays, lr_search=args.lr_search, seeds=args.seeds,
                            alpha=args.alpha, selection=read_json(args.selection) if args.selection else None,
                            tier_lr=args.tier_lr)
    print(frame.to_string())


def cmd_alpha_sweep(args: argparse.Namespace) -> None:
    from recrepro.io import read_json
    from recrepro.papers.prism.alpha import alpha_sweep_table

    sweep = args.sweep
    if not isinstance(sweep, dict) or not isinstance(sweep.get("alphas"), dict) or "lr" not in sweep:
        raise SystemExit('--sweep: expected {"alphas": {"<α>": "<run name>", ...}, "lr": <learning rate>}')
    selection = read_json(args.selection) if args.selection else {}
    frame = alpha_sweep_table(_run_dirs(args.runs), sweep["alphas"], Path(args.out_md), Path(args.out_csv),
                              tier=args.tier, dataset=args.dataset, series="mf_directau_prism", lr=float(sweep["lr"]),
                              tuned_root=Path(args.tuned_root) if args.tuned_root else None,
                              seeds=[int(s) for s in selection.get("seeds") or []])
    print(frame.to_string())


def cmd_select_wd(args: argparse.Namespace) -> None:
    from recrepro.io import write_json
    from recrepro.papers.prism.tables import select_weight_decay

    selection = select_weight_decay(_run_dirs(args.runs), backbones=args.backbones, losses=args.losses,
                                    weight_decays=args.weight_decays, alpha=args.alpha, lr_search=args.lr_search)
    write_json(Path(args.out), selection)
    print(json.dumps(selection["chosen"], indent=1))


def cmd_figure(args: argparse.Namespace) -> None:
    from recrepro.papers.prism.figures import draw_figure

    out = draw_figure(args.spec, _run_dirs(args.runs), Path(args.out_pdf), Path(args.out_png), tier=args.tier,
                      dataset=args.dataset)
    print(out.to_string() if hasattr(out, "to_string") else out)


def cmd_figure_theory(args: argparse.Namespace) -> None:
    from recrepro.papers.prism.figures import figure_theory

    grid = figure_theory(Path(args.out_pdf), Path(args.out_png), tier=args.tier, lr=args.lr,
                         weight_decay=args.weight_decay, norm=args.norm, cosine=args.cosine,
                         max_degree=args.max_degree, batch_fractions=args.batch_fractions)
    print(grid.describe().to_string())


def register(verbs: argparse._SubParsersAction) -> None:
    """Add PRISM's verbs to ``verbs`` (the subparsers of ``recrepro prism``)."""
    add_drift_verb(verbs, "PRISM", "recrepro.papers.prism.drift")
    p = add_verb(verbs, "train", "train one method on one split seed and write its run record", cmd_train)
    add_run_arguments(p, checkpoint="save the training state here after epochs (at most 2 %% of the time) and resume from it when "
                                    "rerun (deleted once the run record is written); default: no checkpointing")
    p.add_argument("--method", required=True)
    add_json(p, "--tier-conf", required=True, help="the tier's prism settings")
    add_json(p, "--switches", required=True, help="the prism switches")

    _add_grid_outputs(verbs)

    p = add_verb(verbs, "select-wd", "Table 1's tuned λ per (backbone, loss) from the grid runs' validation",
                 cmd_select_wd)
    p.add_argument("--backbones", nargs="+", required=True)
    p.add_argument("--losses", nargs="+", required=True)
    p.add_argument("--weight-decays", type=float, nargs="+", required=True)
    p.add_argument("--alpha", type=float, default=1.0, help="PRISM's α in Table 1 (its learning-rate pick)")
    add_json(p, "--lr-search", default={}, help='{backbone: [learning rates besides the tier\'s]}, as JSON')
    p.add_argument("--out", required=True)
    p.add_argument("--runs", nargs="*", default=[])

    p = add_verb(verbs, "alpha-sweep", "the α sweep at the PRISM pick's learning rate, every seed (claim P5)",
                 cmd_alpha_sweep, tier=True, outputs="table")
    add_dataset(p)
    add_json(p, "--sweep", required=True, help='{"alphas": {"<α>": "<run name>"}, "lr": <lr>} (rules.alpha_sweep_arg)')
    p.add_argument("--selection", help="Table 1's selection (wd_selection_<dataset>.json): α is picked on its seeds")
    p.add_argument("--tuned-root", help="where the α picked on validation is copied as mf_directau_tunedalpha")
    p.add_argument("--runs", nargs="*", default=[], help="run records (metrics.json or run folders)")

    _add_figures(verbs)


def _add_grid_outputs(verbs: argparse._SubParsersAction) -> None:
    """Figs. 1-2 and Table 1: the verbs that read the weight-decay grid's runs."""
    for name, func, help in (
            ("figure-wd", cmd_figure_wd,
             "Fig. 1 (--batched: Fig. 3): NDCG@20 overall and per popularity stratum vs weight decay"),
            ("figure-magnitudes", cmd_figure_magnitudes, "Fig. 2: item embedding magnitude vs training degree"),
            ("table", cmd_table, "Table 1: tuned λ vs PRISM per backbone and loss"),
            ("lr-search", cmd_lr_search, "Table 1's learning-rate search: every (λ, lr) grid point, its record "
                                         "or 'not run', and each arm's pick")):
        p = verbs.add_parser(name, help=help)
        add_tier(p)
        add_dataset(p)
        if name in ("table", "lr-search"):
            _add_table_options(p, lr_search=name == "lr-search")
        else:
            add_figure_outputs(p)
        if name == "figure-wd":
            p.add_argument("--backbone", default="mf")
            p.add_argument("--batched", action="store_true")
        if name == "figure-magnitudes":
            p.add_argument("--titles", nargs="+", required=True)
        else:
            p.add_argument("--losses", nargs="+", required=True)
            p.add_argument("--weight-decays", type=float, nargs="+", required=True)
        p.add_argument("--runs", nargs="*", default=[], help="run records (metrics.json or run folders)")
        p.set_defaults(func=func)


def _add_table_options(p: argparse.ArgumentParser, *, lr_search: bool) -> None:
    """The options of Table 1 (``table``) and of its learning-rate search table (``lr-search``)."""
    add_table_outputs(p)
    p.add_argument("--selection", default=None,
                   help="the tuned-λ pick (select-wd); default: mean validation over the runs" if not lr_search
                   else "the tuned-λ pick (select-wd), whose picks are marked")
    p.add_argument("--backbones", nargs="+", required=True)
    p.add_argument("--alpha", type=float, default=1.0)
    add_json(p, "--lr-search", default={}, help='{backbone: [learning rates besides the tier\'s]}, as JSON')
    p.add_argument("--tier-lr", type=float, default=None, help="the tier's learning rate (shown for its runs)")
    if lr_search:
        p.add_argument("--seeds", type=int, nargs="+", required=True,
                       help="the seeds the selection reads (table.select_on): a point without a record on one "
                            "is 'not run'")
        return
    p.add_argument("--tuned-root", default=None)
    p.add_argument("--diagnostic-backbones", nargs="*", default=[],
                   help="backbones run in the PRISM column only, listed under the table (e.g. nlmflinear)")


def _add_figures(verbs: argparse._SubParsersAction) -> None:
    """Figs. 3-11 from a spec, and Fig. 7's theory curve."""
    p = add_verb(verbs, "figure", "one of Figs. 3-11 from a JSON spec (recrepro.papers.prism.rules)", cmd_figure,
                 tier=True, outputs="figure")
    add_json(p, "--spec", required=True)
    add_dataset(p)
    p.add_argument("--runs", nargs="*", default=[], help="run records (metrics.json or run folders)")

    p = add_verb(verbs, "figure-theory", "Fig. 7: Theorem 3.1's magnitude change over degree x batch fraction",
                 cmd_figure_theory, tier=True, outputs="figure")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=1e-6)
    p.add_argument("--norm", type=float, default=1.0)
    p.add_argument("--cosine", type=float, default=0.9)
    p.add_argument("--max-degree", type=float, default=1e4)
    p.add_argument("--batch-fractions", type=float, nargs=2, default=[1e-4, 1.0])
