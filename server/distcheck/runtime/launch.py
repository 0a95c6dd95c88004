"""`run_distributed`: start real `torch.distributed` ranks, run the wrapper under a spec, consolidate.

Ranks are started from a `forkserver` that has torch and distcheck preloaded (user code is imported
fresh in every rank), falling back to `spawn` where forkserver is unavailable. Each rank is its own
process-group leader and a child subreaper, and dies with the forkserver, which dies with this
process, however it dies (`lifeline`): a timeout, a cancellation, a dead peer or a dead owner kills
everything the ranks started. Ranks rendezvous through a file in a private run directory, never on a
network interface; `supervise` watches them and names the culprit when one fails or hangs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch

from ..batch import Batch, as_batch
from ..option_check import check_options
from ..report import UnroutedOp
from ..spec import MLIPSpec
from . import beacon, lifeline, run_dirs, spares, spares_child
from .consolidate import Consolidated, RankRows, consolidate
from .errors import SetupError
from .factory import FactoryRef, resolve_factory
from .rank import NCCL_SAFE_ENV, configure_rank_process, error_record, forward_rank, prepare_rank
from .rank_devices import resolve_backend, resolve_devices
from .spares_prepared import PreparedRanks
from .spares_start import _CONTEXTS, BASE_PRELOAD, main_hidden, preload_modules, process_context
from .supervise import read_failure, stop_all, supervise

__all__ = [
    "BASE_PRELOAD",
    "NCCL_SAFE_ENV",
    "_CONTEXTS",
    "DistributedRun",
    "RankRecord",
    "assemble_run",
    "main_hidden",
    "preload_modules",
    "process_context",
    "read_failure",
    "run_distributed",
    "stop_all",
    "write_error",
]


@dataclass
class RankRecord:
    """What one rank held and did: atom counts, handler firings, timings, peak memory, and the
    aggregations no handler routed (`unrouted`)."""

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
    unrouted: list[UnroutedOp] = field(default_factory=list)

    def __post_init__(self) -> None:
        # ranks send plain dicts (their results are loaded with weights_only=True)
        self.unrouted = [u if isinstance(u, UnroutedOp) else UnroutedOp.from_dict(u) for u in self.unrouted]


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
    built_ahead: bool = False
    """Whether the ranks were spares that built their wrappers before the run (`prepared`)."""

    def reconsolidate(self, spec: MLIPSpec) -> Consolidated:
        """Consolidate the same rank outputs under another spec (no new run: pure post-processing)."""
        return consolidate(self.rank_outputs, self.rows, spec, self.num_atoms, self.num_systems)

    @property
    def rank_phases(self) -> dict[str, float]:
        """Each phase a rank timed (`rendezvous`, `factory`, `wait_peers`, `forward`, `collectives`), its
        slowest rank's seconds, as `rank_<phase>`."""
        slowest: dict[str, float] = {}
        for rec in self.records:
            for k, v in rec.timings.items():
                slowest[f"rank_{k}"] = max(slowest.get(f"rank_{k}", 0.0), float(v))
        return slowest

    @property
    def handler_counts(self) -> dict[str, int]:
        """Handler firings summed over ranks."""
        total: dict[str, int] = {}
        for rec in self.records:
            for k, v in rec.handler_counts.items():
                total[k] = total.get(k, 0) + v
        return total


# -- inside a rank ---------------------------------------------------------------------------------
def write_error(workdir: str, rank: int, record: dict[str, Any]) -> None:
    """Publish a rank's error record atomically: the parent may read it while the rank is still dying."""
    path = os.path.join(workdir, f"rank{rank}.error.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(record, fh)
    os.replace(path + ".tmp", path)


def start_child_process(workdir: str, name: str, owner: int | None) -> None:
    """First steps of a rank or reference process: die with its parent (`lifeline.arm_child`), lead
    its own process group, send stdout/stderr to `<name>.log` and start its beacon (phase, stack)."""
    lifeline.arm_child(owner)
    with contextlib.suppress(OSError):
        os.setpgrp()
    log_fd = os.open(os.path.join(workdir, f"{name}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    beacon.install(workdir, name)
    beacon.set_phase("starting")


def end_child_process(code: int) -> None:
    """Last step of a rank or reference process: kill whatever the model started and left running
    (in any process group or session: this process adopted their orphans), then exit with `code`."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        lifeline.kill_tree()
    finally:
        os._exit(code)  # never hang in interpreter teardown or a half-dead process group


def _rank_entry(rank: int, job: dict[str, Any]) -> None:
    """Body of a rank process (module level so forkserver/spawn can start it)."""
    workdir: str = job["workdir"]
    code = 1
    try:
        if not spares_child.started_in(workdir):  # a spare that built its wrapper ahead already did
            start_child_process(workdir, f"rank{rank}", job.get("owner"))
        result = _run_rank(rank, job)
        tmp = os.path.join(workdir, f"rank{rank}.pt.tmp")
        torch.save(result, tmp)
        os.replace(tmp, os.path.join(workdir, f"rank{rank}.pt"))
        beacon.set_phase("done")
        code = 0
    except BaseException as exc:  # report everything, including SystemExit from user code
        with contextlib.suppress(BaseException):
            write_error(workdir, rank, error_record(exc, job["devices"][rank]))
    finally:
        end_child_process(code)


def _run_rank(rank: int, job: dict[str, Any]) -> dict[str, Any]:
    import torch.distributed as dist

    workdir, world_size = job["workdir"], job["world_size"]
    device = torch.device(job["devices"][rank])
    configure_rank_process(rank, world_size, device, job.get("env", {}), loopback=True)
    t0 = time.perf_counter()
    beacon.set_phase("rendezvous")
    dist.init_process_group(
        job["backend"],
        init_method="file://" + os.path.join(workdir, "rendezvous"),
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=max(1.0, float(job["timeout"]))),
        device_id=device if job["backend"] == "nccl" else None,
    )
    rendezvous = time.perf_counter() - t0

    ahead = spares_child.prebuilt_for(
        job["factory"].describe(), MLIPSpec.from_dict(job["spec"]).distribution.torchscript, workdir
    )
    prepared = prepare_rank(
        rank, world_size, job if ahead is None else {**job, "factory": ahead}, device, beacon.set_phase
    )
    prepared.timings["rendezvous"] = rendezvous
    if ahead is not None:  # built while the reference ran: its own time, outside this run's wall time
        prepared.timings["factory"] = ahead.seconds
    result = forward_rank(prepared, beacon.set_phase)
    try:
        with beacon.collective("barrier"):
            dist.barrier()
        dist.destroy_process_group()
    except Exception:
        pass
    return result


# -- the parent ------------------------------------------------------------------------------------
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
    prepared: PreparedRanks | None = None,
    on_started: Callable[[], None] | None = None,
) -> DistributedRun:
    """Run `model_factory()` on `world_size` real ranks under `spec` and consolidate the outputs.

    Every rank imports the factory afresh, partitions the batch, runs the wrapper on its
    `[owned | halo]` rows with the spec's handlers and adapters, and returns its outputs; they are
    consolidated into global atom order per output kind. Raises `FactoryError` (lambda/closure
    factory), `OptionError` (a `world_size` or `timeout_sec` of the wrong type, or a timeout that is
    not a finite number > 0) or `SetupError` before anything starts, `DistributedError` when a rank
    fails (within moments of the failure; the others are killed; the culprit is `failures[0]`: a
    rank that raised outside a collective, died, or exited without a result comes before the ranks
    that saw it vanish) and `RankTimeout` when the ranks have not all returned `timeout_sec` after
    they were started (`timeout_sec` bounds this one run; the failure names the rank busy outside a
    collective, with its Python stack, before the ranks that waited for it in one). No rank, nor
    anything a rank started, outlives the call, nor this process however it ends.
    `on_event(name, info)` is called for `rank_started`/`rank_finished`.
    Ranks are spares (`spares`: forked ahead, warm) where the pool has them; `prepared` (from
    `spares_prepared.prepare_ranks`) are spares that built this run's wrappers ahead, used when they
    were built for this factory, TorchScript mode, world size and devices, else discarded.
    `on_started()` is called once every rank has been started, before the wait (a caller builds the
    next run's ranks ahead there, once this run has taken its spares).
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
    with lifeline.helpers_ignore_sigint():
        ctx = process_context(start_method)
    if prepared is not None and not prepared.matches(
        ref.describe(), the_spec.distribution.torchscript, world_size, devices
    ):
        prepared.discard()
        prepared = None
    if prepared is not None:
        prepared.take()
    run_dir = prepared.run_dir if prepared is not None else run_dirs.make_run_dir("run")
    workdir = run_dir.path
    job = {
        "workdir": workdir,
        "owner": os.getpid(),
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

    def finished(r: int, exitcode: int | None) -> None:
        if on_event:
            on_event("rank_finished", {"rank": r, "exitcode": exitcode})

    try:
        for r in range(world_size):
            name = f"distcheck-rank{r}"
            if prepared is not None:
                p = prepared.spares[r].bind(_rank_entry, (r, job), name)
            else:
                p = spares.process(ctx, devices[r], _rank_entry, (r, job), name)
            procs.append(p)  # before start: an interrupted start still gets stopped
            with main_hidden():
                p.start()
            if on_event:
                on_event("rank_started", {"rank": r, "pid": p.pid})
        t_started = time.perf_counter()
        if on_started is not None:
            on_started()
        supervise(
            procs,
            workdir,
            timeout_sec=timeout_sec,
            t_start=t_start,
            has_result=lambda r: os.path.exists(os.path.join(workdir, f"rank{r}.pt")),
            on_finished=finished,
        )
        t_done = time.perf_counter()
        results = [torch.load(os.path.join(workdir, f"rank{r}.pt"), weights_only=True) for r in range(world_size)]
    except BaseException as exc:
        if not isinstance(exc, Exception):  # interrupted: this process is stopping, so is its pool
            lifeline.stop_forkserver()
        raise
    finally:
        stop_all([*procs, *(prepared.spares[len(procs) :] if prepared is not None else [])])
        run_dir.remove()
    run = assemble_run(
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
    run.built_ahead = prepared is not None
    return run


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


# In the forkserver (which imports this module among its preload modules): die with the owner, taking
# every rank and what they started along. Does nothing in any other process.
lifeline.arm_forkserver()
