"""Start a validation's processes before its target and sample load, so their start overlaps that load.

Loading a target imports torch and the model's packages (seconds in a fresh process); the process pool's
forkserver imports torch too, and each spare then creates its CUDA context and warms up. Started first,
both go on while the caller loads. No torch here.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import Iterator, Mapping
from typing import Any

from ..options import option

__all__ = ["start_early", "started_early"]


def start_early(options: Mapping[str, Any], factory: str) -> None:
    """Start the process pool and, when `options` name the devices outright (`cpu`, `cuda:N`, or one of
    them per rank), the spares of a validation of `factory` on them, with the packages its model
    imported last time. `auto` is the CPU where the installed torch is a CPU build (its version says
    `+cpu`); otherwise `auto` and a plain `cuda` need torch to resolve, so for them only the pool starts
    (the validation asks for its spares once the device is known). Never raises: this only saves time,
    and whatever fails here fails again, with its proper message, when the validation starts them."""
    with contextlib.suppress(Exception):
        from ..runtime import lifeline, spares
        from ..runtime.spares_start import process_context

        with lifeline.helpers_ignore_sigint():  # a Ctrl-C now must not kill the forkserver mid-import
            process_context()
        device = str(options.get("device", option("device").default))
        if device == "auto" and _cpu_only_torch():
            device = "cpu"  # what `auto` resolves to with a torch built without CUDA
        devices = device.split(",")
        if not spares.enabled() or not all(d == "cpu" or d.startswith("cuda:") for d in devices):
            return
        world_size = int(options.get("world_size", len(devices) if len(devices) > 1 else option("world_size").default))
        if len(devices) > 1 and len(devices) != world_size:
            return  # refused with a hint when the job resolves its devices
        spares.prestart(devices if len(devices) > 1 else device, world_size, factory=factory)


@contextlib.contextmanager
def started_early(options: Mapping[str, Any], factory: str) -> Iterator[None]:
    """`start_early`, and once the job is over, whatever its end, the pool settled: the spares a job
    that failed before its validation (a factory or sample that does not load) left unclaimed are
    dropped, or kept warm where the owner asked for that (`spares.keep_warm`)."""
    start_early(options, factory)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            from ..runtime import spares

            spares.pool().settle()


def _cpu_only_torch() -> bool:
    """Whether the installed torch is a CPU build, read from its version without importing it."""
    try:
        return importlib.metadata.version("torch").endswith("+cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
