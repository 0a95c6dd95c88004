"""torch imported by distcheck's own processes (the CLI, the editor's runner) with its bytecode kept
where it was installed without any (`processes.bytecode_cache`), and the CLI's one-line notice where every
new process still compiles it from source. No torch until `import_torch` is called.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

from ..processes import bytecode_cache
from ..processes.spares.settings import bytecode_cache_enabled

__all__ = ["bytecode_notice", "import_torch"]


def import_torch() -> None:
    """Import torch in this process; where it was installed without bytecode and none is written, its
    bytecode (and every installed module's this process imports after) is read from distcheck's cache,
    compiled into it the first time (`bytecode_cache.use`)."""
    bytecode_cache.use()
    with contextlib.suppress(ImportError):  # no torch: the target's load says so, with what to do
        import torch  # noqa: F401


def bytecode_notice(packages: Sequence[str] = bytecode_cache.SLOW_TO_COMPILE) -> str | None:
    """One line for the user when new processes here compile `packages` from source
    (`bytecode_cache.uncompiled`) and distcheck's cache does not stand in for the bytecode (turned off,
    or no private directory for it), with what to do; None otherwise."""
    dirs = bytecode_cache.uncompiled(packages)
    if not dirs or bytecode_cache.use() is not None:
        return None
    names = ", ".join(os.path.basename(d) for d in dirs)
    command = f"`{os.path.basename(sys.executable)} -m compileall -q -j 0 {' '.join(dirs)}`"
    instead = "" if bytecode_cache_enabled() else " (or unset DISTCHECK_BYTECODE_CACHE=0 to let distcheck keep it)"
    return (
        f"every new Python process here compiles {names} from source (no bytecode was installed and none is "
        f"written), seconds at the start of each validation; compile them once: {command}{instead}"
    )
