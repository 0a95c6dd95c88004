"""A stand-in for a third-party helper module such as `aimnet.nbops`.

The reductions are implemented inside `@torch.jit.script` functions, like many MLIP packages do
for speed. Python-level torch-function interception never sees the ops inside a scripted function,
so a runtime that distributes a model calling these helpers must be told about them (an adapter in
the spec's `third_party_helpers`).
"""

from __future__ import annotations

import warnings

import torch

__all__ = ["mol_count", "mol_sum"]

with warnings.catch_warnings():
    # Recent torch versions deprecate TorchScript; the third-party code this stands in for uses it anyway.
    warnings.simplefilter("ignore", DeprecationWarning)

    @torch.jit.script
    def _mol_sum(x: torch.Tensor, mol_idx: torch.Tensor, num_mols: int) -> torch.Tensor:
        shape = [num_mols]
        shape.extend(x.shape[1:])
        out = torch.zeros(shape, dtype=x.dtype, device=x.device)
        return out.index_add(0, mol_idx, x)

    @torch.jit.script
    def _mol_count(mol_idx: torch.Tensor, num_mols: int, dtype: torch.dtype) -> torch.Tensor:
        ones = torch.ones(mol_idx.shape[0], dtype=dtype, device=mol_idx.device)
        return torch.zeros(num_mols, dtype=dtype, device=mol_idx.device).index_add(0, mol_idx, ones)


def mol_sum(x: torch.Tensor, mol_idx: torch.Tensor, num_mols: int) -> torch.Tensor:
    """Sum the rows of `x` per molecule: `out[m] = sum(x[i] for i with mol_idx[i] == m)`.

    `x` is `[N, ...]`, `mol_idx` `[N]` (long), the result `[num_mols, ...]`. Differentiable in `x`.
    """
    out: torch.Tensor = _mol_sum(x, mol_idx, int(num_mols))
    return out


def mol_count(mol_idx: torch.Tensor, num_mols: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Number of atoms per molecule, `[num_mols]` in `dtype`."""
    out: torch.Tensor = _mol_count(mol_idx, int(num_mols), dtype)
    return out
