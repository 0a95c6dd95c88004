"""`trace_and_validate` / `validate_on_cpu`: reference run, spec inference, distributed runs,
diff, auto-fix and diagnostics, returned as a `TraceReport`."""

from __future__ import annotations

import contextvars
import functools
import importlib.util
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import torch

from .. import __version__
from ..batch import Batch, as_batch
from ..option_check import OptionError, Tolerance, check_options, strictest, unknown_tolerance_keys, with_default
from ..options import option
from ..rank_limits import check_world_size
from ..report import (
    Attempt,
    DeadlineReached,
    HaloCompleteness,
    HelperDiagnosis,
    OutputVerdict,
    PartitionHealth,
    TraceReport,
    WorkerError,
    best_attempt_index,
    merge_unrouted,
)
from ..report.atoms import AtomErrors
from ..runtime.errors import DistributedError
from ..runtime.factory import FactoryRef, resolve_factory
from ..runtime.group import GroupSession
from ..runtime.launch import DistributedRun, resolve_backend, resolve_devices, run_distributed
from ..runtime.model import WrapperError
from ..runtime.partition import partition_batch
from ..runtime.spares_cache import packages_for, record
from ..runtime.spares_prepared import ValidationSpares
from ..spec import MLIPSpec
from .autofix import FixContext, propose
from .crash import crash_handler_counts, crash_traces, worker_error
from .deadline import Budget
from .diagnosis import diagnose_helpers
from .diff import compare_outputs, failing_atom_errors, nonfinite_report
from .errors import nan_hint
from .health import halo_completeness, partition_health, system_health
from .inference import infer_spec
from .layers import compare_layers
from .next_action import next_action
from .outputs import (
    OUTPUT_PHASE,
    OutputProblem,
    nonfinite_counts,
    output_error,
    problem_from_error,
    rank_problems,
    reference_error,
)
from .receptive import apply_measured_field, effective_depth, receptive_record
from .reference import run_reference
from .replicas import check_replicas
from .rollback import rollback_if_worse
from .sample_checks import sample_warnings
from .sensitivity import RoundoffMeter, make_control_runner

__all__ = ["DEFAULT_WATCHED_HELPERS", "trace_and_validate", "validate_on_cpu"]

DEFAULT_WATCHED_HELPERS: tuple[str, ...] = tuple(option("watched_helper_packages").default)

ProgressCallback = Callable[[str, Mapping[str, Any]], None]

RANK_INSTRUMENTATION = "distcheck.validate.instrument:RankInstrumentation"


def _reference_phases(reference: Mapping[str, Any]) -> dict[str, float]:
    """The reference run's own phases as `meta["timings"]` keys (`reference_factory`, `reference_forward`,
    ...): what its child spent building, running, measuring the receptive field, and what the parent
    waited for its start, the first attempt's ranks to be handed out and the result."""
    return {f"reference_{k}": float(v) for k, v in dict(reference.get("timings") or {}).items()}


def trace_and_validate(
    model_factory: Callable[..., Any] | str,
    sample_batch: Any,
    *,
    world_size: int = 2,
    device: str | Sequence[str] = "cuda:0",
    atol: Tolerance = 1e-5,
    rtol: Tolerance = 1e-4,
    auto_fix: bool = True,
    max_fix_attempts: int = 8,
    backend: str = "auto",
    timeout_sec: float = 120.0,
    deadline_sec: float | None = None,
    watched_helper_packages: Sequence[str] | None = None,
    helper_sample_every: int = 8,
    layer_diagnostic: bool = True,
    allow_oversubscribe: bool = False,
    progress: ProgressCallback | None = None,
    spec: MLIPSpec | Mapping[str, Any] | str | os.PathLike[str] | None = None,
) -> TraceReport:
    """Validate on the GPU: every rank on `device` (gloo when they share it, NCCL when each has its own).

    Requires CUDA: without it raises `RuntimeError` before looking at its arguments, naming
    `validate_on_cpu`. Returns a `TraceReport` whose `spec` is the working (or best) spec.

    Before any process starts, every option is checked (`distcheck.targets.check_option`) and a bad
    one raises `OptionError` (a `ValueError`) naming it: NaN, inf or negative tolerances, a timeout or
    deadline that is not a finite number > 0, a `world_size` that is not an int (bools are not) or
    exceeds the atoms of the sample's smallest system, and on the CPU more than
    `RANKS_PER_CORE` ranks per usable core unless `allow_oversubscribe`. `timeout_sec` bounds one
    run (the single-process reference, or one attempt's ranks); `deadline_sec` (None: none) bounds the
    whole validation: past it no new attempt starts, each run's timeout is at most what is left, and
    the report ends with the best attempt so far (`TraceReport.deadline`).
    """
    if not torch.cuda.is_available():
        raise RuntimeError(
            "trace_and_validate needs CUDA, and torch sees no GPU here. On a CPU-only machine use "
            "distcheck.validate_on_cpu(model_factory, sample_batch, ...) — the same pipeline with gloo."
        )
    return _validate(
        model_factory,
        sample_batch,
        world_size=world_size,
        device=device,
        atol=atol,
        rtol=rtol,
        auto_fix=auto_fix,
        max_fix_attempts=max_fix_attempts,
        backend=backend,
        timeout_sec=timeout_sec,
        deadline_sec=deadline_sec,
        watched_helper_packages=watched_helper_packages,
        helper_sample_every=helper_sample_every,
        layer_diagnostic=layer_diagnostic,
        allow_oversubscribe=allow_oversubscribe,
        progress=progress,
        spec=spec,
    )


def validate_on_cpu(
    model_factory: Callable[..., Any] | str,
    sample_batch: Any,
    *,
    world_size: int = 2,
    atol: Tolerance = 1e-5,
    rtol: Tolerance = 1e-4,
    auto_fix: bool = True,
    max_fix_attempts: int = 8,
    timeout_sec: float = 120.0,
    deadline_sec: float | None = None,
    watched_helper_packages: Sequence[str] | None = None,
    helper_sample_every: int = 8,
    layer_diagnostic: bool = True,
    allow_oversubscribe: bool = False,
    progress: ProgressCallback | None = None,
    spec: MLIPSpec | Mapping[str, Any] | str | os.PathLike[str] | None = None,
) -> TraceReport:
    """The same pipeline as `trace_and_validate`, on the CPU with gloo (what CI and laptops run), with
    the same option checks, `timeout_sec` (one run) and `deadline_sec` (the whole validation)."""
    return _validate(
        model_factory,
        sample_batch,
        world_size=world_size,
        device="cpu",
        atol=atol,
        rtol=rtol,
        auto_fix=auto_fix,
        max_fix_attempts=max_fix_attempts,
        backend="gloo",
        timeout_sec=timeout_sec,
        deadline_sec=deadline_sec,
        watched_helper_packages=watched_helper_packages,
        helper_sample_every=helper_sample_every,
        layer_diagnostic=layer_diagnostic,
        allow_oversubscribe=allow_oversubscribe,
        progress=progress,
        spec=spec,
    )


def _as_list(packages: Sequence[str] | None) -> Any:
    """The watched packages as `check_option` takes them: a list, or a bare string / other value as given
    (so that it is refused, not iterated)."""
    if packages is None or isinstance(packages, str) or not isinstance(packages, (list, tuple)):
        return packages
    return list(packages)


def _check_tolerance_names(atol: Tolerance, rtol: Tolerance, kinds: Mapping[str, str]) -> None:
    """Refuse a per-output tolerance that names no output of the model (nor an output kind): a misspelt
    output would otherwise be compared under the default without a word."""
    for name, tol in (("atol", atol), ("rtol", rtol)):
        unknown = unknown_tolerance_keys(tol, kinds)
        if unknown:
            outputs = ", ".join(kinds) or "none"
            raise OptionError(
                name,
                tol,
                f"{name} names {', '.join(map(repr, unknown))}, which is neither an output of the model (its outputs: "
                f"{outputs}) nor an output kind (per_node, per_graph, global)",
                f"spell the output as the model returns it (or use an output kind, or default) in {name}",
            )


def _findable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _emit(progress: ProgressCallback | None, event: str, **info: Any) -> None:
    if progress is not None:
        progress(event, info)


def _reference_outputs(reference: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    outputs: dict[str, torch.Tensor] = reference["outputs"]
    return outputs


def _verdicts(raw: Mapping[str, Mapping[str, Any]]) -> dict[str, OutputVerdict]:
    return {name: OutputVerdict(**dict(v)) for name, v in raw.items()}


def _evaluate(
    index: int,
    spec: MLIPSpec,
    rationale: str,
    rule: str | None,
    run: DistributedRun,
    reference: Mapping[str, Any],
    opts: Mapping[str, Any],
    reused: bool,
    timings: dict[str, float],
    meta: dict[str, Any],
) -> tuple[Attempt, dict[str, dict[str, Any]], list[dict[str, Any]]]:
    ref = _reference_outputs(reference)
    problems = rank_problems(run.rank_outputs, run.rows, ref, spec.output_kinds)
    outputs: dict[str, torch.Tensor] = {}
    kinds: dict[str, str] = {}
    if not problems:
        try:
            consolidated = run if not reused else run.reconsolidate(spec)
            outputs, kinds = consolidated.outputs, consolidated.kinds
        except WrapperError as err:
            problems = [problem_from_error(err)]
    if problems:  # the outputs cannot be compared: an errored attempt, no verdicts
        return _output_attempt(index, spec, rationale, rule, problems, reference, meta, timings, reused), {}, []
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


def _atom_errors(
    attempt: Attempt, run: DistributedRun, reused: bool, reference: Mapping[str, Any], batch: Batch
) -> list[AtomErrors]:
    """Per-atom errors of the attempt's failing (or suspicious) per-atom outputs, cut as the run cut
    the batch: the partition is recomputed (it is deterministic) from the batch, the world size and the
    halo width the ranks reported. [] when the attempt errored or nothing per-atom failed."""
    failing = [n for n, v in attempt.verdicts.items() if not v.passed and v.kind == "per_node"]
    if attempt.error is not None or not failing or not run.records:
        return []
    spec = attempt.spec
    outputs = run.outputs if not reused else run.reconsolidate(spec).outputs
    replicated = spec.distribution.policy.kind == "replicated"
    partition = partition_batch(batch, run.world_size, run.records[0].halo_width, replicated=replicated)
    return failing_atom_errors(failing, outputs, _reference_outputs(reference), spec.output_kinds, batch, partition)


def _rank_layers(run: DistributedRun) -> list[list[dict[str, Any]]] | None:
    """Every rank's layer records, or None when some rank has none to give."""
    found = [(i or {}).get("layers") for i in run.instrumentation]
    if len(found) != run.world_size or any(not isinstance(f, list) for f in found):
        return None
    return [list(f) for f in found if isinstance(f, list)]


def _output_attempt(
    index: int,
    spec: MLIPSpec,
    rationale: str,
    rule: str | None,
    problems: Sequence[OutputProblem],
    reference: Mapping[str, Any],
    meta: dict[str, Any],
    timings: dict[str, float],
    reused: bool = False,
) -> Attempt:
    """An attempt whose outputs could not be compared; `meta["output_problems"]` lists why."""
    meta["output_problems"] = [p.to_dict() for p in problems]
    attempt = _failed_attempt(index, spec, rationale, rule, output_error(problems, reference["wrapper"]), timings)
    attempt.reused_run = reused
    return attempt


def _failed_attempt(
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


_P = ParamSpec("_P")
_R = TypeVar("_R")
_AHEAD: contextvars.ContextVar[ValidationSpares | None] = contextvars.ContextVar("distcheck_spares", default=None)


def _with_spares(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Whatever spares the validation took and did not use are dropped when it ends, however it ends."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        token = _AHEAD.set(None)
        try:
            return fn(*args, **kwargs)
        finally:
            ahead = _AHEAD.get()
            _AHEAD.reset(token)
            if ahead is not None:
                ahead.close()

    return wrapper


def _spares(
    ref: FactoryRef, devices: Sequence[str], world_size: int, prior: Any, later_attempts: bool
) -> ValidationSpares:
    """This validation's spares (with the packages the target's model imported last time), asked for
    by its reference run, which has the first attempt's ranks built while it runs."""
    planned = (MLIPSpec.coerce(prior) if prior is not None else MLIPSpec()).to_dict()
    packages = packages_for(ref.describe())
    ahead = ValidationSpares(ref, devices, world_size, packages, spec=planned, later_attempts=later_attempts)
    _AHEAD.set(ahead)
    return ahead


@_with_spares
def _validate(
    model_factory: Callable[..., Any] | str,
    sample_batch: Any,
    *,
    world_size: int,
    device: str | Sequence[str],
    atol: Tolerance,
    rtol: Tolerance,
    auto_fix: bool,
    max_fix_attempts: int,
    backend: str,
    timeout_sec: float,
    watched_helper_packages: Sequence[str] | None,
    helper_sample_every: int,
    layer_diagnostic: bool,
    progress: ProgressCallback | None,
    spec: MLIPSpec | Mapping[str, Any] | str | os.PathLike[str] | None,
    session: GroupSession | None = None,
    deadline_sec: float | None = None,
    allow_oversubscribe: bool = False,
) -> TraceReport:
    """The pipeline behind every entry point. With `session` (rank 0 of a launched job) attempts run on
    the job's ranks and `world_size`, `device` and `backend` are the job's; otherwise `run_distributed`
    starts the ranks."""
    t_start = time.perf_counter()
    check_options(
        {
            "world_size": world_size,
            "atol": atol,
            "rtol": rtol,
            "auto_fix": auto_fix,
            "max_fix_attempts": max_fix_attempts,
            "backend": backend,
            "timeout_sec": timeout_sec,
            "deadline_sec": deadline_sec,
            "watched_helper_packages": _as_list(watched_helper_packages),
            "helper_sample_every": helper_sample_every,
            "layer_diagnostic": layer_diagnostic,
            "allow_oversubscribe": allow_oversubscribe,
        }
    )
    atol, rtol = with_default(atol, option("atol").default), with_default(rtol, option("rtol").default)
    ref: FactoryRef = resolve_factory(model_factory)
    batch: Batch = as_batch(sample_batch)
    if session is not None:
        world_size, devices, resolved_backend = session.world_size, session.devices, session.backend
    else:
        devices = resolve_devices(device, world_size)
        resolved_backend = resolve_backend(backend, devices)
    system_atoms = [int(n) for n in torch.bincount(batch.batch, minlength=batch.num_systems).tolist()]
    check_world_size(
        world_size,
        system_atoms,
        on_cpu=session is None and all(d == "cpu" for d in devices),  # a launcher's ranks exist already
        allow_oversubscribe=allow_oversubscribe,
    )
    if spec is not None:
        MLIPSpec.coerce(spec)  # a broken prior is a setup error, raised before anything starts
    prior = spec
    requested = list(DEFAULT_WATCHED_HELPERS if watched_helper_packages is None else watched_helper_packages)
    # Only packages that exist travel to the ranks: a failed import in every rank costs more than the trace.
    watched = [p for p in requested if _findable(p)]
    opts = {"atol": atol, "rtol": rtol, "layer_diagnostic": layer_diagnostic}
    meta: dict[str, Any] = {
        "world_size": world_size,
        "device": devices[0] if len(set(devices)) == 1 else devices,
        "devices": devices,
        "backend": resolved_backend,
        "atol": atol,
        "rtol": rtol,
        "auto_fix": auto_fix,
        "max_fix_attempts": max_fix_attempts,
        "timeout_sec": timeout_sec,
        "deadline_sec": deadline_sec,
        "watched_helper_packages": watched,
        "helper_sample_every": helper_sample_every,
        "layer_diagnostic": layer_diagnostic,
        "factory": ref.describe(),
        "num_atoms": batch.num_atoms,
        "num_systems": batch.num_systems,
        "versions": {"distcheck": __version__, "torch": torch.__version__, "python": platform.python_version()},
        "harness": "cpu" if devices[0] == "cpu" else "gpu",
        "launcher": "local" if session is None else "torchrun",
    }
    if session is not None:
        meta["hosts"] = session.hosts
        meta["placement"] = session.placement
    budget = Budget(timeout_sec, deadline_sec, start=t_start)
    ahead = None if session is not None else _spares(ref, devices, world_size, prior, auto_fix and max_fix_attempts > 0)
    _emit(progress, "reference_started")
    t0 = time.perf_counter()
    try:
        reference = run_reference(
            ref,
            batch,
            device=devices[0],
            helper_packages=watched,
            helper_sample_every=helper_sample_every,
            layer_diagnostic=layer_diagnostic,
            timeout_sec=budget.run_timeout(),
            ahead=ahead,
        )
    except DistributedError as err:
        meta["timings"] = {"reference": time.perf_counter() - t0, "total": time.perf_counter() - t_start}
        attempt = _failed_attempt(
            0, MLIPSpec.coerce(prior) if prior is not None else MLIPSpec(), "reference run", None, err, {}
        )
        report = TraceReport(ok=False, spec=attempt.spec, attempts=[attempt], next_action="", meta=meta)
        report.deadline = budget.reached("reference", 0) if budget.cut_short(err) else None
        report.next_action = next_action(report)
        return report
    t_reference = time.perf_counter() - t0
    if ahead is not None:  # what this target's next validation's spares import ahead
        record(ref.describe(), dict(reference.get("imported_packages") or {}))
    meta["skipped_helper_packages"] = [p for p in requested if p not in watched] + list(
        reference["helpers"].get("skipped", [])
    )
    meta["wrapper"] = reference["wrapper"]
    _emit(progress, "reference_finished", seconds=t_reference)
    current, notes = infer_spec(reference, batch.num_atoms, batch.num_systems, prior)
    meta["inference_notes"] = notes
    _check_tolerance_names(atol, rtol, current.output_kinds)
    problem = reference_error(reference, current, batch.num_atoms, batch.num_systems, meta)
    if problem is not None:  # the single-process outputs cannot be validated: no attempt is run
        meta["timings"] = {
            "reference": t_reference,
            **_reference_phases(reference),
            "total": time.perf_counter() - t_start,
        }
        attempt = _failed_attempt(0, current, "reference run", None, problem, {})
        report = TraceReport(ok=False, spec=current, attempts=[attempt], next_action="", meta=meta)
        report.next_action = next_action(report)
        _emit(progress, "finished", ok=False)
        return report
    attempts: list[Attempt] = []
    tried = {current.signature()}
    rationale, rule = "spec from the wrapper's distribution_spec and the reference trace", None
    receptive = receptive_record(reference)  # an under-declared depth is fixed before any rank runs
    current, field_note = apply_measured_field(current, receptive)
    if field_note:
        notes.append(field_note)
        rationale += f"; {field_note}"
    tried.add(current.signature())
    control = make_control_runner(
        ref, batch, world_size=world_size, devices=devices, backend=resolved_backend, budget=budget, session=session
    )
    floor = RoundoffMeter(_reference_outputs(reference), current.output_kinds, control, atol, rtol)
    run: DistributedRun | None = None
    needs_run = True
    total_attempts = 1 + (max_fix_attempts if auto_fix else 0)
    fix_context: FixContext | None = None
    base: tuple[Attempt, FixContext] | None = None  # the best attempt so far, which proposals start from
    stopped: DeadlineReached | None = None
    while len(attempts) < total_attempts:
        if budget.expired():  # the whole-validation deadline: no new attempt
            stopped = budget.reached("between_attempts", len(attempts))
            break
        index = len(attempts)
        _emit(
            progress,
            "attempt_started",
            index=index,
            total=total_attempts,
            rule=rule or "initial spec",
            rationale=rationale,
        )
        t1 = time.perf_counter()
        if needs_run or run is None:
            try:
                instrumentation_options = {
                    "helper_packages": watched,
                    "helper_sample_every": helper_sample_every,
                    "layer_diagnostic": layer_diagnostic,
                }
                timeout = budget.run_timeout(clip=session is None)  # a launched job's timeout is fixed at join
                if session is not None:
                    run = session.run(
                        ref,
                        batch,
                        current,
                        instrumentation=RANK_INSTRUMENTATION,
                        instrumentation_options=instrumentation_options,
                    )
                else:
                    run = run_distributed(
                        ref,
                        batch,
                        current,
                        world_size=world_size,
                        device=devices,
                        backend=resolved_backend,
                        timeout_sec=timeout,
                        instrumentation=RANK_INSTRUMENTATION,
                        instrumentation_options=instrumentation_options,
                        on_event=lambda name, info: _emit(progress, name, **info),
                        prepared=ahead.take() if ahead is not None else None,  # built during the reference
                    )
            except DistributedError as err:
                attempts.append(
                    _failed_attempt(index, current, rationale, rule, err, {"attempt": time.perf_counter() - t1})
                )
                if budget.cut_short(err):
                    stopped = budget.reached("attempt", len(attempts))
                run = None
                break
            except WrapperError as err:  # consolidation cannot combine the ranks' outputs
                problems = [problem_from_error(err)]
                timings = {"attempt": time.perf_counter() - t1}
                attempts.append(_output_attempt(index, current, rationale, rule, problems, reference, meta, timings))
                run = None
                break
            timings = dict(run.timings)
            reused = False
        else:
            timings = {}
            reused = True
        timings["attempt"] = time.perf_counter() - t1
        attempt, raw, helpers = _evaluate(index, current, rationale, rule, run, reference, opts, reused, timings, meta)
        floor.judge(attempt, raw)  # within tolerance but far above round-off: suspicious, not passed
        attempt.system_health = system_health(run.records)
        attempt.atom_errors = _atom_errors(attempt, run, reused, reference, batch)
        attempts.append(attempt)
        _emit(progress, "attempt_finished", index=index, passed=attempt.passed, failing=attempt.failing_outputs)
        if attempt.passed or not auto_fix or (attempt.error is not None and attempt.error.phase == OUTPUT_PHASE):
            break
        if base is not None and rollback_if_worse(attempt, base[0]):
            fix_context = base[1]  # the next mutation starts from the better attempt's spec and run
            run = fix_context.run
        else:
            fix_context = FixContext(
                spec=current,
                verdicts=raw,
                reference=reference,
                run=run,
                helper_diagnostics=helpers,
                halo_completeness=attempt.halo_completeness.to_dict(),
                handler_counts=attempt.handler_counts,
                world_size=world_size,
                atol=atol,
                rtol=rtol,
                rank_disagreements=attempt.rank_disagreements,
                batch=batch,
            )
            base = (attempt, fix_context)
        proposal = propose(fix_context, tried)
        if proposal is None:
            break
        tried.add(proposal.spec.signature())
        current, rationale, rule, needs_run = proposal.spec, proposal.rationale, proposal.rule, proposal.needs_run
    best_index = best_attempt_index(attempts)  # None when the deadline passed before the first attempt
    best = attempts[best_index] if best_index is not None else None
    meta["timings"] = {"reference": t_reference, **_reference_phases(reference), "total": time.perf_counter() - t_start}
    report = TraceReport(
        ok=best is not None and best.passed and not best.degenerate,
        spec=best.spec if best is not None else current,
        attempts=attempts,
        next_action="",
        meta=meta,
        deadline=stopped,
        best_index=best_index,
    )
    report.receptive_field, report.roundoff = receptive, floor.record()
    report.sample_warnings = sample_warnings(batch, reference, current.output_kinds, atol)
    report.next_action = next_action(report)
    _emit(progress, "finished", ok=report.ok)
    return report
