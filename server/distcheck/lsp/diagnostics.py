"""A `TraceReport` (and spec / config problems) → LSP diagnostics, placed without importing user code.

Everything here is pure: the report carries files and lines (factory, sample, helper definitions,
traceback frames, unrouted ops), and the rest is found by the text / AST scans of `locate` and the
JSON tree of `jsontext`. `report_diagnostics` returns the diagnostics of one validation, keyed by file
path; the server publishes them per URI, merged with the diagnostics of other targets and documents.
Placement is `diagnostics_place`'s, the trust evidence `diagnostics_evidence`'s, the documents'
diagnostics `diagnostics_documents`'s; this module holds the rest and the public names.

Codes (source `distcheck`): `failing-output`, `spec-fix`, `spec-missing`, `undeclared-helper`,
`worker-error`, `first-divergent-module`, `degenerate-partition`, `halo-incomplete`,
`unrouted-aggregation`, `suspicious-output`, `rank-disagreement`, `receptive-field` (from a report),
`spec-invalid` (a spec document), `config-invalid` (a pyproject). `Diagnostic.data` holds
`{"target", "code", ...}` with what a quick fix needs (docs/protocol.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from lsprotocol import types

from ..report import Attempt, HelperDiagnosis, OutputVerdict, TraceReport, tolerance_for
from ..spec.edit import spec_changes
from . import locate
from .diagnostics_documents import config_diagnostic, spec_invalid_diagnostics
from .diagnostics_evidence import evidence_diagnostics
from .diagnostics_place import ERROR, INFO, SOURCE, WARNING, PlaceContext, Placer, first_line, num

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

CODES = (
    "failing-output",
    "spec-fix",
    "spec-missing",
    "undeclared-helper",
    "worker-error",
    "first-divergent-module",
    "degenerate-partition",
    "halo-incomplete",
    "unrouted-aggregation",
    "suspicious-output",
    "rank-disagreement",
    "receptive-field",
    "spec-invalid",
    "config-invalid",
)

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
        f"{head}: max abs diff {num(v.max_abs_diff)} (atol {num(atol)}), max rel diff {num(v.max_rel_diff)} "
        f"(rtol {num(rtol)}), {v.n_failing}/{v.n_total} elements out of tolerance"
    )


def _passing_fix(report: TraceReport) -> Attempt | None:
    """The report's best attempt when it is an auto-fix that passed (the report's one "best")."""
    best = report.best_attempt
    if best is None or not best.passed or best is report.attempts[0]:
        return None
    return best


def _failing_outputs(p: Placer, report: TraceReport, fix: Attempt | None, changes: list[dict[str, Any]]) -> None:
    first = report.attempts[0]
    if first.passed:
        return
    if fix is not None:
        advice = f"auto-fix {fix.rule or 'rule'!r} makes every output match: apply the spec-fix quick fix"
    else:
        advice = first_line(report.next_action) or "see the distcheck report for what to change"
    for v in first.verdicts.values():
        if v.passed or v.status == "suspicious":  # within tolerance: a `suspicious-output` warning says why
            continue
        message = f"{_verdict_message(v, first, report.meta)}. What to do: {advice}"
        data: dict[str, Any] = {"output": v.name, "specPath": p.ctx.spec_path}
        if fix is not None and changes:
            data.update(edits=changes, rule=fix.rule, spec=report.spec.to_dict())
        span = p.spec_span(["output_kinds", v.name])
        if span is not None:
            p.add(p.ctx.spec_path, span, "failing-output", message, ERROR, **data)
            continue
        where = p.factory(report)
        if where is not None:
            p.add(where[0], where[1], "failing-output", message, ERROR, **data)


def _spec_fix(p: Placer, report: TraceReport, fix: Attempt, changes: list[dict[str, Any]]) -> None:
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
        p.add(where[0], where[1], "spec-fix", message, WARNING, edit=changes[0], **common)
        return
    for change in changes:
        span = p.spec_span(change["path"])
        if span is None:
            continue
        message = (
            f"auto-fix {rule!r} makes every output match: {describe_change(change)}. Apply the quick fix to "
            f"change {name} ({fix.rationale})."
        )
        p.add(p.ctx.spec_path, span, "spec-fix", message, WARNING, edit=change, **common)


def _helper_sites(p: Placer, h: HelperDiagnosis) -> list[locate.Location]:
    sites: list[locate.Location] = []
    for path in p.ctx.files():
        text = p.ctx.text(path)
        if text is None or h.function.split(".")[-1] not in text:
            continue
        module = locate.module_name(path, p.ctx.search_dirs) or locate.module_name(path, p.ctx.roots)
        sites.extend(locate.helper_call_sites(text, h.module, h.function, file_module=module, path=path))
    return sites


def _undeclared_helpers(p: Placer, report: TraceReport) -> None:
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
            p.add(src_file, span, "undeclared-helper", message, WARNING, **data)
        for site in _helper_sites(p, h):
            if isinstance(src_file, str) and os.path.abspath(site.path) == os.path.abspath(src_file):
                continue
            message = f"call of the undeclared third-party helper {h.qualname}: {gap}. What to do: {todo}."
            p.add(site.path, p.location_span(site), "undeclared-helper", message, WARNING, **data)


def _worker_errors(p: Placer, report: TraceReport) -> None:
    seen: set[tuple[str, str]] = set()
    for attempt in report.attempts:
        e = attempt.error
        if e is None or (e.type, e.message) in seen:
            continue
        seen.add((e.type, e.message))
        where = "the reference run" if e.rank is None or e.rank < 0 else f"rank {e.rank}"
        phase = f" during {e.phase}" if e.phase else ""
        message = f"{e.hint}\n{e.type} on {where}{phase}: {e.message}" if e.hint else f"{e.type}: {e.message}"
        data = {"attempt": attempt.index, "type": e.type}
        frame = e.user_frame  # found where the error happened (runtime.frames); never guessed here
        if frame is not None and p.ctx.text(frame.file) is not None:
            p.add(frame.file, p.line_span(frame.file, frame.line), "worker-error", message, ERROR, **data)
            continue
        fallback = p.factory(report)
        if fallback is not None:
            p.add(fallback[0], fallback[1], "worker-error", message, ERROR, **data)


def _first_divergent(p: Placer, report: TraceReport) -> None:
    first = report.attempts[0]
    ld = first.layer_divergence
    if first.passed or not isinstance(ld, Mapping):
        return
    fd = ld.get("first_divergent")
    if not isinstance(fd, Mapping) or not isinstance(fd.get("class"), str):
        return
    cls = str(fd["class"])
    found = p.class_location(cls)
    if found is None:
        return
    module = fd.get("module") or cls.split(".")[-1]
    message = (
        f"first module whose output diverges from the single-process run: {module} ({cls}), rel diff "
        f"{num(fd.get('rel_diff'))}. What to do: look in its forward for a per-system reduction or aggregation "
        "distcheck cannot see (a third-party helper, TorchScript, a custom op) and declare it in the spec."
    )
    p.add(found.path, p.location_span(found), "first-divergent-module", message, INFO, module=module, cls=cls)


def _partition(p: Placer, report: TraceReport) -> None:
    best = report.best_attempt
    first = report.attempts[0]
    if best is not None and best.degenerate:
        where = p.sample(report)
        if where is not None:
            message = "degenerate partition: a pass proves nothing. " + " ".join(best.degenerate)
            p.add(where[0], where[1], "degenerate-partition", message, WARNING, messages=best.degenerate)
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
                WARNING,
                haloWidth=hc.get("halo_width"),
                requiredWidth=hc.get("required_width"),
            )


def _spec_missing(p: Placer, report: TraceReport) -> None:
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
    p.add(where[0], where[1], "spec-missing", message, INFO, spec=report.spec.to_dict(), specPath=p.ctx.spec_path)


def report_diagnostics(report: TraceReport, ctx: PlaceContext) -> dict[str, list[types.Diagnostic]]:
    """Every diagnostic of one validation, keyed by absolute file path (empty when it passed cleanly)."""
    p = Placer(ctx)
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
    evidence_diagnostics(p, report, fix)
    _worker_errors(p, report)
    _first_divergent(p, report)
    _partition(p, report)
    _spec_missing(p, report)
    return p.out


def runner_error_diagnostics(
    error_type: str, message: str, hint: str, user_frame: Mapping[str, Any] | None, ctx: PlaceContext
) -> dict[str, list[types.Diagnostic]]:
    """A `worker-error` for a validation that could not start (the factory or sample failed to import,
    a bad spec ...), at the runner's `user_frame` (`{"file", "line", "function"}`: a SyntaxError's own
    line, else the innermost frame in the user's code) when that file can be read, else on the factory."""
    p = Placer(ctx)
    text = f"{message}\nWhat to do: {hint}" if hint else message
    frame = user_frame
    data = {"type": error_type}
    path = str(frame.get("file")) if frame is not None else ""
    if frame is not None and isinstance(frame.get("line"), int) and ctx.text(path) is not None:
        p.add(path, p.line_span(path, int(frame["line"])), "worker-error", text, ERROR, **data)
        return p.out
    where = p.factory(None)
    if where is not None:
        p.add(where[0], where[1], "worker-error", text, ERROR, **data)
    return p.out
