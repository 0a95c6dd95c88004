"""Scripted aggregation helpers, imported by name elsewhere (`from examples.accuracy.scripted_ops import …`).

`system_energy` calls another scripted function, so its index_add sits two scripted calls deep.
"""

from __future__ import annotations

import warnings

import torch

__all__ = ["scatter_receivers", "system_energy"]

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    @torch.jit.script
    def scatter_receivers(phi: torch.Tensor, receiver: torch.Tensor, num_atoms: int) -> torch.Tensor:
        out = torch.zeros(num_atoms, dtype=phi.dtype, device=phi.device)
        return out.scatter_add(0, receiver, phi)  # unrouted: per-edge -> per-atom

    @torch.jit.script
    def _sum_by(x: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
        out = torch.zeros(size, dtype=x.dtype, device=x.device)
        return out.index_add(0, index, x)  # unrouted: per-atom -> per-system

    @torch.jit.script
    def system_energy(e: torch.Tensor, system: torch.Tensor, num_systems: int) -> torch.Tensor:
        return _sum_by(e, system, num_systems)
