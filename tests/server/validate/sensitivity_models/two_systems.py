"""Samples for per-system partition health and the sample checks, with the example pair potential.

`sample_batch`: a long periodic box and a small open molecule; the molecule lies within the halo of
both slabs, so every rank holds all of it (half the sample tests nothing about domain boundaries).
`sample_unrattled`: a perfect one-species lattice, whose forces cancel by symmetry.
`sample_two_long`: two long periodic boxes (healthy).
"""

from __future__ import annotations

from distcheck.batch import Batch
from examples import pair_potential
from examples.structures import cluster_system, make_batch, periodic_slab_system

model_factory = pair_potential.model_factory


def sample_batch() -> Batch:
    """216 atoms in a 62.4 Å periodic box, then an 8-atom open cluster."""
    return make_batch([periodic_slab_system((3, 3, 24), seed=11), cluster_system((2, 2, 2), seed=12)])


def sample_unrattled() -> Batch:
    """A perfect simple-cubic carbon lattice, 216 atoms, no displacement."""
    return make_batch([periodic_slab_system((3, 3, 24), jitter=0.0, species=(6,), seed=13)])


def sample_two_long() -> Batch:
    """Two long periodic boxes (216 + 180 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 24), seed=14), periodic_slab_system((3, 3, 20), seed=15)])
