"""Models for the advice the validator gives: each has one cause, and only advice that can fix it is
right. Small samples (< 200 atoms), world size 2.

- `factory_onehot_readout`: a correct model (in one process) whose per-system energy is a matrix
  product with a one-hot system matrix, a reduction no handler routes. Each rank's energy then counts
  the rows it holds: ranks disagree on the energy. Its forces ARE autograd-derived, so reading them
  from owned rows only is wrong advice even where it happens to match.
- `factory_anchor`: per-atom energies get a term anchored to the first row the wrapper is given (a
  rank sees another atom there). No rule has evidence for this; no sub-modules, so no layer record.
- `factory_crash`: raises on rank 1 after its `embed` and `interaction` sub-modules have run (and the
  handlers have fired), inside `readout`.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import cosine_cutoff
from examples.structures import make_batch, periodic_slab_system

CUTOFF = 4.0


def _pair_energies(batch: Batch, pos: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    nl = batch.neighbor_list(CUTOFF)
    r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
    phi = scale * torch.exp(-r) * cosine_cutoff(r, CUTOFF) * (1.0 + 0.1 * batch.atomic_numbers[nl.edge_index[1]])
    return 0.5 * torch.zeros(pos.shape[0], dtype=pos.dtype, device=pos.device).index_add(0, nl.edge_index[0], phi)


class Pair(nn.Module):
    """Per-atom pair energies."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def forward(self, batch: Batch, pos: torch.Tensor) -> torch.Tensor:
        return _pair_energies(batch, pos, self.scale)


class OneHotReadout(nn.Module):
    """Per-atom → per-system as `one_hot(batch).T @ e_atom` (no handler sees a matrix product)."""

    def forward(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        onehot = nn.functional.one_hot(batch.batch, batch.num_systems).to(e_atom.dtype)
        return onehot.T @ e_atom


class OneHotModel(nn.Module):
    """Outputs `energy [B]`, `forces [N,3]` (autograd)."""

    num_interactions = 1
    cutoff = CUTOFF

    def __init__(self) -> None:
        super().__init__()
        self.pair = Pair()
        self.readout = OneHotReadout()

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().to(torch.float64).requires_grad_(True)
        energy = self.readout(self.pair(batch, pos), batch)
        return {"energy": energy.detach(), "forces": -torch.autograd.grad(energy.sum(), pos)[0]}


class AnchorModel(nn.Module):
    """One flat forward (no sub-modules); per-atom energies depend on the first row's position."""

    num_interactions = 1
    cutoff = CUTOFF

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().to(torch.float64).requires_grad_(True)
        e_atom = _pair_energies(batch, pos, self.scale) + 1e-3 * torch.linalg.vector_norm(pos - pos[:1], dim=-1)
        energy = torch.zeros(batch.num_systems, dtype=pos.dtype).index_add(0, batch.batch, e_atom)
        return {"energy": energy.detach(), "forces": -torch.autograd.grad(energy.sum(), pos)[0]}


class Embed(nn.Module):
    """Per-atom features from the species."""

    def forward(self, batch: Batch) -> torch.Tensor:
        return 0.1 * batch.atomic_numbers.to(torch.float64).unsqueeze(-1).repeat(1, 4)


class CrashReadout(nn.Module):
    """Sums per system, then fails on rank 1 (a weights file only rank 0's node has)."""

    def forward(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        energy = torch.zeros(batch.num_systems, dtype=e_atom.dtype).index_add(0, batch.batch, e_atom)
        if os.environ.get("DISTCHECK_RANK") == "1":
            raise FileNotFoundError("readout weights not found on this node: /nonexistent/readout.pt")
        return energy


class CrashModel(nn.Module):
    """`embed` → `interaction` (pair energies) → `readout`, which raises on rank 1."""

    num_interactions = 1
    cutoff = CUTOFF

    def __init__(self) -> None:
        super().__init__()
        self.embed = Embed()
        self.interaction = Pair()
        self.readout = CrashReadout()

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().to(torch.float64).requires_grad_(True)
        h = self.embed(batch)
        e_atom = self.interaction(batch, pos) * (1.0 + h.sum(-1))
        energy = self.readout(e_atom, batch)
        return {"energy": energy.detach(), "forces": -torch.autograd.grad(energy.sum(), pos)[0]}


def factory_onehot_readout() -> OneHotModel:
    """Energy through a one-hot matrix product."""
    return OneHotModel()


def factory_anchor() -> AnchorModel:
    """Per-atom energies anchored to the first row."""
    return AnchorModel()


def factory_crash() -> CrashModel:
    """Raises inside `readout` on rank 1."""
    return CrashModel()


model_factory = factory_onehot_readout


def sample_batch() -> Batch:
    """One periodic H/C/O box, 7.8 x 7.8 x 41.6 Å (144 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 16), seed=41)])
