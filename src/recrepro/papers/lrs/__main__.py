"""``python -m recrepro.papers.lrs <command> ...``: see :mod:`recrepro.papers.lrs.experiments`."""

import sys

from recrepro.entrypoints import run_main
from recrepro.papers.lrs.experiments import main

sys.exit(run_main(main, prog="python -m recrepro.papers.lrs"))
