"""Models for the spare tests. Each import of this module is counted in the process (module-level
state a reused process would carry over), and records whether it happened inside a rank (a module
preloaded into a spare before its job would have been imported with no rank set)."""

from __future__ import annotations

import os
import sys

import torch
from torch import nn

from distcheck.batch import Batch
from examples.structures import make_batch, periodic_slab_system

_COUNT = "_distcheck_spare_models_imports"
setattr(sys, _COUNT, getattr(sys, _COUNT, 0) + 1)  # survives a re-import: counts executions of this file
IMPORTS = getattr(sys, _COUNT)
IMPORTED_IN = os.environ.get("DISTCHECK_RANK", "")  # "", "reference", "0", "1", ...
FORWARDS: list[int] = []  # module-level state: a process that ran an earlier job would still hold it


class Probe(nn.Module):
    """Energy `|r|^2` summed per system, plus what this process has seen of this module."""

    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        FORWARDS.append(1)
        e = (batch.positions**2).sum(dim=1)
        energy = torch.zeros(batch.num_systems, dtype=e.dtype, device=e.device).index_add(0, batch.batch, e)
        rank = IMPORTED_IN if IMPORTED_IN not in ("", "reference") else ("-1" if not IMPORTED_IN else "-2")
        facts = torch.tensor([float(IMPORTS), float(len(FORWARDS)), float(os.getpid()), float(rank)])
        return {"energy": energy, "facts": facts.to(e.dtype)}


def model_factory() -> Probe:
    return Probe()


def failing_factory() -> Probe:
    raise ValueError("cannot load weights: built ahead")


def sample_batch() -> Batch:
    return make_batch([periodic_slab_system((3, 3, 8), seed=5)])
