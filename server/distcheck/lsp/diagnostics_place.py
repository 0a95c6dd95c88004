"""Placing diagnostics without importing user code: `PlaceContext` (what the server knows besides the
report) and `Placer` (the diagnostics of one placement by file, and the spans of lines, definitions,
classes and spec members they sit on). Shared by the report, evidence and document diagnostics.

`make_diagnostic` is the one place a diagnostic is made, so its rules hold for every code: user text
shown escaped (`safe_text.for_editor`), no detail line repeating the message or an earlier line, the
code linked to its shipped page. A target's diagnostics sit only on files that are not another
target's own (`PlaceContext.others`): what happened in one is shown on the target's factory instead."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types

from ..report import FactoryInfo, TraceReport, view
from ..safe_text import for_editor, json_safe
from ..spec import jsontext
from . import locate
from .diagnostics_codes import MESSAGE_LIMIT, code_description
from .text import LineIndex, Span
from .uris import uri_of

__all__ = [
    "ERROR",
    "INFO",
    "SOURCE",
    "WARNING",
    "PlaceContext",
    "Placer",
    "details",
    "first_line",
    "full_text",
    "make_diagnostic",
    "num",
    "short",
]

SOURCE = "distcheck"

ERROR = types.DiagnosticSeverity.Error
WARNING = types.DiagnosticSeverity.Warning
INFO = types.DiagnosticSeverity.Information


@dataclass
class PlaceContext:
    """What placing a report's diagnostics needs besides the report.

    `read(path)` returns a file's text (the open buffer first) or None; `files()` lists the workspace's
    Python files for call-site and class scans. `spec_text` is the spec document's text (buffer or disk)
    or None when it does not exist. `roots` are the workspace folders, `search_dirs` where the target's
    modules are imported from. `others` are the workspace's other targets' own files (their model
    and spec files): none of this target's diagnostics is published there.
    """

    target: str
    spec_path: str
    spec_text: str | None
    roots: list[str]
    search_dirs: list[str]
    read: Callable[[str], str | None]
    files: Callable[[], Iterable[str]]
    factory_file: str | None = None
    factory_name: str = "model_factory"
    sample_file: str | None = None
    sample_name: str = "sample_batch"
    encoding: str = "utf-16"
    others: Collection[str] = ()
    _texts: dict[str, str | None] = field(default_factory=dict)

    def text(self, path: str) -> str | None:
        """`read(path)`, cached for this placement."""
        if path not in self._texts:
            self._texts[path] = self.read(path)
        return self._texts[path]

    def foreign(self, path: str) -> bool:
        """Is `path` another target's own file and none of this target's (its factory, sample, spec)?"""
        key = os.path.abspath(path)
        own = {os.path.abspath(p) for p in (self.factory_file, self.sample_file, self.spec_path) if p}
        return key not in own and key in {os.path.abspath(p) for p in self.others}


def first_line(text: str) -> str:
    """The first non-empty line of `text`."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def num(x: object) -> str:
    """A number as diagnostics print it: 3 significant digits, "NaN", "-" for None."""
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return f"{x:.3g}"
    return str(x)


def _range(span: Span) -> types.Range:
    return types.Range(
        start=types.Position(line=span.start_line, character=span.start_char),
        end=types.Position(line=span.end_line, character=span.end_char),
    )


def short(message: str) -> tuple[str, str | None]:
    """`message` as a diagnostic shows it: one line of at most `MESSAGE_LIMIT` characters, and the full
    text when that had to be cut (for the related information), else None."""
    flat = " ".join(message.split())
    if len(flat) <= MESSAGE_LIMIT and "\n" not in message.strip():
        return flat, None
    cut = flat[: MESSAGE_LIMIT - 1]
    cut = cut[: cut.rfind(" ")] if " " in cut[MESSAGE_LIMIT // 2 :] else cut
    return cut.rstrip(" ,;:") + "…", message.strip()


def _key(text: str) -> str:
    return " ".join(text.split()).rstrip(" .").casefold()


def details(said: Iterable[str], lines: Iterable[str]) -> list[str]:
    """`lines` less the empty ones and every line whose text (case, spacing and a final full stop
    aside) one of `said` (the message, the remedy) or an earlier kept line already holds: each detail
    says something new."""
    seen = [_key(text) for text in said if text]
    kept: list[str] = []
    for line in lines:
        key = _key(line)
        if key and not any(key in earlier for earlier in seen):
            kept.append(line)
            seen.append(key)
    return kept


def full_text(diagnostic: types.Diagnostic) -> str:
    """A diagnostic's whole text: its message, then each line of its related information."""
    related = [r.message for r in diagnostic.related_information or []]
    return "\n".join([diagnostic.message, *related])


def make_diagnostic(
    span: Span,
    code: str,
    message: str,
    severity: types.DiagnosticSeverity,
    data: dict[str, Any],
    *,
    path: str,
    todo: str | None = None,
    evidence: Sequence[str] = (),
) -> types.Diagnostic:
    """One `distcheck` diagnostic on `span` of the file `path`: `message` (what is wrong, one sentence
    under `MESSAGE_LIMIT` characters: cut there, the whole text then kept as evidence), the remedy
    `todo` ("What to do: ...") and the `evidence` lines as related information at the same place, each
    saying something new (`details`), the `codeDescription` linking the code's shipped page
    (`diagnostics_codes`); `data` gets its `code`. Every text is shown as `safe_text.for_editor`
    shows it, and `data`'s strings are JSON-safe."""
    text, full = short(for_editor(message))
    where = types.Location(uri=uri_of(path), range=_range(span))
    remedy = for_editor(todo) if todo else ""
    lines = details([text, remedy], [*([full] if full is not None else []), *(for_editor(e) for e in evidence)])
    if remedy:
        lines.insert(0, f"What to do: {remedy}")
    related = [types.DiagnosticRelatedInformation(location=where, message=line) for line in lines]
    return types.Diagnostic(
        range=_range(span),
        message=text,
        severity=severity,
        code=code,
        code_description=code_description(code),
        source=SOURCE,
        related_information=related or None,
        data=json_safe({"code": code, **data}),
    )


# --------------------------------------------------------------------------------------------------
# placing


class Placer:
    """Collects one placement's diagnostics by absolute path and finds the spans they sit on."""

    def __init__(self, ctx: PlaceContext) -> None:
        self.ctx = ctx
        self.out: dict[str, list[types.Diagnostic]] = {}
        self._spec_tree: jsontext.Node | bool | None = False

    def add(
        self,
        path: str,
        span: Span,
        code: str,
        message: str,
        severity: types.DiagnosticSeverity,
        *,
        todo: str | None = None,
        evidence: Sequence[str] = (),
        **data: Any,
    ) -> None:
        """Add a diagnostic (see `make_diagnostic`) at `span` of `path`; `data` gets the target's name.
        On another target's file (`PlaceContext.foreign`) it goes on this target's factory instead, the
        evidence naming the line it is about; with no factory of its own it is left out."""
        data.setdefault("target", self.ctx.target)
        if self.ctx.foreign(path):
            home = self.factory(None)
            if home is None or self.ctx.foreign(home[0]):
                return
            seen = f"at {os.path.basename(path)} line {span.start_line + 1} (another target's file, so shown here)"
            path, span, evidence = home[0], home[1], [seen, *evidence]
        diagnostic = make_diagnostic(span, code, message, severity, data, path=path, todo=todo, evidence=evidence)
        self.out.setdefault(os.path.abspath(path), []).append(diagnostic)

    def files(self) -> Iterator[str]:
        """The workspace's Python files a scan may place on: `ctx.files()` less other targets' own."""
        return (path for path in self.ctx.files() if not self.ctx.foreign(path))

    def line_span(self, path: str, line: int, start: int | None = None, end: int | None = None) -> Span:
        """Span on 1-based `line` of `path` (code-point columns; the trimmed line when not given)."""
        text = self.ctx.text(path)
        if text is None:
            return Span(max(0, line - 1), 0, max(0, line - 1), 0)
        index = LineIndex(text, self.ctx.encoding)
        row = max(0, line - 1)
        if start is None:
            return index.line_span(row)
        stop = end if end is not None else len(index.line_text(row).rstrip())
        return Span(row, index.column_units(row, start), row, index.column_units(row, max(stop, start)))

    def location_span(self, loc: locate.Location) -> Span:
        return self.line_span(loc.path, loc.line, loc.start, loc.end)

    # ---- the factory, the sample, the spec

    def factory(self, report: TraceReport | None) -> tuple[str, Span] | None:
        target = report.target if report is not None else None
        info = target.factory if target is not None else None
        path = info.file if info is not None else None
        line = info.line if info is not None else None
        name = self.ctx.factory_name
        if info is not None and info.qualname is not None:
            name = info.qualname.split(".")[-1]
        path = path or self.ctx.factory_file
        if path is None:
            return None
        text = self.ctx.text(path)
        found = locate.definition(text, name, path) if text is not None else None
        if found is not None and (line is None or abs(found.line - line) <= 60):
            return path, self.location_span(found)
        return path, self.line_span(path, line or 1)

    def sample(self, report: TraceReport) -> tuple[str, Span] | None:
        target = report.target
        info = view(FactoryInfo, target.sample) if target is not None and target.sample is not None else None
        if info is not None and info.file is not None:
            path, line = info.file, info.line
            if not path.endswith(".py") or line is None:
                return path, self.line_span(path, line or 1)
            name = (info.qualname or self.ctx.sample_name).split(".")[-1]
            text = self.ctx.text(path)
            found = locate.definition(text, name, path) if text is not None else None
            if found is not None:
                return path, self.location_span(found)
            return path, self.line_span(path, line)
        fallback = self.ctx.sample_file or self.ctx.factory_file
        if fallback is not None:
            text = self.ctx.text(fallback)
            found = locate.definition(text, self.ctx.sample_name, fallback) if text is not None else None
            if found is not None:
                return fallback, self.location_span(found)
        return self.factory(report)

    def spec_tree(self) -> jsontext.Node | None:
        if self._spec_tree is False:
            tree: jsontext.Node | None = None
            if self.ctx.spec_text is not None:
                try:
                    tree = jsontext.parse(self.ctx.spec_text)
                except jsontext.JsonEditError:
                    tree = None
            self._spec_tree = tree
        return self._spec_tree if isinstance(self._spec_tree, jsontext.Node) else None

    def spec_span(self, parts: Sequence[str | int]) -> Span | None:
        """Span of the member (key, and a scalar value) or item at `parts` in the spec text, or of its
        nearest existing ancestor; None when there is no usable spec text."""
        tree = self.spec_tree()
        text = self.ctx.spec_text
        if tree is None or text is None:
            return None
        node, start, end = tree, tree.start, tree.start + 1
        for part in parts:
            if isinstance(part, int):
                if node.kind != "array" or not 0 <= part < len(node.items):
                    break
                node = node.items[part]
                start, end = node.start, node.end
            else:
                member = None
                if node.kind == "object":
                    for m in node.members:
                        if m.key == part:
                            member = m
                if member is None:
                    break
                node = member.value
                start = member.key_start
                end = member.value.end if node.kind not in ("object", "array") else member.key_end
        index = LineIndex(text, self.ctx.encoding)
        span = index.span(start, end)
        if span.end_line != span.start_line:
            row = span.start_line
            span = Span(row, span.start_char, row, index.column_units(row, len(index.line_text(row).rstrip())))
        return span

    def class_location(self, qualified: str) -> locate.Location | None:
        """The `class` line of `pkg.mod.Class`: by module path first, else by a scan of the workspace."""
        parts = qualified.split(".")
        for k in range(len(parts) - 1, 0, -1):
            path = locate.resolve_module(".".join(parts[:k]), [*self.ctx.search_dirs, *self.ctx.roots])
            if path is None:
                continue
            text = self.ctx.text(path)
            found = locate.class_location(text, ".".join(parts[k:]), path) if text is not None else None
            if found is not None:
                return found
        name = parts[-1]
        for path in self.files():
            text = self.ctx.text(path)
            if text is None or f"class {name}" not in text:
                continue
            found = locate.class_location(text, name, path)
            if found is not None:
                return found
        return None
