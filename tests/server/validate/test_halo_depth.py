"""A depth the reference could not measure is named from the halo that failed and the one that passed.

When a per-system quantity feeds back into every atom the receptive field is "unbounded", so auto-fix
widens a failing `local` halo until one passes, and the report said only that it passed: it never
named `num_interactions` (AIMNet2 declaring 1 interaction of 4 Å: 4.5 Å failed, 9 Å passed). The two
halos are a measurement (`report.halo_depth`): next_action now gives the depth they support with the
spec text, or the halo in Å when no whole interaction fits, and the fix's rationale says how many
interactions the wider halo holds. Reports are built by hand: no process.
"""

from __future__ import annotations

from typing import Any

import pytest

from distcheck.report import Attempt, OutputVerdict, ReceptiveField, TraceReport
from distcheck.report.fixes import SpecFix
from distcheck.report.halo_depth import halo_bracket
from distcheck.report.parts import HaloCompleteness, ReportMeta, WrapperInfo
from distcheck.spec import MLIPSpec
from distcheck.validate.halo_bounds import widened_halo
from distcheck.validate.next_action import next_action

BARE: dict[str, Any] = {"format": "distcheck-spec", "version": 1, "output_kinds": {"forces": "per_node"}}


def _spec(width: float | None, mode: str = "local") -> MLIPSpec:
    policy: dict[str, Any] = {"kind": "halo", "scatter_mode": mode, "halo_width": width}
    return MLIPSpec.from_dict({**BARE, "distribution": {"policy": policy}})


def _attempt(index: int, width: float, passed: bool, rule: str | None = None, mode: str = "local") -> Attempt:
    rel = 1e-12 if passed else 3e-3
    v = OutputVerdict("forces", "per_node", passed, rel, rel, "ok" if passed else "mismatch", [0], 1, 1)
    spec = _spec(None if index == 0 else width, mode)
    a = Attempt(index, spec, f"try {index}", rule, passed, {}, {}, {"forces": v}, {}, None, [], None, {}, {}, {})
    a.halo_completeness = HaloCompleteness(matches=True, halo_width=width, required_width=4.0)
    if rule is not None:
        a.fixes = [SpecFix(rule, "set", ["distribution", "policy", "halo_width"], width)]
    return a


def _unbounded(cutoff: float, declared: int) -> ReceptiveField:
    return ReceptiveField(
        "unbounded", cutoff, declared, cutoff * declared, None, None, "", 2, False, note="moved every atom"
    )


def _report(
    widths: list[float], cutoff: float | None, declared: int, field: ReceptiveField | None = None, **kw: Any
) -> TraceReport:
    """Attempts under `local` at `widths`: every one fails but the last, a `widen_halo` pass."""
    attempts = [
        _attempt(i, w, i == len(widths) - 1, None if i == 0 else "widen_halo", **kw) for i, w in enumerate(widths)
    ]
    if field is None and cutoff is not None:
        field = _unbounded(cutoff, declared)
    r = TraceReport(
        ok=True,
        spec=attempts[-1].spec,
        attempts=attempts,
        next_action="",
        meta=ReportMeta(
            world_size=2, atol=1e-5, rtol=1e-4, wrapper=WrapperInfo(cutoff=cutoff, num_interactions=declared)
        ),
        best_index=len(attempts) - 1,
        receptive_field=field,
    )
    r.next_action = next_action(r)
    return r


DEPTHS = {
    "2 x the declared halo (AIMNet2: 1 of 4 Å)": ([4.5, 9.0], 4.0, 1, 2),
    "3 x the declared halo": ([4.5, 13.5], 4.0, 1, 3),
    "widened twice (the first widen failed too)": ([4.5, 9.0, 18.0], 4.0, 1, 4),
    "declared 2 of 5 Å, doubled": ([10.5, 21.0], 5.0, 2, 4),
    "declared 1 of 3 Å, doubled": ([3.5, 7.0], 3.0, 1, 2),
}


@pytest.mark.parametrize("shape", DEPTHS)
def test_a_widen_that_passed_names_the_depth_the_two_halos_give(shape: str) -> None:
    widths, cutoff, declared, depth = DEPTHS[shape]
    report = _report(widths, cutoff, declared)
    assert report.next_action.startswith("OK — "), report.next_action
    line = next(line for line in report.next_action.splitlines() if "num_interactions" in line)
    assert f"set num_interactions = {depth} on the wrapper" in line, line
    failed = max(widths[:-1])
    assert f"a halo of {widths[-1]:g} Å passed" in line and f"{failed:g} Å failed" in line, line
    assert f"{depth * cutoff:g} Å" in line and "could not measure the receptive field (unbounded)" in line, line
    bracket = halo_bracket(report)
    assert bracket is not None and bracket.depth == depth and bracket.failed == failed


NO_DEPTH = {
    "capped below two interactions": ([4.5, 7.0], 4.0, 1),
    "one more interaction would not fit past the failed halo": ([8.5, 11.0], 4.0, 2),
    "no cutoff declared": ([4.5, 9.0], None, 1),
}


@pytest.mark.parametrize("shape", NO_DEPTH)
def test_a_widen_that_passed_at_no_whole_depth_gives_the_halo_in_angstrom(shape: str) -> None:
    widths, cutoff, declared = NO_DEPTH[shape]
    report = _report(widths, cutoff, declared)
    assert "num_interactions =" not in report.next_action, report.next_action
    line = next(line for line in report.next_action.splitlines() if "halo_width = " in line)
    assert f"set distribution.policy.halo_width = {widths[-1]:g} in the spec" in line, line
    assert f"a halo of {widths[-1]:g} Å passed" in line and f"{widths[-2]:g} Å failed" in line, line


def test_no_bracket_without_a_widen_that_passed_under_local() -> None:
    plain = _report([4.5], 4.0, 1)  # passed at attempt 1: nothing failed
    assert halo_bracket(plain) is None and "num_interactions" not in plain.next_action
    other = _report([4.5, 9.0], 4.0, 1)
    other.attempts[1].fixes = [SpecFix("all_reduce_partial_output", "set", ["all_reduce_outputs"], ["stress"])]
    assert halo_bracket(other) is None  # another fix passed: the halos measured nothing
    measured = ReceptiveField("measured", 4.0, 1, 4.0, 2, 8.0, "forces", 2, True, remedy="depth")
    said = _report([4.5, 9.0], 4.0, 1, field=measured)
    assert halo_bracket(said) is None  # the reference's own remedy stands
    mode = _report([4.5, 9.0], 4.0, 1, mode="halo_correction")
    assert halo_bracket(mode) is None


def test_the_widen_rationale_says_how_many_interactions_the_wider_halo_holds() -> None:
    halo = {"halo_width": 4.5, "required_width": 4.0, "matches": True}
    for cutoff, declared, words in ((4.0, 1, "holds 2 interaction(s) of the declared 4 Å cutoff (8 Å)"),
                                    (3.0, 2, "holds 4 interaction(s) of the declared 3 Å cutoff (12 Å)")):  # fmt: skip
        spec = _spec(4.5 if declared == 1 else 6.5)
        halo["halo_width"] = spec.distribution.policy.halo_width
        reference = {
            "wrapper": {"cutoff": cutoff, "num_interactions": declared},
            "receptive_field": {"status": "unbounded", "cutoff": cutoff, "measured_depth": None},
        }
        step = widened_halo(spec, halo, reference, None, 2)
        assert step is not None and words in step[1], step


def test_a_pass_says_which_fix_it_could_not_try() -> None:
    from distcheck.report.fixes import PRE_RUN_RULE, SkippedFix

    measured = ReceptiveField("measured", 5.0, 1, 5.0, 3, 15.0, "forces", 2, True, remedy="depth")
    for widths in ([5.5, 14.48], [5.5, 11.0, 14.48]):
        report = _report(widths, 5.0, 1, field=measured)
        reason = "a 15.5 Å halo would leave a rank holding system 0 whole; validate with a larger sample"
        report.attempts[0].skipped_fixes = [SkippedFix(PRE_RUN_RULE, reason, 15.5)]
        text = next_action(report)
        assert text.startswith("OK — ") and f"- not tried: {PRE_RUN_RULE}: {reason}" in text, text
        assert "set num_interactions = 3 on the wrapper" in text  # the measured remedy, with why its halo was not run
