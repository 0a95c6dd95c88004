"""A model that reports whether TorchDynamo was loaded in its process by the end of its forward (a
rank imports it only when something does; distcheck's modes do not), and whether torch's symbolic-shape
helpers (which `autograd.grad` with `grad_outputs` needs) were loaded before its module was imported."""

from __future__ import annotations

import sys

import torch
from torch import nn

from distcheck.batch import Batch
from examples.structures import make_batch, periodic_slab_system

SYMBOLIC_AT_IMPORT = "torch.fx.experimental.symbolic_shapes" in sys.modules


class DynamoProbe(nn.Module):
    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        e = (pos**2).sum(dim=1)
        energy = torch.zeros(batch.num_systems, dtype=e.dtype, device=e.device).index_add(0, batch.batch, e)
        (grad,) = torch.autograd.grad(energy, pos, grad_outputs=torch.ones_like(energy))
        loaded = [float("torch._dynamo" in sys.modules), float(SYMBOLIC_AT_IMPORT)]
        return {"energy": energy, "forces": -grad, "loaded": torch.tensor(loaded, dtype=e.dtype)}


def model_factory() -> DynamoProbe:
    return DynamoProbe()


def sample_batch() -> Batch:
    return make_batch([periodic_slab_system((3, 3, 8), seed=5)])
