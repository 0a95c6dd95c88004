"""Imports that workspace files can never shadow.

`python -m` and `-c` put the working directory first on `sys.path`, and distcheck puts the user's
project directories there too, so that the model's own modules import. Either way a workspace file
named `json.py`, `torch.py` or `distcheck.py` would be imported in place of the real module — inside
the runner, the forkserver or a rank, and before the user asked for anything to run.

`install()` puts a finder first on `sys.meta_path` that resolves every *protected* top-level name
(the standard library, distcheck, torch and the packages they depend on) only from the `sys.path`
entries that were there when it was installed, less the working directory and the directories
marked untrusted. The user's own modules keep resolving from the user's directories as before.
Processes started from this one learn the untrusted directories from `DISTCHECK_UNTRUSTED_PATHS`,
which `distrust()` keeps up to date.

`clean_start()` starts distcheck's helper processes from an empty private directory with a clean
`PYTHONPATH`, so that nothing they import at start-up can come from the user's directories.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from types import ModuleType

from . import cache_home
from .environment import UNTRUSTED_PATHS, read_settings

__all__ = ["UNTRUSTED_ENV", "clean_start", "distrust", "install", "private_dir", "protected_names", "restore"]

UNTRUSTED_ENV = UNTRUSTED_PATHS.name

# Distributions whose packages are protected along with everything they require.
_ROOT_DISTRIBUTIONS = ("distcheck", "torch")
# Always protected, whether or not their distributions' metadata can be read.
_ALWAYS = frozenset({"distcheck", "torch", "numpy", "orjson", "psutil", "vesin", "ase", "pygls", "lsprotocol"})

_protected: frozenset[str] | None = None


def _top_level_names(dist: importlib.metadata.Distribution) -> set[str]:
    text = dist.read_text("top_level.txt")
    if text:
        return {line.strip() for line in text.splitlines() if line.strip().isidentifier()}
    names: set[str] = set()
    for file in dist.files or ():
        first = file.parts[0] if file.parts else ""
        if first.endswith(".py"):
            first = first[:-3]
        if first.isidentifier() and not first.endswith((".dist-info", ".egg-info")):
            names.add(first)
    return names


def _requirement_name(requirement: str) -> str | None:
    if ";" in requirement and "extra ==" in requirement.split(";", 1)[1]:
        return None  # an optional extra is not a dependency of the installed package
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return match.group(1) if match else None


def _dependency_names(roots: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    names: set[str] = set()
    todo = list(roots)
    while todo:
        dist_name = todo.pop()
        key = re.sub(r"[-_.]+", "-", dist_name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        names |= _top_level_names(dist)
        for requirement in dist.requires or ():
            name = _requirement_name(requirement)
            if name:
                todo.append(name)
    return names


def protected_names() -> frozenset[str]:
    """The top-level module names that never resolve to an untrusted directory: the standard
    library, distcheck, torch and the distributions they depend on (computed once per process)."""
    global _protected
    if _protected is None:
        try:
            deps = _dependency_names(_ROOT_DISTRIBUTIONS)
        except Exception:  # unreadable metadata: the fixed set still holds
            deps = set()
        _protected = frozenset(sys.stdlib_module_names) | _ALWAYS | frozenset(deps)
    return _protected


def _norm(entry: str) -> str:
    return os.path.normcase(os.path.realpath(entry or os.curdir))


def _env_untrusted() -> list[str]:
    return list(read_settings(warn=False).untrusted_paths)


class _GuardFinder(importlib.abc.MetaPathFinder):
    """Finds protected top-level modules on the trusted `sys.path` entries only."""

    def __init__(self, trusted: Sequence[str]) -> None:
        self.trusted = list(trusted)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is not None or "." in fullname or fullname not in protected_names():
            return None  # submodules are found through their (already safe) parent package
        if fullname in sys.builtin_module_names or importlib.machinery.FrozenImporter.find_spec(fullname):
            return None  # the built-in and frozen importers come next and cannot be shadowed
        spec = importlib.machinery.PathFinder.find_spec(fullname, self.trusted) or self._other_finders(fullname)
        if spec is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} outside the project's directories (distcheck never imports "
                f"a project file in place of the standard library, torch or distcheck; rename the project's "
                f"{fullname}.py or install {fullname!r})",
                name=fullname,
            )
        return spec

    @staticmethod
    def _other_finders(fullname: str) -> importlib.machinery.ModuleSpec | None:
        """A spec from a finder other than the path finder (an editable install's own finder)."""
        for finder in sys.meta_path:
            if isinstance(finder, _GuardFinder) or finder is importlib.machinery.PathFinder:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, None, None) if find is not None else None
            if isinstance(spec, importlib.machinery.ModuleSpec):
                return spec
        return None


def _finder() -> _GuardFinder | None:
    return next((f for f in sys.meta_path if isinstance(f, _GuardFinder)), None)


def install(untrusted: Iterable[str] = ()) -> None:
    """Protect this process's imports (idempotent). The trusted entries are the current `sys.path`
    less the working directory (`""` or its path), the directories in `DISTCHECK_UNTRUSTED_PATHS` and
    `untrusted`. Later additions to `sys.path` are never trusted for protected names."""
    if _finder() is not None:
        return
    distrusted = {_norm(p) for p in [*untrusted, *_env_untrusted()]}
    distrusted.add(_norm(os.getcwd()))
    trusted = [p for p in sys.path if p and _norm(p) not in distrusted and os.path.isabs(p)]
    sys.meta_path.insert(0, _GuardFinder(trusted))


def distrust(dirs: Iterable[str]) -> list[str]:
    """Mark `dirs` as untrusted for the processes this one starts from now on (and for this one's
    guard); returns the previous value of `DISTCHECK_UNTRUSTED_PATHS` entries, for `restore`."""
    previous = _env_untrusted()
    merged = list(dict.fromkeys([*previous, *(os.path.abspath(d) for d in dirs)]))
    os.environ[UNTRUSTED_ENV] = os.pathsep.join(merged)
    finder = _finder()
    if finder is not None:
        bad = {_norm(d) for d in merged}
        finder.trusted = [p for p in finder.trusted if _norm(p) not in bad]
    return previous


def restore(previous: Sequence[str]) -> None:
    """Undo `distrust` for child processes (this process's guard stays as strict as it became)."""
    if previous:
        os.environ[UNTRUSTED_ENV] = os.pathsep.join(previous)
    else:
        os.environ.pop(UNTRUSTED_ENV, None)


def private_dir() -> str:
    """An empty directory owned by this user alone, for distcheck's helper processes to start in."""
    # No usable cache directory: a fresh private one (empty, this user's only) for this process.
    return cache_home.private_dir("empty", empty=True) or _fresh_private_dir()


_FRESH: list[str] = []


def _fresh_private_dir() -> str:
    if not _FRESH:
        import atexit
        import shutil

        _FRESH.append(tempfile.mkdtemp(prefix="distcheck-cwd-"))
        atexit.register(shutil.rmtree, _FRESH[0], True)
    return _FRESH[0]


@contextlib.contextmanager
def clean_start() -> Iterator[str]:
    """Run the block, which starts helper processes with `python -c`, from `private_dir()`, with
    `PYTHONSAFEPATH=1` (Python 3.11+ then puts no working directory on their `sys.path`) and without
    the untrusted directories on `PYTHONPATH`, so nothing they import at start-up is a project file."""
    here = os.getcwd()
    saved = {key: os.environ.get(key) for key in ("PYTHONSAFEPATH", "PYTHONPATH")}
    bad = {_norm(p) for p in _env_untrusted()}
    kept = [p for p in (saved["PYTHONPATH"] or "").split(os.pathsep) if p and _norm(p) not in bad]
    path = private_dir()
    os.chdir(path)
    os.environ["PYTHONSAFEPATH"] = "1"
    if kept:
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        os.environ.pop("PYTHONPATH", None)
    try:
        yield path
    finally:
        os.chdir(here)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
