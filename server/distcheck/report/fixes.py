"""What distcheck changed in the spec it was given, and the fixes it chose not to try: `SpecFix` and
`SkippedFix`, the records `Attempt.fixes` and `Attempt.skipped_fixes` hold.

A fix is any change distcheck makes to what the user or the wrapper declared (or to what follows from
it, like the halo `num_interactions × cutoff` gives), before the first run or by an auto-fix rule.
Inference filling in what nobody declared is not one. `document.report_state` reads `Attempt.fixes`:
a pass whose attempt carries one is "passed_after_fix". This module never imports torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .codec import Record

__all__ = ["PRE_RUN_RULE", "SkippedFix", "SpecFix"]

PRE_RUN_RULE = "measured_receptive_field"
"""`SpecFix.rule` of the fix made before the first run: a `local` halo widened to the receptive field
measured in the reference when the declared depth does not cover it."""


@dataclass(eq=False)
class SpecFix(Record):
    """One change from the spec as given (the wrapper's or the prior, with what inference filled in) to
    the attempt's spec, in the form `distcheck.spec.edit.spec_changes` gives and `apply_changes` takes:
    `op` ("set", "append", "remove", "delete"), `path` (the keys down to the value) and `value` (None
    for "delete"). `rule` names what made it: `PRE_RUN_RULE` or an auto-fix rule (`autofix.RULES`)."""

    rule: str
    op: str
    path: list[str]
    value: Any = None

    def edit(self) -> dict[str, Any]:
        """The change as `spec.edit.spec_changes` writes it (`{"op", "path", "value"}`)."""
        out: dict[str, Any] = {"op": self.op, "path": list(self.path)}
        if self.op != "delete":
            out["value"] = self.value
        return out


@dataclass(eq=False)
class SkippedFix(Record):
    """A fix distcheck found evidence for but did not try: `rule` names it, `reason` says why (a halo
    that would leave some rank holding a whole system, so the attempt could prove nothing) and what
    would let it run. `halo_width` (Å) is the halo the fix would have needed, None when none."""

    rule: str
    reason: str
    halo_width: float | None = dataclasses.field(default=None)
