"""Pre-warmed rank processes ("spares"): started before a run needs them, each used for one job.

A spare is forked from the rank pool's forkserver, which imported torch and distcheck and never
initialises CUDA, so a spare may create its own CUDA context; what it does then is in
`spares.child`. Being the forkserver's child, it obeys every lifeline rule of a rank: it dies with
the forkserver, which dies with the owner (SIGKILL included) and kills everything under it, and its
run directory is the run's own. A spare runs exactly one job (a rank or the reference run) and
exits, so every rank still starts pristine; only torch, its CUDA context and third-party packages
are warm, never the user's modules.

This module is what runs and owners call: `pool()` (this process's `SparePool`), `process` (a claimed
spare bound to a job, or a plain process), `keep_warm` and `prestart`, `report()`, and the counts a
validation wants (`rank_counts`, `roomy`). The forkserver they are forked from is
`processes.forkserver`'s. No torch.

Modules
=======

- `settings`: what the environment says about spares, resident ranks and the caches;
- `process`: one spare (`Spare`), a warm process waiting on its pipe for one job;
- `keeper`: the pool's state and the keeper thread that forks spares until the wants are met;
- `pool`: what callers ask of the pool (`SparePool`: `want`, `claim`, `settle`, ...);
- `report`: what the pool holds, as a plain dict;
- `child`: inside a spare: warm up, wait for one job, run it, exit;
- `warmup`: what a spare runs before its job so that its first forward loads no kernels;
- `prepared`: ranks built ahead, while the reference runs (`prepare_ranks`);
- `learned`: the packages each target's model imported, and its last first spec.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from ...rank_limits import usable_cores
from .pool import SparePool
from .process import Spare
from .settings import enabled

__all__ = [
    "Spare",
    "SparePool",
    "close_pool",
    "enabled",
    "keep_warm",
    "pool",
    "prestart",
    "process",
    "rank_counts",
    "report",
    "roomy",
]


_POOL: SparePool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> SparePool:
    """This process's spare pool (made on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = SparePool()
        return _POOL


def close_pool() -> None:
    """Close this process's pool (`SparePool.close`) if one was made; make none."""
    with _POOL_LOCK:
        current = _POOL
    if current is not None:
        current.close()


def process(ctx: Any, device: str, target: Callable[..., Any], args: tuple[Any, ...], name: str) -> Any:
    """The process that will run `target(*args)` on `device`: a claimed spare bound to the job, or
    (spares off, or not a forkserver pool) a plain process of `ctx`. Either way, `start()` it."""
    spare = pool().claim(device) if ctx.get_start_method() == "forkserver" else None
    if spare is None:
        return ctx.Process(target=target, args=args, name=name, daemon=False)
    return spare.bind(target, args, name)


def roomy(world_size: int) -> bool:
    """Whether there are cores enough to refill spares while a validation of `world_size` ranks runs
    (two per process of it, the reference included); on fewer, the refill waits for its end."""
    return usable_cores() >= 2 * (world_size + 1)


def rank_counts(devices: Sequence[str], reference: bool = True) -> dict[str, int]:
    """Spares one validation takes per device: a rank per entry of `devices`, plus the reference run
    on the first device."""
    counts: dict[str, int] = {}
    for d in [*devices, *([devices[0]] if reference and devices else [])]:
        counts[d] = counts.get(d, 0) + 1
    return counts


def _listed(devices: Sequence[str] | str, world_size: int) -> list[str]:
    """One device per rank, as `rank_devices.resolve_devices` gives them; torch only for plain `"cuda"`."""
    if isinstance(devices, str):
        if devices == "cpu" or devices.startswith("cuda:"):
            return [devices] * world_size
        from ...runtime.rank_devices import resolve_devices

        return resolve_devices(devices, world_size)
    return [str(d) for d in devices]


def keep_warm(
    devices: Sequence[str] | str | None = None,
    world_size: int = 2,
    *,
    packages: Sequence[str] = (),
    idle_timeout_s: float = 600.0,
) -> SparePool:
    """Keep each validation's spares (a spare per rank plus one for its reference) warm after it, for the
    next one, until nothing has asked for them for `idle_timeout_s`: for a long-lived process such as
    the editor's runner (DISTCHECK_SPARES_KEEP_S does the same). With `devices`, those of a validation
    of `world_size` ranks are started now too. Returns the pool."""
    the_pool = pool()
    the_pool.keep_s = float(idle_timeout_s)
    if devices is not None:
        the_pool.want(rank_counts(_listed(devices, world_size)), packages, hold_s=float(idle_timeout_s))
    return the_pool


def prestart(devices: Sequence[str] | str = "cpu", world_size: int = 2, *, factory: str | None = None) -> SparePool:
    """Start the spares of one coming validation now and return at once: for the CLI, before it loads
    the target and the sample (and before it imports torch: this imports none for `"cpu"`, `"cuda:N"`
    or a list). `factory` (as the user wrote it) picks the packages that target's model imported last
    time (`spares.learned`)."""
    from .learned import packages_for

    the_pool = pool()
    the_pool.want(rank_counts(_listed(devices, world_size)), packages_for(factory) if factory else ())
    return the_pool


def report() -> dict[str, Any]:
    """`pool().report()`."""
    return pool().report()
