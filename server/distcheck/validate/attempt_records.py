"""One attempt's record in the report, from what its ranks returned.

`evaluate_run` consolidates and compares a distributed run's outputs with the reference (replicas rank
against rank, watched helpers, the first divergent layer, halo completeness, non-finite values) into an
`Attempt`; `output_attempt` and `failed_attempt` are the records of attempts whose outputs could not be
compared or whose ranks failed; `attempt_atom_errors` cuts a failing attempt's per-atom errors as the
run cut the batch.

All of it runs inside `runtime.pristine.shielded()` and computes through `pristine` (here and in what
it calls: consolidation, the diff, the replicas, the helpers' and layers' comparison): a torch function
the user's module replaced in this process changes the model's outputs, as in a fresh process, never
the verdict on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..batch import Batch
from ..option_check import strictest
from ..report import (
    Attempt,
    HaloCompleteness,
    HelperDiagnosis,
    OutputVerdict,
    PartitionHealth,
    WorkerError,
    merge_unrouted,
)
from ..report.atoms import AtomErrors
from ..report.parts import ReportMeta
from ..runtime import pristine as P
from ..runtime.errors import DistributedError
from ..runtime.model import WrapperError
from ..runtime.partition import partition_batch
from ..runtime.run_result import DistributedRun
from ..spec import MLIPSpec
from .crash import crash_handler_counts, crash_traces, worker_error
from .diagnosis import diagnose_helpers
from .diff import compare_outputs, failing_atom_errors, nonfinite_report
from .errors import nan_hint
from .health import halo_completeness, partition_health
from .layers import compare_layers
from .model_identity import factory_mismatch
from .op_trace import name_first_ops
from .outputs import OutputProblem, nonfinite_counts, output_error, problem_from_error, rank_problems
from .receptive import effective_depth
from .replicas import check_replicas

__all__ = ["attempt_atom_errors", "evaluate_run", "failed_attempt", "output_attempt", "reference_outputs"]


def reference_outputs(reference: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The single-process run's outputs (on the CPU), by name (plain tensors: the reference child's
    result is loaded with `weights_only`); every use of them here goes through `pristine`."""
    outputs: dict[str, torch.Tensor] = reference["outputs"]
    return outputs


def _verdicts(raw: Mapping[str, Mapping[str, Any]]) -> dict[str, OutputVerdict]:
    return {name: OutputVerdict(**dict(v)) for name, v in raw.items()}


def _mismatch_attempt(
    index: int,
    spec: MLIPSpec,
    rationale: str,
    rule: str | None,
    error: WorkerError,
    timings: dict[str, float],
    reused: bool,
) -> tuple[Attempt, dict[str, dict[str, Any]], list[dict[str, Any]]]:
    attempt = failed_attempt(index, spec, rationale, rule, error, timings)
    attempt.reused_run = reused
    return attempt, {}, []


@P.shielded()
def evaluate_run(
    index: int,
    spec: MLIPSpec,
    rationale: str,
    rule: str | None,
    run: DistributedRun,
    reference: Mapping[str, Any],
    opts: Mapping[str, Any],
    reused: bool,
    timings: dict[str, float],
    meta: ReportMeta,
) -> tuple[Attempt, dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Attempt `index` of a validation from its `run` under `spec`: the outputs checked, consolidated
    (again under `spec` when the run is `reused`) and compared with the reference, replicated outputs
    rank against rank, watched helpers, the first divergent layer, halo completeness and non-finite
    values. Returns the attempt, the raw per-output comparison and the helper diagnoses (auto-fix's
    evidence); an attempt whose outputs cannot be compared is errored (`meta.output_problems`), and so
    is one that fails while its ranks built another model than the reference (`model_identity`)."""
    # the ranks built another model than the reference: what explains outputs that differ (no spec can fix it)
    mismatch = factory_mismatch(reference, run.records)
    ref = reference_outputs(reference)
    problems = rank_problems(run.rank_outputs, run.rows, ref, spec.output_kinds)
    outputs: dict[str, torch.Tensor] = {}
    kinds: dict[str, str] = {}
    if not problems:
        try:
            consolidated = run if not reused else run.reconsolidate(spec)
            outputs, kinds = consolidated.outputs, consolidated.kinds
        except WrapperError as err:
            problems = [problem_from_error(err)]
    if problems and mismatch is not None:
        return _mismatch_attempt(index, spec, rationale, rule, mismatch, timings, reused)
    if problems:  # the outputs cannot be compared: an errored attempt, no verdicts
        return output_attempt(index, spec, rationale, rule, problems, reference, meta, timings, reused), {}, []
    raw = compare_outputs(outputs, ref, spec.output_kinds, opts["atol"], opts["rtol"])
    # Replicated outputs: every rank's value against the reference and against the other ranks'.
    raw, disagreements = check_replicas(
        run.rank_outputs,
        kinds,
        spec,
        ref,
        raw,
        opts["atol"],
        opts["rtol"],
        reference_layers=reference.get("layers") or [],
        rank_layers=_rank_layers(run) if opts["layer_diagnostic"] else None,
    )
    passed = all(v["passed"] for v in raw.values()) and bool(raw) and not disagreements
    if not passed and mismatch is not None:
        return _mismatch_attempt(index, spec, rationale, rule, mismatch, timings, reused)
    helpers = diagnose_helpers(
        reference["helpers"],
        [(i or {}).get("helpers") for i in run.instrumentation],
        spec,
        run.num_atoms,
        run.num_systems,
    )
    layer = None
    if opts["layer_diagnostic"] and all(i is not None for i in run.instrumentation):
        ranks = [i["layers"] for i in run.instrumentation]
        layer = compare_layers(reference["layers"], ranks, strictest(opts["rtol"]))  # no one output's: the tightest
    info = reference["wrapper"]
    policy = spec.distribution.policy
    halo = halo_completeness(  # the depth is the measured one when the wrapper declares less
        run.records, policy.kind, policy.scatter_mode, info.get("cutoff"), effective_depth(reference)
    )
    error = None
    nonfinite = nonfinite_report(run.rank_outputs)
    if nonfinite:
        # A NaN on any rank fails the attempt, even in a replicated output consolidation took from rank 0.
        passed = False
        first = nonfinite[0]
        rank, name = int(first["rank"]), str(first["output"])
        found = nonfinite_counts({name: run.rank_outputs[rank][name]}).get(name, {})
        what = " and ".join(f"{found[k]} {label}" for k, label in (("nan", "NaN"), ("inf", "inf")) if found.get(k))
        hint = nan_hint(rank, name, int(first["count"]))
        if not found.get("nan"):  # only ±inf: the same causes (a division by zero, a log of zero)
            hint = hint.replace("produced NaN", "produced inf", 1)
        error = WorkerError(
            type="NonFiniteOutput",
            message=f"rank {rank} produced {what or first['count']} values in output {name!r} where the "
            "single-process run is finite",
            rank=rank,
            phase="forward",
            frames=[],
            hint=hint,
        )
    if not passed and opts["layer_diagnostic"]:  # the line the divergence starts at
        name_first_ops(
            layer, disagreements, reference, run.instrumentation, strictest(opts["atol"]), strictest(opts["rtol"])
        )
    attempt = Attempt(
        index=index,
        spec=spec,
        rationale=rationale,
        rule=rule,
        passed=passed,
        max_abs_diff={n: v["max_abs_diff"] for n, v in raw.items()},
        max_rel_diff={n: v["max_rel_diff"] for n, v in raw.items()},
        verdicts=_verdicts(raw),
        handler_counts=run.handler_counts,
        error=error,
        helper_diagnostics=[HelperDiagnosis(**h) for h in helpers],
        layer_divergence=layer,
        partition_health=partition_health(run.records),
        halo_completeness=halo,
        timings=timings,
        reused_run=reused,
        unrouted=merge_unrouted([(r.rank, r.unrouted) for r in run.records]),
        rank_disagreements=disagreements,
    )
    return attempt, raw, helpers


def attempt_atom_errors(
    attempt: Attempt, run: DistributedRun, reused: bool, reference: Mapping[str, Any], batch: Batch
) -> list[AtomErrors]:
    """Per-atom errors of the attempt's failing (or suspicious) per-atom outputs, cut as the run cut
    the batch: the partition is recomputed (it is deterministic) from the batch, the world size and the
    halo width the ranks reported. [] when the attempt errored or nothing per-atom failed."""
    failing = [n for n, v in attempt.verdicts.items() if not v.passed and v.kind == "per_node"]
    if attempt.error is not None or not failing or not run.records:
        return []
    spec = attempt.spec
    with P.shielded():
        outputs = run.outputs if not reused else run.reconsolidate(spec).outputs
        replicated = spec.distribution.policy.kind == "replicated"
        partition = partition_batch(batch, run.world_size, run.records[0].halo_width, replicated=replicated)
        return failing_atom_errors(failing, outputs, reference_outputs(reference), spec.output_kinds, batch, partition)


def _rank_layers(run: DistributedRun) -> list[list[dict[str, Any]]] | None:
    """Every rank's layer records, or None when some rank has none to give."""
    found = [(i or {}).get("layers") for i in run.instrumentation]
    if len(found) != run.world_size or any(not isinstance(f, list) for f in found):
        return None
    return [list(f) for f in found if isinstance(f, list)]


def output_attempt(
    index: int,
    spec: MLIPSpec,
    rationale: str,
    rule: str | None,
    problems: Sequence[OutputProblem],
    reference: Mapping[str, Any],
    meta: ReportMeta,
    timings: dict[str, float],
    reused: bool = False,
) -> Attempt:
    """An attempt whose outputs could not be compared; `meta.output_problems` lists why."""
    meta.output_problems = list(problems)
    attempt = failed_attempt(index, spec, rationale, rule, output_error(problems, reference["wrapper"]), timings)
    attempt.reused_run = reused
    return attempt


def failed_attempt(
    index: int,
    spec: MLIPSpec,
    rationale: str,
    rule: str | None,
    err: DistributedError | WorkerError,
    timings: dict[str, float],
) -> Attempt:
    traces = crash_traces(err.failures) if isinstance(err, DistributedError) else []
    return Attempt(
        index=index,
        spec=spec,
        rationale=rationale,
        rule=rule,
        passed=False,
        max_abs_diff={},
        max_rel_diff={},
        verdicts={},
        handler_counts=crash_handler_counts(traces),  # what the raising ranks had counted before
        error=err if isinstance(err, WorkerError) else worker_error(err),
        helper_diagnostics=[],
        layer_divergence=None,
        partition_health=PartitionHealth(),
        halo_completeness=HaloCompleteness(),
        timings=timings,
        crash_traces=traces,
    )
