"""Wrappers that fail in the ways real ones do: raise, die, hang, leave children behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import torch
from torch import nn

from distcheck.batch import Batch
from distcheck.runtime import current_context
from examples.structures import make_batch, periodic_slab_system


def _rank() -> int:
    ctx = current_context()
    return -1 if ctx is None else ctx.rank


class Energy(nn.Module):
    """A tiny per-atom energy summed per system, with a failure injected on rank 1."""

    cutoff = 3.0
    num_interactions = 1

    def __init__(self, failure: str) -> None:
        super().__init__()
        self.failure = failure

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        e = (batch.positions**2).sum(dim=1)
        if _rank() == 1:
            if self.failure == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.failure == "exit":
                os._exit(7)
            if self.failure == "raise":
                raise RuntimeError("injected failure on rank 1")
            if self.failure == "sleep":
                time.sleep(600)
            if self.failure == "skip_collective":
                return {"energy": torch.zeros(batch.num_systems, dtype=e.dtype)}
            if self.failure == "grandchild":
                subprocess.Popen(["sleep", "600"])
                time.sleep(600)
        energy = torch.zeros(batch.num_systems, dtype=e.dtype).index_add(0, batch.batch, e)
        if self.failure == "nan" and _rank() == 0:
            energy = energy * float("nan")
        if self.failure == "nan_rank1" and _rank() == 1:  # a replicated output: consolidation reads rank 0
            energy = energy * float("nan")
        return {"energy": energy}


def factory_raises() -> Energy:
    raise ValueError("cannot load weights from /nonexistent/model.pt")


def factory_die() -> Energy:
    return Energy("die")


def factory_exit() -> Energy:
    return Energy("exit")


def factory_raise_in_forward() -> Energy:
    return Energy("raise")


def factory_sleep() -> Energy:
    return Energy("sleep")


def factory_skip_collective() -> Energy:
    return Energy("skip_collective")


def factory_grandchild() -> Energy:
    return Energy("grandchild")


def factory_not_a_mapping() -> nn.Module:
    class ReturnsTensor(nn.Module):
        cutoff = 3.0

        def forward(self, batch: Batch) -> torch.Tensor:
            return batch.positions.sum()

    return ReturnsTensor()


def factory_no_cutoff() -> nn.Module:
    class NoCutoff(nn.Module):
        def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
            return {"energy": batch.positions.sum().reshape(1)}

    return NoCutoff()


def sample() -> Batch:
    return make_batch([periodic_slab_system((3, 3, 12), seed=3)])


def factory_nan() -> Energy:
    return Energy("nan")


def factory_nan_rank1() -> Energy:
    return Energy("nan_rank1")


def factory_raises_on_rank1() -> Energy:
    """Fails while building the wrapper on rank 1 only (a node missing the weights)."""
    if os.environ.get("DISTCHECK_RANK") == "1":
        raise FileNotFoundError("weights not found on this node: /nonexistent/rank1.pt")
    return Energy("none")


def factory_prints() -> Energy:
    """Talks on standard output while it builds, as many packages do on import."""
    print("model says hello on stdout", flush=True)
    return Energy("none")
