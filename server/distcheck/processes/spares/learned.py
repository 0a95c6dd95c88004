"""The third-party packages each target's model imported, remembered for its next spares.

The reference run records which installed top-level packages loading, building and running the model
imported (`third_party_since`: a package whose files are under a site directory or a `site-packages`
or `dist-packages` directory, as `runtime.frames.is_user_file` tells them from the user's), each with
the path, mtime and size of every module file of it that the reference had loaded; the validator
stores them per target (`record`, adding to what it learned before) in the `memory.LEARNED` store,
and the next validation of that target asks its spares to import them ahead (`packages_for`), plus
any named in DISTCHECK_SPARE_PACKAGES (comma-separated). Only installed packages are listed, never a
module of the user's own directories, so the user's code is still imported fresh in every rank. What
was learned is dropped once any of a package's files changed (a submodule edited in place included:
the warm spares that imported the old one are then replaced), and the whole store whenever the
environment changes (`memory.environment`).

Beside them, per target, the spec its last validation's first attempt ran under, the signature of the
prior it started from and the environment variables its reference read (`record_first_spec`,
`first_spec_for`): the next validation from the same prior, with those variables as they were, runs
its first attempt under that spec while its reference runs (`validate/attempt_ahead.py`). It is a
guess, used only when the spec inferred this time is the same. No torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from ... import memory
from ...cache_home import cache_dir
from ...environment import read_settings
from ...memory import installed_torch_version, site_dirs
from ...runtime.module_namespace import module_file, namespace

__all__ = [
    "Stamps",
    "cache_path",
    "fingerprint",
    "first_spec_for",
    "installed_torch_version",
    "note_env_reads",
    "packages_for",
    "record",
    "record_first_spec",
    "site_dirs",
    "third_party_since",
]

_ALWAYS = {"torch", "distcheck", "numpy", "__main__", "__mp_main__"}
_LIBRARY_PARTS = frozenset({"site-packages", "dist-packages"})

Stamps = dict[str, list[int]]
"""A package's module files, each with `[mtime_ns, size]`."""


def cache_path() -> str:
    """Where the learned lists live."""
    return os.path.join(cache_dir(), memory.LEARNED.filename)


def fingerprint() -> dict[str, Any]:
    """What the lists depend on (`memory.environment`)."""
    return memory.environment()


def _origin(module: Any) -> str | None:
    path = module_file(module)
    if not path:
        found = list((namespace(module) or {}).get("__path__") or [])
        path = found[0] if found else None
    return os.path.realpath(path) if isinstance(path, str) else None


def _installed(origin: str, sites: list[str]) -> bool:
    return any(origin.startswith(s) for s in sites) or bool(_LIBRARY_PARTS & set(origin.split(os.sep)))


def _root(origin: str) -> str:
    """A package's directory (its `__init__`'s, or a namespace package's), or a lone module's file."""
    name = os.path.basename(origin)
    return os.path.dirname(origin) if name.startswith("__init__.") or os.path.isdir(origin) else origin


def third_party_since(before: Iterable[str]) -> dict[str, Stamps]:
    """Top-level installed packages imported since `before` (a snapshot of `sys.modules`' keys), not
    torch/numpy/distcheck, each with every module file of it in `sys.modules` now (those under its
    directory) and their `[mtime_ns, size]`."""
    seen = set(before)
    sites = [d + os.sep for d in memory.site_dirs()]
    roots: dict[str, str] = {}
    for name in list(sys.modules):
        if name in seen:
            continue
        top = name.partition(".")[0]
        if top in roots or top in _ALWAYS or top.startswith("_"):
            continue
        origin = _origin(sys.modules.get(top))
        if origin is not None and _installed(origin, sites):
            roots[top] = _root(origin)
    found: dict[str, Stamps] = {top: {} for top in sorted(roots)}
    for name, module in list(sys.modules.items()):
        top = name.partition(".")[0]
        root = roots.get(top)
        path = module_file(module) if root is not None else None
        if root is None or path is None:
            continue
        path = os.path.realpath(path)
        stamp = memory.file_stamp(path) if path == root or path.startswith(root + os.sep) else None
        if stamp is not None:
            found[top][path] = stamp
    return found


def _unchanged(stamps: Any) -> bool:
    """Whether `stamps` (a package's files as learned) are a package's files as they are now."""
    if not isinstance(stamps, dict) or not stamps:
        return False
    return all(isinstance(v, list) and memory.file_stamp(str(p)) == v for p, v in stamps.items())


def packages_for(target: str | None) -> list[str]:
    """The packages to import ahead for `target` (the factory as the user wrote it): those its model
    imported last time in this environment while none of their files changed, then those in
    DISTCHECK_SPARE_PACKAGES."""
    named = list(read_settings(warn=False).spare_packages)
    learned: list[str] = []
    if target:
        packages = _entry(memory.LEARNED.load(), target).get("packages", {})
        if isinstance(packages, dict) and all(_unchanged(v) for v in packages.values()):
            learned = sorted(packages)
    return list(dict.fromkeys([*learned, *named]))


def record(target: str, packages: Mapping[str, Stamps]) -> None:
    """Add `packages` (from `third_party_since`) to what was learned for `target`, which becomes the
    most recently used of the store's targets. Added, not replaced: a reference run in a spare that
    imported a package ahead does not see the model import it again, and replacing would drop it,
    so the next validation's spares would all be replaced. A learned package goes when one of its
    files or the environment changes. Best effort: an unwritable cache only means nothing is learned."""
    data = memory.LEARNED.load()
    previous = _entry(data, target)
    kept = previous.get("packages", {})
    stamped = {name: files for name, files in (kept.items() if isinstance(kept, dict) else ()) if _unchanged(files)}
    stamped.update({name: dict(files) for name, files in packages.items() if files})
    memory.LEARNED.put(target, {**previous, "packages": stamped}, data)


_NOTED_READS: dict[str, dict[str, str | None]] = {}
"""The environment variables the last reference of each target read in this process (`note_env_reads`)."""


def note_env_reads(target: str, reads: Mapping[str, str | None]) -> None:
    """Note the environment variables `target`'s reference just read (`runtime.env_reads`), for the
    `record_first_spec` of the same validation."""
    _NOTED_READS[target] = dict(reads)


def first_spec_for(target: str, prior: str, environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The spec (`MLIPSpec.to_dict()`) `target`'s last validation ran its first attempt under, when that
    validation started from a prior with signature `prior` and every environment variable its
    reference read has the value it had then in `environ` (the caller's, `os.environ` by default);
    else None."""
    entry = _entry(memory.LEARNED.load(), target).get("first_spec")
    if not isinstance(entry, dict) or entry.get("prior") != prior or not isinstance(entry.get("spec"), dict):
        return None
    reads = entry.get("env_reads")
    now = os.environ if environ is None else environ
    if not isinstance(reads, dict) or any(now.get(k) != v for k, v in reads.items()):
        return None
    return dict(entry["spec"])


def record_first_spec(
    target: str, prior: str, spec: dict[str, Any], env_reads: Mapping[str, str | None] | None = None
) -> None:
    """Remember that `target`'s first attempt ran under `spec` starting from prior signature `prior`,
    its reference having read `env_reads` (by default, what `note_env_reads` noted for it last). Best
    effort, as `record`."""
    reads = dict(_NOTED_READS.get(target, {}) if env_reads is None else env_reads)
    data = memory.LEARNED.load()
    first = {"prior": prior, "spec": spec, "env_reads": reads}
    memory.LEARNED.put(target, {**_entry(data, target), "first_spec": first}, data)


def _entry(data: Mapping[str, Any], target: str) -> dict[str, Any]:
    entry = data.get(target, {})
    return dict(entry) if isinstance(entry, dict) else {}
