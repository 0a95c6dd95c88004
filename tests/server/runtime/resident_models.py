"""Models for the resident-rank tests: what a rank that served an earlier run could carry over.

`StateModel` reports the process-global state it finds (default dtype, a draw from torch's generator,
grad mode, an environment variable, the import path, the working directory) and then changes them all,
as careless model code does. `FlaggedModel` raises, or hangs,
in a run that starts while the file named by DISTCHECK_TEST_FLAG holds "raise" or "hang"."""

from __future__ import annotations

import os
import sys
import time

import torch
from torch import nn

from distcheck.batch import Batch
from examples.structures import make_batch, periodic_slab_system


class StateModel(nn.Module):
    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        seen = [
            float(torch.get_default_dtype() == torch.float64),
            float(torch.rand(1, dtype=torch.float64)),
            float(torch.is_grad_enabled()),
            float("DISTCHECK_TEST_LEAK" in os.environ),
            float("/distcheck-test-leak" in sys.path),
            float(os.getcwd() == "/"),
        ]
        torch.set_default_dtype(torch.float64)
        torch.manual_seed(1234)
        torch.rand(7)
        os.environ["DISTCHECK_TEST_LEAK"] = "1"
        sys.path.append("/distcheck-test-leak")
        os.chdir("/")
        e = (batch.positions**2).sum(dim=1)
        energy = torch.zeros(batch.num_systems, dtype=e.dtype, device=e.device).index_add(0, batch.batch, e)
        return {"energy": energy, "facts": torch.tensor(seen, dtype=e.dtype)}


class FlaggedModel(nn.Module):
    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        flag = os.environ.get("DISTCHECK_TEST_FLAG", "")
        what = open(flag).read().strip() if flag and os.path.exists(flag) else ""
        if what == "raise":
            raise RuntimeError("flagged to fail in this run")
        if what == "hang":
            time.sleep(600)
        e = (batch.positions**2).sum(dim=1)
        energy = torch.zeros(batch.num_systems, dtype=e.dtype, device=e.device).index_add(0, batch.batch, e)
        return {"energy": energy, "pid": torch.tensor([float(os.getpid())], dtype=e.dtype)}


class InteropModel(nn.Module):
    """Sets torch's inter-op thread count, which a process can set once and never put back; reports
    whether the call took and its process."""

    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        try:
            torch.set_num_interop_threads(
                max(1, torch.get_num_interop_threads() - 1) if torch.get_num_interop_threads() > 1 else 2
            )
            changed = 1.0
        except RuntimeError:  # set already, or inter-op work started in this process
            changed = 0.0
        e = (batch.positions**2).sum(dim=1)
        energy = torch.zeros(batch.num_systems, dtype=e.dtype, device=e.device).index_add(0, batch.batch, e)
        return {"energy": energy, "facts": torch.tensor([changed, float(os.getpid())], dtype=e.dtype)}


def interop_factory() -> InteropModel:
    return InteropModel()


def state_factory() -> StateModel:
    return StateModel()


def flagged_factory() -> FlaggedModel:
    return FlaggedModel()


def sample_batch() -> Batch:
    return make_batch([periodic_slab_system((3, 3, 8), seed=5)])
