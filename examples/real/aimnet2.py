"""AIMNet2 (`aimnet.models.AIMNet2`, aimnet 0.2.5) behind a distcheck wrapper, with small random weights.

The wrapper turns a `Batch` into AIMNet2's flat ("mode 1") input: `coord`, `numbers`, `charge`,
`mol_idx`, `nbmat`, `shifts` and `cell`, with one padding atom as the last row (`numbers` 0, its
`mol_idx` that of the last real atom, every `nbmat` row padded with the padding atom's index). The
neighbour matrix comes from `batch.neighbor_list(cutoff)` (vesin), so it is halo-aware on a rank.
It returns the energy, autograd forces and the equilibrated charges.

What makes AIMNet2 interesting to distribute:

- Its per-atom environment sums are dense sums over the padded neighbour matrix (`index_select`
  then `einsum`/`sum` over the neighbour axis), not scatters: the runtime has nothing to correct per
  layer, so the halo must be as deep as the receptive field (3 passes x cutoff). distcheck infers
  `scatter_mode: "local"` from that (3 message passes, no per-edge scatter in the reference trace).
- Every per-molecule sum goes through `aimnet.nbops.mol_sum`, 7 calls per forward: in each of the
  two charge updates one in `_update_q` (the charge-conservation penalty) and two in `ops.nse` (the
  charge equilibration proper), and one in `AtomicSum` (the energy). Its `scatter_add_` is keyed by
  `mol_idx`, which includes the padding row, so the runtime's per-system handler does not recognise
  it; on a rank it sums owned + halo rows. The wrapper carries no `distribution_spec`, as an author
  who has not thought about it would: the inferred spec (`SPEC`) lacks the adapter, distcheck's
  helper trace flags `mol_sum` and auto-fix declares the `reduction` adapter (`CORRECT_SPEC`).

AIMNet2's base class casts inputs to the default dtype at import time (float32); this wrapper keeps
float64 by overriding the instance's dtype tables, so the comparison is not limited by float32
noise (~1e-7 between repeated CPU runs). The long-range Coulomb module (`LRCoulomb`) is left out:
its DSF kernel detaches the charges unless called with `training_derivatives=True` (forces 4-17 %
off otherwise) and its `simple` mode sums over all pairs, which no finite halo can hold.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import make_spec, seeded
from examples.real.common import flat_neighbor_matrix, real_sample_batch, real_sample_batch_multi

__all__ = [
    "CORRECT_SPEC",
    "SPEC",
    "AIMNet2Wrapper",
    "build_aimnet2",
    "model_factory",
    "sample_batch",
    "sample_batch_multi",
]

_OUTPUT_KINDS = {"energy": "per_graph", "forces": "per_node", "charges": "per_node"}

#: What distcheck infers: `local` (dense neighbour sums cannot be halo-corrected), no adapter for `mol_sum`.
SPEC = make_spec("local", _OUTPUT_KINDS, owned_only_outputs=["charges"])

#: The validated spec: `mol_sum` declared as a per-system reduction over argument 0, dimension 0.
CORRECT_SPEC = make_spec(
    "local",
    _OUTPUT_KINDS,
    owned_only_outputs=["charges"],
    third_party_helpers=[
        {"kind": "reduction", "module_path": "aimnet.nbops", "attr_name": "mol_sum", "atom_arg": 0, "atom_dim": 0}
    ],
)

#: AIMNet2's dtype tables (`AIMNet2Base._required_keys_dtype` / `_optional_keys_dtype`) with float64
#: in place of the import-time default dtype.
_F64 = torch.float64
_REQUIRED_DTYPES = [_F64, torch.int64, _F64]
_OPTIONAL_DTYPES = [
    _F64,  # mult
    torch.int32,  # nbmat
    torch.int32,  # nbmat_lr
    torch.int64,  # mol_idx
    _F64,  # shifts
    _F64,  # shifts_lr
    _F64,  # cell
    torch.int32,  # nbmat_dftd3
    _F64,  # shifts_dftd3
    _F64,  # cutoff_dftd3
    torch.int32,  # nbmat_coulomb
    _F64,  # shifts_coulomb
    _F64,  # cutoff_coulomb
    torch.bool,  # pbc
]


def build_aimnet2(cutoff: float = 4.0, energy_scale: float = 30.0) -> nn.Module:
    """A small `aimnet.models.AIMNet2` (3 passes, 8 features, 8 radial shifts; ~30k weights), float64.

    Outputs: a per-atom energy MLP, per-element shifts and `AtomicSum` (the per-molecule sum).
    `energy_scale` multiplies the energy MLP's last layer so that random weights give forces of
    order 1 eV/Å rather than 0.03, well above the validator's `atol`.
    """
    from aimnet.models import AIMNet2
    from aimnet.modules import AtomicShift, AtomicSum, Output

    aim_size = 32
    outputs = {
        "energy_mlp": Output(
            mlp={"activation_fn": nn.GELU(), "last_linear": True, "hidden": [16]},
            n_in=aim_size,
            n_out=1,
            key_in="aim",
            key_out="energy",
        ),
        "atomic_shift": AtomicShift(key_in="energy", key_out="energy", dtype=torch.float64),
        "atomic_sum": AtomicSum(key_in="energy", key_out="energy"),
    }
    model = AIMNet2(
        aev={"rc_s": float(cutoff), "nshifts_s": 8},
        nfeature=8,
        d2features=True,
        ncomb_v=6,
        hidden=([32, 24], [32, 24], [32, 24]),
        aim_size=aim_size,
        outputs=outputs,
    )
    with torch.no_grad():
        last = model.outputs["energy_mlp"].mlp[-1]
        last.weight.mul_(energy_scale)
        last.bias.mul_(energy_scale)
    model = model.double().eval()
    # Instance attributes shadow the class's float32 tables (plain Python attributes, eager mode only).
    model._required_keys_dtype = list(_REQUIRED_DTYPES)
    model._optional_keys_dtype = list(_OPTIONAL_DTYPES)
    return model


class AIMNet2Wrapper(nn.Module):
    """`forward(batch) -> {"energy" [B], "forces" [N,3], "charges" [N]}` around an AIMNet2 model."""

    def __init__(self, model: nn.Module, cutoff: float) -> None:
        super().__init__()
        self.model = model
        self.cutoff = float(cutoff)
        #: Message-passing depth: one per AIMNet2 pass (`len(model.mlps)`), each gathering neighbours.
        self.num_interactions = len(model.mlps)  # type: ignore[arg-type]

    def flat_input(self, batch: Batch, coord: torch.Tensor) -> dict[str, torch.Tensor]:
        """AIMNet2's flat input dict for `batch` with the real atoms at `coord` (plus the padding atom)."""
        n = batch.num_atoms
        nl = batch.neighbor_list(self.cutoff)
        nbmat, shifts = flat_neighbor_matrix(nl, n)
        pad_coord = torch.zeros(1, 3, dtype=coord.dtype, device=coord.device)
        charge = batch.charge if batch.charge is not None else torch.zeros(batch.num_systems, dtype=coord.dtype)
        return {
            "coord": torch.cat([coord, pad_coord]),
            "numbers": torch.cat([batch.atomic_numbers, batch.atomic_numbers.new_zeros(1)]),
            "charge": charge.to(coord.dtype).clone(),
            "mol_idx": torch.cat([batch.batch, batch.batch[-1:]]),
            "nbmat": nbmat,
            "shifts": shifts.to(coord.dtype),
            "cell": batch.cell.to(coord.dtype).clone(),
        }

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        coord = batch.positions.detach().to(torch.float64).requires_grad_(True)
        out: dict[str, Any] = self.model(self.flat_input(batch, coord))
        energy: torch.Tensor = out["energy"]
        forces = -torch.autograd.grad(energy.sum(), coord, create_graph=self.training)[0]
        return {"energy": energy, "forces": forces, "charges": out["charges"][:-1]}


def model_factory() -> AIMNet2Wrapper:
    """A fresh wrapper around the same seeded small AIMNet2 on every call (float64, eval mode)."""
    cutoff = 4.0
    with seeded(11):
        model = build_aimnet2(cutoff)
    return AIMNet2Wrapper(model, cutoff).eval()


def sample_batch() -> Batch:
    """384 atoms (H, C, N, O) in a periodic 10.4 x 10.4 x 62.4 Å box with total charge +1."""
    return real_sample_batch(seed=21, charge=1.0)


def sample_batch_multi() -> Batch:
    """Two periodic boxes (384 + 352 atoms, total charges +1 and -1) in one batch."""
    return real_sample_batch_multi(seed=21)
