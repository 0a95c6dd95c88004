"""Wrappers around real machine-learning interatomic potentials, for distcheck's tests and demos.

Each module is an ordinary single-process wrapper with, at module scope, `model_factory()` (small
random weights, seeded, float64) and `sample_batch()` (a periodic box long enough that slab
partitions at world sizes 2 and 4 give every rank owned, halo and remote atoms):

  `aimnet2`     AIMNet2 from `aimnet` (extra `distcheck[aimnet]`): flat padded input, per-molecule
                sums through `aimnet.nbops.mol_sum` (charge equilibration), scatter mode `local`.
  `mace_model`  MACE from `mace-torch` (extra `distcheck[mace]`): 2 interactions, energy, forces, stress.
  `schnet`      SchNet from `torch-geometric` (extra `distcheck[pyg]`) with an `interaction_graph`
                built from the batch's vesin neighbour list (periodic, halo-aware).
  `common`      shared sample systems and neighbour-format conversions.
  `seeded`      the wrappers and specs above with one seeded distribution bug each (`bench/accuracy.py`).

Importing this package imports none of the third-party packages; each model module does.
"""
