"""Whether every new Python process here compiles torch from source, and what to run once instead.

A validation's first processes import torch (the pool's forkserver, a fresh reference or rank). Where
the installed packages carry no bytecode and the interpreter writes none (`PYTHONDONTWRITEBYTECODE`),
each new interpreter compiles them again: `import torch` with `torch.fx.experimental.symbolic_shapes`
(which imports sympy; the first force computation needs it) took 7.7-9.8 s on the H100 hosts of
`bench/RESULTS_gpu.md` (session 29), 2.3-2.6 s once compiled. No torch.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence

__all__ = ["SLOW_TO_COMPILE", "bytecode_notice", "uncompiled"]

SLOW_TO_COMPILE = ("torch", "sympy", "mpmath")
"""The packages every process of a validation imports whose compilation takes seconds."""


def uncompiled(packages: Sequence[str] = SLOW_TO_COMPILE) -> list[str]:
    """The directories of those of `packages` that have no bytecode for their `__init__` while this
    interpreter writes none: every new process compiles them from source. Empty when bytecode is written
    (the first import compiles it once) or exists."""
    if not sys.dont_write_bytecode:
        return []
    found = []
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue  # not installed, or shipped as bytecode or an extension
        if not os.path.exists(importlib.util.cache_from_source(origin)):
            found.append(os.path.dirname(origin))
    return found


def bytecode_notice(packages: Sequence[str] = SLOW_TO_COMPILE) -> str | None:
    """One line for the user when new processes here compile `packages` from source (`uncompiled`), with
    the command that compiles them once; None otherwise."""
    dirs = uncompiled(packages)
    if not dirs:
        return None
    names = ", ".join(os.path.basename(d) for d in dirs)
    return (
        f"every new Python process here compiles {names} from source (no bytecode was installed and "
        "PYTHONDONTWRITEBYTECODE is set), seconds at the start of each validation; compile them once: "
        f"`{os.path.basename(sys.executable)} -m compileall -q -j 0 {' '.join(dirs)}`"
    )
