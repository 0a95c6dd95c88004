"""The first attempt, run ahead: while the reference runs, the ranks built ahead for it run the first
attempt under the spec the target's last validation started with (`spares.learned.first_spec_for`).

The ranks need nothing of the reference to run, only the comparison does, and most validations of a
target start from the same spec as its last one. So the first attempt's run overlaps the reference
instead of following it. Its run is used only when the spec inferred from this reference (before or
after the receptive-field measurement) is that same spec, and then whatever its outcome, a failure
included: its ranks ran beside the reference as the first attempt's ranks always do beside the
reference's receptive-field measurement. Otherwise it is dropped and the first attempt runs as usual
(on the same ranks, which that run kept resident when it ended well). It is dropped too when the
caller's environment, working directory or `sys.path` changed since it was launched
(`processes.caller_context`): its ranks ran under the old ones. Its progress events are held
back and replayed when the attempt takes the run, so the events keep their order: the reference
finished, then the attempt's ranks. Off with DISTCHECK_ATTEMPT_AHEAD=0, without spares, or without
resident ranks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..processes.caller_context import CallerContext
from ..processes.spares.learned import first_spec_for, record_first_spec
from ..runtime.errors import DistributedError
from ..runtime.model import WrapperError
from ..runtime.run_result import DistributedRun
from ..spec import MLIPSpec

__all__ = ["AttemptAhead", "planned_first_spec", "remember_first_spec"]

EventSink = Callable[[str, Mapping[str, Any]], None]
Outcome = DistributedRun | DistributedError | WrapperError


def _prior_signature(prior: Any) -> str:
    return MLIPSpec.coerce(prior).signature() if prior is not None else ""


def planned_first_spec(target: str, prior: Any) -> MLIPSpec | None:
    """The spec `target`'s last validation from the same `prior` ran its first attempt under, if any."""
    found = first_spec_for(target, _prior_signature(prior))
    if found is None:
        return None
    try:
        return MLIPSpec.from_dict(found)
    except Exception:  # written by another version of distcheck: no guess
        return None


def remember_first_spec(target: str, prior: Any, spec: MLIPSpec) -> None:
    """Record the spec this validation of `target` (from `prior`) ran its first attempt under."""
    record_first_spec(target, _prior_signature(prior), spec.to_dict())


@dataclass
class AttemptAhead:
    """One run of the ranks under `spec`, made while the reference runs (call it), taken by the first
    attempt when its spec is the same and the caller's context has not changed since (`take`)."""

    spec: MLIPSpec
    launch: Callable[[MLIPSpec, EventSink], DistributedRun]
    outcome: Outcome | None = None
    seconds: float = 0.0
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    caller: CallerContext | None = None

    def __call__(self) -> None:
        """Run the ranks now and keep the outcome: the run, or the rank failure or output problem that
        stopped it. Anything else it raises (a setup error) is dropped: the attempt meets it again."""
        t0 = time.perf_counter()
        self.caller = CallerContext.capture()  # what the run's ranks run under (`run_distributed` captures it too)
        try:
            self.outcome = self.launch(self.spec, lambda name, info: self.events.append((name, dict(info))))
        except (DistributedError, WrapperError) as err:
            self.outcome = err
        except Exception:
            self.outcome = None
        self.seconds = time.perf_counter() - t0

    @property
    def pending(self) -> bool:
        """Whether an outcome waits to be taken."""
        return self.outcome is not None

    def take(self, spec: MLIPSpec, emit: EventSink) -> Outcome | None:
        """The outcome, when the run was made under `spec` and the caller's context now (`CallerContext`)
        and it is still there (once), its held-back events sent to `emit` first; else None."""
        if self.outcome is None or spec.signature() != self.spec.signature():
            return None
        if self.caller != CallerContext.capture():  # never taken: the attempt runs its own ranks
            self.outcome = None
            return None
        outcome, self.outcome = self.outcome, None
        for name, info in self.events:
            emit(name, info)
        return outcome
