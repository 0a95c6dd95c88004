"""What a job carries of its caller: the environment, the working directory and the import path.

A fresh process started by the caller at the moment a run starts would have the caller's environment
variables, working directory and `sys.path`. distcheck's processes are not started then: they are
forked from a forkserver whose environment was fixed when it started, or are spares forked before the
run, prepared spares that imported the user's module while the reference ran, or resident ranks kept
from an earlier run. So every run captures the caller's state when it starts (`CallerContext.capture`,
in `launch.run_distributed`, `validate.reference.run_reference` and `spares.prepared.prepare_ranks`),
every job carries it (the rank job, the reference job, a spare's `build` and `run` messages, a
resident rank's next job), and the child applies it as its first step, before any user code is
imported (`CallerContext.apply`): `os.environ` replaced by the caller's, the working directory, the
import path. distcheck's own variables of a rank or the reference (`DISTCHECK_RANK`, the NCCL and gloo
settings, the run's `env`) are set on top of it afterwards and win.

A process built under one context serves no run of another: resident ranks and prepared spares are
compared with the caller's context now (`resident.ResidentRanks.serves`,
`spares.prepared.PreparedRanks.matches`), and so is a first attempt run ahead
(`validate.attempt_ahead.AttemptAhead.take`).

Some variables take effect only when a process starts (`is_start_time`: the dynamic loader's, the
interpreter's, CUDA's, the OpenMP and BLAS thread pools', torch's read when it is imported): applying
them in a running process changes nothing. Every warm process distcheck forks starts from the
forkserver, with the forkserver's values of them, so when the caller's values differ from those the
forkserver started with, the forkserver is restarted (`forkserver.process_context`): every process
forked from the old one (idle spares, resident ranks, prepared spares) ends with it, and the run
forks from the new one, which started under the caller's values. `PYTHONPATH` and `PYTHONSAFEPATH`
are not among them: their only start-time effect is the import path, which each job carries, and
distcheck sets them itself per job (the runner's project directories) and per helper start. No torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "START_TIME_NAMES",
    "START_TIME_PREFIXES",
    "CallerContext",
    "caller_of",
    "is_start_time",
    "start_time_values",
]

START_TIME_PREFIXES: tuple[str, ...] = (
    "LD_",  # the dynamic loader: LD_PRELOAD, LD_LIBRARY_PATH (read once, at exec)
    "PYTHON",  # the interpreter's start-up: PYTHONHASHSEED, PYTHONOPTIMIZE, PYTHONWARNINGS, PYTHONMALLOC, ...
    "CUDA_",  # the driver and runtime, read at CUDA's initialisation (done in a spare before its job)
    "OMP_",  # the OpenMP runtime's thread pool, set up when torch is imported
    "KMP_",
    "GOMP_",
    "MKL_",
    "OPENBLAS_",
    "PYTORCH_",  # the caching allocator's configuration (PYTORCH_CUDA_ALLOC_CONF), NVML, ...
    "TORCH",  # TORCH_*, TORCHINDUCTOR_*, TORCHDYNAMO_*: read by torch's modules when they are imported
)
"""Variables beginning with one of these take effect only when a process starts (see the module docstring)."""

START_TIME_NAMES: frozenset[str] = frozenset({"NVIDIA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"})
"""Start-time variables by name, beside those of `START_TIME_PREFIXES`."""

_CARRIED: frozenset[str] = frozenset({"PYTHONPATH", "PYTHONSAFEPATH", "PYTHONBREAKPOINT"})
"""Names with a start-time prefix that are not start-time variables: the import path is carried in every
job (and distcheck sets both per job and per helper start); `breakpoint()` reads its variable on each call."""


def is_start_time(name: str) -> bool:
    """Whether environment variable `name` takes effect only when a process starts."""
    if name in _CARRIED:
        return False
    return name in START_TIME_NAMES or name.startswith(START_TIME_PREFIXES)


def start_time_values(environ: Mapping[str, str]) -> dict[str, str]:
    """The start-time variables of `environ` (`is_start_time`) and their values."""
    return {k: v for k, v in environ.items() if is_start_time(k)}


@dataclass(frozen=True)
class CallerContext:
    """The caller's environment, working directory and import path at one moment (`capture`), as a fresh
    process it started then would have them; `apply` puts them in place in a child."""

    environ: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    sys_path: list[str] = field(default_factory=list)

    @classmethod
    def capture(cls) -> CallerContext:
        """This process's state now."""
        try:
            cwd = os.getcwd()
        except OSError:  # the working directory was removed: the child keeps its own
            cwd = ""
        return cls(dict(os.environ), cwd, list(sys.path))

    def apply(self) -> None:
        """Make this process's environment, working directory and import path the caller's (the first
        step of a child, before any user code is imported; distcheck's own variables go on top after)."""
        os.environ.clear()
        os.environ.update(self.environ)
        if self.cwd:
            try:
                os.chdir(self.cwd)
            except OSError:  # gone since: the child stays where it is, as multiprocessing's own children do
                pass
        sys.path[:] = self.sys_path

    def start_time_values(self) -> dict[str, str]:
        """Its start-time variables (`is_start_time`)."""
        return start_time_values(self.environ)

    def key(self) -> tuple[Any, ...]:
        """A hashable form, for the keys the reuse decisions compare."""
        return (tuple(sorted(self.environ.items())), self.cwd, tuple(self.sys_path))


def caller_of(job: Mapping[str, Any]) -> CallerContext | None:
    """The caller context a job carries (`"caller"`), None in a job without one (a job of a launcher's
    ranks, or written by an older distcheck)."""
    found = job.get("caller")
    return found if isinstance(found, CallerContext) else None
