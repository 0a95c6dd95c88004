"""`python -m distcheck.lsp`: the distcheck language server on stdio."""

from __future__ import annotations

import sys

from distcheck.lsp.server import main

if __name__ == "__main__":
    sys.exit(main())
