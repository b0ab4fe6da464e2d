"""``python -m recrepro.papers.lambdaopt <command> ...``: see :mod:`recrepro.papers.lambdaopt.experiments`."""

import sys

from recrepro.entrypoints import run_main
from recrepro.papers.lambdaopt.experiments import main

sys.exit(run_main(main, prog="python -m recrepro.papers.lambdaopt"))
