"""How a validation's runs of its ranks start, when it starts them itself (not a launcher's ranks):
its spares, asked for by its reference run (`Executor` drops them, or keeps them warm, when it ends);
what `RANK_INSTRUMENTATION` records in every rank; and `run_distributed`'s arguments for one run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..processes.launch import run_distributed
from ..processes.rank_source import ValidationRanks
from ..processes.resident import ResidentRanks
from ..processes.spares.learned import packages_for
from ..processes.spares.prepared import ValidationSpares
from ..runtime.factory import FactoryRef
from ..runtime.run_result import DistributedRun
from ..spec import MLIPSpec
from .deadline import Budget
from .run_setup import RunSetup, ValidationRequest

__all__ = ["RANK_INSTRUMENTATION", "instrumentation_options_for", "launch_ranks", "validation_spares"]

RANK_INSTRUMENTATION = "distcheck.validate.instrument:RankInstrumentation"
"""What every rank of a validation records: the watched helpers' calls, the layers' outputs."""


def validation_spares(
    ref: FactoryRef, devices: Sequence[str], world_size: int, prior: Any, later_attempts: bool
) -> ValidationSpares:
    """This validation's spares (with the packages the target's model imported last time), asked for
    by its reference run, which has the first attempt's ranks built while it runs."""
    planned = (MLIPSpec.coerce(prior) if prior is not None else MLIPSpec()).to_dict()
    packages = packages_for(ref.describe())
    ahead = ValidationSpares(ref, devices, world_size, packages, spec=planned, later_attempts=later_attempts)
    return ahead


def instrumentation_options_for(request: ValidationRequest, s: RunSetup, op_trace: bool = False) -> dict[str, Any]:
    """What `RANK_INSTRUMENTATION` records in every rank (the watched helpers that exist, layers; with
    `op_trace`, a diagnostic run's, the torch ops too)."""
    return {
        "helper_packages": s.watched,
        "helper_sample_every": request.helper_sample_every,
        "layer_diagnostic": request.layer_diagnostic,
        "op_trace": op_trace and request.layer_diagnostic,
    }


def launch_ranks(
    request: ValidationRequest,
    s: RunSetup,
    budget: Budget,
    ahead: ValidationSpares | None,
    resident: ResidentRanks | None,
    spec: MLIPSpec,
    on_event: Callable[[str, Mapping[str, Any]], None],
    op_trace: bool = False,
) -> DistributedRun:
    """One run of this validation's ranks under `spec` (started here, not by a launcher): the ranks
    built during the reference when they were built for it, else resident ones, else new ones; with
    `op_trace` (a diagnostic run) the ranks trace the torch ops too."""
    return run_distributed(
        s.ref,
        s.batch,
        spec,
        world_size=s.world_size,
        device=s.devices,
        backend=s.backend,
        timeout_sec=budget.run_timeout(clip=True),
        instrumentation=RANK_INSTRUMENTATION,
        instrumentation_options=instrumentation_options_for(request, s, op_trace),
        on_event=on_event,
        ranks=ValidationRanks(resident=resident, prepared=ahead.take() if ahead is not None else None),
    )
