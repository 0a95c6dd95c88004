"""Imported last by the rank pool's forkserver (after any DISTCHECK_PRELOAD package): from here on,
what the forkserver and every process forked from it imports writes no bytecode (`bytecode_cache`),
so the user's own modules are compiled from their source by every rank, as the interpreter was told.
"""

from __future__ import annotations

from . import bytecode_cache

bytecode_cache.stop_writing()
