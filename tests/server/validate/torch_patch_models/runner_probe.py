"""A correct runner target whose sample records what it finds of torch in the process that loads it
(the runner): whether `torch.Tensor.index_add_` is torch's own and how many global forward hooks there
are, as one JSON line appended to $DISTCHECK_STATE_PROBE (`record`)."""

from __future__ import annotations

import json
import os

import pair
import torch

from distcheck.batch import Batch
from examples.pair_potential import PairPotential

__all__ = ["model_factory", "sample_batch"]


def model_factory() -> PairPotential:
    """The pair potential."""
    return pair.model_factory()


def sample_batch() -> Batch:
    """The pair's box, after recording what this process's torch looks like."""
    seen = {
        "tag": "probe",
        "pid": os.getpid(),
        "index_add_is_torchs": "index_add_" not in vars(torch.Tensor),
        "global_forward_hooks": len(torch.nn.modules.module._global_forward_hooks),
    }
    with open(os.environ["DISTCHECK_STATE_PROBE"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps(seen) + "\n")
    return pair.sample_batch()
