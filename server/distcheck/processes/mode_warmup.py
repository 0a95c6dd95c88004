"""Imported last by the rank pool's forkserver: what torch loads lazily on the first use of the modes a
rank runs under, loaded once there.

A rank's forward runs under a torch-function mode (`HandlerMode`) and a torch-dispatch mode
(`ScatterObserver`); the reference under torch-function modes. The first time a process does that,
torch imports what it needs for it, which otherwise every rank and reference process pays in its first
forward. Running one tiny forward on the CPU under both kinds of mode here loads what this torch loads
for it, so every process forked from the forkserver starts with it. TorchDynamo is not among it
(`observer.dynamo_disabled_lazily`), unless this torch imports it anyway; then it is loaded here once,
as it was preloaded before. The tensors are tiny and on the CPU, and nothing runs backward: no CUDA
(a forkserver must never initialise it), no intra-op thread pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..runtime.observer import dynamo_disabled_lazily

__all__ = ["warm_modes"]


class _PassFunctions(TorchFunctionMode):
    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        return func(*args, **(kwargs or {}))


@dynamo_disabled_lazily
class _PassDispatch(TorchDispatchMode):  # type: ignore[no-untyped-call,misc]
    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        return func(*args, **(kwargs or {}))


def warm_modes() -> None:
    """One forward with an index_add (recording a graph) under a function mode and a dispatch mode. No
    backward: the autograd engine's first run starts its device threads, which in a CUDA build of torch
    initialise CUDA, and processes forked from a forkserver that did cannot use the GPU. (What
    `autograd.grad` loads lazily, the symbolic-shape helpers, `forkserver.BASE_PRELOAD` imports.)"""
    # no random draw: processes forked from here must start with torch's generator untouched
    pos = torch.linspace(-1.0, 1.0, 12, dtype=torch.float64).reshape(4, 3).requires_grad_(True)
    index = torch.tensor([0, 0, 1, 1])
    with _PassFunctions(), _PassDispatch():  # type: ignore[no-untyped-call]
        energy = torch.zeros(2, dtype=pos.dtype).index_add(0, index, (pos**2).sum(dim=1))
    del energy


warm_modes()
