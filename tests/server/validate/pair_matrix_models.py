"""Lennard-Jones models written as a newcomer would: every pair from `torch.cdist` over the rank's atoms,
no `batch.neighbor_list`, no declared spec. `symmetric_factory` halves the full pair matrix's sum (the
runtime's routed `sum` makes that right across ranks); `upper_factory` sums its upper triangle and
`rows_factory` each atom's pairs with higher-numbered atoms through a mask: both count a pair that
crosses ranks on each of its two ranks, a per-rank sum no halo fixes."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.structures import make_batch, periodic_slab_system


class PairMatrixLJ(torch.nn.Module):
    cutoff = 5.0

    def __init__(self, reduction: str) -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        d = torch.cdist(pos, pos)
        inside = (d < self.cutoff) & (d > 0)
        inv6 = torch.where(inside, (1.0 / d.clamp_min(0.5)) ** 6, torch.zeros_like(d))
        e_pair = 4.0 * (inv6 * inv6 - inv6)
        if self.reduction == "symmetric":
            energy = 0.5 * e_pair.sum()
        elif self.reduction == "upper":
            energy = torch.triu(e_pair, 1).sum()
        else:
            n = pos.shape[0]
            later = torch.arange(n).unsqueeze(0) > torch.arange(n).unsqueeze(1)
            energy = (e_pair * later).sum()
        forces = -torch.autograd.grad(energy, pos)[0]
        return {"energy": energy, "forces": forces}


def symmetric_factory() -> PairMatrixLJ:
    return PairMatrixLJ("symmetric").double()


def upper_factory() -> PairMatrixLJ:
    return PairMatrixLJ("upper").double()


def rows_factory() -> PairMatrixLJ:
    return PairMatrixLJ("rows").double()


def sample_batch() -> Batch:
    """A periodic slab long enough that each of two ranks has atoms beyond its halo."""
    return make_batch([periodic_slab_system((3, 3, 16), seed=1)])
