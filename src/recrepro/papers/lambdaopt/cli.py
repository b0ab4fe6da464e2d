"""``recrepro lambdaopt <verb>``: the verbs of the λOpt rules over the paper's API.

``train`` (one variant, one seed: :func:`~recrepro.papers.lambdaopt.run.run_variant`; ``--mode
sensitivity``: MF-λFix per fixed λ, :func:`~recrepro.papers.lambdaopt.run.sensitivity`), ``drift``
(records made under other settings than today's configuration: :mod:`recrepro.papers.lambdaopt.drift`),
``table`` (:mod:`recrepro.papers.lambdaopt.tables`), ``figure-trajectory``, ``figure-sensitivity`` and
``figure-groups`` (:mod:`recrepro.papers.lambdaopt.figures`), and ``official`` (the released code's curves
beside ours: :mod:`recrepro.papers.lambdaopt.official`). The options are built from
:mod:`recrepro.runtime.options`; the run, table and figure modules are imported only when a verb runs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path

from recrepro.runtime.options import (TrainMode, add_dataset, add_figure_outputs, add_json, add_run_arguments,
                                      add_threads, add_tier, add_train_verb, add_verb, release_mode_options)
from recrepro.records.drift import add_drift_verb

__all__ = ["register"]


def _train_variant(args: argparse.Namespace) -> None:
    from recrepro.papers.lambdaopt.run import run_variant

    runs = [str(Path(r).parent) if r.endswith("metrics.json") else r for r in args.grid_runs if r]
    if runs:      # MF-λFix one job per λ: the record from its grid points' records
        from recrepro.papers.lambdaopt.grid import assemble_lambdafix

        result = assemble_lambdafix(runs, args.out_dir, args.variant, args.settings, args.evaluation,
                                    benchmark_file=args.benchmark_file)
        print(json.dumps(result, indent=1))
        return
    result = run_variant(split_dir=args.split_dir, variant=args.variant, settings=args.settings,
                         seed=args.seed, out_dir=args.out_dir, meta=args.meta, evaluation=args.evaluation,
                         device=args.device, batch_size=args.batch_size, benchmark_file=args.benchmark_file,
                         checkpoint=args.checkpoint)
    print(json.dumps(result, indent=1))


def _train_sensitivity(args: argparse.Namespace) -> None:
    from recrepro.runtime.checkpoints import remove_checkpoint
    from recrepro.io import write_parquet
    from recrepro.papers.lambdaopt.run import sensitivity, sensitivity_checkpoints

    table = sensitivity(split_dir=args.split_dir, settings=args.settings, lambdas=args.lambdas,
                        epochs=args.epochs, seed=args.seed, evaluation=args.evaluation, device=args.device,
                        checkpoint=args.checkpoint)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_parquet(args.out, table)
    for path in sensitivity_checkpoints(args.checkpoint, args.lambdas):  # the table is written: start afresh next time
        remove_checkpoint(path)
    print(table.to_string())


#: ``train``'s modes and what each needs besides ``--split-dir``, ``--seed``, ``--settings`` and ``--evaluation``
#: (argparse requires an option of every mode or of none).
TRAIN_MODES: Mapping[str, TrainMode] = {
    "variant": TrainMode(_train_variant, ("--variant", "--out-dir"), "one variant, one seed, its run record"),
    "sensitivity": TrainMode(_train_sensitivity, ("--lambdas", "--epochs", "--out"),
                             "the validation AUC per epoch of MF-λFix for each fixed λ (--settings: MF-λFix's), a table"),
}


def cmd_table(args: argparse.Namespace) -> None:
    from recrepro.io import write_text
    from recrepro.papers.lambdaopt.tables import paired_tests, results_table, stopping_summary, table_markdown

    runs = [str(Path(r).parent) if r.endswith("metrics.json") else r for r in args.runs]
    agg = results_table(runs)
    Path(args.out_md).parent.mkdir(parents=True, exist_ok=True)
    tests = paired_tests(runs)
    write_text(args.out_md, table_markdown(agg, args.tier, tests, stopping_summary(runs)))
    write_text(args.out_csv, agg.to_csv(index=False))
    if args.out_tests:
        write_text(args.out_tests, tests.to_csv(index=False))


def cmd_figure_trajectory(args: argparse.Namespace) -> None:
    from recrepro.papers.lambdaopt.figures import figure_trajectory

    figure_trajectory(args.run, args.out_pdf, args.out_png, args.tier, args.dataset)


def cmd_figure_sensitivity(args: argparse.Namespace) -> None:
    import pandas as pd

    from recrepro.papers.lambdaopt.figures import figure_sensitivity

    figure_sensitivity(pd.read_parquet(args.table), args.out_pdf, args.out_png, args.tier, args.dataset,
                       epochs=args.epochs)


def cmd_figure_groups(args: argparse.Namespace) -> None:
    from recrepro.io import write_text
    from recrepro.papers.lambdaopt.figures import figure_groups

    data = figure_groups(args.run_a, args.run_b, args.out_pdf, args.out_png, args.tier, args.dataset)
    write_text(args.out_csv, data.to_csv(index=False))


def cmd_official(args: argparse.Namespace) -> None:
    from recrepro.io import write_text
    from recrepro.papers.lambdaopt.official import official_figure, official_markdown, official_table

    write_text(args.out_md, official_markdown(official_table(args.curves, args.runs_root, args.settings)))
    official_figure(args.curves, args.runs_root, args.out_pdf, args.out_png, args.tier)


def register(verbs: argparse._SubParsersAction) -> None:
    """Add λOpt's verbs to ``verbs`` (the subparsers of ``recrepro lambdaopt``)."""
    _add_train(verbs)

    add_drift_verb(verbs, "λOpt", "recrepro.papers.lambdaopt.drift")

    p = add_verb(verbs, "table", "results table (method x metric) with the paired tests", cmd_table, tier=True,
                 outputs="table")
    p.add_argument("--out-tests", default=None, help="the paired tests as CSV")
    p.add_argument("runs", nargs="+", help="run records (metrics.json or their folders)")

    for name, func, help in (
            ("figure-trajectory", cmd_figure_trajectory, "mean λ by training frequency and epoch"),
            ("figure-sensitivity", cmd_figure_sensitivity, "validation AUC over epochs per fixed λ"),
            ("figure-groups", cmd_figure_groups, "two methods by user-frequency quartile")):
        p = verbs.add_parser(name, help=help)
        add_tier(p)
        add_dataset(p)
        add_figure_outputs(p)
        if name == "figure-trajectory":
            p.add_argument("--run", required=True, help="a λOpt run record's folder")
        elif name == "figure-sensitivity":
            p.add_argument("--table", required=True, help="the sensitivity table (parquet)")
            p.add_argument("--epochs", type=int, default=None,
                           help="the configured cap of the sweep: a table made under another is marked")
        else:
            p.add_argument("--run-a", required=True, nargs="+", help="the first method's run records, one per seed")
            p.add_argument("--run-b", required=True, nargs="+", help="the second method's run records, one per seed")
            p.add_argument("--out-csv", required=True)
        p.set_defaults(func=func)

    p = add_verb(verbs, "official", "the released code's curves on our split beside our records "
                 "(benchmarks/official_lambdaopt.py): table and figure", cmd_official, tier=True, outputs="figure")
    p.add_argument("--out-md", required=True, help="the table (markdown)")
    p.add_argument("--runs-root", required=True, help="results/<tier>/lambdaopt/runs")
    add_json(p, "--settings", required=True, help="the tier's λOpt settings (its stopping rule: patience, wait_for_gain)")
    p.add_argument("curves", nargs="+", help="official/<dataset>_<dui|fix>_seed<k>.jsonl")


def _add_train(verbs: argparse._SubParsersAction) -> None:
    """``train``: one variant's run record (``--mode variant``) or MF-λFix's sensitivity table (``--mode sensitivity``)."""
    p = add_train_verb(verbs, "train one variant on one split seed and write its run record (--mode sensitivity: "
                       "MF-λFix's validation AUC per epoch for each fixed λ)", TRAIN_MODES, default="variant")
    add_run_arguments(p, checkpoint="save the training state here after epochs (at most 2 %% of the time) and resume from it when rerun "
                                    "(MF-λFix and λOpt; deleted once the run record is written; --mode sensitivity: "
                                    "each λ's curve after every epoch, <PATH>.lam<k>); "
                                    "default: no checkpointing")
    release_mode_options(p, "out_dir")
    p.add_argument("--variant", help="--mode variant: the variant (a key of lambdaopt.variants, or its grid point "
                                      "<variant>-gNN)")
    add_json(p, "--settings", required=True, help="the variant's settings")
    p.add_argument("--grid-runs", nargs="*", default=[], metavar="RUN",
                   help="MF-λFix only: its grid points' run records (<variant>-gNN, in grid order); the record is "
                        "assembled from them instead of trained (recrepro.papers.lambdaopt.grid)")
    add_json(p, "--lambdas", help="--mode sensitivity: the fixed λ values, a JSON list")
    p.add_argument("--epochs", type=int, help="--mode sensitivity: the epochs of each curve")
    p.add_argument("--out", help="--mode sensitivity: the table (parquet)")
    add_threads(p)
