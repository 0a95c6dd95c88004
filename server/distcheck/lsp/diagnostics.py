"""A `TraceReport` (and spec / config problems) → LSP diagnostics, placed without importing user code.

Everything here is pure: the report carries files and lines (factory, sample, helper definitions,
traceback frames), and the rest is found by the text / AST scans of `locate` and the JSON tree of
`jsontext`. `report_diagnostics` returns the diagnostics of one validation, keyed by file path; the
server publishes them per URI, merged with the diagnostics of other targets and documents.

Codes (source `distcheck`): `failing-output`, `spec-fix`, `spec-missing`, `undeclared-helper`,
`worker-error`, `first-divergent-module`, `degenerate-partition`, `halo-incomplete` (from a report),
`spec-invalid` (a spec document), `config-invalid` (a pyproject). `Diagnostic.data` holds
`{"target", "code", ...}` with what a quick fix needs (docs/protocol.md).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types

from ..report import Attempt, HelperDiagnosis, OutputVerdict, TraceReport, tolerance_for
from ..spec import validate_json
from ..spec_edit import spec_changes
from . import jsontext, locate
from .text import LineIndex, Span

__all__ = [
    "CODES",
    "SOURCE",
    "PlaceContext",
    "config_diagnostic",
    "describe_change",
    "first_line",
    "report_diagnostics",
    "runner_error_diagnostics",
    "spec_changes",
    "spec_invalid_diagnostics",
]

SOURCE = "distcheck"
CODES = (
    "failing-output",
    "spec-fix",
    "spec-missing",
    "undeclared-helper",
    "worker-error",
    "first-divergent-module",
    "degenerate-partition",
    "halo-incomplete",
    "spec-invalid",
    "config-invalid",
)

_ERROR = types.DiagnosticSeverity.Error
_WARNING = types.DiagnosticSeverity.Warning
_INFO = types.DiagnosticSeverity.Information


@dataclass
class PlaceContext:
    """What placing a report's diagnostics needs besides the report.

    `read(path)` returns a file's text (the open buffer first) or None; `files()` lists the workspace's
    Python files for call-site and class scans. `spec_text` is the spec document's text (buffer or disk)
    or None when it does not exist. `roots` are the workspace folders, `search_dirs` where the target's
    modules are imported from.
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
    _texts: dict[str, str | None] = field(default_factory=dict)

    def text(self, path: str) -> str | None:
        """`read(path)`, cached for this placement."""
        if path not in self._texts:
            self._texts[path] = self.read(path)
        return self._texts[path]


def first_line(text: str) -> str:
    """The first non-empty line of `text`."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _num(x: object) -> str:
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


def _diagnostic(
    span: Span, code: str, message: str, severity: types.DiagnosticSeverity, data: dict[str, Any]
) -> types.Diagnostic:
    return types.Diagnostic(
        range=_range(span),
        message=message,
        severity=severity,
        code=code,
        source=SOURCE,
        data={"code": code, **data},
    )


# --------------------------------------------------------------------------------------------------
# placing


class _Placer:
    def __init__(self, ctx: PlaceContext) -> None:
        self.ctx = ctx
        self.out: dict[str, list[types.Diagnostic]] = {}
        self._spec_tree: jsontext.Node | bool | None = False

    def add(
        self, path: str, span: Span, code: str, message: str, severity: types.DiagnosticSeverity, **data: Any
    ) -> None:
        data.setdefault("target", self.ctx.target)
        self.out.setdefault(os.path.abspath(path), []).append(_diagnostic(span, code, message, severity, data))

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
        info = (report.target or {}).get("factory") if report is not None else None
        path, line = None, None
        if isinstance(info, Mapping):
            if isinstance(info.get("file"), str):
                path = info["file"]
            if isinstance(info.get("line"), int):
                line = int(info["line"])
        name = self.ctx.factory_name
        if isinstance(info, Mapping) and isinstance(info.get("qualname"), str):
            name = str(info["qualname"]).split(".")[-1]
        path = path or self.ctx.factory_file
        if path is None:
            return None
        text = self.ctx.text(path)
        found = locate.definition(text, name, path) if text is not None else None
        if found is not None and (line is None or abs(found.line - line) <= 60):
            return path, self.location_span(found)
        return path, self.line_span(path, line or 1)

    def sample(self, report: TraceReport) -> tuple[str, Span] | None:
        info = (report.target or {}).get("sample")
        if isinstance(info, Mapping) and isinstance(info.get("file"), str):
            path = str(info["file"])
            line = info.get("line")
            if not path.endswith(".py") or not isinstance(line, int):
                return path, self.line_span(path, int(line) if isinstance(line, int) else 1)
            name = str(info.get("qualname") or self.ctx.sample_name).split(".")[-1]
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


# --------------------------------------------------------------------------------------------------
# spec differences


def _dotted(parts: Sequence[Any]) -> str:
    return ".".join(str(p) for p in parts)


def describe_change(change: Mapping[str, Any]) -> str:
    """`set distribution.policy.scatter_mode to "local"`, `add {...} to all_reduce_outputs`, ..."""
    where = _dotted(change.get("path") or [])
    value = json.dumps(change.get("value"), ensure_ascii=False)
    op = change.get("op")
    if op == "append":
        return f"add {value} to {where}"
    if op == "remove":
        return f"remove {value} from {where}"
    if op == "delete":
        return f"remove {where}"
    return f"set {where} to {value}"


# --------------------------------------------------------------------------------------------------
# report → diagnostics


def _verdict_message(v: OutputVerdict, attempt: Attempt, meta: Mapping[str, Any]) -> str:
    atol = tolerance_for(meta.get("atol"), v.name, v.kind)
    rtol = tolerance_for(meta.get("rtol"), v.name, v.kind)
    which = f"attempt {attempt.index + 1} ({attempt.rule or 'your spec'})"
    if v.status == "missing":
        return f"output {v.name!r} is missing from the distributed outputs under {which}"
    if v.status == "shape":
        return f"output {v.name!r} ({v.kind}) has the wrong shape after consolidation under {which}"
    head = f"output {v.name!r} ({v.kind}) differs from the single-process run under {which}"
    if v.status == "nonfinite":
        head = f"output {v.name!r} ({v.kind}) has non-finite values where the reference is finite under {which}"
    return (
        f"{head}: max abs diff {_num(v.max_abs_diff)} (atol {_num(atol)}), max rel diff {_num(v.max_rel_diff)} "
        f"(rtol {_num(rtol)}), {v.n_failing}/{v.n_total} elements out of tolerance"
    )


def _passing_fix(report: TraceReport) -> Attempt | None:
    """The report's best attempt when it is an auto-fix that passed (the report's one "best")."""
    best = report.best_attempt
    if best is None or not best.passed or best is report.attempts[0]:
        return None
    return best


def _failing_outputs(p: _Placer, report: TraceReport, fix: Attempt | None, changes: list[dict[str, Any]]) -> None:
    first = report.attempts[0]
    if first.passed:
        return
    if fix is not None:
        advice = f"auto-fix {fix.rule or 'rule'!r} makes every output match: apply the spec-fix quick fix"
    else:
        advice = first_line(report.next_action) or "see the distcheck report for what to change"
    for v in first.verdicts.values():
        if v.passed:
            continue
        message = f"{_verdict_message(v, first, report.meta)}. What to do: {advice}"
        data: dict[str, Any] = {"output": v.name, "specPath": p.ctx.spec_path}
        if fix is not None and changes:
            data.update(edits=changes, rule=fix.rule, spec=report.spec.to_dict())
        span = p.spec_span(["output_kinds", v.name])
        if span is not None:
            p.add(p.ctx.spec_path, span, "failing-output", message, _ERROR, **data)
            continue
        where = p.factory(report)
        if where is not None:
            p.add(where[0], where[1], "failing-output", message, _ERROR, **data)


def _spec_fix(p: _Placer, report: TraceReport, fix: Attempt, changes: list[dict[str, Any]]) -> None:
    rule = fix.rule or "auto-fix"
    spec = report.spec.to_dict()
    name = os.path.basename(p.ctx.spec_path)
    common = {"rule": rule, "edits": changes, "spec": spec, "specPath": p.ctx.spec_path, "rationale": fix.rationale}
    if p.spec_tree() is None:
        where = p.factory(report)
        if where is None:
            return
        summary = "; ".join(describe_change(c) for c in changes[:3]) + (" ..." if len(changes) > 3 else "")
        message = (
            f"auto-fix {rule!r} makes every output match ({summary}). There is no spec file yet: apply the "
            f"quick fix to write the working spec to {name}."
        )
        p.add(where[0], where[1], "spec-fix", message, _WARNING, edit=changes[0], **common)
        return
    for change in changes:
        span = p.spec_span(change["path"])
        if span is None:
            continue
        message = (
            f"auto-fix {rule!r} makes every output match: {describe_change(change)}. Apply the quick fix to "
            f"change {name} ({fix.rationale})."
        )
        p.add(p.ctx.spec_path, span, "spec-fix", message, _WARNING, edit=change, **common)


def _helper_sites(p: _Placer, h: HelperDiagnosis) -> list[locate.Location]:
    sites: list[locate.Location] = []
    for path in p.ctx.files():
        text = p.ctx.text(path)
        if text is None or h.function.split(".")[-1] not in text:
            continue
        module = locate.module_name(path, p.ctx.search_dirs) or locate.module_name(path, p.ctx.roots)
        sites.extend(locate.helper_call_sites(text, h.module, h.function, file_module=module, path=path))
    return sites


def _undeclared_helpers(p: _Placer, report: TraceReport) -> None:
    first = report.attempts[0]
    for h in first.helper_diagnostics:
        if not h.flagged or h.already_wrapped:
            continue
        gap = h.suspected_gap or "its per-rank results do not add up to the single-process result"
        if h.likely_remedy is not None:
            remedy = json.dumps(h.likely_remedy, ensure_ascii=False)
            todo = f"declare it in distribution.third_party_helpers (the quick fix adds {remedy})"
        else:
            todo = (
                "declare an adapter for it in distribution.third_party_helpers "
                '({"kind": "python", "module_path", "attr_name", "replacement": "module:function"})'
            )
        data = {
            "qualname": h.qualname,
            "remedy": h.likely_remedy,
            "baseSpec": first.spec.to_dict(),
            "specPath": p.ctx.spec_path,
        }
        source = h.source or {}
        src_file = source.get("file")
        if isinstance(src_file, str):
            line = source.get("line") if isinstance(source.get("line"), int) else 1
            text = p.ctx.text(src_file)
            name = h.function.split(".")[-1]
            found = locate.definition(text, name, src_file) if text is not None else None
            span = p.location_span(found) if found is not None else p.line_span(src_file, int(line or 1))
            message = f"undeclared third-party helper {h.qualname}: {gap}. What to do: {todo}."
            p.add(src_file, span, "undeclared-helper", message, _WARNING, **data)
        for site in _helper_sites(p, h):
            if isinstance(src_file, str) and os.path.abspath(site.path) == os.path.abspath(src_file):
                continue
            message = f"call of the undeclared third-party helper {h.qualname}: {gap}. What to do: {todo}."
            p.add(site.path, p.location_span(site), "undeclared-helper", message, _WARNING, **data)


def _worker_errors(p: _Placer, report: TraceReport) -> None:
    seen: set[tuple[str, str]] = set()
    for attempt in report.attempts:
        e = attempt.error
        if e is None or (e.type, e.message) in seen:
            continue
        seen.add((e.type, e.message))
        where = "the reference run" if e.rank is None or e.rank < 0 else f"rank {e.rank}"
        phase = f" during {e.phase}" if e.phase else ""
        message = f"{e.hint}\n{e.type} on {where}{phase}: {e.message}" if e.hint else f"{e.type}: {e.message}"
        frames = [f.to_dict() for f in e.frames]
        frame = locate.innermost_user_frame(frames, p.ctx.roots)
        data = {"attempt": attempt.index, "type": e.type}
        if frame is not None:
            path = str(frame["file"])
            p.add(path, p.line_span(path, int(frame["line"])), "worker-error", message, _ERROR, **data)
            continue
        fallback = p.factory(report)
        if fallback is not None:
            p.add(fallback[0], fallback[1], "worker-error", message, _ERROR, **data)


def _class_file(p: _Placer, qualified: str) -> locate.Location | None:
    parts = qualified.split(".")
    for k in range(len(parts) - 1, 0, -1):
        path = locate.resolve_module(".".join(parts[:k]), [*p.ctx.search_dirs, *p.ctx.roots])
        if path is None:
            continue
        text = p.ctx.text(path)
        found = locate.class_location(text, ".".join(parts[k:]), path) if text is not None else None
        if found is not None:
            return found
    name = parts[-1]
    for path in p.ctx.files():
        text = p.ctx.text(path)
        if text is None or f"class {name}" not in text:
            continue
        found = locate.class_location(text, name, path)
        if found is not None:
            return found
    return None


def _first_divergent(p: _Placer, report: TraceReport) -> None:
    first = report.attempts[0]
    ld = first.layer_divergence
    if first.passed or not isinstance(ld, Mapping):
        return
    fd = ld.get("first_divergent")
    if not isinstance(fd, Mapping) or not isinstance(fd.get("class"), str):
        return
    cls = str(fd["class"])
    found = _class_file(p, cls)
    if found is None:
        return
    module = fd.get("module") or cls.split(".")[-1]
    message = (
        f"first module whose output diverges from the single-process run: {module} ({cls}), rel diff "
        f"{_num(fd.get('rel_diff'))}. What to do: look in its forward for a per-system reduction or aggregation "
        "distcheck cannot see (a third-party helper, TorchScript, a custom op) and declare it in the spec."
    )
    p.add(found.path, p.location_span(found), "first-divergent-module", message, _INFO, module=module, cls=cls)


def _partition(p: _Placer, report: TraceReport) -> None:
    best = report.best_attempt
    first = report.attempts[0]
    if best is not None and best.degenerate:
        where = p.sample(report)
        if where is not None:
            message = "degenerate partition: a pass proves nothing. " + " ".join(best.degenerate)
            p.add(where[0], where[1], "degenerate-partition", message, _WARNING, messages=best.degenerate)
    hc = first.halo_completeness or {}
    matches = hc.get("matches", hc.get("complete"))
    if matches is False:
        where = p.sample(report)
        if where is not None:
            text = str(hc.get("interpretation") or hc.get("message") or "the halo is shallower than the model needs")
            message = f"halo incomplete under attempt {first.index + 1}: {text}"
            p.add(
                where[0],
                where[1],
                "halo-incomplete",
                message,
                _WARNING,
                haloWidth=hc.get("halo_width"),
                requiredWidth=hc.get("required_width"),
            )


def _spec_missing(p: _Placer, report: TraceReport) -> None:
    if report.verdict != "passed" or not report.attempts[0].passed or p.ctx.spec_text is not None:
        return
    where = p.factory(report)
    if where is None:
        return
    name = os.path.basename(p.ctx.spec_path)
    world = report.meta.get("world_size")
    message = (
        f"validated: every output matches the single-process run at world_size {world}, but no spec file is "
        f"saved yet. Apply the quick fix to save the validated spec to {name}, so later validations (and your "
        "distributed runs) start from it."
    )
    p.add(where[0], where[1], "spec-missing", message, _INFO, spec=report.spec.to_dict(), specPath=p.ctx.spec_path)


def report_diagnostics(report: TraceReport, ctx: PlaceContext) -> dict[str, list[types.Diagnostic]]:
    """Every diagnostic of one validation, keyed by absolute file path (empty when it passed cleanly)."""
    p = _Placer(ctx)
    if not report.attempts:
        return p.out
    fix = _passing_fix(report)
    changes: list[dict[str, Any]] = []
    if fix is not None:
        changes = spec_changes(report.attempts[0].spec.to_dict(), report.spec.to_dict())
    _failing_outputs(p, report, fix, changes)
    if fix is not None and changes:
        _spec_fix(p, report, fix, changes)
    _undeclared_helpers(p, report)
    _worker_errors(p, report)
    _first_divergent(p, report)
    _partition(p, report)
    _spec_missing(p, report)
    return p.out


def runner_error_diagnostics(
    error_type: str, message: str, hint: str, frames: Sequence[Mapping[str, Any]], ctx: PlaceContext
) -> dict[str, list[types.Diagnostic]]:
    """A `worker-error` for a validation that could not start (the factory or sample failed to import,
    a bad spec ...), at the innermost frame in the user's code, else on the factory."""
    p = _Placer(ctx)
    text = f"{message}\nWhat to do: {hint}" if hint else message
    frame = locate.innermost_user_frame(list(frames), ctx.roots)
    data = {"type": error_type}
    if frame is not None:
        path = str(frame["file"])
        p.add(path, p.line_span(path, int(frame["line"])), "worker-error", text, _ERROR, **data)
        return p.out
    where = p.factory(None)
    if where is not None:
        p.add(where[0], where[1], "worker-error", text, _ERROR, **data)
    return p.out


# --------------------------------------------------------------------------------------------------
# spec and config documents


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
        message = f"{err.path}: {err.message}" if err.path != "$" else err.message
        out.append(_diagnostic(span, "spec-invalid", message, _ERROR, {"path": err.path, "file": path}))
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
    full = f"{message}. What to do: {hint}" if hint else message
    return _diagnostic(span, "config-invalid", full, _ERROR, {"file": path})
