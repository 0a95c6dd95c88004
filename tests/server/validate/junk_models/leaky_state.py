"""A target that changes process-global state the way real model code does: at import, in its
sample and through the libraries it calls (for the isolation tests). Its model is `state_probe`'s."""

from __future__ import annotations

import random

import numpy as np
import torch
from state_probe import Pair, record

from distcheck.batch import Batch
from examples.structures import make_batch, periodic_slab_system

torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)
torch.manual_seed(1234)
np.random.seed(1234)
random.seed(1234)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = True
torch.set_anomaly_enabled(True)
torch.set_num_threads(1)
try:
    torch.set_num_interop_threads(1)  # only possible once per process: may already be too late
except RuntimeError:
    pass


def model_factory() -> Pair:
    """The pair model."""
    return Pair()


def sample_batch() -> Batch:
    """The probe's box; records the (changed) state it sees, then draws from every generator."""
    record("leaky")
    torch.rand(3)
    np.random.rand(3)
    random.random()
    return make_batch([periodic_slab_system((2, 2, 25), seed=3)])
