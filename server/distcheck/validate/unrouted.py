"""What to say and do about unrouted aggregations (`report.UnroutedOp`): the lines `next_action` puts
first, the evidence the `run_torchscript_eagerly` auto-fix rule fires on, and the ready
`custom_ops` entries of undeclared kernels (`custom_op_entries`, which the `declare_custom_ops` rule
adds and the daemon's quick fix inserts), and the advice for aggregations inside the user's own
`torch.autograd.Function` (`function_action`). Imports no torch (the daemon renders `next_action`)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from ..report import Attempt, UnroutedOp
from ..runtime.function_mark import function_of, function_remedy
from ..spec import MLIPSpec

__all__ = ["custom_op_entries", "describe", "eager_remedy_applies", "function_action", "unrouted_action"]

_SHOWN = 3


def _short(path: str | None) -> str:
    return os.path.basename(path) if path else "?"


def describe(op: UnroutedOp) -> str:
    """`aten.index_add ×3 (atoms → systems) in _mol_sum at nbops.py:26, called from model.py:40`."""
    text = f"{op.op} ×{op.count} ({op.aggregation_words})"
    if op.function and op.function != op.op:
        text += f" in {op.function}"
    if op.file:
        text += f" at {_short(op.file)}:{op.line if op.line is not None else '?'}"
    if op.call_file and (op.call_file, op.call_line) != (op.file, op.line):
        text += f", called from {_short(op.call_file)}:{op.call_line if op.call_line is not None else '?'}"
    return text


def eager_remedy_applies(spec: MLIPSpec, unrouted: Sequence[UnroutedOp]) -> bool:
    """Whether running TorchScript eagerly can route what was seen: some aggregation ran inside
    TorchScript and the spec still runs it compiled."""
    return spec.distribution.torchscript == "scripted" and any(u.origin == "torchscript" for u in unrouted)


def custom_op_entries(spec: MLIPSpec, unrouted: Sequence[UnroutedOp]) -> tuple[list[dict[str, Any]], list[str]]:
    """The ready `distribution.custom_ops` entries of the undeclared kernels in `unrouted` (one per op
    `spec` does not declare, in first-seen order), and a sentence for each kernel no single entry fits:
    no transform fits its shapes (`KernelCall.no_entry`), or its calls at different lines need
    different entries."""
    declared = {c.op for c in spec.distribution.custom_ops}
    entries: dict[str, dict[str, Any] | None] = {}
    notes: dict[str, str] = {}
    for u in unrouted:
        if u.origin != "custom_op" or u.kernel is None or u.op in declared:
            continue
        entry = u.kernel.entry
        if entry is None:
            notes.setdefault(u.op, f"{u.op}: {u.kernel.no_entry or 'no custom_ops transform fits its shapes'}")
            entries[u.op] = None
        elif u.op not in entries:
            entries[u.op] = dict(entry)
        elif entries[u.op] is not None and entries[u.op] != entry:
            notes[u.op] = (
                f"{u.op}: its calls at different lines need different transforms ({_short(u.file)}:{u.line} is "
                f"{u.aggregation_words}), and custom_ops holds one entry per kernel: wrap each "
                "use in its own kernel, then validate again"
            )
            entries[u.op] = None
    ready = [e for op, e in entries.items() if e is not None and op not in notes]
    return ready, list(notes.values())


def _advice(spec: MLIPSpec, unrouted: Sequence[UnroutedOp]) -> str:
    origins = {u.origin for u in unrouted}
    if eager_remedy_applies(spec, unrouted):
        return (
            'set distribution.torchscript to "eager" (auto-fix does) so the ranks run the TorchScript as Python '
            "and the handlers route it"
        )
    steps = []
    if "torchscript" in origins:
        steps.append(
            'these run in TorchScript even with torchscript "eager" (serialized with torch.jit.load, or '
            "imported before the rank started): declare the Python helper that calls them in "
            "distribution.third_party_helpers"
        )
    if "custom_op" in origins:
        ready, notes = custom_op_entries(spec, unrouted)
        if ready:
            shown = ", ".join(json.dumps(e) for e in ready)
            steps.append(f"add {shown} to distribution.custom_ops")
        steps.extend(notes)
        named = {u.op for u in unrouted if u.kernel is not None}
        rest = sorted({u.function or u.op for u in unrouted if u.origin == "custom_op" and u.kernel is None} - named)
        if rest or not (ready or notes):
            steps.append(
                f"declare {', '.join(rest) or 'the torch.ops kernel'} in distribution.custom_ops with its transforms"
            )
    if "native" in origins:
        steps.append("declare the Python function that calls this C++ code in distribution.third_party_helpers")
    if "python" in origins:
        steps.append(
            'rewrite it in a form the handlers route (docs/safe-code.md: "Code that is safe to write"), e.g. a sum, '
            "mean, amax or amin keyed by the system index"
        )
    return "; ".join(steps)


def function_action(spec: MLIPSpec, inside: Sequence[UnroutedOp]) -> str:
    """What to say about aggregations routed inside the forward of the user's `torch.autograd.Function`
    whose hand-written backward misses their exchange (`runtime.autograd_functions`): which Function,
    where, and the step that makes its gradients right."""
    classes = ", ".join(dict.fromkeys(function_of(u.function) or "?" for u in inside))
    shown = "; ".join(describe(u) for u in inside[:_SHOWN])
    more = f"; and {len(inside) - _SHOWN} more" if len(inside) > _SHOWN else ""
    steps = function_remedy((u.aggregation for u in inside), spec.distribution.policy.scatter_mode)
    return (
        f"FAIL — the backward of {classes} (torch.autograd.Function) is its own code, so the exchange distcheck "
        f"adds to the aggregations in its forward is missing from the gradients (the values are exact): "
        f"{shown}{more}; {steps}"
    )


def unrouted_action(attempt: Attempt) -> list[str]:
    """The lines that lead `next_action` when `attempt` failed with unrouted aggregations ([] when it
    has none): what ran unseen, where, and the step that routes it; aggregations inside a
    `torch.autograd.Function` first (`function_action`)."""
    if not attempt.unrouted or attempt.passed:
        return []
    inside = [u for u in attempt.unrouted if function_of(u.function) is not None]
    ops = [u for u in attempt.unrouted if function_of(u.function) is None]
    lines = [function_action(attempt.spec, inside)] if inside else []
    if not ops:
        return lines
    total = sum(u.count for u in ops)
    shown = "; ".join(describe(u) for u in ops[:_SHOWN])
    more = f"; and {len(ops) - _SHOWN} more" if len(ops) > _SHOWN else ""
    head = (
        f"FAIL — {total} aggregation{'s' if total != 1 else ''} ran where distcheck's handlers cannot route "
        f"{'them' if total != 1 else 'it'}, so each rank computed a partial: {shown}{more}; "
        + _advice(attempt.spec, ops)
    )
    return [*lines, head]
