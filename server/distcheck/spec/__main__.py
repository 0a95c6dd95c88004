"""`python -m distcheck.spec`: see `distcheck.spec.cli`."""

import sys

from .cli import main

sys.exit(main())
