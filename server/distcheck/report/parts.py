"""Typed records of the report's open parts: `partition_health`, `halo_completeness`, `layer_divergence`
(per attempt), `meta` and `target` (per report); `view` reads a free-form dict as one of them.

Like every record, a part reads as a read-only mapping of its JSON keys (`attempt.partition_health[
"degenerate"]`, `report.meta.get("timings")`; `codec.Record.keys`), its `extra` keys included.

An open part may carry keys an older or newer distcheck wrote that these records do not name: reading
keeps them in the record's `extra` (as does a usual key whose value has the wrong type: the field then
takes its default) and writing puts them back, so a report survives a round trip unchanged. The JSON
Schema documents each part with these records (open: other keys allowed); a consumer reads the
attributes and never guesses a key's name or type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .codec import Record, decode, slots, wire
from .ops import DivergentOp
from .values import _bad, _dec_free, _enc_free, _kind_of, _PathT

__all__ = [
    "FILE_SPEC_RULES",
    "DivergentLayer",
    "FactoryInfo",
    "HaloCompleteness",
    "LayerDivergence",
    "ModuleDiff",
    "OutputProblem",
    "PartitionHealth",
    "RankCounts",
    "ReportMeta",
    "TargetInfo",
    "WrapperInfo",
    "view",
]

_P = TypeVar("_P", bound=Record)


def view(cls: type[_P], part: Mapping[str, Any] | None) -> _P:
    """`part` (a free-form report dict, or None) read as the open record `cls` (see `_Open._read`:
    a usual key with the right type is read, anything else is kept in `extra`, anything missing takes
    the field's default). Never raises on a well-formed report."""
    if not isinstance(part, Mapping):
        return cls()
    try:
        return cls._read(_enc_free(part, ()), ())
    except (TypeError, ValueError):
        return cls()


_O = TypeVar("_O", bound="_Open")


@dataclass(eq=False)
class _Open(Record):
    """A record of an open part: every field optional, other keys allowed (the schema says so) and kept
    in `extra` (keyword-only, not a wire key of its own: its entries are written beside the fields)."""

    _open: ClassVar[bool] = True
    _empty_when_default: ClassVar[bool] = False
    """Written as `{}` when every field has its default and `extra` is empty (a part "not checked")."""
    _omit_none: ClassVar[bool] = False
    """A field holding None is not written (a part whose keys are each recorded only when known)."""

    extra: dict[str, Any] = dataclasses.field(default_factory=dict, kw_only=True, repr=False, metadata={"extra": True})

    @classmethod
    def _read(cls: type[_O], d: object, path: _PathT) -> _O:
        if not isinstance(d, Mapping):
            raise _bad(path, f"expected an object, got {_kind_of(d)}")
        by_key = {s.key: s for s in slots(cls)}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in d.items():
            s = by_key.get(key)
            if s is not None:
                try:
                    kwargs[s.name] = decode(value, s.tp, (*path, key), s.enum)
                    continue
                except ValueError:
                    pass  # kept as it is in `extra`, so writing the record back loses nothing
            extra[str(key)] = _dec_free(value, (*path, key), int_keys=key == "per_rank")
        return cls(**kwargs, extra=extra)

    def _encode(self, path: _PathT) -> dict[str, Any]:
        if self._empty_when_default and not self.extra and self.is_default():
            return {}
        out = super()._encode(path)
        if self._omit_none:
            out = {s.key: out[s.key] for s in slots(type(self)) if getattr(self, s.name) is not None}
        for key, value in self.extra.items():
            out[key] = _enc_free(value, (*path, key), int_keys=key == "per_rank")
        return out

    def _present(self) -> list[str]:
        if self._empty_when_default and not self.extra and self.is_default():
            return []
        keys = super()._present()
        if self._omit_none:
            keys = [s.key for s in slots(type(self)) if s.key in keys and getattr(self, s.name) is not None]
        return keys + [key for key in self.extra if key not in keys]

    def _value_of(self, key: str) -> Any:
        return self.extra[key] if key in self.extra else super()._value_of(key)

    def is_default(self) -> bool:
        """Does every field hold its default (nothing recorded)?"""
        return all(getattr(self, s.name) == s.default() for s in slots(type(self)))


@dataclass(eq=False)
class RankCounts(_Open):
    """One rank's atoms: `owned`, `halo` (copies of other ranks' atoms it holds) and `remote` (atoms of
    its systems it does not hold)."""

    owned: int = 0
    halo: int = 0
    remote: int = 0


@dataclass(eq=False)
class PartitionHealth(_Open):
    """`Attempt.partition_health`: `per_rank` atom counts (rank keys as decimal strings in JSON) and the
    `degenerate` messages, one per reason the partition cannot test distribution (empty when healthy)."""

    per_rank: dict[int, RankCounts] = dataclasses.field(default_factory=dict)
    degenerate: list[str] = dataclasses.field(default_factory=list)


@dataclass(eq=False)
class HaloCompleteness(_Open):
    """`Attempt.halo_completeness` ({} when not checked): whether the halo `matches` what the spec's
    scatter mode needs, the `halo_width` used and the `required_width` (Å; None when no bound is known),
    and the `interpretation` in words."""

    _empty_when_default = True

    matches: bool | None = None
    halo_width: float | None = None
    required_width: float | None = None
    interpretation: str = ""


@dataclass(eq=False)
class DivergentLayer(_Open):
    """The first sub-module whose rank-summed output differs from the reference: its `module` name,
    class (`cls`, JSON `class`), call `key`, `rel_diff`, and a few leading values of the ranks' sum
    (`ranks_sum`) and of the reference (`ref_sum`)."""

    module: str = ""
    cls: str = dataclasses.field(default="", metadata=wire(key="class"))
    key: str = ""
    rel_diff: float | None = None
    ranks_sum: list[float] = dataclasses.field(default_factory=list)
    ref_sum: list[float] = dataclasses.field(default_factory=list)


@dataclass(eq=False)
class ModuleDiff(_Open):
    """One compared module call of the layer diagnostic: the `module` name, its call `key` and the
    relative difference (`rel_diff`) of the ranks' (summed) output from the reference's."""

    module: str = ""
    key: str = ""
    rel_diff: float | None = None


@dataclass(eq=False)
class LayerDivergence(_Open):
    """`Attempt.layer_divergence` (None when the layer diagnostic did not run): the `first_divergent`
    module (None: none diverged), how many module calls were `checked`, the largest relative
    difference among them (`max_rel_diff`) and each compared call's difference in reference call
    order (`modules`, at most `MAX_MODULE_DIFFS`: the panel's per-module chart). `first_op` is the
    first torch operation whose value departs from the reference (`ops.DivergentOp`: its file:line;
    None when none does or the attempt passed; absent in older reports).
    """

    first_divergent: DivergentLayer | None = None
    checked: int = 0
    max_rel_diff: float | None = None
    modules: list[ModuleDiff] = dataclasses.field(default_factory=list, metadata=wire(omit_empty=True))
    first_op: DivergentOp | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))


MAX_MODULE_DIFFS = 64
"""At most this many `LayerDivergence.modules`: the first ones in call order (a deep model calls
thousands of modules; the chart shows where the difference starts)."""


@dataclass(eq=False)
class FactoryInfo(_Open):
    """Where the validated factory is defined: `file`, 1-based `line`, `qualname`."""

    file: str | None = None
    line: int | None = None
    qualname: str | None = None


FILE_SPEC_RULES: tuple[str, ...] = ("explicit", "pyproject", "beside-model")
"""The `TargetInfo.spec_rule` values under which the validation started from the file `spec_path` (the
rule, and its fourth value `wrapper`, are `distcheck.jobs.spec_source`'s)."""


@dataclass(eq=False)
class TargetInfo(_Open):
    """`TraceReport.target` (None when not recorded): the target's `name`, its `factory` and `sample`
    with their source lines, the `spec_path` and the `config` file it came from.

    `spec_rule` says which rule of the one spec-resolution rule (`distcheck.jobs.spec_source`) chose the
    spec: `explicit`, `pyproject` or `beside-model` (the validation started from the file `spec_path`),
    or `wrapper` (from the wrapper's own `distribution_spec`; `spec_path`, when set, is where a fix is
    saved). None in reports written before the rule was recorded."""

    _omit_none = True

    name: str | None = None
    factory: FactoryInfo | None = None
    sample: dict[str, Any] | None = None
    spec_path: str | None = None
    spec_rule: str | None = None
    config: str | None = None

    @property
    def spec_read(self) -> bool:
        """Whether the validation started from the file `spec_path` (else from the wrapper's own spec)."""
        return self.spec_path is not None and self.spec_rule in FILE_SPEC_RULES

    def spec_words(self) -> str | None:
        """Which spec the validation started from, as the report's `spec:` line and the fixed-pass
        failure say it: `PATH (rule)`, or the wrapper's own; None when `spec_rule` was not recorded."""
        if self.spec_rule is None:
            return None
        return f"{self.spec_path} ({self.spec_rule})" if self.spec_read else "the wrapper's distribution_spec (wrapper)"


@dataclass(eq=False)
class WrapperInfo(_Open):
    """What the reference run learned about the wrapper: its `class`, `file` and `line`, the neighbour
    `cutoff` (Å), `num_interactions`, its `output_kinds` and the `distribution_spec` it declares."""

    cls: str | None = dataclasses.field(default=None, metadata=wire(key="class"))
    file: str | None = None
    line: int | None = None
    cutoff: float | None = None
    num_interactions: int | None = None
    output_kinds: dict[str, str] | None = None
    distribution_spec: Any = None


@dataclass(eq=False)
class OutputProblem(_Open):
    """One output that could not be compared: the `output`, the `rank` (None: the reference), the
    `problem` and the `message` saying what to do."""

    output: str | None = None
    rank: int | None = None
    problem: str | None = None
    message: str | None = None


@dataclass(eq=False)
class ReportMeta(_Open):
    """`TraceReport.meta`: how the validation ran (the options, devices, versions, timings and what the
    reference run learned).

    `world_size`, `device` (one device, or a list when the ranks differ) and `devices`, `backend`,
    the tolerances `atol` / `rtol` (a number, or a dict per output name or kind with an optional
    `"default"`), the other validator options, the `factory` reference, the sample's `num_atoms` /
    `num_systems`, `versions`, `harness` (cpu / gpu), `launcher` (local / torchrun; with torchrun the
    `hosts` and the rank `placement`), the project `root` that picks the traceback frame to show,
    `timings` (seconds per phase), the `wrapper` facts, the `inference_notes`, the watched and skipped
    helper packages, the `output_problems` and the reference's non-finite counts per output.
    """

    _omit_none = True

    world_size: int | None = None
    device: Any = None
    devices: list[str] | None = None
    backend: str | None = None
    atol: Any = None
    rtol: Any = None
    auto_fix: bool | None = None
    max_fix_attempts: int | None = None
    timeout_sec: float | None = None
    deadline_sec: float | None = None
    watched_helper_packages: list[str] | None = None
    skipped_helper_packages: list[str] | None = None
    helper_sample_every: int | None = None
    layer_diagnostic: bool | None = None
    factory: str | None = None
    num_atoms: int | None = None
    num_systems: int | None = None
    versions: dict[str, str] | None = None
    harness: str | None = None
    launcher: str | None = None
    hosts: list[str] | None = None
    placement: list[str] | None = None
    root: str | None = None
    timings: dict[str, float] | None = None
    wrapper: WrapperInfo | None = None
    inference_notes: list[str] | None = None
    output_problems: list[OutputProblem] | None = None
    reference_nonfinite: dict[str, Any] | None = None
