"""What the pipeline changed in the spec it was given: the first attempt's spec (`initial_spec`) and
each attempt's fixes (`FixLedger`).

The spec as given is the wrapper's `distribution_spec` or the prior, with what inference filled in:
inference only fills in what nobody declared, so none of that is a fix. Every change from it is:
the halo widened before the first run when the measured receptive field is deeper than the declared
`num_interactions` (`report.fixes.PRE_RUN_RULE`; not made, and recorded as a `SkippedFix`, when that
halo would leave a rank holding a whole system), and each auto-fix rule's mutation. Each attempt's
`fixes` are the changes from the spec as given to its spec, each named by the rule that made it
(`report.SpecFix`); `report.document.report_state` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..report import Attempt, ReceptiveField
from ..report.fixes import PRE_RUN_RULE, SkippedFix, SpecFix
from ..runtime.model import DEFAULT_SKIN
from ..spec import MLIPSpec
from ..spec.edit import spec_changes
from .halo_bounds import degenerate_halo
from .inference import infer_spec
from .receptive import apply_measured_field, receptive_record
from .run_setup import RunSetup

__all__ = ["FirstSpec", "FixLedger", "initial_spec"]


@dataclass
class FirstSpec:
    """The first attempt's spec and what it came from: `given` (the spec as given), the inference
    notes, the rationale, the receptive field, the rule that changed `given` before the first run
    (None: unchanged) and the fixes skipped there."""

    spec: MLIPSpec
    given: MLIPSpec
    notes: list[str]
    rationale: str
    receptive: ReceptiveField | None
    rule: str | None
    skipped: list[SkippedFix]


def initial_spec(reference: dict[str, Any], s: RunSetup, prior: Any) -> FirstSpec:
    """The first attempt's spec from what `reference` holds (with or without the receptive-field
    measurement: inference reads the measured depth, and an under-declared one widens a `local` halo
    before any rank runs: a fix, `PRE_RUN_RULE`, not made when that halo would leave some rank holding
    a whole system)."""
    given, notes = infer_spec(reference, s.batch.num_atoms, s.batch.num_systems, prior)
    rationale = "spec from the wrapper's distribution_spec and the reference trace"
    receptive = receptive_record(reference)
    spec, field_note = apply_measured_field(given, receptive)
    if not field_note or receptive is None:
        return FirstSpec(given, given, notes, rationale, receptive, None, [])
    width = spec.distribution.policy.halo_width
    declared = None if receptive.declared_field is None else receptive.declared_field + DEFAULT_SKIN
    reason = degenerate_halo(s.batch, s.world_size, width, declared)
    if reason is not None:
        receptive.halo_width_set = None
        skip = SkippedFix(
            rule=PRE_RUN_RULE,
            reason=f"the halo was not widened to the measured receptive field before the first run: {reason}",
            halo_width=width,
        )
        return FirstSpec(given, given, notes, rationale, receptive, None, [skip])
    notes.append(field_note)
    return FirstSpec(spec, given, notes, f"{rationale}; {field_note}", receptive, PRE_RUN_RULE, [])


def _key(change: Mapping[str, Any]) -> str:
    """What identifies one spec change across attempts: its path, and an array item's value."""
    path = ".".join(str(p) for p in change.get("path") or [])
    return path if change.get("op") in ("set", "delete") else f"{path}+{change.get('value')!r}"


@dataclass
class FixLedger:
    """Which rule made each change from `given` (the spec as given): `made_by` for the next attempt's
    spec, `rules_of` for every attempt recorded, and `skipped`, the fixes skipped before the next one."""

    given: MLIPSpec
    made_by: dict[str, str] = field(default_factory=dict)
    rules_of: dict[int, dict[str, str]] = field(default_factory=dict)
    skipped: list[SkippedFix] = field(default_factory=list)

    @classmethod
    def start(cls, first: FirstSpec) -> FixLedger:
        """The ledger of a validation whose first attempt runs `first.spec`."""
        ledger = cls(first.given, skipped=list(first.skipped))
        ledger.made_by = {_key(c): first.rule or PRE_RUN_RULE for c in ledger.changes(first.spec)}
        return ledger

    def changes(self, spec: MLIPSpec) -> list[dict[str, Any]]:
        """The changes from the spec as given to `spec` (`spec.edit.spec_changes`)."""
        return spec_changes(self.given.to_dict(), spec.to_dict())

    def stamp(self, attempt: Attempt) -> None:
        """Set `attempt.fixes` (each change from the spec as given, named by the rule that made it) and
        `attempt.skipped_fixes` (those skipped since the last attempt)."""
        attempt.fixes = [
            SpecFix(
                rule=self.made_by.get(_key(c), attempt.rule or PRE_RUN_RULE),
                op=str(c["op"]),
                path=[str(p) for p in c.get("path") or []],
                value=c.get("value"),
            )
            for c in self.changes(attempt.spec)
        ]
        attempt.skipped_fixes, self.skipped = self.skipped, []
        self.rules_of[attempt.index] = dict(self.made_by)

    def propose_from(self, base: Attempt, spec: MLIPSpec, rule: str) -> None:
        """The next attempt's spec is `spec`, `rule`'s mutation of attempt `base`'s (recorded): its
        changes keep the names they had in `base`, and what `rule` changed is named by it."""
        made_by = dict(self.rules_of.get(base.index, {}))
        for c in spec_changes(base.spec.to_dict(), spec.to_dict()):
            made_by[_key(c)] = rule
        self.made_by = made_by
