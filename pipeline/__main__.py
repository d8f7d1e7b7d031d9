"""`python -m pipeline` is the `ldpsim` command."""

import sys

from pipeline.cli import main

sys.exit(main())
