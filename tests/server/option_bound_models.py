"""Wrappers for the option-bound and deadline tests: small samples, and a reference run that hangs."""

from __future__ import annotations

import time

import torch
from torch import nn

from distcheck.batch import Batch
from distcheck.runtime import current_context
from examples.structures import make_batch, periodic_slab_system


class SlowReference(nn.Module):
    """A per-system sum of squared positions that sleeps for ever in the single-process reference run."""

    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        if current_context() is None:  # the reference run: no rank context
            time.sleep(600)
        e = (batch.positions**2).sum(dim=1)
        return {"energy": torch.zeros(batch.num_systems, dtype=e.dtype).index_add(0, batch.batch, e)}


def factory_slow_reference() -> SlowReference:
    return SlowReference()


def two_systems() -> Batch:
    """Two periodic boxes: 36 and 16 atoms (the smaller one bounds world_size)."""
    return make_batch([periodic_slab_system((3, 3, 4), seed=1), periodic_slab_system((2, 2, 4), seed=2)])
