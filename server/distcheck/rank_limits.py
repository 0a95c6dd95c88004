"""How many ranks a validation may start: at least 2, at most the atoms of the sample's smallest system,
and on the CPU at most `RANKS_PER_CORE` per usable core unless `allow_oversubscribe`.

Checked before any process starts by every entry point; the hints are phrased in the caller's words
(`vocabulary`: CLI flags, editor settings, library keywords; see `distcheck.options.Vocabulary`). No torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .option_check import OptionError, check_option
from .options import LIBRARY, Vocabulary

__all__ = ["MIN_WORLD_SIZE", "RANKS_PER_CORE", "check_rank_count", "check_world_size", "cpu_rank_limit", "usable_cores"]

RANKS_PER_CORE = 4
"""On the CPU, at most this many ranks per core this process may run on, unless `allow_oversubscribe`."""
MIN_WORLD_SIZE = 2
"""A validation runs at least this many ranks (`check_rank_count`)."""


def usable_cores() -> int:
    """The number of CPU cores this process may run on (its affinity mask, else `os.cpu_count()`)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_rank_limit() -> int:
    """The most ranks a CPU validation starts without `allow_oversubscribe`: `RANKS_PER_CORE` per usable core."""
    return RANKS_PER_CORE * usable_cores()


def _atoms(n: int) -> str:
    return f"{n} atom" if n == 1 else f"{n} atoms"


def check_rank_count(world_size: int, vocabulary: Vocabulary = LIBRARY) -> None:
    """Refuse a validation over fewer than `MIN_WORLD_SIZE` (2) ranks with an `OptionError` for
    `world_size` (after `check_option`'s type and bounds): one rank owns every atom, nothing is
    distributed and nothing could be found. Every validation entry point runs it before anything starts;
    `run_distributed` itself still runs one rank."""
    check_option("world_size", world_size)
    if world_size < MIN_WORLD_SIZE:
        raise OptionError(
            "world_size",
            world_size,
            f"world_size {world_size}: a distributed check needs at least {MIN_WORLD_SIZE} ranks (one rank owns "
            "every atom, so there is no halo and no exchange, and nothing to compare)",
            f"use {vocabulary.assign('world_size', MIN_WORLD_SIZE)} or more; 2 or 4 finds most distribution bugs",
        )


def check_world_size(
    world_size: int,
    system_atoms: Sequence[int],
    *,
    on_cpu: bool,
    allow_oversubscribe: bool = False,
    vocabulary: Vocabulary = LIBRARY,
) -> None:
    """Refuse, before any process starts, a `world_size` no sample system can give every rank atoms of
    (more ranks than atoms of the smallest system in `system_atoms`), and on the CPU (`on_cpu`) more
    than `cpu_rank_limit()` ranks unless `allow_oversubscribe`; fewer than 2 ranks is refused first
    (`check_rank_count`). Raises `OptionError` for `world_size`, its hint in `vocabulary`'s words."""
    check_rank_count(world_size, vocabulary)
    if system_atoms:
        smallest = min(range(len(system_atoms)), key=lambda i: system_atoms[i])
        n = int(system_atoms[smallest])
        if world_size > n:
            which = (
                f"the {_atoms(n)} of the sample"
                if len(system_atoms) == 1
                else f"the {_atoms(n)} of system {smallest}, the smallest of the sample's {len(system_atoms)} systems"
            )
            raise OptionError(
                "world_size",
                world_size,
                f"world_size {world_size} is more than {which}: every rank must own atoms of every system",
                f"use a world_size of at most {n} ({vocabulary.assign('world_size', min(n, 2))}; 2 or 4 finds most "
                f"distribution bugs), or a sample whose smallest system has at least {world_size} atoms",
            )
    if on_cpu and not allow_oversubscribe:
        limit = cpu_rank_limit()
        if world_size > limit:
            cores = usable_cores()
            raise OptionError(
                "world_size",
                world_size,
                f"world_size {world_size} would start {world_size} rank processes on the CPU, more than "
                f"{RANKS_PER_CORE} per core on the {cores} core{'s' if cores != 1 else ''} this process may use "
                f"(at most {limit})",
                f"use a world_size of at most {limit}, or start them anyway with "
                f"{vocabulary.assign('allow_oversubscribe', True)}",
            )
