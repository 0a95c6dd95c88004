"""A `TraceReport` (and spec / config problems) → LSP diagnostics, placed without importing user code.

Everything here is pure: the report carries files and lines (factory, sample, helper definitions,
traceback frames, unrouted ops), and the rest is found by the text / AST scans of `locate` and the
JSON tree of `jsontext`. `report_diagnostics` returns the diagnostics of one validation, keyed by file
path; the server publishes them per URI, merged with the diagnostics of other targets and documents.
Placement is `diagnostics_place`'s, the trust evidence `diagnostics_evidence`'s, the documents'
diagnostics `diagnostics_documents`'s; this module holds the rest and the public names.

Codes (source `distcheck`): `failing-output`, `spec-fix`, `spec-missing`, `undeclared-helper`,
`worker-error`, `first-divergent-module`, `degenerate-partition`, `halo-incomplete`,
`unrouted-aggregation`, `suspicious-output`, `rank-disagreement`, `divergent-op`, `receptive-field` (from a report),
`spec-invalid` (a spec document), `config-invalid` (a pyproject). `Diagnostic.data` holds
`{"target", "code", ...}` with what a quick fix needs (docs/protocol.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from lsprotocol import types

from ..report import (
    Attempt,
    FactoryInfo,
    Frame,
    HelperDiagnosis,
    OutputVerdict,
    ReportMeta,
    TraceReport,
    tolerance_for,
    view,
)
from ..spec.edit import brief_change, describe_change, spec_changes
from . import locate
from .diagnostics_codes import CODES as DOC_ANCHORS
from .diagnostics_documents import config_diagnostic, spec_invalid_diagnostics
from .diagnostics_evidence import evidence_diagnostics
from .diagnostics_place import ERROR, INFO, SOURCE, WARNING, PlaceContext, Placer, first_line, num

__all__ = [
    "CODES",
    "SOURCE",
    "PlaceContext",
    "config_diagnostic",
    "first_line",
    "report_diagnostics",
    "runner_error_diagnostics",
    "spec_changes",
    "spec_invalid_diagnostics",
]

CODES = tuple(DOC_ANCHORS)
"""Every code the daemon can publish (`diagnostics_codes.CODES`: each with its documentation)."""

# --------------------------------------------------------------------------------------------------
# report → diagnostics


def _which(attempt: Attempt) -> str:
    return f"attempt {attempt.index + 1} ({attempt.rule or 'your spec'})"


def _verdict_message(v: OutputVerdict, attempt: Attempt) -> str:
    if v.status == "missing":
        return f"Output {v.name!r} is missing from the distributed outputs under {_which(attempt)}."
    if v.status == "shape":
        return f"Output {v.name!r} ({v.kind}) has the wrong shape after consolidation under {_which(attempt)}."
    if v.status == "nonfinite":
        return f"Output {v.name!r} ({v.kind}) has non-finite values under {_which(attempt)}."
    return f"Output {v.name!r} ({v.kind}) differs from the single-process run under {_which(attempt)}."


def _verdict_evidence(v: OutputVerdict, meta: ReportMeta) -> str:
    if v.status in ("missing", "shape"):
        return ""
    atol = tolerance_for(meta.atol, v.name, v.kind)
    rtol = tolerance_for(meta.rtol, v.name, v.kind)
    return (
        f"max abs diff {num(v.max_abs_diff)} (atol {num(atol)}), max rel diff {num(v.max_rel_diff)} "
        f"(rtol {num(rtol)}), {v.n_failing}/{v.n_total} elements out of tolerance"
    )


def _passing_fix(report: TraceReport) -> Attempt | None:
    """The report's best attempt when it passed under a spec distcheck changed (`report.fix_applied`)."""
    best = report.best_attempt
    if best is None or report.fix_applied is None:
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
    meta = report.meta
    for v in first.verdicts.values():
        if v.passed or v.status == "suspicious":  # within tolerance: a `suspicious-output` warning says why
            continue
        message = _verdict_message(v, first)
        evidence = [_verdict_evidence(v, meta)]
        data: dict[str, Any] = {"output": v.name, "specPath": p.ctx.spec_path}
        if fix is not None and changes:
            data.update(edits=changes, rule=fix.rule, spec=report.spec.to_dict())
        span = p.spec_span(["output_kinds", v.name])
        if span is not None:
            p.add(p.ctx.spec_path, span, "failing-output", message, ERROR, todo=advice, evidence=evidence, **data)
            continue
        where = p.factory(report)
        if where is not None:
            p.add(where[0], where[1], "failing-output", message, ERROR, todo=advice, evidence=evidence, **data)


def _spec_fix(p: Placer, report: TraceReport, fix: Attempt, changes: list[dict[str, Any]]) -> None:
    rule = fix.rule or "auto-fix"
    spec = report.spec.to_dict()
    name = os.path.basename(p.ctx.spec_path)
    common = {"rule": rule, "edits": changes, "spec": spec, "specPath": p.ctx.spec_path, "rationale": fix.rationale}
    if p.spec_tree() is None:
        where = p.factory(report)
        if where is None:
            return
        message = f"Auto-fix {rule!r} makes every output match, but there is no spec file yet."
        remedy = f"apply the quick fix to write the working spec to {name}."
        evidence = [describe_change(c) for c in changes]
        edit = changes[0]
        p.add(where[0], where[1], "spec-fix", message, WARNING, todo=remedy, evidence=evidence, edit=edit, **common)
        return
    for change in changes:
        span = p.spec_span(change["path"])
        if span is None:
            continue
        message = f"Auto-fix {rule!r} makes every output match: {brief_change(change)}."
        remedy = f"apply the quick fix to change {name}."
        p.add(
            p.ctx.spec_path,
            span,
            "spec-fix",
            message,
            WARNING,
            todo=remedy,
            evidence=[describe_change(change), fix.rationale],
            edit=change,
            **common,
        )


def _helper_sites(p: Placer, h: HelperDiagnosis) -> list[locate.Location]:
    sites: list[locate.Location] = []
    for path in p.files():
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
            todo = f"declare it in distribution.third_party_helpers (the quick fix adds {remedy})."
        else:
            todo = (
                "declare an adapter for it in distribution.third_party_helpers "
                '({"kind": "python", "module_path", "attr_name", "replacement": "module:function"}).'
            )
        data = {
            "qualname": h.qualname,
            "remedy": h.likely_remedy,
            "baseSpec": first.spec.to_dict(),
            "specPath": p.ctx.spec_path,
        }
        source = view(FactoryInfo, h.source) if h.source is not None else None
        src_file = source.file if source is not None else None
        if src_file is not None:
            name = h.function.split(".")[-1]
            found = locate.definition(p.ctx.text(src_file) or "", name, src_file)
            line = (source.line if source is not None else None) or 1
            span = p.location_span(found) if found is not None else p.line_span(src_file, line)
            message = f"Undeclared third-party helper {h.qualname}: its per-rank results are wrong."
            p.add(src_file, span, "undeclared-helper", message, WARNING, todo=todo, evidence=[gap], **data)
        for site in _helper_sites(p, h):
            if src_file is not None and os.path.abspath(site.path) == os.path.abspath(src_file):
                continue
            message = f"Call of the undeclared third-party helper {h.qualname}: its per-rank results are wrong."
            span = p.location_span(site)
            p.add(site.path, span, "undeclared-helper", message, WARNING, todo=todo, evidence=[gap], **data)


def _worker_errors(p: Placer, report: TraceReport) -> None:
    seen: set[tuple[str, str]] = set()
    for attempt in report.attempts:
        e = attempt.error
        if e is None or (e.type, e.message) in seen:
            continue
        seen.add((e.type, e.message))
        where = "the reference run" if e.rank is None or e.rank < 0 else f"rank {e.rank}"
        phase = f" during {e.phase}" if e.phase else ""
        message = f"{e.type} on {where}{phase}: {first_line(e.message)}"
        evidence = [e.message] if e.message.strip() != first_line(e.message) else []
        data = {"attempt": attempt.index, "type": e.type}
        frame = e.user_frame  # found where the error happened (runtime.frames); never guessed here
        if frame is not None and p.ctx.text(frame.file) is not None:
            span = p.line_span(frame.file, frame.line)
            p.add(frame.file, span, "worker-error", message, ERROR, todo=e.hint, evidence=evidence, **data)
            continue
        fallback = p.factory(report)
        if fallback is not None:
            p.add(fallback[0], fallback[1], "worker-error", message, ERROR, todo=e.hint, evidence=evidence, **data)


def _first_divergent(p: Placer, report: TraceReport) -> None:
    first = report.attempts[0]
    fd = first.layer_divergence.first_divergent if first.layer_divergence is not None else None
    if first.passed or fd is None or not fd.cls:
        return
    found = p.class_location(fd.cls)
    if found is None:
        return
    module = fd.module or fd.cls.split(".")[-1]
    message = f"First module whose output diverges from the single-process run: {module}."
    remedy = (
        "look in its forward for a per-system reduction or aggregation distcheck cannot see (a third-party "
        "helper, TorchScript, a custom op) and declare it in the spec."
    )
    evidence = [f"{module} ({fd.cls}): rel diff {num(fd.rel_diff)} between the ranks' sum and the reference"]
    p.add(
        found.path,
        p.location_span(found),
        "first-divergent-module",
        message,
        INFO,
        todo=remedy,
        evidence=evidence,
        module=module,
        cls=fd.cls,
    )


def _halo_texts(interpretation: str) -> tuple[str | None, list[str]]:
    """The halo interpretation split into its remedy (from "Set `...`" on) and what it observed."""
    at = interpretation.find("Set `")
    if at < 0:
        return None, [interpretation]
    return interpretation[at:], [interpretation[:at].strip()]


def _partition(p: Placer, report: TraceReport) -> None:
    best = report.best_attempt
    first = report.attempts[0]
    if best is not None and best.degenerate:
        where = p.sample(report)
        if where is not None:
            message = "Degenerate partition: a pass on this sample proves nothing about distribution."
            remedy = "use a larger (longer) sample or fewer ranks and validate again."
            p.add(
                where[0],
                where[1],
                "degenerate-partition",
                message,
                WARNING,
                todo=remedy,
                evidence=best.degenerate,
                messages=best.degenerate,
            )
    hc = first.halo_completeness
    if hc.matches is False:
        where = p.sample(report)
        if where is not None:
            shown = "unknown" if hc.halo_width is None else f"{num(hc.halo_width)} Å"
            need = "" if hc.required_width is None else f", {num(hc.required_width)} Å needed"
            message = f"Halo incomplete under attempt {first.index + 1}: halo width {shown}{need}."
            fix, evidence = _halo_texts(hc.interpretation or "the halo is shallower than the model needs")
            p.add(
                where[0],
                where[1],
                "halo-incomplete",
                message,
                WARNING,
                todo=fix,
                evidence=evidence,
                haloWidth=hc.halo_width,
                requiredWidth=hc.required_width,
            )


def _spec_missing(p: Placer, report: TraceReport) -> None:
    if report.verdict != "passed" or not report.attempts[0].passed or p.ctx.spec_text is not None:
        return
    where = p.factory(report)
    if where is None:
        return
    name = os.path.basename(p.ctx.spec_path)
    world = report.meta.world_size
    message = f"Validated at world_size {world}, but no spec file is saved yet."
    remedy = (
        f"apply the quick fix to save the validated spec to {name}, so later validations (and your distributed "
        "runs) start from it."
    )
    evidence = [f"every output matches the single-process run at world_size {world}"]
    p.add(
        where[0],
        where[1],
        "spec-missing",
        message,
        INFO,
        todo=remedy,
        evidence=evidence,
        spec=report.spec.to_dict(),
        specPath=p.ctx.spec_path,
    )


def report_diagnostics(report: TraceReport, ctx: PlaceContext) -> dict[str, list[types.Diagnostic]]:
    """Every diagnostic of one validation, keyed by absolute file path (empty when it passed cleanly)."""
    p = Placer(ctx)
    if not report.attempts:
        return p.out
    fix = _passing_fix(report)
    changes: list[dict[str, Any]] = []
    if fix is not None:
        changes = report.fix_edits()
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
    error_type: str, message: str, hint: str, user_frame: Frame | Mapping[str, Any] | None, ctx: PlaceContext,
    *, cause: str | None = None,
) -> dict[str, list[types.Diagnostic]]:  # fmt: skip
    """A `worker-error` for a validation that could not start (the factory or sample failed to import,
    a bad spec ...), at the runner's `user_frame` (a SyntaxError's own line, else the innermost frame in
    the user's code; the runner's JSON `{"file", "line", "function"}` is read as a `Frame` here) when
    that file can be read, else on the factory; the hint is its remedy. At the user's line it says what
    that line raised (`cause`: "SyntaxError: ..."), when known, the whole error beside it."""
    p = Placer(ctx)
    if isinstance(user_frame, Mapping):
        try:
            user_frame = Frame.from_dict(user_frame)
        except ValueError:
            user_frame = None
    head = first_line(message) or error_type
    evidence = [message] if message.strip() != head else []
    data = {"type": error_type}
    if user_frame is not None and ctx.text(user_frame.file) is not None:
        span = p.line_span(user_frame.file, user_frame.line)
        if cause:
            head, evidence = cause, [message]
        p.add(user_frame.file, span, "worker-error", head, ERROR, todo=hint, evidence=evidence, **data)
        return p.out
    where = p.factory(None)
    if where is not None:
        p.add(where[0], where[1], "worker-error", head, ERROR, todo=hint, evidence=evidence, **data)
    return p.out
