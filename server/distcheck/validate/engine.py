"""The validation pipeline behind every entry point (`run_validation`): the reference run, spec
inference, the distributed attempts and auto-fix, the round-off floor, and the report.

What is settled before anything starts is `run_setup`'s; one attempt's record is `attempt_records`';
how its runs of the ranks start (its spares, the instrumentation, `run_distributed`'s arguments) is
`rank_runs`'; the first attempt run ahead of the reference is `attempt_ahead`'s.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..processes.resident import ResidentRanks
from ..processes.spares.learned import record
from ..processes.spares.prepared import ValidationSpares
from ..processes.spares.settings import attempt_ahead_enabled, resident_enabled
from ..processes.spares.settings import enabled as spares_enabled
from ..report import Attempt, DeadlineReached, ReceptiveField, TraceReport, best_attempt_index
from ..report.parts import WrapperInfo, view
from ..runtime.cpu_share import share, threads_at_most
from ..runtime.errors import DistributedError
from ..runtime.group import GroupSession
from ..runtime.model import WrapperError
from ..runtime.run_result import DistributedRun, RankLifecycle
from ..spec import MLIPSpec
from .attempt_ahead import AttemptAhead, planned_first_spec, remember_first_spec
from .attempt_records import attempt_atom_errors, evaluate_run, failed_attempt, output_attempt, reference_outputs
from .autofix import FixContext, propose
from .deadline import Budget
from .field_cache import field_for
from .health import system_health
from .inference import infer_spec
from .next_action import next_action
from .outputs import OUTPUT_PHASE, problem_from_error, reference_error
from .rank_runs import RANK_INSTRUMENTATION, instrumentation_options_for, launch_ranks, validation_spares, with_spares
from .receptive import apply_measured_field, receptive_record
from .reference import ReferenceRun, run_reference
from .rollback import rollback_if_worse
from .run_setup import RunSetup, ValidationRequest, check_tolerance_names, settle_run
from .sample_checks import sample_warnings
from .sensitivity import RoundoffMeter, make_control_runner

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


@with_spares
def run_validation(
    request: ValidationRequest, *, progress: ProgressCallback | None = None, session: GroupSession | None = None
) -> TraceReport:
    """The pipeline behind every entry point, for `request`. With `session` (rank 0 of a launched job)
    attempts run on the job's ranks and `world_size`, `device` and `backend` are the job's; otherwise
    `run_distributed` starts the ranks."""
    s = settle_run(request, session)
    timeout_sec, deadline_sec, spec = request.timeout_sec, request.deadline_sec, request.spec
    auto_fix, max_fix_attempts = request.auto_fix, request.max_fix_attempts
    helper_sample_every, layer_diagnostic = request.helper_sample_every, request.layer_diagnostic
    ref, batch, world_size, devices = s.ref, s.batch, s.world_size, s.devices
    watched, meta, t_start, prior = s.watched, s.meta, s.t_start, spec
    budget = Budget(timeout_sec, deadline_sec, start=t_start)
    # spares for later attempts only where the first attempt's ranks will not serve them (resident ranks off)
    later_in_spares = auto_fix and max_fix_attempts > 0 and not resident_enabled()
    resident_on = session is None and resident_enabled()
    planned = None  # the first attempt's spec last time: its ranks run it while the reference runs
    if resident_on and spares_enabled() and attempt_ahead_enabled(world_size):
        planned = planned_first_spec(ref.describe(), prior)
    ahead = None
    if session is None:
        ahead = validation_spares(ref, devices, world_size, planned or prior, later_in_spares)
    # the ranks of a run that ended well serve the next one (released however the validation ends);
    # this process shares the cores with them and the reference child (a launched job's rank 0 is a rank)
    caller_threads = threads_at_most(share(world_size + 2)) if session is None else contextlib.nullcontext()
    with ResidentRanks() as kept, caller_threads:
        resident = kept if resident_on else None
        early = None
        if planned is not None and ahead is not None and resident is not None:
            early = AttemptAhead(planned, functools.partial(launch_ranks, request, s, budget, ahead, resident))
        _emit(progress, "reference_started")
        t0 = time.perf_counter()
        try:
            reference_run = run_reference(
                ref,
                batch,
                device=devices[0],
                helper_packages=watched,
                helper_sample_every=helper_sample_every,
                layer_diagnostic=layer_diagnostic,
                timeout_sec=budget.run_timeout(),
                ahead=ahead,
                while_running=early,
                ranks_beside=world_size if early is not None else 0,
            )
        except DistributedError as err:
            meta.timings = {"reference": time.perf_counter() - t0, "total": time.perf_counter() - t_start}
            attempt = failed_attempt(
                0, MLIPSpec.coerce(prior) if prior is not None else MLIPSpec(), "reference run", None, err, {}
            )
            report = TraceReport(ok=False, spec=attempt.spec, attempts=[attempt], next_action="", meta=meta)
            report.deadline = budget.reached("reference", 0) if budget.cut_short(err) else None
            report.next_action = next_action(report)
            return report
        t_reference = time.perf_counter() - t0
        with reference_run:
            return _from_reference(
                request, s, reference_run, t_reference, budget, ahead, resident, early, progress, session
            )


def _initial_spec(
    reference: dict[str, Any], num_atoms: int, num_systems: int, prior: Any
) -> tuple[MLIPSpec, list[str], str, ReceptiveField | None]:
    """The first attempt's spec, the inference notes and its rationale, from what `reference` holds
    (with or without the receptive-field measurement: inference reads the measured depth, and an
    under-declared one widens a `local` halo before any rank runs)."""
    spec, notes = infer_spec(reference, num_atoms, num_systems, prior)
    rationale = "spec from the wrapper's distribution_spec and the reference trace"
    receptive = receptive_record(reference)
    spec, field_note = apply_measured_field(spec, receptive)
    if field_note:
        notes.append(field_note)
        rationale += f"; {field_note}"
    return spec, notes, rationale, receptive


def _field(reference_run: ReferenceRun, s: RunSetup) -> dict[str, Any]:
    """The receptive-field measurement of this validation: remembered for this model and sample
    (`field_cache`), else the reference child's."""
    return field_for(reference_run.field, s.ref.describe(), str(s.devices[0]), s.batch.to_state(), reference_run.result)


def _from_reference(
    request: ValidationRequest,
    s: RunSetup,
    reference_run: ReferenceRun,
    t_reference: float,
    budget: Budget,
    ahead: ValidationSpares | None,
    resident: ResidentRanks | None,
    early: AttemptAhead | None,
    progress: ProgressCallback | None,
    session: GroupSession | None,
) -> TraceReport:
    """The attempts and the report once the reference has handed over its outputs (its child still
    measuring the receptive field: collected after the first attempt's ranks ran, see
    `reference_field`). `early`: the first attempt's run made while the reference ran, taken when
    its spec is the first attempt's."""
    auto_fix, max_fix_attempts, prior = request.auto_fix, request.max_fix_attempts, request.spec
    ref, batch, world_size, devices, resolved_backend = s.ref, s.batch, s.world_size, s.devices, s.backend
    atol, rtol, watched, meta, opts, t_start = s.atol, s.rtol, s.watched, s.meta, s.opts, s.t_start
    reference = reference_run.result
    if ahead is not None:  # what this target's next validation's spares import ahead
        record(ref.describe(), dict(reference.get("imported_packages") or {}))
    meta.skipped_helper_packages = [p for p in s.requested if p not in watched] + list(
        reference["helpers"].get("skipped", [])
    )
    meta.wrapper = view(WrapperInfo, reference["wrapper"])
    _emit(progress, "reference_finished", seconds=t_reference)
    current, notes, rationale, receptive = _initial_spec(reference, batch.num_atoms, batch.num_systems, prior)
    meta.inference_notes = notes
    check_tolerance_names(atol, rtol, current.output_kinds)
    problem = reference_error(reference, current, batch.num_atoms, batch.num_systems, meta)
    if problem is not None:  # the single-process outputs cannot be validated: no attempt is run
        meta.timings = {
            "reference": t_reference,
            **_reference_phases(reference),
            "total": time.perf_counter() - t_start,
        }
        attempt = failed_attempt(0, current, "reference run", None, problem, {})
        report = TraceReport(ok=False, spec=current, attempts=[attempt], next_action="", meta=meta)
        report.next_action = next_action(report)
        _emit(progress, "finished", ok=False)
        return report
    attempts: list[Attempt] = []
    tried = {current.signature()}
    rule: str | None = None
    control = make_control_runner(
        ref,
        batch,
        world_size=world_size,
        devices=devices,
        backend=resolved_backend,
        budget=budget,
        session=session,
        resident=resident,
    )
    floor = RoundoffMeter(reference_outputs(reference), current.output_kinds, control, atol, rtol)
    instrumentation_options = instrumentation_options_for(request, s)

    def launch(spec: MLIPSpec) -> DistributedRun | DistributedError | WrapperError:
        """One run of the ranks under `spec`, or what stopped it."""
        try:
            if session is not None:
                return session.run(
                    ref,
                    batch,
                    spec,
                    instrumentation=RANK_INSTRUMENTATION,
                    instrumentation_options=instrumentation_options,
                )
            return launch_ranks(
                request, s, budget, ahead, resident, spec, lambda name, info: _emit(progress, name, **info)
            )
        except (DistributedError, WrapperError) as err:  # WrapperError: consolidation cannot combine outputs
            return err

    def taken_ahead(spec: MLIPSpec) -> DistributedRun | DistributedError | WrapperError | None:
        """The outcome of the run made ahead when it was made under `spec` (its progress events sent now)."""
        return early.take(spec, lambda name, info: _emit(progress, name, **info)) if early is not None else None

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
            field_wait, ran_ahead = 0.0, False
            if index == 0:
                outcome: DistributedRun | DistributedError | WrapperError | None = taken_ahead(current)
                ran_ahead = outcome is not None
                # a run made ahead under another spec may be the one the receptive field gives: measure first
                if outcome is None and not (early is not None and early.pending):
                    outcome = launch(current)  # runs while the reference measures the receptive field
                t_field = time.perf_counter()
                reference["receptive_field"] = _field(reference_run, s)
                field_wait = time.perf_counter() - t_field
                measured, notes, rationale, receptive = _initial_spec(
                    reference, batch.num_atoms, batch.num_systems, prior
                )
                meta.inference_notes = notes
                if outcome is None or measured.signature() != current.signature():
                    current = measured
                    tried.add(current.signature())
                    outcome = taken_ahead(current)
                    ran_ahead = outcome is not None
                    if outcome is None:
                        outcome = launch(current)
                if ahead is not None:  # what the next validation of this target runs ahead
                    remember_first_spec(ref.describe(), prior, current)
            else:
                outcome = launch(current)
            # a run made while the reference ran: its wall time, not part of this attempt's
            ahead_timings = {"ran_ahead": early.seconds} if ran_ahead and early is not None else {}
            if isinstance(outcome, DistributedError):
                timings = {**ahead_timings, "attempt": time.perf_counter() - t1}
                attempts.append(failed_attempt(index, current, rationale, rule, outcome, timings))
                if budget.cut_short(outcome):
                    stopped = budget.reached("attempt", len(attempts))
                run = None
                break
            if isinstance(outcome, WrapperError):
                problems = [problem_from_error(outcome)]
                timings = {**ahead_timings, "attempt": time.perf_counter() - t1}
                attempts.append(output_attempt(index, current, rationale, rule, problems, reference, meta, timings))
                run = None
                break
            run = outcome
            timings = {**run.timings, **run.rank_phases}
            if run.lifecycle is RankLifecycle.PREPARED:  # the ranks' factory ran before this attempt
                timings["factory_ahead"] = timings.pop("rank_factory", 0.0)
            if index == 0:
                timings["field_wait"] = field_wait
            timings.update(ahead_timings)
            reused = False
        else:
            timings = {}
            reused = True
        timings["attempt"] = time.perf_counter() - t1
        t_evaluate = time.perf_counter()
        attempt, raw, helpers = evaluate_run(
            index, current, rationale, rule, run, reference, opts, reused, timings, meta
        )
        control_before = floor.seconds
        floor.judge(attempt, raw)  # within tolerance but far above round-off: suspicious, not passed
        attempt.system_health = system_health(run.records)
        attempt.atom_errors = attempt_atom_errors(attempt, run, reused, reference, batch)
        timings["evaluate"] = time.perf_counter() - t_evaluate
        if floor.seconds != control_before:
            timings["control"] = floor.seconds
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
    meta.timings = {"reference": t_reference, **_reference_phases(reference), "total": time.perf_counter() - t_start}
    report = TraceReport(
        ok=best is not None and best.passed and not best.degenerate,
        spec=best.spec if best is not None else current,
        attempts=attempts,
        next_action="",
        meta=meta,
        deadline=stopped,
        best_index=best_index,
    )
    if "receptive_field" not in reference:  # no attempt ran (the deadline): the measurement is still reported
        reference["receptive_field"] = _field(reference_run, s)
        receptive = receptive_record(reference)
    report.receptive_field, report.roundoff = receptive, floor.record()
    report.sample_warnings = sample_warnings(batch, reference, current.output_kinds, atol)
    report.next_action = next_action(report)
    _emit(progress, "finished", ok=report.ok)
    return report
