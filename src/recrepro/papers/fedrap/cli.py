"""``recrepro fedrap <verb>``: the verbs of the FedRAP rules over the paper's API.

``train`` (one variant, one seed: :func:`~recrepro.papers.fedrap.run.run_variant`), ``stats`` (dataset
statistics of split folders) and ``table`` (:mod:`recrepro.papers.fedrap.tables`), ``tuning`` (the validation
grids' table) and ``picks`` (each grid's pick, for the config: :mod:`recrepro.papers.fedrap.tuning`),
``figure`` (learning curves, or ``--kind ablation``) and ``embeddings`` (PCA of C vs D⁽ⁱ⁾:
:mod:`recrepro.papers.fedrap.figures`), ``official`` (the released code's curves over ours:
:mod:`recrepro.papers.fedrap.comparison`) and ``drift`` (records made under other settings than today's
configuration: :mod:`recrepro.papers.fedrap.drift`). The options are built from :mod:`recrepro.runtime.options`;
the run, table and figure modules are imported only when a verb runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from recrepro.runtime.options import add_dataset, add_json, add_run_arguments, add_threads, add_verb
from recrepro.records.drift import add_drift_verb

__all__ = ["register"]


def _run_dirs(paths: list[str]) -> list[str]:
    return [str(Path(r).parent) if r.endswith("metrics.json") else r for r in paths]


def cmd_train(args: argparse.Namespace) -> None:
    from recrepro.papers.fedrap.run import run_variant

    result = run_variant(split_dir=args.split_dir, variant=args.variant, settings=args.settings,
                         seed=args.seed, out_dir=args.out_dir, meta=args.meta, evaluation=args.evaluation,
                         device=args.device, benchmark_file=args.benchmark_file,
                         memory_budget_mb=args.memory_budget_mb, checkpoint=args.checkpoint,
                         projection=args.projection)
    print(json.dumps(result, indent=1))


def cmd_stats(args: argparse.Namespace) -> None:
    from recrepro.io import write_text
    from recrepro.papers.fedrap.tables import dataset_stats

    stats = dataset_stats(args.split_dirs)
    Path(args.out_csv).parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out_csv, stats.to_csv(index=False))
    print(stats.to_string())


def cmd_table(args: argparse.Namespace) -> None:
    import pandas as pd

    from recrepro.io import write_text
    from recrepro.papers.fedrap.tables import results_table, table_markdown

    from recrepro.papers.fedrap.comparison import comparison_frame, comparison_markdown

    runs = _run_dirs(args.runs)
    if args.tuning:
        from recrepro.papers.fedrap.tuning import check_tuned_records

        check_tuned_records(args.tuning, runs)
    agg = results_table(runs)
    stats = pd.read_csv(args.stats) if args.stats else None
    tuning = args.tuning or {}
    grid_frame = comparison_frame(_run_dirs(args.grid_runs), grid=True) if args.grid_runs else None
    records_picks = None
    if args.grid_runs:
        from recrepro.papers.fedrap import tuning as grid_tuning

        records_picks = grid_tuning.pick_from_records(grid_tuning.grid_frame(_run_dirs(args.grid_runs)),
                                                      tuning.get("select", "val_hr@10"))
    comparison = comparison_markdown(comparison_frame(runs), args.tier, tuning.get("picks"), tuning.get("tuned"),
                                     tuning.get("grids"), grid_frame, records_picks)
    if args.official:
        from recrepro.papers.fedrap.comparison import official_agreement, official_markdown

        runs_root = Path(args.official[0]).parent.parent / "runs"
        comparison += "\n" + official_markdown(official_agreement(args.official, runs_root))
    Path(args.out_md).parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out_md, table_markdown(agg, stats, args.tier, comparison))
    write_text(args.out_csv, agg.to_csv(index=False))


def cmd_tuning(args: argparse.Namespace) -> None:
    from recrepro.io import write_text
    from recrepro.papers.fedrap.tuning import tuning_markdown, tuning_table

    table = tuning_table(args.tuning, _run_dirs(args.runs))
    Path(args.out_md).parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out_md, tuning_markdown(table, args.tuning, args.tier))
    write_text(args.out_csv, table.drop(columns=["dir"], errors="ignore").to_csv(index=False))


def cmd_picks(args: argparse.Namespace) -> None:
    from recrepro.papers.fedrap.tuning import grid_frame, pick_from_records

    frame = grid_frame(_run_dirs(args.runs))
    if frame.empty:
        raise SystemExit("fedrap picks: none of the given records is a grid run (<grid>-gNN)")
    picks = pick_from_records(frame, args.select)
    print("picks:  # fedrap.tiers.<tier>.tuning.picks, read off the grid records by " + args.select)
    for dataset, chosen in picks.items():
        print(f"  {dataset}: {{{', '.join(f'{g}: {p}' for g, p in chosen.items())}}}")


def cmd_figure(args: argparse.Namespace) -> None:
    from recrepro.papers.fedrap.figures import ablation_figure, curves_figure

    if args.kind == "ablation":
        ablation_figure(_run_dirs(args.runs), args.out_pdf, args.out_png, args.tier)
    else:
        curves_figure(_run_dirs(args.runs), args.out_pdf, args.out_png, args.tier, official_files=args.official)


def cmd_official(args: argparse.Namespace) -> None:
    from recrepro.papers.fedrap.comparison import official_figure

    official_figure(args.official, args.runs_root, args.out_pdf, args.out_png, args.tier)


def cmd_embeddings(args: argparse.Namespace) -> None:
    from recrepro.papers.fedrap.figures import embeddings_figure

    embeddings_figure(args.projection, args.out_pdf, args.out_png, args.tier, args.dataset)


def register(verbs: argparse._SubParsersAction) -> None:
    """Add FedRAP's verbs to ``verbs`` (the subparsers of ``recrepro fedrap``)."""
    add_drift_verb(verbs, "FedRAP", "recrepro.papers.fedrap.drift")
    p = add_verb(verbs, "train", "train one variant on one split seed and write its run record", cmd_train)
    add_run_arguments(p, batch_size=False,
                      checkpoint="save the training state here after every round (MF/NCF: epoch) and resume from it "
                                 "when rerun (deleted once the run record is written); default: no checkpointing")
    p.add_argument("--variant", required=True)
    add_json(p, "--settings", required=True, help="the variant's settings")
    p.add_argument("--memory-budget-mb", type=float, default=None)
    p.add_argument("--projection", default=None,
                   help="also write the embeddings figure's projection.parquet of the trained model here")
    add_threads(p)

    p = add_verb(verbs, "stats", "#ratings, #users, #items and sparsity of split folders", cmd_stats)
    p.add_argument("--out-csv", required=True)
    p.add_argument("split_dirs", nargs="+")

    p = add_verb(verbs, "table", "HR@10 / NDCG@10 per dataset and method", cmd_table, tier=True, outputs="table")
    p.add_argument("--stats", default=None, help="the dataset statistics (stats)")
    add_json(p, "--tuning", default=None, help="the tier's fedrap tuning block (names the tuned rows' picks)")
    p.add_argument("--official", nargs="*", default=[],
                   help="the released code's per-round curves (<tier>/fedrap/official/<dataset>_<flags>_seed<k>.jsonl)")
    p.add_argument("--grid-runs", nargs="*", default=[],
                   help="the validation grids' run records: a tuned row not run yet says how far its grid got")
    p.add_argument("runs", nargs="+", help="run records (metrics.json or their folders)")

    p = add_verb(verbs, "tuning", "the validation grids' runs, with the records' and the config's picks", cmd_tuning,
                 tier=True, outputs="table")
    add_json(p, "--tuning", required=True, help="the tier's fedrap tuning block")
    p.add_argument("runs", nargs="*", help="grid run records (metrics.json or their folders)")

    p = add_verb(verbs, "picks", "each grid's best point on validation, as the config's tuning.picks", cmd_picks)
    p.add_argument("--select", choices=["val_hr@10", "val_ndcg@10"], default="val_hr@10")
    p.add_argument("runs", nargs="+", help="grid run records (metrics.json or their folders)")

    p = add_verb(verbs, "figure", "learning curves, sparsity of C and upload size (--kind ablation: ablation)",
                 cmd_figure, tier=True, outputs="figure")
    p.add_argument("--kind", choices=["curves", "ablation"], default="curves")
    p.add_argument("--official", nargs="*", default=[],
                   help="curves: the released code's per-round curves (<dataset>_<flags>_seed<k>.jsonl), drawn "
                        "beside our run with the same flags")
    p.add_argument("runs", nargs="+", help="run records (metrics.json or their folders)")

    p = add_verb(verbs, "official", "the released code's per-round curves over ours (same flags and split)",
                 cmd_official, tier=True, outputs="figure")
    p.add_argument("--runs-root", required=True, help="<tier>/fedrap/runs: where our runs of the same flags are")
    p.add_argument("official", nargs="+", help="<tier>/fedrap/official/<dataset>_<flags>_seed<k>.jsonl")

    p = add_verb(verbs, "embeddings", "PCA of the global item table C vs the private D⁽ⁱ⁾", cmd_embeddings, tier=True,
                 outputs="figure")
    add_dataset(p)
    p.add_argument("--projection", required=True)
