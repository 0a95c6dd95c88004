"""The directories a job's code is imported from: put first on `sys.path` and `PYTHONPATH` for the run
(with the import guard on), restored afterwards, and the modules imported from them forgotten when the
process lives on (the editor's runner). No torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .. import importguard
from ..runtime.frames import is_user_file
from ..runtime.module_namespace import module_file

__all__ = ["PathState", "pop_python_path", "purge_user_modules", "push_python_path"]


@dataclass
class PathState:
    """What `push_python_path` changed: the previous `sys.path`, `PYTHONPATH` and the distrusted directories."""

    sys_path: list[str]
    pythonpath: str | None
    untrusted: list[str]


def push_python_path(dirs: Sequence[str]) -> PathState:
    """Put `dirs` first on `sys.path` (ranks inherit it) and on PYTHONPATH (processes they start),
    with the import guard on: the standard library, torch and distcheck never resolve to them."""
    importguard.install()
    state = PathState(list(sys.path), os.environ.get("PYTHONPATH"), importguard.distrust(dirs))
    unique = list(dict.fromkeys(dirs))
    for d in reversed(unique):
        if d in sys.path:
            sys.path.remove(d)
        sys.path.insert(0, d)
    current = [p for p in (state.pythonpath or "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([*unique, *(p for p in current if p not in unique)])
    return state


def pop_python_path(state: PathState) -> None:
    """Undo `push_python_path`: `sys.path`, the import guard's distrust and `PYTHONPATH` as they were."""
    sys.path[:] = state.sys_path
    importguard.restore(state.untrusted)
    if state.pythonpath is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = state.pythonpath


def purge_user_modules(before: set[str], dirs: Iterable[str]) -> None:
    """Forget the modules imported since `before` (names in `sys.modules`) from the user's directories
    `dirs`, so the next job in this process imports the user's code afresh (ranks always do)."""
    prefixes = [os.path.abspath(d).rstrip(os.sep) + os.sep for d in dirs]
    for name in [n for n in list(sys.modules) if n not in before]:
        file = module_file(sys.modules.get(name))
        if file is None:
            continue
        path = os.path.abspath(file)
        if is_user_file(path) and any(path.startswith(p) for p in prefixes):
            del sys.modules[name]
