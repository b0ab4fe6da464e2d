"""Command line of the PRISM rules: ``train``, ``figure-wd``, ``figure-magnitudes``, ``table``,
``figure`` (Figs. 3-11 from a workflow spec) and ``figure-theory`` (Fig. 7)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from recrepro.devices import add_device_argument

__all__ = ["main"]


def _json(text: str):
    return json.loads(text)


def _run_dirs(paths: list[str]) -> list[Path]:
    return [Path(p).parent if p.endswith(".json") else Path(p) for p in paths]


def cmd_train(args: argparse.Namespace) -> None:
    from recrepro.papers.prism.experiments import run_method

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
    from recrepro.papers.prism.experiments import table_prism

    frame = table_prism(_run_dirs(args.runs), Path(args.out_md), Path(args.out_csv),
                        Path(args.tuned_root) if args.tuned_root else None, tier=args.tier, dataset=args.dataset,
                        backbones=args.backbones, losses=args.losses, weight_decays=args.weight_decays,
                        alpha=args.alpha, selection=read_json(args.selection) if args.selection else None)
    print(frame.to_string())


def cmd_select_wd(args: argparse.Namespace) -> None:
    from recrepro.io import write_json
    from recrepro.papers.prism.experiments import select_weight_decay

    selection = select_weight_decay(_run_dirs(args.runs), backbones=args.backbones, losses=args.losses,
                                    weight_decays=args.weight_decays)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m recrepro.papers.prism")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train one method on one split seed and write its run record")
    p.add_argument("--split-dir", required=True)
    p.add_argument("--method", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--tier-conf", type=_json, required=True)
    p.add_argument("--switches", type=_json, required=True)
    p.add_argument("--evaluation", type=_json, required=True)
    p.add_argument("--meta", type=_json, default={})
    add_device_argument(p)
    p.add_argument("--batch-size", type=int, default=2048)
    p.add_argument("--benchmark-file", default=None)
    p.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="save the training state here after every epoch and resume from it when rerun "
                        "(deleted once the run record is written); default: no checkpointing")
    p.set_defaults(func=cmd_train)

    for name, func in (("figure-wd", cmd_figure_wd), ("figure-magnitudes", cmd_figure_magnitudes),
                       ("table", cmd_table)):
        p = sub.add_parser(name)
        p.add_argument("--tier", required=True)
        p.add_argument("--dataset", required=True)
        if name == "table":
            p.add_argument("--out-md", required=True)
            p.add_argument("--out-csv", required=True)
            p.add_argument("--tuned-root", default=None)
            p.add_argument("--selection", default=None, help="the tuned-λ pick (select-wd); default: mean validation over the runs")
            p.add_argument("--backbones", nargs="+", required=True)
            p.add_argument("--alpha", type=float, default=1.0)
        else:
            p.add_argument("--out-pdf", required=True)
            p.add_argument("--out-png", required=True)
        if name == "figure-wd":
            p.add_argument("--backbone", default="mf")
            p.add_argument("--batched", action="store_true")
        if name == "figure-magnitudes":
            p.add_argument("--titles", nargs="+", required=True)
        else:
            p.add_argument("--losses", nargs="+", required=True)
            p.add_argument("--weight-decays", type=float, nargs="+", required=True)
        p.add_argument("--runs", nargs="+", required=True)
        p.set_defaults(func=func)

    p = sub.add_parser("select-wd", help="Table 1's tuned λ per (backbone, loss) from the grid runs' validation")
    p.add_argument("--backbones", nargs="+", required=True)
    p.add_argument("--losses", nargs="+", required=True)
    p.add_argument("--weight-decays", type=float, nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--runs", nargs="*", default=[])
    p.set_defaults(func=cmd_select_wd)

    p = sub.add_parser("figure", help="one of Figs. 3-11 from a JSON spec (recrepro.papers.prism.workflow)")
    p.add_argument("--spec", type=_json, required=True)
    p.add_argument("--tier", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--out-pdf", required=True)
    p.add_argument("--out-png", required=True)
    p.add_argument("--runs", nargs="+", required=True)
    p.set_defaults(func=cmd_figure)

    p = sub.add_parser("figure-theory", help="Fig. 7: Theorem 3.1's magnitude change over degree x batch fraction")
    p.add_argument("--tier", required=True)
    p.add_argument("--out-pdf", required=True)
    p.add_argument("--out-png", required=True)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=1e-6)
    p.add_argument("--norm", type=float, default=1.0)
    p.add_argument("--cosine", type=float, default=0.9)
    p.add_argument("--max-degree", type=float, default=1e4)
    p.add_argument("--batch-fractions", type=float, nargs=2, default=[1e-4, 1.0])
    p.set_defaults(func=cmd_figure_theory)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("fontTools").setLevel(logging.WARNING)
    args.func(args)
    return 0
