"""The per-output failure record: the one text of "this output is out of tolerance" that every test
runner shows.

`output_failures(report)` builds one `OutputFailure` per failing output of the best attempt. The CLI's
JUnit (`junit.py`) writes them as `<failure>` elements and the report JSON carries them as the derived
`failures` key, which the extension's Testing view turns into `TestMessage.diff(message, expected,
actual)`: both read the same strings, so the two cannot drift. Likewise `fixed_pass_message` is the one
text of "passed only after auto-fix" (the derived `fix_failure` key): the JUnit `<failure
type="fixed-pass">` and the Testing view's failure message. This module never imports torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .atoms import describe_index
from .codec import Record, wire
from .model import Frame
from .render import tolerance_for

if TYPE_CHECKING:
    from .model import Attempt, OutputVerdict
    from .parts import ReportMeta, TargetInfo

__all__ = ["OutputFailure", "fixed_pass_message", "output_failure", "output_failures"]


@dataclass(eq=False)
class OutputFailure(Record):
    """One failing output of the best attempt, as a test runner shows it.

    `output` is the output name; `message` one line naming the output, its largest error and the
    tolerance it exceeds; `expected` and `actual` short readable texts for a diff view, numbers first:
    the single-process value at the worst element (and the tolerance) against the distributed run's
    value there (and how many elements fail). `location` is the culprit line when the report names one
    (the first op whose value departs, `LayerDivergence.first_op`), else None.
    """

    output: str
    message: str
    expected: str
    actual: str
    location: Frame | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))


def _fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return "-" if x is None else str(x)


_ACTUAL_BY_STATUS = {
    "missing": "missing from the distributed result",
    "shape": "a different shape from the single-process result",
    "nonfinite": "non-finite values (NaN or inf)",
}


def output_failure(v: OutputVerdict, meta: ReportMeta) -> OutputFailure:
    """The failure record of output verdict `v` (a failing one) under the tolerances in `meta`
    (`atol` / `rtol`: a number or a mapping by output name, kind or "default")."""
    atol = tolerance_for(meta.atol, v.name, v.kind)
    rtol = tolerance_for(meta.rtol, v.name, v.kind)
    tolerance = f"atol {_fmt(atol)}, rtol {_fmt(rtol)}"
    expected = f"{v.name} ({v.kind}): every element equal to the single-process run within {tolerance}"
    diffs = f"max abs diff {_fmt(v.max_abs_diff)}, max rel diff {_fmt(v.max_rel_diff)}"
    if v.status in _ACTUAL_BY_STATUS:
        what = _ACTUAL_BY_STATUS[v.status]
        actual = f"{v.name} ({v.kind}): {what}"
        message = f"{v.name}: {what} (tolerance {tolerance})"
    elif v.status == "suspicious":
        actual = f"{v.name} ({v.kind}): {diffs}; within tolerance but far above the round-off floor of this sample"
        message = f"{v.name}: {diffs} is within {tolerance} but far above round-off: distribution changes the result"
    elif v.expected_value is not None and v.actual_value is not None and v.worst_index is not None:
        at = describe_index(v.worst_index, v.kind)
        expected = f"{v.name} at {at}: {v.expected_value:.10g} (single process; within {tolerance})"
        actual = (
            f"{v.name} at {at}: {v.actual_value:.10g} (distributed; {diffs}; "
            f"{v.n_failing}/{v.n_total} elements out of tolerance)"
        )
        message = (
            f"{v.name}: {v.n_failing}/{v.n_total} elements out of tolerance, "
            f"max abs diff {_fmt(v.max_abs_diff)} ({tolerance})"
        )
    else:
        worst = "" if v.worst_index is None else f", worst at {describe_index(v.worst_index, v.kind)}"
        actual = f"{v.name} ({v.kind}): {diffs}; {v.n_failing}/{v.n_total} elements out of tolerance{worst}"
        message = (
            f"{v.name}: {v.n_failing}/{v.n_total} elements out of tolerance, "
            f"max abs diff {_fmt(v.max_abs_diff)} ({tolerance})"
        )
    return OutputFailure(output=v.name, message=message, expected=expected, actual=actual)


def output_failures(best: Attempt | None, meta: ReportMeta) -> list[OutputFailure]:
    """One `output_failure` per failing output of attempt `best`, in the attempt's output order
    (empty when `best` is None or every output passed)."""
    if best is None:
        return []
    failures = [output_failure(v, meta) for v in best.verdicts.values() if not v.passed]
    op = best.layer_divergence.first_op if best.layer_divergence is not None else None
    if op is not None and op.file and op.line:
        for f in failures:
            f.location = Frame(file=op.file, line=op.line, function=op.function)
    return failures


def fixed_pass_message(fix: str, target: TargetInfo | None) -> str:
    """The one-line failure of a validation that passed only after auto-fix (`fix`, the fixed attempt's
    rationale): which spec still fails (`target.spec_words()`) and where to save the fix (the target's
    `spec_path`, which the next run reads)."""
    started = (target.spec_words() if target is not None else None) or "the spec as given"
    where = target.spec_path if target is not None else None
    save = f"save the fixed spec to {where}" if where else "save the fixed spec to the target's spec file"
    text = f"Passed only after auto-fix ({fix}); the spec it started from, {started}, still fails: "
    text += f"{save} and run again."
    return " ".join(text.split())
