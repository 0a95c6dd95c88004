"""The distributed runtime distcheck validates: partition, halo exchange, handlers, adapters,
consolidation, and real `torch.distributed` ranks (`run_distributed`)."""

from .consolidate import Consolidated, RankRows, consolidate, infer_output_kind
from .context import RankContext, current_context
from .errors import DistributedError, Frame, RankFailure, RankTimeout, SetupError
from .factory import FactoryError, FactoryRef, load_object, resolve_factory
from .launch import DistributedRun, RankRecord, resolve_backend, resolve_devices, run_distributed
from .local_batch import LocalBatch, make_local_batch
from .model import DEFAULT_SKIN, DistributedModel, WrapperError, build_rank_context, resolve_halo_width
from .partition import Partition, RankPartition, partition_batch

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
    "run_distributed",
]
