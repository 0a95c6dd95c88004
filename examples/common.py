"""Small building blocks shared by the example models (plain PyTorch, nothing rank-aware)."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

__all__ = ["MAX_Z", "GaussianRBF", "cosine_cutoff", "make_spec", "seeded", "spec_copy"]

#: Atomic numbers 0..MAX_Z-1 have their own parameters.
MAX_Z = 100


def cosine_cutoff(r: torch.Tensor, cutoff: float) -> torch.Tensor:
    """`0.5 (cos(pi r / cutoff) + 1)` inside the cutoff, 0 outside: value and slope vanish at `cutoff`."""
    inside = r < cutoff
    return torch.where(inside, 0.5 * (torch.cos(math.pi * r / cutoff) + 1.0), torch.zeros_like(r))


class GaussianRBF(nn.Module):
    """`num_basis` Gaussians of width `cutoff / num_basis` with centres evenly spread on [0, cutoff]."""

    centres: torch.Tensor

    def __init__(self, num_basis: int, cutoff: float) -> None:
        super().__init__()
        self.register_buffer("centres", torch.linspace(0.0, cutoff, num_basis))
        self.width = cutoff / num_basis

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        return torch.exp(-0.5 * ((r.unsqueeze(-1) - self.centres) / self.width) ** 2)


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with the global torch RNG seeded to `seed`, restoring the caller's RNG state after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def make_spec(
    scatter_mode: str,
    output_kinds: Mapping[str, str],
    all_reduce_outputs: Sequence[str] = (),
    owned_only_outputs: Sequence[str] = (),
    third_party_helpers: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A distcheck spec (JSON-ready dict, format version 1) with a halo policy in `scatter_mode`."""
    policy = {"kind": "halo", "scatter_mode": scatter_mode, "gather_mode": "halo_read", "halo_width": None}
    distribution: dict[str, Any] = {"policy": policy}
    if third_party_helpers is not None:
        distribution["third_party_helpers"] = [dict(h) for h in third_party_helpers]
    return {
        "format": "distcheck-spec",
        "version": 1,
        "distribution": distribution,
        "system_reductions": True,
        "output_kinds": dict(output_kinds),
        "all_reduce_outputs": list(all_reduce_outputs),
        "owned_only_outputs": list(owned_only_outputs),
    }


def spec_copy(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy, so a model's spec attribute can be edited without changing the module constant."""
    return copy.deepcopy(dict(spec))
