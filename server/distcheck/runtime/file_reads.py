"""Which data files the target reads, recorded in the reference child.

A model may take a setting from a file it opens (a YAML or JSON config, a table of radii, a checkpoint),
and a remembered result is the one a fresh process would give only if those files are still as they
were. So, while the reference imports, builds and runs the model, `start()` records every file opened
for reading through Python (`open`, `io.open`, `os.open`, `pathlib.Path.read_text`, `numpy.load`,
`torch.load` of a path: whatever raises the interpreter's `open` audit event) by code other than
distcheck's own, outside the standard library, the site directories and the system's pseudo-files.
Python source and bytecode are left out, whoever reads them (the import system, `inspect`,
TorchScript): the key's `files` and `packages` stamp the modules.
`Recorder.stop()` returns `{path: stamp}`, the stamp being the file's size and the SHA-256 of its
bytes (size and mtime alone for a file over `HASHED_BYTES`), taken when the recording stops; it goes
into the receptive-field cache's key (`validate/field_cache.py`). Files that C code opens without
Python's `open` (a C extension's own reader) are not seen; the cache's key also holds the outputs.

The audit hook is added once per process and cannot be removed; outside a recording it returns at
once. No torch.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any

from .env_reads import _read_by_distcheck, _stdlib_dirs

__all__ = ["HASHED_BYTES", "Recorder", "start"]

HASHED_BYTES = 16 * 1024 * 1024
"""Files up to this size are stamped with their content's hash; larger ones by size and mtime."""

_PSEUDO = ("/proc/", "/sys/", "/dev/")
_SOURCE = (".py", ".pyc", ".pyi")  # read for their source (tracebacks, TorchScript, inspect): stamped apart
_IMPORT_SYSTEM = ("<frozen importlib", "<frozen zipimport")
_active: Recorder | None = None
_hooked = False


def _outside_inputs() -> tuple[str, ...]:
    """Directories whose files are not the model's data: the standard library, the site directories."""
    import site
    import sysconfig

    dirs = set(_stdlib_dirs())
    for key in ("purelib", "platlib"):
        if sysconfig.get_paths().get(key):
            dirs.add(os.path.realpath(sysconfig.get_paths()[key]) + os.sep)
    for d in [*getattr(site, "getsitepackages", list)(), site.getusersitepackages()]:
        dirs.add(os.path.realpath(d) + os.sep)
    return tuple(sorted(dirs))


class Recorder:
    """The files recorded between `start()` and `stop()`."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self._outside = _outside_inputs()

    def note(self, path: Any, mode: Any, flags: Any) -> None:
        """Record `path` when opened for reading (`mode` a str mode, or `flags` of `os.open`)."""
        if isinstance(path, int):  # a file descriptor: its path was seen when it was opened
            return
        if isinstance(mode, str):
            if not ("r" in mode or "+" in mode):
                return
        elif isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR) == os.O_WRONLY:
            return
        try:
            full = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return
        if full.endswith(_SOURCE) or full.startswith(_PSEUDO) or full.startswith(self._outside) or os.path.isdir(full):
            return
        self.paths.add(full)

    def stop(self) -> dict[str, list[Any] | None]:
        """Stop recording; the files read, each with its stamp (None: gone since)."""
        global _active
        if _active is self:
            _active = None
        return {p: _stamp(p) for p in sorted(self.paths)}


def _stamp(path: str) -> list[Any] | None:
    try:
        st = os.stat(path)
        if st.st_size > HASHED_BYTES:
            return [st.st_size, st.st_mtime_ns]
        with open(path, "rb") as f:  # not recorded: no recording is active now
            return [st.st_size, hashlib.sha256(f.read()).hexdigest()]
    except OSError:
        return None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    recorder = _active
    if recorder is None or event != "open":
        return
    try:  # a hook that raises would fail the user's open
        frame = sys._getframe(1)
        if frame.f_code.co_filename.startswith(_IMPORT_SYSTEM):  # a module's source or bytecode: stamped apart
            return
        if not _read_by_distcheck(frame):
            path, mode, flags = (*args, None, None, None)[:3]
            recorder.note(path, mode, flags)
    except Exception:  # the user's open goes on whatever happens to the record
        pass


def start() -> Recorder:
    """Record, from now until `stop()`, the files opened for reading by code other than distcheck's."""
    global _active, _hooked
    if not _hooked:
        sys.addaudithook(_hook)
        _hooked = True
    _active = Recorder()
    return _active
