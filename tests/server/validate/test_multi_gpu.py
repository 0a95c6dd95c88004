"""One rank per GPU with NCCL (run with `pytest -m gpu` on a machine with two or more GPUs)."""

from __future__ import annotations

import pytest
import torch

from distcheck import MLIPSpec, trace_and_validate
from examples import charge_eq, helper_model, mpnn, pair_potential, stress_model, unaware_model

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
GPU_MODELS = "tests/server/validate/gpu_models.py"

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPUS < 2, reason="needs two or more GPUs")]


@pytest.mark.parametrize("module", [pair_potential, mpnn, charge_eq, stress_model])
def test_examples_pass_with_nccl_one_rank_per_gpu(module: object) -> None:
    report = trace_and_validate(module.model_factory, module.sample_batch(), device="cuda")  # type: ignore[attr-defined]
    assert report.meta.backend == "nccl" and report.meta.devices == ["cuda:0", "cuda:1"]
    assert report.verdict == "passed", report.next_action


def test_helper_found_and_declared_with_nccl() -> None:
    report = trace_and_validate(
        helper_model.model_factory,
        helper_model.sample_batch(),
        device=["cuda:0", "cuda:1"],
        watched_helper_packages=["examples.thirdparty.nbops"],
    )
    assert report.meta.backend == "nccl"
    assert report.verdict == "passed" and report.attempts[-1].rule == "declare_helper_adapter"


def test_every_gpu_up_to_world_size() -> None:
    world = min(GPUS, 4)
    report = trace_and_validate(mpnn.model_factory, mpnn.sample_batch(), world_size=world, device="cuda")
    assert report.meta.devices == [f"cuda:{i}" for i in range(world)]
    # Every output must match; "inconclusive" is accepted only for a degenerate partition (a rank without
    # remote atoms at this world size), where the pass proves less.
    best = report.best_attempt
    assert best is not None and best.passed, report.next_action
    assert report.verdict == "passed" or best.degenerate, report.next_action


def test_seeded_bug_gives_the_same_verdict_with_gloo_on_one_gpu_and_nccl_on_two() -> None:
    wrong = MLIPSpec.from_dict(unaware_model.WRONG_SPEC)
    verdicts = {}
    for device in ("cuda:0", "cuda"):
        report = trace_and_validate(
            unaware_model.model_factory, unaware_model.sample_batch(), device=device, spec=wrong, auto_fix=False
        )
        verdicts[report.meta.backend] = (report.verdict, sorted(report.attempts[0].failing_outputs))
    assert verdicts["gloo"] == verdicts["nccl"]
    assert verdicts["nccl"][0] == "failed" and "forces" in verdicts["nccl"][1]


def test_nvlink_multicast_is_off_in_every_nccl_rank() -> None:
    report = trace_and_validate(
        f"{GPU_MODELS}:pair_potential_checks_nccl_env", pair_potential.sample_batch(), device="cuda"
    )
    assert report.meta.backend == "nccl"
    assert report.verdict == "passed", report.next_action
