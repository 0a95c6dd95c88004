"""Where things are in the user's source, found by reading text and ASTs — never by importing it.

The daemon must not import user code (or torch), so everything it places in an editor comes from the
report (file + line) or from these scans: module-scope definitions (the factory's `def`, the sample),
the `class` line of a module type named `package.module.QualName`, the call sites of a third-party
helper (`alias.mol_sum(...)`, `from pkg.mod import mol_sum` then `mol_sum(...)`, relative imports
included), and dotted module names ⇄ files on the project's import path. Which traceback frame is the user's
is not guessed here: the report and the runner's errors carry it (`runtime.frames`).

Columns returned here are code-point offsets (Python string indices), lines are 1-based.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..jobs import spec_source

__all__ = [
    "SKIP_DIRS",
    "Location",
    "class_location",
    "definition",
    "file_target",
    "helper_call_sites",
    "is_user_file",
    "iter_python_files",
    "locate_class",
    "module_name",
    "resolve_module",
]

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "__pycache__",
        "node_modules",
        "site-packages",
        "dist-packages",
        "build",
        "dist",
        ".eggs",
    }
)
"""Directory names never scanned for Python files."""

_DISTCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Location:
    """`line` (1-based) and the code-point columns `[start, end)` of a name or expression on it."""

    path: str
    line: int
    start: int
    end: int


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _columns(source_lines: Sequence[str], line: int, byte_col: int) -> int:
    """An AST column (UTF-8 byte offset) on 1-based `line` as a code-point offset."""
    if not 1 <= line <= len(source_lines):
        return 0
    raw = source_lines[line - 1].encode("utf-8")
    return len(raw[:byte_col].decode("utf-8", "replace"))


def _name_on_line(lines: Sequence[str], line: int, keyword: str, name: str) -> tuple[int, int]:
    """Code-point columns of `name` after `keyword` on 1-based `line` (the whole line if not found)."""
    text = lines[line - 1] if 1 <= line <= len(lines) else ""
    at = text.find(f"{keyword} {name}") if keyword else -1
    if at >= 0:
        start = at + len(keyword) + 1
        return start, start + len(name)
    at = text.find(name)
    if at >= 0:
        return at, at + len(name)
    stripped = len(text) - len(text.lstrip())
    return stripped, len(text.rstrip())


def definition(source: str, name: str, path: str = "") -> Location | None:
    """The module-scope definition of `name`: `def name` / `async def name` / `class name` (the line of
    the keyword, after decorators) or the first `name = ...` / `name: T = ...`; None if absent."""
    tree = _parse(source)
    if tree is None:
        return None
    lines = source.splitlines()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            keyword = "class" if isinstance(node, ast.ClassDef) else "def"
            line = _keyword_line(lines, node.lineno, keyword, name)
            start, end = _name_on_line(lines, line, keyword, name)
            return Location(path, line, start, end)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id == name:
                start = _columns(lines, target.lineno, target.col_offset)
                return Location(path, target.lineno, start, start + len(name))
    return None


def _keyword_line(lines: Sequence[str], lineno: int, keyword: str, name: str) -> int:
    """The line holding `keyword name` at or after `lineno` (AST lines point at decorators in 3.8-)."""
    for line in range(lineno, min(len(lines), lineno + 50) + 1):
        if f"{keyword} {name}" in lines[line - 1]:
            return line
    return lineno


def file_target(source: str, path: str = "") -> tuple[Location, Location] | None:
    """(factory, sample) when the module defines both `model_factory` and `sample_batch` at module
    scope, else None."""
    factory = definition(source, "model_factory", path)
    if factory is None:
        return None
    sample = definition(source, "sample_batch", path)
    if sample is None:
        return None
    return factory, sample


def class_location(source: str, qualname: str, path: str = "") -> Location | None:
    """The `class` line of `qualname` (`Outer.Inner` for nested classes) in the module `source`."""
    tree = _parse(source)
    if tree is None:
        return None
    lines = source.splitlines()
    body: list[ast.stmt] = tree.body
    found: ast.ClassDef | None = None
    for part in qualname.split("."):
        found = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if found is None:
            return None
        body = found.body
    assert found is not None
    line = _keyword_line(lines, found.lineno, "class", found.name)
    start, end = _name_on_line(lines, line, "class", found.name)
    return Location(path, line, start, end)


# --------------------------------------------------------------------------------------------------
# modules and files


def resolve_module(module: str, search_dirs: Iterable[str]) -> str | None:
    """The file of the dotted `module` under the first of `search_dirs` that has it
    (`a/b/c.py` or `a/b/c/__init__.py`), or None: `jobs.spec_source.resolve_module`, the lookup the spec
    rule finds a model's file with."""
    return spec_source.resolve_module(module, search_dirs)


def locate_class(
    dotted: str, search_dirs: Sequence[str], roots: Sequence[str], read: Callable[[str], str | None]
) -> Location | None:
    """The `class` line of the dotted class name `dotted` (`pkg.mod.Outer.Inner`, as a report names a
    module's class): in the file its module part resolves to under `search_dirs` (longest module
    first), else the first top-level `class` of its last name in a Python file of `roots`; None when
    neither has it."""
    parts = dotted.split(".")
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    for cut in range(len(parts) - 1, 0, -1):
        path = resolve_module(".".join(parts[:cut]), search_dirs)
        text = read(path) if path is not None else None
        found = class_location(text, ".".join(parts[cut:]), path) if text is not None and path else None
        if found is not None:
            return found
    name = parts[-1]
    for path in iter_python_files(roots):
        text = read(path)
        if text is not None and f"class {name}" in text:
            found = class_location(text, name, path)
            if found is not None:
                return found
    return None


def module_name(path: str, search_dirs: Iterable[str]) -> str | None:
    """The dotted module name of the file `path` relative to the first of `search_dirs` holding it."""
    path = os.path.abspath(path)
    for directory in search_dirs:
        directory = os.path.abspath(directory)
        prefix = directory.rstrip(os.sep) + os.sep
        if not path.startswith(prefix) or not path.endswith(".py"):
            continue
        parts = path[len(prefix) : -3].split(os.sep)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts):
            return ".".join(parts)
    return None


def iter_python_files(roots: Iterable[str], limit: int = 5000) -> Iterator[str]:
    """Python files under `roots` (skipping `SKIP_DIRS`, hidden and virtual-environment directories),
    at most `limit` of them, each once."""
    seen: set[str] = set()
    count = 0
    for root in roots:
        for directory, dirs, files in os.walk(root):
            dirs[:] = sorted(
                d
                for d in dirs
                if d not in SKIP_DIRS
                and not d.startswith(".")
                and not d.endswith(".egg-info")
                and not os.path.exists(os.path.join(directory, d, "pyvenv.cfg"))
            )
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.abspath(os.path.join(directory, name))
                if path in seen:
                    continue
                seen.add(path)
                yield path
                count += 1
                if count >= limit:
                    return


def is_user_file(path: str, roots: Iterable[str]) -> bool:
    """Whether `path` is the user's own code: under one of `roots`, not in an installed package,
    a virtual environment or distcheck itself."""
    path = os.path.normpath(os.path.abspath(path))
    parts = set(path.split(os.sep))
    if parts & {"site-packages", "dist-packages"} or path.startswith(_DISTCHECK_DIR + os.sep):
        return False
    prefix = os.path.normpath(sys.prefix)
    if path.startswith(prefix + os.sep) and prefix != os.sep:
        return False
    for root in roots:
        base = os.path.normpath(os.path.abspath(root))
        if path == base or path.startswith(base.rstrip(os.sep) + os.sep):
            rel = os.path.relpath(path, base).split(os.sep)
            if any(p in SKIP_DIRS for p in rel[:-1]):
                return False
            return True
    return False


# --------------------------------------------------------------------------------------------------
# helper call sites


def _absolute_import(module: str | None, level: int, file_module: str | None, is_package: bool) -> str | None:
    if level == 0:
        return module
    if file_module is None:
        return None
    package = file_module.split(".") if is_package else file_module.split(".")[:-1]
    if level - 1 > len(package):
        return None
    base = package[: len(package) - (level - 1)]
    if module:
        base = [*base, *module.split(".")]
    return ".".join(base) if base else None


def _aliases(tree: ast.Module, file_module: str | None, is_package: bool) -> dict[str, str]:
    """Local name → fully qualified dotted name for every import in the file (any scope)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = _absolute_import(node.module, node.level, file_module, is_package)
            if base is None:
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                names[alias.asname or alias.name] = f"{base}.{alias.name}"
    return names


def _dotted(expr: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return parts[::-1]


def helper_call_sites(
    source: str, helper_module: str, attr: str, *, file_module: str | None = None, path: str = ""
) -> list[Location]:
    """Calls of `helper_module.attr` in `source`: through a module alias (`nbops.mol_sum(...)`,
    `pkg.nbops.mol_sum(...)`), an imported name (`mol_sum(...)` after `from pkg.nbops import mol_sum`,
    `as` names and relative imports resolved with `file_module`), or plainly inside the helper's own
    module. Each location spans the called expression."""
    last = attr.split(".")[-1]
    if last not in source:
        return []
    tree = _parse(source)
    if tree is None:
        return []
    is_package = path.endswith("__init__.py")
    aliases = _aliases(tree, file_module, is_package)
    wanted = f"{helper_module}.{attr}"
    lines = source.splitlines()
    found: list[Location] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        parts = _dotted(node.func)
        if parts is None:
            continue
        head = aliases.get(parts[0])
        if head is not None:
            qualified = ".".join([head, *parts[1:]])
        elif file_module == helper_module:
            qualified = ".".join([helper_module, *parts])
        else:
            continue
        if qualified != wanted:
            continue
        func = node.func
        line = func.lineno
        start = _columns(lines, line, func.col_offset)
        end_line = func.end_lineno or line
        end = _columns(lines, end_line, func.end_col_offset or func.col_offset) if end_line == line else start
        found.append(Location(path, line, start, max(end, start + 1)))
    found.sort(key=lambda loc: (loc.line, loc.start))
    return found
