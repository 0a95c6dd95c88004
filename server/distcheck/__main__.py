"""`python -m distcheck validate ...`: the same command line as the `distcheck` script."""

from __future__ import annotations

from distcheck.cli import run

if __name__ == "__main__":
    run()
