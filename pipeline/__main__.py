"""`python -m ldpsim.pipeline` is the `ldpsim` command."""

import sys

from ldpsim.pipeline.cli import main

sys.exit(main())
