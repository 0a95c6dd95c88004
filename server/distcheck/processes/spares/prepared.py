"""Ranks built ahead: a validation's first attempt, prepared while its reference run runs.

`prepare_ranks` claims one spare per rank, gives them the attempt's run directory now and has each
become its rank and build the wrapper (`spares.child`: the caller context, log, beacon, environment,
TorchScript mode, `model_factory()`), so that when the spec is known `run_distributed(...,
prepared=...)` only rendezvouses, partitions and runs the forward. The spares build under the
caller's environment, working directory and `sys.path` as they are when `prepare_ranks` is called
(`caller_context.CallerContext`), since the build imports the user's module. A spare's wrapper is
used only for the run it was built for (same factory, TorchScript mode, world size, devices and
caller context); otherwise the prepared ranks are discarded and the run starts as usual. A factory
that fails or hangs while building ahead is reported by that run, in phase `factory`, as it would
have been without spares. No torch.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import run_dirs
from ..caller_context import CallerContext
from . import pool, rank_counts, roomy
from .process import Spare
from .settings import enabled

__all__ = ["PreparedRanks", "ValidationSpares", "prepare_ranks"]


@dataclass
class PreparedRanks:
    """Spares that became the ranks of one coming run, with its (locked) run directory."""

    run_dir: run_dirs.RunDir
    spares: list[Spare]
    factory: str
    torchscript: str
    world_size: int
    devices: list[str]
    caller: CallerContext = field(default_factory=CallerContext)
    used: bool = field(default=False)

    def matches(
        self, factory: str, torchscript: str, world_size: int, devices: Sequence[str], caller: CallerContext
    ) -> bool:
        """Whether these ranks were built for exactly this run, under the run's caller context (and are all
        still there)."""
        return (
            not self.used
            and (factory, torchscript, world_size, list(devices), caller)
            == (self.factory, self.torchscript, self.world_size, self.devices, self.caller)
            and all(s.exitcode is None for s in self.spares)
        )

    def take(self) -> None:
        """Mark them used by the run that now owns them (and their run directory)."""
        self.used = True

    def discard(self) -> None:
        """Kill the spares (and what they started) and remove the run directory, unless a run took them
        (on a GPU both end in the background: `reaper`)."""
        if self.used:
            return
        self.used = True
        from ..reaper import retire

        retire(self.spares, self.devices, self.run_dir.remove)


def prepare_ranks(
    factory: Any, spec: dict[str, Any], world_size: int, devices: Sequence[str], env: dict[str, str] | None = None
) -> PreparedRanks | None:
    """Claim `world_size` spares and have each build rank r's wrapper for a run of `factory` (a
    `FactoryRef`) under `spec` (the TorchScript mode and what the ranks read before the spec is final),
    in this process's environment, working directory and `sys.path` now; None when spares are off.
    Returns at once: the spares build in parallel."""
    if not enabled():
        return None
    from ...spec import MLIPSpec

    caller = CallerContext.capture()
    torchscript = MLIPSpec.from_dict(spec).distribution.torchscript
    run_dir = run_dirs.make_run_dir("run")
    spares: list[Spare] = []
    prepared = PreparedRanks(run_dir, spares, factory.describe(), torchscript, world_size, list(devices), caller)
    try:
        for r, device in enumerate(devices):
            spare = pool().claim(device)
            if spare is None:
                prepared.discard()
                return None
            spares.append(spare)
            order = {
                "workdir": run_dir.path,
                "rank": r,
                "world_size": world_size,
                "device": device,
                "factory": factory,
                "spec": spec,
                "owner": os.getpid(),
                "env": dict(env or {}),
                "caller": caller,
            }
            if not spare.build(order):
                prepared.discard()
                return None
    except BaseException:
        prepared.discard()
        raise
    return prepared


class ValidationSpares:
    """What one validation asks of the pool: spares for its reference and ranks (and the ranks of
    later attempts) wanted from its start, its first attempt's ranks built while the reference runs,
    and whatever was not used dropped at its end (or kept warm, see `SparePool.settle`)."""

    def __init__(
        self,
        factory: Any,
        devices: Sequence[str],
        world_size: int,
        packages: Sequence[str],
        *,
        spec: dict[str, Any],
        later_attempts: bool,
    ) -> None:
        self.factory = factory
        self.devices = list(devices)
        self.world_size = world_size
        self.packages = list(packages)
        self.spec = spec
        self.later_attempts = later_attempts
        self.prepared: PreparedRanks | None = None
        self._pause = contextlib.ExitStack()

    def start(self) -> None:
        """Before the reference run: ask for the spares (returns at once). Refills wait for the
        validation's end on a machine with too few cores for its processes and new spares at once, and
        when it runs on a GPU: a spare warming up there (its context, its kernels) time-slices the GPU
        with the validation's own processes, and its launches take cores from them."""
        if not roomy(self.world_size) or any(str(d).startswith("cuda") for d in self.devices):
            self._pause.enter_context(pool().paused())
        pool().want(rank_counts(self.devices), self.packages)

    def prepare(self) -> None:
        """Once the reference run has its process: the first attempt's ranks build their wrappers under
        the prior spec (its TorchScript mode; the run uses them only if the final spec's is the same)."""
        if self.prepared is None:
            self.prepared = prepare_ranks(self.factory, self.spec, self.world_size, self.devices)
        # refilled from now on: the ranks of a later attempt (or nothing, when there can be none or the
        # first attempt's ranks serve them)
        pool().lower(
            rank_counts(self.devices, reference=False) if self.later_attempts else dict.fromkeys(self.devices, 0)
        )

    def take(self) -> PreparedRanks | None:
        """The prepared ranks for the first attempt (once)."""
        prepared, self.prepared = self.prepared, None
        return prepared

    def close(self) -> None:
        """End of the validation: unused prepared ranks discarded, the pool settled."""
        if self.prepared is not None:
            self.prepared.discard()
            self.prepared = None
        self._pause.close()
        pool().settle()
