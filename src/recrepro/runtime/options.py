"""The options every ``recrepro`` verb spells the same way, shared by the CLI and the papers' verbs.

:mod:`recrepro.cli.main` builds the ``recrepro`` command. Each paper adds its verbs (``recrepro <paper>
<verb>``) with ``register(verbs)`` in ``recrepro.papers.<paper>.cli``, and builds their options
from these helpers, so ``--tier``, ``--dataset``, ``--out-pdf``/``--out-png``, ``--out-md``/``--out-csv``,
``--seed``, ``--threads``, ``--device``, the options of a training run (``--split-dir``,
``--out-dir``, ``--evaluation``, ``--meta``, ``--batch-size``, ``--benchmark-file``,
``--checkpoint``) and the JSON-valued options (``--tier-conf``, ``--switches``, ``--settings``, ...)
mean the same thing in every verb.

This module sits below the papers (docs/architecture.md), so a paper's verbs never import the
CLI module above them. It imports nothing heavy: building the parser must not import torch.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recrepro.runtime.devices import add_device_argument

__all__ = [
    "TrainMode", "add_dataset", "add_device_argument", "add_figure_outputs", "add_json", "add_run_arguments",
    "add_seed", "add_table_outputs", "add_threads", "add_tier", "add_train_verb", "add_verb", "int_list", "json_arg",
    "release_mode_options", "run_train_mode", "set_torch_threads",
]


def json_arg(text: str) -> Any:
    """An option's value as JSON (rules pass settings, sections and lists as JSON: ``as_json``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc


def int_list(text: str) -> list[int]:
    """Comma-separated integers: ``0,1,2``."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from exc


def add_json(parser: argparse.ArgumentParser, flag: str, *, required: bool = False, default: Any = None,
             help: str | None = None) -> None:
    """A JSON-valued option (``--settings '{"dim": 8}'``)."""
    parser.add_argument(flag, type=json_arg, required=required, default=None if required else default,
                        metavar="JSON", help=help)


def add_tier(parser: argparse.ArgumentParser) -> None:
    """``--tier`` (smoke, paper): named in every figure's caption and table's title."""
    parser.add_argument("--tier", required=True, help="the tier the outputs belong to (smoke, paper)")


def add_dataset(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    parser.add_argument("--dataset", required=True, help=help)


def add_figure_outputs(parser: argparse.ArgumentParser) -> None:
    """``--out-pdf`` and ``--out-png``: every figure is written in both formats."""
    parser.add_argument("--out-pdf", required=True)
    parser.add_argument("--out-png", required=True)


def add_table_outputs(parser: argparse.ArgumentParser) -> None:
    """``--out-md`` and ``--out-csv``: every table is written in both formats."""
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-csv", required=True)


def add_verb(verbs: argparse._SubParsersAction, name: str, help: str, func: Any, *, tier: bool = False,
             outputs: str | None = None) -> argparse.ArgumentParser:
    """One verb, ``name``, that calls ``func(args)``; the verb's own options are added to the parser returned.

    ``tier``: it takes ``--tier`` (:func:`add_tier`); ``outputs``: ``"figure"`` (:func:`add_figure_outputs`)
    or ``"table"`` (:func:`add_table_outputs`) where it writes one.
    """
    parser = verbs.add_parser(name, help=help)
    if tier:
        add_tier(parser)
    if outputs is not None:
        {"figure": add_figure_outputs, "table": add_table_outputs}[outputs](parser)
    parser.set_defaults(func=func)
    return parser


def add_seed(parser: argparse.ArgumentParser, *, required: bool = False, default: int = 0) -> None:
    parser.add_argument("--seed", type=int, required=required, default=None if required else default)


def add_threads(parser: argparse.ArgumentParser, *, default: int | None = None, help: str | None = None) -> None:
    """``--threads N``: torch's intra-op threads for the job (:func:`set_torch_threads`; unset: torch's default)."""
    parser.add_argument("--threads", type=int, default=default,
                        help=help or "torch threads (the rule passes its `threads:`); default: torch's own")


def set_torch_threads(threads: int | None) -> None:
    """Apply ``--threads`` (nothing when it is not given)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def add_run_arguments(parser: argparse.ArgumentParser, *, seed_required: bool = True, evaluation: bool = True,
                      batch_size: bool = True, checkpoint: str | None = None) -> None:
    """The options of a verb that trains on one split and writes one run record.

    ``--split-dir``, ``--seed``, ``--out-dir`` (the run record), ``--meta`` (JSON merged into the
    record's metadata), ``--evaluation`` (the split's evaluation section, JSON), ``--device``,
    ``--batch-size`` (evaluation), ``--benchmark-file`` (the rule's benchmark, read into
    ``provenance.json``) and, where the trainer can resume, ``--checkpoint`` (``checkpoint``:
    its help text) and ``--log`` (:func:`~recrepro.runtime.run_lock.open_job_log`).
    """
    parser.add_argument("--split-dir", required=True, help="data/splits/<dataset>/<protocol>/<split>/seed<k>")
    add_seed(parser, required=seed_required)
    parser.add_argument("--out-dir", required=True, help="the run record's folder")
    if evaluation:
        add_json(parser, "--evaluation", required=True, help="the split's evaluation section as JSON")
    add_json(parser, "--meta", default={}, help="metadata merged into the run record, as JSON")
    add_device_argument(parser)
    if batch_size:
        parser.add_argument("--batch-size", type=int, default=2048, help="users per evaluation batch")
    parser.add_argument("--benchmark-file", default=None, help="the rule's benchmark file (read into provenance.json)")
    if checkpoint is not None:
        parser.add_argument("--checkpoint", default=None, metavar="PATH", help=checkpoint)
        parser.add_argument("--log", default=None, metavar="PATH",
                            help="write stdout and stderr here, opened only once this process holds the "
                                 "checkpoint's lock (a second job of a running run leaves its log alone)")


def check_mode_options(args: argparse.Namespace, modes: Mapping[str, Sequence[str]]) -> None:
    """A usage error naming the options ``--mode`` needs (``modes[args.mode]``) that the command line lacks.

    argparse requires an option of every mode or of none, so a verb with modes (``train --mode ...``)
    declares its mode's options optional and checks them here.
    """
    missing = [flag for flag in modes[args.mode] if getattr(args, flag[2:].replace("-", "_")) is None]
    if missing:
        args.usage_error(f"--mode {args.mode} needs {', '.join(missing)}")


@dataclass(frozen=True)
class TrainMode:
    """One ``--mode`` of a paper's ``train`` verb: the function that runs it, the options it needs
    besides those every mode takes (:func:`check_mode_options`) and what it makes (``--help``)."""

    run: Callable[[argparse.Namespace], None]
    needs: tuple[str, ...]
    help: str


def run_train_mode(args: argparse.Namespace, modes: Mapping[str, TrainMode]) -> None:
    """Run ``train --mode <args.mode>``: a usage error naming what the mode lacks, else its function."""
    check_mode_options(args, {name: mode.needs for name, mode in modes.items()})
    modes[args.mode].run(args)


def add_train_verb(verbs: argparse._SubParsersAction, help: str, modes: Mapping[str, TrainMode], *,
                   default: str | None) -> argparse.ArgumentParser:
    """A paper's ``train`` verb with ``--mode`` (``default``; ``None``: ``--mode`` is required) over ``modes``,
    run by :func:`run_train_mode`; its options are added to the parser returned. ``--mode``'s help names
    what each mode makes and needs."""
    parser = verbs.add_parser("train", help=help)
    mode_help = "; ".join(f"{name}{' (default)' if name == default else ''}: {mode.help} ({', '.join(mode.needs)})"
                          for name, mode in modes.items())
    parser.add_argument("--mode", choices=list(modes), default=default, required=default is None, help=mode_help)
    parser.set_defaults(func=functools.partial(run_train_mode, modes=modes), usage_error=parser.error)
    return parser


def release_mode_options(parser: argparse.ArgumentParser, *dests: str) -> None:
    """Make options that :func:`add_run_arguments` requires but only some modes need optional
    (:func:`run_train_mode` checks them per mode)."""
    for action in parser._actions:
        if action.dest in dests:
            action.required = False
