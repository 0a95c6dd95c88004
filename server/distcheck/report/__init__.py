"""The validation report: what `trace_and_validate` found, as data that round-trips through JSON.

`TraceReport` is the whole document: the bottom line (`ok`, `verdict`, `next_action`), the spec that
works (or the best one tried), every `Attempt` with its per-output `OutputVerdict`s, the worker error
(`WorkerError` with `Frame`s) if a rank failed, the third-party helper findings (`HelperDiagnosis`),
layer divergence, partition health and timings. Everything the editor needs to place a diagnostic is a
file + line in the report, so the daemon never imports the user's code, and this package never imports
torch.

`python -m distcheck.report --write-schema PATH --write-ts PATH` writes the schema and the TypeScript
types.

Modules
=======

- `values`: JSON values: non-finite floats, free-form dicts, strict readers;
- `codec`: the records' JSON from their dataclass fields;
- `model`: the records of one attempt (`Attempt`, `OutputVerdict`, `WorkerError`, `UnroutedOp`, ...);
- `checks`: the trust-check records (`RoundoffFloor`, `ReceptiveField`, `SampleWarning`, ...);
- `parts`: typed records of the open parts (`partition_health`, `meta`, `target`, ...);
- `atoms`: per-atom error data of one failing output, bounded in size;
- `ops`: the first torch operation whose value departs, with its file:line (`DivergentOp`);
- `kernels`: what a rank saw of an undeclared `torch.ops` kernel (`KernelCall`);
- `fixes`: what distcheck changed in the spec as given, and the fixes it did not try (`SpecFix`, `SkippedFix`);
- `halo_depth`: the depth (or halo in Å) the halo that failed and the one `widen_halo` passed with give;
- `handler_counts`: the names of the handler counts (`HANDLER_COUNTS`), the one statement of them (not
  imported by the package: `python -m distcheck.report.handler_counts PAGE` regenerates the docs table);
- `document`: `TraceReport` and the best-attempt rule; its docstring states the JSON promises;
- `failures`: the per-output failure record every test runner shows;
- `schema`: the generated JSON Schema;
- `typescript`: the extension's report types, generated from the schema;
- `render`: the report as text / ANSI;
- `log_summary`: the text summary written to a logger;
- `junit`: JUnit XML for CI;
- `__main__`: `python -m distcheck.report`, writing the schema and the TypeScript types.
"""

from .checks import (
    FEEDBACK_HIDES_FIELD,
    RECEPTIVE_STATUSES,
    ROUNDOFF_STATUSES,
    SAMPLE_WARNINGS,
    SYSTEM_PROBLEMS,
    ReceptiveField,
    RoundoffFloor,
    SampleWarning,
    SuspiciousOutput,
    SystemHealth,
    receptive_line,
    suspicious_line,
)
from .document import (
    DEADLINE_STAGES,
    REPORT_STATES,
    REPORT_VERDICTS,
    REPORT_VERSION,
    DeadlineReached,
    TraceReport,
    attempt_rank,
    best_attempt_index,
    report_state,
)
from .kernels import KERNEL_ROLES, KernelCall, KernelTensor
from .model import (
    UNROUTED_AGGREGATIONS,
    UNROUTED_ORIGINS,
    VERDICT_STATUSES,
    Attempt,
    CrashTrace,
    DivergentModule,
    Frame,
    HelperDiagnosis,
    OutputVerdict,
    RankDisagreement,
    Rollback,
    UnroutedOp,
    WorkerError,
    merge_unrouted,
)
from .ops import DivergentOp
from .parts import (
    MAX_MODULE_DIFFS,
    DivergentLayer,
    FactoryInfo,
    HaloCompleteness,
    LayerDivergence,
    ModuleDiff,
    OutputProblem,
    PartitionHealth,
    RankCounts,
    ReportMeta,
    TargetInfo,
    WrapperInfo,
    view,
)
from .render import render_text, tolerance_for

__all__ = [
    "DEADLINE_STAGES",
    "FEEDBACK_HIDES_FIELD",
    "KERNEL_ROLES",
    "MAX_MODULE_DIFFS",
    "RECEPTIVE_STATUSES",
    "REPORT_STATES",
    "REPORT_VERDICTS",
    "REPORT_VERSION",
    "ROUNDOFF_STATUSES",
    "SAMPLE_WARNINGS",
    "SYSTEM_PROBLEMS",
    "UNROUTED_AGGREGATIONS",
    "UNROUTED_ORIGINS",
    "VERDICT_STATUSES",
    "Attempt",
    "CrashTrace",
    "DeadlineReached",
    "DivergentLayer",
    "DivergentModule",
    "DivergentOp",
    "FactoryInfo",
    "Frame",
    "HaloCompleteness",
    "HelperDiagnosis",
    "KernelCall",
    "KernelTensor",
    "LayerDivergence",
    "ModuleDiff",
    "OutputProblem",
    "OutputVerdict",
    "PartitionHealth",
    "RankCounts",
    "RankDisagreement",
    "ReceptiveField",
    "ReportMeta",
    "Rollback",
    "RoundoffFloor",
    "SampleWarning",
    "SuspiciousOutput",
    "SystemHealth",
    "TargetInfo",
    "TraceReport",
    "UnroutedOp",
    "WorkerError",
    "WrapperInfo",
    "attempt_rank",
    "best_attempt_index",
    "merge_unrouted",
    "receptive_line",
    "render_text",
    "report_state",
    "suspicious_line",
    "tolerance_for",
    "view",
]
