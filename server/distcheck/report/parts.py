"""Typed records of the report's open parts: `partition_health`, `halo_completeness`, `layer_divergence`
(per attempt), `meta` and `target` (per report).

On the wire and in `Attempt` / `TraceReport` these stay free-form dicts (their producers in `validate/`
and `jobs/` add keys over time, and a report may carry keys an older distcheck did not know). These
records state their usual keys and types once: the JSON Schema documents each part with them (open:
other keys allowed), and `view` reads a part typed, so a consumer never guesses a key's name or type
(the renderer reads its parts through them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .codec import Record, decode, slots, wire
from .values import _enc_free

__all__ = [
    "DivergentLayer",
    "FactoryInfo",
    "HaloCompleteness",
    "LayerDivergence",
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
    """`part` (a free-form report dict, or None) read as the open record `cls`: each usual key that is
    present with the right type is read, every other key is left out, anything missing or mistyped
    takes the field's default. Never raises on a well-formed report."""
    kwargs: dict[str, Any] = {}
    if isinstance(part, Mapping):
        try:
            data = _enc_free(part, ())
        except TypeError:
            data = {}
        for s in slots(cls):
            if s.key in data:
                try:
                    kwargs[s.name] = decode(data[s.key], s.tp, (s.key,), s.enum)
                except ValueError:
                    pass
    return cls(**kwargs)


class _Open(Record):
    """A record of an open part: every field optional, other keys allowed (the schema says so)."""

    _open: ClassVar[bool] = True


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
class LayerDivergence(_Open):
    """`Attempt.layer_divergence` (None when the layer diagnostic did not run): the `first_divergent`
    module (None: none diverged), how many module calls were `checked`, and the largest relative
    difference among them (`max_rel_diff`)."""

    first_divergent: DivergentLayer | None = None
    checked: int = 0
    max_rel_diff: float | None = None


@dataclass(eq=False)
class FactoryInfo(_Open):
    """Where the validated factory is defined: `file`, 1-based `line`, `qualname`."""

    file: str | None = None
    line: int | None = None
    qualname: str | None = None


@dataclass(eq=False)
class TargetInfo(_Open):
    """`TraceReport.target` (None when not recorded): the target's `name`, its `factory` and `sample`
    with their source lines, the `spec_path` and the `config` file it came from."""

    name: str | None = None
    factory: FactoryInfo | None = None
    sample: dict[str, Any] | None = None
    spec_path: str | None = None
    config: str | None = None


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
