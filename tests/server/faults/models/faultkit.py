"""Shared pieces of the fault models: a tiny energy model with one hook per fault, the sample, and
marker files the tests wait for instead of sleeping blindly.

Each model module calls `Energy(hook)`; `hook(batch)` runs inside the forward, before the
per-system sum (an all-reduce on a rank), wherever the fault is meant to strike. `where()` says in
which process the forward runs: a rank number, or "reference" in the single-process reference run.
Markers go to the directory in FAULT_MARKER_DIR (set by the tests).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
from torch import nn

from distcheck.batch import Batch
from examples.structures import make_batch, periodic_slab_system

Hook = Callable[[Batch], None]


def where() -> str:
    """`"reference"`, the rank number as a string, or `""` outside distcheck's processes."""
    return os.environ.get("DISTCHECK_RANK", "")


def marker(name: str, text: str = "") -> None:
    """Create marker file `name` (atomically) in FAULT_MARKER_DIR, if the tests set it."""
    base = os.environ.get("FAULT_MARKER_DIR")
    if not base:
        return
    path = os.path.join(base, name)
    with open(path + ".tmp", "w") as fh:
        fh.write(text or str(os.getpid()))
    os.replace(path + ".tmp", path)


class Energy(nn.Module):
    """Per-atom energy `|r|^2` summed per system (the sum is an all-reduce on a rank), with a hook."""

    cutoff = 3.0
    num_interactions = 1

    def __init__(self, hook: Hook | None = None) -> None:
        super().__init__()
        self.hook = hook

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        e = (batch.positions**2).sum(dim=1)
        if self.hook is not None:
            self.hook(batch)
        energy = torch.zeros(batch.num_systems, dtype=e.dtype, device=e.device).index_add(0, batch.batch, e)
        return {"energy": energy}


def sample_batch() -> Batch:
    """A small periodic slab, long along z, so both ranks own atoms and hold a halo."""
    return make_batch([periodic_slab_system((3, 3, 8), seed=3)])
