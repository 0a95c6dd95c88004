"""Message-passing models whose declared depth is wrong, with weak far hops (small filter weights).

`model_factory`: three layers, declares `num_interactions = 2`, spec `local`. With the derived halo
(2 × 3 Å + skin) the third hop is missing at every domain boundary, an error orders of magnitude above
round-off but inside atol/rtol: before the receptive-field check it passed. `factory_two_declared_one`
is the same mistake one layer lower; `factory_declared_right` declares its three layers (no alarm).
"""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples import mpnn
from examples.common import make_spec, seeded
from examples.structures import make_batch, periodic_slab_system

CUTOFF = 3.0
SPEC = make_spec("local", {"energy": "per_graph", "forces": "per_node"})


def _model(layers: int, declared: int) -> mpnn.MPNN:
    with seeded(5):
        model = mpnn.MPNN(num_interactions=layers, cutoff=CUTOFF)
    with torch.no_grad():
        for filt in model.filters:
            assert isinstance(filt, torch.nn.Linear)
            filt.weight.mul_(0.05)  # weak messages: a missing far hop stays below the tolerances
    model.num_interactions = declared
    model.distribution_spec = dict(SPEC)
    return model.double().eval()


def model_factory() -> mpnn.MPNN:
    """Three layers, declared two."""
    return _model(3, 2)


def factory_two_declared_one() -> mpnn.MPNN:
    """Two layers, declared one."""
    return _model(2, 1)


def factory_declared_right() -> mpnn.MPNN:
    """Three layers, declared three."""
    return _model(3, 3)


def sample_batch() -> Batch:
    """One periodic 7.8 × 7.8 × 62.4 Å box (216 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 24), seed=3)])
