"""distcheck: does a machine-learning interatomic potential give the same answers domain-decomposed
over ranks as in one process — and if not, why, and what to change?

Names are loaded on first use, so `import distcheck.spec` (the editor daemon) never imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .lazy import lazy_attribute

__version__ = "0.1.0"

_EXPORTS = {
    "Batch": "batch",
    "NeighborList": "batch",
    "MLIPSpec": "spec",
    "SpecError": "spec",
    "DistributedError": "runtime",
    "DistributedRun": "runtime",
    "RankTimeout": "runtime",
    "SetupError": "runtime",
    "run_distributed": "processes.launch",
    "TraceReport": "report",
    "trace_and_validate": "validate",
    "validate_on_cpu": "validate",
    "validate_launched": "validate",
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
    from .processes.launch import run_distributed
    from .report import TraceReport
    from .runtime import DistributedError, DistributedRun, RankTimeout, SetupError
    from .spec import MLIPSpec, SpecError
    from .validate import trace_and_validate, validate_launched, validate_on_cpu


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, globals(), name)
