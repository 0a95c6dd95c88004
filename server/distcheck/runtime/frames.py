"""Which traceback frame is the user's: the one rule, applied where the error happens and stored.

A frame is the user's when its file is a real file on disk (not `<frozen importlib._bootstrap>`,
`<string>`, ...) outside the standard library, installed packages (site-packages, dist-packages),
torch and distcheck itself. The user frame of an error is the location of a `SyntaxError` in the
user's code (`exc.filename`, `exc.lineno`: the line that does not parse, which no traceback frame
shows), else the innermost user frame of its traceback, the exceptions it was raised from included.
The error records (`RankFailure`, the report's `WorkerError`, the runner's error answer) carry the
result as `user_frame`; the report, the daemon and the extension read it and never guess.

Imports no torch (the torch directory is found with `importlib.util.find_spec`, which does not
import it), so the CLI and the runner can use it before torch is loaded.
"""

from __future__ import annotations

import importlib.util
import os
import sysconfig
import traceback
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Protocol, TypeVar

from .errors import Frame

__all__ = ["exception_chain", "exception_frames", "innermost_user_frame", "is_user_file", "user_frame_of"]

_CHAIN_LIMIT = 5
_LIBRARY_PARTS = frozenset({"site-packages", "dist-packages"})
_LIBRARY_PACKAGES = ("torch",)
_DISTCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class HasFile(Protocol):
    """A frame record: the runtime's `Frame`, the report's, or anything with a `file`."""

    @property
    def file(self) -> str: ...


F = TypeVar("F", bound=HasFile)


@lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    """Directories (with a trailing separator) whose files are never the user's."""
    dirs = {_DISTCHECK_DIR}
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            dirs.add(paths[key])
    for name in _LIBRARY_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec is not None else []:
            dirs.add(location)
    return tuple(sorted(os.path.normpath(os.path.abspath(d)) + os.sep for d in dirs))


def _is_synthetic(path: str) -> bool:
    """`<frozen importlib._bootstrap>`, `<string>`, `<stdin>`, also after an `abspath` made it look real."""
    name = os.path.basename(path)
    return not path or path.startswith("<") or (name.startswith("<") and name.endswith(">"))


def is_user_file(path: str) -> bool:
    """Whether `path` is the user's own code: a real file outside the standard library, installed
    packages (site-packages / dist-packages), torch and distcheck."""
    if _is_synthetic(path):
        return False
    full = os.path.normpath(os.path.abspath(path))
    if _LIBRARY_PARTS & set(full.split(os.sep)) or full.startswith(_library_dirs()):
        return False
    return os.path.isfile(full)


def innermost_user_frame(frames: Sequence[F]) -> F | None:
    """The innermost (last: `frames` are outermost first) frame whose file is the user's, or None."""
    for frame in reversed(frames):
        if is_user_file(frame.file):
            return frame
    return None


def exception_chain(exc: BaseException) -> list[BaseException]:
    """`exc`, then what it was raised from (`__cause__`, else `__context__`), newest first, at most 5."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < _CHAIN_LIMIT:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _path(filename: str) -> str:
    """A frame's file as an absolute path; a synthetic name (`<frozen ...>`) stays as Python printed it."""
    return filename if _is_synthetic(filename) else os.path.abspath(filename)


def exception_frames(exc: BaseException) -> list[Frame]:
    """The traceback frames of `exc` and of the exceptions it was raised from, outermost first (the
    oldest exception's frames first, as Python prints the chain)."""
    return [frame for item in reversed(exception_chain(exc)) for frame in _own_frames(item)]


def _own_frames(exc: BaseException) -> list[Frame]:
    return [Frame(_path(f.filename), f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)]


def _syntax_frames(exc: BaseException) -> Iterator[Frame]:
    for item in exception_chain(exc):
        if isinstance(item, SyntaxError) and isinstance(item.filename, str) and item.lineno:
            yield Frame(_path(item.filename), int(item.lineno), "<module>")


def user_frame_of(exc: BaseException, frames: Sequence[Frame] | None = None) -> Frame | None:
    """The user frame of `exc`: where a `SyntaxError` in its chain is, when that file is the user's;
    else the innermost user frame of `frames`, when given; else the innermost user frame of the oldest
    exception in the chain that has one (where the failure began: a caller that wrapped it, even one
    in user code, comes later); else None."""
    for frame in _syntax_frames(exc):
        if is_user_file(frame.file):
            return frame
    if frames is not None:
        return innermost_user_frame(frames)
    for item in reversed(exception_chain(exc)):
        found = innermost_user_frame(_own_frames(item))
        if found is not None:
            return found
    return None


def root_cause_words(exc: BaseException) -> str | None:
    """`"SyntaxError: invalid syntax (model.py, line 5)"`: the oldest exception of `exc`'s chain as one
    line (its type, then the first line of its message), or None when `exc` was raised from nothing."""
    chain = exception_chain(exc)
    if len(chain) < 2:
        return None
    root = chain[-1]
    lines = str(root).strip().splitlines()
    return f"{type(root).__name__}: {lines[0]}" if lines else type(root).__name__
