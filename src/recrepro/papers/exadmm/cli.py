"""``recrepro exadmm <verb>``: the verbs of the exADMM rules over :mod:`recrepro.papers.exadmm.experiments`.

``train`` (one operating point, one seed), ``tradeoff`` (Fig. 1), ``convergence`` (Fig. 3),
``table`` (Table 4), ``scalability`` and ``figure-scalability`` (Fig. 2), and ``drift`` (records made under
other settings than today's configuration: :mod:`recrepro.papers.exadmm.drift`). The options are built from :mod:`recrepro.runtime.options`;
the experiment module is imported only when a verb runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from recrepro.runtime.options import (add_device_argument, add_figure_outputs, add_json, add_run_arguments,
                              add_table_outputs, add_tier)
from recrepro.records.drift import add_drift_verb

__all__ = ["register"]


def cmd_train(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.experiments import DEFAULT_METRICS, run_point

    point = args.point
    run_point(split_dir=Path(args.split_dir), method=args.method, family=point["family"], params=point["params"],
              record_part=point.get("record_part", "test"),
              seed=args.seed, out_dir=Path(args.out_dir), ks=args.ks,
              metrics=args.metrics if args.metrics is not None else list(DEFAULT_METRICS),
              meta=args.meta, device=args.device, batch_size=args.batch_size,
              benchmark_file=args.benchmark_file)


def cmd_tradeoff(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.experiments import figure_tradeoff

    figure_tradeoff(args.runs, args.out_pdf, args.out_png, tier=args.tier, ks=args.ks)


def cmd_convergence(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.experiments import figure_convergence

    figure_convergence(args.histories, args.out_pdf, args.out_png, tier=args.tier)


def cmd_table(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.experiments import table_best

    table_best(args.runs, args.out_md, args.out_csv, tier=args.tier, select=args.select, ks=args.ks)


def cmd_scalability(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.experiments import scalability

    s = args.settings
    scalability(args.split_dir, args.out_json, entry=args.entry, dims=s["dims"],
                user_fractions=s["user_fractions"], epochs=int(s["epochs"]), device=args.device)


def cmd_figure_scalability(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.experiments import figure_scalability

    figure_scalability(args.record, args.out_pdf, args.out_png, tier=args.tier)


def register(verbs: argparse._SubParsersAction) -> None:
    """Add exADMM's verbs to ``verbs`` (the subparsers of ``recrepro exadmm``)."""
    add_drift_verb(verbs, "exADMM", "recrepro.papers.exadmm.drift")
    p = verbs.add_parser("train", help="fit one operating point on one split seed and write its run record")
    add_run_arguments(p, evaluation=False)
    p.add_argument("--method", required=True, help="the operating point's name (ials, exadmm_sw1, fairrec_sw2, ...)")
    add_json(p, "--point", required=True, help="the operating point: {family, params, record_part}")
    add_json(p, "--ks", required=True, help="cut-offs, a JSON list")
    add_json(p, "--metrics", help="metric names, a JSON list (default: the paper's)")
    p.set_defaults(func=cmd_train)

    p = verbs.add_parser("tradeoff", help="Fig. 1: accuracy vs exposure concentration")
    add_tier(p)
    add_figure_outputs(p)
    add_json(p, "--ks", default=[20, 100], help="cut-offs, a JSON list")
    p.add_argument("runs", nargs="+", help="run records (metrics.json)")
    p.set_defaults(func=cmd_tradeoff)

    p = verbs.add_parser("convergence", help="Fig. 3: exADMM residuals and objective per epoch")
    add_tier(p)
    add_figure_outputs(p)
    p.add_argument("histories", nargs="+", help="history.json of the exADMM runs")
    p.set_defaults(func=cmd_convergence)

    p = verbs.add_parser("table", help="Table 4: the validation-selected operating point of each family")
    add_tier(p)
    add_table_outputs(p)
    p.add_argument("--select", default="ndcg@20", help="the validation metric that selects")
    add_json(p, "--ks", default=[20, 100], help="cut-offs, a JSON list")
    p.add_argument("runs", nargs="+", help="run records (metrics.json)")
    p.set_defaults(func=cmd_table)

    p = verbs.add_parser("scalability", help="Fig. 2's timings: seconds per training epoch vs d and vs users")
    p.add_argument("--split-dir", required=True)
    add_json(p, "--entry", required=True, help="the dataset's config entry (ials/exadmm settings)")
    add_json(p, "--settings", required=True, help="{dims, user_fractions, epochs}")
    p.add_argument("--out-json", required=True, help="the timings record")
    add_device_argument(p)
    p.set_defaults(func=cmd_scalability)

    p = verbs.add_parser("figure-scalability", help="Fig. 2 from the scalability verb's timings record")
    add_tier(p)
    p.add_argument("--record", required=True, help="the JSON the scalability verb wrote")
    add_figure_outputs(p)
    p.set_defaults(func=cmd_figure_scalability)
