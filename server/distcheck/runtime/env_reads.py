"""Which environment variables the target reads, recorded in the reference child.

A model may take a setting from the environment (a depth, a precision, a data file's path), and a
remembered result is the one a fresh process would give only if those variables still hold the values
they had. So, while the reference imports, builds and runs the model, `start()` has `os.environ`
record every variable read through it (`os.environ[k]`, `.get`, `in`, `os.getenv`, copies and
iteration) by code other than distcheck's own: the user's modules, installed packages, torch. A read
is attributed to the first frame outside the standard library (`os.getenv` and `tempfile` read for
their caller). The record is `{name: value}`, with None for a variable that was not set; the first
read of a name counts, and a name the code set before reading it is not an input, nor is one distcheck
sets in its own processes (`environment`'s internal switches: DISTCHECK_RANK is `reference` in every
reference, whatever the caller has). `Recorder.stop()`
puts `os.environ` back and returns it; it goes into the receptive-field cache's key and beside the
learned first spec (`validate/field_cache.py`, `processes/spares/learned.py`).

Only `os.environ` is watched (the same object under every name it is imported as: its class is
switched, not the object); `os.environb` and C code calling `getenv` are not. No torch.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

from ..environment import SWITCHES

__all__ = ["Recorder", "start"]

_DISTCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY_PARTS = frozenset({"site-packages", "dist-packages"})
_SET_BY_DISTCHECK = frozenset(s.name for s in SWITCHES if s.internal)

if TYPE_CHECKING:
    _Base = os._Environ[str]
else:
    _Base = os._Environ


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {os.path.dirname(os.__file__)}
    found.update(paths[k] for k in ("stdlib", "platstdlib") if paths.get(k))
    return tuple(sorted(os.path.realpath(d) + os.sep for d in found))


_STDLIB = _stdlib_dirs()
_HERE = os.path.abspath(__file__)


def _is_stdlib(filename: str) -> bool:
    if filename.startswith("<frozen "):  # os, _collections_abc, ... (frozen in Python 3.11+)
        return True
    if filename == _HERE:
        return True
    full = os.path.abspath(filename)
    return full.startswith(_STDLIB) and not _LIBRARY_PARTS & set(full.split(os.sep))


def _read_by_distcheck(frame: FrameType | None) -> bool:
    """Whether the read whose innermost caller frame is `frame` comes from distcheck's own code (the
    first frame outside the standard library is distcheck's); False for anyone else's."""
    while frame is not None and _is_stdlib(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_DISTCHECK_DIR)


class Recorder:
    """The reads recorded between `start()` and `stop()`."""

    def __init__(self) -> None:
        self.reads: dict[str, str | None] = {}
        self.written: set[str] = set()

    def note(self, key: str, value: str | None, frame: FrameType | None) -> None:
        """Record that `key` read as `value` (None: unset), unless it was read or set before or the
        read is distcheck's (`frame`: the innermost frame of whoever read it)."""
        if key in self.reads or key in self.written or key in _SET_BY_DISTCHECK or _read_by_distcheck(frame):
            return
        self.reads[key] = value

    def stop(self) -> dict[str, str | None]:
        """Stop recording (once the last recorder stops, `os.environ` is as before; idempotent) and
        return the reads, sorted by name."""
        if self in _ACTIVE:
            _ACTIVE.remove(self)
            if not _ACTIVE:
                os.environ.__class__ = _ORIGINAL[0]
        return dict(sorted(self.reads.items()))


_ACTIVE: list[Recorder] = []
_ORIGINAL: list[type] = []


def _raw(environ: os._Environ[str], key: str) -> str | None:
    try:
        return os._Environ.__getitem__(environ, key)
    except KeyError:
        return None


class _RecordingEnviron(_Base):
    """`os.environ`'s class while a `Recorder` runs: every value read goes through `__getitem__`
    (`get`, `in`, `copy()`, `items()` included), every listing of the names through `__iter__`."""

    def __getitem__(self, key: str) -> str:
        if _ACTIVE and isinstance(key, str):
            _ACTIVE[-1].note(key, _raw(self, key), sys._getframe(1))
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[str]:
        names = list(super().__iter__())
        if _ACTIVE:
            frame = sys._getframe(1)
            for name in names:  # which names are set is what was read: each of them, with its value
                _ACTIVE[-1].note(name, _raw(self, name), frame)
        return iter(names)

    def __setitem__(self, key: str, value: str) -> None:
        if _ACTIVE:
            _ACTIVE[-1].written.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        if _ACTIVE:
            _ACTIVE[-1].written.add(key)
        super().__delitem__(key)


def start() -> Recorder:
    """Record the environment variables read from now until the returned recorder's `stop()`."""
    recorder = Recorder()
    if not _ACTIVE:
        _ORIGINAL[:] = [type(os.environ)]
        os.environ.__class__ = _RecordingEnviron
    _ACTIVE.append(recorder)
    return recorder
