"""The editor's runner serves one target: another target's code never ran in the process that loads a
target's sample and compares its outputs (`jobs.runner`, `jobs.serving`).

The runner is driven over its JSON-lines protocol as the daemon drives it (`runner_protocol.Runners`):
a validation goes to the runner unless it refused the target or retired, in which case a fresh runner
takes it. Target B (correct; its sample records what it finds of torch), then target A (its import wraps
`torch.Tensor.index_add_` to add twice and registers a global forward hook), then B again: the second B
gets the verdict and the sample's view of the first, a fresh runner's. Today one runner served all
three: the second B's sample saw A's wrapper and hook, and its forces were consolidated through A's
`index_add_`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from runner_protocol import Runners

from distcheck.jobs.serving import RETIRED_ERROR

pytestmark = pytest.mark.procs

HERE = Path(__file__).resolve().parent
MODELS = HERE / "torch_patch_models"
ROOT = HERE.parents[2]


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


@pytest.mark.timeout(300)
def test_another_targets_code_never_ran_in_the_runner_that_validates_a_target(tmp_path: Path) -> None:
    probe = tmp_path / "probe.jsonl"
    home = tmp_path / "runner"
    home.mkdir()
    runners = Runners(home, {"DISTCHECK_STATE_PROBE": str(probe)})
    try:
        first, first_pid, _ = runners.validate(_target("runner_probe"))
        patching, patching_pid, refused = runners.validate(_target("runner_patching"))
        # the first runner imported B's code: it refused A and exited, a fresh one validated A
        assert [r["type"] for r in refused] == [RETIRED_ERROR] and patching_pid != first_pid
        assert "result" in patching, patching
        # A's import changed torch in that runner: it said so with its answer and exited after it
        assert any("index_add_" in why for why in patching.get("retire", [])), patching
        assert any("_global_forward_hooks" in why for why in patching["retire"])
        assert runners.proc is not None and runners.proc.wait(timeout=30) == 0
        second, second_pid, _ = runners.validate(_target("runner_probe"))
    finally:
        runners.close()
    assert second_pid not in (first_pid, patching_pid)
    # the second B is the first B: the same verdict and differences, a sample that saw torch as it is
    for answer in (first, second):
        assert "result" in answer and answer["result"]["verdict"] == "passed", answer
    assert [a["max_abs_diff"] for a in second["result"]["attempts"]] == [
        a["max_abs_diff"] for a in first["result"]["attempts"]
    ]
    seen = [json.loads(line) for line in probe.read_text().splitlines()]
    assert [(s["tag"], s["pid"]) for s in seen] == [
        ("probe", first_pid),
        ("patching", patching_pid),
        ("probe", second_pid),
    ]
    probes = [{k: v for k, v in s.items() if k not in ("tag", "pid")} for s in seen if s["tag"] == "probe"]
    assert probes == [{"index_add_is_torchs": True, "global_forward_hooks": 0}] * 2
