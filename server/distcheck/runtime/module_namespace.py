"""What a module in `sys.modules` holds, read without loading what was only registered. No torch.

A module registered through `importlib.util.LazyLoader` (scipy, cupy and others register their
submodules that way) runs its code on the first attribute read, whichever attribute: `getattr(m,
"__file__")` or `vars(m)` over `sys.modules` imports it, and with it packages the model never used
(cupyx, scipy.sparse, numpy.f2py and pytest in a rank: a large share of its factory's time, measured in
`bench/RESULTS_gpu.md`). Every walk over `sys.modules` in distcheck reads through these two functions
instead.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

__all__ = ["PRELOAD_RECORD", "module_file", "namespace", "preloaded_modules"]

PRELOAD_RECORD = "distcheck.processes.preloaded"
"""The module the rank pool's forkserver imports last of its preload, recording what it had imported."""


def preloaded_modules() -> frozenset[str]:
    """The modules the pool's forkserver imported for every process before any target's code ran
    (`PRELOAD_RECORD`), in a process forked from it; empty in any other process."""
    import sys

    record = sys.modules.get(PRELOAD_RECORD)
    return frozenset(getattr(record, "MODULES", ()))


def namespace(module: object) -> dict[str, Any] | None:
    """`module`'s own namespace as it is now (a lazily registered module's holds no more than its
    spec's attributes), or None where it has none. An object that is not a module (some packages
    put one in `sys.modules`) is asked for its `__dict__` as usual."""
    try:
        found = object.__getattribute__(module, "__dict__") if isinstance(module, ModuleType) else vars(module)
    except Exception:  # an object whose `__dict__` is a property may raise anything
        return None
    return found if isinstance(found, dict) else None


def module_file(module: object) -> str | None:
    """The file `module` was (or, registered lazily, will be) loaded from, or None."""
    if isinstance(module, ModuleType):
        found = (namespace(module) or {}).get("__file__")
    else:
        try:
            found = getattr(module, "__file__", None)
        except Exception:
            return None
    return found if isinstance(found, str) else None
