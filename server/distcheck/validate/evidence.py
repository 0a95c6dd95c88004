"""The evidence `next_action` shows: ranks that disagree, what a crash left, what was rolled back, and
what was looked at when no cause is known (never a generic list of spec fields). No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..report import Attempt, RankDisagreement

__all__ = ["crash_lines", "disagreement_head", "tried_line", "unknown_cause_lines"]


def _module(d: RankDisagreement) -> str:
    m = d.first_module
    if m is None:
        return ""
    ranks = ", ".join(str(r) for r in m.ranks)
    return (
        f"; first module whose per-system value differs across ranks: {m.module} ({m.cls}), on rank"
        f"{'s' if len(m.ranks) > 1 else ''} {ranks} against rank 0, max |Δ| {m.max_abs:.3g}"
    )


def disagreement_head(attempt: Attempt) -> str | None:
    """The FAIL line for an attempt whose replicated outputs differ between ranks, None when none do."""
    found = attempt.rank_disagreements
    if not found:
        return None
    first = found[0]
    more = f" (and {', '.join(d.output for d in found[1:])})" if len(found) > 1 else ""
    op = first.first_op
    module = first.first_module.module if first.first_module is not None else f"the code that computes {first.output}"
    where = f"at {op.where}" if op is not None else f"in {module}"
    departs = f"; first op whose value departs: {op.where} ({op.op})" if op is not None else ""
    return (
        f"FAIL — {first.summary}{more}{_module(first)}{departs}. A replicated output must come out the same on "
        f"every rank: look {where} for a value that depends on the rank or on which atoms the rank holds (a "
        "reduction over the rank's rows the runtime does not route: write it as index_add/scatter over "
        "batch.batch, or declare the helper in distribution.third_party_helpers)"
    )


def crash_lines(attempt: Attempt) -> list[str]:
    """What each rank that raised had done before: its handler counts and the last module that returned."""
    lines = []
    for c in attempt.crash_traces:
        counts = ", ".join(f"{k}={v}" for k, v in c.handler_counts.items()) or "none fired"
        last = f"the last module that returned was {c.last_module}" if c.last_module else "no module had returned"
        lines.append(f"before the crash, rank {c.rank} ({c.phase}): handlers {counts}; {last}")
    return lines


def unknown_cause_lines(
    attempt: Attempt, failing: str, layer_diagnostic: bool, fixes_tried: int = 0, checked: Sequence[str] = ()
) -> list[str]:
    """The FAIL line when no cause was found (no rule had evidence, or the `fixes_tried` fixes did not
    help) and no divergent module either, then what was checked (`checked`: further lines of it)."""
    why = (
        f"the {fixes_tried} fix(es) auto-fix tried did not make it pass"
        if fixes_tried
        else "no auto-fix rule found evidence it could act on"
    )
    lines = [f"FAIL — {failing}; cause unknown: {why}. What was checked:", *checked]
    lines.append(
        f"- unrouted aggregations: {len(attempt.unrouted)} found"
        + (f" ({', '.join(u.op for u in attempt.unrouted[:3])})" if attempt.unrouted else "")
    )
    lines.append(f"- ranks disagreeing on a replicated output: {len(attempt.rank_disagreements) or 'none'}")
    halo = attempt.halo_completeness
    if halo.matches is True and halo.interpretation:
        lines.append(f"- halo: {halo.interpretation}")
    if layer_diagnostic:
        lines.append(
            "- first divergent module: none found (no sub-module's per-atom or per-system output differs, or the "
            "wrapper has no sub-modules to hook: split the forward into nn.Module children to localise it)"
        )
    else:
        lines.append("- first divergent module: not searched (layer_diagnostic is off: turn it on to localise it)")
    op = attempt.layer_divergence.first_op if attempt.layer_divergence is not None else None
    if op is not None:
        lines.append(f"- first op whose value departs: {op.where} ({op.op}): look at that line first")
    flagged = [h.qualname for h in attempt.helper_diagnostics if h.flagged]
    lines.append(f"- watched helpers flagged: {', '.join(flagged) or 'none'}")
    lines.append(
        "next: compare the failing outputs atom by atom (report worst_index) for code that depends on which "
        "atoms a rank holds or on their order (e.g. pos[0], batch.num_atoms, positions.shape[0])"
    )
    return lines


def tried_line(attempt: Attempt) -> str:
    """One attempt as the list of attempts tried shows it, with its rollback when it had one."""
    text = f"attempt {attempt.index + 1} ({attempt.rule or 'initial'}): {'pass' if attempt.passed else 'fail'} — "
    text += attempt.rationale
    if attempt.rolled_back is not None:
        text += f" [rolled back to attempt {attempt.rolled_back.to_attempt + 1}: {attempt.rolled_back.reason}]"
    return text
