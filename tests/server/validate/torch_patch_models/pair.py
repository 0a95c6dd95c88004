"""The correct model every torch-patching module of this folder validates: the examples' Morse pair
potential on a small periodic box (48 atoms), and a spec whose halo is too shallow for it (one auto-fix
attempt, `widen_halo`, makes it pass). This module patches nothing."""

from __future__ import annotations

import copy
from typing import Any

from distcheck.batch import Batch
from examples import pair_potential
from examples.structures import make_batch, periodic_slab_system


def model_factory() -> pair_potential.PairPotential:
    """The pair potential (float64, eval mode, seeded parameters)."""
    return pair_potential.model_factory()


def sample_batch() -> Batch:
    """A periodic 5.2 x 5.2 x 31.2 Å box of H/C/O (48 atoms)."""
    return make_batch([periodic_slab_system((2, 2, 12), seed=11)])


def shallow_spec() -> dict[str, Any]:
    """The model's spec with a `local` halo narrower than its cutoff: attempt 1 fails, `widen_halo` fixes it."""
    spec = copy.deepcopy(pair_potential.SPEC)
    spec["distribution"]["policy"].update(scatter_mode="local", halo_width=2.0)
    return spec
