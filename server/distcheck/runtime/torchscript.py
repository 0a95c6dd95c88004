"""`distribution.torchscript`: whether a rank runs the user's TorchScript compiled or as Python.

The handlers are a torch-function mode, which never sees the ops inside a TorchScript function or
module. Under `"eager"` a rank turns the JIT off (`torch.jit._state.disable()`) before it imports the
factory's module, so `torch.jit.script` and `torch.jit.trace` return the original Python function or
module wherever they run — in the factory's module, in a submodule that another module imports by
name, or in the factory itself — and every aggregation inside is routed. Ranks import user code
afresh, so that covers everything the model defines. A module imported before (a forkserver preload,
or a rank a launcher started that served an earlier attempt) keeps its compiled functions; their
module-level names are swapped for the original Python functions that TorchScript keeps
(`_torchdynamo_inline`), which covers Python callers that look them up by name. What cannot be made
eager (serialized TorchScript from `torch.jit.load`, C++) stays unrouted and named.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import torch
import torch.jit._state as jit_state

from ..runtime.module_namespace import preloaded_modules
from ..spec import MLIPSpec
from .module_namespace import namespace

__all__ = ["apply_torchscript_mode"]

_SKIP = {"torch", "distcheck", "numpy"}
_swapped: list[tuple[Any, str, Any]] = []
_disabled = False


def apply_torchscript_mode(spec: MLIPSpec) -> str:
    """Put this process in the spec's `distribution.torchscript` mode before the factory is loaded;
    returns the mode. `"eager"` turns the JIT off and swaps already-compiled module-level functions
    for their Python originals; `"scripted"` undoes what an earlier `"eager"` did in this process."""
    global _disabled
    mode = spec.distribution.torchscript
    if mode == "eager":
        if not _disabled:
            jit_state.disable()
            _disabled = True
        _swap_loaded()
    elif _disabled:
        jit_state.enable()
        _disabled = False
        while _swapped:
            module, name, value = _swapped.pop()
            setattr(module, name, value)
    return mode


def _swap_loaded() -> None:
    """Swap the compiled functions at module level in the modules this process imported, except torch's,
    distcheck's and what the forkserver preloaded for every process (none of it is the user's or
    scripted). Reads each module's namespace as it is: a lazily imported module (`importlib.util.
    LazyLoader`, as scipy and cupy register theirs) would be loaded by `vars()`, importing packages the
    model never used (cupyx, scipy.sparse, pytest: see `module_namespace`), and holds nothing compiled
    until it is."""
    preloaded = preloaded_modules()
    for mod_name, module in list(sys.modules.items()):
        top = mod_name.split(".")[0]
        if not isinstance(module, ModuleType) or top in _SKIP or top.startswith("_") or mod_name in preloaded:
            continue  # also an object some package put in `sys.modules` in place of a module
        for name, value in list((namespace(module) or {}).items()):
            if isinstance(value, torch.jit.ScriptFunction):
                original = getattr(value, "_torchdynamo_inline", None)
                if callable(original):
                    _swapped.append((module, name, value))
                    setattr(module, name, original)
