"""`run_distributed`: start real `torch.distributed` ranks, run the wrapper under a spec, consolidate.

Ranks are started from a `forkserver` that has torch and distcheck preloaded (user code is imported
fresh in every rank), falling back to `spawn` where forkserver is unavailable. Each rank is its own
process-group leader, so a timeout, a cancellation or a dead peer kills everything it started.
Ranks rendezvous through a file in a private temporary directory, never on a network interface.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch

from .. import importguard
from ..batch import Batch, as_batch
from ..spec import MLIPSpec
from ..targets import check_options
from .consolidate import Consolidated, RankRows, consolidate
from .errors import DistributedError, Frame, RankFailure, RankTimeout, SetupError
from .factory import FactoryRef, resolve_factory
from .rank import NCCL_SAFE_ENV, configure_rank_process, error_record, forward_rank, prepare_rank

__all__ = [
    "NCCL_SAFE_ENV",
    "DistributedRun",
    "RankRecord",
    "assemble_run",
    "check_cuda_index",
    "resolve_backend",
    "resolve_devices",
    "run_distributed",
]


@dataclass
class RankRecord:
    """What one rank held and did: atom counts, handler firings, timings, peak memory."""

    rank: int
    device: str
    owned: int
    halo: int
    remote: int
    per_system: list[dict[str, int]]
    handler_counts: dict[str, int]
    timings: dict[str, float]
    requested_cutoffs: list[float]
    halo_width: float
    peak_memory_bytes: int = 0


@dataclass
class DistributedRun:
    """Consolidated outputs of a distributed run plus everything each rank reported."""

    outputs: dict[str, torch.Tensor]
    rank_outputs: list[dict[str, torch.Tensor]]
    records: list[RankRecord]
    rows: list[RankRows]
    spec: MLIPSpec
    kinds: dict[str, str]
    replica_spread: dict[str, float]
    world_size: int
    backend: str
    devices: list[str]
    num_atoms: int
    num_systems: int
    instrumentation: list[Any] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def reconsolidate(self, spec: MLIPSpec) -> Consolidated:
        """Consolidate the same rank outputs under another spec (no new run: pure post-processing)."""
        return consolidate(self.rank_outputs, self.rows, spec, self.num_atoms, self.num_systems)

    @property
    def handler_counts(self) -> dict[str, int]:
        """Handler firings summed over ranks."""
        total: dict[str, int] = {}
        for rec in self.records:
            for k, v in rec.handler_counts.items():
                total[k] = total.get(k, 0) + v
        return total


# -- devices and backends -------------------------------------------------------------------------
def resolve_devices(device: str | Sequence[str], world_size: int) -> list[str]:
    """One device string per rank. `"cpu"`, `"cuda:N"` (all ranks share it), `"cuda"` (one rank per
    visible GPU, needs world_size ≤ GPU count) or a list with one entry per rank."""
    if world_size < 1:
        raise SetupError(f"world_size must be >= 1, got {world_size}")
    if isinstance(device, str):
        if device == "cpu":
            return ["cpu"] * world_size
        if device == "cuda":
            count = torch.cuda.device_count()
            if count == 0:
                raise SetupError("device='cuda' but torch sees no GPU; use device='cpu' (validate_on_cpu)")
            if world_size > count:
                raise SetupError(
                    f"device='cuda' means one rank per GPU, but world_size={world_size} > {count} visible GPUs; "
                    "lower world_size or put ranks on one GPU with device='cuda:0'"
                )
            return [f"cuda:{i}" for i in range(world_size)]
        if device.startswith("cuda:"):
            check_cuda_index(device)
            return [device] * world_size
        raise SetupError(f"device {device!r} not understood; use 'cpu', 'cuda', 'cuda:N' or a list of those")
    devices = [str(d) for d in device]
    if len(devices) != world_size:
        raise SetupError(f"got {len(devices)} devices for world_size={world_size}; give one device per rank")
    for d in devices:
        if d.startswith("cuda:"):
            check_cuda_index(d)
        elif d != "cpu":
            raise SetupError(f"device {d!r} not understood; use 'cpu' or 'cuda:N'")
    return devices


def check_cuda_index(device: str) -> None:
    """Raise `SetupError` unless `device` is `cuda:N` with N below the number of GPUs torch sees."""
    try:
        index = int(device.split(":", 1)[1])
    except ValueError:
        raise SetupError(f"device {device!r} not understood; use 'cuda:N'") from None
    count = torch.cuda.device_count()
    if index >= count:
        raise SetupError(
            f"{device} requested but torch sees {count} GPU(s); "
            + ("use device='cpu' (validate_on_cpu)" if count == 0 else f"use cuda:0 … cuda:{count - 1}")
        )


def resolve_backend(backend: str, devices: Sequence[str]) -> str:
    """`gloo` or `nccl` for these devices; `auto` is gloo when ranks share a GPU or run on the CPU,
    NCCL when every rank has its own GPU. Raises `SetupError` for combinations that cannot work."""
    on_cuda = [d for d in devices if d.startswith("cuda")]
    if on_cuda and len(on_cuda) != len(devices):
        raise SetupError("ranks mix CPU and GPU devices; put every rank on the CPU or every rank on a GPU")
    shared = len(set(on_cuda)) < len(on_cuda)
    if backend == "auto":
        return "nccl" if on_cuda and not shared else "gloo"
    if backend == "gloo":
        return "gloo"
    if backend == "nccl":
        if not on_cuda:
            raise SetupError("backend='nccl' needs CUDA devices; use backend='gloo' on the CPU")
        if shared:
            raise SetupError(
                "backend='nccl' cannot run several ranks on one GPU: NCCL refuses it ('Duplicate GPU "
                "detected'). Use backend='gloo' (or 'auto') for ranks sharing a GPU, or give each rank its own "
                "GPU with device=['cuda:0', 'cuda:1', …]"
            )
        return "nccl"
    raise SetupError(f"backend {backend!r} not understood; use 'auto', 'gloo' or 'nccl'")


# -- the process pool ------------------------------------------------------------------------------
_CONTEXTS: dict[str, Any] = {}


BASE_PRELOAD: tuple[str, ...] = (
    "distcheck.runtime.forkserver_init",  # first: the import guard, before anything else is imported
    "torch",
    "torch.distributed",
    # torch imports these lazily on the first dispatch-mode op and the first autograd.grad under a
    # torch-function mode (about 1 s together); preloading keeps that out of every rank's forward.
    "torch._dynamo",
    "torch.fx.experimental.symbolic_shapes",
    "distcheck.runtime.launch",
    "distcheck.validate.instrument",
)


def preload_modules() -> list[str]:
    """What the forkserver imports once for all ranks: `BASE_PRELOAD` plus the comma-separated modules
    in DISTCHECK_PRELOAD (slow-to-import third-party packages such as `aimnet.models`). A module that
    fails to import there is skipped by multiprocessing; ranks still import user code afresh. A module
    that initialises CUDA on import must not be preloaded: processes forked from the pool then cannot
    use the GPU ("CUDA error: initialization error")."""
    extra = [m.strip() for m in os.environ.get("DISTCHECK_PRELOAD", "").split(",") if m.strip()]
    return [*BASE_PRELOAD, *(m for m in extra if m not in BASE_PRELOAD)]


def process_context(method: str | None = None) -> Any:
    """The multiprocessing context ranks start from: by default a warm forkserver (`preload_modules()`
    imported once, alive for the life of this process) where available, else spawn. `method` (or the
    environment variable DISTCHECK_START_METHOD) forces one."""
    method = method or os.environ.get("DISTCHECK_START_METHOD")
    if method is None:
        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    if method not in _CONTEXTS:
        ctx = mp.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(preload_modules())
        _CONTEXTS[method] = ctx
    _start_helpers(method)
    return _CONTEXTS[method]


def _start_helpers(method: str) -> None:
    """Start the forkserver and the resource tracker (both `python -c` processes, which would put
    the current directory first on their `sys.path`) from distcheck's private directory; each call
    after the first only checks that they are still alive."""
    from multiprocessing import forkserver, resource_tracker

    with importguard.private_cwd(), main_hidden():
        if method == "forkserver":
            forkserver.ensure_running()
        else:
            resource_tracker.ensure_running()


@contextlib.contextmanager
def main_hidden() -> Iterator[None]:
    """Keep multiprocessing from re-running the parent's `__main__` in each rank.

    Ranks import the factory by reference, so the parent's script is not needed there; re-running it
    would execute the user's top-level code once per rank.
    """
    main = sys.modules.get("__main__")
    saved: dict[str, Any] = {
        k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__
    }
    try:
        for k in saved:
            if k == "__spec__":
                main.__dict__[k] = None
            else:
                del main.__dict__[k]
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)


def _kill_group(proc: Any) -> None:
    if proc.pid is None:
        return
    for sig_target in (lambda: os.killpg(proc.pid, signal.SIGKILL), proc.kill):
        try:
            sig_target()
        except (ProcessLookupError, PermissionError, OSError, AttributeError):
            pass


def stop_all(procs: Sequence[Any]) -> None:
    for p in procs:
        if p.exitcode is None:
            _kill_group(p)
    for p in procs:
        p.join(timeout=5)
    for p in procs:
        # Grandchildren the rank started (data loaders, compilers) share its process group.
        try:
            if p.pid is not None:
                os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


# -- inside a rank ---------------------------------------------------------------------------------
def write_phase(workdir: str, rank: int, phase: str) -> None:
    path = os.path.join(workdir, f"rank{rank}.phase")
    with open(path + ".tmp", "w") as fh:
        fh.write(phase)
    os.replace(path + ".tmp", path)


def write_error(workdir: str, rank: int, record: dict[str, Any]) -> None:
    """Publish a rank's error record atomically: the parent may read it while the rank is still dying."""
    path = os.path.join(workdir, f"rank{rank}.error.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(record, fh)
    os.replace(path + ".tmp", path)


def _rank_entry(rank: int, job: dict[str, Any]) -> None:
    """Body of a rank process (module level so forkserver/spawn can start it)."""
    try:
        os.setpgrp()
    except OSError:
        pass
    workdir: str = job["workdir"]
    log_fd = os.open(os.path.join(workdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    code = 1
    try:
        result = _run_rank(rank, job)
        tmp = os.path.join(workdir, f"rank{rank}.pt.tmp")
        torch.save(result, tmp)
        os.replace(tmp, os.path.join(workdir, f"rank{rank}.pt"))
        write_phase(workdir, rank, "done")
        code = 0
    except BaseException as exc:  # report everything, including SystemExit from user code
        write_error(workdir, rank, error_record(exc, job["devices"][rank]))
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)  # never hang in interpreter teardown or a half-dead process group


def _run_rank(rank: int, job: dict[str, Any]) -> dict[str, Any]:
    import torch.distributed as dist

    workdir, world_size = job["workdir"], job["world_size"]
    device = torch.device(job["devices"][rank])
    configure_rank_process(rank, world_size, device, job.get("env", {}), loopback=True)
    t0 = time.perf_counter()
    write_phase(workdir, rank, "rendezvous")
    dist.init_process_group(
        job["backend"],
        init_method="file://" + os.path.join(workdir, "rendezvous"),
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=max(1.0, float(job["timeout"]))),
        device_id=device if job["backend"] == "nccl" else None,
    )
    rendezvous = time.perf_counter() - t0

    def phase(name: str) -> None:
        write_phase(workdir, rank, name)

    prepared = prepare_rank(rank, world_size, job, device, phase)
    prepared.timings["rendezvous"] = rendezvous
    result = forward_rank(prepared, phase)
    try:
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        pass
    return result


# -- the parent ------------------------------------------------------------------------------------
def read_failure(workdir: str, rank: int, exitcode: int | None) -> RankFailure:
    phase = "starting"
    try:
        with open(os.path.join(workdir, f"rank{rank}.phase")) as fh:
            phase = fh.read().strip() or phase
    except OSError:
        pass
    log_tail = ""
    try:
        with open(os.path.join(workdir, f"rank{rank}.log"), "rb") as fh:
            log_tail = fh.read()[-4000:].decode("utf-8", "replace")
    except OSError:
        pass
    err_path = os.path.join(workdir, f"rank{rank}.error.json")
    rec: dict[str, Any] | None = None
    try:
        with open(err_path) as fh:
            rec = json.load(fh)
    except (OSError, ValueError):
        pass
    if rec is not None:
        return RankFailure(
            rank=rank,
            type=rec["type"],
            message=rec["message"],
            phase=phase,
            frames=[Frame(**f) for f in rec["frames"]],
            traceback=rec["traceback"],
            exitcode=exitcode,
            log_tail=log_tail,
            peak_memory_bytes=rec.get("peak_memory_bytes"),
        )
    if exitcode is not None and exitcode < 0:
        try:
            signame = signal.Signals(-exitcode).name
        except ValueError:
            signame = f"signal {-exitcode}"
        message = f"rank {rank} was killed by {signame} during {phase!r} (out of memory or a crash in native code?)"
        kind = "RankKilled"
    else:
        message = f"rank {rank} exited with code {exitcode} during {phase!r} without a Python exception"
        kind = "RankExited"
    last = [line for line in log_tail.strip().splitlines() if line.strip()][-3:]
    if last:
        message += "; its last output: " + " | ".join(x.strip() for x in last)
    return RankFailure(rank=rank, type=kind, message=message, phase=phase, exitcode=exitcode, log_tail=log_tail)


def _failure_message(first: RankFailure, world_size: int) -> str:
    where = f" at {first.frames[-1].file}:{first.frames[-1].line}" if first.frames else ""
    others = " The other ranks were stopped." if world_size > 1 else ""
    return f"rank {first.rank} failed during {first.phase!r}: {first.type}: {first.message}{where}.{others}"


def run_distributed(
    model_factory: Callable[..., Any] | str | FactoryRef,
    batch: Any,
    spec: MLIPSpec | dict[str, Any] | str | os.PathLike[str],
    *,
    world_size: int = 2,
    device: str | Sequence[str] = "cpu",
    backend: str = "gloo",
    timeout_sec: float = 120.0,
    observe_dispatch: bool = True,
    instrumentation: str | None = None,
    instrumentation_options: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    start_method: str | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
) -> DistributedRun:
    """Run `model_factory()` on `world_size` real ranks under `spec` and consolidate the outputs.

    Every rank imports the factory afresh, partitions the batch, runs the wrapper on its
    `[owned | halo]` rows with the spec's handlers and adapters, and returns its outputs; they are
    consolidated into global atom order per output kind. Raises `FactoryError` (lambda/closure
    factory), `OptionError` (a `world_size` or `timeout_sec` of the wrong type, or a timeout that is
    not a finite number > 0) or `SetupError` before anything starts, `DistributedError` when a rank fails (within
    moments of the failure; the others are killed) and `RankTimeout` past `timeout_sec`. No rank
    process outlives the call. `on_event(name, info)` is called for `rank_started`/`rank_finished`.
    `instrumentation` names a class (`"module:Class"`, built with `instrumentation_options`) whose
    `attach(wrapper, ctx, local_batch)` context wraps each rank's forward and whose `collect()`
    result (plain data and tensors) lands in `DistributedRun.instrumentation[rank]`.
    """
    if os.environ.get("DISTCHECK_RANK") is not None:
        raise SetupError(
            "run_distributed was called inside a rank process: the module holding the factory starts a "
            'validation when imported. Guard that code with `if __name__ == "__main__":`'
        )
    check_options({"world_size": world_size, "timeout_sec": timeout_sec})  # OptionError: NaN, inf, <= 0, bool
    ref = resolve_factory(model_factory)
    the_batch = as_batch(batch)
    the_spec = MLIPSpec.coerce(spec)
    devices = resolve_devices(device, world_size)
    resolved_backend = resolve_backend(backend, devices)
    ctx = process_context(start_method)
    workdir = tempfile.mkdtemp(prefix="distcheck-run-")
    job = {
        "workdir": workdir,
        "world_size": world_size,
        "devices": devices,
        "backend": resolved_backend,
        "timeout": timeout_sec,
        "factory": ref,
        "batch": the_batch.to_state(),
        "spec": the_spec.to_dict(),
        "observe_dispatch": observe_dispatch,
        "instrumentation": instrumentation,
        "instrumentation_options": dict(instrumentation_options or {}),
        "env": dict(env or {}),
    }
    procs: list[Any] = []
    t_start = time.perf_counter()
    try:
        for r in range(world_size):
            p = ctx.Process(target=_rank_entry, args=(r, job), name=f"distcheck-rank{r}", daemon=False)
            with main_hidden():
                p.start()
            procs.append(p)
            if on_event:
                on_event("rank_started", {"rank": r, "pid": p.pid})
        t_started = time.perf_counter()
        deadline = t_start + timeout_sec
        pending = {p.sentinel: (r, p) for r, p in enumerate(procs)}
        while pending:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                running = [r for r, p in pending.values()]
                failures = [read_failure(workdir, r, None) for r in running]
                phases = ", ".join(f"rank {f.rank} in {f.phase!r}" for f in failures)
                stop_all(procs)
                raise RankTimeout(
                    f"timed out after {timeout_sec:g} s ({phases}); every rank was killed. A rank blocked in "
                    "'forward' usually waits in a collective its peers never reached (ranks took different "
                    "code paths); otherwise raise timeout_sec.",
                    failures,
                )
            ready = multiprocessing.connection.wait(list(pending), timeout=min(remaining, 1.0))
            for sentinel in ready:
                r, p = pending.pop(sentinel)
                p.join()
                if on_event:
                    on_event("rank_finished", {"rank": r, "exitcode": p.exitcode})
                if p.exitcode != 0:
                    first = read_failure(workdir, r, p.exitcode)
                    stop_all(procs)
                    others = [
                        read_failure(workdir, o, procs[o].exitcode)
                        for o in range(world_size)
                        if o != r and os.path.exists(os.path.join(workdir, f"rank{o}.error.json"))
                    ]
                    raise DistributedError(_failure_message(first, world_size), [first, *others])
        t_done = time.perf_counter()
        results = [torch.load(os.path.join(workdir, f"rank{r}.pt"), weights_only=True) for r in range(world_size)]
    finally:
        stop_all(procs)
        shutil.rmtree(workdir, ignore_errors=True)
    return assemble_run(
        results,
        the_spec,
        the_batch,
        backend=resolved_backend,
        devices=devices,
        timings={
            "start": t_started - t_start,
            "ranks": t_done - t_started,
            "total": time.perf_counter() - t_start,
        },
    )


def assemble_run(
    results: Sequence[dict[str, Any]],
    spec: MLIPSpec,
    batch: Batch,
    *,
    backend: str,
    devices: Sequence[str],
    timings: dict[str, float],
) -> DistributedRun:
    """A `DistributedRun` from what every rank's `forward_rank` returned, consolidated under `spec`."""
    rows = [RankRows(local_ids=res["local_ids"], owned_mask=res["owned_mask"]) for res in results]
    rank_outputs = [res["outputs"] for res in results]
    merged = consolidate(rank_outputs, rows, spec, batch.num_atoms, batch.num_systems)
    return DistributedRun(
        outputs=merged.outputs,
        rank_outputs=rank_outputs,
        records=[RankRecord(**res["record"]) for res in results],
        rows=rows,
        spec=spec,
        kinds=merged.kinds,
        replica_spread=merged.replica_spread,
        world_size=len(results),
        backend=backend,
        devices=list(devices),
        num_atoms=batch.num_atoms,
        num_systems=batch.num_systems,
        instrumentation=[res.get("instrumentation") for res in results],
        timings=timings,
    )
