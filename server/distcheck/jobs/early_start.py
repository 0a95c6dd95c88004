"""Start a validation's processes before its target and sample load, so their start overlaps that load.

Loading a target imports torch and the model's packages (seconds in a fresh process); the process pool's
forkserver imports torch too, and each spare then creates its CUDA context and warms up. Started first,
both go on while the caller loads. No torch here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from ..options import Vocabulary, option
from .devices import named_devices

__all__ = ["start_early", "started_early"]


def start_early(options: Mapping[str, Any], factory: str, words: Vocabulary) -> None:
    """Start the process pool and, when `options` name the devices outright (`named_devices`: `cpu`,
    `cuda:N`, one per rank), the spares of a validation of `factory` on them, with the packages its
    model imported last time. `auto` is the CPU where the installed torch is a CPU build (its version
    says `+cpu`); otherwise `auto` and a plain `cuda` need torch to resolve, so for them only the pool
    starts (the validation asks for its spares once the device is known). Never raises: this only saves
    time, and whatever fails here (a device list `words` would refuse among it) fails again, with its
    proper message, when the job resolves its devices."""
    with contextlib.suppress(Exception):
        from ..processes import lifeline, spares
        from ..processes.forkserver import process_context
        from ..processes.spares.learned import installed_torch_version

        with lifeline.helpers_ignore_sigint():  # a Ctrl-C now must not kill the forkserver mid-import
            process_context()
        named = dict(options)
        cpu_build = installed_torch_version().endswith("+cpu")  # read without importing torch
        if str(named.get("device", option("device").default)) == "auto" and cpu_build:
            named["device"] = "cpu"  # what `auto` resolves to with a torch built without CUDA
        devices = named_devices(named, words)
        if devices is None or devices == "cuda" or not spares.enabled():
            return
        spares.prestart(devices, int(named.get("world_size", option("world_size").default)), factory=factory)


@contextlib.contextmanager
def started_early(options: Mapping[str, Any], factory: str, words: Vocabulary) -> Iterator[None]:
    """`start_early`, and once the job is over, whatever its end, the pool settled: the spares a job
    that failed before its validation (a factory or sample that does not load) left unclaimed are
    dropped, or kept warm where the owner asked for that (`spares.keep_warm`)."""
    start_early(options, factory, words)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            from ..processes import spares

            spares.pool().settle()
