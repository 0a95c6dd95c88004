"""A target whose sample records the process-global state it finds (for the isolation tests).

`sample_batch()` runs in the process that drives the validation (the editor's runner); it appends
what it sees — default dtype, grad mode, determinism flags, thread count, a digest of every random
generator — as one JSON line to the file named by `DISTCHECK_STATE_PROBE`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from typing import Any

import numpy as np
import torch
from torch import nn

from distcheck.batch import Batch
from examples.structures import make_batch, periodic_slab_system


def _digest(value: Any) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _numpy_state() -> list[int]:
    state: Any = np.random.get_state()
    return list(state[1].tolist())


def observed_state() -> dict[str, Any]:
    """The global state a validation should start from, in JSON-ready form."""
    return {
        "default_dtype": str(torch.get_default_dtype()),
        "new_tensor_dtype": str(torch.tensor([1.0]).dtype),
        "grad_enabled": torch.is_grad_enabled(),
        "anomaly": torch.is_anomaly_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "num_threads": torch.get_num_threads(),
        "torch_rng": _digest(torch.get_rng_state().tolist()),
        "numpy_rng": _digest(_numpy_state()),
        "python_rng": _digest(random.getstate()),
    }


def record(tag: str) -> None:
    """Append `{"tag", **observed_state()}` to $DISTCHECK_STATE_PROBE."""
    with open(os.environ["DISTCHECK_STATE_PROBE"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"tag": tag, **observed_state()}) + "\n")


class Pair(nn.Module):
    """A smooth pair energy and its forces."""

    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        with torch.enable_grad():
            pos = batch.positions.detach().requires_grad_(True)
            nl = batch.neighbor_list(self.cutoff)
            r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
            pair = torch.exp(-r) * (1.0 + torch.cos(torch.pi * r / self.cutoff))
            e_atom = 0.5 * torch.zeros(pos.shape[0], dtype=pos.dtype).index_add(0, nl.edge_index[0], pair)
            energy = torch.zeros(batch.num_systems, dtype=pos.dtype).index_add(0, batch.batch, e_atom)
            forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy.detach(), "forces": forces}


def model_factory() -> Pair:
    """The pair model."""
    return Pair()


def sample_batch() -> Batch:
    """One periodic box (100 atoms); records the state it sees first."""
    record("probe")
    return make_batch([periodic_slab_system((2, 2, 25), seed=3)])
