"""Through the daemon: a target validated after one whose import patched torch runs in another runner
(the standby), whose process never held the first target's code, and gets a fresh runner's verdict.

Target `patching` wraps `torch.Tensor.index_add_` (adds twice) and registers a global forward hook
when imported; target `probe` is correct, and its sample records what it finds of torch in the process
that loads it. Today one runner served both: the probe's sample saw the wrapper and the hook, and its
forces were consolidated through the wrapper (the report failed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .harness import copy_examples, lsp_session

pytestmark = [pytest.mark.asyncio, pytest.mark.slow, pytest.mark.procs]

MODELS = Path(__file__).resolve().parents[1] / "validate" / "torch_patch_models"


def _add_targets(ws: Path) -> None:
    for name in ("pair", "runner_patching", "runner_probe"):
        shutil.copy(MODELS / f"{name}.py", ws / f"{name}.py")
    with (ws / "pyproject.toml").open("a") as fh:
        for target, module in (("patching", "runner_patching"), ("probe", "runner_probe")):
            fh.write(
                f'\n[[tool.distcheck.targets]]\nname = "{target}"\nfactory = "{module}.py:model_factory"\n'
                f'sample = "{module}.py:sample_batch"\nauto_fix = false\n'
            )


@pytest.mark.timeout(240)
async def test_a_target_after_one_that_patched_torch_runs_in_a_runner_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = copy_examples(tmp_path)
    _add_targets(ws)
    probe = tmp_path / "probe.jsonl"
    monkeypatch.setenv("DISTCHECK_STATE_PROBE", str(probe))
    async with lsp_session(ws) as s:
        start = s.rec.mark()
        verdicts = []
        for target in ("patching", "probe"):
            mark = s.rec.mark()
            await s.command("distcheck.validate", target)
            payload = await s.wait_report(target, mark)
            verdicts.append(payload["report"]["verdict"])
        shown = [e.message for e in s.rec.of("window/showMessage", start)]
    assert not [m for m in shown if "runner" in m], shown  # retiring a runner is nothing to warn about
    assert verdicts == ["passed", "passed"]
    patching, seen = (json.loads(line) for line in probe.read_text().splitlines())
    assert patching["tag"] == "patching" and seen["tag"] == "probe"
    assert seen["pid"] != patching["pid"], "the probe ran in the runner that had imported the patching target"
    assert {k: v for k, v in seen.items() if k not in ("tag", "pid")} == {
        "index_add_is_torchs": True,
        "global_forward_hooks": 0,
    }
