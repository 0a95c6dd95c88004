"""What distcheck remembers between processes, where, and how to clear it.

Everything is under one directory, `$XDG_CACHE_HOME/distcheck` (`~/.cache/distcheck` without it):

- `spare-packages.json` (`LEARNED`, `processes/spares/learned.py`): per target, the installed
  packages its model imported, each with the path, mtime and size of every module file of it the
  reference loaded, for the spares of the target's next validation to import ahead (dropped once
  any of those files changes); and the spec its first attempt ran under, with the environment
  variables its reference read, for the next first attempt to run ahead under (a guess, checked).
  At most 64 targets and 4 MB.
- `receptive-fields.json` (`FIELDS`, `validate/field_cache.py`): receptive-field measurements, keyed
  by the target, device, sample, weights, declarations, the files of the user's modules and the
  installed packages it imported, the environment variables the model read and every output's exact
  bytes. At most 64 measurements and 8 MB.
- `bytecode/` (`BYTECODE`, `processes/bytecode_cache.py`): the bytecode of installed modules that
  were installed without it (never of the user's own). At most 256 MB.
- `empty/`: an empty directory distcheck's helper processes start in (`importguard`).

The same rules hold for each store:

- **Private.** A store is used only where its directory (and the `distcheck` directory above it) is
  owned by this user and nobody else may write it, and a file in it only where it is this user's and
  no one else's to write (`cache_home`). Otherwise it is neither read nor written: every validation
  runs as if for the first time.
- **Same environment.** A JSON store records the environment it was written in (`environment()`: the
  interpreter, the Python, torch and distcheck versions, the site directories' mtimes, which change
  when a package is installed or removed) and is read as empty in any other.
- **Whole or not at all.** Every file is written to a temporary file beside it and renamed over it
  (`write_atomic`), so a reader sees the old file or the new one, never a part.
- **Bounded.** The least recently used entries go first once a store holds more than its bound of
  entries or bytes; the bytecode's oldest files once it holds more than its bytes (`evict_files`).
- **Best effort.** A store that cannot be read is empty, one that cannot be written remembers
  nothing; neither stops a validation.

DISTCHECK_FIELD_CACHE=0 measures every receptive field, DISTCHECK_BYTECODE_CACHE=0 keeps no bytecode,
DISTCHECK_SPARES=0 (no spares) makes the learned packages unused. To clear everything, delete the
directory: `rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/distcheck"` (at any time; a validation running
meanwhile only remembers less). No torch.
"""

from __future__ import annotations

import contextlib
import os
import site
import stat
import sys
import sysconfig
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from . import __version__, cache_home

__all__ = [
    "BYTECODE",
    "FIELDS",
    "FORMAT",
    "LEARNED",
    "MIB",
    "FileStore",
    "JsonStore",
    "environment",
    "evict_files",
    "file_stamp",
    "installed_torch_version",
    "site_dirs",
    "write_atomic",
]

MIB = 1024 * 1024
FORMAT = 2
"""The layout of the JSON stores; a file of another layout is read as empty."""


# -- the environment ---------------------------------------------------------------------------------


def file_stamp(path: str) -> list[int] | None:
    """`[mtime_ns, size]` of the file at `path` (None when it cannot be read): how the stores tell a file
    saved since they remembered something about it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def site_dirs() -> list[str]:
    """The installation's site directories (where installed packages live), resolved."""
    dirs = {sysconfig.get_paths().get(k, "") for k in ("purelib", "platlib")}
    with contextlib.suppress(AttributeError):
        dirs.update(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        dirs.add(site.getusersitepackages())
    return sorted(os.path.realpath(d) for d in dirs if d and os.path.isdir(d))


def _site_mtimes() -> dict[str, int]:
    mtimes = {}
    for d in site_dirs():
        with contextlib.suppress(OSError):
            mtimes[d] = os.stat(d).st_mtime_ns
    return mtimes


_TORCH_VERSION: dict[tuple[tuple[str, int], ...], str] = {}
"""torch's installed version, read for the site directories' mtimes it was read under (reading a
package's metadata costs milliseconds, and a validation asks several times)."""


def installed_torch_version(mtimes: dict[str, int] | None = None) -> str:
    """The installed torch's version (`""` when none is), read from its metadata without importing it,
    again only once a package was installed or removed (the site directories' `mtimes` changed)."""
    key = tuple(sorted((_site_mtimes() if mtimes is None else mtimes).items()))
    version = _TORCH_VERSION.get(key)
    if version is None:
        import importlib.metadata  # here: the forkserver imports this module before torch, and needs none

        try:
            version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            version = ""
        _TORCH_VERSION.clear()
        _TORCH_VERSION[key] = version
    return version


def environment() -> dict[str, Any]:
    """What every store depends on: the interpreter, the Python, torch and distcheck versions, and each
    site directory's mtime (a package installed or removed)."""
    mtimes = _site_mtimes()
    return {
        "python": sys.executable,
        "version": sys.version,
        "torch": installed_torch_version(mtimes),
        "distcheck": __version__,
        "site": mtimes,
    }


# -- writing ------------------------------------------------------------------------------------------


def write_atomic(path: str, data: bytes) -> bool:
    """Write `data` to `path` whole or not at all: into a temporary file in the same directory, then
    renamed over `path` (another process may read or write it meanwhile). False when it could not."""
    directory = os.path.dirname(path) or "."
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        return False
    return True


def _read_private(path: str) -> bytes | None:
    """`path`'s bytes where it is a regular file of this user's that nobody else may write; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            return None
        try:
            return fh.read()
        except OSError:
            return None


# -- the stores ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsonStore:
    """One JSON file of entries (key → JSON value) in the cache directory, oldest first; written in
    one step, read only in the environment it was written in, bounded by `max_entries` and
    `max_bytes` (the least recently put first out)."""

    filename: str
    max_entries: int
    max_bytes: int

    def path(self) -> str | None:
        """Where the store lives; None while the cache directory is not this user's alone."""
        home = cache_home.private_home()
        return None if home is None else os.path.join(home, self.filename)

    def load(self) -> dict[str, Any]:
        """The entries, oldest first; empty when there are none, the file cannot be read, is not
        private, or was written in another environment or layout."""
        path = self.path()
        raw = None if path is None else _read_private(path)
        if raw is None:
            return {}
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("environment") != environment():
            return {}
        entries = data.get("entries")
        return dict(entries) if isinstance(entries, dict) else {}

    def save(self, entries: Mapping[str, Any]) -> bool:
        """Write `entries` (oldest first) less the oldest beyond the bounds. False when nothing was
        written (no private directory, a value JSON cannot hold, an unwritable file)."""
        path = self.path()
        if path is None:
            return False
        try:
            sized = [(k, orjson.dumps(v)) for k, v in list(entries.items())[-self.max_entries :]]
        except TypeError:  # orjson.JSONEncodeError
            return False
        kept: list[tuple[str, bytes]] = []
        total = 0
        for key, value in reversed(sized):  # newest first, until the bytes run out
            total += len(value) + len(key) + 8
            if total > self.max_bytes:
                break
            kept.append((key, value))
        body = b",".join(orjson.dumps(k) + b":" + v for k, v in reversed(kept))
        head = orjson.dumps({"format": FORMAT, "environment": environment()})
        return write_atomic(path, head[:-1] + b',"entries":{' + body + b"}}")

    def put(self, key: str, value: Any, entries: Mapping[str, Any] | None = None) -> bool:
        """Store `value` under `key` as the most recently used entry (of `entries`, as loaded, else of
        the store now)."""
        current = {k: v for k, v in (self.load() if entries is None else entries).items() if k != key}
        current[key] = value
        return self.save(current)


@dataclass(frozen=True)
class FileStore:
    """A directory of files in the cache directory (`name`), bounded by `max_bytes` (oldest out)."""

    name: str
    max_bytes: int

    def directory(self) -> str | None:
        """The directory, made where missing; None unless it is this user's alone (`cache_home`)."""
        return cache_home.private_dir(self.name)

    def evict(self, directory: str | None = None) -> int:
        """Bring the store within its bound (`evict_files`); the bytes removed."""
        directory = directory or self.directory()
        return 0 if directory is None else evict_files(directory, self.max_bytes)


def evict_files(directory: str, max_bytes: int, keep_fraction: float = 0.75) -> int:
    """When the files under `directory` hold more than `max_bytes`, remove the oldest (by modification
    time) until they hold at most `keep_fraction` of it, so the next sweeps find room; the bytes
    removed. A file another process removes meanwhile is skipped."""
    files: list[tuple[int, int, str]] = []
    stack = [directory]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as found:
            for entry in found:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        info = entry.stat(follow_symlinks=False)
                        files.append((info.st_mtime_ns, info.st_size, entry.path))
    total = sum(size for _, size, _ in files)
    if total <= max_bytes:
        return 0
    removed = 0
    for _, size, path in sorted(files):
        if total - removed <= max_bytes * keep_fraction:
            break
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed += size
    return removed


LEARNED = JsonStore("spare-packages.json", max_entries=64, max_bytes=4 * MIB)
"""Per target: the installed packages its model imported and its first attempt's spec."""

FIELDS = JsonStore("receptive-fields.json", max_entries=64, max_bytes=8 * MIB)
"""Receptive-field measurements."""

BYTECODE = FileStore("bytecode", max_bytes=256 * MIB)
"""The bytecode of installed modules installed without it."""
