"""``python -m recrepro.papers.prism <command> ...``: see :mod:`recrepro.papers.prism.cli`."""

import sys

from recrepro.papers.prism.cli import main

sys.exit(main())
