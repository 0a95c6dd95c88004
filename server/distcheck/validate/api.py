"""The library's entry points: `trace_and_validate` (ranks on GPUs) and `validate_on_cpu` (gloo on
the CPU). Both run the one pipeline (`engine.run_validation`: reference run, spec inference,
distributed runs, diff, auto-fix and diagnostics) and return a `TraceReport`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ..option_check import Tolerance
from ..options import option_values
from ..report import TraceReport
from ..spec import MLIPSpec
from .engine import ProgressCallback, run_validation
from .run_setup import DEFAULT_WATCHED_HELPERS, ValidationRequest

__all__ = ["DEFAULT_WATCHED_HELPERS", "ProgressCallback", "trace_and_validate", "validate_on_cpu"]


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

    Before any process starts, every option is checked (`distcheck.option_check.check_option`) and a bad
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
    options = option_values(locals())
    return run_validation(ValidationRequest(model_factory, sample_batch, spec=spec, **options), progress=progress)


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
    options = {**option_values(locals()), "device": "cpu", "backend": "gloo"}
    return run_validation(ValidationRequest(model_factory, sample_batch, spec=spec, **options), progress=progress)
