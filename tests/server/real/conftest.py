"""Shared pieces of the real-model tests (AIMNet2, MACE, SchNet): warm pool, validation, round trip.

Each test module skips itself (`pytest.importorskip`) when its package is missing, so the suite stays
green anywhere; `test_packages.py` says which of them imported here.

The forkserver that distcheck forks every reference and rank process from preloads torch and
distcheck. Importing `aimnet.models` costs about 7 s of CPU per process on a 2-core machine, paid
again by every process of every attempt, so this conftest adds `examples.real.warm` (which imports
the three packages, ignoring failures) to that list: at collection, before any test starts the
forkserver, it starts it with DISTCHECK_PRELOAD set, then sets the variable back. The rest of the
session's environment is left as it was, so a CLI, daemon or runner that another test starts as a
subprocess does not import the three packages in its own forkserver (about 14 s on two busy cores,
which pushed fault tests past their deadlines). If a forkserver already exists, the tests are only
slower.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from distcheck import TraceReport, validate_on_cpu
from distcheck.processes.forkserver import _CONTEXTS, preload_modules, process_context
from distcheck.spec import MLIPSpec

WARM_MODULE = "examples.real.warm"


def _add_warm_preload() -> bool:
    """Ask distcheck's forkserver to preload `WARM_MODULE` (DISTCHECK_PRELOAD), unless its context exists.

    Not on a GPU machine: importing these packages initialises CUDA in the pool, and a process forked
    from it then fails with "CUDA error: initialization error" (measured on the H200).
    """
    if torch.cuda.is_available():
        return False
    if "forkserver" in _CONTEXTS:
        return WARM_MODULE in preload_modules()
    before = os.environ.get("DISTCHECK_PRELOAD")
    current = [m for m in (before or "").split(",") if m]
    os.environ["DISTCHECK_PRELOAD"] = ",".join([*current, WARM_MODULE] if WARM_MODULE not in current else current)
    try:
        process_context("forkserver")  # reads the preload list now; its imports go on in the background
    finally:
        if before is None:
            del os.environ["DISTCHECK_PRELOAD"]
        else:
            os.environ["DISTCHECK_PRELOAD"] = before
    return True


WARM_POOL = _add_warm_preload()


def validate(module: Any, world_size: int, **options: Any) -> TraceReport:
    """`validate_on_cpu` on a real-model module's factory and sample (fp64 models: tight tolerances)."""
    options.setdefault("atol", 1e-8)
    options.setdefault("rtol", 1e-6)
    return validate_on_cpu(module.model_factory, module.sample_batch(), world_size=world_size, **options)


def round_trip(report: TraceReport, module: Any, world_size: int, directory: Path, **options: Any) -> TraceReport:
    """Save `report.spec` to JSON, reload it, and validate again with that file and no auto-fix.

    Asserts that the reloaded spec is the same spec and that it passes on the first attempt.
    """
    path = directory / f"{module.__name__.rsplit('.', 1)[-1]}-ws{world_size}.distspec.json"
    report.spec.save(path)
    reloaded = MLIPSpec.load(path)
    assert reloaded.signature() == report.spec.signature()
    again = validate(module, world_size, spec=str(path), auto_fix=False, **options)
    assert again.ok, again.next_action
    assert len(again.attempts) == 1 and again.attempts[0].passed and again.fix_applied is None
    assert again.spec.signature() == report.spec.signature()
    return again


def flagged(report: TraceReport, index: int = 0) -> list[str]:
    """Qualified names of the helpers attempt `index` flagged as undeclared per-system reductions."""
    return [h.qualname for h in report.attempts[index].helper_diagnostics if h.suspected_gap]


def handled(report: TraceReport, index: int = -1) -> list[str]:
    """Qualified names of the declared helpers whose rank results add up to the reference."""
    return [h.qualname for h in report.attempts[index].helper_diagnostics if h.already_wrapped and h.consistency_passed]


def same_spec(spec: MLIPSpec, expected: Any) -> bool:
    """Whether `spec` means the same as `expected` (a spec or a spec dict such as a module's `SPEC`)."""
    return spec.signature() == MLIPSpec.coerce(expected).signature()
