"""Imported first by the rank pool's forkserver (see `launch.BASE_PRELOAD`): protect its imports, and
keep installed modules' bytecode where they were installed without it (`bytecode_cache`), for the
forkserver and every process forked from it.

The forkserver is started with `python -c`, which puts its working directory first on `sys.path`;
`launch.process_context` starts it from distcheck's private directory, and this module installs the
import guard before anything else is preloaded, so neither the forkserver nor the ranks and reference
runs forked from it can import a project file in place of torch, distcheck or the standard library.
"""

from __future__ import annotations

from .. import importguard

importguard.install()

from . import bytecode_cache, forkserver  # noqa: E402  (after the guard: nothing from a project directory)

bytecode_cache.use([*bytecode_cache.SLOW_TO_COMPILE, *(m.partition(".")[0] for m in forkserver.extra_preload())])
