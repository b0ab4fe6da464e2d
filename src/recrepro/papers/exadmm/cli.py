"""``recrepro exadmm <verb>``: the verbs of the exADMM rules over the paper's API.

``train`` (one operating point, one seed: :func:`~recrepro.papers.exadmm.run.run_point`; ``--mode
scalability``: Fig. 2's timings, :func:`~recrepro.papers.exadmm.run.scalability`), ``tradeoff`` (Fig. 1),
``convergence`` (Fig. 3), ``figure-scalability`` (Fig. 2: :mod:`recrepro.papers.exadmm.figures`), ``table``
(Table 4: :mod:`recrepro.papers.exadmm.tables`) and ``drift`` (records made under other settings than
today's configuration: :mod:`recrepro.papers.exadmm.drift`). The options are built from
:mod:`recrepro.runtime.options`; the experiment modules are imported only when a verb runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from recrepro.runtime.options import (TrainMode, add_json, add_run_arguments, add_train_verb, add_verb,
                                      release_mode_options)
from recrepro.records.drift import add_drift_verb

__all__ = ["register"]


def _train_point(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.run import DEFAULT_METRICS, run_point

    point = args.point
    run_point(split_dir=Path(args.split_dir), method=args.method, family=point["family"], params=point["params"],
              record_part=point.get("record_part", "test"),
              seed=args.seed, out_dir=Path(args.out_dir), ks=args.ks,
              metrics=args.metrics if args.metrics is not None else list(DEFAULT_METRICS),
              meta=args.meta, device=args.device, batch_size=args.batch_size,
              benchmark_file=args.benchmark_file)


def _train_scalability(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.run import scalability

    s = args.settings
    scalability(args.split_dir, args.out_json, entry=args.entry, dims=s["dims"],
                user_fractions=s["user_fractions"], epochs=int(s["epochs"]), device=args.device)


#: ``train``'s modes and what each needs besides ``--split-dir`` (argparse requires an option of every mode or
#: of none).
TRAIN_MODES: Mapping[str, TrainMode] = {
    "point": TrainMode(_train_point, ("--seed", "--out-dir", "--method", "--point", "--ks"),
                       "one operating point, one seed, its run record"),
    "scalability": TrainMode(_train_scalability, ("--entry", "--settings", "--out-json"),
                             "Fig. 2's seconds per training epoch vs d and vs users, a timings record"),
}


def cmd_tradeoff(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.figures import figure_tradeoff

    figure_tradeoff(args.runs, args.out_pdf, args.out_png, tier=args.tier, ks=args.ks)


def cmd_convergence(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.figures import figure_convergence

    figure_convergence(args.histories, args.out_pdf, args.out_png, tier=args.tier)


def cmd_table(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.tables import table_best

    table_best(args.runs, args.out_md, args.out_csv, tier=args.tier, select=args.select, ks=args.ks)


def cmd_figure_scalability(args: argparse.Namespace) -> None:
    from recrepro.papers.exadmm.figures import figure_scalability

    figure_scalability(args.record, args.out_pdf, args.out_png, tier=args.tier)


def register(verbs: argparse._SubParsersAction) -> None:
    """Add exADMM's verbs to ``verbs`` (the subparsers of ``recrepro exadmm``)."""
    add_drift_verb(verbs, "exADMM", "recrepro.papers.exadmm.drift")
    _add_train(verbs)

    p = add_verb(verbs, "tradeoff", "Fig. 1: accuracy vs exposure concentration", cmd_tradeoff, tier=True,
                 outputs="figure")
    add_json(p, "--ks", default=[20, 100], help="cut-offs, a JSON list")
    p.add_argument("runs", nargs="+", help="run records (metrics.json)")

    p = add_verb(verbs, "convergence", "Fig. 3: exADMM residuals and objective per epoch", cmd_convergence, tier=True,
                 outputs="figure")
    p.add_argument("histories", nargs="+", help="history.json of the exADMM runs")

    p = add_verb(verbs, "table", "Table 4: the validation-selected operating point of each family", cmd_table,
                 tier=True, outputs="table")
    p.add_argument("--select", default="ndcg@20", help="the validation metric that selects")
    add_json(p, "--ks", default=[20, 100], help="cut-offs, a JSON list")
    p.add_argument("runs", nargs="+", help="run records (metrics.json)")

    p = add_verb(verbs, "figure-scalability", "Fig. 2 from the timings record of train --mode scalability",
                 cmd_figure_scalability, tier=True, outputs="figure")
    p.add_argument("--record", required=True, help="the JSON train --mode scalability wrote")


def _add_train(verbs: argparse._SubParsersAction) -> None:
    """``train``: one operating point's run record (``--mode point``) or Fig. 2's timings (``--mode scalability``)."""
    p = add_train_verb(verbs, "fit one operating point on one split seed and write its run record (--mode "
                       "scalability: time training epochs vs d and vs users, Fig. 2)", TRAIN_MODES, default="point")
    add_run_arguments(p, evaluation=False)
    release_mode_options(p, "seed", "out_dir")
    p.add_argument("--method", help="the operating point's name (ials, exadmm_sw1, fairrec_sw2, ...)")
    add_json(p, "--point", help="the operating point: {family, params, record_part}")
    add_json(p, "--ks", help="cut-offs, a JSON list")
    add_json(p, "--metrics", help="metric names, a JSON list (default: the paper's)")
    add_json(p, "--entry", help="--mode scalability: the dataset's config entry (ials/exadmm settings)")
    add_json(p, "--settings", help="--mode scalability: {dims, user_fractions, epochs}")
    p.add_argument("--out-json", help="--mode scalability: the timings record")
