"""Models whose replicated outputs come out differently on different ranks (no false pass).

`SplitModel` is a pair potential made of sub-modules, so the layer hooks see each step: `pair` gives
per-atom energies, `readout` sums them per system (`index_add` over `batch.batch`, routed by the
runtime), `shift` post-processes the per-system energies — where each buggy variant goes wrong on some
rank. Forces by autograd. The samples are small (< 200 atoms) and partition well at world size 2.

Variants (module-level factories):
- `factory_correct`: no bug (must pass);
- `factory_rank_constant`: rank 1 adds 1.0 to every system's energy;
- `factory_multi_system`: rank 1 adds 1.0 to the second system's energy only (use `sample_batch_multi`);
- `factory_last_rank`: the last rank scales the energies by 1.001 (its forces follow);
- `factory_reduction_order`: a global float32 `offset`, summed in an order that depends on the rank;
- `factory_global_split`: a global `total` every rank holds within tolerance of the single-process
  value, but ranks 0 and 1 are off by ±0.75 of the tolerance in opposite directions.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import cosine_cutoff
from examples.structures import make_batch, periodic_slab_system

CUTOFF = 4.0
ATOL, RTOL = 1e-5, 1e-4  # the validator's defaults: `factory_global_split` stays within them against the reference


def _rank() -> tuple[int, int]:
    """(rank, world size) in a rank, (0, 1) in one process."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class PairEnergy(nn.Module):
    """Per-atom energies: half the sum of a smooth pair term over each atom's edges."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def forward(self, batch: Batch, pos: torch.Tensor) -> torch.Tensor:
        nl = batch.neighbor_list(CUTOFF)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        phi = self.scale * torch.exp(-r) * cosine_cutoff(r, CUTOFF)
        phi = phi * (1.0 + 0.1 * batch.atomic_numbers[nl.edge_index[1]])
        return 0.5 * torch.zeros(pos.shape[0], dtype=pos.dtype, device=pos.device).index_add(0, nl.edge_index[0], phi)


class Readout(nn.Module):
    """Per-atom → per-system sum."""

    def forward(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        zeros = torch.zeros(batch.num_systems, dtype=e_atom.dtype, device=e_atom.device)
        return zeros.index_add(0, batch.batch, e_atom)


class Shift(nn.Module):
    """Per-system post-processing; the variants' bugs live here."""

    def __init__(self, bug: str) -> None:
        super().__init__()
        self.bug = bug

    def forward(self, energy: torch.Tensor) -> torch.Tensor:
        rank, world = _rank()
        if self.bug == "rank_constant" and rank == 1:
            return energy + 1.0
        if self.bug == "multi_system" and rank == 1:
            return energy + torch.tensor([0.0, 1.0], dtype=energy.dtype, device=energy.device)
        if self.bug == "last_rank" and world > 1 and rank == world - 1:
            return energy * 1.001
        return energy + 0.0


class SplitModel(nn.Module):
    """Outputs `energy [B]`, `forces [N,3]`, plus `offset []` or `total []` for the global variants."""

    num_interactions = 1
    cutoff = CUTOFF

    def __init__(self, bug: str = "none") -> None:
        super().__init__()
        self.bug = bug
        self.pair = PairEnergy()
        self.readout = Readout()
        self.shift = Shift(bug)
        # float32 terms whose sum depends on the order: 1e8 + 2 rounds to 1e8 (0 forwards, 2 backwards)
        self.terms: torch.Tensor
        self.register_buffer("terms", torch.tensor([1.0, 1.0, 1e8, -1e8], dtype=torch.float32))

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().to(torch.float64).requires_grad_(True)
        energy = self.shift(self.readout(self.pair(batch, pos), batch))
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        out = {"energy": energy.detach(), "forces": forces}
        rank, _ = _rank()
        if self.bug == "reduction_order":
            order = range(4) if rank == 0 else range(3, -1, -1)
            acc = torch.zeros((), dtype=torch.float32)
            for i in order:  # a sequential sum in an order that follows the rank
                acc = acc + self.terms[i]
            out["offset"] = acc
        if self.bug == "global_split":
            total = energy.detach().sum()
            tol = max(ATOL, RTOL * float(total.abs()))  # each rank 0.75 tol off the reference, 1.5 tol apart
            nudge = 0.0 if _rank()[1] == 1 else (0.75 * tol if rank == 0 else -0.75 * tol)
            out["total"] = total + nudge
        return out


def factory_correct() -> SplitModel:
    """No bug."""
    return SplitModel("none")


def factory_rank_constant() -> SplitModel:
    """Rank 1 adds 1.0 to every per-system energy."""
    return SplitModel("rank_constant")


def factory_multi_system() -> SplitModel:
    """Rank 1 adds 1.0 to system 1's energy only."""
    return SplitModel("multi_system")


def factory_last_rank() -> SplitModel:
    """The last rank scales the energies by 1.001."""
    return SplitModel("last_rank")


def factory_reduction_order() -> SplitModel:
    """A global float32 output summed in a rank-dependent order."""
    return SplitModel("reduction_order")


def factory_global_split() -> SplitModel:
    """A global output ±0.75 of the tolerance off on ranks 0 and 1, exact in one process."""
    return SplitModel("global_split")


model_factory = factory_rank_constant


def sample_batch() -> Batch:
    """One periodic H/C/O box, 7.8 x 7.8 x 41.6 Å (144 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 16), seed=31)])


def sample_batch_multi() -> Batch:
    """Two periodic boxes, 7.8 x 7.8 x 26 Å (90 atoms) and 7.8 x 7.8 x 31.2 Å (108 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 10), seed=32), periodic_slab_system((3, 3, 12), seed=33)])
