"""What the rank pool's forkserver imported for every process, recorded once it had: imported by the
forkserver only, last of `forkserver.BASE_PRELOAD` (before any `DISTCHECK_PRELOAD` package), so every
process forked from it finds `MODULES` in `sys.modules` as it was before any target's code ran.

It also freezes what is alive by then (`gc.freeze`): those objects (torch's, sympy's, ...) live as long
as the process, so no collection in a process forked from the pool walks them: unfrozen, a resident
rank's full collection between two runs (`resident.RankState.restore`) walks all of torch's objects,
frozen it walks only what the run left (`bench/RESULTS_gpu.md`).
Nothing else imports this module: imported elsewhere, it would record that process's own modules and
freeze its objects.
"""

from __future__ import annotations

import gc
import sys

from ..runtime.frames import is_user_file

__all__ = ["MODULES"]

# which directories are never the user's is read once here (sysconfig imports its data module for it,
# which a resident rank's first restore would otherwise pay), not by every process forked from the pool
is_user_file(__file__)

MODULES: frozenset[str] = frozenset(sys.modules)
"""The names in `sys.modules` once torch, distcheck's runtime and their dependencies were imported."""

gc.freeze()
