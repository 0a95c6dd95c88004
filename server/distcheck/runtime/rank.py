"""What one rank does once its process group exists: build the wrapper, partition, run the forward
under the spec, and hand back its outputs and record.

Shared by the ranks `run_distributed` starts itself and by ranks a launcher such as `torchrun`
started (`distcheck.runtime.group`). Split in two so a caller can check that every rank got through
the setup before any of them enters a collective.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..batch import Batch
from ..environment import RANK
from ..spec import MLIPSpec
from . import beacon
from .cpu_share import share
from .factory import FactoryRef, load_object
from .model_build import build_wrapper, weights_fingerprint
from .torchscript import apply_torchscript_mode

__all__ = [
    "NCCL_SAFE_ENV",
    "PreparedRank",
    "configure_rank_process",
    "error_record",
    "forward_rank",
    "prepare_rank",
]

NCCL_SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
"""Set in every rank before its process group starts: NVLink multicast stays off (see docs/gpus.md)."""

PhaseCallback = Callable[[str], None]


def configure_rank_process(
    rank: int, local_world_size: int, device: torch.device, env: dict[str, str], *, loopback: bool
) -> None:
    """Environment, CPU threads and current CUDA device of a rank process, before its group starts.

    `local_world_size` is the number of ranks sharing this host's cores; `loopback` keeps gloo and
    NCCL on the loopback interface (every rank on this host) unless the user chose an interface.
    """
    os.environ.update(NCCL_SAFE_ENV)
    os.environ[RANK.name] = str(rank)
    if loopback:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    os.environ.update(env)
    torch.set_num_threads(share(local_world_size))
    if device.type == "cuda":
        torch.cuda.set_device(device)


@dataclass
class PreparedRank:
    """A rank ready for its forward: wrapper on the device, local batch, handlers, instrumentation."""

    rank: int
    device: torch.device
    wrapper: Any
    batch: Batch
    ctx: Any
    part: Any
    model: Any
    local: Any
    instrument: Any
    timings: dict[str, float] = field(default_factory=dict)
    weights: dict[str, list[float]] | None = None  # model_build.weights_fingerprint of the built wrapper


def prepare_rank(
    rank: int, world_size: int, job: dict[str, Any], device: torch.device, phase: PhaseCallback
) -> PreparedRank:
    """Build the wrapper with the job's factory, move the batch to `device`, partition it and wrap the
    model in the spec's handlers. Runs no collective, so a failure here cannot strand a peer."""
    from .model import DistributedModel, build_rank_context

    phase("factory")
    t1 = time.perf_counter()
    apply_torchscript_mode(MLIPSpec.from_dict(job["spec"]))  # before the factory's module is imported
    factory: FactoryRef = job["factory"]
    wrapper = build_wrapper(factory, device)
    weights = weights_fingerprint(wrapper)
    timings = {"factory": time.perf_counter() - t1}
    batch = Batch.from_state(job["batch"]).to(device)
    spec = MLIPSpec.from_dict(job["spec"])
    phase("partition")
    ctx, part = build_rank_context(batch, spec, wrapper, rank, world_size, group=None, device=device)
    model = DistributedModel(wrapper, spec, ctx, observe_dispatch=job.get("observe_dispatch", True))
    local = model.local_batch(batch)
    instrument = None
    if job.get("instrumentation"):
        instrument = load_object(job["instrumentation"])(job.get("instrumentation_options") or {})
    phase("ready")
    return PreparedRank(rank, device, wrapper, batch, ctx, part, model, local, instrument, timings, weights)


def forward_rank(prep: PreparedRank, phase: PhaseCallback) -> dict[str, Any]:
    """Wait for the peers, run the distributed forward and return this rank's outputs (on the CPU),
    its `[owned | halo]` row map, its record and its instrumentation. Enters collectives: every rank
    of the default process group must call it."""
    import torch.distributed as dist

    device, ctx = prep.device, prep.ctx
    timings = dict(prep.timings)
    t_ready = time.perf_counter()
    with beacon.collective("barrier"):
        dist.barrier()  # so the forward's timing does not include waiting for slower peers to start
    timings["wait_peers"] = time.perf_counter() - t_ready
    phase("forward")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t2 = time.perf_counter()
    attach = prep.instrument.attach(prep.wrapper, ctx, prep.local) if prep.instrument else contextlib.nullcontext()
    try:
        with attach:
            outputs = prep.model(prep.local)
    except BaseException as exc:
        _keep_partial(exc, prep)
        raise
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    timings["forward"] = time.perf_counter() - t2
    timings["collectives"] = ctx.timings.get("collectives", 0.0)
    phase("collect")
    rank = prep.rank
    record = {
        "rank": rank,
        "device": str(device),
        **prep.part.ranks[rank].counts(prep.batch.num_atoms),
        "per_system": prep.part.ranks[rank].per_system,
        "handler_counts": dict(ctx.handler_counts),
        "unrouted": ctx.unrouted_records(),
        "timings": timings,
        "requested_cutoffs": list(ctx.requested_cutoffs),
        "halo_width": float(ctx.halo_width),
        "peak_memory_bytes": int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else 0,
        "weights": prep.weights,
    }
    return {
        "outputs": {k: v.detach().to("cpu") for k, v in outputs.items()},
        "record": record,
        "local_ids": ctx.local_ids.cpu(),
        "owned_mask": ctx.owned_mask.cpu(),
        "instrumentation": prep.instrument.collect() if prep.instrument is not None else None,
    }


def _keep_partial(exc: BaseException, prep: PreparedRank) -> None:
    """Attach what the rank recorded before `exc` (handler counts, the instrumentation's `partial()`)
    to the exception, so `error_record` writes it out with the error."""
    partial: dict[str, Any] = {"handler_counts": {k: int(v) for k, v in prep.ctx.handler_counts.items()}}
    take = getattr(prep.instrument, "partial", None)
    if callable(take):
        with contextlib.suppress(Exception):
            partial["instrumentation"] = take()
    with contextlib.suppress(Exception):  # some exception types refuse new attributes
        exc.distcheck_partial = partial  # type: ignore[attr-defined]


def peak_memory(device: torch.device | str) -> int | None:
    """Peak GPU memory on `device` so far, for an out-of-memory report (None on the CPU)."""
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return None
    try:
        return int(torch.cuda.max_memory_allocated(dev))
    except Exception:
        return None


def error_record(exc: BaseException, device: torch.device | str) -> dict[str, Any]:
    """A failed rank's exception as plain data: type, message, frames, formatted traceback, peak memory,
    and `partial`: what the rank recorded before a forward raised (`{"handler_counts", "instrumentation"}`,
    JSON-ready), None when it raised elsewhere."""
    return {
        "partial": getattr(exc, "distcheck_partial", None),
        "type": type(exc).__name__,
        "message": str(exc),
        "frames": [
            {"file": os.path.abspath(f.filename), "line": f.lineno or 0, "function": f.name}
            for f in traceback.extract_tb(exc.__traceback__)
        ],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        "peak_memory_bytes": peak_memory(device),
    }
