"""``recrepro lrs <verb>``: the verbs of the AMHT-LRS rules over the paper's API.

``train`` (``--mode sweep``: one synthetic experiment over seeds; ``--mode ml100k``: our Fig. 6's rows;
``--mode acceptance``: the run records the scorecard reads; :mod:`recrepro.papers.lrs.run`), ``figures``
(Figs. 1-5 from the sweeps, Fig. 6 from the ML-100K rows: :mod:`recrepro.papers.lrs.figures`) and ``drift``
(the acceptance records against today's configuration: :mod:`recrepro.papers.lrs.drift`). The options are
built from :mod:`recrepro.runtime.options`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from recrepro.runtime.options import (TrainMode, add_device_argument, add_json, add_threads, add_train_verb, add_verb,
                                      int_list)
from recrepro.records.drift import add_drift_verb

__all__ = ["register"]

def _write_rows(frame, out: str, out_timings: str | None) -> None:
    """The rows at ``out`` without their wall seconds, which go to ``out_timings`` (when given): a rerun
    of the same seeds leaves ``out`` byte-identical, as a run record's metrics.json beside the timings in its provenance.json."""
    from recrepro.io import write_parquet
    from recrepro.papers.lrs.run import split_timings

    rows, timings = split_timings(frame)
    write_parquet(out, rows)
    if out_timings:
        write_parquet(out_timings, timings)


def _train_sweep(args: argparse.Namespace) -> None:
    import pandas as pd

    from recrepro.papers.lrs.run import run_sweep

    frame = pd.concat([run_sweep(args.experiment, args.settings, seed, args.device) for seed in args.seeds],
                      ignore_index=True)
    _write_rows(frame, args.out, args.out_timings)
    print(frame.to_string(max_rows=80))


def cmd_figures(args: argparse.Namespace) -> None:
    import pandas as pd

    from recrepro.papers.lrs.figures import FIGURES, REALDATA_FIGURES, make_figure

    drawn = {**FIGURES, **REALDATA_FIGURES}
    for item in args.rows:
        figure, path = item.split("=", 1)
        if figure not in drawn:
            raise SystemExit(f"unknown figure {figure!r}; one of {', '.join(drawn)}")
        out = Path(args.out_dir) / figure
        make_figure(drawn[figure], pd.read_parquet(path), f"{out}.pdf", f"{out}.png", args.tier)


def _train_ml100k(args: argparse.Namespace) -> None:
    from recrepro.datasets import get_dataset
    from recrepro.datasets.download import verify_raw_files
    from recrepro.papers.lrs.figures import make_figure
    from recrepro.papers.lrs.run import run_ml100k

    # u.data is read straight from data/raw/: check it against fetch.json first
    verify_raw_files(get_dataset("ml-100k"), args.raw_dir)
    frame = run_ml100k(args.raw_dir, args.settings, args.seeds)
    _write_rows(frame, args.out, args.out_timings)
    if args.out_pdf or args.out_png:  # the workflow draws it from the rows (rule lrs_ml100k_figure)
        if not (args.out_pdf and args.out_png):
            raise SystemExit("--out-pdf and --out-png go together")
        make_figure("ml100k", frame, args.out_pdf, args.out_png, args.tier)
    print(frame.groupby(["method", "m"])["heldout_mse"].mean().unstack().to_string())


def _train_acceptance(args: argparse.Namespace) -> None:
    from recrepro.io import write_text
    from recrepro.papers.lrs.run import run_acceptance

    runs = run_acceptance(args.settings, args.seed, args.tier, args.run_root, args.device, args.settings)
    write_text(args.done, "".join(f"{run}\n" for run in runs))
    print("\n".join(map(str, runs)))


#: ``train``'s modes and what each needs besides ``--settings`` (argparse requires an option of every mode or of none).
TRAIN_MODES: Mapping[str, TrainMode] = {
    "sweep": TrainMode(_train_sweep, ("--experiment", "--seeds", "--out"),
                       "one synthetic experiment over seeds, one row per (method, x value)"),
    "ml100k": TrainMode(_train_ml100k, ("--raw-dir", "--seeds", "--tier", "--out"),
                        "our Fig. 6, the ML-100K regression tasks"),
    "acceptance": TrainMode(_train_acceptance, ("--seed", "--tier", "--run-root", "--done"),
                            "the acceptance settings' run records (what the scorecard reads)"),
}


def register(verbs: argparse._SubParsersAction) -> None:
    """Add AMHT-LRS's verbs to ``verbs`` (the subparsers of ``recrepro lrs``)."""
    from recrepro.papers.lrs.figures import FIGURES, REALDATA_FIGURES
    from recrepro.papers.lrs.run import EXPERIMENTS

    add_drift_verb(verbs, "AMHT-LRS", "recrepro.papers.lrs.drift")

    p = add_train_verb(verbs, "a synthetic sweep, the ML-100K tasks (Fig. 6) or the acceptance settings' run records",
                       TRAIN_MODES, default=None)
    add_json(p, "--settings", required=True, help="the tier's lrs settings")
    p.add_argument("--experiment", choices=EXPERIMENTS, help="--mode sweep: the synthetic experiment")
    p.add_argument("--seeds", type=int_list, help="--mode sweep, ml100k: comma-separated: 0,1,2")
    p.add_argument("--seed", type=int, help="--mode acceptance: the seed")
    p.add_argument("--tier", help="--mode ml100k, acceptance: the tier the outputs belong to (smoke, paper)")
    add_device_argument(p)
    p.add_argument("--out", help="--mode sweep, ml100k: the rows (parquet), without wall times")
    p.add_argument("--out-timings", help="--mode sweep, ml100k: each row's wall seconds (parquet)")
    p.add_argument("--raw-dir", help="--mode ml100k: data/raw/ml-100k (checked against its fetch.json)")
    p.add_argument("--out-pdf", help="--mode ml100k: also draw Fig. 6 here (with --out-png)")
    p.add_argument("--out-png", help="--mode ml100k: also draw Fig. 6 here (with --out-pdf)")
    p.add_argument("--run-root", help="--mode acceptance: results/<tier>/lrs/runs")
    p.add_argument("--done", help="--mode acceptance: the list of records written")

    p = add_verb(verbs, "figures", "Figs. 1-5 from the sweeps' rows, Fig. 6 from the ML-100K rows", cmd_figures,
                 tier=True)
    p.add_argument("--out-dir", required=True, help="writes <out-dir>/<figure>.pdf and .png")
    p.add_argument("rows", nargs="+", help="FIGURE=rows.parquet, FIGURE one of " + ", ".join({**FIGURES, **REALDATA_FIGURES}))

    for p in verbs.choices.values():
        add_threads(p, default=1, help="torch threads (1 is fastest for the small batched ops of the smoke tier)")
