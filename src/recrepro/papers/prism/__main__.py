"""``python -m recrepro.papers.prism <command> ...``: see :mod:`recrepro.papers.prism.cli`."""

import sys

from recrepro.entrypoints import run_main
from recrepro.papers.prism.cli import main

sys.exit(run_main(main, prog="python -m recrepro.papers.prism"))
