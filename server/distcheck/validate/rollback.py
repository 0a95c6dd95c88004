"""Rolling back an auto-fix mutation that made the comparison worse.

Auto-fix proposes each mutation from the best attempt so far. When the attempt a mutation produced
ranks worse than that one (`report.attempt_rank`: more failing outputs, or as many with a larger
worst relative difference, or no comparison at all), the engine marks it `rolled_back` and the next
proposal starts again from the better attempt's spec and run; the report's best attempt (and so its
spec and headline) stays the better one.
"""

from __future__ import annotations

from ..report import Attempt, Rollback, attempt_rank

__all__ = ["rollback_if_worse"]


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"


def _reason(attempt: Attempt, base: Attempt) -> str:
    now, before = attempt.failing_outputs, base.failing_outputs
    if not attempt.verdicts:
        return f"it ended before any comparison, where attempt {base.index + 1} compared every output"
    if len(now) > len(before):
        return f"{len(now)} failing outputs ({', '.join(now)}) where attempt {base.index + 1} had {len(before)}" + (
            f" ({', '.join(before)})" if before else ""
        )
    worse = []
    for name in now:
        v, b = attempt.verdicts[name], base.verdicts.get(name)
        was = b.max_rel_diff if b is not None else None
        if b is None or b.passed or v.max_rel_diff is None or (was is not None and v.max_rel_diff > was):
            worse.append(f"{name} max rel {_num(v.max_rel_diff)} (was {_num(was)})")
    return "larger differences: " + (", ".join(worse) or ", ".join(now)) + f" than attempt {base.index + 1}"


def rollback_if_worse(attempt: Attempt, base: Attempt | None) -> bool:
    """Mark `attempt` rolled back to `base` (and return True) when it ranks worse than `base`."""
    if base is None or attempt_rank(attempt) <= attempt_rank(base):
        return False
    attempt.rolled_back = Rollback(
        to_attempt=base.index,
        reason=f"the mutation ({attempt.rule}) made the comparison worse: {_reason(attempt, base)}; the next "
        f"attempt starts again from attempt {base.index + 1}'s spec",
    )
    return True
