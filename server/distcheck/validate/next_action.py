"""The report's `next_action`: one line ranked by cause, then the details that justify it.

Order: the whole-validation deadline when it stopped the validation, partition health (a degenerate
partition makes any verdict meaningless), worker errors (with what a crashed rank had recorded),
unrouted aggregations, halo coverage, undeclared helpers, ranks that disagree on a replicated output,
the auto-fix that worked, then the layer verdict; with none of these, "cause unknown" and what was
checked (`evidence.py`), never a generic list of spec fields. Attempts that were rolled back say so.

The advice is read off the attempts: a remedy auto-fix tried and rolled back is never advised again
(the line says it was tried), an adapter the user declared that does not make its helper agree is
named as the cause, a fix skipped because its halo would be degenerate says why (`report.SkippedFix`),
and every ready remedy (a helper adapter, a `custom_ops` entry, the receptive field's depth or cutoff
from `field_advice.field_remedy`) is listed with the exact spec text to write, each once. A pass that
`widen_halo` made under `local` names the depth the halo that failed and the one that passed give
(`report.halo_depth`), or the halo in Å when no whole depth fits.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any

from ..report import (
    Attempt,
    DeadlineReached,
    HelperDiagnosis,
    TraceReport,
    WorkerError,
    tolerance_for,
)
from ..report.fixes import SkippedFix
from ..report.halo_depth import halo_bracket, halo_remedy
from ..report.handler_counts import handler_count
from ..spec import MLIPSpec
from .evidence import crash_lines, disagreement_head, tried_line, unknown_cause_lines
from .field_advice import field_remedy
from .trust_action import suspicious_head, trust_lines
from .unrouted import custom_op_entries, eager_remedy_applies, unrouted_action

__all__ = ["next_action"]

_OUTPUT_PHASE = "outputs"  # validate.outputs.OUTPUT_PHASE (that module imports torch; this one must not)


def _num(x: Any) -> str:
    """A number as `%.3g` (nan and inf included); anything else (None, a per-output dict) as `?`."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return "?"
    return f"{x:.3g}"


def _failing(a: Attempt, atol: Any, rtol: Any) -> str:
    parts = []
    split = {d.output for d in a.rank_disagreements if not d.off_reference}
    for name, v in a.verdicts.items():
        if v.passed:
            continue
        if name in split:
            parts.append(f"{name} (ranks disagree; each within tolerance of the reference)")
        elif v.status in ("missing", "shape", "nonfinite", "suspicious") or v.max_abs_diff is None:
            parts.append(f"{name} ({v.status})")
        else:
            a_tol, r_tol = _num(tolerance_for(atol, name, v.kind)), _num(tolerance_for(rtol, name, v.kind))
            parts.append(f"{name} (max abs {_num(v.max_abs_diff)} > {a_tol}, max rel {_num(v.max_rel_diff)} > {r_tol})")
    return ", ".join(parts)


def _error_action(error: WorkerError) -> str:
    """The lines for an attempt that ended in an error before anything was compared."""
    frame = error.user_frame  # found where the error happened (runtime.frames)
    where = f" at {frame.file}:{frame.line}" if frame is not None else ""
    if error.type == "NonFiniteReference":
        return "\n".join(
            [
                f"FAIL — {error.message}: a problem of the model or the sample, not of distribution; fix the model "
                "or the sample in one process first, then validate again (no distributed attempt was run)",
                f"{error.hint}{where}",
            ]
        )
    if error.phase == _OUTPUT_PHASE:
        lines = [f"FAIL — the wrapper's outputs cannot be compared: {error.hint}{where}"]
        return "\n".join(lines + ([f"{error.type}: {error.message}"] if error.message != error.hint else []))
    who = "the reference run" if error.rank in (None, -1) else f"rank {error.rank}"
    return "\n".join(
        [
            f"FAIL — {who} failed during {error.phase or 'start-up'}: {error.hint}{where}",
            f"{error.type}: {error.message}",
        ]
    )


def next_action(report: TraceReport) -> str:
    """A one-line verdict with the concrete next step ("OK — …" or "FAIL — …"), then supporting lines.

    When the whole-validation deadline stopped the validation (`report.deadline`), the first line says
    so (after how many attempts, and what to raise) and the best attempt so far follows."""
    verdict = _verdict_action(report)
    if report.deadline is None:
        return verdict
    head = _deadline_line(report.deadline)
    if not report.attempts:
        return head
    first, *rest = verdict.split("\n")
    return "\n".join([head, "best attempt so far: " + first.removeprefix("FAIL — ").removeprefix("OK — "), *rest])


_RAISE = "raise deadline_sec (--deadline; distcheck.deadlineSec in the editor)"


def _deadline_line(d: DeadlineReached) -> str:
    n = f"{d.attempts} attempt{'' if d.attempts == 1 else 's'}"
    if d.stage == "reference":
        where = "during the single-process reference run, before any attempt"
        what = f"{_RAISE}, or use a smaller sample"
    elif d.stage == "attempt":
        where = f"during attempt {d.attempts}, whose ranks were stopped ({n} in all)"
        what = f"{_RAISE} so the attempts can finish"
    elif d.attempts == 0:
        where = "after the reference run, before the first distributed attempt"
        what = _RAISE
    else:
        where = f"after {n}; no further auto-fix attempt was started"
        what = f"{_RAISE} to let auto-fix try more, or lower max_fix_attempts"
    return f"FAIL — the deadline of {d.deadline_sec:g} s was reached {where} ({d.elapsed_sec:.1f} s): {what}"


def _verdict_action(report: TraceReport) -> str:
    meta = report.meta
    atol = 0.0 if meta.atol is None else meta.atol
    rtol = 0.0 if meta.rtol is None else meta.rtol
    if not report.attempts:
        return "FAIL — nothing was run; check the factory and the sample batch"
    best = report.best_attempt
    if best is None:
        return "FAIL — nothing was run; check the factory and the sample batch"
    lines: list[str] = []
    degenerate = best.degenerate
    if degenerate:
        head = (
            "FAIL — DEGENERATE partition: "
            + degenerate[0]
            + ". A pass on this sample proves nothing; use a larger (longer) sample or fewer ranks and validate again"
        )
        return "\n".join([head, *degenerate[1:], *trust_lines(report)])
    if best.error is not None and not best.verdicts:
        return "\n".join([_error_action(best.error), *crash_lines(best)])
    rolled = _rolled_back(report)
    lines += _unrouted_lines(best, rolled)  # what ran unseen comes before any other cause: it voids them
    if best.passed:
        head = f"OK — all {len(best.verdicts)} outputs match the single-process run at world_size {meta.world_size}"
        if report.fix_applied:
            head += f" after auto-fix ({best.rule}); save report.spec as your spec file"
        lines.append(head)
        lines += _bracket_lines(report)
        lines += trust_lines(report)
        # a fix not tried (its halo degenerate on this sample) bounds what the pass shows: say why
        lines += [_not_tried(s) for a in report.attempts for s in a.skipped_fixes]
        lines += [tried_line(a) for a in report.attempts[1:]]
        return "\n".join(lines)
    halo = best.halo_completeness
    failing = _failing(best, atol, rtol)
    ruled_out = _halo_ruled_out(report, best)
    if halo.matches is False and ruled_out is None:
        widened = rolled.get("widen_halo")
        tried = (
            f" (auto-fix widened it in attempt {widened.index + 1}; that made the comparison worse and was rolled "
            "back, so the halo is not the only cause)"
            if widened is not None
            else ""
        )
        lines.append(f"FAIL — halo too shallow: {halo.interpretation}{tried}")
    if not lines:
        lines += _declared_helper_lines(best) or _declared_op_head(best)
    gaps = [h for h in best.helper_diagnostics if h.suspected_gap and h.likely_remedy and not h.already_wrapped]
    if gaps and not lines:
        lines.append(_helper_head(gaps[0], rolled.get("declare_helper_adapter")))
    if best.error is not None and not lines:  # a NaN on a rank says more than the disagreement it causes
        lines.append(f"FAIL — {best.error.hint}")
    split = disagreement_head(best)
    if split is not None:
        lines.append(split if not lines else "also: " + split.removeprefix("FAIL — "))
    suspicious = suspicious_head(best, report.receptive_field)
    if suspicious is not None and not lines:
        lines.append(suspicious)
    if best.error is not None and not lines:
        lines.append(f"FAIL — {best.error.hint}")
    skipped = [s for a in report.attempts for s in a.skipped_fixes]
    skip_head = bool(skipped) and not lines  # the fix with evidence was not tried: that is the next step
    if skip_head:
        lines.append(f"FAIL — the fix that fits was not tried ({skipped[0].rule}): {skipped[0].reason}")
    skipped_lines = [_not_tried(s) for s in skipped[1 if skip_head else 0 :]]
    first = best.layer_divergence.first_divergent if best.layer_divergence is not None else None
    op = best.layer_divergence.first_op if best.layer_divergence is not None else None
    if not lines:
        if first is not None:
            at = f"; first op whose value departs: {op.where} ({op.op})" if op is not None else ""
            lines.append(
                f"FAIL — {failing}; first divergent module: {first.module} ({first.cls}), "
                f"rel diff {_num(first.rel_diff)}{at}; check how it reduces or aggregates across atoms"
            )
        else:
            lines += unknown_cause_lines(
                best,
                failing,
                meta.layer_diagnostic is not False,
                fixes_tried=sum(1 for a in report.attempts if a.rule),
                checked=([ruled_out] if ruled_out is not None else []) + _declared_op_lines(best),
            )
            ruled_out = None  # said among what was checked
    else:
        lines.append(f"failing: {failing}")
        if first is not None:
            lines.append(f"first divergent module: {first.module} ({first.cls}), rel diff {_num(first.rel_diff)}")
    if ruled_out is not None:
        lines.append(ruled_out)
    lines += skipped_lines
    lines += trust_lines(report)
    lines += _remedy_lines(report, best, rolled, lines)
    lines += [tried_line(a) for a in report.attempts]
    return "\n".join(lines)


def _not_tried(skipped: SkippedFix) -> str:
    """The line of a fix that had evidence but was not tried, with why."""
    return f"- not tried: {skipped.rule}: {skipped.reason}"


def _bracket_lines(report: TraceReport) -> list[str]:
    """After a pass `widen_halo` made under `local`: the depth (or the halo in Å) the halo that failed and
    the one that passed give, with the spec text (`report.halo_depth`); nothing otherwise."""
    bracket = halo_bracket(report)
    if bracket is None:
        return []
    field = report.receptive_field
    status = field.status if field is not None else "not_measured"
    if status == "measured":
        where = "the attempts measured a deeper receptive field than the reference did"
    else:
        status = status.replace("_", " ")
        where = f"the reference could not measure the receptive field ({status}); the attempts' halos give"
    return [f"{where}: {halo_remedy(bracket)}"]


def _halo_ruled_out(report: TraceReport, best: Attempt) -> str | None:
    """Where the best attempt's halo is incomplete but another attempt ran with a complete one and failed
    the same outputs (the halo advice was followed without effect), the line that says so; else None."""
    if best.halo_completeness.matches is not False:
        return None
    same = set(best.failing_outputs)
    for a in report.attempts:
        if a is best or a.passed or a.halo_completeness.matches is not True or set(a.failing_outputs) != same:
            continue
        return (
            f"- halo: not the cause: attempt {a.index + 1} ran with a complete halo "
            f"({a.spec.distribution.policy.scatter_mode}; {a.halo_completeness.interpretation}) and failed the "
            f"same outputs, so the halo advice of attempt {best.index + 1} was followed without effect"
        )
    return None


def _rolled_back(report: TraceReport) -> dict[str, Attempt]:
    """The auto-fix attempts that were rolled back, by rule (the first of each)."""
    out: dict[str, Attempt] = {}
    for a in report.attempts:
        if a.rule and a.rolled_back is not None:
            out.setdefault(a.rule, a)
    return out


def _advice_spec(best: Attempt, rolled: dict[str, Attempt]) -> tuple[MLIPSpec, list[str]]:
    """The spec unrouted advice is read under: `best`'s, with what auto-fix tried for unrouted
    aggregations and rolled back already in it (torchscript "eager", the kernels' `custom_ops`
    entries), so no advice repeats it; and one phrase per such remedy, saying where it was tried."""
    spec, tried = best.spec.copy(), []
    eager = rolled.get("run_torchscript_eagerly")
    if eager is not None and eager_remedy_applies(spec, best.unrouted):
        spec.distribution.torchscript = "eager"
        tried.append(f'distribution.torchscript "eager" (attempt {eager.index + 1})')
    ops = rolled.get("declare_custom_ops")
    declared = {c.op for c in spec.distribution.custom_ops}
    added = [c for c in ops.spec.distribution.custom_ops if c.op not in declared] if ops is not None else []
    if ops is not None and added:
        spec.distribution.custom_ops.extend(added)
        tried.append(f"{', '.join(c.op for c in added)} in distribution.custom_ops (attempt {ops.index + 1})")
    return spec, tried


def _unrouted_lines(best: Attempt, rolled: dict[str, Attempt]) -> list[str]:
    """`unrouted_action` of `best`, past the remedies auto-fix tried and rolled back (`_advice_spec`):
    the advice that is left, and that those were tried."""
    spec, tried = _advice_spec(best, rolled)
    if not tried:
        return unrouted_action(best)
    lines = unrouted_action(dataclasses.replace(best, spec=spec))
    if lines:
        lines[0] += f" (auto-fix already tried {' and '.join(tried)}; it made the comparison worse and was rolled back)"
    return lines


def _helper_head(h: HelperDiagnosis, tried: Attempt | None) -> str:
    """The FAIL line of an undeclared per-system helper: its ready adapter, or, when auto-fix declared
    that adapter and rolled it back, that it was tried and where to look instead."""
    remedy = json.dumps(h.likely_remedy)
    if tried is not None and tried.spec.helper(h.qualname) is not None:
        return (
            f"FAIL — per-system helper {h.qualname} is flagged ({h.suspected_gap}), but declaring {remedy} "
            f"(attempt {tried.index + 1}) made the comparison worse and was rolled back: the values it is given "
            "already differ between ranks; look upstream of it, in the code that computes its inputs"
        )
    return f"FAIL — undeclared per-system helper {h.qualname}: add {remedy} to distribution.third_party_helpers"


def _declared_helper_lines(best: Attempt) -> list[str]:
    """The FAIL line naming an adapter the user declared whose helper still does not agree across ranks."""
    for h in best.helper_diagnostics:
        entry = best.spec.helper(h.qualname)
        if not h.already_wrapped or h.consistency_passed is not False or entry is None:
            continue
        declared = json.dumps(entry.to_dict())
        why = h.divergence_notes[0] if h.divergence_notes else f"its per-rank results fail {h.consistency_check}"
        text = (
            f"FAIL — your declared adapter {declared} in distribution.third_party_helpers does not make "
            f"{h.qualname} agree with the single-process run ({why})"
        )
        if h.likely_remedy is not None and h.likely_remedy != entry.to_dict():
            text += f"; replace it with {json.dumps(h.likely_remedy)}"
        else:
            text += "; correct that entry (its kind, atom_arg or atom_dim) or remove it"
        return [text]
    return []


def _declared_op_head(best: Attempt) -> list[str]:
    """The FAIL line naming a `custom_ops` entry the user declared when the first value that departs
    from the reference (`LayerDivergence.first_op`) is that kernel's."""
    first = best.layer_divergence.first_op if best.layer_divergence is not None else None
    if first is None:
        return []
    for entry in best.spec.distribution.custom_ops:
        namespace, _, name = entry.op.partition("::")
        if entry.op in first.op or (name and f"{namespace}.{name}" in first.op):
            return [
                f"FAIL — the first value that departs from the single-process run is {entry.op}'s, at "
                f"{os.path.basename(first.file)}:{first.line}, which your declared entry {json.dumps(entry.to_dict())} "
                "in distribution.custom_ops routes: correct its arg_transforms / output_transforms to what the "
                "kernel is given and returns (docs/spec.md, custom_ops)"
            ]
    return []


def _declared_op_lines(best: Attempt) -> list[str]:
    """What was checked of the `custom_ops` entries the user declared: which fired and how often."""
    declared = [c.op for c in best.spec.distribution.custom_ops]
    if not declared:
        return []
    fired = {op: best.handler_counts.get(handler_count("custom_op", op), 0) for op in declared}
    words = ", ".join(f"{op} ×{n}" for op, n in fired.items())
    return [
        f"- your declared distribution.custom_ops entries: {words} routed (a wrong transform in one of them gives "
        "exactly this: check each entry's transforms against what the kernel is given and returns)"
    ]


def _remedy_lines(report: TraceReport, best: Attempt, rolled: dict[str, Attempt], said: Sequence[str]) -> list[str]:
    """Every ready remedy not stated in `said` yet, with the spec text to write: each undeclared
    helper's adapter (unless auto-fix tried it and rolled it back), each undeclared kernel's
    `custom_ops` entry, and the receptive field's depth or cutoff (`field_advice.field_remedy`)."""
    tried = rolled.get("declare_helper_adapter")
    remedies: list[str] = []
    for h in best.helper_diagnostics:
        if not (h.suspected_gap and h.likely_remedy and not h.already_wrapped):
            continue
        if tried is not None and tried.spec.helper(h.qualname) is not None:
            continue
        remedies.append(f"add {json.dumps(h.likely_remedy)} to distribution.third_party_helpers ({h.qualname})")
    ready, _ = custom_op_entries(_advice_spec(best, rolled)[0], best.unrouted)
    remedies += [f"add {json.dumps(e)} to distribution.custom_ops" for e in ready]
    field = report.receptive_field
    depth = field_remedy(field) if field is not None else None
    if depth is not None:
        remedies.append(depth)
    text = "\n".join(said)
    fresh = [r for r in remedies if r.split(" (", 1)[0] not in text]
    if not fresh:
        return []
    return ["ready remedies (the spec text to write; the editor's quick fixes write them):", *(f"- {r}" for r in fresh)]
