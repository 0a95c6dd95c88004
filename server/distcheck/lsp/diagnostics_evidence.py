"""The trust evidence of a report as diagnostics: unrouted aggregations at their source lines,
suspicious outputs where failing outputs show, ranks that disagree and the first op that departs
(`diagnostics_ops`), and an under-declared receptive field on the factory.

Codes: `unrouted-aggregation` (on the op's line, in a scripted function or at a Python line, and on
the Python line that called into TorchScript; none inside a flagged or adapted helper, whose own
diagnostic covers it), `undeclared-custom-op` (instead, for an undeclared `torch.ops` kernel the ranks
named with its shapes, on the user's call line; its data carries the ready `custom_ops` entry that
the quick fix inserts, `kernel_entries`), `suspicious-output` (on `output_kinds.<name>` in the spec, else the factory's
`def`), `rank-disagreement` and `divergent-op` (`diagnostics_ops`), `receptive-field` (on the factory's
`def`). Pure: no torch, no user code (`validate/` is not imported: its package imports torch, so the
advice of `validate/unrouted.py` is restated here from the report's records).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..report import (
    Attempt,
    FactoryInfo,
    SuspiciousOutput,
    TraceReport,
    UnroutedOp,
    view,
)
from ..report.checks import receptive_remedy
from ..report.halo_depth import halo_bracket, halo_remedy
from ..runtime.function_mark import function_of, function_remedy
from ..spec import MLIPSpec
from .diagnostics_ops import disagreement_diagnostics, divergent_op_diagnostics, output_place, which
from .diagnostics_place import ERROR, WARNING, Placer, first_line, num
from .text import Span

__all__ = ["eager_tried", "evidence_diagnostics", "kernel_entries", "unrouted_advice"]


def _fix_advice(fix: Attempt | None) -> str | None:
    if fix is None:
        return None
    return f"auto-fix {fix.rule or 'rule'!r} makes every output match: apply the spec-fix quick fix"


def eager_tried(report: TraceReport) -> Attempt | None:
    """The first attempt that ran with torchscript "eager" where the spec as given scripts, and was
    rolled back: that remedy was measured and made things worse, so it is never advised again."""
    given = report.attempts[0].spec.distribution.torchscript if report.attempts else None
    for a in report.attempts:
        if a.rolled_back is not None and given == "scripted" and a.spec.distribution.torchscript == "eager":
            return a
    return None


def unrouted_advice(op: UnroutedOp, spec: MLIPSpec, tried_eager: Attempt | None = None) -> str:
    """The step that routes one unrouted aggregation, by where it ran (as `validate/unrouted.py` says);
    `tried_eager` (`eager_tried`) is the attempt that already ran the TorchScript as Python and was
    rolled back."""
    if op.origin == "torchscript":
        if spec.distribution.torchscript == "scripted" and tried_eager is None:
            return (
                'set distribution.torchscript to "eager" (auto-fix tries it) so the ranks run the TorchScript '
                "as Python and the handlers route it"
            )
        tried = (
            f'torchscript "eager" was tried (attempt {tried_eager.index + 1}) and rolled back'
            if tried_eager is not None
            else 'it runs in TorchScript even with torchscript "eager" (serialized with torch.jit.load, or '
            "scripted before the rank started)"
        )
        return f"{tried}: declare the Python helper that calls it in distribution.third_party_helpers"
    if op.origin == "custom_op":
        return f"declare {op.function or 'the torch.ops kernel'} in distribution.custom_ops with its transforms"
    if op.origin == "native":
        return "declare the Python function that calls this C++ code in distribution.third_party_helpers"
    if function_of(op.function) is not None:
        return function_remedy([op.aggregation], spec.distribution.policy.scatter_mode)
    return (
        'rewrite it in a form the handlers route (docs/safe-code.md: "Code that is safe to write"), e.g. a sum, '
        "mean, amax or amin keyed by the system index"
    )


def _unrouted_texts(
    op: UnroutedOp, attempt: Attempt, still: bool, fix: Attempt | None, passed: bool, tried_eager: Attempt | None
) -> tuple[str, str, list[str]]:
    """The message, the remedy and the evidence of one unrouted aggregation."""
    ranks = ", ".join(str(r) for r in op.ranks) or "?"
    what = op.aggregation_words
    message = f"Unrouted aggregation {op.op} ({what}): each rank computed only its partial."
    seen = f"{op.op} ran {op.count}× on rank{'s' if len(op.ranks) != 1 else ''} {ranks} under {which(attempt)}"
    if op.function:
        seen += f", in {op.function}"
    if op.call_file and (op.call_file, op.call_line) != (op.file, op.line):
        seen += f", called from {os.path.basename(op.call_file)}:{op.call_line if op.call_line is not None else '?'}"
    evidence = [seen + "; no handler routed it"]
    if not still and fix is not None:
        return message, f"{_fix_advice(fix)} (it routes this aggregation).", evidence
    advice = unrouted_advice(op, attempt.spec, tried_eager)
    if passed:
        evidence.append("the outputs match on this sample anyway")
        return message, f"to be sure on other samples, {advice}.", evidence
    return message, f"{advice}.", evidence


def kernel_entries(attempt: Attempt) -> dict[str, dict[str, Any] | None]:
    """Op → its one ready `custom_ops` entry, for each undeclared kernel `attempt`'s ranks named (None
    when no entry fits or its calls need different ones); kernels the spec declares are left out."""
    declared = {c.op for c in attempt.spec.distribution.custom_ops}
    out: dict[str, dict[str, Any] | None] = {}
    for u in attempt.unrouted:
        if u.origin != "custom_op" or u.kernel is None or u.op in declared:
            continue
        entry = dict(u.kernel.entry) if u.kernel.entry is not None else None
        out[u.op] = entry if out.get(u.op, entry) == entry else None
    return out


def _kernel_texts(
    op: UnroutedOp, attempt: Attempt, still: bool, fix: Attempt | None, passed: bool
) -> tuple[str, str, list[str], dict[str, Any]]:
    """The message, the remedy, the evidence and the fix data of one undeclared kernel (`op.kernel` set)."""
    assert op.kernel is not None
    what = op.aggregation_words
    message = f"Undeclared torch.ops kernel {op.op} ({what}): each rank computed only its partial."
    ranks = ", ".join(str(r) for r in op.ranks) or "?"
    evidence = [
        f"{op.op} ran {op.count}× on rank{'s' if len(op.ranks) != 1 else ''} {ranks} under {which(attempt)}, "
        f"not declared in distribution.custom_ops; no handler can see inside it",
        f"on rank {op.ranks[0] if op.ranks else '?'}: {op.kernel.shapes}",
    ]
    entry = kernel_entries(attempt).get(op.op)
    data: dict[str, Any] = {"entry": entry, "baseSpec": attempt.spec.to_dict()}
    if entry is not None:
        advice = f"add {json.dumps(entry)} to distribution.custom_ops (the quick fix inserts it)"
    elif op.kernel.entry is None:
        advice = op.kernel.no_entry or "declare it in distribution.custom_ops with the transforms it needs"
    else:
        advice = (
            "its calls at different lines need different transforms and custom_ops holds one entry per kernel: "
            "wrap each use in its own kernel, then validate again"
        )
    if not still and fix is not None:
        return message, f"{_fix_advice(fix)} (it declares this kernel).", evidence, data
    if passed:
        evidence.append("the outputs match on this sample anyway")
        return message, f"to be sure on other samples, {advice}.", evidence, data
    return message, f"{advice}.", evidence, data


def _helper_files(report: TraceReport) -> set[str]:
    """Source files of the watched helpers that are flagged (an `undeclared-helper` diagnostic says what
    to do) or wrapped by an adapter (which routes what runs inside them)."""
    files: set[str] = set()
    for attempt in report.attempts:
        for h in attempt.helper_diagnostics:
            src = view(FactoryInfo, h.source).file if h.source is not None else None
            if src is not None and (h.flagged or h.already_wrapped):
                files.add(os.path.abspath(src))
    return files


def _unrouted(p: Placer, report: TraceReport, fix: Attempt | None) -> None:
    best = report.best_attempt
    still = {u.key for u in best.unrouted} if best is not None else set()
    passed = report.verdict == "passed"
    helpers = _helper_files(report)
    seen: set[tuple[Any, ...]] = set()
    for attempt in report.attempts:
        for op in attempt.unrouted:
            if op.key in seen:
                continue
            seen.add(op.key)
            if any(f is not None and os.path.abspath(f) in helpers for f in (op.file, op.call_file)):
                continue  # inside a helper: its own diagnostic (or its adapter) covers it
            remains = op.key in still
            code = "unrouted-aggregation"
            extra: dict[str, Any] = {}
            if op.origin == "custom_op" and op.kernel is not None:
                code = "undeclared-custom-op"
                message, remedy, evidence, extra = _kernel_texts(op, attempt, remains, fix, passed)
                extra["specPath"] = p.ctx.spec_path
            else:
                message, remedy, evidence = _unrouted_texts(op, attempt, remains, fix, passed, eager_tried(report))
            severity = ERROR if remains and not passed else WARNING
            data = {
                **extra,
                "op": op.op,
                "aggregation": op.aggregation,
                "origin": op.origin,
                "count": op.count,
                "ranks": list(op.ranks),
                "location": op.location,
                "attempt": attempt.index,
            }
            placed = False
            for path, line in ((op.file, op.line), (op.call_file, op.call_line)):
                if path is None or p.ctx.text(path) is None:
                    continue
                span = p.line_span(path, line or 1)
                if not _already(p, path, span, code, op.op):
                    p.add(path, span, code, message, severity, todo=remedy, evidence=evidence, **data)
                placed = True
            if not placed:
                where = p.factory(report)
                if where is not None:
                    p.add(
                        where[0],
                        where[1],
                        code,
                        message,
                        severity,
                        todo=remedy,
                        evidence=evidence,
                        **data,
                    )


def _already(p: Placer, path: str, span: Span, code: str, op: str) -> bool:
    """Is there a diagnostic of `code` for `op` on this line already (the op's and its caller's lines
    are one line when the op sits at a Python line)?"""
    for d in p.out.get(os.path.abspath(path), []):
        data = d.data if isinstance(d.data, dict) else {}
        if d.code == code and data.get("op") == op and d.range.start.line == span.start_line:
            return True
    return False


def _suspicious_texts(s: SuspiciousOutput, attempt: Attempt) -> tuple[str, list[str]]:
    """The message and the evidence of one suspicious output."""
    message = f"Output {s.name!r} is within tolerance but {num(s.ratio)}× its round-off floor: a distributed error."
    evidence = [
        f"under {which(attempt)}: max abs diff {num(s.max_abs_diff)}, round-off floor {num(s.floor)} of this "
        f"comparison (measured by a replicated control run), threshold {num(s.threshold)}×; the error is too small "
        "for the tolerances"
    ]
    return message, evidence


def _suspicious(p: Placer, report: TraceReport, fix: Attempt | None) -> None:
    advice = _fix_advice(fix) or first_line(report.next_action) or "see the distcheck report"
    best = report.best_attempt
    shown = [report.attempts[0]] + ([best] if best is not None and best is not report.attempts[0] else [])
    for attempt in shown:
        for s in attempt.suspicious:
            where = output_place(p, report, s.name)
            if where is None:
                continue
            data = {"output": s.name, "ratio": s.ratio, "floor": s.floor, "attempt": attempt.index}
            data["specPath"] = p.ctx.spec_path
            message, evidence = _suspicious_texts(s, attempt)
            p.add(where[0], where[1], "suspicious-output", message, WARNING, todo=advice, evidence=evidence, **data)


def _receptive(p: Placer, report: TraceReport) -> None:
    field = report.receptive_field
    remedy = receptive_remedy(field) if field is not None else None  # = validate.field_advice.field_remedy
    if remedy is None:
        _attempts_depth(p, report)
    if field is None or remedy is None or field.measured_depth is None:
        return
    where = p.factory(report)
    if where is None:
        return
    declared = f"{field.declared_depth or 1} × {num(field.cutoff)} Å = {num(field.declared_field)} Å"
    done = (
        f"; this validation ran with halo_width {num(field.halo_width_set)} Å meanwhile (report.spec keeps it)"
        if field.halo_width_set is not None
        else ""
    )
    if field.remedy == "cutoff":
        message = (
            f"Cutoff under-declared: the wrapper declares {num(field.cutoff)} Å, the reference saw atoms move up to "
            f"{num(field.reach_angstrom)} Å from a displaced one, which a longer cutoff explains, not more hops."
        )
        measured = f"reach {num(field.reach_angstrom)} Å ({field.reach_hops} hop(s) of the declared cutoff)"
    else:
        message = (
            f"Receptive field under-declared: the wrapper declares {field.declared_depth or 1} hop(s), the reference "
            f"measured {field.measured_depth}."
        )
        measured = f"{field.measured_depth} hop(s) × {num(field.cutoff)} Å = {num(field.measured_field)} Å"
    evidence = [f"declared {declared}; measured {measured} (from {field.basis}){done}"]
    data = {
        "declaredDepth": field.declared_depth,
        "measuredDepth": field.measured_depth,
        "suggestedCutoff": field.suggested_cutoff,
    }
    p.add(where[0], where[1], "receptive-field", message, WARNING, todo=f"{remedy}.", evidence=evidence, **data)


def _attempts_depth(p: Placer, report: TraceReport) -> None:
    """The depth the halos of the attempts give where the reference could not measure it (`halo_depth`,
    the text `next_action` gives too), on the factory's `def`."""
    bracket = halo_bracket(report)
    where = p.factory(report)
    if bracket is None or bracket.depth is None or where is None:
        return
    message = (
        f"Receptive field under-declared: the wrapper declares {bracket.declared_depth} interaction(s); a "
        f"{bracket.failed:g} Å halo failed and {bracket.passed:g} Å passed, which {bracket.depth} give."
    )
    evidence = [f"attempt {bracket.attempt + 1} passed after widen_halo; report.spec keeps its halo meanwhile"]
    data = {"declaredDepth": bracket.declared_depth, "measuredDepth": bracket.depth, "suggestedCutoff": None}
    todo = f"{halo_remedy(bracket)}."
    p.add(where[0], where[1], "receptive-field", message, WARNING, todo=todo, evidence=evidence, **data)


def evidence_diagnostics(p: Placer, report: TraceReport, fix: Attempt | None) -> None:
    """Add the evidence diagnostics of `report` to `p`; `fix` is the passing auto-fix attempt, if any."""
    if not report.attempts:
        return
    _unrouted(p, report, fix)
    _suspicious(p, report, fix)
    disagreement_diagnostics(p, report, fix)
    divergent_op_diagnostics(p, report, fix)
    _receptive(p, report)
