"""The CPU threads each process of a validation may use, so that together they fit the machine's cores.

torch gives a process one intra-op thread per core, and a parallel region (OpenMP) ends only when its
slowest thread does. When other processes keep some cores busy, a region with a thread per core waits
for the threads the scheduler set aside, and an operation of a millisecond takes several. A validation
runs several processes at once: its ranks (the first attempt's run while the reference runs), the
reference child (still measuring the receptive field, or being torn down) and the caller, which loads,
combines and compares their outputs. With the caller at one thread per core, its comparison of a large
sample took tens of times longer while the other processes ran than once they had gone idle
(`bench/RESULTS_gpu.md`). Each process therefore takes its share of the cores. No torch at import.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["share", "threads_at_most"]


def share(processes: int) -> int:
    """Intra-op threads for each of `processes` processes busy at once on this machine (at least one)."""
    return max(1, (os.cpu_count() or 1) // max(1, processes))


@contextlib.contextmanager
def threads_at_most(threads: int) -> Iterator[None]:
    """Within the block, torch uses at most `threads` intra-op threads in this process (fewer when
    the caller asked for fewer); the caller's own number is put back after it, however it ends."""
    import torch

    before = torch.get_num_threads()
    if threads >= before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
