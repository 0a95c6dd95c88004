"""`python -m distcheck validate ...`: the same command line as the `distcheck` script."""

from __future__ import annotations

import sys

from distcheck.cli import main

if __name__ == "__main__":
    sys.exit(main())
