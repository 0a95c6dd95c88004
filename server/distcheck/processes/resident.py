"""Resident ranks: a validation's ranks kept alive after a run that ended well, to run its next one.

A validation runs several runs of one factory on the same ranks and devices: its first attempt, the
auto-fix attempts after it, the control run of the round-off floor. Starting every run in fresh
processes pays, each time, for the process, the rendezvous and a first forward that loads kernels
lazily. A run given `ResidentRanks` keeps its ranks instead: once each rank has handed over its
result it waits in the run directory for the next job (`job.<n>.pt`), and the next run with the same
factory, world size, devices and backend sends its job there. The process group is the first run's.

Every run still starts pristine where it matters:

- the user's modules (`frames.is_user_file`: outside the standard library, installed packages, torch
  and distcheck) are forgotten after each run and imported afresh by the next one's factory, under its
  TorchScript mode (`torchscript.apply_torchscript_mode` switches either way);
- the wrapper is built afresh by the factory, and the spec's handlers and adapters are installed for
  the forward and removed after it, as in any rank;
- torch's, numpy's and Python's global state (default dtype, grad mode, determinism, generators, ...)
  is put back after each run (`isolation.isolated_global_state`), and so are the import path, the
  environment variables and the working directory (`RankState`); a run that changed what cannot be put
  back retires its ranks (`RETIRING` in their results, with why): torch's inter-op threads, and
  torch's own surface, which importing the user's module again would change a second time (a torch
  function or `torch.Tensor` method it wrapped, a global module hook, an op it registered:
  `isolation.torch_surface`). The next run then starts in fresh ranks, where that import applies
  once, as in a fresh process; the attempt's timings count the retired ranks
  (`run_result.RETIRED_TIMING`) and `DistributedRun.retired` says what changed.

Third-party packages stay imported, as they are in a spare. A run that fails (a rank raised, hung or
died) stops its ranks: the next run starts fresh ones. The owner releases the ranks when it ends,
however it ends (`release`); like every rank they die with the forkserver, which dies with the owner.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..runtime import beacon
from ..runtime.module_namespace import module_file
from . import run_dirs

if TYPE_CHECKING:
    from .rank_source import RankWant

__all__ = [
    "RETIRING",
    "RankState",
    "ResidentRanks",
    "forget_user_modules",
    "job_name",
    "next_job",
    "result_name",
    "retiring",
]

RETIRING = "retiring"
"""The key of a rank's result that says it serves no further run: the reasons its model changed process
state that cannot be put back or would change again on a re-import
(`isolation.GlobalStateGuard.unrestored`, one line each; [] or absent: it may serve another)."""

POLL_S = 0.002
"""How often a waiting rank looks for its next job."""


def retiring(results: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a rank of the run these results came from serves no further run (`RETIRING`)."""
    return any(r.get(RETIRING) for r in results)


def job_name(index: int) -> str:
    """The file of a run directory's `index`-th job sent to resident ranks (the first runs from the start)."""
    return f"job.{index}.pt"


def result_name(rank: int) -> str:
    """The file rank `rank` publishes its result of the current run in."""
    return f"rank{rank}.pt"


@dataclass
class ResidentRanks:
    """The ranks one validation keeps between its runs (none until a run kept some): the processes,
    their run directory, what they were started for and how many jobs they were sent."""

    procs: list[Any] = field(default_factory=list)
    run_dir: run_dirs.RunDir | None = None
    key: tuple[Any, ...] | None = None
    jobs: int = 0
    devices: tuple[str, ...] = ()

    def serves(self, want: RankWant) -> bool:
        """Whether ranks are kept, all alive, for a run needing `want` (factory, world size, devices,
        backend, rank environment and caller context)."""
        return self.run_dir is not None and self.key == _key(want) and all(p.exitcode is None for p in self.procs)

    def kept_after(self, results: Sequence[Mapping[str, Any]]) -> None:
        """After a run these ranks served: released now when a rank retired (`RETIRING`), else kept."""
        if retiring(results):
            self.release()

    def keep(self, procs: Sequence[Any], run_dir: run_dirs.RunDir, want: RankWant) -> None:
        """Take the ranks of a run that ended well (they now wait for a job) and their run directory."""
        self.release()
        self.procs, self.run_dir, self.devices = list(procs), run_dir, tuple(want.devices)
        self.key = _key(want)
        self.jobs = 0

    def send(self, job: dict[str, Any]) -> str:
        """Hand `job` to the kept ranks (they start it at once); returns their run directory."""
        import torch

        assert self.run_dir is not None
        workdir = self.run_dir.path
        for r in range(len(self.procs)):  # the last run's results, read by now
            _remove(os.path.join(workdir, result_name(r)))
        self.jobs += 1
        path = os.path.join(workdir, job_name(self.jobs))
        torch.save({**job, "workdir": workdir}, path + ".tmp")
        os.replace(path + ".tmp", path)
        return workdir

    def __enter__(self) -> ResidentRanks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Stop the kept ranks (with whatever they started) and remove their run directory; idempotent.
        On a GPU the wait for them to end, and the removal, happen in the background (`reaper`)."""
        from .reaper import retire

        procs, run_dir = self.procs, self.run_dir
        self.procs, self.run_dir, self.key = [], None, None
        if procs or run_dir is not None:
            retire(procs, self.devices, run_dir.remove if run_dir is not None else None)


def _key(want: RankWant) -> tuple[Any, ...]:
    return (
        want.factory,
        want.world_size,
        tuple(want.devices),
        want.backend,
        tuple(sorted(want.env.items())),
        want.caller.key(),
    )


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


# -- inside a rank ---------------------------------------------------------------------------------
def next_job(workdir: str, index: int, phase: Callable[[str], None] = beacon.set_phase) -> dict[str, Any]:
    """Wait for the `index`-th job of run directory `workdir` (the owner stops this process when it
    sends none) and return it."""
    import torch

    phase("resident")
    path = os.path.join(workdir, job_name(index))
    while not os.path.exists(path):
        time.sleep(POLL_S)
    job: dict[str, Any] = torch.load(path, weights_only=False)  # written by this rank's own owner
    return job


@dataclass
class RankState:
    """What a resident rank puts back after each run, besides the global torch state (the run's
    `isolated_global_state`): the import path, the environment and the working directory as they were
    before its first run, the user's modules (forgotten), and the last run's memory."""

    path: list[str]
    environ: dict[str, str]
    cwd: str
    device: Any
    cuda_bytes: int

    @classmethod
    def take(cls, device: Any) -> RankState:
        """This rank's state now (before its first run: environment and device already set up)."""
        import torch

        cuda = device.type == "cuda"
        return cls(
            list(sys.path), dict(os.environ), os.getcwd(), device, torch.cuda.memory_allocated(device) if cuda else 0
        )

    def restore(self) -> None:
        """Put it back: the path, the environment, the working directory; the user's modules forgotten;
        and when the last run's GPU memory is still held (its wrapper caught in a reference cycle), a
        full collection."""
        import torch

        sys.path[:] = self.path
        os.environ.clear()
        os.environ.update(self.environ)
        try:
            os.chdir(self.cwd)
        except OSError:
            pass
        forget_user_modules()
        if self.device.type == "cuda" and torch.cuda.memory_allocated(self.device) > self.cuda_bytes:
            gc.collect()


def forget_user_modules() -> list[str]:
    """Drop the user's modules from `sys.modules` (so the next factory imports them afresh) and
    collect what the last run left; returns their names."""
    from ..runtime.frames import is_user_file
    from ..runtime.module_namespace import preloaded_modules

    preloaded = preloaded_modules()  # never the user's: imported before any target's code
    names = []
    for name, module in list(sys.modules.items()):
        if name in preloaded:
            continue
        file = module_file(module)
        if file is not None and is_user_file(file):
            names.append(name)
    for name in names:
        sys.modules.pop(name, None)
    gc.collect(1)  # the young generations, where the last run's cycles are (a full pass walks far more: `preloaded`)
    return names
