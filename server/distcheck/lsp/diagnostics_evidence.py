"""The trust evidence of a report as diagnostics: unrouted aggregations at their source lines,
suspicious outputs where failing outputs show, ranks that disagree at the first module that does,
and an under-declared receptive field on the factory.

Codes: `unrouted-aggregation` (on the op's line, in a scripted function or at a Python line, and on
the Python line that called into TorchScript; none inside a flagged or adapted helper, whose own
diagnostic covers it), `undeclared-custom-op` (instead, for an undeclared `torch.ops` kernel the ranks
named with its shapes, on the user's call line; its data carries the ready `custom_ops` entry that
the quick fix inserts, `kernel_entries`), `suspicious-output` (on `output_kinds.<name>` in the spec, else the factory's
`def`), `rank-disagreement` (on the line of the first torch op whose value departs, else the `class`
line of the first module whose per-system value differs across ranks, else where failing outputs
show; none when a passing auto-fix exists: the failing outputs carry it), `divergent-op` (on the line
of the first torch op whose value departs from the reference, when no `rank-disagreement` sits there;
none when a passing auto-fix exists), `receptive-field` (on the factory's `def`). Pure: no torch, no user code
(`validate/` is not imported: its package imports torch, so the advice of `validate/unrouted.py` is
restated here from the report's records).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..report import (
    Attempt,
    DivergentOp,
    FactoryInfo,
    RankDisagreement,
    SuspiciousOutput,
    TraceReport,
    UnroutedOp,
    view,
)
from ..report.checks import receptive_remedy
from ..report.halo_depth import halo_bracket, halo_remedy
from ..runtime.function_mark import function_of, function_remedy
from ..spec import MLIPSpec
from .diagnostics_place import ERROR, WARNING, Placer, first_line, num
from .text import Span

__all__ = ["eager_tried", "evidence_diagnostics", "kernel_entries", "unrouted_advice"]


def _which(attempt: Attempt) -> str:
    return f"attempt {attempt.index + 1} ({attempt.rule or 'your spec'})"


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
    seen = f"{op.op} ran {op.count}× on rank{'s' if len(op.ranks) != 1 else ''} {ranks} under {_which(attempt)}"
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
        f"{op.op} ran {op.count}× on rank{'s' if len(op.ranks) != 1 else ''} {ranks} under {_which(attempt)}, "
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


def _output_place(p: Placer, report: TraceReport, output: str) -> tuple[str, Span] | None:
    """Where failing outputs show: `output_kinds.<output>` in the spec file, else the factory's `def`."""
    span = p.spec_span(["output_kinds", output])
    if span is not None:
        return p.ctx.spec_path, span
    return p.factory(report)


def _suspicious_texts(s: SuspiciousOutput, attempt: Attempt) -> tuple[str, list[str]]:
    """The message and the evidence of one suspicious output."""
    message = f"Output {s.name!r} is within tolerance but {num(s.ratio)}× its round-off floor: a distributed error."
    evidence = [
        f"under {_which(attempt)}: max abs diff {num(s.max_abs_diff)}, round-off floor {num(s.floor)} of this "
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
            where = _output_place(p, report, s.name)
            if where is None:
                continue
            data = {"output": s.name, "ratio": s.ratio, "floor": s.floor, "attempt": attempt.index}
            data["specPath"] = p.ctx.spec_path
            message, evidence = _suspicious_texts(s, attempt)
            p.add(where[0], where[1], "suspicious-output", message, WARNING, todo=advice, evidence=evidence, **data)


def _disagreement_texts(d: RankDisagreement, attempt: Attempt) -> tuple[str, str, list[str]]:
    """The message, the remedy and the evidence of ranks that disagree on a replicated output."""
    ranks = ", ".join(str(r) for r in d.ranks)
    message = f"Ranks {ranks} disagree on the replicated output {d.output!r}; it must be the same on every rank."
    evidence = [f"{d.summary} under {_which(attempt)}"]
    m = d.first_module
    if m is not None:
        on = ", ".join(str(r) for r in m.ranks)
        evidence.append(
            f"the first module whose per-system value differs across ranks is {m.module} ({m.cls}), on rank"
            f"{'s' if len(m.ranks) > 1 else ''} {on} against rank 0, max |Δ| {num(m.max_abs)}"
        )
    op = d.first_op
    if op is not None:
        evidence.append(_op_evidence(op))
    where = (
        f"at {op.where}"
        if op is not None
        else f"in {m.module if m is not None else 'the code that computes ' + d.output}"
    )
    remedy = (
        f"look {where} for a value that depends on the rank or on which atoms the rank holds (a reduction over "
        "the rank's rows the runtime does not route: write it as index_add/scatter over batch.batch, or declare "
        "the helper in distribution.third_party_helpers)."
    )
    return message, remedy, evidence


def _op_evidence(op: DivergentOp) -> str:
    """The evidence line of the first op whose value departs."""
    against = "the single-process value" if op.against == "reference" else "rank 0's value"
    ranks = ", ".join(str(r) for r in op.ranks) or "?"
    call = f" (call {op.call + 1} at that line)" if op.call else ""
    matched = f"; the {op.compared} op(s) before it match" if op.compared else ""
    site = f" (issued inside the package it calls, at {op.package_site})" if op.package_site else ""
    return (
        f"the first torch op whose value departs is {op.op} at {os.path.basename(op.file)}:{op.line}{call}{site}: "
        f"on rank{'s' if len(op.ranks) != 1 else ''} {ranks} it leaves {against} by {num(op.rel_diff)} "
        f"(relative){matched}"
    )


def _op_place(p: Placer, op: DivergentOp | None) -> tuple[str, Span] | None:
    """The line of `op` in the user's file, when the file can be read."""
    if op is None or not op.file or p.ctx.text(op.file) is None:
        return None
    return op.file, p.line_span(op.file, op.line)


def _disagreements(p: Placer, report: TraceReport, fix: Attempt | None) -> None:
    if fix is not None:  # the user's spec's disagreement is a symptom: its failing outputs carry the fix
        return
    best = report.best_attempt
    shown = ([best] if best is not None else []) + [report.attempts[0]]
    seen: set[str] = set()
    for attempt in shown:
        for d in attempt.rank_disagreements:
            if d.output in seen:
                continue
            seen.add(d.output)
            data: dict[str, Any] = {
                "output": d.output,
                "ranks": list(d.ranks),
                "offReference": list(d.off_reference),
                "attempt": attempt.index,
            }
            found = p.class_location(d.first_module.cls) if d.first_module is not None else None
            if d.first_module is not None:
                data.update(module=d.first_module.module, cls=d.first_module.cls)
            message, remedy, evidence = _disagreement_texts(d, attempt)
            severity = ERROR
            at_op = _op_place(p, d.first_op)
            if at_op is not None and d.first_op is not None:  # the line the disagreement starts at
                data.update(_op_data(d.first_op))
                p.add(
                    at_op[0], at_op[1], "rank-disagreement", message, severity, todo=remedy, evidence=evidence, **data
                )
                continue
            if found is not None:
                p.add(
                    found.path,
                    p.location_span(found),
                    "rank-disagreement",
                    message,
                    severity,
                    todo=remedy,
                    evidence=evidence,
                    **data,
                )
                continue
            where = _output_place(p, report, d.output)
            if where is not None:
                p.add(
                    where[0], where[1], "rank-disagreement", message, severity, todo=remedy, evidence=evidence, **data
                )


def _op_data(op: DivergentOp) -> dict[str, Any]:
    return {"opName": op.op, "opFile": op.file, "opLine": op.line, "against": op.against}


def _divergent_op(p: Placer, report: TraceReport, fix: Attempt | None) -> None:
    """The first op whose value departs from the reference in the user's spec's attempt, on its line;
    none when a passing auto-fix exists (the failing outputs carry it) or a `rank-disagreement` of the
    same attempt sits on that line already."""
    first = report.attempts[0]
    layer = first.layer_divergence
    op = layer.first_op if layer is not None else None
    at = _op_place(p, op)
    if fix is not None or first.passed or op is None or at is None:
        return
    if any(
        d.first_op is not None and (d.first_op.file, d.first_op.line) == (op.file, op.line)
        for d in first.rank_disagreements
    ):
        return
    message = f"First operation whose value departs from the single-process run: {op.symbol} ({op.op})."
    evidence = [_op_evidence(op) + f" under {_which(first)}"]
    fd = layer.first_divergent if layer is not None else None
    if fd is not None:
        evidence.append(f"it runs in the first divergent module, {fd.module or fd.cls} ({fd.cls})")
    remedy = (
        "look at this line for an aggregation over atoms the runtime does not route (a matrix product, einsum, "
        "cumsum or sum over a reshaped view of per-atom values: write it as index_add/scatter over batch.batch) "
        "or a value that depends on which atoms the rank holds; or declare the helper it calls in "
        "distribution.third_party_helpers."
    )
    data = {**_op_data(op), "attempt": first.index}
    p.add(at[0], at[1], "divergent-op", message, ERROR, todo=remedy, evidence=evidence, **data)


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
    _disagreements(p, report, fix)
    _divergent_op(p, report, fix)
    _receptive(p, report)
