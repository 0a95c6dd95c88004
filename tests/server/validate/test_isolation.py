"""Isolation in the warm runner: one target's torch / numpy / Python global state never carries over
into the next validation in the same process.

The guard itself runs in a fresh interpreter (so a broken guard cannot leak into this test process,
and so `set_num_interop_threads` can still be called once); the runner is driven over its JSON-lines
protocol as the daemon drives it (one target per runner, `runner_protocol.Runners`): probe, leaky
target, probe again — the second probe must see what the first one saw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from runner_protocol import Runners

import distcheck

pytestmark = pytest.mark.procs

ROOT = Path(__file__).resolve().parents[3]
MODELS = Path(__file__).resolve().parent / "junk_models"
SERVER = Path(distcheck.__file__).resolve().parents[1]


def _python(code: str, timeout: float = 60) -> dict[str, Any]:
    """Run `code` in a fresh interpreter; it prints one JSON object last."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SERVER), str(ROOT)]))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


_STATE = """
import json, random, sys
import numpy as np
import torch
sys.path.insert(0, MODELS_DIR)
from state_probe import observed_state

def state():
    return {
        **observed_state(),
        "interop": torch.get_num_interop_threads(),
        "default_device": str(torch.get_default_device()),
        "matmul_precision": torch.backends.cuda.matmul.fp32_precision,
        "cudnn_conv_precision": torch.backends.cudnn.conv.fp32_precision,
        "rand": torch.rand(2, device="cpu").tolist(),
    }
""".replace("MODELS_DIR", repr(str(MODELS)))

_MUTATE = """
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.set_anomaly_enabled(True)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.set_float32_matmul_precision("high")   # the legacy API: mixed with the new one below
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    torch.set_default_device("meta")
    torch.manual_seed(1234); np.random.seed(1234); random.seed(1234)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)                # first call in this process: allowed, and final
"""


def test_guard_restores_every_setting_and_reports_what_it_cannot() -> None:
    result = _python(
        _STATE
        + """
from distcheck.runtime.isolation import isolated_global_state
torch.manual_seed(7); np.random.seed(7); random.seed(7)
before = state()
torch.manual_seed(7); np.random.seed(7); random.seed(7)
with isolated_global_state() as guard:
"""
        + _MUTATE
        + """
    changed = state()
after = state()
print(json.dumps({"before": before, "changed": changed, "after": after, "unrestored": guard.unrestored}))
"""
    )
    before, changed, after = result["before"], result["changed"], result["after"]
    differs = {k for k in before if before[k] != changed[k]}
    assert differs >= {"default_dtype", "grad_enabled", "deterministic", "num_threads", "torch_rng", "interop"}
    assert {k: v for k, v in after.items() if k != "interop"} == {k: v for k, v in before.items() if k != "interop"}
    # set_num_interop_threads can be called once per process: reported, never raised
    (unrestored,) = result["unrestored"]
    assert "set_num_interop_threads" in unrestored and "restart" in unrestored
    assert unrestored in result["stderr"]


def test_guard_restores_on_an_exception_and_restores_warnings_filters() -> None:
    result = _python(
        _STATE
        + """
import warnings
from distcheck.runtime.isolation import isolated_global_state
torch.manual_seed(7)
before = state(); filters = len(warnings.filters)
torch.manual_seed(7)
try:
    with isolated_global_state():
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        warnings.simplefilter("error")
        raise KeyError("the target failed")
except KeyError:
    pass
after = state()
print(json.dumps({"same": {k: before[k] == after[k] for k in before},
                  "filters": [filters, len(warnings.filters)]}))
"""
    )
    assert all(result["same"].values()), result["same"]
    assert result["filters"][0] == result["filters"][1]


def _target(module: str) -> dict[str, Any]:
    path = MODELS / f"{module}.py"
    target = {
        "factory": f"{path}:model_factory",
        "sample": f"{path}:sample_batch",
        "root": str(MODELS),
        "python_path": [str(MODELS), str(ROOT)],
        "options": {"world_size": 2, "device": "cpu", "timeout_sec": 60, "auto_fix": False},
        "name": module,
    }
    return {"target": target, "spec": None}


@pytest.mark.timeout(240)
def test_runner_validations_do_not_leak_global_state(tmp_path: Path) -> None:
    """Probe, leaky target, probe, probe, as the daemon sends them. A runner serves one target: the
    leaky one runs in a runner of its own, which retires after it (it set the inter-op threads), and the
    second probe runs in a fresh runner, seeing what the first saw (but for the random generators, which
    every fresh process seeds its own way); the third probe, in the second probe's runner, sees exactly
    what the second saw, generators included: what a validation sets is put back."""
    probe = tmp_path / "probe.jsonl"
    home = tmp_path / "runner"
    home.mkdir()
    runners = Runners(home, {"DISTCHECK_STATE_PROBE": str(probe)})
    verdicts, pids, retired = [], [], []
    try:
        for module in ("state_probe", "leaky_state", "state_probe", "state_probe"):
            answer, pid, _ = runners.validate(_target(module))
            assert "result" in answer, answer
            verdicts.append(answer["result"]["verdict"])
            pids.append(pid)
            retired.append(answer.get("retire", []))
    finally:
        runners.close()
    assert len(set(pids[:3])) == 3 and pids[3] == pids[2], "a runner served another target"
    assert any("set_num_interop_threads" in why for why in retired[1]), retired
    assert retired[0] == retired[2] == retired[3] == []
    assert verdicts == ["passed"] * 4
    first, leaky, second, third = (json.loads(line) for line in probe.read_text().splitlines())
    assert [r["tag"] for r in (first, leaky, second, third)] == ["probe", "leaky", "probe", "probe"]
    # the leaky target really changed its runner's state while it ran ...
    assert leaky["default_dtype"] == "torch.float64" and leaky["grad_enabled"] is False
    assert leaky["deterministic"] is True and leaky["num_threads"] == 1
    assert leaky["torch_rng"] != first["torch_rng"] and leaky["numpy_rng"] != first["numpy_rng"]
    # ... and no other validation saw any of it
    rng = ("torch_rng", "numpy_rng", "python_rng")
    assert {k: v for k, v in second.items() if k not in rng} == {k: v for k, v in first.items() if k not in rng}
    assert third == second
