"""Which Python files of the workspace define a target of their own, found without importing anything.

A file target is a module that defines `model_factory` and `sample_batch` at module scope. The editor
finds them in every workspace folder, not only in the open buffers (`scan`): a bounded walk that skips
hidden directories, virtual environments, installed packages and build output (`SKIPPED_DIRS`), reads
only files of at most `MAX_BYTES` whose text names `model_factory`, and stops after `MAX_FILES` Python
files (the log says so). An open buffer speaks for its file (unsaved edits count).

A module that does not parse is still a target when both definitions (a `def` or an assignment) stand
at the start of a line (`broken_module`): the file stays in the picker and the Testing view under its name, and its
`SyntaxError` becomes a `model-syntax-error` diagnostic at the error's line (`syntax_diagnostic`),
instead of the file vanishing with no word.

What a scan read is remembered per file by size and modification time (`FileMemo`): it decides only
which files are listed, never a verdict, and a changed file is read again.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from lsprotocol import types

from .diagnostics_place import ERROR, make_diagnostic
from .text import LineIndex

__all__ = [
    "MAX_BYTES",
    "MAX_FILES",
    "SKIPPED_DIRS",
    "BrokenModule",
    "FileMemo",
    "broken_module",
    "scan",
    "syntax_diagnostic",
]

MAX_FILES = 5000
"""The most Python files one scan looks at (per workspace folder)."""

MAX_BYTES = 2_000_000
"""A larger Python file is not read (no model file is that long)."""

SKIPPED_DIRS = frozenset(
    {"node_modules", "site-packages", "dist-packages", "__pycache__", "build", "dist", "venv", "env", "htmlcov"}
)
"""Directory names never walked into, besides every name starting with a dot (.git, .venv, .tox, ...)."""

_FACTORY = re.compile(r"^(?:(?:async[ \t]+)?def[ \t]+model_factory\b|model_factory[ \t]*[:=])", re.MULTILINE)
_SAMPLE = re.compile(r"^(?:(?:async[ \t]+)?def[ \t]+sample_batch\b|sample_batch[ \t]*[:=])", re.MULTILINE)


@dataclass(frozen=True)
class BrokenModule:
    """A would-be target module whose source does not parse: its factory's 1-based `line`, and the
    `SyntaxError`'s 1-based `error_line`, 1-based `column` (None when unknown) and `message`."""

    path: str
    line: int
    error_line: int
    column: int | None
    message: str


def broken_module(path: str, source: str) -> BrokenModule | None:
    """The `BrokenModule` of `source` when it fails to parse and still defines `model_factory` and
    `sample_batch` at the start of a line; None when it parses or is no target."""
    factory = _FACTORY.search(source)
    if factory is None or _SAMPLE.search(source) is None:
        return None
    try:
        ast.parse(source)
    except SyntaxError as exc:
        line = source.count("\n", 0, factory.start()) + 1
        column = exc.offset if exc.offset and exc.offset > 0 else None
        return BrokenModule(path, line, exc.lineno or line, column, exc.msg or "invalid syntax")
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        line = source.count("\n", 0, factory.start()) + 1
        return BrokenModule(path, line, line, None, str(exc) or type(exc).__name__)
    return None


def syntax_diagnostic(broken: BrokenModule, text: str, encoding: str = "utf-16") -> types.Diagnostic:
    """The `model-syntax-error` diagnostic of `broken`, at the error's line and column."""
    index = LineIndex(text, encoding)
    row = max(0, broken.error_line - 1)
    span = index.line_span(row, None if broken.column is None else broken.column - 1)
    return make_diagnostic(
        span,
        "model-syntax-error",
        f"SyntaxError: {broken.message}",
        ERROR,
        {"file": broken.path},
        path=broken.path,
        todo=(
            f"fix this line: the file defines model_factory (line {broken.line}) but cannot be imported, so it "
            "cannot be validated until it parses"
        ),
    )


class FileMemo:
    """What scans read, per path: the text of each Python file that names `model_factory` (None for one
    that does not), kept while the file's size and modification time stay the same."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, int, str | None]] = {}

    def text(self, path: str) -> str | None:
        """The file's text when it may define a target (it names `model_factory`), else None."""
        try:
            st = os.stat(path)
        except OSError:
            self._seen.pop(path, None)
            return None
        known = self._seen.get(path)
        if known is not None and known[0] == st.st_size and known[1] == st.st_mtime_ns:
            return known[2]
        text: str | None = None
        if st.st_size <= MAX_BYTES:
            try:
                with open(path, "rb") as f:
                    raw = f.read(MAX_BYTES + 1)
                if b"model_factory" in raw:
                    text = raw.decode("utf-8", "replace")
            except OSError:
                text = None
        self._seen[path] = (st.st_size, st.st_mtime_ns, text)
        return text


def _python_files(root: str, limit: int) -> Iterator[str]:
    """The `.py` files under `root`, directories in `SKIPPED_DIRS` and hidden ones left out, at most `limit`."""
    count = 0
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(here, name)
                count += 1
                if count >= limit:
                    return


def scan(
    roots: Iterable[str],
    open_texts: Mapping[str, str],
    memo: FileMemo,
    log: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """Every Python file under `roots` (and every open `.py` buffer) whose text may define a target, by
    normalised path → text (the open buffer's, else the disk's)."""
    out: dict[str, str] = {}
    for root in roots:
        seen = 0
        for path in _python_files(root, MAX_FILES):
            seen += 1
            key = os.path.normpath(path)
            text = open_texts[key] if key in open_texts else memo.text(key)
            if text is not None and "model_factory" in text:
                out[key] = text
        if seen >= MAX_FILES and log is not None:
            log(f"{root}: more than {MAX_FILES} Python files; the rest are not searched for model_factory")
    for path, text in open_texts.items():
        if path.endswith(".py") and "model_factory" in text:
            out[os.path.normpath(path)] = text
    return out
