"""Naming what no handler routed: each unrouted aggregation with its op, count and source location.

An aggregation the handlers did not route gives this rank's partial instead of the global value, so it
is recorded in `RankContext.unrouted` (plain data; `RankRecord.unrouted` reads it back as
`report.UnroutedOp`). The location is found from the Python stack at interception: the innermost frame
outside torch and distcheck. For an op inside TorchScript that frame is the Python line that called into
the script; the scripted function (or module) called there is looked up by name in that frame, and the
op's own `file:line` is read from the source ranges of its TorchScript graph (`node.sourceRange()`).
"""

from __future__ import annotations

import ast
import builtins
import functools
import linecache
import os
import re
import sys
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any, NamedTuple

import torch

from .context import RankContext

__all__ = ["Site", "aten_kind", "record_unrouted", "user_frame"]

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_DISTCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SOURCE_RANGE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def _internal(path: str) -> bool:
    if path.startswith("<"):
        return True
    full = os.path.abspath(path)
    return full.startswith(_TORCH_DIR) or full.startswith(_DISTCHECK_DIR)


class Site(NamedTuple):
    """Where an op ran, found by the caller while it ran: the op's `file`/`line` and `function`, and
    the user's line that called into the code holding it (`call_file`/`call_line`, or None)."""

    file: str | None
    line: int | None
    function: str | None
    call_file: str | None = None
    call_line: int | None = None


def user_frame(start: FrameType | None) -> FrameType | None:
    """The innermost frame at or above `start` whose code is neither torch's nor distcheck's."""
    frame = start
    while frame is not None and _internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def aten_kind(name: str) -> str:
    """`aten::index_add_` → `aten::index_add`; `aten::_index_put_impl_` → `aten::index_put`."""
    base = name.split(".")[0]
    if base == "aten::_index_put_impl_":
        return "aten::index_put"
    return base.rstrip("_")


def record_unrouted(
    ctx: RankContext,
    op: str,
    aggregation: str,
    origin: str,
    *,
    frame: FrameType | None = None,
    aten: str | None = None,
    roots: Sequence[Any] = (),
    function: str | None = None,
    kernel: dict[str, Any] | None = None,
    site: Site | None = None,
) -> None:
    """Count one unrouted aggregation in `ctx.unrouted`.

    `frame` is where to start looking for the user's frame (default: the caller's). With `aten` (the
    aten op seen below Python) the TorchScript callables called at that frame, else `roots` (the
    wrapper when it is itself scripted), are searched for graph nodes of that op to give its own
    location; found, the origin becomes `"torchscript"`. `function` names the function holding the op
    when the caller knows it (an undeclared `torch.ops` kernel); `kernel` is such a kernel's call record
    (`report.KernelCall` fields: roles, shapes, ready entry), kept from its first call at that line.
    `site`, when given, is the location as found earlier (the op ran before this record is made).
    """
    user = None if site is not None else user_frame(frame if frame is not None else sys._getframe(1))
    if site is None:
        qualname = user.f_code.co_qualname if user is not None else None
        site = Site(os.path.abspath(user.f_code.co_filename) if user is not None else None, _line(user), qualname)
    file, line = site.file, site.line
    entry: dict[str, Any] = {
        "op": op,
        "aggregation": aggregation,
        "origin": origin,
        "file": file,
        "line": line,
        "function": function or site.function,
        "call_file": site.call_file,
        "call_line": site.call_line,
    }
    if kernel is not None:
        entry["kernel"] = kernel
    if aten is not None:
        sites = _script_sites(user, aten_kind(aten), roots)
        if sites:
            seen = ctx.unrouted_calls.get((op, file, line), 0)
            ctx.unrouted_calls[(op, file, line)] = seen + 1
            site_file, site_line, site_function = sites[seen % len(sites)]
            entry.update(
                origin="torchscript",
                file=site_file,
                line=site_line,
                function=site_function,
                call_file=file,
                call_line=line,
            )
    key = tuple(entry[k] for k in ("op", "aggregation", "origin", "file", "line", "call_file", "call_line"))
    found = ctx.unrouted.get(key)
    if found is None:
        ctx.unrouted[key] = {**entry, "count": 1}
    else:
        found["count"] += 1


def _line(frame: FrameType | None) -> int | None:
    return frame.f_lineno if frame is not None else None


# -- TorchScript call sites -------------------------------------------------------------------------
def _script_sites(frame: FrameType | None, kind: str, roots: Sequence[Any]) -> list[tuple[str, int, str | None]]:
    """`(file, line, function)` of every graph node of `kind` in the TorchScript callables called at
    `frame`'s current line (else in `roots`), in graph order."""
    callees = _callees(frame) if frame is not None else []
    scripted = [c for c in callees if _graph(c) is not None] or [r for r in roots if _graph(r) is not None]
    sites: list[tuple[str, int, str | None]] = []
    for obj in scripted:
        graph = _graph(obj)
        for node in _nodes(graph):
            if node.kind().startswith("aten::") and aten_kind(node.kind()) == kind:
                where = _SOURCE_RANGE.search(str(node.sourceRange()))
                if where is not None:
                    path, line = where["file"], int(where["line"])
                    sites.append((path, line, _enclosing_function(path, line)))
    return list(dict.fromkeys(sites))


def _graph(obj: Any) -> Any:
    if isinstance(obj, (torch.jit.ScriptFunction, torch.jit.ScriptModule, torch._C.ScriptMethod)):
        try:
            return getattr(obj, "inlined_graph", None)
        except (AttributeError, RuntimeError):
            return None
    return None


def _nodes(graph: Any) -> Iterator[Any]:
    for node in graph.nodes():
        yield node
        for block in node.blocks():
            yield from _nodes(block)


def _callees(frame: FrameType) -> list[Any]:
    """The objects called by the expression `frame` is executing (names resolved in the frame)."""
    text = _call_text(frame)
    calls: list[ast.Call] = []
    for source in (text, linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()):
        if not source:
            continue
        for mode in ("eval", "exec"):
            try:
                tree = ast.parse(source, mode=mode)
            except SyntaxError:
                continue
            calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
            break
        if calls:
            break
    found = []
    for call in calls:
        obj = _resolve(call.func, frame)
        if obj is not None:
            found.append(obj)
    return found


def _call_text(frame: FrameType) -> str | None:
    """The source of the instruction `frame` is executing (the call expression), from its positions."""
    try:
        positions = list(frame.f_code.co_positions())
        start, end, col, end_col = positions[frame.f_lasti // 2]
    except (AttributeError, IndexError, ValueError):
        return None
    if start is None or end is None or col is None or end_col is None:
        return None
    lines = [linecache.getline(frame.f_code.co_filename, n).encode() for n in range(start, end + 1)]
    if not lines:
        return None
    if len(lines) == 1:
        return lines[0][col:end_col].decode(errors="replace")
    return b"".join([lines[0][col:], *lines[1:-1], lines[-1][:end_col]]).decode(errors="replace")


def _resolve(expr: ast.expr, frame: FrameType) -> Any:
    if isinstance(expr, ast.Name):
        for space in (frame.f_locals, frame.f_globals, vars(builtins)):
            if expr.id in space:
                return space[expr.id]
        return None
    if isinstance(expr, ast.Attribute):
        base = _resolve(expr.value, frame)
        if base is None:
            return None
        try:
            return getattr(base, expr.attr)
        except Exception:  # an attribute that cannot be read now: no name for it, not a failure
            return None
    return None


@functools.lru_cache(maxsize=256)
def _function_spans(path: str) -> tuple[tuple[int, int, str], ...]:
    try:
        tree = ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return ()
    spans: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    spans.append((child.lineno, child.end_lineno or child.lineno, name))
                visit(child, name + ".")
            else:  # `with`, `if`, `try` blocks at any level hold definitions too
                visit(child, prefix)

    visit(tree, "")
    return tuple(spans)


def _enclosing_function(path: str, line: int) -> str | None:
    """The qualified name of the innermost function of `path` holding `line`, or None."""
    best: tuple[int, str] | None = None
    for start, end, name in _function_spans(path):
        if start <= line <= end and (best is None or start >= best[0]):
            best = (start, name)
    return best[1] if best is not None else None
