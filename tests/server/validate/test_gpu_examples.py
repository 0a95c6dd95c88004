"""Every example, both precisions and the seeded bugs on one GPU (`pytest -m gpu`; skipped without CUDA)."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
from seeded_bugs import SEEDED_BUGS, seeded_spec

from distcheck import trace_and_validate
from examples import charge_eq, helper_model, mpnn, pair_potential, stress_model, unaware_model

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

FP32 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_models.py")
WATCH = ["examples.thirdparty.nbops"]


@pytest.mark.parametrize("world_size", [2, 4, 8])
@pytest.mark.parametrize("module", [charge_eq, stress_model, helper_model, unaware_model])
def test_every_example_fp64(module: Any, world_size: int) -> None:
    spec = unaware_model.WRONG_SPEC if module is unaware_model else None
    report = trace_and_validate(
        module.model_factory,
        module.sample_batch(),
        world_size=world_size,
        device="cuda:0",
        backend="auto",
        spec=spec,
        watched_helper_packages=WATCH,
    )
    assert report.meta.backend == "gloo"
    # Every output must match; "inconclusive" is accepted only for a degenerate partition (a rank without
    # remote atoms at this world size), where the pass proves less.
    best = report.best_attempt
    assert best is not None and best.passed, report.next_action
    assert report.verdict == "passed" or best.degenerate, report.next_action


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("name", ["pair_potential", "mpnn", "charge_eq", "stress_model"])
def test_examples_fp32_default_tolerances(name: str, world_size: int) -> None:
    module = {"pair_potential": pair_potential, "mpnn": mpnn, "charge_eq": charge_eq, "stress_model": stress_model}
    batch = module[name].sample_batch().to(dtype=torch.float32)
    report = trace_and_validate(f"{FP32}:{name}_fp32", batch, world_size=world_size, device="cuda:0")
    assert report.ok, report.next_action


@pytest.mark.parametrize(("module", "mutate", "rule"), SEEDED_BUGS)
def test_seeded_bugs_found_on_gpu(module: Any, mutate: Any, rule: str) -> None:
    spec = seeded_spec(module, mutate)
    report = trace_and_validate(module.model_factory, module.sample_batch(), device="cuda:0", spec=spec)
    assert not report.attempts[0].passed and report.ok, report.next_action
    assert report.attempts[-1].rule == rule
