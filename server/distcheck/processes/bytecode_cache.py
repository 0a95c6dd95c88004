"""Bytecode for distcheck's own processes where the installed packages have none and none is written.

A validation's processes import torch (the pool's forkserver, the CLI, the editor's runner). Where
torch, sympy and mpmath were installed without bytecode and this interpreter writes none beside them
(`PYTHONDONTWRITEBYTECODE`, or a site directory it may not write), every new interpreter compiles them
from source: `import torch` with `torch.fx.experimental.symbolic_shapes` then takes several times as
long as once compiled (`bench/RESULTS_gpu.md`).

There, `use()` gives this process (and every process forked from it) a source loader that reads an
installed module's bytecode from beside its source where it exists, else from distcheck's cache (a
directory only this user may write), compiling it into the cache the first time. The user's own modules
(`frames.is_user_file`) load exactly as the interpreter would load them: compiled from their source,
written nowhere. The cache is `memory.BYTECODE` (at most 256 MB, the oldest files out first). Nothing
changes where the packages carry bytecode or it is written beside them, or where the user chose a
prefix (PYTHONPYCACHEPREFIX). DISTCHECK_BYTECODE_CACHE=0 turns it off. No torch.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys
from collections.abc import Sequence
from types import CodeType

from .. import memory
from ..runtime.frames import is_user_file
from .spares.settings import bytecode_cache_enabled

__all__ = ["SLOW_TO_COMPILE", "cached_path", "uncompiled", "use"]

SLOW_TO_COMPILE = ("torch", "sympy", "mpmath")
"""The packages every process of a validation imports whose compilation takes seconds."""

_DECIDED: list[str | None] = []  # this process's cache directory once `use` decided (inherited by a fork)


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


def use(packages: Sequence[str] | None = None) -> str | None:
    """Load installed modules' bytecode through distcheck's cache in this process (`_CachingLoader`)
    where `uncompiled` finds some of `packages` (`SLOW_TO_COMPILE` by default), the cache is on and the
    user set no prefix; returns the cache's directory, or None where nothing changed. Decided by the
    first call in a process; a process forked after inherits the decision and the loader."""
    if not _DECIDED:
        directory = None
        wanted = SLOW_TO_COMPILE if packages is None else packages
        if sys.pycache_prefix is None and bytecode_cache_enabled() and uncompiled(wanted):
            directory = memory.BYTECODE.directory()
        _DECIDED.append(directory)
        if directory is not None:
            is_user_file(__file__)  # reads the library directories now, not inside an import
            _install_loader()
    return _DECIDED[0]


def cached_path(directory: str, source: str) -> str:
    """Where the cache in `directory` keeps `source`'s bytecode: the source's absolute path mirrored
    under it, as PYTHONPYCACHEPREFIX would lay it out."""
    head, tail = os.path.split(os.path.abspath(source))
    return os.path.join(directory, head.lstrip(os.sep), _pyc_name(tail))


class _CachingLoader(importlib.machinery.SourceFileLoader):
    """A source loader that keeps installed modules' bytecode in distcheck's cache where there is none
    beside their source; the user's own modules load as with the interpreter's own loader."""

    def get_code(self, fullname: str) -> CodeType | None:
        path = self.get_filename(fullname)
        if os.path.exists(_compiled_at(path)) or is_user_file(path):
            return super().get_code(fullname)
        return _cached_code(self, path)


def _cached_code(loader: _CachingLoader, path: str) -> CodeType:
    """`path`'s code from the cache where its header matches the source's modification time and size
    (the interpreter's own rule for timestamped bytecode), else compiled from the source and kept."""
    stats = loader.path_stats(path)
    header = b"".join(
        (
            importlib.util.MAGIC_NUMBER,
            (0).to_bytes(4, "little"),  # flags: validated by timestamp (PEP 552)
            (int(stats["mtime"]) & 0xFFFFFFFF).to_bytes(4, "little"),
            (int(stats.get("size", 0)) & 0xFFFFFFFF).to_bytes(4, "little"),
        )
    )
    target = cached_path(str(_DECIDED[0]), path)
    with contextlib.suppress(OSError, EOFError, ValueError, TypeError):
        with open(target, "rb") as fh:
            data = fh.read()
        if data[:16] == header:
            code = marshal.loads(memoryview(data)[16:])
            if isinstance(code, CodeType):
                return code
    code = loader.source_to_code(loader.get_data(path), path)
    _write(target, header + marshal.dumps(code))
    return code


SWEEP_EVERY = 16 * 1024 * 1024
"""Bytes a process writes into the cache between two sweeps of it (`memory.BYTECODE.evict`)."""

_UNSWEPT = [SWEEP_EVERY]  # bytes written since this process (or the one it was forked from) last swept


def _write(target: str, data: bytes) -> None:
    """Write `data` to `target` whole or not at all (`memory.write_atomic`: another process may read or
    write it meanwhile); on the first write of a process and after every `SWEEP_EVERY` bytes, the
    oldest files go while the cache holds more than its bound (a sweep reads the directory's sizes,
    milliseconds beside the compile that led to the write)."""
    if not memory.write_atomic(target, data):
        return
    _UNSWEPT[0] += len(data)
    if _UNSWEPT[0] >= SWEEP_EVERY and _DECIDED and _DECIDED[0] is not None:
        _UNSWEPT[0] = 0
        memory.BYTECODE.evict(_DECIDED[0])


def _install_loader() -> None:
    """Put `_CachingLoader` in place of the source loader of the path finder's file hook."""
    details = [
        (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
        (_CachingLoader, importlib.machinery.SOURCE_SUFFIXES),
        (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
    ]
    hook = importlib.machinery.FileFinder.path_hook(*details)
    files = [i for i, h in enumerate(sys.path_hooks) if "FileFinder" in getattr(h, "__qualname__", "")]
    if files:
        sys.path_hooks[files[0]] = hook
    else:
        sys.path_hooks.append(hook)
    sys.path_importer_cache.clear()


def _pyc_name(source_name: str) -> str:
    level = sys.flags.optimize
    opt = f".opt-{level}" if level else ""
    return f"{source_name.rpartition('.')[0]}.{sys.implementation.cache_tag}{opt}.pyc"


def _compiled_at(source: str) -> str:
    """Where the interpreter itself looks for `source`'s bytecode: under the user's prefix, else in the
    `__pycache__` beside it."""
    if sys.pycache_prefix is not None:  # the user's (`use` never sets one)
        return importlib.util.cache_from_source(source)
    head, tail = os.path.split(source)
    return os.path.join(head, "__pycache__", _pyc_name(tail))


def _writes(source: str) -> bool:
    """Whether this interpreter would store `source`'s bytecode where `_compiled_at` looks."""
    if sys.dont_write_bytecode:
        return False
    prefix = sys.pycache_prefix
    if prefix is not None:
        return os.access(prefix, os.W_OK) or not os.path.exists(prefix)
    cache = os.path.join(os.path.dirname(source), "__pycache__")
    return os.access(cache if os.path.isdir(cache) else os.path.dirname(source), os.W_OK)
