import sys

from recrepro.cli import main

sys.exit(main())
