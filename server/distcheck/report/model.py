"""The records of one attempt: frames and worker errors, output verdicts, helper findings, unrouted
aggregations, rank disagreements, rollbacks, crash traces, and `Attempt` itself.

Each is a `codec.Record`: its JSON form follows from its fields (see `distcheck.report.codec`), so the
writer, the strict reader and the JSON Schema cannot disagree. This module never imports torch.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distcheck.spec import MLIPSpec

from .atoms import AtomErrors
from .checks import SuspiciousOutput, SystemHealth
from .codec import Record, wire
from .fixes import SkippedFix, SpecFix
from .kernels import KernelCall
from .ops import DivergentOp
from .parts import HaloCompleteness, LayerDivergence, PartitionHealth, view

__all__ = [
    "UNROUTED_AGGREGATIONS",
    "UNROUTED_ORIGINS",
    "VERDICT_STATUSES",
    "Attempt",
    "CrashTrace",
    "DivergentModule",
    "Frame",
    "HelperDiagnosis",
    "OutputVerdict",
    "RankDisagreement",
    "Rollback",
    "UnroutedOp",
    "WorkerError",
    "merge_unrouted",
]

VERDICT_STATUSES: tuple[str, ...] = ("ok", "mismatch", "missing", "shape", "nonfinite", "suspicious")
"""`OutputVerdict.status` values: within tolerance, out of tolerance, absent from the distributed
outputs, wrong shape, non-finite values where the reference is finite, within tolerance but far
above the round-off floor (`checks.SuspiciousOutput`; not passed)."""


@dataclass(eq=False)
class Frame(Record):
    """One traceback frame: `file` (path as the worker saw it), 1-based `line`, `function` name."""

    file: str
    line: int
    function: str


@dataclass(eq=False)
class WorkerError(Record):
    """An exception raised in the reference process or a rank, translated for the user.

    `type` is the exception class name, `message` its text, `rank` the rank it came from (None for the
    reference run or the parent), `phase` when it happened (e.g. "setup", "forward", "backward",
    "consolidate"). `frames` are ordered outermost first, as Python prints them; `hint` is the translated,
    actionable explanation (what went wrong in distcheck's terms and what to change); `traceback` is the
    raw formatted traceback, kept for the curious. `user_frame` is the user's line, found where the
    error happened by `distcheck.runtime.frames` (a SyntaxError's own location, else the innermost frame
    in the user's code); None when no frame is the user's. Readers place the error there, never guess.
    """

    type: str
    message: str
    rank: int | None
    phase: str
    frames: list[Frame]
    hint: str
    traceback: str = ""
    user_frame: Frame | None = None

    def innermost_in(self, root: str | os.PathLike[str]) -> Frame | None:
        """The innermost frame whose file lies under the directory `root` (or is `root`), or None.

        Paths are compared after `abspath` + `normpath` (+ `normcase`), without touching the filesystem
        beyond the current directory, so relative frame paths are taken relative to the current directory.
        """
        base = _norm(os.fspath(root))
        prefix = base if base.endswith(os.sep) else base + os.sep
        for frame in reversed(self.frames):
            path = _norm(frame.file)
            if path == base or path.startswith(prefix):
                return frame
        return None

    @property
    def innermost(self) -> Frame | None:
        """The innermost frame of all (the last one), or None when there are no frames."""
        return self.frames[-1] if self.frames else None


def _norm(path: str) -> str:
    return os.path.normcase(os.path.normpath(os.path.abspath(path)))


_AGGREGATION_WORDS = {
    "per_atom_to_per_system": "atoms → systems",
    "per_edge_to_per_atom": "edges → atoms",
    "per_edge_to_per_system": "edges → systems",
    "per_atom_total": "total over atoms",
}
UNROUTED_AGGREGATIONS: tuple[str, ...] = tuple(_AGGREGATION_WORDS)
"""`UnroutedOp.aggregation` values: atoms into systems (by the system index, a count, a segment), edges
into atoms (`halo_correction` only: under `local` an edge aggregation needs no correction), edges
into systems, and a total over every atom of the batch."""

UNROUTED_ORIGINS: tuple[str, ...] = ("torchscript", "custom_op", "native", "python")
"""`UnroutedOp.origin` values: inside a TorchScript function or module (the `distribution.torchscript:
"eager"` remedy makes the handlers see it), inside an undeclared `torch.ops` kernel (declare it in
`custom_ops`), below Python with no script found at the call site (C++, serialized TorchScript), or a
Python-level call in a form no handler covers."""


@dataclass(eq=False)
class UnroutedOp(Record):
    """An aggregation a rank ran that no handler routed, so its result is this rank's partial.

    `op` is the operation (`"aten.index_add"`, `"scatter_reduce(prod)"`), `aggregation` one of
    `UNROUTED_AGGREGATIONS`, `origin` one of `UNROUTED_ORIGINS`, `count` how often it ran (summed over
    `ranks` in an attempt). `file`/`line` locate the op itself (the line of a scripted function, read
    from the TorchScript graph's source range, or the Python line), `function` names the function
    holding it; `call_file`/`call_line` are the Python line that called into TorchScript (None when the
    op is itself at a Python line). Any location may be None when it could not be found. `kernel`
    (origin `"custom_op"`, the kernel named `ns::op` at the user's call line) holds the rows of what
    it was given and returned and the ready `custom_ops` entry (`kernels.KernelCall`); absent otherwise.
    """

    op: str
    aggregation: str = dataclasses.field(metadata=wire(enum=UNROUTED_AGGREGATIONS))
    origin: str = dataclasses.field(metadata=wire(enum=UNROUTED_ORIGINS))
    count: int
    file: str | None = None
    line: int | None = None
    function: str | None = None
    call_file: str | None = None
    call_line: int | None = None
    ranks: list[int] = dataclasses.field(default_factory=list)
    kernel: KernelCall | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))

    _derived = ("location",)

    @property
    def location(self) -> str:
        """`file:line` of the op (else of its call site), or `"unknown location"`."""
        if self.file is not None:
            return f"{self.file}:{self.line if self.line is not None else '?'}"
        if self.call_file is not None:
            return f"{self.call_file}:{self.call_line if self.call_line is not None else '?'}"
        return "unknown location"

    @property
    def aggregation_words(self) -> str:
        """`aggregation` as a message names it (`"atoms → systems"`)."""
        return _AGGREGATION_WORDS.get(self.aggregation, self.aggregation)

    @property
    def key(self) -> tuple[str, str, str, str | None, int | None, str | None, int | None]:
        """What identifies the same op on different ranks (everything but `count` and `ranks`)."""
        return (self.op, self.aggregation, self.origin, self.file, self.line, self.call_file, self.call_line)


def merge_unrouted(per_rank: Sequence[tuple[int, Sequence[UnroutedOp]]]) -> list[UnroutedOp]:
    """One record per op and location over ranks: counts summed, the ranks that ran it listed, in
    first-seen order."""
    merged: dict[tuple[Any, ...], UnroutedOp] = {}
    for rank, ops in per_rank:
        for op in ops:
            seen = merged.get(op.key)
            if seen is None:
                merged[op.key] = dataclasses.replace(op, count=int(op.count), ranks=[rank])
            else:
                seen.count += int(op.count)
                if rank not in seen.ranks:
                    seen.ranks.append(rank)
    return list(merged.values())


@dataclass(eq=False)
class OutputVerdict(Record):
    """One output of one attempt compared with the reference run.

    `name` is the output key, `kind` its output kind (per_node / per_graph / global). `passed` is True
    iff every element is within tolerance (`status == "ok"`). `max_abs_diff` / `max_rel_diff` are the
    largest differences (None when not computable: missing output, wrong shape; NaN or inf when values
    are non-finite). `status` is one of `VERDICT_STATUSES`. `worst_index` is the index (one int per
    dimension) of the worst element, or None; `n_failing` of `n_total` elements are out of tolerance.
    `expected_value` / `actual_value` are the reference's and the distributed run's value at
    `worst_index` (None without a worst element; absent in older reports).
    """

    name: str
    kind: str
    passed: bool
    max_abs_diff: float | None
    max_rel_diff: float | None
    status: str = dataclasses.field(metadata=wire(enum=VERDICT_STATUSES))
    worst_index: list[int] | None
    n_failing: int
    n_total: int
    expected_value: float | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))
    actual_value: float | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))


@dataclass(eq=False)
class HelperDiagnosis(Record):
    """What the helper trace found about one third-party helper (`module.function`).

    `n_calls_ref` calls in the reference run, `n_calls_per_rank` per rank (int rank keys). `pattern` is
    the recognised behaviour (e.g. "per_system_sum") with `pattern_confidence` in [0, 1].
    `consistency_check` names the check run on its per-rank results (e.g. "sum_over_ranks_matches_ref")
    and `consistency_passed` its outcome (None: not run). `already_wrapped` is True when the spec
    already declares an adapter for it. `suspected_gap` says in words what goes wrong (None: nothing
    suspected). `likely_remedy` is a ready `third_party_helpers` spec entry (a `HelperAdapter.to_dict()`
    object) that a quick fix can insert as is, or None. `source` is `{"file", "line"}` of the helper's
    definition, or None. `divergence_notes` are further observations, one sentence each.
    """

    module: str
    function: str
    n_calls_ref: int
    n_calls_per_rank: dict[int, int]
    pattern: str
    pattern_confidence: float
    consistency_check: str
    consistency_passed: bool | None
    already_wrapped: bool
    suspected_gap: str | None
    likely_remedy: dict[str, Any] | None
    source: dict[str, Any] | None
    divergence_notes: list[str]

    _derived = ("qualname",)
    _placed = (("qualname", "function"),)

    @property
    def qualname(self) -> str:
        """`"module.function"`, the name spec entries (`HelperAdapter.qualname`) and handlers use."""
        return f"{self.module}.{self.function}"

    @property
    def flagged(self) -> bool:
        """True when something is suspected: a `suspected_gap`, or a failed consistency check."""
        return self.suspected_gap is not None or self.consistency_passed is False


@dataclass(eq=False)
class DivergentModule(Record):
    """The first module, in call order, whose per-system output differs across ranks beyond the tolerances
    (from the layer hooks every rank runs).

    `module` is its name in the wrapper (`"readout.bias"`), `cls` its class (`"pkg.mod.Class"`; the JSON
    key is `class`), `key` the call (`"readout.bias#0"`: its first call), `ranks` the ranks whose value
    there differs from rank 0's, `max_abs` the largest difference between two ranks, `systems` the
    systems (rows) where they differ.
    """

    module: str
    cls: str = dataclasses.field(metadata=wire(key="class"))
    key: str
    ranks: list[int]
    max_abs: float
    systems: list[int] = dataclasses.field(default_factory=list)


@dataclass(eq=False)
class RankDisagreement(Record):
    """A replicated output (per-graph or global, not all-reduced) whose value differs between ranks
    beyond the tolerances: consolidation keeps one rank's value, so the attempt fails on this alone.

    `output` and `kind` name it; `ranks` are the ranks in disagreement (each differs from another one),
    `off_reference` those of them whose own value is out of tolerance against the single-process
    reference (empty when every rank is within tolerance of the reference but not of each other).
    `max_abs` is the largest difference between two ranks, `max_rel` that difference relative to the
    reference; `systems` the systems (rows of a per-graph output) where the ranks differ ([] for a
    global output); `first_module` the first module whose per-system value differs across ranks
    (None when the layer hooks found none or did not run); `first_op` the first torch operation whose
    value departs (`ops.DivergentOp`, with its file:line; None when the op trace found none; absent in
    older reports).
    """

    output: str
    kind: str
    ranks: list[int]
    off_reference: list[int]
    max_abs: float
    max_rel: float
    systems: list[int] = dataclasses.field(default_factory=list)
    first_module: DivergentModule | None = None
    first_op: DivergentOp | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))

    _derived = ("summary",)

    @property
    def summary(self) -> str:
        """One line: the output, the ranks, the size of the difference and the systems."""
        ranks = ", ".join(str(r) for r in self.ranks)
        text = f"ranks {ranks} disagree on {self.output} ({self.kind}, replicated): max |Δ| {self.max_abs:.3g}"
        if self.systems:
            text += f" in system{'s' if len(self.systems) > 1 else ''} {', '.join(str(s) for s in self.systems[:8])}"
            text += ", …" if len(self.systems) > 8 else ""
        if self.off_reference:
            off = ", ".join(str(r) for r in self.off_reference)
            text += f"; rank{'s' if len(self.off_reference) > 1 else ''} {off} off the single-process value"
        return text


@dataclass(eq=False)
class Rollback(Record):
    """An auto-fix attempt that made the comparison worse than attempt `to_attempt` (by `attempt_rank`):
    its mutation was dropped and the next attempt started from `to_attempt`'s spec. `reason` says how
    it was worse, in words."""

    to_attempt: int
    reason: str


@dataclass(eq=False)
class CrashTrace(Record):
    """What a rank that raised had recorded before it did: `handler_counts` (the dispatch trace so far)
    and `modules`, the sub-modules whose forward had returned, in call order (`"name#call"`; the
    last one is the last module that finished before the crash). `phase` is the rank's phase then."""

    rank: int
    phase: str
    handler_counts: dict[str, int]
    modules: list[str]

    @property
    def last_module(self) -> str | None:
        """The last module whose forward returned before the crash, None if none did."""
        return self.modules[-1] if self.modules else None


@dataclass(eq=False)
class Attempt(Record):
    """One distributed run (or re-consolidation) under one spec, compared with the reference.

    `index` counts attempts from 0; `spec` is the spec tried; `rationale` says why it was tried and
    `rule` names the inference / auto-fix rule that produced it (None for the prior). `passed` is True
    iff every output is within tolerance and no error occurred. `max_abs_diff` / `max_rel_diff` map
    output name to its largest difference (None: not computable); `verdicts` map output name to its
    `OutputVerdict`. `handler_counts` is the dispatch trace (handler name -> times fired). `error` is the
    worker error, if any. `helper_diagnostics` are the helper-trace findings. `layer_divergence`
    (`parts.LayerDivergence`, None if not run), `partition_health` (`parts.PartitionHealth`) and
    `halo_completeness` (`parts.HaloCompleteness`, `{}` on the wire when not checked) are open records
    (keys they do not name kept in their `extra`); a dict given for one is read as the record. `timings` maps a
    phase to seconds. `reused_run` is True when the attempt re-consolidated an earlier run's per-rank
    outputs instead of running ranks. `unrouted` lists the aggregations the ranks ran that no handler
    routed (`UnroutedOp`, merged over ranks); absent in older reports, read as [].
    `rank_disagreements` lists the replicated outputs whose value differs between ranks
    (`RankDisagreement`; any entry fails the attempt). `rolled_back` is set when this auto-fix attempt
    made things worse and the next one started from an earlier spec (`Rollback`). `crash_traces` hold,
    for each rank that raised, the handler counts and modules it had recorded before (`CrashTrace`).
    All three are absent in older reports and read as [] / None / [].
    `suspicious` lists the outputs within tolerance whose error is far above the round-off floor
    (`checks.SuspiciousOutput`; any entry fails the attempt); `system_health` the systems of
    the batch some rank cannot test (`checks.SystemHealth`; each is also a `degenerate`
    message). Both absent in older reports, read as [].
    `atom_errors` holds, for each failing or suspicious per-atom output, its per-atom errors
    (`atoms.AtomErrors`: the worst atoms, a profile along the cut axis, the ranks' slabs); absent in
    older reports, read as [].
    `fixes` lists what distcheck changed from the spec as given to `spec` (`fixes.SpecFix`: before the
    first run or by an auto-fix rule; written only when non-empty, read as [] when absent), the one
    record `document.report_state` reads; `skipped_fixes` the fixes with evidence that were not tried
    after this attempt, with why (`fixes.SkippedFix`; written only when non-empty).
    """

    index: int
    spec: MLIPSpec
    rationale: str
    rule: str | None
    passed: bool
    max_abs_diff: dict[str, float | None]
    max_rel_diff: dict[str, float | None]
    verdicts: dict[str, OutputVerdict]
    handler_counts: dict[str, int]
    error: WorkerError | None
    helper_diagnostics: list[HelperDiagnosis]
    layer_divergence: LayerDivergence | None
    partition_health: PartitionHealth
    halo_completeness: HaloCompleteness
    timings: dict[str, float]
    reused_run: bool = False
    unrouted: list[UnroutedOp] = dataclasses.field(default_factory=list)
    rank_disagreements: list[RankDisagreement] = dataclasses.field(default_factory=list)
    rolled_back: Rollback | None = None
    crash_traces: list[CrashTrace] = dataclasses.field(default_factory=list)
    suspicious: list[SuspiciousOutput] = dataclasses.field(default_factory=list)
    system_health: list[SystemHealth] = dataclasses.field(default_factory=list)
    atom_errors: list[AtomErrors] = dataclasses.field(default_factory=list)
    fixes: list[SpecFix] = dataclasses.field(default_factory=list, metadata=wire(omit_empty=True))
    skipped_fixes: list[SkippedFix] = dataclasses.field(default_factory=list, metadata=wire(omit_empty=True))

    _derived = ("failing_outputs",)
    _placed = (("failing_outputs", "passed"),)

    @property
    def failing_outputs(self) -> list[str]:
        """Names of the outputs whose verdict did not pass, in verdict order."""
        return [name for name, v in self.verdicts.items() if not v.passed]

    def __post_init__(self) -> None:
        # a free-form dict given for an open part (hand-built reports, older callers) is read as its record
        if isinstance(self.partition_health, Mapping):
            self.partition_health = view(PartitionHealth, self.partition_health)
        if isinstance(self.halo_completeness, Mapping):
            self.halo_completeness = view(HaloCompleteness, self.halo_completeness)
        if isinstance(self.layer_divergence, Mapping):
            self.layer_divergence = view(LayerDivergence, self.layer_divergence)

    @property
    def degenerate(self) -> list[str]:
        """The degenerate-partition messages (`partition_health.degenerate`), [] if none."""
        return self.partition_health.degenerate
