"""`run_distributed`: start real `torch.distributed` ranks, run the wrapper under a spec, consolidate.

Ranks are started from a `forkserver` that has torch and distcheck preloaded (user code is imported
fresh in every rank), falling back to `spawn` where forkserver is unavailable. Each rank is its own
process-group leader and a child subreaper, and dies with the forkserver, which dies with this
process, however it dies (`lifeline`): a timeout, a cancellation, a dead peer or a dead owner kills
everything the ranks started. Ranks rendezvous through a file in a private run directory, never on a
network interface; `supervise` watches them and names the culprit when one fails or hangs.

Each run captures the caller's environment, working directory and import path when it starts
(`caller_context.CallerContext`); its job carries them to every rank, however the rank came to be
(forked now, a spare, prepared, resident), and the rank applies them before anything else; ranks
built under another context (prepared, resident) serve no run of this one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..batch import as_batch
from ..environment import read_settings
from ..option_check import check_options
from ..runtime.errors import SetupError
from ..runtime.factory import FactoryRef, resolve_factory
from ..runtime.rank_devices import resolve_backend, resolve_devices
from ..runtime.run_result import DistributedRun, RankLifecycle, assemble_run
from ..spec import MLIPSpec
from . import lifeline, run_dirs, spares
from .caller_context import CallerContext
from .forkserver import main_hidden, process_context
from .rank_main import _rank_entry
from .rank_source import NEW_RANKS, RankSource, RankWant
from .resident import ResidentRanks, result_name, retiring
from .spares.process import Spare
from .supervise import stop_all, supervise

__all__ = ["run_distributed"]


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
    ranks: RankSource = NEW_RANKS,
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
    `ranks` (`rank_source`) chooses where the ranks come from: new ones (the default; spares from the
    pool, forked ahead and warm, where it has them), spares that built this run's wrappers ahead, or
    ranks kept from the caller's earlier run (no new process, no rendezvous; the user's modules
    imported afresh, the global state put back), which also keep the ranks of a run that ends well
    for the next; a failed run stops them.
    `instrumentation` names a class (`"module:Class"`, built with `instrumentation_options`) whose
    `attach(wrapper, ctx, local_batch)` context wraps each rank's forward and whose `collect()`
    result (plain data and tensors) lands in `DistributedRun.instrumentation[rank]`.
    Every rank runs under this process's environment, working directory and `sys.path` as they are
    when this call starts (`caller_context`; `env` and distcheck's own rank variables on top), and
    prepared or resident ranks built under other ones are not used.
    """
    if read_settings().rank is not None:
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
    caller = CallerContext.capture()
    with lifeline.helpers_ignore_sigint():
        ctx = process_context(start_method)
    want = RankWant(
        ref.describe(),
        the_spec.distribution.torchscript,
        world_size,
        tuple(devices),
        resolved_backend,
        dict(env or {}),
        caller,
    )
    choice = ranks.choose(want)
    prepared, resident = choice.prepared, choice.keep_in
    job = {
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
        "resident": resident is not None,
        "caller": caller,
    }
    t_start = time.perf_counter()

    def finished(r: int, exitcode: int | None) -> None:
        if on_event:
            on_event("rank_finished", {"rank": r, "exitcode": exitcode})

    if choice.resident is not None:
        results = _run_resident(choice.resident, job, timeout_sec, on_event, finished)
        kept_run = assemble_run(
            results,
            the_spec,
            the_batch,
            backend=resolved_backend,
            devices=devices,
            timings={"start": 0.0, "ranks": time.perf_counter() - t_start, "total": time.perf_counter() - t_start},
        )
        kept_run.lifecycle = RankLifecycle.RESIDENT
        return kept_run
    if prepared is not None:
        prepared.take()
    procs: list[Any] = []
    keep = False
    run_dir = prepared.run_dir if prepared is not None else run_dirs.make_run_dir("run")
    try:  # from the directory's making on: a stop signal anywhere after it still removes it
        workdir = run_dir.path
        job["workdir"] = workdir
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
        results = _results(procs, workdir, timeout_sec, t_start, finished, resident=resident is not None)
        t_done = time.perf_counter()
        if resident is not None and not retiring(results):  # the ranks wait for the caller's next run
            resident.keep(procs, run_dir, want)
            keep = True
    except BaseException as exc:
        if not isinstance(exc, Exception):  # interrupted: this process is stopping, so is its pool
            lifeline.stop_forkserver()
        raise
    finally:
        if not keep:
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
    if choice.lifecycle is RankLifecycle.PREPARED:
        run.lifecycle = RankLifecycle.PREPARED
    elif any(isinstance(p, Spare) for p in procs):
        run.lifecycle = RankLifecycle.SPARE
    return run


def _run_resident(
    resident: ResidentRanks,
    job: dict[str, Any],
    timeout_sec: float,
    on_event: Callable[[str, dict[str, Any]], None] | None,
    finished: Callable[[int, int | None], None],
) -> list[dict[str, Any]]:
    """One run served by the resident ranks: the job sent, their results read; a failure (or an
    interruption) stops them, as `run_distributed` stops the ranks it started."""
    t_start = time.perf_counter()
    try:
        workdir = resident.send(job)
        procs = resident.procs
        if on_event:
            for r, p in enumerate(procs):
                on_event("rank_started", {"rank": r, "pid": p.pid})
        results = _results(procs, workdir, timeout_sec, t_start, finished, resident=True)
        resident.kept_after(results)
        return results
    except BaseException as exc:
        if not isinstance(exc, Exception):
            lifeline.stop_forkserver()
        resident.release()
        raise


def _results(
    procs: Sequence[Any],
    workdir: str,
    timeout_sec: float,
    t_start: float,
    finished: Callable[[int, int | None], None],
    *,
    resident: bool,
) -> list[dict[str, Any]]:
    """Wait for every rank's result file (`supervise`: failures and timeouts raised) and load them."""
    supervise(
        procs,
        workdir,
        timeout_sec=timeout_sec,
        t_start=t_start,
        has_result=lambda r: os.path.exists(os.path.join(workdir, result_name(r))),
        on_finished=finished,
        resident=resident,
    )
    return [torch.load(os.path.join(workdir, result_name(r)), weights_only=True) for r in range(len(procs))]


# In the forkserver (which imports this module among its preload modules): die with the owner, taking
# every rank and what they started along. Does nothing in any other process.
lifeline.arm_forkserver()
