"""Diagnostics of documents rather than reports: `spec-invalid` for a spec document's errors and
`config-invalid` for a broken `[tool.distcheck]`."""

from __future__ import annotations

from lsprotocol import types

from ..spec import validate_json
from .diagnostics_place import ERROR, make_diagnostic
from .text import LineIndex, Span

__all__ = ["config_diagnostic", "spec_invalid_diagnostics"]


def _token_end(line: str, column: int) -> int:
    if column >= len(line):
        return len(line)
    if line[column] == '"':
        i = column + 1
        while i < len(line):
            if line[i] == "\\":
                i += 2
                continue
            if line[i] == '"':
                return i + 1
            i += 1
        return len(line)
    i = column
    while i < len(line) and line[i] not in ",}]":
        i += 1
    end = len(line[:i].rstrip())
    return end if end > column else min(len(line), column + 1)


def spec_invalid_diagnostics(text: str, path: str, encoding: str = "utf-16") -> list[types.Diagnostic]:
    """`spec-invalid` diagnostics for every error `distcheck.spec.validate_json` finds in `text`."""
    out: list[types.Diagnostic] = []
    if text.startswith("\ufeff"):
        text = text[1:]
    index = LineIndex(text, encoding)
    for err in validate_json(text, file=path):
        row = max(0, (err.line or 1) - 1)
        line = index.line_text(row)
        col = max(0, (err.column or 1) - 1)
        if err.line is None:
            span = index.line_span(0)
        else:
            end = _token_end(line, col)
            span = Span(row, index.column_units(row, col), row, index.column_units(row, end))
        problem, _, remedy = err.message.partition("; ")
        message = f"{err.path}: {problem}" if err.path != "$" else problem
        data = {"path": err.path, "file": path}
        out.append(make_diagnostic(span, "spec-invalid", message, ERROR, data, path=path, todo=remedy or None))
    return out


def config_diagnostic(
    path: str, text: str | None, line: int, column: int | None, message: str, hint: str, encoding: str = "utf-16"
) -> types.Diagnostic:
    """The one `config-invalid` diagnostic of a broken `[tool.distcheck]`, on its offending line."""
    row = max(0, line - 1)
    if text is None:
        span = Span(row, 0, row, 0)
    else:
        index = LineIndex(text, encoding)
        span = index.line_span(row, None if column is None else max(0, column - 1))
    return make_diagnostic(span, "config-invalid", message, ERROR, {"file": path}, path=path, todo=hint or None)
