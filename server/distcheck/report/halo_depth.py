"""What the attempts measured of the depth where the reference could not: the halo that failed and the
one `widen_halo` passed with, under `local` (`halo_bracket`), and the spec text it supports
(`halo_remedy`).

When the receptive field cannot be measured (a per-system quantity feeds back into every atom:
"unbounded"), auto-fix widens a failing `local` halo until one passes. Those two halos are a
measurement: a model of `k` interactions of the declared cutoff `c` needs a halo of `k × c`, so the
halo that failed rules out every depth whose field it covered, and the halo that passed covers the
field of `floor(passed / c)` interactions. When that depth is deeper than declared and not ruled out,
it is the depth the attempts give; otherwise (the halo that passed covers no whole interaction past
the one that failed, or the cutoff is unknown) they give the halo in Å only, never a depth. Nothing
is claimed beyond the two halos. This module never imports torch: the editor daemon reads it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .document import TraceReport

__all__ = ["WIDEN_RULE", "HaloBracket", "halo_bracket", "halo_remedy"]

WIDEN_RULE = "widen_halo"
"""The auto-fix rule that widens a halo (`validate.autofix.RULES`)."""

_EPS = 1e-6


@dataclass(frozen=True)
class HaloBracket:
    """The widest `local` halo that failed (`failed`, Å) and the one the passing attempt ran with
    (`passed`, Å, attempt index `attempt`), the wrapper's declared `cutoff` (Å; None when not known)
    and `declared_depth`, and the `depth` the two halos give (None: only the halo in Å)."""

    failed: float
    passed: float
    attempt: int
    cutoff: float | None
    declared_depth: int
    depth: int | None


def _local_width(report: TraceReport, index: int) -> float | None:
    a = report.attempts[index]
    policy = a.spec.distribution.policy
    if policy.kind != "halo" or policy.scatter_mode != "local":
        return None
    width = a.halo_completeness.halo_width
    return float(width) if width is not None else (None if policy.halo_width is None else float(policy.halo_width))


def halo_bracket(report: TraceReport) -> HaloBracket | None:
    """The bracket of a pass `widen_halo` made under `local` (see the module docstring); None when the
    best attempt did not pass that way, no narrower `local` halo failed before it, or the reference
    measured the field under-declared already (its own remedy stands then)."""
    best = report.best_attempt
    if best is None or not best.passed or not any(f.rule == WIDEN_RULE for f in best.fixes):
        return None
    field = report.receptive_field
    if field is not None and field.under_declared:
        return None
    passed = _local_width(report, best.index)
    if passed is None:
        return None
    failed = [
        w
        for a in report.attempts
        if not a.passed and a.verdicts and (w := _local_width(report, a.index)) is not None and w < passed - _EPS
    ]
    if not failed:
        return None
    wrapper = report.meta.wrapper
    cutoff = wrapper.cutoff if wrapper is not None and wrapper.cutoff else (field.cutoff if field else None)
    declared = (wrapper.num_interactions if wrapper is not None else None) or (field.declared_depth if field else None)
    declared = int(declared or 1)
    depth = None
    if cutoff is not None and cutoff > 0:
        covered = math.floor(passed / cutoff + _EPS)
        if covered > declared and covered * cutoff > max(failed) + _EPS:
            depth = covered
    return HaloBracket(max(failed), passed, best.index, cutoff, declared, depth)


def halo_remedy(b: HaloBracket) -> str:
    """The exact spec text the bracket supports, with what the attempts measured: `set num_interactions =
    k on the wrapper (...)` when it gives a depth, else the halo in Å (`report.spec` carries it)."""
    measured = f"a halo of {b.passed:g} Å passed (attempt {b.attempt + 1}) and {b.failed:g} Å failed"
    if b.depth is not None and b.cutoff is not None:
        ruled = math.floor(b.failed / b.cutoff + _EPS)
        farther = (
            f"{ruled} interaction(s) of its declared {b.cutoff:g} Å cutoff ({ruled * b.cutoff:g} Å, within the halo "
            "that failed)"
            if ruled >= 1
            else f"the {b.failed:g} Å halo that failed"
        )
        return (
            f"set num_interactions = {b.depth} on the wrapper ({measured}: the model reaches farther than {farther}, "
            f"and {b.depth} interactions, {b.depth * b.cutoff:g} Å, lie within the halo that passed)"
        )
    why = (
        f", which no whole number of interactions of the declared {b.cutoff:g} Å cutoff past {b.declared_depth} fits"
        if b.cutoff is not None
        else ", and the wrapper declares no cutoff to count interactions with"
    )
    return f"set distribution.policy.halo_width = {b.passed:g} in the spec ({measured}{why}; report.spec has it)"
