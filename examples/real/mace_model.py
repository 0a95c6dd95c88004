"""MACE (`mace.modules.MACE`, mace-torch 0.3.16 with e3nn 0.4.4) behind a distcheck wrapper.

A small MACE (`ScaleShiftMACE`) with random weights: 2 interactions, 8 scalar + 8 vector channels, `max_ell` 2,
correlation 2, 5 Å cutoff, float64. The wrapper turns a `Batch` into MACE's input dict (one-hot
`node_attrs`, `edge_index`, Cartesian and unit `shifts`, `cell`, `batch`, `ptr`) from
`batch.neighbor_list(cutoff)` (vesin, halo-aware on a rank) and returns MACE's own energy, forces
and stress (strain derivative through a symmetric displacement, `compute_stress=True`).

What matters when distributing it:

- messages are summed onto atoms and atomic energies onto systems by `mace.tools.scatter.scatter_sum`
  (a `scatter_add_` in Python, imported by name into several MACE modules), which the runtime
  intercepts: per-edge sums are halo-corrected, per-system sums masked and all-reduced;
- 18 submodules are TorchScript (e3nn 0.4.4 codegen); none of them scatters, so nothing escapes the
  Python-level handlers (the dispatch observer would report it as `unintercepted[...]`);
- the stress is a per-graph autograd output, so each rank holds a partial: it must be all-reduced.

`e3nn` 0.4.4 loads its constants with `torch.load` without `weights_only=False`, which torch >= 2.6
refuses; `import mace` sets `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1` for the process first, so MACE is
always imported before e3nn here.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import make_spec, seeded
from examples.real.common import REAL_SPECIES, real_sample_batch, real_sample_batch_multi

__all__ = ["SPEC", "MACEWrapper", "build_mace", "model_factory", "sample_batch", "sample_batch_multi"]

#: The spec distcheck infers for this wrapper (and validates): stress all-reduced (a per-rank partial).
SPEC = make_spec(
    "halo_correction",
    {"energy": "per_graph", "forces": "per_node", "stress": "per_graph"},
    all_reduce_outputs=["stress"],
)


def build_mace(cutoff: float = 5.0, num_interactions: int = 2, energy_scale: float = 40.0) -> nn.Module:
    """A small `mace.modules.ScaleShiftMACE` for H, C, N, O (float64, eval mode).

    `energy_scale` multiplies the interaction energy (MACE's `atomic_inter_scale`) so that random
    weights give forces of order 1 eV/Å rather than 0.02, well above the validator's `atol`.
    """
    import numpy as np
    from mace import modules  # before e3nn: sets TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD for e3nn's constants

    # isort: split
    from e3nn import o3

    block = modules.interaction_classes["RealAgnosticResidualInteractionBlock"]
    model = modules.ScaleShiftMACE(
        atomic_inter_scale=float(energy_scale),
        atomic_inter_shift=0.0,
        r_max=float(cutoff),
        num_bessel=6,
        num_polynomial_cutoff=5,
        max_ell=2,
        interaction_cls=block,
        interaction_cls_first=block,
        num_interactions=int(num_interactions),
        num_elements=len(REAL_SPECIES),
        hidden_irreps=o3.Irreps("8x0e+8x1o"),
        MLP_irreps=o3.Irreps("8x0e"),
        atomic_energies=np.array([-1.5, -3.0, -4.5, -6.0]),
        avg_num_neighbors=20.0,
        atomic_numbers=list(REAL_SPECIES),
        correlation=2,
        gate=torch.nn.functional.silu,
        radial_MLP=[16, 16],
    )
    return model.double().eval()


class MACEWrapper(nn.Module):
    """`forward(batch) -> {"energy" [B], "forces" [N,3], "stress" [B,3,3]}` around a MACE model."""

    species: torch.Tensor

    def __init__(self, model: nn.Module, cutoff: float, num_interactions: int) -> None:
        super().__init__()
        self.model = model
        self.cutoff = float(cutoff)
        self.num_interactions = int(num_interactions)
        # Row k of the lookup is the one-hot column of atomic number k (-1 for elements MACE lacks).
        lookup = torch.full((max(REAL_SPECIES) + 1,), -1, dtype=torch.long)
        lookup[torch.tensor(REAL_SPECIES)] = torch.arange(len(REAL_SPECIES))
        self.register_buffer("species", lookup, persistent=False)

    def mace_input(self, batch: Batch) -> dict[str, torch.Tensor]:
        """MACE's input dict for `batch` (positions detached, float64)."""
        z = batch.atomic_numbers
        column = self.species[z.clamp(max=self.species.shape[0] - 1)]
        if bool((column < 0).any()) or bool((z >= self.species.shape[0]).any()):
            raise ValueError(f"MACEWrapper: this model knows atomic numbers {list(REAL_SPECIES)} only")
        dtype = torch.float64
        node_attrs = nn.functional.one_hot(column, len(REAL_SPECIES)).to(dtype)
        nl = batch.neighbor_list(self.cutoff)
        cell = batch.cell.to(dtype)
        sender = nl.edge_index[0]
        unit_shifts = nl.shifts.to(dtype)
        shifts = torch.einsum("ek,ekl->el", unit_shifts, cell[batch.batch[sender]])
        # Row offsets of each system (only their number is read by MACE); not a reduction.
        ptr = torch.searchsorted(batch.batch, torch.arange(batch.num_systems + 1, device=batch.batch.device))
        return {
            "positions": batch.positions.detach().to(dtype).clone(),
            "node_attrs": node_attrs,
            "edge_index": nl.edge_index,
            "shifts": shifts,
            "unit_shifts": unit_shifts,
            "cell": cell.reshape(-1, 3).clone(),
            "batch": batch.batch,
            "ptr": ptr,
        }

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        out: dict[str, Any] = self.model(
            self.mace_input(batch), training=self.training, compute_force=True, compute_stress=True
        )
        return {"energy": out["energy"], "forces": out["forces"], "stress": out["stress"]}


def model_factory() -> MACEWrapper:
    """A fresh wrapper around the same seeded small MACE on every call (float64, eval mode)."""
    cutoff, depth = 5.0, 2
    with seeded(13):
        model = build_mace(cutoff, depth)
    return MACEWrapper(model, cutoff, depth).eval()


def sample_batch() -> Batch:
    """384 atoms (H, C, N, O) in a periodic 10.4 x 10.4 x 62.4 Å box."""
    return real_sample_batch(seed=31)


def sample_batch_multi() -> Batch:
    """Two periodic boxes (384 + 352 atoms, total charges +1 and -1) in one batch."""
    return real_sample_batch_multi(seed=31)
