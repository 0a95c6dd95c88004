"""Wrappers that fail on the GPU the way real ones do: out of memory, NaN, a hang, a CUDA error.

Imported by path (`f"{path}:factory_oom"`), like `fault_models.py`; every failure is injected on one
rank only, so the single-process reference run (rank -1) succeeds.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from distcheck.runtime import current_context
from examples.structures import make_batch, periodic_slab_system

GIB = 1024**3
OOM_BYTES = 200 * GIB
"""More than any single GPU holds (an H200 has about 141 GB)."""


def _rank() -> int:
    ctx = current_context()
    return -1 if ctx is None else ctx.rank


class GpuEnergy(nn.Module):
    """A per-atom energy summed per system on the batch's device, with a GPU failure injected."""

    cutoff = 3.0
    num_interactions = 1

    def __init__(self, failure: str) -> None:
        super().__init__()
        self.failure = failure
        self.scale = nn.Parameter(torch.ones((), dtype=torch.float64))

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        device = batch.positions.device
        e = self.scale * (batch.positions**2).sum(dim=1)
        rank = _rank()
        if rank == 1:
            if self.failure == "oom":
                # Some honest work first, so the peak memory is not zero, then an impossible request.
                keep = torch.ones(64 * 2**20, dtype=torch.uint8, device=device)
                huge = torch.empty(OOM_BYTES, dtype=torch.uint8, device=device)
                return {"energy": (keep.sum() + huge.sum()).to(e.dtype).reshape(1)}
            if self.failure == "skip_collective":
                # The other rank all-reduces the per-system energy; this one never does.
                return {"energy": torch.zeros(batch.num_systems, dtype=e.dtype, device=device)}
            if self.failure == "cuda_error":
                bad = torch.zeros(3, device=device)[torch.tensor([10], device=device)]
                torch.cuda.synchronize(device)
                e = e + bad.sum().to(e.dtype)
        energy = torch.zeros(batch.num_systems, dtype=e.dtype, device=device).index_add(0, batch.batch, e)
        if self.failure == "nan":
            # Per-atom energies; rank 1 turns its own into NaN with a 0/0 computed by a GPU kernel.
            atom_energy = e
            if rank == 1:
                zero = torch.zeros((), dtype=e.dtype, device=device)
                atom_energy = e * (zero / zero)
            return {"energy": energy, "atom_energy": atom_energy}
        return {"energy": energy}


def factory_oom() -> GpuEnergy:
    return GpuEnergy("oom")


def factory_nan() -> GpuEnergy:
    return GpuEnergy("nan")


def factory_skip_collective() -> GpuEnergy:
    return GpuEnergy("skip_collective")


def factory_cuda_error() -> GpuEnergy:
    return GpuEnergy("cuda_error")


def factory_ok() -> GpuEnergy:
    return GpuEnergy("none")


def sample() -> Batch:
    return make_batch([periodic_slab_system((3, 3, 12), seed=3)])
