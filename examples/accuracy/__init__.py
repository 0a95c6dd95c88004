"""The accuracy corpus: small correct models, each aggregating in one form real MLIP packages use, and a
buggy twin of each that must keep failing.

Every module has `model_factory()`, `buggy_model_factory()` (the same model with a real distribution bug:
its per-atom energies are anchored to row 0, an atom that is not the same on every rank), `sample_batch()`
(two periodic systems, 198 atoms) and `SPEC`. `base.AccuracyModel` is the shared pair potential; each
module overrides how edges reach atoms (`to_atoms`) and atoms reach systems (`to_systems`).

  `scripted_local`     both aggregations in `@torch.jit.script` functions of the same module
  `scripted_imported`  both in scripted functions of `scripted_ops`, imported by name (one calls another)
  `scripted_module`    atoms → systems in a scripted `nn.Module` the factory builds
  `mask_loop`          per-system sums and means over boolean masks (and by the mask's count), stacked
  `method_forms`       `Tensor.index_add_`, `scatter_reduce_`, `index_put_(accumulate=True)`, `t.bincount()`, `out=`
  `multi_total`        `forces = -grad(e_atom.sum(), pos)` on two systems, `e_atom.sum()` / `.mean()` outputs
  `segment_offsets`    `torch.segment_reduce(..., offsets=...)` from distcheck's (global) `bincount`
  `scatter_reduce_forms` `scatter_reduce` mean/amax per system and per edge
  `unique_counts`      `unique_consecutive` / `unique` counts and inverse of the system index, `repeat_interleave`
  `named_only`         a per-system product (`scatter_reduce(prod)`): no distributed form, named, not fixed
  `autograd_function`  message passing in the user's own `torch.autograd.Function`s (`FORMS`; one 180-atom box)
  `ewald_kernel`       a `torch.ops` structure factor, atoms → k-vectors: named with its entry (one 108-atom box)
  `checkpointed`       message passing under `torch.utils.checkpoint` (`FORMS`; one 180-atom box)
"""
