"""Run records against the configuration they would be made under today (shared by the ``drift``
verbs of the papers, e.g. :mod:`recrepro.papers.lambdaopt.drift`, and of the strong baselines,
:func:`recrepro.baselines.strong.record_drift`).

A committed record keeps the configuration slice it ran under (``provenance.json``: ``config``).
Snakemake reruns a job whose parameters changed only where its own metadata remembers them, which a
fresh clone does not: there a record made under settings the configuration no longer gives would be
redrawn as if it were current.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recrepro.runtime.options import add_verb

if TYPE_CHECKING:  # the papers' CLIs import this module to register their verb: no pandas at start-up
    import pandas as pd

__all__ = ["DRIFT_COLUMNS", "OUTDATED", "add_drift_verb", "compare_settings", "drift_frame", "records_drift",
           "report_drift"]

DRIFT_COLUMNS = ["record", "setting", "recorded", "now", "same_record", "why"]
#: Why a difference makes a record outdated, unless a paper shows it cannot change the record.
OUTDATED = "rerun the record: it was made under other settings"

#: ``(run_dir, setting, recorded, now) -> (same_record, why)``, or ``None`` for "outdated".
Equivalence = Callable[[Path, str, Any, Any], "tuple[bool, str] | None"]


def compare_settings(run_dir: Path, recorded: Mapping[str, Mapping[str, Any]], now: Mapping[str, Mapping[str, Any]],
                     equivalent: Equivalence | None = None) -> list[dict[str, Any]]:
    """One row per setting in which ``recorded`` and ``now`` differ (both ``{part: {key: value}}``,
    e.g. ``settings`` and ``evaluation``); ``equivalent`` may show that a difference leaves the record
    as it is."""
    rows = []
    for part in sorted(set(recorded) | set(now)):
        old, new = recorded.get(part) or {}, now.get(part) or {}
        for key in sorted(set(old) | set(new)):
            if old.get(key) == new.get(key):
                continue
            setting = f"{part}.{key}"
            verdict = equivalent(run_dir, setting, old.get(key), new.get(key)) if equivalent else None
            same, why = verdict if verdict is not None else (False, OUTDATED)
            rows.append({"record": str(run_dir), "setting": setting, "recorded": old.get(key), "now": new.get(key),
                         "same_record": same, "why": why})
    return rows


#: ``(run_dir, provenance) -> (recorded, now)``: a record's settings as it ran and as the configuration
#: gives them today, both ``{part: {key: value}}``.
Slices = Callable[[Path, Mapping[str, Any]], "tuple[Mapping[str, Any], Mapping[str, Any]]"]


def records_drift(runs_dir: str | Path, pattern: str, slices: Slices,
                  equivalent: Equivalence | None = None) -> pd.DataFrame:
    """:func:`compare_settings` over every run record whose ``provenance.json`` matches ``pattern``
    under ``runs_dir`` (sorted), as a :func:`drift_frame`."""
    from recrepro.io import read_json

    rows = []
    for prov_file in sorted(Path(runs_dir).glob(pattern)):
        recorded, now = slices(prov_file.parent, read_json(prov_file))
        rows += compare_settings(prov_file.parent, recorded, now, equivalent)
    return drift_frame(rows)


def drift_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows of :func:`compare_settings` as a frame with :data:`DRIFT_COLUMNS` (empty: none)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=DRIFT_COLUMNS)


def report_drift(drift: pd.DataFrame, paper: str) -> int:
    """Print one line per difference ("same record" / "OUTDATED"); 1 if any record is outdated, else 0."""
    if drift.empty:
        print(f"every {paper} record was made under the settings the configuration gives today")
        return 0
    for row in drift.itertuples(index=False):
        state = "same record" if row.same_record else "OUTDATED"
        print(f"{state}: {row.record}: {row.setting} {row.recorded!r} -> {row.now!r} ({row.why})")
    return 0 if drift["same_record"].all() else 1


def add_drift_verb(verbs: Any, paper: str, module: str) -> None:
    """``recrepro <paper> drift``: the paper's records made under other settings than the
    configuration gives today (``module``'s ``record_drift``); exit status 1 if any is outdated."""
    import argparse

    def command(args: argparse.Namespace) -> None:
        import importlib
        import sys

        from recrepro.config import load_config

        drift = importlib.import_module(module).record_drift(load_config(args.config), args.tier, args.results)
        status = report_drift(drift, paper)
        if status:
            sys.exit(status)

    p = add_verb(verbs, "drift", "run records made under other settings than the configuration gives "
                 "today (exit status 1 if any is outdated)", command)
    p.add_argument("--tier", required=True, help="the tier whose records are checked (smoke, paper)")
    p.add_argument("--config", default="config.yaml", help="the configuration (default: config.yaml)")
    p.add_argument("--results", default="results", help="the results folder (default: results)")
