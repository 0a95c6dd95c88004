"""The validation pipeline behind every entry point (`run_validation`): the reference run, spec
inference, the distributed attempts and auto-fix, the round-off floor, and the report.

What is settled before anything starts is `run_setup`'s; the runs it asks for (the reference, the
first attempt, each later one, the control run) are `executor.Executor`'s, which alone knows which
processes serve them; one attempt's record is `attempt_records`'.

Every change the pipeline makes to the spec as given is a fix its attempt records (`fix_record`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..option_check import strictest
from ..report import Attempt, DeadlineReached, ReceptiveField, TraceReport, best_attempt_index
from ..report.parts import WrapperInfo, view
from ..runtime.errors import DistributedError
from ..runtime.group import GroupSession
from ..runtime.run_result import DistributedRun, RankLifecycle
from ..spec import MLIPSpec
from .attempt_records import attempt_atom_errors, evaluate_run, failed_attempt, output_attempt, reference_outputs
from .autofix import FixContext, propose
from .deadline import Budget
from .executor import Executor, Outcome
from .field_cache import field_for
from .fix_record import FirstSpec, FixLedger, initial_spec
from .health import system_health
from .next_action import next_action
from .op_trace import MAX_DIAGNOSTIC_RUNS, name_from_run, needs_diagnostic_run
from .outputs import OUTPUT_PHASE, problem_from_error, reference_error
from .receptive import receptive_record
from .reference import ReferenceRun
from .rollback import rollback_if_worse
from .run_setup import RunSetup, ValidationRequest, check_tolerance_names, settle_run
from .sample_checks import sample_warnings
from .sensitivity import RoundoffMeter

__all__ = ["ProgressCallback", "run_validation"]

ProgressCallback = Callable[[str, Mapping[str, Any]], None]
"""`progress(event, info)`: the validator's progress events (`reference_started`, `attempt_finished`, ...)."""


def _emit(progress: ProgressCallback | None, event: str, **info: Any) -> None:
    if progress is not None:
        progress(event, info)


def _reference_phases(reference: Mapping[str, Any]) -> dict[str, float]:
    """The reference run's own phases as `meta.timings` keys (`reference_factory`, `reference_forward`,
    ...): what its child spent building, running, measuring the receptive field, and what the parent
    waited for its start, the first attempt's ranks to be handed out and the result."""
    return {f"reference_{k}": float(v) for k, v in dict(reference.get("timings") or {}).items()}


def run_validation(
    request: ValidationRequest, *, progress: ProgressCallback | None = None, session: GroupSession | None = None
) -> TraceReport:
    """The pipeline behind every entry point, for `request`. With `session` (rank 0 of a launched job)
    attempts run on the job's ranks and `world_size`, `device` and `backend` are the job's; otherwise
    the validation starts its own ranks (`Executor`)."""
    s = settle_run(request, session)
    budget = Budget(request.timeout_sec, request.deadline_sec, start=s.t_start)
    with Executor(request, s, budget, lambda name, info: _emit(progress, name, **info), session) as runs:
        _emit(progress, "reference_started")
        t0 = time.perf_counter()
        try:
            reference_run = runs.reference()
        except DistributedError as err:
            s.meta.timings = {"reference": time.perf_counter() - t0, "total": time.perf_counter() - s.t_start}
            prior = request.spec
            attempt = failed_attempt(
                0, MLIPSpec.coerce(prior) if prior is not None else MLIPSpec(), "reference run", None, err, {}
            )
            report = TraceReport(ok=False, spec=attempt.spec, attempts=[attempt], next_action="", meta=s.meta)
            report.deadline = budget.reached("reference", 0) if budget.cut_short(err) else None
            report.next_action = next_action(report)
            return report
        t_reference = time.perf_counter() - t0
        with reference_run:
            return _from_reference(request, s, reference_run, t_reference, budget, runs, progress)


def _field(reference_run: ReferenceRun, s: RunSetup) -> dict[str, Any]:
    """The receptive-field measurement of this validation: remembered for this model and sample
    (`field_cache`), else the reference child's."""
    return field_for(reference_run.field, s.ref.describe(), str(s.devices[0]), s.batch.to_state(), reference_run.result)


@dataclass
class _Attempts:
    """The attempts so far and what the next one starts from: its spec, rationale and rule, the run
    it may reuse (`needs_run` False: the same run under another consolidation), and the deadline
    when it stopped them. `fixes` keeps what each attempt changed from the spec as given."""

    current: MLIPSpec
    rationale: str
    receptive: ReceptiveField | None
    tried: set[str]
    fixes: FixLedger
    rule: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    run: DistributedRun | None = None
    needs_run: bool = True
    stopped: DeadlineReached | None = None

    def take_first(self, first: FirstSpec) -> None:
        """The first attempt starts from `first`: its spec, and what changed it from the spec given."""
        self.current, self.rationale, self.receptive, self.rule = (
            first.spec,
            first.rationale,
            first.receptive,
            first.rule,
        )
        self.fixes = FixLedger.start(first)

    def record(self, attempt: Attempt) -> None:
        """Add `attempt`, with its fixes and the fixes skipped before it (`FixLedger.stamp`)."""
        self.fixes.stamp(attempt)
        self.attempts.append(attempt)


def _from_reference(
    request: ValidationRequest,
    s: RunSetup,
    reference_run: ReferenceRun,
    t_reference: float,
    budget: Budget,
    runs: Executor,
    progress: ProgressCallback | None,
) -> TraceReport:
    """The attempts and the report once the reference has handed over its outputs (its child still
    measuring the receptive field: collected after the first attempt's ranks ran, see
    `reference_field`)."""
    reference, meta = reference_run.result, s.meta
    runs.remember_packages(reference)
    meta.skipped_helper_packages = [p for p in s.requested if p not in s.watched] + list(
        reference["helpers"].get("skipped", [])
    )
    meta.wrapper = view(WrapperInfo, reference["wrapper"])
    _emit(progress, "reference_finished", seconds=t_reference)
    first = initial_spec(reference, s, request.spec)
    current, meta.inference_notes = first.spec, first.notes
    check_tolerance_names(s.atol, s.rtol, current.output_kinds)
    problem = reference_error(reference, current, s.batch.num_atoms, s.batch.num_systems, meta)
    if problem is not None:  # the single-process outputs cannot be validated: no attempt is run
        meta.timings = {
            "reference": t_reference,
            **_reference_phases(reference),
            "total": time.perf_counter() - s.t_start,
        }
        attempt = failed_attempt(0, current, "reference run", None, problem, {})
        report = TraceReport(ok=False, spec=current, attempts=[attempt], next_action="", meta=meta)
        report.next_action = next_action(report)
        _emit(progress, "finished", ok=False)
        return report
    loop = _Attempts(current, first.rationale, first.receptive, {current.signature()}, FixLedger.start(first))
    loop.take_first(first)
    floor = RoundoffMeter(reference_outputs(reference), current.output_kinds, runs.control(), s.atol, s.rtol)
    _run_attempts(request, s, reference_run, budget, runs, floor, loop, progress)
    return _report(s, reference_run, t_reference, floor, loop, progress)


def _run_attempts(
    request: ValidationRequest,
    s: RunSetup,
    reference_run: ReferenceRun,
    budget: Budget,
    runs: Executor,
    floor: RoundoffMeter,
    loop: _Attempts,
    progress: ProgressCallback | None,
) -> None:
    """The attempts: the first under the inferred spec, then (with auto-fix) one per proposal, each
    starting from the best attempt so far, until one passes, none is proposed, the attempts run out,
    the outputs cannot be compared or the deadline passes."""
    reference = reference_run.result
    total = 1 + (request.max_fix_attempts if request.auto_fix else 0)
    base: tuple[Attempt, FixContext] | None = None  # the best attempt so far, which proposals start from
    diagnosed = 0  # diagnostic runs made (`op_trace`)
    while len(loop.attempts) < total:
        if budget.expired():  # the whole-validation deadline: no new attempt
            loop.stopped = budget.reached("between_attempts", len(loop.attempts))
            return
        index = len(loop.attempts)
        _emit(
            progress,
            "attempt_started",
            index=index,
            total=total,
            rule=loop.rule or "initial spec",
            rationale=loop.rationale,
        )
        t1 = time.perf_counter()
        reused = not loop.needs_run and loop.run is not None
        if reused:
            timings: dict[str, float] = {}
        else:
            outcome, timings = _attempt_run(index, request, s, reference_run, runs, loop)
            if not isinstance(outcome, DistributedRun):
                timings["attempt"] = time.perf_counter() - t1
                if isinstance(outcome, DistributedError):
                    loop.record(failed_attempt(index, loop.current, loop.rationale, loop.rule, outcome, timings))
                    if budget.cut_short(outcome):
                        loop.stopped = budget.reached("attempt", len(loop.attempts))
                else:
                    problems = [problem_from_error(outcome)]
                    loop.record(
                        output_attempt(
                            index, loop.current, loop.rationale, loop.rule, problems, reference, s.meta, timings
                        )
                    )
                loop.run = None
                return
            loop.run = outcome
        timings["attempt"] = time.perf_counter() - t1
        attempt, context = _evaluate(index, s, reference, floor, loop, reused, timings)
        if diagnosed < MAX_DIAGNOSTIC_RUNS and needs_diagnostic_run(attempt) and not budget.expired():
            diagnosed += 1  # the line the divergence starts at: the ranks once more, tracing their ops
            t_diagnose = time.perf_counter()
            found = runs.run(loop.current, op_trace=True)
            atol, rtol = strictest(s.opts["atol"]), strictest(s.opts["rtol"])
            name_from_run(attempt, found, reference, atol, rtol, time.perf_counter() - t_diagnose)
        loop.record(attempt)
        _emit(progress, "attempt_finished", index=index, passed=attempt.passed, failing=attempt.failing_outputs)
        if (
            attempt.passed
            or not request.auto_fix
            or (attempt.error is not None and attempt.error.phase == OUTPUT_PHASE)
        ):
            return
        if base is not None and rollback_if_worse(attempt, base[0]):
            context = base[1]  # the next mutation starts from the better attempt's spec and run
            loop.run = context.run
        else:
            base = (attempt, context)
        proposal = propose(context, loop.tried, skipped=attempt.skipped_fixes)
        if proposal is None:
            return
        loop.fixes.propose_from(base[0], proposal.spec, proposal.rule)
        loop.tried.add(proposal.spec.signature())
        loop.current, loop.rationale, loop.rule = proposal.spec, proposal.rationale, proposal.rule
        loop.needs_run = proposal.needs_run


def _attempt_run(
    index: int,
    request: ValidationRequest,
    s: RunSetup,
    reference_run: ReferenceRun,
    runs: Executor,
    loop: _Attempts,
) -> tuple[Outcome, dict[str, float]]:
    """The run of attempt `index` under `loop.current` and its timings. The first attempt's runs
    while the reference measures the receptive field, and again under the spec that measurement gives
    when it differs (`loop.current` is then that spec)."""
    field_wait: float | None = None
    ran_ahead: float | None = None
    if index == 0:

        def measured() -> MLIPSpec:
            reference = reference_run.result
            reference["receptive_field"] = _field(reference_run, s)
            first = initial_spec(reference, s, request.spec)
            loop.take_first(first)
            s.meta.inference_notes = first.notes
            return first.spec

        first = runs.first_run(loop.current, measured)
        loop.current = first.spec
        loop.tried.add(first.spec.signature())
        outcome, field_wait, ran_ahead = first.outcome, first.field_wait, first.ran_ahead
    else:
        outcome = runs.run(loop.current)
    # a run made while the reference ran: its wall time, not part of this attempt's
    ahead_timings = {"ran_ahead": ran_ahead} if ran_ahead is not None else {}
    if not isinstance(outcome, DistributedRun):
        return outcome, dict(ahead_timings)
    timings = {**outcome.timings, **outcome.rank_phases}
    if outcome.lifecycle is RankLifecycle.PREPARED:  # the ranks' factory ran before this attempt
        timings["factory_ahead"] = timings.pop("rank_factory", 0.0)
    if field_wait is not None:
        timings["field_wait"] = field_wait
    timings.update(ahead_timings)
    return outcome, timings


def _evaluate(
    index: int,
    s: RunSetup,
    reference: dict[str, Any],
    floor: RoundoffMeter,
    loop: _Attempts,
    reused: bool,
    timings: dict[str, float],
) -> tuple[Attempt, FixContext]:
    """Attempt `index`'s record from `loop.run` (compared, judged against the round-off floor: within
    tolerance but far above round-off is suspicious, not passed), and what a fix rule may look at."""
    run = loop.run
    assert run is not None
    t_evaluate = time.perf_counter()
    attempt, raw, helpers = evaluate_run(
        index, loop.current, loop.rationale, loop.rule, run, reference, s.opts, reused, timings, s.meta
    )
    control_before = floor.seconds
    floor.judge(attempt, raw)
    attempt.system_health = system_health(run.records)
    attempt.atom_errors = attempt_atom_errors(attempt, run, reused, reference, s.batch)
    timings["evaluate"] = time.perf_counter() - t_evaluate
    if floor.seconds != control_before:
        timings["control"] = floor.seconds
    context = FixContext(
        spec=loop.current,
        verdicts=raw,
        reference=reference,
        run=run,
        helper_diagnostics=helpers,
        halo_completeness=attempt.halo_completeness.to_dict(),
        handler_counts=attempt.handler_counts,
        world_size=s.world_size,
        atol=s.atol,
        rtol=s.rtol,
        rank_disagreements=attempt.rank_disagreements,
        batch=s.batch,
    )
    return attempt, context


def _report(
    s: RunSetup,
    reference_run: ReferenceRun,
    t_reference: float,
    floor: RoundoffMeter,
    loop: _Attempts,
    progress: ProgressCallback | None,
) -> TraceReport:
    """The report on the attempts: it stands on the best one (None when the deadline passed before the
    first), with the receptive field, the round-off floor, the sample's warnings and the next action."""
    reference, meta = reference_run.result, s.meta
    best_index = best_attempt_index(loop.attempts)
    best = loop.attempts[best_index] if best_index is not None else None
    meta.timings = {"reference": t_reference, **_reference_phases(reference), "total": time.perf_counter() - s.t_start}
    report = TraceReport(
        ok=best is not None and best.passed and not best.degenerate,
        spec=best.spec if best is not None else loop.current,
        attempts=loop.attempts,
        next_action="",
        meta=meta,
        deadline=loop.stopped,
        best_index=best_index,
    )
    receptive = loop.receptive
    if "receptive_field" not in reference:  # no attempt ran (the deadline): the measurement is still reported
        reference["receptive_field"] = _field(reference_run, s)
        receptive = receptive_record(reference)
    report.receptive_field, report.roundoff = receptive, floor.record()
    report.sample_warnings = sample_warnings(s.batch, reference, loop.current.output_kinds, s.atol)
    report.next_action = next_action(report)
    _emit(progress, "finished", ok=report.ok)
    return report
