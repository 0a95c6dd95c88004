"""The distributed runtime distcheck validates: what runs inside one rank. Partition, halo exchange,
handlers, adapters, consolidation and a rank's body (`rank`); the processes that run ranks are
`distcheck.processes`' (`run_distributed` is `distcheck.processes.launch`')."""

from typing import TYPE_CHECKING, Any

from ..lazy import lazy_attribute

# Names are loaded on first use: modules that import no torch (`launcher_env`, `frames`,
# `module_namespace`) must not pull torch in with the package.
_EXPORTS = {
    "Consolidated": "consolidate",
    "RankRows": "consolidate",
    "consolidate": "consolidate",
    "infer_output_kind": "consolidate",
    "RankContext": "context",
    "current_context": "context",
    "DistributedError": "errors",
    "Frame": "errors",
    "RankFailure": "errors",
    "RankTimeout": "errors",
    "SetupError": "errors",
    "FactoryError": "factory",
    "FactoryRef": "factory",
    "load_object": "factory",
    "resolve_factory": "factory",
    "DistributedRun": "run_result",
    "RankRecord": "run_result",
    "resolve_backend": "rank_devices",
    "resolve_devices": "rank_devices",
    "LocalBatch": "local_batch",
    "make_local_batch": "local_batch",
    "DEFAULT_SKIN": "model",
    "DistributedModel": "model",
    "WrapperError": "model",
    "build_rank_context": "model",
    "resolve_halo_width": "model",
    "Partition": "partition",
    "RankPartition": "partition",
    "partition_batch": "partition",
}

__all__ = [
    "DEFAULT_SKIN",
    "Consolidated",
    "DistributedError",
    "DistributedModel",
    "DistributedRun",
    "FactoryError",
    "FactoryRef",
    "Frame",
    "LocalBatch",
    "Partition",
    "RankContext",
    "RankFailure",
    "RankPartition",
    "RankRecord",
    "RankRows",
    "RankTimeout",
    "SetupError",
    "WrapperError",
    "build_rank_context",
    "consolidate",
    "current_context",
    "infer_output_kind",
    "load_object",
    "make_local_batch",
    "partition_batch",
    "resolve_backend",
    "resolve_devices",
    "resolve_factory",
    "resolve_halo_width",
]


if TYPE_CHECKING:
    from .consolidate import Consolidated, RankRows, consolidate, infer_output_kind
    from .context import RankContext, current_context
    from .errors import DistributedError, Frame, RankFailure, RankTimeout, SetupError
    from .factory import FactoryError, FactoryRef, load_object, resolve_factory
    from .local_batch import LocalBatch, make_local_batch
    from .model import DEFAULT_SKIN, DistributedModel, WrapperError, build_rank_context, resolve_halo_width
    from .partition import Partition, RankPartition, partition_batch
    from .rank_devices import resolve_backend, resolve_devices
    from .run_result import DistributedRun, RankRecord


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, globals(), name)
