"""What the environment says about spares: whether runs use them, and the pool's bounds.

DISTCHECK_SPARES=0 turns spares off (every process forked as before); a start method other than
forkserver (DISTCHECK_START_METHOD) does too. DISTCHECK_SPARES_MAX (spares held at most, 8),
DISTCHECK_SPARES_MAX_GPU_MB (their GPU memory, unbounded by default), DISTCHECK_SPARES_IDLE_S (how long
an idle spare or a want lasts, 600 s) and DISTCHECK_SPARES_KEEP_S (keep warm between validations for
that long, as `spares.keep_warm` does) are read when the pool is made. DISTCHECK_RESIDENT_RANKS=0 starts
every run of a validation in new ranks instead of keeping its ranks for the next run (`resident`);
DISTCHECK_ATTEMPT_AHEAD=0 waits for the reference before the first attempt starts, =1 never waits, unset
waits only where there are fewer cores than processes to run at once (`attempt_ahead`).
DISTCHECK_FIELD_CACHE=0 measures the receptive field in every validation instead of taking one
remembered for the same model and sample (`validate/field_cache.py`). DISTCHECK_BYTECODE_CACHE=0 keeps
distcheck's processes from keeping the bytecode of packages installed without it in distcheck's cache
(`bytecode_cache`). No torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

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


_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def _off(name: str) -> bool:
    return os.environ.get(name, "1").strip().lower() in _OFF


def resident_enabled() -> bool:
    """Whether a validation keeps its ranks alive between its runs (not turned off by
    DISTCHECK_RESIDENT_RANKS=0)."""
    return not _off("DISTCHECK_RESIDENT_RANKS")


def field_cache_enabled() -> bool:
    """Whether a validation may take a receptive field remembered for its model and sample (not turned
    off by DISTCHECK_FIELD_CACHE=0)."""
    return not _off("DISTCHECK_FIELD_CACHE")


def bytecode_cache_enabled() -> bool:
    """Whether distcheck's processes may keep the bytecode of packages installed without it in
    distcheck's cache (not turned off by DISTCHECK_BYTECODE_CACHE=0)."""
    return not _off("DISTCHECK_BYTECODE_CACHE")


def attempt_ahead_enabled(world_size: int) -> bool:
    """Whether a validation of `world_size` ranks may run its first attempt while its reference runs,
    under the spec its target's last validation started with: DISTCHECK_ATTEMPT_AHEAD=1 always, =0
    never; unset, when this process may run on a core for the reference and one for each rank (they
    run at once; on fewer they only take turns, and the overlap gains nothing)."""
    value = os.environ.get("DISTCHECK_ATTEMPT_AHEAD", "").strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    from ...rank_limits import usable_cores

    return usable_cores() >= world_size + 1


def enabled() -> bool:
    """Whether runs use spares: not turned off by DISTCHECK_SPARES=0, and ranks start from a forkserver
    (the only pool a spare can be forked from without inheriting an initialised CUDA)."""
    if _off("DISTCHECK_SPARES"):
        return False
    method = os.environ.get("DISTCHECK_START_METHOD")
    import multiprocessing as mp

    return (method or "forkserver") == "forkserver" and "forkserver" in mp.get_all_start_methods()


@dataclass(frozen=True)
class PoolBounds:
    """The pool's bounds as the environment sets them (the pool copies them into its own attributes)."""

    max_spares: int
    max_gpu_bytes: int | None
    idle_timeout_s: float
    keep_s: float | None


def pool_bounds() -> PoolBounds:
    """The bounds the environment asks for now; an unset or unreadable variable takes its default."""
    gpu_mb = _env_float("DISTCHECK_SPARES_MAX_GPU_MB", None)
    return PoolBounds(
        max_spares=int(_env_float("DISTCHECK_SPARES_MAX", 8) or 8),
        max_gpu_bytes=int(gpu_mb * MIB) if gpu_mb is not None else None,
        idle_timeout_s=float(_env_float("DISTCHECK_SPARES_IDLE_S", 600.0) or 600.0),
        keep_s=_env_float("DISTCHECK_SPARES_KEEP_S", None),
    )


def _env_float(name: str, default: float | None) -> float | None:
    try:
        return float(os.environ[name])
    except (KeyError, ValueError):
        return default
