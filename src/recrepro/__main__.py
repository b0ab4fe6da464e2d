import sys

from recrepro.cli.main import main

sys.exit(main())
