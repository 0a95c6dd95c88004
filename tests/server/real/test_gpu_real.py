"""The real models on a GPU (`pytest -m gpu`; each skips without CUDA or without its package)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch

from distcheck import trace_and_validate

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

MODELS = [("schnet", "torch_geometric.nn"), ("mace_model", "mace.modules"), ("aimnet2", "aimnet.models")]


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize(("name", "package"), MODELS)
def test_real_model_validates_on_one_gpu(name: str, package: str, world_size: int) -> None:
    pytest.importorskip(package)
    module: Any = importlib.import_module(f"examples.real.{name}")
    report = trace_and_validate(
        module.model_factory, module.sample_batch(), world_size=world_size, device="cuda:0", atol=1e-8, rtol=1e-6
    )
    assert report.ok, report.next_action
    if name == "aimnet2":
        assert report.attempts[-1].rule == "declare_helper_adapter"
