"""``recrepro``: the command line of the pipeline; every Snakemake rule's shell line calls it.

``recrepro data|baseline|scorecard|records|figure-baselines ...`` work on data and on any paper's
records; ``recrepro report ...`` writes the report's HTML pages and the records' documents;
``recrepro <paper> <verb> ...`` runs one paper's experiments, figures and tables (the verbs are
registered by ``recrepro.papers.<paper>.cli``, over the paper's API functions). ``recrepro --help``
lists the commands and papers, ``recrepro <paper> --help`` a paper's verbs. Usable outside Snakemake
too::

    recrepro data fetch gowalla --raw-dir data/raw/gowalla --mirror ../shared/datasets
    recrepro data describe gowalla
    recrepro data preprocess gowalla --protocol prism --config config.yaml
    recrepro data split --processed-dir data/processed/gowalla/prism --split random_ratio --seed 123 \\
        --out-dir data/splits/gowalla/prism/random_ratio/seed123
    recrepro prism figure-theory --tier smoke --out-pdf fig7.pdf --out-png fig7.png
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from recrepro.runtime.options import add_run_arguments, add_verb, set_torch_threads
from recrepro.runtime.eager_torch import defer_dynamo
from recrepro.cli.data import add_data_verbs
from recrepro.cli.errors import KNOWN_ERRORS, TRACEBACK_ENV, report_error
from recrepro import paperlist

log = logging.getLogger("recrepro")

#: ``recrepro <paper> <verb>``: each paper's one-line description and the module whose
#: ``register(verbs)`` adds its verbs, from the registry (:mod:`recrepro.paperlist`). A paper's module is
#: imported only when its verbs are needed, so ``recrepro data ...`` does not import the papers' code (nor torch).
PAPERS: dict[str, tuple[str, str]] = {paper.key: (paper.cli_help, paper.cli_module) for paper in paperlist.PAPERS}


# ----------------------------------------------------------------------------- evaluation
def cmd_baseline(args: argparse.Namespace) -> None:
    from recrepro.baselines.run import run_baseline

    run_baseline(
        split_dir=Path(args.split_dir),
        method=args.method,
        seed=args.seed,
        out_dir=Path(args.out_dir),
        evaluation=args.evaluation,
        meta=args.meta,
        device=args.device,
        batch_size=args.batch_size,
        benchmark_file=args.benchmark_file,
    )


def cmd_strong_tune(args: argparse.Namespace) -> None:
    from recrepro.baselines.strong import tune_and_test

    tune_and_test(split_dir=Path(args.split_dir), model=args.model, grid=args.grid, fixed=args.fixed,
                  evaluation=args.evaluation, select=args.select, seeds=args.seeds, out_dir=Path(args.out_dir),
                  meta=args.meta, device=args.device, batch_size=args.batch_size,
                  checkpoint=Path(args.checkpoint) if args.checkpoint else None, beyond=args.beyond)


def cmd_strong_reuse(args: argparse.Namespace) -> None:
    from recrepro.baselines.strong_config import ledger_path, tune_params
    from recrepro.baselines.strong_reuse import reuse_points
    from recrepro.config import load_config

    config = load_config(args.config)
    job = (args.tier, args.dataset, args.protocol, args.split, args.model)
    try:
        params = tune_params(config, *job)
    except (KeyError, ValueError) as err:
        raise SystemExit(f"recrepro strong reuse-points: {err}") from None
    grid_file = Path(args.results, args.tier, "baselines", "strong", args.dataset, args.protocol, args.split,
                     args.model, f"split{args.split_seed}", "grid.json")
    if not grid_file.is_file():
        raise SystemExit(f"recrepro strong reuse-points: no grid record {grid_file}")
    split_dir = Path(config["data"]["root"], "splits", args.dataset, args.protocol, args.split, f"seed{args.split_seed}")
    checkpoint = ledger_path(config["checkpoints"], *job, args.split_seed)
    try:
        reused = reuse_points(grid_file, split_dir=split_dir, model=args.model, grid=params["grid"],
                              fixed=params["fixed"], evaluation=params["evaluation"], select=params["select"],
                              seeds=[int(s) for s in params["seeds"].split(",")],
                              batch_size=config["evaluation"]["batch_size"], beyond=params["beyond"],
                              checkpoint=checkpoint, split_checked=args.split_checked)
    except (OSError, ValueError) as err:
        raise SystemExit(f"recrepro strong reuse-points: {err}") from None
    print(f"{checkpoint}: {len(reused)} scored points of {grid_file}; tune it again, scoring only the rest:\n"
          f"  snakemake --cores 1 --force {grid_file} --config tier={args.tier}")


def cmd_strong_table(args: argparse.Namespace) -> None:
    from recrepro.baselines.strong import strong_table

    strong_table(args.grids, args.protocols, results_root=Path(args.results_root), out_md=Path(args.out_md),
                 out_csv=Path(args.out_csv), title=args.title)


def cmd_scorecard(args: argparse.Namespace) -> None:
    from recrepro.config import repo_root
    from recrepro.scorecard import build_scorecard

    if args.summary:
        _scorecard_summary(args)
        return
    missing = [flag for flag, value in (("--paper", args.paper), ("--out-md", args.out_md),
                                        ("--out-csv", args.out_csv)) if not value]
    if missing:
        raise SystemExit(f"recrepro scorecard: {', '.join(missing)} required (or --summary)")
    expected = Path(args.expected) if args.expected else Path(__file__).resolve().parents[1] / "expected" / f"{args.paper}.yaml"
    if args.expected_sha256:
        from recrepro.io import sha256_file

        actual = sha256_file(expected)
        if actual != args.expected_sha256:
            # edited while the run was going: this scorecard uses the new numbers, and the next run
            # (whose param is the new digest) builds it again anyway
            log.warning("%s changed since the run was planned (sha256 %s, planned %s); using it as it is now",
                        expected, actual, args.expected_sha256)
    build_scorecard(
        paper=args.paper,
        tier=args.tier,
        expected_path=expected,
        run_dirs=[Path(p).parent if p.endswith(".json") else Path(p) for p in args.runs],
        out_md=Path(args.out_md),
        out_csv=Path(args.out_csv),
        deviations_doc=Path(args.deviations_doc) if args.deviations_doc else repo_root() / "docs" / "deviations.md",
        seeds_required=args.seeds_required,
        strong_baselines=next((Path(p) for p in args.strong_baselines if p), None),
    )


def _scorecard_summary(args: argparse.Namespace) -> None:
    """Per paper, then one JSON line: published / reachable / run / full budget / within / capped."""
    from recrepro.config import repo_root
    from recrepro.io import read_json
    from recrepro.scorecard import SUMMARY_PAPERS, summarise_scorecards

    results = Path(args.results) if args.results else repo_root() / "results" / args.tier
    availability_file = results / "datasets.json"
    if not availability_file.is_file():
        raise SystemExit(f"recrepro scorecard --summary: {availability_file} not found "
                         "(written by `recrepro data availability`)")
    availability = read_json(availability_file)["datasets"]
    for paper in SUMMARY_PAPERS:
        print(paper, json.dumps(summarise_scorecards(results, availability, papers=[paper]), sort_keys=False))
    print(json.dumps(summarise_scorecards(results, availability), sort_keys=False))


def cmd_records_normalise(args: argparse.Namespace) -> None:
    from recrepro.records import METRICS_FILE, normalise_run_dir

    missing = [root for root in args.paths if not Path(root).is_dir()]
    if missing:  # a typo would otherwise check nothing and say so in passing
        raise SystemExit(f"recrepro records normalise: no such folder: {', '.join(missing)}")
    run_dirs = sorted({p.parent for root in args.paths for p in Path(root).rglob(METRICS_FILE)})
    for run_dir in run_dirs:
        for change in normalise_run_dir(run_dir):
            print(f"{run_dir}: {change}")
    print(f"{len(run_dirs)} run records checked")



def cmd_figure_baselines(args: argparse.Namespace) -> None:
    from recrepro.baselines.figure import figure_baselines

    figure_baselines([Path(p) for p in args.runs], Path(args.out_pdf), Path(args.out_png), tier=args.tier)


# ----------------------------------------------------------------------------- report
def cmd_report_scorecard_html(args: argparse.Namespace) -> None:
    from recrepro.reporting.html import scorecard_html

    scorecard_html(args.md, args.csv, args.out)


def cmd_report_table_html(args: argparse.Namespace) -> None:
    from recrepro.reporting.html import table_html

    table_html(args.md, args.out)


def cmd_report_reference(args: argparse.Namespace) -> None:
    from recrepro.reporting.front_page import reference_readme

    reference_readme(args.results, args.out, deviations_href=args.deviations_href,
                     expected_figures=args.expected_figures)


def cmd_report_compute(args: argparse.Namespace) -> None:
    from recrepro.reporting.compute_page import compute_markdown, compute_table
    from recrepro.io import read_json, write_text

    def json_list(text: str) -> list[str]:
        return json.loads(text if text.lstrip().startswith("[") else Path(text).read_text())

    runs = json_list(args.expected_runs)
    availability = (read_json(args.availability)["datasets"]
                    if args.availability and Path(args.availability).is_file() else {})
    picked = json_list(args.picked_runs) if args.picked_runs else []
    # the picks' runs on every seed are jobs too: known only once a selection has picked, so not among
    # the DAG's planned runs (priced, and queued first)
    known = set(runs)
    runs += [path for path in dict.fromkeys(picked) if path not in known]
    outdated = json.loads(args.outdated if args.outdated.lstrip().startswith("[") else Path(args.outdated).read_text()) \
        if args.outdated else []
    write_text(args.out, compute_markdown(compute_table(runs), availability, picked_runs=picked,
                                          official=[f for f in args.official if f], outdated=outdated))


# ----------------------------------------------------------------------------- parser
def build_parser(papers: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``recrepro`` parser, with the verbs of ``papers`` (default: of every paper).

    :func:`main` asks only for the paper its arguments name, so that a command imports no other
    paper's code.
    """
    parser = argparse.ArgumentParser(prog="recrepro", description=__doc__.splitlines()[0],
                                     epilog="`recrepro <command> --help` lists a command's options, "
                                            "`recrepro <paper> --help` a paper's verbs.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging, and the traceback of an error")
    sub = parser.add_subparsers(title="commands", dest="command", required=True, metavar="<command>")
    add_data_verbs(sub)

    p = add_verb(sub, "baseline", "fit and evaluate a reference baseline on a split", cmd_baseline)
    add_run_arguments(p, seed_required=False)
    p.add_argument("--method", required=True, choices=["mostpop", "random"])

    _add_strong(sub)
    _add_scorecard(sub)
    _add_claims(sub)
    _add_claims_forest(sub)
    _add_leaks(sub)
    _add_records(sub)
    _add_figure_baselines(sub)
    _add_report(sub)

    for name, (description, module) in PAPERS.items():
        p = sub.add_parser(name, help=description, description=description)
        verbs = p.add_subparsers(title="verbs", dest="verb", required=True, metavar="<verb>")
        if papers is None or name in papers:
            importlib.import_module(module).register(verbs)
    return parser


def _add_strong(sub: argparse._SubParsersAction) -> None:
    """``recrepro strong tune|table|drift``: tuned simple baselines on a paper's split (recrepro.baselines.strong)."""
    from recrepro.runtime.options import add_json, int_list
    from recrepro.records.drift import add_drift_verb

    strong = sub.add_parser("strong", help="tuned strong simple baselines (ItemKNN, RP3beta, EASE, iALS, MostPop)")
    verbs = strong.add_subparsers(title="verbs", dest="verb", required=True, metavar="<verb>")
    p = add_verb(verbs, "tune", "search a grid on the validation part, test the pick on every seed", cmd_strong_tune)
    add_run_arguments(p, seed_required=False,
                      checkpoint="a ledger of the grid points scored so far: a job started again skips them")
    p.add_argument("--model", required=True, choices=["mostpop", "itemknn", "rp3beta", "ease", "ials"])
    add_json(p, "--grid", default={}, help="setting -> list of values, as JSON")
    add_json(p, "--fixed", default={}, help="settings not searched, as JSON")
    add_json(p, "--beyond", default={}, help="setting -> values past the grid's range that a pick on its edge "
             "walks through, one step at a time, as JSON")
    p.add_argument("--select", required=True, help="validation metric that picks the point (e.g. ndcg@20)")
    p.add_argument("--seeds", type=int_list, required=True, help="model seeds, comma-separated")
    p = add_verb(verbs, "reuse-points", "hand a grid record's scored points to the job that tunes it again "
                 "(a walk switched on later scores only the points it lacks)", cmd_strong_reuse, tier=True)
    for name in ("dataset", "protocol", "split"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--model", required=True, choices=["mostpop", "itemknn", "rp3beta", "ease", "ials"])
    p.add_argument("--split-seed", type=int, required=True)
    p.add_argument("--config", default="config.yaml", help="the configuration (default: config.yaml)")
    p.add_argument("--results", default="results", help="the results folder (default: results)")
    p.add_argument("--split-checked", default=None,
                   help="where the record's split files have other sha256 and no content digest: how the pairs "
                        "were found the same (kept with each reused point)")
    p = add_verb(verbs, "table", "the strong-baselines table of one paper, from grid.json records", cmd_strong_table,
                 outputs="table")
    add_json(p, "--protocols", required=True, help='"<dataset>/<split>" -> metrics, paper_method, as JSON')
    p.add_argument("--results-root", required=True, help="results/<tier> (the paper method's runs are below it)")
    p.add_argument("--title", required=True)
    p.add_argument("grids", nargs="+", help="grid.json records")
    add_drift_verb(verbs, "strong-baseline", "recrepro.baselines.strong")


def _add_claims(sub: argparse._SubParsersAction) -> None:
    """``recrepro claims``: verdicts on a paper's headline claims, computed from its records."""
    p = add_verb(sub, "claims", "judge a paper's headline claims from its run records (claims.md, claims.csv)",
                 cmd_claims, tier=True, outputs="table")
    p.add_argument("--paper", required=True)
    p.add_argument("--results", required=True, help="results/<tier>/<paper>: its runs/, figures/, tables/, scorecard")
    p.add_argument("--expected", help="the claims (default: the package's expected/<paper>.yaml)")
    p.add_argument("--seeds-required", type=int, default=None,
                   help="seeds the tier runs per cell: a check on fewer is provisional")
    p.add_argument("--out-checks", default=None,
                   help="checks.csv: every check's effect, interval, test and p (the forest plot's input)")
    p.add_argument("--planned-runs", default=None,
                   help="a JSON list of the run records the tier plans: every name a check uses must be known "
                        "to them, the records or the expected entries (a typo is refused)")
    p.add_argument("--leak-audit", default=None, help="results/<tier>/leak_audit.csv: its rows open the page")


def cmd_claims(args: argparse.Namespace) -> None:
    from recrepro.scorecard import expected_path
    from recrepro.scorecard.claimpage import write_claims

    planned = None
    if args.planned_runs:
        planned = json.loads(Path(args.planned_runs).read_text())
        if not isinstance(planned, list) or not all(isinstance(p, str) for p in planned):
            raise SystemExit(f"--planned-runs {args.planned_runs}: expected a JSON list of run record paths")
    write_claims(args.paper, args.tier, args.expected or expected_path(args.paper), args.results,
                 args.out_md, args.out_csv, seeds_required=args.seeds_required, out_checks=args.out_checks,
                 planned=planned, leak_audit=args.leak_audit)


def _add_claims_forest(sub: argparse._SubParsersAction) -> None:
    """``recrepro claims-forest``: the forest plot of a paper's claim checks (from ``recrepro claims``' checks.csv)."""
    p = add_verb(sub, "claims-forest", "forest plot of a paper's claim checks (figures/claims.png|pdf)",
                 cmd_claims_forest, tier=True)
    p.add_argument("--checks", required=True, help="results/<tier>/<paper>/checks.csv")
    p.add_argument("--out-png", required=True)
    p.add_argument("--out-pdf", default=None, help="a PDF too (default: PNG only)")
    p.add_argument("--title", default=None, help="default: '<paper>: claim checks'")


def cmd_claims_forest(args: argparse.Namespace) -> None:
    from recrepro.reporting.claims_forest import draw_claims_forest

    summary = draw_claims_forest(args.checks, args.out_png, args.out_pdf, title=args.title, tier=args.tier)
    log.info("claims forest: %d checks drawn in %d panel(s), %d not drawn -> %s", sum(summary.rows),
             len(summary.panels), summary.not_drawn, args.out_png)


def _add_leaks(sub: argparse._SubParsersAction) -> None:
    """``recrepro leaks audit`` (one split) and ``recrepro leaks table`` (recrepro.papers.leaks, imported
    only when one of them runs: every other command imports no paper's code)."""
    verbs = sub.add_parser("leaks", help="leak audit: can a held-out pair reach training on a split") \
        .add_subparsers(dest="verb", required=True, metavar="<verb>")
    p = verbs.add_parser("audit", help="audit one split under its paper's training negative pools (JSON)")
    p.add_argument("--split-dir", required=True)
    p.add_argument("--paper", required=True, choices=sorted(paperlist.data_protocol_keys()))
    p.add_argument("--negative-pools", nargs="*", default=None, help="FedRAP: its variants' negative_pool values")
    p.add_argument("--out", required=True)
    p.set_defaults(func=lambda a: importlib.import_module("recrepro.papers.leaks").write_audit(
        a.split_dir, a.paper, a.out, {pool: {"negative_pool": pool} for pool in (a.negative_pools or [])}))
    p = verbs.add_parser("table", help="gather the per-split audits (CSV and Markdown)")
    p.add_argument("--out-csv", required=True)
    p.add_argument("--out-md", required=True)
    p.add_argument("audits", nargs="*")
    p.set_defaults(func=lambda a: importlib.import_module("recrepro.papers.leaks").leak_table(
        a.audits, a.out_csv, a.out_md))


def _add_scorecard(sub: argparse._SubParsersAction) -> None:
    """``recrepro scorecard``: runs against the published numbers, or the summary over papers."""
    p = add_verb(sub, "scorecard", "compare runs with the published numbers (or --summary over papers)", cmd_scorecard)
    p.add_argument("--paper")
    p.add_argument("--tier", required=True)
    p.add_argument("--expected", help="published numbers (default: the package's expected/<paper>.yaml)")
    p.add_argument("--expected-sha256", default=None,
                   help="the digest the workflow planned with: a warning when the file changed since")
    p.add_argument("--out-md")
    p.add_argument("--out-csv")
    p.add_argument("--strong-baselines", nargs="*", default=[],
                   help="the paper's tables/strong_baselines.csv: the scorecard shows the strongest tuned baselines")
    p.add_argument("--seeds-required", type=int, default=None,
                   help="seeds the tier runs per cell: fewer is reported as a cap")
    p.add_argument("--summary", action="store_true",
                   help="count published / reachable / run / full-budget / within / capped cells of every paper "
                        "from results/<tier>/<paper>/scorecard.csv and results/<tier>/datasets.json")
    p.add_argument("--results", default=None, help="with --summary: the results/<tier> folder (default: this checkout's)")
    p.add_argument("--deviations-doc", default=None, help="default: docs/deviations.md of this checkout")
    p.add_argument("runs", nargs="*", help="run directories or their metrics.json")


def _add_records(sub: argparse._SubParsersAction) -> None:
    """``recrepro records``: maintenance of committed run records."""
    records = sub.add_parser("records", help="maintain run records")
    rsub = records.add_subparsers(dest="records_command", required=True)
    p = add_verb(rsub, "normalise", "bring records of earlier versions into the current layout (idempotent)",
                 cmd_records_normalise)
    p.add_argument("paths", nargs="+", help="folders searched for run records (metrics.json)")


def _add_figure_baselines(sub: argparse._SubParsersAction) -> None:
    """``recrepro figure-baselines``: the reference baselines' bar chart."""
    p = add_verb(sub, "figure-baselines", "bar chart of the reference baselines", cmd_figure_baselines)
    p.add_argument("--tier", required=True)
    p.add_argument("--out-pdf", required=True)
    p.add_argument("--out-png", required=True)
    p.add_argument("runs", nargs="+")


def _add_report(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="the report's HTML pages and the records' documents")
    verbs = report.add_subparsers(title="verbs", dest="verb", required=True, metavar="<verb>")

    p = add_verb(verbs, "scorecard-html", "render a scorecard.md (+ its .csv verdicts) as one HTML page",
                 cmd_report_scorecard_html)
    p.add_argument("--md", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--out", required=True)

    p = add_verb(verbs, "table-html", "render a Markdown table as one HTML page", cmd_report_table_html)
    p.add_argument("--md", required=True)
    p.add_argument("--out", required=True)

    p = add_verb(verbs, "reference", "the reference reproduction's front page, results/<tier>/README.md",
                 cmd_report_reference)
    p.add_argument("--results", required=True, help="results/<tier>")
    p.add_argument("--out", required=True)
    p.add_argument("--deviations-href", default="../../docs/deviations.md")
    p.add_argument("--expected-figures", nargs="*", default=[],
                   help="every figure (PDF path) the tier draws; the page names those not drawn")

    p = add_verb(verbs, "compute", "docs/compute.md: what the tier's jobs cost and what remains", cmd_report_compute)
    p.add_argument("--expected-runs", required=True,
                   help="the tier's run-record paths: a JSON list, or a file holding one")
    p.add_argument("--availability", default=None, help="results/<tier>/datasets.json")
    p.add_argument("--picked-runs", default=None,
                   help="run records of the weight decays picked for tuned cells (a JSON list, or a file "
                        "holding one): their other seeds queue with the published cells' other seeds")
    p.add_argument("--outdated", default=None,
                   help="grid records the configuration has moved past (recrepro.baselines.strong_drift."
                        "outdated_grids: a JSON list, or a file holding one): queued to be made again")
    p.add_argument("--official", nargs="*", default=[],
                   help="the released FedRAP code's per-round curves (results/paper/fedrap/official/*.jsonl)")
    p.add_argument("--out", required=True)


def _command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (``recrepro -v prism ...``)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    defer_dynamo()  # torch.optim would import the torch.compile tracer: seconds per job, never used here
    args = build_parser(papers=[_command(argv)]).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("fontTools").setLevel(logging.WARNING)  # one line per font subset otherwise
    try:
        if getattr(args, "log", None):
            from recrepro.runtime.run_lock import open_job_log

            open_job_log(args.log, getattr(args, "checkpoint", None))
        set_torch_threads(getattr(args, "threads", None))
        args.func(args)
    except KNOWN_ERRORS as exc:
        # Known failure modes (checksum, format, missing data, non-finite training) are
        # reported as one clear line; the traceback is only shown with -v.
        if args.verbose or os.environ.get(TRACEBACK_ENV):
            raise
        report_error(exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
