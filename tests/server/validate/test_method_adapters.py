"""`third_party_helpers` entries whose attr_name names a method (`"Class.method"`) or an attribute of a
submodule: patched on the class for the block, halo rows zeroed, restored afterwards."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from distcheck.runtime.adapters import AdapterError, install_adapters
from distcheck.runtime.context import RankContext
from distcheck.spec import HelperAdapter
from examples.thirdparty import methods

N = 6
E = torch.arange(1.0, N + 1)  # 1..6
BATCH = torch.tensor([0, 0, 0, 1, 1, 1])
OWNED = torch.tensor([True, True, False, True, True, False])
ALL = torch.tensor([6.0, 15.0])
OWNED_ONLY = torch.tensor([3.0, 9.0])


def _ctx() -> RankContext:
    return RankContext(
        rank=0, world_size=1, num_global_atoms=N, num_systems=2, local_ids=torch.arange(N), owned_mask=OWNED
    )


def _entry(attr: str, kind: str = "reduction", **extra: Any) -> HelperAdapter:
    data = {"kind": kind, "module_path": "examples.thirdparty.methods", "attr_name": attr, **extra}
    return HelperAdapter.from_dict(data)


CALLS: dict[str, Callable[[], torch.Tensor]] = {
    "MolSum.forward": lambda: methods.MolSum()(E, BATCH, 2),
    "ScaledMolSum.forward": lambda: methods.ScaledMolSum()(E, BATCH, 2),
    "Calculator.energy": lambda: methods.Calculator(1.0).energy(E, BATCH, 2),
    "Ops.static_sum": lambda: methods.Ops.static_sum(E, BATCH, 2),
    "Ops.class_sum": lambda: methods.Ops().class_sum(E, BATCH, 2),
}


@pytest.mark.parametrize("attr", sorted(CALLS))
def test_a_method_reduction_adapter_zeroes_halo_rows_and_is_restored(attr: str) -> None:
    call = CALLS[attr]
    assert torch.equal(call(), ALL)
    ctx = _ctx()
    with install_adapters([_entry(attr)], ctx) as names:
        assert names == [f"examples.thirdparty.methods.{attr}"]
        assert torch.equal(call(), OWNED_ONLY)
    assert ctx.handler_counts[f"adapter[examples.thirdparty.methods.{attr}]"] == 1
    assert torch.equal(call(), ALL)


def test_an_inherited_method_is_patched_on_the_subclass_only_and_removed_again() -> None:
    with install_adapters([_entry("ScaledMolSum.forward")], _ctx()):
        assert torch.equal(methods.MolSum()(E, BATCH, 2), ALL)
        assert "forward" in vars(methods.ScaledMolSum)
    assert "forward" not in vars(methods.ScaledMolSum)


def test_static_and_class_methods_keep_their_kind_and_instances_of_a_method_keep_self() -> None:
    with install_adapters([_entry("Ops.static_sum"), _entry("Ops.class_sum"), _entry("Calculator.energy")], _ctx()):
        assert isinstance(vars(methods.Ops)["static_sum"], staticmethod)
        assert isinstance(vars(methods.Ops)["class_sum"], classmethod)
        assert torch.equal(methods.Calculator(2.0).energy(E, BATCH, 2), 2 * OWNED_ONLY)
    assert isinstance(vars(methods.Ops)["static_sum"], staticmethod)


def test_a_python_replacement_for_a_method_gets_the_methods_arguments() -> None:
    entry = _entry("Calculator.energy", kind="python", replacement="examples.thirdparty.methods:owned_sum")
    with install_adapters([entry], _ctx()):
        assert torch.equal(methods.Calculator().energy(E, BATCH, 2), -ALL)
    assert torch.equal(methods.Calculator().energy(E, BATCH, 2), ALL)


def test_a_method_named_through_a_module_level_instance_is_refused_with_its_class_named() -> None:
    with pytest.raises(AdapterError, match=r"not a module or a class.*Calculator"):
        with install_adapters([_entry("calculator.energy")], _ctx()):
            pass


@pytest.mark.parametrize(
    ("attr", "words"),
    [
        ("Missing.forward", "has no attribute 'Missing'"),
        ("MolSum.missing", "has no attribute 'missing'"),
        ("Ops.offset", "not a method"),
    ],
)
def test_a_missing_class_or_method_is_refused_by_name(attr: str, words: str) -> None:
    with pytest.raises(AdapterError, match=words):
        with install_adapters([_entry(attr)], _ctx()):
            pass
    assert torch.equal(methods.MolSum()(E, BATCH, 2), ALL)


def test_an_atom_arg_out_of_range_counts_the_arguments_after_self() -> None:
    with install_adapters([_entry("Calculator.energy", atom_arg=3)], _ctx()):
        with pytest.raises(AdapterError, match="3 positional arguments after self"):
            methods.Calculator().energy(E, BATCH, 2)
