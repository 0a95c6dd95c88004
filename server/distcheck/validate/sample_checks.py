"""Sample checks: a sample that only allows a weaker check is said so, with what to do.

- `zero_forces`: the reference's forces (per-node autograd outputs with 3 components) are ~0 in some
  system, at most `ZERO_FORCE_ATOL` times the atol: an unrattled lattice, where forces cancel by
  symmetry. Wrong or missing force contributions cancel the same way, and any force within atol of
  zero passes, so the force comparison proves little.
- `no_cell`: a system has no cell (all-zero cell, no periodic axis), as an `.xyz` without a `Lattice=`
  line reads: periodic images and the halo that wraps around the cell are never exercised, and the
  slabs follow the cluster's extent.

Both are warnings (`SampleWarning` in `TraceReport.sample_warnings`, lines in `next_action`); they do
not change the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..batch import Batch
from ..report import SampleWarning, tolerance_for
from ..runtime import pristine as P

__all__ = ["ZERO_FORCE_ATOL", "sample_warnings"]

ZERO_FORCE_ATOL = 10.0
"""Forces whose largest magnitude in a system is at most this many atols count as ~0."""


def _systems(items: list[int]) -> str:
    return ("system " if len(items) == 1 else "systems ") + ", ".join(map(str, items))


def _zero_forces(
    batch: Batch, reference: Mapping[str, Any], kinds: Mapping[str, str], atol: Any
) -> list[SampleWarning]:
    outputs: Mapping[str, torch.Tensor] = reference.get("outputs") or {}
    derived: Mapping[str, bool] = reference.get("autograd_derived") or {}
    found: list[SampleWarning] = []
    for name, value in outputs.items():
        if kinds.get(name) != "per_node" or not derived.get(name, False) or list(value.shape[1:]) != [3]:
            continue
        tol = tolerance_for(atol, name, "per_node")
        limit = ZERO_FORCE_ATOL * float(tol) if isinstance(tol, (int, float)) and tol > 0 else 0.0
        flat = [s for s, sl in enumerate(batch.system_slices()) if sl.stop > sl.start]
        slices = batch.system_slices()
        with P.shielded():  # the user's replaced torch functions never judge
            largest = {s: P.float_of(P.amax(P.abs(P.detach(P.getitem(value, slices[s]))))) for s in flat}
        quiet = [s for s in flat if largest[s] <= limit]
        if not quiet:
            continue
        worst = max(largest[s] for s in quiet)
        found.append(
            SampleWarning(
                kind="zero_forces",
                systems=quiet,
                outputs=[name],
                message=(
                    f"the reference {name} of {_systems(quiet)} are ~0 (largest {worst:.3g}, at most "
                    f"{ZERO_FORCE_ATOL:g} × atol): an unrattled lattice, whose forces cancel by symmetry; wrong or "
                    f"missing contributions cancel the same way and anything within atol of zero passes, so the "
                    f"{name} comparison proves little there."
                ),
                remedy=(
                    "Rattle the positions (random displacements of ~0.05 Å, e.g. ase's atoms.rattle(0.05)) and "
                    "validate again."
                ),
            )
        )
    return found


def _no_cell(batch: Batch) -> list[SampleWarning]:
    with P.shielded():
        cells = P.to(P.detach(batch.cell), "cpu")
        pbc = P.tolist(P.any(P.to(batch.pbc, "cpu"), dim=1))
        filled = P.tolist(P.gt(P.sum(P.abs(P.reshape(cells, (cells.shape[0], -1))), dim=1), 0))
    open_ = [s for s in range(batch.num_systems) if not pbc[s] and not filled[s]]
    if not open_:
        return []
    return [
        SampleWarning(
            kind="no_cell",
            systems=open_,
            message=(
                f"{_systems(open_)} {'has' if len(open_) == 1 else 'have'} no cell (an open cluster, as an .xyz "
                "without a Lattice= line reads): periodic images and the halo that wraps around the cell are never "
                "exercised, so a model that runs on periodic systems is checked less than it could be."
            ),
            remedy=(
                'If the structure is periodic, give it its cell and pbc (extended XYZ: Lattice="..." pbc="T T T"; '
                "ASE: atoms.set_cell(...), atoms.pbc = True) and validate again."
            ),
        )
    ]


def sample_warnings(
    batch: Batch, reference: Mapping[str, Any], kinds: Mapping[str, str], atol: Any
) -> list[SampleWarning]:
    """The warnings this sample earns (see the module docstring), forces first."""
    return _zero_forces(batch, reference, kinds, atol) + _no_cell(batch)
