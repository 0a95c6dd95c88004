"""The runs one validation asks for, and nothing else: `Executor.reference()`, `first_run(...)`,
`run(spec)` (`run(spec, op_trace=True)`: a diagnostic run) and `control(spec)`.

Which processes serve them is decided here, from the settings the validation started with: its spares
(the reference's process and the first attempt's ranks built while the reference runs), its resident
ranks (kept from one run to the next), the first attempt run ahead of the reference, the share of the
cores this process keeps while they run, or, under a launcher, the job's own ranks (`GroupSession`).
The engine sees outcomes only; the process kinds and lifecycles are `distcheck.processes`'.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..processes.resident import ResidentRanks
from ..processes.spares.learned import record
from ..processes.spares.prepared import ValidationSpares
from ..processes.spares.settings import attempt_ahead_enabled, resident_enabled
from ..processes.spares.settings import enabled as spares_enabled
from ..runtime.cpu_share import share, threads_at_most
from ..runtime.errors import DistributedError
from ..runtime.group import GroupSession
from ..runtime.model import WrapperError
from ..runtime.run_result import DistributedRun
from ..spec import MLIPSpec
from .attempt_ahead import AttemptAhead, planned_first_spec, remember_first_spec
from .deadline import Budget
from .rank_runs import RANK_INSTRUMENTATION, instrumentation_options_for, launch_ranks, validation_spares
from .reference import ReferenceRun, run_reference
from .run_setup import RunSetup, ValidationRequest
from .sensitivity import ControlRunner, make_control_runner

__all__ = ["EventSink", "Executor", "FirstRun", "Outcome"]

EventSink = Callable[[str, Mapping[str, Any]], None]
Outcome = DistributedRun | DistributedError | WrapperError
"""What one run of the ranks gave: the run, or the rank failure or output problem that stopped it."""


@dataclass(frozen=True)
class FirstRun:
    """The first attempt's run: its outcome, the spec it ran under (the one the receptive field gave),
    the seconds spent waiting for that measurement, and the wall time of the run made ahead of the
    reference when that run was taken (None when it was not)."""

    outcome: Outcome
    spec: MLIPSpec
    field_wait: float
    ran_ahead: float | None


class Executor:
    """The runs of one validation (`request`, settled as `setup`) within `budget`; `emit` gets the
    ranks' progress events. Use it as a context manager: what it kept (resident ranks, spares not
    used, this process's thread share) is released when the validation ends, however it ends."""

    def __init__(
        self,
        request: ValidationRequest,
        setup: RunSetup,
        budget: Budget,
        emit: EventSink,
        session: GroupSession | None = None,
    ) -> None:
        self.request, self.setup, self.budget, self.emit, self.session = request, setup, budget, emit, session
        self._stack = contextlib.ExitStack()
        self._resident: ResidentRanks | None = None
        self._spares: ValidationSpares | None = None
        self._early: AttemptAhead | None = None

    # -- lifetime ------------------------------------------------------------------------------------
    def __enter__(self) -> Executor:
        request, s = self.request, self.setup
        if self.session is not None:  # a launched job's rank 0 is a rank: its job's ranks run everything
            return self
        self._stack.callback(self._close_spares)
        resident_on = resident_enabled(s.settings)  # the switches as the validation read them at its start
        planned = None  # the first attempt's spec last time: its ranks run it while the reference runs
        if resident_on and spares_enabled(s.settings) and attempt_ahead_enabled(s.world_size, s.settings):
            planned = planned_first_spec(s.ref.describe(), request.spec)
        # spares for later attempts only where the first attempt's ranks will not serve them
        later_in_spares = request.auto_fix and request.max_fix_attempts > 0 and not resident_on
        self._spares = validation_spares(s.ref, s.devices, s.world_size, planned or request.spec, later_in_spares)
        # this process shares the cores with the ranks and the reference child while they run
        self._stack.enter_context(threads_at_most(share(s.world_size + 2)))
        kept = self._stack.enter_context(ResidentRanks())
        self._resident = kept if resident_on else None
        if planned is not None and self._resident is not None:
            self._early = AttemptAhead(planned, self._launch)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _close_spares(self) -> None:
        if self._spares is not None:
            self._spares.close()

    # -- runs ----------------------------------------------------------------------------------------
    def reference(self) -> ReferenceRun:
        """The single-process reference run (raises `DistributedError` as a run of the ranks would);
        the first attempt's ranks are built, and may run ahead, while it runs."""
        request, s = self.request, self.setup
        return run_reference(
            s.ref,
            s.batch,
            device=s.devices[0],
            helper_packages=s.watched,
            helper_sample_every=request.helper_sample_every,
            layer_diagnostic=request.layer_diagnostic,
            timeout_sec=self.budget.run_timeout(),
            ahead=self._spares,
            while_running=self._early,
            ranks_beside=s.world_size if self._early is not None else 0,
        )

    def remember_packages(self, reference: Mapping[str, Any]) -> None:
        """What the spares of this target's next validation import ahead."""
        if self._spares is not None:
            record(self.setup.ref.describe(), dict(reference.get("imported_packages") or {}))

    def first_run(self, planned: MLIPSpec, measure: Callable[[], MLIPSpec]) -> FirstRun:
        """The first attempt's run: under `planned` (the spec inferred before the receptive field was
        measured) while `measure()` collects that measurement and returns the spec it gives; run again
        under that spec when it differs. The run made ahead of the reference is taken when its spec is
        the one in force."""
        outcome = self._taken_ahead(planned)
        ran_ahead = outcome is not None
        # a run made ahead under another spec may be the one the receptive field gives: measure first
        if outcome is None and not (self._early is not None and self._early.pending):
            outcome = self.run(planned)  # runs while the reference measures the receptive field
        t_field = time.perf_counter()
        measured = measure()
        field_wait = time.perf_counter() - t_field
        if outcome is None or measured.signature() != planned.signature():
            outcome = self._taken_ahead(measured)
            ran_ahead = outcome is not None
            if outcome is None:
                outcome = self.run(measured)
        if self._spares is not None:  # what the next validation of this target runs ahead
            remember_first_spec(self.setup.ref.describe(), self.request.spec, measured)
        seconds = self._early.seconds if ran_ahead and self._early is not None else None
        return FirstRun(outcome, measured, field_wait, seconds)

    def run(self, spec: MLIPSpec, op_trace: bool = False) -> Outcome:
        """One run of the ranks under `spec`, or what stopped it; with `op_trace`, a diagnostic run: the
        ranks also trace the torch ops their forward issues (`runtime.op_trace`)."""
        try:
            if self.session is not None:
                return self.session.run(
                    self.setup.ref,
                    self.setup.batch,
                    spec,
                    instrumentation=RANK_INSTRUMENTATION,
                    instrumentation_options=instrumentation_options_for(self.request, self.setup, op_trace),
                )
            return self._launch(spec, self.emit, op_trace)
        except (DistributedError, WrapperError) as err:  # WrapperError: consolidation cannot combine outputs
            return err

    def control(self) -> ControlRunner:
        """`run_control(spec)` for the round-off floor's control run, on the same ranks as the attempts."""
        s = self.setup
        return make_control_runner(
            s.ref,
            s.batch,
            world_size=s.world_size,
            devices=s.devices,
            backend=s.backend,
            budget=self.budget,
            session=self.session,
            resident=self._resident,
        )

    def _launch(self, spec: MLIPSpec, emit: EventSink, op_trace: bool = False) -> DistributedRun:
        spares = self._spares if not op_trace else None  # spares were built for the attempts' options
        return launch_ranks(self.request, self.setup, self.budget, spares, self._resident, spec, emit, op_trace)

    def _taken_ahead(self, spec: MLIPSpec) -> Outcome | None:
        return self._early.take(spec, self.emit) if self._early is not None else None
