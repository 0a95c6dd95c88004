"""Report records of the checks that say how much a verdict can be trusted (no torch).

- `RoundoffFloor`: the comparison's own round-off floor, measured inside the validation by a control
  run under the `replicated` policy (every rank holds every atom, so its difference from the reference
  is round-off and reduction order only), per output.
- `SuspiciousOutput`: an output within atol/rtol whose error is far above that floor (an attempt
  with one does not pass).
- `ReceptiveField`: the receptive field measured in the single-process reference against the
  declared `cutoff × num_interactions`.
- `SystemHealth`: one system of a batch that a rank holds wholly, owns nothing of, or has no halo of.
- `SampleWarning`: a sample that allows only a weaker check (forces ~0, no cell).

They are `codec.Record`s like every report record (lossless round trip, strict reading naming the JSON
path, equality by JSON form); they are fields of `Attempt` and `TraceReport`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .codec import Record, wire

__all__ = [
    "FEEDBACK_HIDES_FIELD",
    "RECEPTIVE_REMEDIES",
    "RECEPTIVE_STATUSES",
    "ROUNDOFF_STATUSES",
    "SAMPLE_WARNINGS",
    "SYSTEM_PROBLEMS",
    "ReceptiveField",
    "RoundoffFloor",
    "SampleWarning",
    "SuspiciousOutput",
    "SystemHealth",
    "receptive_line",
    "receptive_remedy",
    "suspicious_line",
]

ROUNDOFF_STATUSES: tuple[str, ...] = ("measured", "not_needed", "unavailable")
"""`RoundoffFloor.status`: a control run measured it; no attempt's error was high enough to need it
(the dtype's epsilon bounds it from below, and every error was within `threshold` of that); the
control run could not be made (its error is in `note`)."""

RECEPTIVE_STATUSES: tuple[str, ...] = ("measured", "unbounded", "not_measured")
"""`ReceptiveField.status`: a depth was measured; every probed atom's perturbation moved every atom
of its system (a per-system quantity feeds back into each atom, or the field spans the system), so
no depth can be read off; not measured (why in `note`)."""

RECEPTIVE_REMEDIES: tuple[str, ...] = ("none", "depth", "cutoff")
"""`ReceptiveField.remedy`: the declared field covers what moved (or nothing was measured); the reach
is explained by more hops of the declared cutoff (raise `num_interactions`); the reach in Å is
explained only by a longer cutoff at the declared depth (raise `cutoff`)."""

SYSTEM_PROBLEMS: tuple[str, ...] = ("no_owned", "no_halo", "no_remote")
"""`SystemHealth.problem`: the rank owns no atom of the system, holds no halo atom of it, or holds
all of it (no remote atom: that system never crosses a domain boundary on that rank)."""

SAMPLE_WARNINGS: tuple[str, ...] = ("zero_forces", "no_cell")
"""`SampleWarning.kind`: the reference forces are ~0 (an unrattled lattice), or a system has no cell
(an open system, e.g. an .xyz without a `Lattice=`)."""


@dataclass(eq=False)
class SuspiciousOutput(Record):
    """An output of an attempt within atol/rtol whose error is `ratio` times the round-off floor.

    `max_abs_diff` is the attempt's largest difference from the reference, `floor` the round-off floor
    of that output (`RoundoffFloor.floors`), `ratio = max_abs_diff / floor`, `threshold` the ratio
    above which an output is suspicious.
    """

    name: str
    kind: str
    max_abs_diff: float
    floor: float
    ratio: float
    threshold: float


@dataclass(eq=False)
class RoundoffFloor(Record):
    """The comparison's round-off floor for this model, sample and world size.

    `status` is one of `ROUNDOFF_STATUSES`. `floors[name]` is the floor each output's error is judged
    against: the control run's largest difference from the reference, but never below the dtype's
    epsilon times the output's largest magnitude. `control_abs_diff[name]` is the control's own
    difference (None when not measured). `threshold` is the ratio above which an error within
    tolerance is suspicious; `seconds` the control run's wall time; `note` says how it was obtained
    or why not.
    """

    status: str = field(metadata=wire(enum=ROUNDOFF_STATUSES))
    floors: dict[str, float]
    control_abs_diff: dict[str, float | None]
    threshold: float
    seconds: float = 0.0
    note: str = ""


FEEDBACK_HIDES_FIELD = "a per-system quantity feeds back into every atom"
"""Why a measured receptive field is only a lower bound (`ReceptiveField.lower_bound`): the words every
message that says so uses."""


@dataclass(eq=False)
class ReceptiveField(Record):
    """The model's receptive field as measured in the single-process reference.

    `status` is one of `RECEPTIVE_STATUSES`. `cutoff` (Å) is the neighbour cutoff the hops are
    counted with, `declared_depth` the wrapper's `num_interactions` (None: not declared, 1 assumed),
    `declared_field = cutoff × declared depth`. `measured_depth` is the number of cutoff hops over which
    a perturbed atom moved another atom's per-atom quantity (`basis` names which), and
    `measured_field = cutoff × measured_depth` (Å); both None unless measured. `probes` atoms were
    perturbed. `under_declared` is True when the declared field does not cover what moved (the
    measured depth exceeds the declared one, or the reach in Å needs a longer cutoff);
    `halo_width_set` is the halo (Å) the validator set from the measured field before the first run
    (None: left as it was). `note` explains. `lower_bound` is True when some per-atom quantity moved
    every atom of its system (a per-system quantity feeds back), so the measured depth is only a lower
    bound on the real one. `reach_hops` is the farthest hop of the cutoff graph at which `basis` moved
    (above its noise floor), `reach_angstrom` the farthest distance (Å, minimum image) from a probe to
    an atom that moved; `noise_floor` the largest round-off floor a change had to exceed. `remedy` is
    one of `RECEPTIVE_REMEDIES`; `suggested_cutoff` (Å) the cutoff the `"cutoff"` remedy names
    (`validate.field_advice.field_remedy` writes the remedy's text).
    """

    status: str = field(metadata=wire(enum=RECEPTIVE_STATUSES))
    cutoff: float | None
    declared_depth: int | None
    declared_field: float | None
    measured_depth: int | None
    measured_field: float | None
    basis: str
    probes: int
    under_declared: bool
    halo_width_set: float | None = None
    note: str = ""
    lower_bound: bool = False
    reach_hops: int | None = None
    reach_angstrom: float | None = None
    noise_floor: float | None = None
    remedy: str = field(default="none", metadata=wire(enum=RECEPTIVE_REMEDIES))
    suggested_cutoff: float | None = None

    _placed = (("lower_bound", "status"),)


@dataclass(eq=False)
class SystemHealth(Record):
    """One system of the batch that one rank cannot test: `problem` is one of `SYSTEM_PROBLEMS`.

    `system` is its index, `atoms` its size, `rank` the rank, `owned`/`halo`/`remote` that rank's
    counts in that system, `message` the explanation with what to do.
    """

    system: int
    atoms: int
    rank: int
    owned: int
    halo: int
    remote: int
    problem: str = field(metadata=wire(enum=SYSTEM_PROBLEMS))
    message: str


@dataclass(eq=False)
class SampleWarning(Record):
    """The sample allows only a weaker check: `kind` is one of `SAMPLE_WARNINGS`.

    `systems` are the systems concerned, `outputs` the outputs (the forces for `zero_forces`),
    `message` says what was seen and how the check is weaker, `remedy` what to do.
    """

    kind: str = field(metadata=wire(enum=SAMPLE_WARNINGS))
    message: str
    remedy: str
    systems: list[int] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"


def suspicious_line(s: SuspiciousOutput) -> str:
    """One line: the output, its error, the floor and the ratio."""
    return (
        f"{s.name}: max abs {_num(s.max_abs_diff)} is {s.ratio:.3g}× the round-off floor {_num(s.floor)} "
        f"(threshold {s.threshold:g}×), though within atol/rtol"
    )


def receptive_line(f: ReceptiveField) -> str:
    """One line describing the measured receptive field against the declared one."""
    declared = (
        f"{f.declared_depth} × {_num(f.cutoff)} Å = {_num(f.declared_field)} Å"
        if f.declared_depth is not None
        else f"num_interactions not declared (1 × {_num(f.cutoff)} Å assumed)"
    )
    if f.status != "measured":
        return f"receptive field {f.status.replace('_', ' ')}: {f.note}"
    measured = f"{f.measured_depth} hop(s) × {_num(f.cutoff)} Å = {_num(f.measured_field)} Å (from {f.basis})"
    if f.remedy == "cutoff" and f.measured_field is not None:
        measured = (
            f"a reach of {_num(f.reach_angstrom)} Å ({f.reach_hops} hop(s) of the declared cutoff, from {f.basis}), "
            f"which a cutoff of {_num(f.measured_field / (f.declared_depth or 1))} Å explains, not more hops"
        )
    if f.lower_bound:
        measured += f", a lower bound ({FEEDBACK_HIDES_FIELD})"
    line = f"receptive field: declared {declared}, measured {measured}"
    if f.under_declared:
        line += "; UNDER-DECLARED"
        if f.halo_width_set is not None:
            line += f", halo_width set to {f.halo_width_set:.4g} Å before the first run"
    return line


def receptive_remedy(field: ReceptiveField) -> str | None:
    """The remedy for an under-declared receptive field (`validate.field_advice.field_remedy`, which
    promises the wording), or None."""
    if not field.under_declared:
        return None
    if field.remedy == "cutoff" and field.suggested_cutoff is not None:
        depth = field.declared_depth or 1
        return (
            f"set cutoff = {field.suggested_cutoff:g} on the wrapper, or the model's own cutoff if larger (the model "
            f"reads atoms up to {_num(field.reach_angstrom)} Å from a displaced one: {depth} interaction(s) of the "
            f"declared {_num(field.cutoff)} Å cutoff do not reach that far, and more interactions do not explain which "
            "atoms moved)"
        )
    if field.remedy == "depth" or (field.remedy == "none" and field.measured_depth is not None):
        return f"set num_interactions = {field.measured_depth} on the wrapper"
    return None
