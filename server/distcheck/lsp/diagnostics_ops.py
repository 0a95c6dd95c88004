"""Where ranks disagree and where a value first departs, as diagnostics: `rank-disagreement` (on the
line of the first torch op whose value departs, else the `class` line of the first module whose
per-system value differs across ranks, else where failing outputs show) and `divergent-op` (on the line
of the first torch op whose value departs from the reference, when no `rank-disagreement` sits there).
Neither is shown when a passing auto-fix exists: the failing outputs carry it. Pure: no torch, no user
code.
"""

from __future__ import annotations

import os
from typing import Any

from ..report import Attempt, DivergentOp, RankDisagreement, TraceReport
from .diagnostics_place import ERROR, Placer, num
from .text import Span

__all__ = ["disagreement_diagnostics", "divergent_op_diagnostics", "output_place", "which"]


def which(attempt: Attempt) -> str:
    """How a diagnostic names `attempt`: "attempt N (its rule, or 'your spec')"."""
    return f"attempt {attempt.index + 1} ({attempt.rule or 'your spec'})"


def output_place(p: Placer, report: TraceReport, output: str) -> tuple[str, Span] | None:
    """Where failing outputs show: `output_kinds.<output>` in the spec file, else the factory's `def`."""
    span = p.spec_span(["output_kinds", output])
    if span is not None:
        return p.ctx.spec_path, span
    return p.factory(report)


def _disagreement_texts(d: RankDisagreement, attempt: Attempt) -> tuple[str, str, list[str]]:
    """The message, the remedy and the evidence of ranks that disagree on a replicated output."""
    ranks = ", ".join(str(r) for r in d.ranks)
    message = f"Ranks {ranks} disagree on the replicated output {d.output!r}; it must be the same on every rank."
    evidence = [f"{d.summary} under {which(attempt)}"]
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


def disagreement_diagnostics(p: Placer, report: TraceReport, fix: Attempt | None) -> None:
    """A `rank-disagreement` per replicated output the ranks disagree on (the best attempt's, then the
    user's spec's), at the first op that departs, else the first module's class, else where failing
    outputs show; none when `fix` (a passing auto-fix) exists."""
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
            where = output_place(p, report, d.output)
            if where is not None:
                p.add(
                    where[0], where[1], "rank-disagreement", message, severity, todo=remedy, evidence=evidence, **data
                )


def _op_data(op: DivergentOp) -> dict[str, Any]:
    return {"opName": op.op, "opFile": op.file, "opLine": op.line, "against": op.against}


def divergent_op_diagnostics(p: Placer, report: TraceReport, fix: Attempt | None) -> None:
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
    evidence = [_op_evidence(op) + f" under {which(first)}"]
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
