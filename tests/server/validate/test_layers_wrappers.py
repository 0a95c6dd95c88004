"""Layer hooks reach the modules a non-module wrapper holds (attributes, lists, tuples, dicts)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from distcheck.validate.layers import LayerRecorder, held_modules

N, B = 6, 2


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(3, 4)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(x))


class AttrUnit:
    """A predict-unit-like wrapper: its model is a plain attribute."""

    def __init__(self) -> None:
        self.model = Net()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class ListUnit:
    def __init__(self) -> None:
        self.models = [Net(), Net()]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return sum((m(x) for m in self.models), torch.zeros(N, 1))


class DictUnit:
    def __init__(self) -> None:
        self.heads = {"energy": Net(), "charge": Net()}

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.heads["energy"](x) + self.heads["charge"](x)


class NestedUnit:
    """A calculator holding a config object that holds a tuple of modules, and the same module twice."""

    class _Config:
        def __init__(self, net: Net) -> None:
            self.stages = (net, torch.nn.Tanh())
            self.name = "cfg"

    def __init__(self) -> None:
        net = Net()
        self.config = self._Config(net)
        self.alias = net
        self.cutoff = 5.0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        net, act = self.config.stages
        return act(net(x))


def _recorded(wrapper: Any) -> list[str]:
    rec = LayerRecorder(wrapper, N, B)
    with rec.attached(), torch.no_grad():
        wrapper(torch.randn(N, 3))
    return [r["module"] for r in rec.collect()]


@pytest.mark.parametrize(
    ("wrapper", "expected"),
    [
        (Net(), ["embed", "out"]),
        (AttrUnit(), ["model", "model.embed", "model.out"]),
        (ListUnit(), ["models.0.embed", "models.0.out", "models.0", "models.1.embed", "models.1.out", "models.1"]),
        (DictUnit(), ["heads.energy.embed", "heads.energy.out", "heads.energy"]),
        (NestedUnit(), ["config.stages.0.embed", "config.stages.0.out", "config.stages.0", "config.stages.1"]),
    ],
)
def test_wrappers_that_are_not_modules_have_their_modules_hooked(wrapper: Any, expected: list[str]) -> None:
    got = _recorded(wrapper)
    assert got, "no layer was recorded: the wrapper's modules were not found"
    for name in expected:
        assert name in got, (name, got)


def test_a_module_held_twice_is_hooked_once_and_the_root_is_left_out() -> None:
    unit = NestedUnit()
    names = [n for n, _ in held_modules(unit)]
    assert names.count("config.stages.0") == 1 and "alias" not in names
    assert len({id(m) for _, m in held_modules(unit)}) == len(names)
    assert "" not in [n for n, _ in held_modules(Net())]


def test_hooks_are_removed_after_the_block() -> None:
    unit = DictUnit()
    rec = LayerRecorder(unit, N, B)
    with rec.attached():
        pass
    unit(torch.randn(N, 3))
    assert rec.collect() == []
    assert all(not m._forward_hooks for _, m in held_modules(unit))
