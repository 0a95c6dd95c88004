"""Example interatomic potentials for distcheck's demos, docs and tests.

Every model here is an ordinary single-process PyTorch module that never knows about ranks; the
distcheck runtime distributes it by intercepting its torch operations. Each example module has, at
module scope, `model_factory()` (a fresh float64 model with seeded weights) and `sample_batch()` (a
deterministic `distcheck.batch.Batch`, elongated so that slab partitions at world sizes 2 and 4 give
every rank owned, halo and remote atoms).

Modules:
  `structures`     shared sample builders (`jittered_lattice`, `periodic_slab_system`, `cluster_system`,
                   `make_batch`) and `slab_check`, which proves a sample is not a degenerate partition.
  `common`         small shared layers (smooth cutoff, radial basis, spec builder, seeding).
  `pair_potential` `PairPotential`: a smoothly cut Morse pair potential (one interaction).
  `mpnn`           `MPNN`: a k-layer message-passing network with autograd forces.
  `charge_eq`      `ChargeEquilibration`: charges from a constrained minimisation (per-system sums).
  `stress_model`   `StrainStressModel`: an embedded-atom model with stress by the strain trick.
  `helper_model`   `HelperChargeModel`: charge equilibration whose per-system sums go through a
                   third-party helper (`examples.thirdparty.nbops.mol_sum`, a TorchScript function)
                   and whose spec deliberately omits the adapter (`CORRECT_SPEC` has it).
  `helper_readout` the energy readout used by `helper_model` (imports `mol_sum` by name).
  `unaware_model`  `HaloUnawareMPNN`: builds its own neighbour list with vesin (a halo-unaware
                   backbone); correct under `scatter_mode: "local"`, wrong under `halo_correction`.
"""
