"""Inside a spare: warm up, wait for one job, run it, exit.

A spare is forked from the rank pool's forkserver (torch and distcheck preloaded, CUDA never
initialised there) before any validation asks for it. It arms its lifeline at once (it dies with the
forkserver, which dies with the owner), leads its own process group, then warms what a rank pays for
on its first forward: its CUDA context on its device (module loading as the user set it, lazy by
default: eager loading costs several times lazy's time and GPU memory per spare, `bench/RESULTS_gpu.md`),
a first autograd pass there, the third-party packages the pool names (learned
from the target's previous validation) and the kernels of the operator families models are built from
(`spares.warmup`). Those only while no job has come: a spare claimed while it warms (a validation in a
process that had no warm spare yet) runs its job once its CUDA context is up, and the job loads what
it needs itself. It imports no user module. Then it waits on its pipe:

- `("build", {...})`: take on the caller context the order carries (the owner's environment,
  working directory and `sys.path` when the run was prepared: `caller_context`), become rank `rank`
  of a coming run (its log, beacon and rank variables in that run's directory), import the factory's
  module and build the wrapper now, keep it for the run;
- `("run", target, args, context)`: take on the caller context (the job's) and run `target(*args)`
  (a rank or reference body, which applies its job's context again first and ends the process);
- `("exit",)`, EOF, or nothing for `idle_timeout_s`: exit.

So each spare runs exactly one job: every rank still starts pristine, only earlier.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from ...runtime import beacon
from .. import lifeline
from ..caller_context import CallerContext
from . import warmup

if TYPE_CHECKING:
    import torch

__all__ = ["Prebuilt", "forget_prebuilt", "prebuilt_for", "spare_main", "started_in"]


@dataclass
class Prebuilt:
    """The wrapper a spare built ahead of its run (or what building it raised)."""

    factory: str
    torchscript: str
    workdir: str
    wrapper: Any
    error: BaseException | None
    seconds: float

    def load(self) -> Any:
        """Duck-types `FactoryRef.load`: a factory returning the prebuilt wrapper, or raising what the
        build raised (its traceback still points into the user's factory)."""

        def factory() -> Any:
            if self.error is not None:
                raise self.error
            return self.wrapper

        return factory


_prebuilt: Prebuilt | None = None
_started_in: str | None = None


def started_in(workdir: str) -> bool:
    """Whether this process already set itself up (log, beacon) as a child of run directory `workdir`."""
    return _started_in is not None and _started_in == workdir


def prebuilt_for(factory: str, torchscript: str, workdir: str) -> Prebuilt | None:
    """The wrapper built ahead for this factory, TorchScript mode and run, else None (built for
    something else: the caller builds afresh, which it may, since the module was imported under
    the same mode only when this matches)."""
    p = _prebuilt
    if p is None or (p.factory, p.torchscript, p.workdir) != (factory, torchscript, workdir):
        return None
    return p


def forget_prebuilt() -> None:
    """The run took the wrapper built ahead: a later run in this process (a resident rank's) builds its own."""
    global _prebuilt
    _prebuilt = None


def spare_main(conn: Connection, plan: dict[str, Any]) -> None:
    """Body of a spare process (module level so the forkserver can start it). Never returns."""
    code = 0
    try:
        lifeline.arm_child()
        with contextlib.suppress(OSError):
            os.setpgrp()  # out of the owner's foreground group: a Ctrl-C there is the owner's to handle
        _quiet()
        info = _warm(plan, lambda: _job_waiting(conn))
        with contextlib.suppress(OSError):  # claimed while warming: the owner sent its job and closed its end
            conn.send_bytes(pickle.dumps(("ready", info)))
        _serve(conn, float(plan.get("idle_timeout_s", 600.0)))
    except BaseException:
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            lifeline.kill_tree()
        os._exit(code)


def _quiet() -> None:
    """Until a job gives it a log, what the warm-up prints (package banners) goes nowhere."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def _job_waiting(conn: Connection) -> bool:
    """Whether the owner has already sent this spare its job (claimed while warming)."""
    try:
        return bool(conn.poll(0))
    except (OSError, EOFError):
        return False


def _warm(plan: dict[str, Any], job_waiting: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """Warm this spare: its CUDA context, then (unless its job has arrived meanwhile, which loads what
    it needs itself, so waiting for more of the warm-up would only delay it) a first autograd pass, the
    packages the pool names, the kernels of the common operator families (`spares.warmup`) and a
    reading of the memory it holds."""
    import torch  # preloaded by the forkserver; imported here so the owner can name spare_main without it

    t0 = time.perf_counter()
    phases: dict[str, float] = {}  # seconds per warm-up step, for `spares.report()` and the bench
    skipped: list[str] = []
    device = torch.device(str(plan.get("device", "cpu")))
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.init()  # type: ignore[no-untyped-call]
        phases["cuda_init"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    if job_waiting():
        skipped.append("autograd")
    else:
        warmup.warm_autograd(device)
        phases["autograd"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    failed: list[str] = []
    imported: list[str] = []
    for name in plan.get("packages", ()):
        if job_waiting():  # the job imports the packages its model needs
            skipped.append(name)
            continue
        try:
            importlib.import_module(name)
            imported.append(name)
        except BaseException as exc:  # a package that fails here fails in the rank again, with its log
            failed.append(f"{name}: {type(exc).__name__}")
    phases["packages"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    kernels = warmup.warm_kernels(device, job_waiting)
    skipped += kernels.skipped
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if kernels.warmed:
        phases["kernels"] = time.perf_counter() - t1
    warm_seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    if job_waiting():  # `nvidia-smi` takes up to seconds; only an idle spare's memory is reported
        skipped.append("memory_query")
        gpu: dict[str, Any] = {"gpu_bytes": 0, "gpu_bytes_source": "none"}
    else:
        gpu = _gpu_memory(device)
        phases["memory_query"] = time.perf_counter() - t1
    return {
        "pid": os.getpid(),
        "device": str(device),
        "warm_seconds": warm_seconds,
        "phases": phases,
        "skipped": skipped,
        "module_loading": os.environ.get("CUDA_MODULE_LOADING", ""),
        "packages": imported,
        "failed_imports": failed,
        "failed_kernels": kernels.failed,
        "memory_bytes": _own_memory(),
        **gpu,
    }


def _own_memory() -> int:
    """This process's proportional set size (shared pages of the fork counted by share), else its RSS."""
    try:
        with open("/proc/self/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _gpu_memory(device: torch.device) -> dict[str, Any]:
    """GPU memory this spare holds: its context and allocations as the driver counts them
    (`nvidia-smi` per process), else the caching allocator's reservation only."""
    if device.type != "cuda":
        return {"gpu_bytes": 0, "gpu_bytes_source": "none"}
    import subprocess

    import torch

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout
        for line in out.splitlines():
            pid, used = (s.strip() for s in line.split(",")[:2])
            if int(pid) == os.getpid():
                return {"gpu_bytes": int(used) * 1024 * 1024, "gpu_bytes_source": "nvidia-smi"}
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return {"gpu_bytes": int(torch.cuda.memory_reserved(device)), "gpu_bytes_source": "allocator"}


def _serve(conn: Connection, idle_timeout_s: float) -> None:
    while True:
        if not conn.poll(idle_timeout_s):
            return  # idle too long: exit, the owner refills when it needs spares again
        try:
            message = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return  # the owner closed its end (or is gone)
        kind = message[0]
        if kind == "build":
            _build(message[1])
        elif kind == "run":
            _, target, args, context = message
            _adopt(context)
            target(*args)  # a rank or reference body: ends the process itself
            return
        else:
            return


def _adopt(context: Any) -> None:
    """The caller's environment, working directory and import path the job carries (`CallerContext`),
    as a process the caller started when the run started would have had them."""
    if isinstance(context, CallerContext):
        context.apply()


def _build(order: dict[str, Any]) -> None:
    """Become rank `order["rank"]` of the run in `order["workdir"]` and build its wrapper now."""
    global _prebuilt, _started_in
    import torch

    from ...runtime.isolation import mark_before_user_code
    from ...runtime.model_build import build_wrapper
    from ...runtime.rank import configure_rank_process
    from ...runtime.torchscript import apply_torchscript_mode
    from ...spec import MLIPSpec
    from ..rank_main import start_child_process

    _adopt(order.get("caller"))  # before the factory's module is imported
    workdir, rank = order["workdir"], int(order["rank"])
    start_child_process(workdir, f"rank{rank}", order.get("owner"))
    _started_in = workdir
    device = torch.device(order["device"])
    configure_rank_process(rank, int(order["world_size"]), device, dict(order.get("env", {})), loopback=True)
    beacon.set_phase("factory")
    spec = MLIPSpec.from_dict(order["spec"])
    t0 = time.perf_counter()
    wrapper: Any = None
    error: BaseException | None = None
    mark_before_user_code()  # what the import changes in torch is this rank's first run's (isolation)
    try:
        apply_torchscript_mode(spec)  # before the factory's module is imported, as in a rank
        wrapper = build_wrapper(order["factory"], device)
    except BaseException as exc:  # raised again in the run, where the rank reports it
        error = exc
    _prebuilt = Prebuilt(
        factory=order["factory"].describe(),
        torchscript=spec.distribution.torchscript,
        workdir=workdir,
        wrapper=wrapper,
        error=error,
        seconds=time.perf_counter() - t0,
    )
    beacon.set_phase("built")
