"""The body of a rank process `run_distributed` starts: its first and last steps, the run (or, for a
rank kept resident, the runs) it serves, its result and error files.

A rank first takes on its caller's environment, working directory and import path as the job carries
them (`caller_context`: the owner's at the start of the run, whatever process this is: forked now, a
spare, prepared, resident), then arms its lifeline, leads its own process group and logs to
`rank<r>.log` (`start_child_process`, also the reference process's first step), sets distcheck's own
rank variables on top of the caller's (`configure_rank_process`), rendezvouses through a file in the
run directory, builds and runs the wrapper (`rank.prepare_rank`, `rank.forward_rank`), publishes
`rank<r>.pt` atomically and exits, killing whatever the model started (`end_child_process`). A rank
of a run started with `"resident": True` in its job (`resident.ResidentRanks`) instead waits for the
next job after each result and serves it in the same process group, each run inside
`isolation.isolated_global_state()`, with the import path, environment and working directory put
back and the user's modules forgotten between runs (`resident.RankState`), then the next job's caller
context applied and the rank variables set again (`_enter_job`). An exception anywhere is written as
`rank<r>.error.json` (`write_error`) and ends the process.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

import torch

from ..runtime import beacon
from ..runtime.isolation import isolated_global_state
from ..runtime.rank import configure_rank_process, error_record, forward_rank, prepare_rank
from ..spec import MLIPSpec
from . import lifeline
from .caller_context import caller_of
from .resident import RETIRING, RankState, next_job, result_name
from .spares import child

__all__ = ["end_child_process", "start_child_process", "write_error"]


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
        caller = caller_of(job)
        if caller is not None:  # before anything imports the user's code
            caller.apply()
        if not child.started_in(workdir):  # a spare that built its wrapper ahead already did
            start_child_process(workdir, f"rank{rank}", job.get("owner"))
        _run_rank(rank, job)
        code = 0
    except BaseException as exc:  # report everything, including SystemExit from user code
        with contextlib.suppress(BaseException):
            write_error(workdir, rank, error_record(exc, job["devices"][rank]))
    finally:
        end_child_process(code)


def _run_rank(rank: int, job: dict[str, Any]) -> None:
    """Join the run's process group, serve its run (and, when resident, every later one), leave."""
    import torch.distributed as dist

    workdir, world_size = job["workdir"], job["world_size"]
    device = torch.device(job["devices"][rank])
    configure_rank_process(rank, world_size, device, job.get("env", {}), loopback=True)  # caller's applied
    ahead = _built_ahead(job)
    if ahead is not None and ahead.error is not None:
        # the factory failed while built ahead: say so now, before a rendezvous that would leave a peer
        # failing in the middle of connecting to this rank
        beacon.set_phase("factory")
        raise ahead.error
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
    served = 0
    before = RankState.take(device)
    while True:
        resident = bool(job.get("resident"))
        guard = isolated_global_state(on_unrestored=None) if resident else contextlib.nullcontext()
        with guard:  # what the model set (default dtype, generators, ...) does not reach the next run
            result = _one_run(rank, job, device, rendezvous)
        # a setting the model changed cannot be put back: this rank serves no other run (the owner reads
        # that from the result, so it never sends this process another job)
        result[RETIRING] = list(getattr(guard, "unrestored", None) or [])  # why, one line each ([]: it may)
        tmp = os.path.join(workdir, result_name(rank) + ".tmp")
        torch.save(result, tmp)
        os.replace(tmp, os.path.join(workdir, result_name(rank)))
        beacon.set_phase("done")
        if not resident or result[RETIRING]:
            break
        del result
        before.restore()  # path, environment, cwd; the user's modules forgotten: the next factory imports them
        served += 1
        job = next_job(workdir, served)
        _enter_job(rank, world_size, device, job)
        rendezvous = 0.0
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


def _enter_job(rank: int, world_size: int, device: torch.device, job: dict[str, Any]) -> None:
    """A resident rank's next job, after its state was put back: the job's caller context, then the
    rank's own variables on top, as a rank started for this job would have them."""
    caller = caller_of(job)
    if caller is not None:
        caller.apply()
    configure_rank_process(rank, world_size, device, job.get("env", {}), loopback=True)


def _built_ahead(job: dict[str, Any]) -> child.Prebuilt | None:
    """The wrapper a spare built ahead for this run (or what building it raised), else None."""
    torchscript = MLIPSpec.from_dict(job["spec"]).distribution.torchscript
    return child.prebuilt_for(job["factory"].describe(), torchscript, job["workdir"])


def _one_run(rank: int, job: dict[str, Any], device: torch.device, rendezvous: float) -> dict[str, Any]:
    """This rank's share of one run in the existing process group: the wrapper (built ahead by a spare
    when it was built for this run), the partition, the forward, then a barrier so no rank leaves a
    collective behind."""
    import torch.distributed as dist

    ahead = _built_ahead(job)
    prepared = prepare_rank(
        rank, job["world_size"], job if ahead is None else {**job, "factory": ahead}, device, beacon.set_phase
    )
    prepared.timings["rendezvous"] = rendezvous
    if ahead is not None:  # built while the reference ran: its own time, outside this run's wall time
        prepared.timings["factory"] = ahead.seconds
        child.forget_prebuilt()
    result = forward_rank(prepared, beacon.set_phase)
    with contextlib.suppress(Exception), beacon.collective("barrier"):
        dist.barrier()
    return result
