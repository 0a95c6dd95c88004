"""What the rank pool's forkserver imported for every process, recorded once it had: imported by the
forkserver only, last of `spares_start.BASE_PRELOAD` (before any `DISTCHECK_PRELOAD` package), so every
process forked from it finds `MODULES` in `sys.modules` as it was before any target's code ran.
Nothing else imports this module: imported elsewhere, it would record that process's own modules.
"""

from __future__ import annotations

import sys

__all__ = ["MODULES"]

MODULES: frozenset[str] = frozenset(sys.modules)
"""The names in `sys.modules` once torch, distcheck's runtime and their dependencies were imported."""
