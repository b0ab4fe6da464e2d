"""Paper-vs-ours scorecard: expected-number files, run aggregation and paired tests.

``src/recrepro/expected/<paper>.yaml`` lists the numbers a paper publishes (schema in
``src/recrepro/expected/README.md``; validated by :func:`load_expected`).
:func:`build_scorecard` reads the runs' ``metrics.json``/``per_user.parquet``, averages
each (dataset, split, method) over seeds, compares with the published numbers and
writes ``scorecard.csv`` and ``scorecard.md``.

One step a module, each using only the ones above it:

- :mod:`~recrepro.scorecard.expected`: load the published numbers (``expected/<paper>.yaml``);
- :mod:`~recrepro.scorecard.runs`: load the run records into one table, and look up in it;
- :mod:`~recrepro.scorecard.stats`: seed mean and sd, paired tests against a baseline;
- :mod:`~recrepro.scorecard.match`: each published cell with its runs, and the runs no cell claims;
- :mod:`~recrepro.scorecard.judge`: verdict (tolerance), seeds, caps, tests; the smoke checks;
- :mod:`~recrepro.scorecard.render`: the csv rows and the Markdown page;
- :mod:`~recrepro.scorecard.build`: :func:`build_scorecard`, the steps in order, and the files;
- :mod:`~recrepro.scorecard.summary`: the counts over papers (``recrepro scorecard --summary``).

This package re-exports what the rest of ``recrepro``, the rules and the tests use.
"""

from recrepro.scorecard.build import Scorecard, build_scorecard
from recrepro.scorecard.expected import (
    ExpectedFileError,
    FigurePoint,
    SmokeCheck,
    expected_path,
    figure_points,
    load_expected,
    parse_metric_key,
    published_value,
    published_values,
)
from recrepro.scorecard.render import ALTERNATIVE_PREFIX, SCORECARD_COLUMNS, alternative_phrase
from recrepro.scorecard.runs import ScorecardError, find_run_dirs, load_runs
from recrepro.scorecard.summary import SUMMARY_PAPERS, summarise_scorecards

__all__ = [
    "ALTERNATIVE_PREFIX",
    "SCORECARD_COLUMNS",
    "SUMMARY_PAPERS",
    "ExpectedFileError",
    "FigurePoint",
    "Scorecard",
    "ScorecardError",
    "SmokeCheck",
    "alternative_phrase",
    "build_scorecard",
    "expected_path",
    "figure_points",
    "find_run_dirs",
    "load_expected",
    "load_runs",
    "parse_metric_key",
    "published_value",
    "published_values",
    "summarise_scorecards",
]
