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

They follow `distcheck.report`'s JSON promises (lossless round trip, strict reading naming the JSON
path, equality by JSON form); `report.py` reads and writes them as fields of `Attempt` and
`TraceReport`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .report import (
    _bad,
    _dec_bool,
    _dec_float,
    _dec_int,
    _dec_list,
    _dec_opt_float,
    _dec_opt_int,
    _dec_str,
    _dec_str_map,
    _enc_float,
    _enc_opt_float,
    _fields,
    _get_str,
    _PathT,
    _Record,
)

__all__ = [
    "RECEPTIVE_STATUSES",
    "ROUNDOFF_STATUSES",
    "SAMPLE_WARNINGS",
    "SYSTEM_PROBLEMS",
    "ReceptiveField",
    "RoundoffFloor",
    "SampleWarning",
    "SuspiciousOutput",
    "SystemHealth",
]

ROUNDOFF_STATUSES: tuple[str, ...] = ("measured", "not_needed", "unavailable")
"""`RoundoffFloor.status`: a control run measured it; no attempt's error was high enough to need it
(the dtype's epsilon bounds it from below, and every error was within `threshold` of that); the
control run could not be made (its error is in `note`)."""

RECEPTIVE_STATUSES: tuple[str, ...] = ("measured", "unbounded", "not_measured")
"""`ReceptiveField.status`: a depth was measured; every probed atom's perturbation moved every atom
of its system (a per-system quantity feeds back into each atom, or the field spans the system), so
no depth can be read off; not measured (why in `note`)."""

SYSTEM_PROBLEMS: tuple[str, ...] = ("no_owned", "no_halo", "no_remote")
"""`SystemHealth.problem`: the rank owns no atom of the system, holds no halo atom of it, or holds
all of it (no remote atom: that system never crosses a domain boundary on that rank)."""

SAMPLE_WARNINGS: tuple[str, ...] = ("zero_forces", "no_cell")
"""`SampleWarning.kind`: the reference forces are ~0 (an unrattled lattice), or a system has no cell
(an open system, e.g. an .xyz without a `Lattice=`)."""


def _check(value: str, allowed: tuple[str, ...], path: _PathT) -> str:
    if value not in allowed:
        raise _bad(path, f"expected one of {', '.join(allowed)}, got {value!r}")
    return value


@dataclass(eq=False)
class SuspiciousOutput(_Record):
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

    def to_dict(self) -> dict[str, Any]:
        """Every field; non-finite numbers as strings."""
        return {
            "name": self.name,
            "kind": self.kind,
            "max_abs_diff": _enc_float(self.max_abs_diff),
            "floor": _enc_float(self.floor),
            "ratio": _enc_float(self.ratio),
            "threshold": _enc_float(self.threshold),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SuspiciousOutput:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> SuspiciousOutput:
        m = _fields(d, path, ("name", "kind", "max_abs_diff", "floor", "ratio", "threshold"))
        return cls(
            name=_get_str(m, "name", path),
            kind=_get_str(m, "kind", path),
            max_abs_diff=_dec_float(m["max_abs_diff"], (*path, "max_abs_diff")),
            floor=_dec_float(m["floor"], (*path, "floor")),
            ratio=_dec_float(m["ratio"], (*path, "ratio")),
            threshold=_dec_float(m["threshold"], (*path, "threshold")),
        )


@dataclass(eq=False)
class RoundoffFloor(_Record):
    """The comparison's round-off floor for this model, sample and world size.

    `status` is one of `ROUNDOFF_STATUSES`. `floors[name]` is the floor each output's error is judged
    against: the control run's largest difference from the reference, but never below the dtype's
    epsilon times the output's largest magnitude. `control_abs_diff[name]` is the control's own
    difference (None when not measured). `threshold` is the ratio above which an error within
    tolerance is suspicious; `seconds` the control run's wall time; `note` says how it was obtained
    or why not.
    """

    status: str
    floors: dict[str, float]
    control_abs_diff: dict[str, float | None]
    threshold: float
    seconds: float = 0.0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Every field; non-finite numbers as strings."""
        return {
            "status": self.status,
            "floors": {k: _enc_float(v) for k, v in self.floors.items()},
            "control_abs_diff": {k: _enc_opt_float(v) for k, v in self.control_abs_diff.items()},
            "threshold": _enc_float(self.threshold),
            "seconds": _enc_float(self.seconds),
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundoffFloor:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> RoundoffFloor:
        m = _fields(d, path, ("status", "floors", "control_abs_diff", "threshold"), ("seconds", "note"))
        return cls(
            status=_check(_get_str(m, "status", path), ROUNDOFF_STATUSES, (*path, "status")),
            floors=_dec_str_map(m["floors"], (*path, "floors"), _dec_float),
            control_abs_diff=_dec_str_map(m["control_abs_diff"], (*path, "control_abs_diff"), _dec_opt_float),
            threshold=_dec_float(m["threshold"], (*path, "threshold")),
            seconds=_dec_float(m.get("seconds", 0.0), (*path, "seconds")),
            note=_dec_str(m.get("note", ""), (*path, "note")),
        )


@dataclass(eq=False)
class ReceptiveField(_Record):
    """The model's receptive field as measured in the single-process reference.

    `status` is one of `RECEPTIVE_STATUSES`. `cutoff` (Å) is the neighbour cutoff the hops are
    counted with, `declared_depth` the wrapper's `num_interactions` (None: not declared, 1 assumed),
    `declared_field = cutoff × declared depth`. `measured_depth` is the number of cutoff hops over which
    a perturbed atom moved another atom's per-atom quantity (`basis` names which), and
    `measured_field = cutoff × measured_depth` (Å); both None unless measured. `probes` atoms were
    perturbed. `under_declared` is True when the measured depth exceeds the declared one;
    `halo_width_set` is the halo (Å) the validator set from the measured field before the first run
    (None: left as it was). `note` explains. `lower_bound` is True when some per-atom quantity moved
    every atom of its system (a per-system quantity feeds back), so the measured depth is only a lower
    bound on the real one.
    """

    status: str
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

    def to_dict(self) -> dict[str, Any]:
        """Every field; non-finite numbers as strings."""
        return {
            "status": self.status,
            "lower_bound": bool(self.lower_bound),
            "cutoff": _enc_opt_float(self.cutoff),
            "declared_depth": self.declared_depth,
            "declared_field": _enc_opt_float(self.declared_field),
            "measured_depth": self.measured_depth,
            "measured_field": _enc_opt_float(self.measured_field),
            "basis": self.basis,
            "probes": int(self.probes),
            "under_declared": bool(self.under_declared),
            "halo_width_set": _enc_opt_float(self.halo_width_set),
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReceptiveField:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> ReceptiveField:
        required = ("status", "cutoff", "declared_depth", "declared_field", "measured_depth", "measured_field")
        optional = ("halo_width_set", "note", "lower_bound")
        m = _fields(d, path, (*required, "basis", "probes", "under_declared"), optional)
        return cls(
            status=_check(_get_str(m, "status", path), RECEPTIVE_STATUSES, (*path, "status")),
            cutoff=_dec_opt_float(m["cutoff"], (*path, "cutoff")),
            declared_depth=_dec_opt_int(m["declared_depth"], (*path, "declared_depth")),
            declared_field=_dec_opt_float(m["declared_field"], (*path, "declared_field")),
            measured_depth=_dec_opt_int(m["measured_depth"], (*path, "measured_depth")),
            measured_field=_dec_opt_float(m["measured_field"], (*path, "measured_field")),
            basis=_get_str(m, "basis", path),
            probes=_dec_int(m["probes"], (*path, "probes")),
            under_declared=_dec_bool(m["under_declared"], (*path, "under_declared")),
            halo_width_set=_dec_opt_float(m.get("halo_width_set"), (*path, "halo_width_set")),
            note=_dec_str(m.get("note", ""), (*path, "note")),
            lower_bound=_dec_bool(m.get("lower_bound", False), (*path, "lower_bound")),
        )


@dataclass(eq=False)
class SystemHealth(_Record):
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
    problem: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        """Every field."""
        return {
            "system": int(self.system),
            "atoms": int(self.atoms),
            "rank": int(self.rank),
            "owned": int(self.owned),
            "halo": int(self.halo),
            "remote": int(self.remote),
            "problem": self.problem,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SystemHealth:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> SystemHealth:
        names = ("system", "atoms", "rank", "owned", "halo", "remote")
        m = _fields(d, path, (*names, "problem", "message"))
        ints = {n: _dec_int(m[n], (*path, n)) for n in names}
        return cls(
            **ints,
            problem=_check(_get_str(m, "problem", path), SYSTEM_PROBLEMS, (*path, "problem")),
            message=_get_str(m, "message", path),
        )


@dataclass(eq=False)
class SampleWarning(_Record):
    """The sample allows only a weaker check: `kind` is one of `SAMPLE_WARNINGS`.

    `systems` are the systems concerned, `outputs` the outputs (the forces for `zero_forces`),
    `message` says what was seen and how the check is weaker, `remedy` what to do.
    """

    kind: str
    message: str
    remedy: str
    systems: list[int] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Every field."""
        return {
            "kind": self.kind,
            "message": self.message,
            "remedy": self.remedy,
            "systems": [int(s) for s in self.systems],
            "outputs": list(self.outputs),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SampleWarning:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> SampleWarning:
        m = _fields(d, path, ("kind", "message", "remedy"), ("systems", "outputs"))
        return cls(
            kind=_check(_get_str(m, "kind", path), SAMPLE_WARNINGS, (*path, "kind")),
            message=_get_str(m, "message", path),
            remedy=_get_str(m, "remedy", path),
            systems=_dec_list(m.get("systems", []), (*path, "systems"), _dec_int),
            outputs=_dec_list(m.get("outputs", []), (*path, "outputs"), _dec_str),
        )


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
    if f.lower_bound:
        measured += ", a lower bound (a per-system quantity feeds back into every atom)"
    line = f"receptive field: declared {declared}, measured {measured}"
    if f.under_declared:
        line += "; UNDER-DECLARED"
        if f.halo_width_set is not None:
            line += f", halo_width set to {f.halo_width_set:.4g} Å before the first run"
    return line
