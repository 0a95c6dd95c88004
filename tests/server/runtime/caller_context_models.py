"""Models for the caller-context tests: a model whose distributed result is wrong in one mode, the mode
read from what a job carries of its caller.

`ModeModel` gives energy `|r|^2` summed per system; in *buggy* mode each rank adds its rank index to
the energy (a per-rank term, so the ranks disagree and differ from the single-process reference; the
reference itself never changes). The mode is buggy when any of these holds:

- the environment variable `MODE_VARIABLE` was "buggy" when this module was imported;
- the file `MODE_FILE`, relative to the working directory of the forward, holds "buggy";
- the module `HELPER_MODULE`, imported with this one from the import path, says `MODE = "buggy"`;
- the variable is "hashseed" and the interpreter started with hash randomisation off
  (`PYTHONHASHSEED=0`: a variable that takes effect only when a process starts).

`ProbeModel` is the same model with what its process saw as a second output, for the tests that run
the ranks directly: `[buggy, pid]`.
"""

from __future__ import annotations

import importlib
import os
import sys

import torch
from torch import nn

from distcheck.batch import Batch
from examples.structures import make_batch, periodic_slab_system

MODE_VARIABLE = "DISTCHECK_TEST_MODEL_MODE"
MODE_FILE = "distcheck_test_model_mode.cfg"
HELPER_MODULE = "distcheck_test_mode_helper"

IMPORT_MODE = os.environ.get(MODE_VARIABLE, "")
try:
    HELPER_MODE = str(getattr(importlib.import_module(HELPER_MODULE), "MODE", ""))
except ImportError:
    HELPER_MODE = ""


def _file_mode() -> str:
    try:
        with open(MODE_FILE) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def buggy() -> bool:
    """Whether this process runs the model in its buggy mode (see the module docstring)."""
    return (
        IMPORT_MODE == "buggy"
        or HELPER_MODE == "buggy"
        or _file_mode() == "buggy"
        or (IMPORT_MODE == "hashseed" and sys.flags.hash_randomization == 0)
    )


class ModeModel(nn.Module):
    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        e = (batch.positions**2).sum(dim=1)
        energy = torch.zeros(batch.num_systems, dtype=e.dtype, device=e.device).index_add(0, batch.batch, e)
        if buggy() and torch.distributed.is_available() and torch.distributed.is_initialized():
            energy = energy + float(torch.distributed.get_rank())
        return {"energy": energy}


class ProbeModel(ModeModel):
    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        out = super().forward(batch)
        out["facts"] = torch.tensor([float(buggy()), float(os.getpid())], dtype=out["energy"].dtype)
        return out


def model_factory() -> ModeModel:
    return ModeModel()


def probe_factory() -> ProbeModel:
    return ProbeModel()


def sample_batch() -> Batch:
    return make_batch([periodic_slab_system((3, 3, 6), seed=5)])
