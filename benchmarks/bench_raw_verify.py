"""Cost of re-verifying raw files before preprocessing (issue 22, item 2).

For every dataset of the mirror: fetch it into a temporary folder, then time
:func:`recrepro.datasets.download.verify_raw_files` (size + sha256 against ``fetch.json``)
and the parse + preprocessing that follows it in ``recrepro data preprocess``. Best of 3
(the page cache is warm after the fetch: a cold read adds the disk's read time to both).

    python3 benchmarks/bench_raw_verify.py [--mirror ../shared/datasets]

Prints one JSON line per dataset: MB read, verification and preprocessing seconds, their
ratio and the sha256 throughput.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from recrepro.config import load_config, repo_root
from recrepro.datasets import fetch_dataset, get_dataset, load_raw
from recrepro.datasets.download import verify_raw_files
from recrepro.datasets.preprocessing import preprocess, resolve_recipe

CASES = [("ml-100k", "lambdaopt"), ("hetrec2011-lastfm-2k", "fedrap"), ("amazon-video", "fedrap"),
         ("epinions", "exadmm"), ("gowalla", "prism"), ("tafeng", "fedrap")]


def _best(func, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default=str(repo_root().parent / "shared" / "datasets"))
    args = parser.parse_args()
    cfg = load_config(repo_root() / "config.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        for name, protocol in CASES:
            spec = get_dataset(name)
            raw = Path(tmp) / name
            fetch_dataset(name, raw, mirror=args.mirror, urls_allowed=False)
            size_mb = sum((raw / m).stat().st_size for m in spec.members) / 1e6
            recipe = resolve_recipe(cfg["protocols"], protocol, name, cfg["switches"])
            verify_s = _best(lambda: verify_raw_files(spec, raw))
            preprocess_s = _best(lambda: preprocess(load_raw(name, raw), recipe))
            print(json.dumps({"dataset": name, "MB": round(size_mb, 1), "verify_s": round(verify_s, 3),
                              "parse_preprocess_s": round(preprocess_s, 3),
                              "verify_pct_of_preprocess": round(100 * verify_s / preprocess_s, 1),
                              "sha256_MB_per_s": round(size_mb / verify_s)}))


if __name__ == "__main__":
    main()
