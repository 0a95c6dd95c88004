"""What a validation may run: workspace trust, and code that lives outside the workspace.

A validation imports the target's factory and sample modules and runs them. The daemon therefore
refuses to validate until the client has said the workspace is trusted (`initializationOptions`
`{"trusted": true}` or the `distcheck/trust` notification), and refuses a target whose code would be
imported from outside the workspace folders and the interpreter's installed packages until the user
has confirmed those paths (`{"confirmOutsideWorkspace": [paths]}` in `distcheck.validate`'s
arguments). A module reference is located the way the import system would locate it, by the finders
alone (`module_origins`: `sys.meta_path`'s finders, the target's search directories before this
interpreter's `sys.path`, each package's own search locations): a source file, bytecode-only `.pyc`,
an extension module, a namespace package's directories, an editable install's finder, a path hook's
entry. Each origin is the workspace, installed, or outside; a module found without an origin that
can be placed is refused (`Unclassified`). Nothing here imports user code: finders only locate.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from importlib.machinery import ModuleSpec, PathFinder
from typing import Any

from ..jobs.target import is_path_reference, split_reference
from .config import TargetInfo

__all__ = [
    "OUTSIDE_WORKSPACE",
    "UNTRUSTED",
    "Unclassified",
    "code_outside",
    "installed_dirs",
    "is_within",
    "module_origins",
]

UNTRUSTED = (
    "this workspace is not trusted, and validating imports and runs its model and sample code; "
    "trust the workspace (Manage Workspace Trust) to validate"
)
OUTSIDE_WORKSPACE = "outside-workspace"


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def is_within(path: str, dirs: Iterable[str]) -> bool:
    """True when `path` (symlinks resolved) is one of `dirs` or lies below one of them."""
    real = _real(path)
    for directory in dirs:
        base = _real(directory)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False


def installed_dirs() -> list[str]:
    """The interpreter's installed-package and standard-library directories (code the user installed,
    not code a workspace brought along)."""
    found = {sysconfig.get_path(key) for key in ("purelib", "platlib", "stdlib", "platstdlib")}
    try:
        found.update(site.getsitepackages())
    except AttributeError:  # some virtualenv builds of site lack it
        pass
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user:
        found.add(user)
    return sorted(d for d in found if d)


class Unclassified(ValueError):
    """A module the finders locate without a file or directory that could be placed inside or outside
    the workspace: refused, never waved through."""


def _find(name: str, path: Sequence[str] | None, search_dirs: Sequence[str]) -> ModuleSpec | None:
    """The spec of `name` as the import system would find it with `path` (a package's locations, or
    None for a top-level module: `search_dirs`, then `sys.path`), without importing anything."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        if finder is PathFinder or (isinstance(finder, type) and issubclass(finder, PathFinder)):
            # `_get_spec` is `find_spec` without wrapping a namespace package's locations in the live
            # view that reads its parent from `sys.modules` (not imported here): a plain list instead
            get_spec: Any = PathFinder._get_spec  # type: ignore[attr-defined]
            spec = get_spec(name, list(path) if path is not None else [*search_dirs, *sys.path])
            if spec is not None and spec.loader is None and not spec.submodule_search_locations:
                spec = None  # no file and no namespace portion: not found
        else:
            try:
                spec = find(name, list(path) if path is not None else None)
            except Exception:  # a finder that cannot answer for this name has not found it
                continue
        if isinstance(spec, ModuleSpec):
            return spec
    return None


def _locations(spec: ModuleSpec) -> list[str]:
    """A package's search locations; a namespace package's as found (its live view recomputes from the
    parent module, which is not imported here)."""
    raw = spec.submodule_search_locations
    try:
        return list(raw or [])
    except KeyError:
        return list(getattr(raw, "_path", []))


def module_origins(module: str, search_dirs: Sequence[str]) -> list[str] | None:
    """Where importing the dotted `module` would run code from (each package on the way included): the
    origin file of each (source, `.pyc`, extension) or a namespace package's directories; `"<builtin>"`
    for built-in and frozen modules. None when no finder finds it (the import would fail, running
    nothing). Raises `Unclassified` for a module found with nothing to place."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    found: list[str] = []
    path: Sequence[str] | None = None
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        spec = _find(name, path, search_dirs)
        if spec is None:
            return None
        locations = _locations(spec)
        if spec.origin in ("built-in", "frozen"):
            found.append("<builtin>")
        elif spec.origin and spec.has_location:
            found.append(spec.origin)
        elif locations:
            found.extend(locations)  # a namespace package: code from these directories
        else:
            raise Unclassified(
                f"module {name!r} is found by {type(spec.loader).__name__ if spec.loader else 'a finder'} "
                "with no file or directory to tell whether it is the workspace's, installed or outside"
            )
        if i < len(parts) - 1:
            if not locations:
                return None  # not a package: the import of its submodule fails
            path = locations
    return found


def code_outside(target: TargetInfo, roots: Sequence[str], confirmed: Iterable[str] = ()) -> list[str]:
    """The files and directories the factory's and the sample's modules (and the packages they are in)
    would be imported from that lie outside `roots` (the workspace folders) and the installed packages
    and that the user has not confirmed. What those modules import in turn is theirs to choose. Raises
    `Unclassified` for a module found with no origin to place."""
    allowed = [*roots, *installed_dirs()]
    confirmed_real = {_real(p) for p in confirmed}
    references = [target.factory]
    if target.sample and not target.sample_is_file:
        references.append(target.sample)
    out: list[str] = []
    for reference in references:
        parts = split_reference(reference)
        if parts is None:
            continue
        where = parts[0]
        if is_path_reference(where):
            origins = [os.path.abspath(os.path.join(target.root, where))]
        else:
            origins = module_origins(where, [os.path.join(target.root, d) for d in target.search_dirs]) or []
        for path in origins:
            if path == "<builtin>":
                continue
            if path not in out and not is_within(path, allowed) and _real(path) not in confirmed_real:
                out.append(path)
    return out
