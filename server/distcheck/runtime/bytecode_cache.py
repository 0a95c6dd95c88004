"""Bytecode for distcheck's own processes where the installed packages have none and none is written.

A validation's processes import torch (the pool's forkserver, the CLI, the editor's runner). Where
torch, sympy and mpmath were installed without bytecode and this interpreter writes none beside them
(`PYTHONDONTWRITEBYTECODE`, or a site directory it may not write), every new interpreter compiles them
from source: `import torch` with `torch.fx.experimental.symbolic_shapes` took 7.7-9.8 s on the H100
hosts of `bench/RESULTS_gpu.md` (session 29), 2.3-2.6 s once compiled.

There, `use()` points this process's bytecode at distcheck's cache (`sys.pycache_prefix`, a directory
only this user may write), and imports inside `writing()` store what they compile there, so the next
process reads it instead of compiling again. Only installed packages are imported inside `writing()`
(the forkserver's preload, a spare's packages, torch in the CLI and the runner): the user's own
modules are still compiled from their source by every process, as the interpreter was told, and no
bytecode of theirs can be stale. Nothing changes where bytecode exists or is written beside the
source, or where the user chose a prefix. DISTCHECK_BYTECODE_CACHE=0 turns it off. No torch.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence

from .. import cache_home
from .spares_settings import bytecode_cache_enabled

__all__ = ["SLOW_TO_COMPILE", "start_writing", "stop_writing", "uncompiled", "use", "writing"]

SLOW_TO_COMPILE = ("torch", "sympy", "mpmath")
"""The packages every process of a validation imports whose compilation takes seconds."""

_DECIDED: list[str | None] = []  # this process's prefix once `use` decided (inherited by a fork)
_SAVED: list[bool] = []  # `sys.dont_write_bytecode` as it was before `start_writing`


def uncompiled(packages: Sequence[str] = SLOW_TO_COMPILE) -> list[str]:
    """The directories of those of `packages` that carry no bytecode for their `__init__` beside its
    source, where this interpreter writes none there either: every new process compiles them from
    source (unless `use` gave it the cache). Empty when they are compiled or the first import compiles
    them once."""
    found = []
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue  # not installed, or shipped as bytecode or an extension
        if not os.path.exists(_compiled_at(origin)) and not _writes(origin):
            found.append(os.path.dirname(origin))
    return found


def _users_prefix() -> str | None:
    """The bytecode prefix the user chose (PYTHONPYCACHEPREFIX), not the one `use` set."""
    prefix = sys.pycache_prefix
    return prefix if prefix is not None and (not _DECIDED or prefix != _DECIDED[0]) else None


def use(packages: Sequence[str] | None = None) -> str | None:
    """Read this process's bytecode from distcheck's cache where `uncompiled` finds some of `packages`
    (`SLOW_TO_COMPILE` by default), the cache is on and the user set no prefix of their own; returns the
    cache's directory, or None where nothing changed. Decided by the first call in a process; a
    process forked after inherits the decision. Everything the process imports then looks for its
    bytecode in the cache only: what was compiled beside its source is compiled once more, into it."""
    if not _DECIDED:
        prefix = None
        wanted = SLOW_TO_COMPILE if packages is None else packages
        if sys.pycache_prefix is None and bytecode_cache_enabled() and uncompiled(wanted):
            prefix = cache_home.private_dir("bytecode")
            if prefix is not None:
                sys.pycache_prefix = prefix
        _DECIDED.append(prefix)
    return _DECIDED[0]


def start_writing() -> None:
    """From now on, until `stop_writing`, imports store the bytecode they compile in the cache (where
    `use` took it; otherwise nothing changes). For the forkserver, whose preload spans modules."""
    if use() is not None and not _SAVED:
        _SAVED.append(sys.dont_write_bytecode)
        sys.dont_write_bytecode = False


def stop_writing() -> None:
    """Write no more bytecode than this process did before `start_writing`."""
    if _SAVED:
        sys.dont_write_bytecode = _SAVED.pop()


@contextlib.contextmanager
def writing() -> Iterator[None]:
    """`start_writing` for the block: import only installed packages inside it."""
    nested = bool(_SAVED)
    start_writing()
    try:
        yield
    finally:
        if not nested:
            stop_writing()


def _compiled_at(source: str) -> str:
    """Where the interpreter looks for `source`'s bytecode but for `use`: under the user's prefix, else
    in the `__pycache__` beside it."""
    if _users_prefix() is not None:
        return importlib.util.cache_from_source(source)
    head, tail = os.path.split(source)
    level = sys.flags.optimize
    opt = f".opt-{level}" if level else ""
    return os.path.join(head, "__pycache__", f"{tail.rpartition('.')[0]}.{sys.implementation.cache_tag}{opt}.pyc")


def _writes(source: str) -> bool:
    """Whether this interpreter would store `source`'s bytecode where `_compiled_at` looks."""
    if sys.dont_write_bytecode:
        return False
    prefix = _users_prefix()
    if prefix is not None:
        return os.access(prefix, os.W_OK) or not os.path.exists(prefix)
    cache = os.path.join(os.path.dirname(source), "__pycache__")
    return os.access(cache if os.path.isdir(cache) else os.path.dirname(source), os.W_OK)
