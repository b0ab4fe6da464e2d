"""``recrepro data ...``: the verbs that fetch, describe, preprocess and split datasets, and say which
datasets a mirror holds (registered by :func:`recrepro.cli.main.build_parser`).

They import no paper's code (nor torch): ``recrepro data ...`` starts fast.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from recrepro.runtime.options import add_verb, json_arg

__all__ = ["add_data_verbs"]

# the command line's one logger: a data verb's lines read like every other verb's
log = logging.getLogger("recrepro")


def _load_config(path: str | None) -> dict[str, Any]:
    """Read a config file and fill defaults from the schema, as the workflow does."""
    from recrepro.config import load_config

    return load_config(path or "config.yaml")


def cmd_data_synth(args: argparse.Namespace) -> None:
    from recrepro.datasets.synthetic import SyntheticSpec, generate_synthetic
    from recrepro.io import write_json, write_parquet

    spec = SyntheticSpec(**args.spec)
    frame = generate_synthetic(spec)
    out = Path(args.raw_dir)
    write_parquet(out / "interactions.parquet", frame)
    write_json(out / "synthetic.json", {"spec": spec.to_dict(), "rows": len(frame)})
    log.info("synthetic: %d interactions, %d users, %d items", len(frame), spec.users, spec.items)


def cmd_data_fetch(args: argparse.Namespace) -> None:
    from recrepro.datasets import fetch_dataset

    mirror = Path(args.mirror) if args.mirror else None
    from recrepro.datasets.download import ExpansionCap

    cap = ExpansionCap(size_factor=args.unverified_size_factor, max_ratio=args.unverified_max_ratio)
    path = fetch_dataset(args.dataset, Path(args.raw_dir), mirror=mirror, urls_allowed=not args.no_download,
                         strict=args.strict_checksums, cap=cap)
    log.info("fetched %s -> %s", args.dataset, path)


def _optional_float(text: str) -> float | None:
    """A positive number, or ``none``/``null`` for no bound (the fetch's expansion caps)."""
    if text.lower() in ("none", "null"):
        return None
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 or 'none', got {text!r}")
    return value


def cmd_data_describe(args: argparse.Namespace) -> None:
    from recrepro.datasets import get_dataset

    spec = get_dataset(args.dataset)
    print(f"{spec.name}: {spec.description}")
    print(f"  urls: {', '.join(spec.urls) or '(none)'}")
    print(f"  files: {', '.join(spec.members)}")
    print(f"  licence: {spec.licence}")
    for form in spec.forms:  # what a mirror may hold instead (docs/deviations.md)
        print(f"  form {form.name!r} (<mirror>/{form.folder}/{', '.join(form.members)}): {form.description}; "
              f"lacks {', '.join(form.lacks)}; serves {', '.join(form.papers)} (docs/deviations.md#{form.deviation})")
    if spec.manual_instructions:
        print(f"  by hand: {spec.manual_instructions}")
    processed = Path(args.data_root) / "processed" / spec.name
    for stats_file in sorted(processed.glob("*/stats.json")):
        stats = json.loads(stats_file.read_text())
        print(f"  {stats_file.parent.name}: {stats['users']:,} users, {stats['items']:,} items, "
              f"{stats['interactions']:,} interactions, density {stats['density']:.5f}")


def cmd_data_summary(args: argparse.Namespace) -> None:
    from recrepro.datasets.statistics import summary_frame
    from recrepro.io import write_text

    frame = summary_frame([json.loads(Path(f).read_text()) for f in args.stats])
    write_text(args.out_csv, frame.to_csv(index=False))
    print(frame.to_string(index=False))


def cmd_data_preprocess(args: argparse.Namespace) -> None:
    from recrepro.datasets import get_dataset, load_raw
    from recrepro.datasets.download import verify_raw_files
    from recrepro.datasets.preprocessing import preprocess, resolve_recipe, write_preprocessed

    cfg = _load_config(args.config) if args.protocols is None else None
    protocols = args.protocols if args.protocols is not None else cfg["protocols"]
    switches = args.switches if args.switches is not None else (cfg or {}).get("switches", {})
    recipe = resolve_recipe(protocols, args.protocol, args.dataset, switches)
    raw_dir = Path(args.raw_dir or Path(args.data_root) / "raw" / args.dataset)
    out_dir = Path(args.out_dir or Path(args.data_root) / "processed" / args.dataset / args.protocol)
    if not get_dataset(args.dataset).generated:
        # a byte changed in data/raw/ after the fetch must not flow into the processed data
        started = time.perf_counter()
        verify_raw_files(get_dataset(args.dataset), raw_dir)
        log.info("%s: raw files match fetch.json (size, sha256) [%.2f s]", args.dataset,
                 time.perf_counter() - started)
    result = preprocess(load_raw(args.dataset, raw_dir), recipe)
    write_preprocessed(result, out_dir)
    stats = result.stats()
    log.info("%s/%s: %d users, %d items, %d interactions", args.dataset, args.protocol,
             stats["users"], stats["items"], stats["interactions"])


def cmd_data_split(args: argparse.Namespace) -> None:
    from recrepro.io import sha256_file
    from recrepro.datasets.preprocessing import read_interactions
    from recrepro.datasets.splits import make_split, write_split

    processed = Path(args.processed_dir)
    data = read_interactions(processed)
    split = make_split(data, args.split, args.params, args.seed)
    meta = {
        "dataset": processed.parent.name,
        "protocol": processed.name,
        "seed": args.seed,
        "source": {"interactions.parquet": sha256_file(processed / "interactions.parquet")},
    }
    path = write_split(split, Path(args.out_dir), meta)
    log.info("%s: %s", path, {k: len(v) for k, v in split.parts.items()})


def cmd_data_availability(args: argparse.Namespace) -> None:
    from recrepro.datasets.download import dataset_availability
    from recrepro.io import write_json

    availability = dataset_availability(args.mirror)
    # the mirror's location stays on this machine: the record says what it held, not where
    write_json(Path(args.out), {"datasets": availability})
    for name, state in availability.items():
        print(f"{name:24s} {state}")


def add_data_verbs(sub: argparse._SubParsersAction) -> None:
    """``recrepro data``: the verbs that fetch, describe, preprocess and split datasets."""
    data = sub.add_parser("data", help="fetch, describe, preprocess and split datasets")
    dsub = data.add_subparsers(dest="data_command", required=True)

    p = add_verb(dsub, "synth", "generate the embedded synthetic dataset", cmd_data_synth)
    p.add_argument("--raw-dir", default="data/raw/synthetic")
    p.add_argument("--spec", type=json_arg, default={}, help="SyntheticSpec fields as JSON")

    p = add_verb(dsub, "fetch", "fetch a dataset from the mirror or its canonical URLs, verified", cmd_data_fetch)
    p.add_argument("dataset")
    p.add_argument("--raw-dir", required=True)
    p.add_argument("--mirror", default=None)
    p.add_argument("--no-download", action="store_true", help="never use the network")
    p.add_argument("--strict-checksums", action="store_true",
                   help="refuse files with no published digest instead of trusting them on first use")
    # an archive with no published digest expands at most this far (config data.unverified_archive)
    p.add_argument("--unverified-size-factor", type=_optional_float, default=4.0,
                   help="times the registry's expected size of the dataset ('none': no bound)")
    p.add_argument("--unverified-max-ratio", type=_optional_float, default=100.0,
                   help="times the archive's own size ('none': no bound)")

    p = add_verb(dsub, "availability", "which datasets a mirror holds (results/<tier>/datasets.json)",
                 cmd_data_availability)
    p.add_argument("--mirror", default=None)
    p.add_argument("--out", required=True)

    p = add_verb(dsub, "describe", "print a dataset's registry entry and processed statistics", cmd_data_describe)
    p.add_argument("dataset")
    p.add_argument("--data-root", default="data")

    p = add_verb(dsub, "summary", "the sizes and recipe of processed datasets, for a results page (CSV)",
                 cmd_data_summary)
    p.add_argument("stats", nargs="+", help="processed stats.json files")
    p.add_argument("--out-csv", required=True)

    p = add_verb(dsub, "preprocess", "apply a protocol and write processed parquet", cmd_data_preprocess)
    p.add_argument("dataset")
    p.add_argument("--protocol", required=True)
    p.add_argument("--config", default=None, help="config file (default config.yaml)")
    p.add_argument("--protocols", type=json_arg, default=None, help="protocols section as JSON (overrides --config)")
    p.add_argument("--switches", type=json_arg, default=None)
    p.add_argument("--data-root", default="data")
    p.add_argument("--raw-dir", default=None)
    p.add_argument("--out-dir", default=None)

    p = add_verb(dsub, "split", "write one split of a processed dataset", cmd_data_split)
    p.add_argument("--processed-dir", required=True)
    p.add_argument("--split", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--params", type=json_arg, default={})
    p.add_argument("--out-dir", required=True)
