"""The distributed runtime distcheck validates: what runs inside one rank. Partition, halo exchange,
handlers, adapters, consolidation and a rank's body (`rank`); the processes that run ranks are
`distcheck.processes`' (`run_distributed` is `distcheck.processes.launch`'). Nothing here imports
`distcheck.processes`, `validate`, `jobs` or `lsp`.

Modules
=======

One rank:

- `rank`: what a rank does once its process group exists (`prepare_rank`, `forward_rank`);
- `model`: `DistributedModel`, a single-process wrapper run on one rank's local batch under a spec;
- `model_build`: the user's model built alike in every process, and its weights' fingerprint;
- `factory`: model factories referenced by name (`FactoryRef`), imported afresh in every process;
- `partition`: the slab partition into owned, halo and remote atoms;
- `local_batch`: `LocalBatch`, a rank's rows: owned then halo, system by system;
- `context`: what one rank knows while it runs (`RankContext`);
- `rank_devices`: one device per rank and the backend for them;
- `cpu_share`: the CPU threads each process of a validation may use;
- `beacon`: what a running rank tells its parent: its phase, its stack on request (no torch);
- `errors`: `DistributedError`, `RankFailure`, `RankTimeout`, `SetupError`;
- `run_result`: `RankRecord`, `DistributedRun` and `RankLifecycle`, assembled from the ranks' results.

The handlers:

- `dispatch`: `HandlerMode`, the interception layer of named handlers;
- `scatter_ops`: one description of every scatter-like torch call, whatever its spelling;
- `reduce_handlers`: per-atom → per-system handlers;
- `edge_handlers`: per-edge → per-atom handlers (`halo_correction`, `owned_complete`);
- `exchange`: differentiable collectives (exact adjoints);
- `adapters`: third-party helper adapters, swapped in while a rank runs;
- `call_args`: arguments passed by keyword, read by position;
- `kernel_calls`: an undeclared `torch.ops` kernel read off its shapes;
- `observer`: `ScatterObserver`, below autograd: aggregations no handler saw;
- `op_trace`: `OpTracer`, the torch ops a forward issues from the user's code, each with its line and a fingerprint;
- `unrouted`: naming what no handler routed, with its source location;
- `autograd_functions`: aggregations inside the user's `torch.autograd.Function`s, routed exactly or named;
- `function_adjoint`: such a Function's backward, run to mirror the exchanges of its forward;
- `function_mark`: how an unrouted record names such a Function (no torch);
- `checkpoint_regions`: regions under `torch.utils.checkpoint`, recomputed through the handlers, counted once;
- `torchscript`: whether a rank runs TorchScript compiled or as Python;
- `consolidate`: per-rank outputs → global outputs, per output kind.

Shared with the owner's process:

- `pristine`: the torch functions distcheck's own comparison computes with, none replaceable;
- `isolation`: process-global state a validation may change, put back when it ends;
- `launcher_env`: where this process sits in a launcher's job (no torch);
- `group`: ranks a launcher started: join the job's group, run the attempts across it;
- `frames`: which traceback frame is the user's (no torch);
- `source`: where a Python object is defined, for the report's `file`/`line`;
- `module_namespace`: what a module in `sys.modules` holds, without loading it (no torch);
- `env_reads`: which environment variables the target reads (reference child);
- `file_reads`: which data files the target reads (reference child).
"""

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
