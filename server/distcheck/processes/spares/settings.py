"""What the environment says about spares, resident ranks, the first attempt run ahead, the field and
bytecode caches: thin reads of the environment record (`distcheck.environment`, where every
`DISTCHECK_*` variable, its kind, default and meaning is declared, and docs/environment.md lists them).

Each function takes the `Settings` a validation read when it started (`RunSetup.settings`) or, without
them, reads the environment now (`read_settings`). No torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...environment import Settings, read_settings

__all__ = [
    "MIB",
    "PoolBounds",
    "attempt_ahead_enabled",
    "bytecode_cache_enabled",
    "enabled",
    "field_cache_enabled",
    "pool_bounds",
    "resident_enabled",
]

MIB = 1024 * 1024


def _now(settings: Settings | None, warn: bool = True) -> Settings:
    return settings if settings is not None else read_settings(warn=warn)


def resident_enabled(settings: Settings | None = None) -> bool:
    """Whether a validation keeps its ranks alive between its runs (DISTCHECK_RESIDENT_RANKS)."""
    return _now(settings).resident_ranks


def field_cache_enabled(settings: Settings | None = None) -> bool:
    """Whether a validation may take a receptive field remembered for its model and sample
    (DISTCHECK_FIELD_CACHE)."""
    return _now(settings).field_cache


def bytecode_cache_enabled(settings: Settings | None = None) -> bool:
    """Whether distcheck's processes may keep the bytecode of packages installed without it in
    distcheck's cache (DISTCHECK_BYTECODE_CACHE). Read in the process pool too: it warns nothing (the
    caller's validation does)."""
    return _now(settings, warn=False).bytecode_cache


def attempt_ahead_enabled(world_size: int, settings: Settings | None = None) -> bool:
    """Whether a validation of `world_size` ranks may run its first attempt while its reference runs,
    under the spec its target's last validation started with: DISTCHECK_ATTEMPT_AHEAD on always, off
    never; unset (auto), when this process may run on a core for the reference and one for each rank
    (they run at once; on fewer they only take turns, and the overlap gains nothing)."""
    forced = _now(settings).attempt_ahead
    if forced is not None:
        return forced
    from ...rank_limits import usable_cores

    return usable_cores() >= world_size + 1


def enabled(settings: Settings | None = None) -> bool:
    """Whether runs use spares: DISTCHECK_SPARES on, and ranks start from a forkserver
    (DISTCHECK_START_METHOD: the only pool a spare can be forked from without inheriting an
    initialised CUDA)."""
    s = _now(settings)
    import multiprocessing as mp

    return s.spares and s.start_method_in_use() == "forkserver" and "forkserver" in mp.get_all_start_methods()


@dataclass(frozen=True)
class PoolBounds:
    """The pool's bounds as the environment sets them (the pool copies them into its own attributes)."""

    max_spares: int
    max_gpu_bytes: int | None
    idle_timeout_s: float
    keep_s: float | None


def pool_bounds(settings: Settings | None = None) -> PoolBounds:
    """The bounds the environment asks for now (DISTCHECK_SPARES_MAX, DISTCHECK_SPARES_MAX_GPU_MB,
    DISTCHECK_SPARES_IDLE_S, DISTCHECK_SPARES_KEEP_S); an unset or unreadable variable takes its default."""
    s = _now(settings)
    gpu_mb = s.spares_max_gpu_mb
    return PoolBounds(
        max_spares=s.spares_max,
        max_gpu_bytes=int(gpu_mb * MIB) if gpu_mb is not None else None,
        idle_timeout_s=s.spares_idle_s,
        keep_s=s.spares_keep_s,
    )
