"""Warm equals cold, as a property: a corpus of models validated one after another in one long-lived
process with every warm path on (spares, resident ranks, the first attempt run ahead forced on, the
stores) gives, model by model, the verdict, status, spec, rules and max diffs of a fresh process per
model with every switch off.

The corpus mixes the examples (a pass at attempt 1, passes after a fix on resident ranks, an adapter
fix), models that patch torch when imported (a wrapped `Tensor.index_add_`, a global forward hook), and
a model that reads an environment variable the caller changes between two of its validations. Each
model runs twice in the warm process (the second time with what the first left: spares, learned
packages, the remembered first spec and receptive field), and the torch-patching ones run before the
correct ones so that anything they left behind would show.
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

import distcheck

ROOT = Path(__file__).resolve().parents[3]
SERVER = Path(distcheck.__file__).resolve().parents[1]
PATCHES = ROOT / "tests/server/validate/torch_patch_models"
CONTEXT = ROOT / "tests/server/runtime/caller_context_models.py"
MODE = "DISTCHECK_TEST_MODEL_MODE"  # caller_context_models.MODE_VARIABLE
PAIR_SAMPLE = f"{PATCHES / 'pair.py'}:sample_batch"

CORPUS: list[tuple[str, str, str, dict[str, str]]] = [
    # (name, factory, sample, environment of this validation)
    ("index_add_wrapped", f"{PATCHES / 'double_index_add.py'}:model_factory", PAIR_SAMPLE, {}),
    ("forward_hook", f"{PATCHES / 'scaling_hook.py'}:model_factory", PAIR_SAMPLE, {}),
    ("mpnn", "examples.mpnn:model_factory", "examples.mpnn:sample_batch", {}),
    ("unaware", "examples.unaware_model:model_factory", "examples.unaware_model:sample_batch", {}),
    ("helper", "examples.helper_model:model_factory", "examples.helper_model:sample_batch", {}),
    ("env_clean", f"{CONTEXT}:model_factory", f"{CONTEXT}:sample_batch", {MODE: ""}),
    ("env_buggy", f"{CONTEXT}:model_factory", f"{CONTEXT}:sample_batch", {MODE: "buggy"}),
]

WARM = {"DISTCHECK_ATTEMPT_AHEAD": "1"}
COLD = {
    "DISTCHECK_SPARES": "0",
    "DISTCHECK_RESIDENT_RANKS": "0",
    "DISTCHECK_ATTEMPT_AHEAD": "0",
    "DISTCHECK_FIELD_CACHE": "0",
    "DISTCHECK_BYTECODE_CACHE": "0",
}

SCRIPT = """
import json, os, sys
sys.path[:0] = [{patches!r}, {root!r}]
from distcheck import validate_on_cpu
from distcheck.runtime import load_object

def summary(report):
    return {{
        "ok": report.ok,
        "status": report.status if hasattr(report, "status") else None,
        "spec": report.spec.signature(),
        "fix_applied": report.fix_applied,
        "attempts": [
            [a.passed, a.rule, a.spec.signature(), {{k: v for k, v in (a.max_abs_diff or {{}}).items()}}]
            for a in report.attempts
        ],
    }}

for name, factory, sample, env, repeats in json.loads(sys.argv[1]):
    for _ in range(repeats):
        saved = {{k: os.environ.get(k) for k in env}}
        os.environ.update(env)
        try:
            report = validate_on_cpu(factory, load_object(sample)(), max_fix_attempts=4)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        print("REPORT " + json.dumps([name, summary(report)]), flush=True)
"""


def _run(entries: list[tuple[str, str, str, dict[str, str], int]], switches: dict[str, str], cache: Path) -> list[Any]:
    """The summaries of validating `entries` in order, in one fresh interpreter under `switches`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTCHECK_")}
    env.update(switches, XDG_CACHE_HOME=str(cache), PYTHONPATH=os.pathsep.join([str(SERVER), str(ROOT)]))
    code = textwrap.dedent(SCRIPT.format(patches=str(PATCHES), root=str(ROOT)))
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(entries)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=str(ROOT),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads(line[len("REPORT ") :]) for line in done.stdout.splitlines() if line.startswith("REPORT ")]


def _same(warm: dict[str, Any], cold: dict[str, Any], where: str) -> None:
    assert {k: warm[k] for k in ("ok", "status", "spec", "fix_applied")} == {
        k: cold[k] for k in ("ok", "status", "spec", "fix_applied")
    }, where
    assert [a[:3] for a in warm["attempts"]] == [a[:3] for a in cold["attempts"]], where
    for (*_, got), (*_, want) in zip(warm["attempts"], cold["attempts"]):
        assert got.keys() == want.keys(), where
        for output, value in got.items():  # round-off: the same ranks' sums in another order
            assert value == pytest.approx(want[output], rel=1e-6, abs=1e-12), (where, output, got, want)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_long_lived_process_gives_every_model_the_verdict_of_a_fresh_one(tmp_path: Path) -> None:
    warm = _run([(*entry, 2) for entry in CORPUS], WARM, tmp_path / "warm-cache")
    assert [name for name, _ in warm] == [name for name, *_ in CORPUS for _ in range(2)]
    for name, factory, sample, env in CORPUS:
        (cold,) = _run([(name, factory, sample, env, 1)], COLD, tmp_path / f"cold-{name}")
        runs = [summary for n, summary in warm if n == name]
        for k, summary in enumerate(runs):
            _same(summary, cold[1], f"{name}, warm run {k + 1}")
