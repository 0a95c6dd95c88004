"""Factories that build their model from a random number generator, the ways model code does it.

The first group never seeds: their parameters come from torch's, numpy's or Python's global generator,
drawn in the factory or when the module is imported. Every process that calls them must build the same
model (distcheck seeds the generators alike before each call). The second group builds a different
model in each process however the generators are seeded (reseeded from the OS or the clock, or shaped
by a per-rank environment variable): the validation must say so and point at the factory. Last, one
that is the same everywhere but whose forward fails in the single process only.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import numpy as np
import torch

from examples.common import seeded
from examples.pair_potential import PairPotential, sample_batch

__all__ = ["sample_batch"]

# drawn when the module is imported (a table of "learned" constants that was never trained)
_IMPORT_TIME_SHIFT = torch.rand(100, dtype=torch.float64) * 0.2


def torch_unseeded() -> PairPotential:
    """Parameters from torch's global generator (`torch.rand` in `__init__`), never seeded."""
    return PairPotential().double().eval()


def numpy_unseeded() -> PairPotential:
    """Well depths drawn from numpy's global generator."""
    model = PairPotential().double().eval()
    with torch.no_grad():
        model.depth.copy_(torch.from_numpy(np.random.uniform(0.05, 0.2, size=model.depth.shape[0])))
    return model


def python_random_unseeded() -> PairPotential:
    """Equilibrium distances drawn from Python's `random` (reseeded in every forked child)."""
    model = PairPotential().double().eval()
    with torch.no_grad():
        model.r0.copy_(torch.tensor([random.uniform(2.4, 3.0) for _ in range(model.r0.shape[0])]))
    return model


def import_time_draw() -> PairPotential:
    """A constant drawn at import time shifts the equilibrium distances."""
    model = PairPotential().double().eval()
    with torch.no_grad():
        model.r0.add_(_IMPORT_TIME_SHIFT)
    return model


def reseeded_from_the_os() -> PairPotential:
    """`torch.seed()` reseeds from a non-deterministic source: a different model in every process."""
    torch.seed()
    return PairPotential().double().eval()


def seeded_from_the_clock() -> PairPotential:
    """Seeded from the clock and the process id: a different model in every process."""
    torch.manual_seed(time.time_ns() ^ os.getpid())
    return PairPotential().double().eval()


class _TaggedPairPotential(PairPotential):
    def __init__(self, tagged: bool) -> None:
        super().__init__()
        if tagged:  # a "rank-local tweak" that also changes the energy
            self.register_buffer("rank_tag", torch.ones(1))
            with torch.no_grad():
                self.depth.mul_(1.5)


def shaped_by_the_rank() -> PairPotential:
    """A rank's model has a buffer (and deeper wells) that the single process's lacks."""
    return _TaggedPairPotential(os.environ.get("DISTCHECK_RANK", "reference") != "reference").double().eval()


class _ReferenceRaises(PairPotential):
    def forward(self, batch: Any) -> dict[str, torch.Tensor]:
        if os.environ.get("DISTCHECK_RANK") == "reference":
            raise RuntimeError("the single-process run fails here")
        return super().forward(batch)


def reference_raises() -> PairPotential:
    """Seeded and the same everywhere, but its forward raises in the single-process run only (the ranks
    run through)."""
    with seeded(1):
        return _ReferenceRaises().double().eval()
