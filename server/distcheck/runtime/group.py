"""Ranks started by a launcher (`torchrun`, or anything that sets the `env://` variables): join the
job's process group and run validation attempts across it, one node or many. A job whose
`MASTER_ADDR` is a loopback address runs on one host and listens on loopback only: rank 0 hosts the
store there (unless the launcher's agent hosts it), and gloo and NCCL use the loopback interface
unless `GLOO_SOCKET_IFNAME` / `NCCL_SOCKET_IFNAME` name another.

Rank 0 leads. For every attempt it sends the job (factory reference, batch, spec) to every rank over
a gloo *control* group, runs its own share and gathers the others' results, so the engine above sees
the same `DistributedRun` as from `run_distributed`. The other ranks follow: they run what rank 0
sends until it says stop. The forward's collectives run on the default group — NCCL when each rank
has its own GPU — exactly as they would in production.

Every rank checks in after building its wrapper and partition, before any collective, so a failing
factory or import is reported by rank 0 instead of stranding its peers. A rank that fails *inside*
the forward leaves its peers waiting in a collective until `timeout_sec`; gloo then raises and the
failure is reported, NCCL's watchdog may instead end the job (the launcher then names the rank).
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch

from ..batch import Batch
from ..spec import MLIPSpec
from .errors import DistributedError, Frame, RankFailure, SetupError
from .factory import FactoryRef
from .launcher_env import LauncherEnv, launcher_env, loopback_address
from .rank import configure_rank_process, error_record, forward_rank, prepare_rank
from .rank_devices import check_cuda_index, resolve_backend
from .run_result import DistributedRun, RankLifecycle, assemble_run

__all__ = ["GroupSession", "LauncherEnv", "launcher_device", "launcher_env"]


def launcher_device(device: str | Sequence[str], env: LauncherEnv) -> str:
    """This rank's device. `"auto"`: its own GPU (`cuda:LOCAL_RANK`) when torch sees GPUs, else the CPU;
    `"cuda"`: its own GPU; `"cuda:N"`: GPU N, shared by every rank of the node; `"cpu"`; or a list with
    one device per rank of the node (indexed by `LOCAL_RANK`). Raises `SetupError` for a node with
    fewer GPUs than ranks."""
    if not isinstance(device, str):
        devices = [str(d) for d in device]
        if len(devices) != env.local_world_size:
            raise SetupError(
                f"got {len(devices)} devices but the launcher starts {env.local_world_size} ranks per node; give "
                "one device per rank of a node (the list is indexed by LOCAL_RANK)"
            )
        device = devices[env.local_rank]
        if device != "cpu" and not device.startswith("cuda:"):
            raise SetupError(f"device {device!r} in the list not understood; list entries are 'cpu' or 'cuda:N'")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return "cpu"
    count = torch.cuda.device_count()
    if device == "cuda":
        if count == 0:
            raise SetupError("device 'cuda' but torch sees no GPU on this node; use device 'cpu' (gloo)")
        if env.local_world_size > count:
            raise SetupError(
                f"the launcher starts {env.local_world_size} ranks on this node but torch sees {count} GPU(s); "
                f"start --nproc-per-node={count}, or share one GPU with device 'cuda:0' (gloo)"
            )
        return f"cuda:{env.local_rank}"
    if device.startswith("cuda:"):
        check_cuda_index(device)
        return device
    raise SetupError(f"device {device!r} not understood; use auto, cpu, cuda, cuda:N or one device per rank")


def _node_devices(device: str | Sequence[str], env: LauncherEnv) -> list[str]:
    """The devices of every rank on this node (each rank of the node computes the same list)."""
    return [launcher_device(device, dataclasses.replace(env, local_rank=r)) for r in range(env.local_world_size)]


def _loopback_store(env: LauncherEnv, address: str, timeout_sec: float) -> Any:
    """The job's store when its `MASTER_ADDR` is the loopback `address` (one host), rank 0 hosting it
    on that address only: given a host, torch's store still listens on every interface. None when the
    launcher's agent hosts the store (`TORCHELASTIC_USE_AGENT_STORE`): `env://` then only connects."""
    import os

    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return None
    timeout = timedelta(seconds=timeout_sec)
    if env.rank != 0:
        return TCPStore(address, env.master_port, env.world_size, False, timeout)
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.create_server((address, env.master_port), family=family)  # SO_REUSEADDR, as torch's
    port = int(listener.getsockname()[1])
    return TCPStore(address, port, env.world_size, True, timeout, master_listen_fd=listener.detach())


class GroupSession:
    """This process's place in a launched job: its device, the default group and the control group."""

    def __init__(self, env: LauncherEnv, device: str, backend: str, control: Any, placement: list[str]) -> None:
        self.env = env
        self.device = device
        self.backend = backend
        self._control = control
        self.placement = placement
        """`host/device` of every rank, in rank order."""
        self._open = True

    @property
    def rank(self) -> int:
        """This process's global rank."""
        return self.env.rank

    @property
    def world_size(self) -> int:
        """Ranks in the job."""
        return self.env.world_size

    @property
    def is_leader(self) -> bool:
        """Rank 0 runs the engine; the others follow."""
        return self.env.rank == 0

    @property
    def devices(self) -> list[str]:
        """Every rank's device, in rank order (without the host)."""
        return [p.split("/", 1)[1] for p in self.placement]

    @property
    def hosts(self) -> list[str]:
        """The distinct hosts of the job, in order of their first rank."""
        return list(dict.fromkeys(p.split("/", 1)[0] for p in self.placement))

    @classmethod
    def join(
        cls,
        *,
        device: str | Sequence[str] = "auto",
        backend: str = "auto",
        timeout_sec: float = 120.0,
        control_timeout_sec: float = 6 * 3600.0,
    ) -> GroupSession:
        """Join the launched job's process group (`env://` rendezvous). `timeout_sec` bounds every
        collective of a forward; `control_timeout_sec` how long followers wait for rank 0's next job
        (the reference run and the diagnosis happen meanwhile). The layout comes from this process's
        environment (`launcher_env()`), which `env://` reads too. Raises `SetupError` outside a launcher
        or for devices and backends that cannot work."""
        import torch.distributed as dist

        env = launcher_env()
        if env is None:
            raise SetupError(
                "not started by a launcher (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are unset); run under "
                "torchrun, or use trace_and_validate / validate_on_cpu, which start their own ranks"
            )
        if timeout_sec <= 0:
            raise SetupError(f"timeout_sec must be positive, got {timeout_sec}")
        if dist.is_initialized():
            raise SetupError("a default process group already exists in this process; join before creating one")
        mine = launcher_device(device, env)
        resolved = resolve_backend(backend, _node_devices(device, env))
        dev = torch.device(mine)
        loopback = loopback_address(env.master_addr)
        configure_rank_process(env.rank, env.local_world_size, dev, {}, loopback=loopback is not None)
        store = None if loopback is None else _loopback_store(env, loopback, timeout_sec)
        dist.init_process_group(
            resolved,
            init_method="env://" if store is None else None,
            store=store,
            rank=env.rank,
            world_size=env.world_size,
            timeout=timedelta(seconds=timeout_sec),
            device_id=dev if resolved == "nccl" else None,
        )
        control = dist.new_group(backend="gloo", timeout=timedelta(seconds=control_timeout_sec))
        placement: list[Any] = [None] * env.world_size
        dist.all_gather_object(placement, f"{socket.gethostname()}/{mine}", group=control)
        return cls(env, mine, resolved, control, [str(p) for p in placement])

    # -- the leader --------------------------------------------------------------------------------
    def run(
        self,
        factory: FactoryRef,
        batch: Batch,
        spec: MLIPSpec,
        *,
        instrumentation: str | None = None,
        instrumentation_options: dict[str, Any] | None = None,
        observe_dispatch: bool = True,
    ) -> DistributedRun:
        """Run one attempt on every rank of the job under `spec` (rank 0 only) and consolidate it.
        Raises `DistributedError` naming every rank that failed, like `run_distributed`."""
        if not self.is_leader:
            raise SetupError("only rank 0 runs attempts; the other ranks call serve()")
        job = {
            "factory": factory,
            "batch": batch.to_state(),
            "spec": spec.to_dict(),
            "observe_dispatch": observe_dispatch,
            "instrumentation": instrumentation,
            "instrumentation_options": dict(instrumentation_options or {}),
        }
        t0 = time.perf_counter()
        self._send(job)
        results = self._attempt(job)
        assert results is not None
        t_done = time.perf_counter()
        run = assemble_run(
            results,
            spec,
            batch,
            backend=self.backend,
            devices=self.devices,
            timings={"start": 0.0, "ranks": t_done - t0, "total": time.perf_counter() - t0},
        )
        run.lifecycle = RankLifecycle.LAUNCHED
        return run

    def stop(self) -> None:
        """Tell the followers there is nothing more to run (rank 0 only; idempotent)."""
        if self.is_leader and self._open:
            self._send(None)
            self._open = False

    # -- the followers -----------------------------------------------------------------------------
    def serve(self) -> int:
        """Run rank 0's attempts until it says stop (ranks other than 0). Returns how many ran."""
        import torch.distributed as dist

        if self.is_leader:
            raise SetupError("rank 0 leads the validation; serve() is for the other ranks")
        count = 0
        while True:
            box: list[Any] = [None]
            dist.broadcast_object_list(box, src=0, group=self._control)
            if box[0] is None:
                return count
            self._attempt(box[0])
            count += 1

    def close(self) -> None:
        """Leave the process group (every rank, at the end)."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()

    # -- every rank --------------------------------------------------------------------------------
    def _send(self, job: dict[str, Any] | None) -> None:
        import torch.distributed as dist

        dist.broadcast_object_list([job], src=0, group=self._control)

    def _attempt(self, job: dict[str, Any]) -> list[dict[str, Any]] | None:
        """This rank's share of one attempt; on rank 0 every rank's result (or a raised failure)."""
        import torch.distributed as dist

        where = ["starting"]

        def phase(name: str) -> None:
            where[0] = name

        dev = torch.device(self.device)
        prepared = None
        setup_error: dict[str, Any] | None = None
        try:
            prepared = prepare_rank(self.rank, self.world_size, job, dev, phase)
        except (Exception, SystemExit) as exc:
            setup_error = {**error_record(exc, dev), "phase": where[0]}
        statuses: list[Any] = [None] * self.world_size
        dist.all_gather_object(statuses, setup_error, group=self._control)
        if any(s is not None for s in statuses):
            if self.is_leader:
                self._raise([(r, s) for r, s in enumerate(statuses) if s is not None])
            return None
        assert prepared is not None
        payload: dict[str, Any]
        try:
            payload = {"result": forward_rank(prepared, phase)}
        except (Exception, SystemExit) as exc:
            payload = {"error": {**error_record(exc, dev), "phase": where[0]}}
        gathered: list[Any] | None = [None] * self.world_size if self.is_leader else None
        dist.gather_object(payload, gathered, dst=0, group=self._control)
        if not self.is_leader:
            return None
        assert gathered is not None
        failed = [(r, p["error"]) for r, p in enumerate(gathered) if "error" in p]
        if failed:
            self._raise(failed)
        return [p["result"] for p in gathered]

    def _raise(self, failed: list[tuple[int, dict[str, Any]]]) -> None:
        failures = [
            RankFailure(
                rank=r,
                type=rec["type"],
                message=rec["message"],
                phase=rec["phase"],
                frames=[Frame(**f) for f in rec["frames"]],
                traceback=rec["traceback"],
                peak_memory_bytes=rec.get("peak_memory_bytes"),
                partial=rec.get("partial"),
            )
            for r, rec in failed
        ]
        # A rank that timed out in a collective was waiting for the one that failed: name the cause first.
        failures.sort(key=lambda f: ("timed out" in f.message.lower(), f.rank))
        first = failures[0]
        where = f" at {first.frames[-1].file}:{first.frames[-1].line}" if first.frames else ""
        host = self.placement[first.rank].split("/", 1)[0]
        raise DistributedError(
            f"rank {first.rank} (on {host}) failed during {first.phase!r}: {first.type}: {first.message}{where}",
            failures,
        )
