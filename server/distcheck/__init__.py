"""distcheck: does a machine-learning interatomic potential give the same answers domain-decomposed
over ranks as in one process — and if not, why, and what to change?

Names are loaded on first use, so `import distcheck.spec` (the editor daemon) never imports torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Batch": "distcheck.batch",
    "NeighborList": "distcheck.batch",
    "MLIPSpec": "distcheck.spec",
    "SpecError": "distcheck.spec",
    "DistributedError": "distcheck.runtime",
    "DistributedRun": "distcheck.runtime",
    "RankTimeout": "distcheck.runtime",
    "SetupError": "distcheck.runtime",
    "run_distributed": "distcheck.runtime",
    "TraceReport": "distcheck.report",
    "trace_and_validate": "distcheck.validate",
    "validate_on_cpu": "distcheck.validate",
    "validate_launched": "distcheck.validate",
}

__all__ = [
    "Batch",
    "DistributedError",
    "DistributedRun",
    "MLIPSpec",
    "NeighborList",
    "RankTimeout",
    "SetupError",
    "SpecError",
    "TraceReport",
    "__version__",
    "run_distributed",
    "trace_and_validate",
    "validate_launched",
    "validate_on_cpu",
]

if TYPE_CHECKING:
    from .batch import Batch, NeighborList
    from .report import TraceReport
    from .runtime import DistributedError, DistributedRun, RankTimeout, SetupError, run_distributed
    from .spec import MLIPSpec, SpecError
    from .validate import trace_and_validate, validate_launched, validate_on_cpu


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'distcheck' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
