"""Seeded distribution bugs around the real models (`bench/accuracy.py`'s real-package section).

Each bug is one a wrapper author makes when distributing a model they did not write; the model itself
is untouched (the same seeded weights as its module's `model_factory`). A factory here is the
correct wrapper with one declaration wrong; a spec here is the module's validated spec with one field
wrong. Nothing is rank-aware; importing this module imports none of the third-party packages.

- `*_shallow_factory`: `num_interactions` under-declared (SchNet 1 of 3, MACE 1 of 2, AIMNet2 1 where
  its outputs reach two cutoffs) under `scatter_mode: "local"`, whose halo is `num_interactions × cutoff`;
- `schnet_short_cutoff_factory`: the wrapper declares a 3 Å `cutoff`, its interaction graph uses 5 Å;
- `SCHNET_ENERGY_REDUCED_TWICE`: energy in `all_reduce_outputs` (it is already summed over ranks);
- `SCHNET_FORCES_OWNED_ONLY`: the autograd forces declared owned-only (halo copies hold contributions);
- `MACE_STRESS_NOT_REDUCED`: MACE's stress, a per-rank partial, left out of `all_reduce_outputs`;
- `AIMNET2_NO_ADAPTER`: AIMNet2's per-molecule sums through `aimnet.nbops.mol_sum`, a per-rank sum
  in a third-party helper, with no adapter declared (the spec inference gives);
- `AIMNET2_HALO_CORRECTION`: AIMNet2 under `halo_correction`, whose dense neighbour sums (no scatter)
  no per-layer correction completes.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = [
    "AIMNET2_HALO_CORRECTION",
    "AIMNET2_LOCAL",
    "AIMNET2_NO_ADAPTER",
    "MACE_LOCAL",
    "MACE_STRESS_NOT_REDUCED",
    "SCHNET_ENERGY_REDUCED_TWICE",
    "SCHNET_FORCES_OWNED_ONLY",
    "SCHNET_LOCAL",
    "aimnet2_shallow_factory",
    "mace_shallow_factory",
    "schnet_shallow_factory",
    "schnet_short_cutoff_factory",
]


def _with(spec: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    for key, value in changes.items():
        if key == "scatter_mode":
            out["distribution"]["policy"]["scatter_mode"] = value
        else:
            out[key] = value
    return out


def _schnet_spec() -> dict[str, Any]:
    from examples.real import schnet

    return schnet.SPEC


def _mace_spec() -> dict[str, Any]:
    from examples.real import mace_model

    return mace_model.SPEC


def _aimnet2_specs() -> tuple[dict[str, Any], dict[str, Any]]:
    from examples.real import aimnet2

    return aimnet2.SPEC, aimnet2.CORRECT_SPEC


# The wrapper modules import only torch and distcheck at module scope (their packages load in the
# builders), so these constants cost nothing.
SCHNET_LOCAL = _with(_schnet_spec(), scatter_mode="local")
"""SchNet's spec under `local` (correct with the declared depth: 3 interactions × 5 Å)."""
SCHNET_ENERGY_REDUCED_TWICE = _with(_schnet_spec(), all_reduce_outputs=["energy"])
SCHNET_FORCES_OWNED_ONLY = _with(_schnet_spec(), owned_only_outputs=["forces"])
MACE_LOCAL = _with(_mace_spec(), scatter_mode="local")
"""MACE's spec under `local` (correct with the declared depth: 2 interactions × 5 Å)."""
MACE_STRESS_NOT_REDUCED = _with(_mace_spec(), all_reduce_outputs=[])
AIMNET2_NO_ADAPTER, AIMNET2_LOCAL = (copy.deepcopy(s) for s in _aimnet2_specs())
"""AIMNet2's inferred spec (no `mol_sum` adapter) and its validated one (`local`, the adapter)."""
AIMNET2_HALO_CORRECTION = _with(AIMNET2_LOCAL, scatter_mode="halo_correction")


def schnet_shallow_factory() -> Any:
    """SchNet (3 interactions) whose wrapper declares `num_interactions = 1`."""
    from examples.real import schnet

    wrapper = schnet.model_factory()
    wrapper.num_interactions = 1
    return wrapper


def schnet_short_cutoff_factory() -> Any:
    """SchNet whose wrapper declares `cutoff = 3.0` while its interaction graph asks for 5 Å."""
    from examples.real import schnet

    wrapper = schnet.model_factory()
    wrapper.cutoff = 3.0
    return wrapper


def mace_shallow_factory() -> Any:
    """MACE (2 interactions) whose wrapper declares `num_interactions = 1`."""
    from examples.real import mace_model

    wrapper = mace_model.model_factory()
    wrapper.num_interactions = 1
    return wrapper


def aimnet2_shallow_factory() -> Any:
    """AIMNet2 whose wrapper declares `num_interactions = 1`: its outputs reach 2 × 4 Å (under `local`, a
    halo of 8.5 Å gives the single-process values bit for bit, 4.5 Å and 6.5 Å forces 1e-4 eV/Å off)."""
    from examples.real import aimnet2

    wrapper = aimnet2.model_factory()
    wrapper.num_interactions = 1
    return wrapper
