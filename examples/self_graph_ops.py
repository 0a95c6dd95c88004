"""A `torch_scatter`-like helper written with plain torch ops, as PyG-style packages ship one.

`scatter(src, index, dim_size, reduce)` aggregates rows of `src` into `dim_size` rows by `index`
(`sum`, `mean`, `max`), the way `torch_geometric.utils.scatter` does without the compiled extension:
an in-place `scatter_add_` / `scatter_reduce_` into a fresh tensor, a count for the mean. Each of
those calls is a per-edge → per-atom aggregation the runtime's handlers see.
"""

from __future__ import annotations

import torch

__all__ = ["scatter"]


def scatter(src: torch.Tensor, index: torch.Tensor, dim_size: int, reduce: str = "sum") -> torch.Tensor:
    """Rows of `src` aggregated by `index` into `dim_size` rows (`sum`, `mean` or `max`); rows that
    receive nothing are 0."""
    if reduce not in ("sum", "mean", "max"):
        raise ValueError(f"scatter: reduce must be 'sum', 'mean' or 'max', got {reduce!r}")
    shape = (dim_size, *src.shape[1:])
    idx = index.reshape((-1,) + (1,) * (src.ndim - 1)).expand_as(src)
    if reduce == "max":
        return src.new_zeros(shape).scatter_reduce_(0, idx, src, "amax", include_self=False)
    total = src.new_zeros(shape).scatter_add_(0, idx, src)
    if reduce == "sum":
        return total
    count = src.new_zeros(shape).scatter_add_(0, idx, torch.ones_like(src))
    return total / count.clamp(min=1)
