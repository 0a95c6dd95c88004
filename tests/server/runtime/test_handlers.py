"""Every per-system reduction op the handlers claim to cover, run on real gloo ranks."""

from __future__ import annotations

import pytest
import torch

from conftest import assert_matches, handler_ref, reference
from distcheck import run_distributed
from distcheck.runtime import load_object

pytestmark = pytest.mark.procs

SPEC = {
    "format": "distcheck-spec",
    "version": 1,
    "output_kinds": {"energy": "per_graph", "forces": "per_node", "atomic_energies": "per_node"},
    "owned_only_outputs": ["atomic_energies"],
}
VARIANTS = [
    "index_add",
    "index_add_dropped",
    "torch_index_add",
    "scatter_add",
    "scatter_add_2d",
    "scatter_reduce_sum",
    "scatter_reduce_mean",
    "segment_sum",
    "segment_mean",
    "bincount_mean",
]


def _run(variant: str, sample: str, world_size: int, spec: dict[str, object] = SPEC) -> None:
    factory = handler_ref(f"factory_{variant}")
    batch = load_object(handler_ref(sample))()
    ref = reference(load_object(factory), batch)
    run = run_distributed(factory, batch, spec, world_size=world_size)
    assert_matches(run.outputs, ref, 1e-10)
    assert run.handler_counts.get("per_system_reduce", 0) >= world_size, run.handler_counts


@pytest.mark.parametrize("variant", VARIANTS)
def test_reduction_variant_multi_system(variant: str) -> None:
    _run(variant, "sample_multi", 2)


@pytest.mark.parametrize("variant", ["index_add", "tensor_sum", "segment_mean"])
def test_reduction_variant_three_ranks(variant: str) -> None:
    _run(variant, "sample_single", 3)


def test_in_place_handler_keeps_in_place_semantics() -> None:
    """`zeros.index_add_(…)` with the result dropped still gives the corrected, differentiable value."""
    _run("index_add_dropped", "sample_single", 2)


def test_scatter_reduce_amax_over_ranks() -> None:
    batch = load_object(handler_ref("sample_multi"))()
    ref = reference(load_object(handler_ref("factory_max")), batch)
    run = run_distributed(handler_ref("factory_max"), batch, {"format": "distcheck-spec", "version": 1}, world_size=2)
    assert torch.equal(run.outputs["emax"], ref["emax"])


def test_custom_op_needs_its_declaration() -> None:
    """An opaque kernel is invisible until declared; declared, its transforms make it exact."""
    batch = load_object(handler_ref("sample_single"))()
    factory = handler_ref("factory_custom_op")
    ref = reference(load_object(factory), batch)
    wrong = run_distributed(factory, batch, SPEC, world_size=2)
    assert not torch.allclose(wrong.outputs["energy"], ref["energy"], rtol=1e-6)
    declared = dict(SPEC)
    declared["distribution"] = {
        "custom_ops": [
            {
                "op": "distcheck_test::system_sum",
                "arg_transforms": {"0": "slice_owned", "1": "slice_owned"},
                "output_transforms": {"0": "all_reduce_sum"},
            }
        ]
    }
    run = run_distributed(factory, batch, declared, world_size=2)
    assert_matches(run.outputs, ref, 1e-10)
    assert run.handler_counts["custom_op[distcheck_test::system_sum]"] == 2
