"""`validate_launched`: the validation across the ranks of a job a launcher started (`torchrun` on one
node or many), one rank per GPU with NCCL by default."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..option_check import Tolerance, check_options
from ..options import option_values
from ..report import TraceReport
from ..runtime.group import GroupSession
from ..spec import MLIPSpec
from .engine import ProgressCallback, run_validation
from .run_setup import ValidationRequest

__all__ = ["validate_launched"]


def validate_launched(
    model_factory: Callable[..., Any] | str,
    sample_batch: Any,
    *,
    device: str | Sequence[str] = "auto",
    backend: str = "auto",
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
) -> TraceReport | None:
    """Validate across every rank of a launched job; call it on every rank with the same arguments.

    The job's size is the launcher's `WORLD_SIZE`. `device="auto"` gives each rank its own GPU
    (`cuda:LOCAL_RANK`, NCCL) when torch sees GPUs, else the CPU (gloo); `"cuda:N"` puts a node's ranks
    on one GPU (gloo). Rank 0 runs the single-process reference on its own device, infers and fixes
    the spec, and returns the `TraceReport`; the other ranks run its attempts and return None. The
    factory must be importable by reference on every node (a module-level function in a file or
    package present at the same path). Raises `SetupError` when not started by a launcher.
    `deadline_sec` stops starting attempts once passed (the job's `timeout_sec` is fixed when it joins);
    `allow_oversubscribe` is accepted for symmetry and has no effect: the launcher started the ranks.
    """
    check_options({"timeout_sec": timeout_sec, "deadline_sec": deadline_sec})  # before the group is joined
    given = option_values(locals())
    session = GroupSession.join(device=device, backend=backend, timeout_sec=timeout_sec)
    try:
        if not session.is_leader:
            session.serve()
            return None
        options = {**given, "world_size": session.world_size, "device": session.devices, "backend": session.backend}
        try:
            return run_validation(
                ValidationRequest(model_factory, sample_batch, spec=spec, **options), progress=progress, session=session
            )
        finally:
            session.stop()
    finally:
        session.close()
