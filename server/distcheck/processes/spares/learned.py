"""The third-party packages each target's model imported, remembered for its next spares.

The reference run records which installed (site-packages) top-level packages loading, building and
running the model imported (`third_party_since`); the validator stores them per target
(`record`, adding to what it learned before) in `<cache>/distcheck/spare-packages.json`, and the
next validation of that target asks its spares to import them ahead (`packages_for`), plus any named
in DISTCHECK_SPARE_PACKAGES (comma-separated). Only installed packages are listed, never a module of the user's own
directories, so the user's code is still imported fresh in every rank. The file is dropped
whenever the environment changes: another interpreter or Python, another torch, a package
installed or removed (a site directory's mtime), or a listed package's file changed.

Beside them, per target, the spec its last validation's first attempt ran under and the signature of
the prior it started from (`record_first_spec`, `first_spec_for`): the next validation from the same
prior runs its first attempt under that spec while its reference runs (`validate/attempt_ahead.py`).
It is a guess, used only when the spec inferred this time is the same. No torch.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import site
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from typing import Any

from ...cache_home import cache_dir
from ...environment import read_settings
from ...runtime.module_namespace import module_file, namespace

__all__ = [
    "cache_path",
    "fingerprint",
    "first_spec_for",
    "installed_torch_version",
    "packages_for",
    "record",
    "record_first_spec",
    "site_dirs",
    "third_party_since",
]

MAX_TARGETS = 64
_ALWAYS = {"torch", "distcheck", "numpy", "__main__", "__mp_main__"}


def cache_path() -> str:
    """Where the learned lists live."""
    return os.path.join(cache_dir(), "spare-packages.json")


def site_dirs() -> list[str]:
    """The installation's site directories (where installed packages live), resolved."""
    dirs = {sysconfig.get_paths().get(k, "") for k in ("purelib", "platlib")}
    with contextlib.suppress(AttributeError):
        dirs.update(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        dirs.add(site.getusersitepackages())
    return sorted(os.path.realpath(d) for d in dirs if d and os.path.isdir(d))


_TORCH_VERSION: dict[tuple[tuple[str, int], ...], str] = {}
"""torch's installed version, read for the site directories' mtimes it was read under (reading a
package's metadata costs milliseconds, and a validation asks several times)."""


def _site_mtimes() -> dict[str, int]:
    mtimes = {}
    for d in site_dirs():
        with contextlib.suppress(OSError):
            mtimes[d] = os.stat(d).st_mtime_ns
    return mtimes


def installed_torch_version(mtimes: dict[str, int] | None = None) -> str:
    """The installed torch's version (`""` when none is), read from its metadata without importing it,
    again only once a package was installed or removed (the site directories' `mtimes` changed)."""
    key = tuple(sorted((_site_mtimes() if mtimes is None else mtimes).items()))
    version = _TORCH_VERSION.get(key)
    if version is None:
        try:
            version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            version = ""
        _TORCH_VERSION.clear()
        _TORCH_VERSION[key] = version
    return version


def fingerprint() -> dict[str, Any]:
    """What the lists depend on: interpreter, Python and torch versions, each site directory's mtime."""
    mtimes = _site_mtimes()
    return {"python": sys.executable, "version": sys.version, "torch": installed_torch_version(mtimes), "site": mtimes}


def _origin(module: Any) -> str | None:
    path = module_file(module)
    if not path:
        found = list((namespace(module) or {}).get("__path__") or [])
        path = found[0] if found else None
    return os.path.realpath(path) if isinstance(path, str) else None


def third_party_since(before: Iterable[str]) -> dict[str, str]:
    """Top-level installed packages imported since `before` (a snapshot of `sys.modules`' keys), each
    with the file it was loaded from: those under a site directory, not torch/numpy/distcheck."""
    seen = set(before)
    sites = [d + os.sep for d in site_dirs()]
    found: dict[str, str] = {}
    for name in list(sys.modules):
        if name in seen:
            continue
        top = name.partition(".")[0]
        if top in found or top in _ALWAYS or top.startswith("_"):
            continue
        origin = _origin(sys.modules.get(top))
        if origin is not None and any(origin.startswith(s) for s in sites):
            found[top] = origin
    return dict(sorted(found.items()))


def _read() -> dict[str, Any]:
    try:
        with open(cache_path()) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("fingerprint") != fingerprint():
        return {}  # another environment: nothing learned there holds here
    return data


def _unchanged(origin: str, mtime: Any) -> bool:
    try:
        return bool(os.stat(origin).st_mtime_ns == mtime)
    except OSError:
        return False


def packages_for(target: str | None) -> list[str]:
    """The packages to import ahead for `target` (the factory as the user wrote it): those its model
    imported last time in this environment (a changed package's entry is dropped), then those in
    DISTCHECK_SPARE_PACKAGES."""
    named = list(read_settings().spare_packages)
    learned: list[str] = []
    if target:
        entry = _read().get("targets", {}).get(target, {})
        packages = entry.get("packages", {}) if isinstance(entry, dict) else {}
        if isinstance(packages, dict) and all(
            isinstance(v, list) and len(v) == 2 and _unchanged(v[0], v[1]) for v in packages.values()
        ):
            learned = sorted(packages)
    return list(dict.fromkeys([*learned, *named]))


def record(target: str, packages: dict[str, str]) -> None:
    """Add `packages` (name → file, from `third_party_since`) to what was learned for `target`; keeps
    the newest `MAX_TARGETS` targets. Added, not replaced: a reference run in a spare that imported a
    package ahead does not see the model import it again, and replacing would drop it, so the next
    validation's spares would all be replaced. A learned package goes when its file or the
    environment changes. Best effort: an unwritable cache only means nothing is learned."""
    data = _read()
    previous = _entry(data, target)
    kept = previous.get("packages", {})
    stamped = {
        name: entry
        for name, entry in (kept.items() if isinstance(kept, dict) else ())
        if isinstance(entry, list) and len(entry) == 2 and _unchanged(entry[0], entry[1])
    }
    for name, origin in packages.items():
        with contextlib.suppress(OSError):
            stamped[name] = [origin, os.stat(origin).st_mtime_ns]
    _write(data, target, {**previous, "packages": stamped})


def first_spec_for(target: str, prior: str) -> dict[str, Any] | None:
    """The spec (`MLIPSpec.to_dict()`) `target`'s last validation ran its first attempt under, when
    that validation started from a prior with signature `prior`; else None."""
    entry = _entry(_read(), target).get("first_spec")
    if isinstance(entry, dict) and entry.get("prior") == prior and isinstance(entry.get("spec"), dict):
        return dict(entry["spec"])
    return None


def record_first_spec(target: str, prior: str, spec: dict[str, Any]) -> None:
    """Remember that `target`'s first attempt ran under `spec` starting from prior signature `prior`
    (best effort, as `record`)."""
    data = _read()
    _write(data, target, {**_entry(data, target), "first_spec": {"prior": prior, "spec": spec}})


def _entry(data: dict[str, Any], target: str) -> dict[str, Any]:
    entry = data.get("targets", {}).get(target, {})
    return dict(entry) if isinstance(entry, dict) else {}


def _write(data: dict[str, Any], target: str, entry: dict[str, Any]) -> None:
    """`data` with `target`'s entry replaced by `entry` (moved to the newest end; the newest
    `MAX_TARGETS` kept), written in one step."""
    targets = {k: v for k, v in data.get("targets", {}).items() if k != target}
    targets[target] = entry
    targets = dict(list(targets.items())[-MAX_TARGETS:])
    path = cache_path()
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".spare-packages-")
        with os.fdopen(fd, "w") as fh:
            json.dump({"fingerprint": fingerprint(), "targets": targets}, fh, indent=1)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp)
