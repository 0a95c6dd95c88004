"""The layer diagnostic through every shape of wrapper that holds its model without being it
(`layer_wrapper_models`: a list, a dict, a dataclass field with and without slots, an object holding
an object holding the module, a tuple, a closure, a `functools.partial`, an nn.Module keeping the model
in a plain list): end to end at world size 2 (gloo) under a spec that makes the layers diverge, the
modules are compared (`checked > 0`) and the first divergent one is named by its path in the wrapper.
Also, without processes: what `held_modules` finds and leaves alone."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any

import layer_wrapper_models as models
import pytest
import torch

from distcheck import validate_on_cpu
from distcheck.validate.layers import held_modules


@pytest.mark.procs
@pytest.mark.parametrize("case", sorted(models.CASES))
def test_the_first_divergent_layer_is_found_through_the_wrapper(case: str) -> None:
    factory, expected = models.CASES[case]
    report = validate_on_cpu(
        factory, models.sample_batch(), spec=copy.deepcopy(models.SPEC), world_size=2, timeout_sec=60, auto_fix=False
    )
    assert report.verdict == "failed"
    layers = report.attempts[0].layer_divergence
    assert layers is not None and layers.checked > 0, "no module was compared: the wrapper's modules were not found"
    assert layers.first_divergent is not None and layers.first_divergent.module == expected
    assert layers.first_divergent.cls == "torch.nn.modules.linear.Linear"


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)


def _names(obj: Any) -> list[str]:
    return [n for n, _ in held_modules(obj)]


def test_a_bound_forward_is_searched_through_its_module_with_no_extra_path() -> None:
    net = _Net()
    assert _names(net.forward) == ["lin"] == _names(net)


def test_slots_closures_partials_and_keyword_arguments_are_searched() -> None:
    @dataclass(slots=True)
    class Slots:
        inner: Any

    net = _Net()

    def closure() -> Any:
        return net

    assert _names(Slots(net)) == ["inner", "inner.lin"]
    assert _names(closure) == ["net", "net.lin"]
    assert _names(functools.partial(print, sep=" ", extra=net)) == ["keywords.extra", "keywords.extra.lin"]


def test_a_module_keeping_modules_in_a_plain_list_has_them_found_once() -> None:
    outer = _Net()
    inner = _Net()
    outer.blocks = [inner, outer.lin]  # a plain list: torch does not register it
    assert _names(outer) == ["lin", "blocks.0", "blocks.0.lin"]


def test_bookkeeping_python_modules_and_classes_are_not_searched() -> None:
    import examples.mpnn as somewhere

    class Holder:
        def __init__(self) -> None:
            self.package = somewhere  # a Python module holding module-level models must not be walked
            self.kind = _Net
            self.net = _Net()

    net = Holder().net
    net.register_forward_hook(lambda *a: None)
    assert _names(Holder()) == ["net", "net.lin"]
    assert _names(net) == ["lin"]


def test_the_search_stops_a_few_levels_deep() -> None:
    deep: Any = _Net()
    for _ in range(10):
        deep = [deep]
    assert _names(deep) == []
    assert _names([[[_Net()]]]) == ["0.0.0", "0.0.0.lin"]
