"""Sensitivity beyond tolerance: errors far above the comparison's own round-off floor are suspicious.

atol/rtol say how far apart two runs may be; they say nothing about how far apart two *correct* runs
are. A bug whose effect is small (a halo one hop too shallow when far hops are weak) passes the
tolerances by orders of magnitude while being 10³–10⁶ times above what reordering the sums gives.
`RoundoffMeter` measures that floor inside the same validation: a control run under the `replicated`
policy (every rank holds every atom and runs `local`, so it differs from the reference only by
round-off and reduction order), compared with the reference like any attempt. An output within
tolerance whose error is more than `SUSPICIOUS_RATIO` times its floor is "suspicious": its verdict
gets status "suspicious", the attempt does not pass, and auto-fix treats the output as failing.

The control is cheap: it runs at most once per validation and only when an attempt within tolerance
has an error that could be suspicious at all, i.e. above `SUSPICIOUS_RATIO` times the smallest floor
there can be (the dtype's epsilon times the output's largest magnitude, and never below
`ATOL_FRACTION` of the output's atol). It runs without instrumentation. The floor is computed through
`runtime.pristine` (a torch function the user's module replaced here never moves it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ..batch import Batch
from ..processes.launch import run_distributed
from ..processes.rank_source import ValidationRanks
from ..processes.resident import ResidentRanks
from ..report import Attempt, OutputVerdict, RoundoffFloor, SuspiciousOutput, tolerance_for
from ..runtime import pristine as P
from ..runtime.errors import DistributedError
from ..runtime.factory import FactoryRef
from ..runtime.group import GroupSession
from ..runtime.model import WrapperError
from ..runtime.run_result import DistributedRun
from ..spec import MLIPSpec
from .deadline import Budget
from .diff import compare_outputs

__all__ = [
    "ATOL_FRACTION",
    "SUSPICIOUS_RATIO",
    "RoundoffMeter",
    "control_spec",
    "epsilon_floor",
    "make_control_runner",
]

SUSPICIOUS_RATIO = 100.0
"""An error within tolerance more than this many times its round-off floor is suspicious."""

ATOL_FRACTION = 1e-8
"""The floor is never below this fraction of the output's atol (an output that is exactly zero)."""

ControlRunner = Callable[[MLIPSpec], DistributedRun]


def control_spec(spec: MLIPSpec) -> MLIPSpec:
    """`spec` under the `replicated` policy (same consolidation, every rank holds every atom)."""
    control = spec.copy()
    control.distribution.policy.kind = "replicated"
    control.distribution.policy.scatter_mode = "local"
    control.distribution.policy.halo_width = None
    return control


def epsilon_floor(value: torch.Tensor, atol: float) -> float:
    """The smallest floor an output can have: its dtype's epsilon times its largest magnitude, at least
    `ATOL_FRACTION × atol`."""
    with P.shielded():
        v = P.detach(value)
        dtype = v.dtype if v.is_floating_point() else (P.float64 if v.dtype == P.complex128 else P.float32)
        scale = P.float_of(P.amax(P.abs(v))) if P.numel(v) else 0.0
    return max(float(P.finfo(dtype).eps) * scale, ATOL_FRACTION * atol)


class RoundoffMeter:
    """The round-off floor of one validation, measured on demand; judges attempts against it.

    `reference` are the reference outputs and `kinds` their output kinds; `run_control(spec)` runs the
    ranks under a spec (the validator passes `run_distributed`, or the launcher session, with the
    budget's timeout).
    """

    def __init__(
        self,
        reference: Mapping[str, torch.Tensor],
        kinds: Mapping[str, str],
        run_control: ControlRunner,
        atol: Any,
        rtol: Any,
        threshold: float = SUSPICIOUS_RATIO,
    ) -> None:
        self.reference = reference
        self.kinds = dict(kinds)
        self.run_control = run_control
        self.atol, self.rtol, self.threshold = atol, rtol, threshold
        self.control: dict[str, float | None] | None = None
        self.status = "not_needed"
        self.note = "no attempt within tolerance had an error above the dtype's round-off"
        self.seconds = 0.0

    def _atol(self, name: str, kind: str) -> float:
        tol = tolerance_for(self.atol, name, kind)
        return float(tol) if isinstance(tol, (int, float)) else 0.0

    def minimum(self, name: str, kind: str) -> float:
        """The smallest floor output `name` can have."""
        return epsilon_floor(self.reference[name], self._atol(name, kind))

    def floor(self, name: str, kind: str) -> float:
        """The floor output `name` is judged against: the control's error, at least `minimum`."""
        low = self.minimum(name, kind)
        measured = (self.control or {}).get(name)
        return max(low, measured) if measured is not None else low

    def _needed(self, verdicts: Mapping[str, OutputVerdict]) -> bool:
        return any(
            v.passed and v.max_abs_diff is not None and v.max_abs_diff > self.threshold * self.minimum(n, v.kind)
            for n, v in verdicts.items()
            if n in self.reference
        )

    def _measure(self, spec: MLIPSpec) -> None:
        t0 = time.perf_counter()
        try:
            run = self.run_control(control_spec(spec))
            raw = compare_outputs(run.outputs, self.reference, spec.output_kinds, self.atol, self.rtol)
        except (DistributedError, WrapperError) as err:
            self.status, self.control = "unavailable", {}
            self.note = f"the replicated control run failed ({type(err).__name__}: {str(err).splitlines()[0]})"
            return
        finally:
            self.seconds = time.perf_counter() - t0
        self.control = {n: (None if v["max_abs_diff"] is None else float(v["max_abs_diff"])) for n, v in raw.items()}
        self.status = "measured"
        self.note = "replicated control run: every rank holds every atom"

    def judge(self, attempt: Attempt, raw: dict[str, dict[str, Any]]) -> list[SuspiciousOutput]:
        """Mark the outputs of `attempt` that are within tolerance but suspicious (status "suspicious",
        not passed, in `attempt.verdicts`, the plain `raw` verdicts and `attempt.suspicious`), and
        fail the attempt when there is one. Runs the control the first time it can matter; an
        attempt with an error or outside tolerance is left alone."""
        if attempt.error is not None or not attempt.verdicts or not self._needed(attempt.verdicts):
            return []
        if self.control is None:
            self._measure(attempt.spec)
        if self.status != "measured":
            return []
        found: list[SuspiciousOutput] = []
        for name, v in attempt.verdicts.items():
            if not v.passed or v.max_abs_diff is None or name not in self.reference:
                continue
            floor = self.floor(name, v.kind)
            ratio = v.max_abs_diff / floor
            if ratio > self.threshold:
                found.append(SuspiciousOutput(name, v.kind, float(v.max_abs_diff), floor, ratio, self.threshold))
                v.status, v.passed = "suspicious", False
                if name in raw:
                    raw[name]["status"], raw[name]["passed"] = "suspicious", False
        if found:
            attempt.suspicious = found
            attempt.passed = False
        return found

    def record(self) -> RoundoffFloor:
        """What was measured, for the report."""
        names = list(self.reference)
        kinds = {n: self.kinds.get(n, "global") for n in names}
        return RoundoffFloor(
            status=self.status,
            floors={n: self.floor(n, kinds[n]) for n in names},
            control_abs_diff={n: (self.control or {}).get(n) for n in names},
            threshold=self.threshold,
            seconds=self.seconds,
            note=self.note,
        )


def make_control_runner(
    factory: FactoryRef,
    batch: Batch,
    *,
    world_size: int,
    devices: Sequence[str],
    backend: str,
    budget: Budget,
    session: GroupSession | None = None,
    resident: ResidentRanks | None = None,
) -> ControlRunner:
    """`run_control(spec)` for `RoundoffMeter`: the ranks under `spec` without instrumentation, on the
    launcher's job when `session` is given (else on the validation's `resident` ranks when they are
    kept), within what the budget leaves; past the deadline it raises `DistributedError` (the meter
    then reports the floor as unavailable)."""

    def run_control(spec: MLIPSpec) -> DistributedRun:
        if budget.expired():
            raise DistributedError("the deadline passed before the control run could start", [])
        if session is not None:
            return session.run(factory, batch, spec)
        return run_distributed(
            factory,
            batch,
            spec,
            world_size=world_size,
            device=list(devices),
            backend=backend,
            timeout_sec=budget.run_timeout(),
            ranks=ValidationRanks(resident=resident),
        )

    return run_control
