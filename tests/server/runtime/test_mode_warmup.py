"""What torch loads lazily on the first forward under a rank's modes is loaded once, in the forkserver
(the symbolic-shape helpers `autograd.grad` needs are there before the model is imported), and
TorchDynamo is not among it: a rank's forward under the handler and dispatch-observer modes leaves
`torch._dynamo` unloaded, and the forkserver's start-up no longer pays for it. Run in a fresh
interpreter: this pytest's own forkserver may preload packages that import it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import HERE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

SCRIPT = f"""
import json, sys
import torch
from distcheck import run_distributed
from distcheck.runtime import load_object
from distcheck.processes.mode_warmup import warm_modes
warm_modes()
models = {os.path.join(HERE, "dynamo_probe_models.py")!r}
run = run_distributed(models + ":model_factory", load_object(models + ":sample_batch")(),
                      {{"format": "distcheck-spec", "version": 1}}, world_size=2, timeout_sec=120)
print(json.dumps({{"ranks": [out["loaded"].tolist() for out in run.rank_outputs],
                  "here": "torch._dynamo" in sys.modules}}))
"""


@pytest.mark.procs
def test_no_rank_and_no_forkserver_imports_torch_dynamo() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISTCHECK_PRELOAD", "DISTCHECK_SPARE_PACKAGES")}
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "server"), ROOT, env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r[0] for r in facts["ranks"]] == [0.0, 0.0], f"a rank's forward loaded TorchDynamo: {facts}"
    assert [r[1] for r in facts["ranks"]] == [1.0, 1.0], f"the ranks loaded what autograd.grad needs: {facts}"
    assert facts["here"] is False, "the warm-up of the modes loaded TorchDynamo"


def test_the_warm_ups_draw_no_random_numbers() -> None:
    """The forkserver's mode warm-up and a spare's autograd and kernel warm-ups leave torch's, numpy's and
    Python's generators as they found them: what a process's model draws must not depend on which
    warm-ups ran there."""
    import random

    import numpy as np
    import torch

    from distcheck.processes.mode_warmup import warm_modes
    from distcheck.processes.spares import warmup

    before = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    warm_modes()
    warmup.warm_autograd(torch.device("cpu"))
    done = warmup.warm_kernels(torch.device("cpu"))
    assert done.failed == [] and done.skipped == [] and len(done.warmed) == len(warmup.FAMILIES)
    assert torch.equal(before[0], torch.get_rng_state())
    assert (before[1] == np.random.get_state()[1]).all() and before[2] == random.getstate()
