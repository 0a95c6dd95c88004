"""Wrappers that are not `nn.Module`s, each holding the same 3-layer cdist MPNN (`cdist_models`) in
another shape of container: a list, a dict, a dataclass field (with and without `__slots__`), a plain
object holding an object holding the module, a tuple, a closure, a `functools.partial` and an
`nn.Module` that keeps the model in a plain list attribute (unregistered). Under
`WRONG_SPEC` the model's layers diverge on the ranks; the layer diagnostic must find its modules
through each shape and name the first divergent one (`EXPECTED_FIRST`, under the wrapper's path).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cdist_models
import torch

from distcheck.batch import Batch

SPEC = cdist_models.WRONG_SPEC
FIRST = "updates.0.0"
"""The model's first module whose per-atom output is off under WRONG_SPEC (the first layer's update
after the double-counted aggregation; the embedding before it is exact)."""


def _model() -> cdist_models.CdistMPNN:
    return cdist_models.model_factory()


class _Described:
    """What the validator reads off a wrapper (it is not the model)."""

    cutoff = cdist_models.CUTOFF
    num_interactions = 3


class ListUnit(_Described):
    def __init__(self) -> None:
        self.models = [_model()]

    def __call__(self, batch: Batch) -> dict[str, torch.Tensor]:
        return self.models[0](batch)


class DictUnit(_Described):
    def __init__(self) -> None:
        self.heads = {"mlip": _model()}

    def __call__(self, batch: Batch) -> dict[str, torch.Tensor]:
        return self.heads["mlip"](batch)


@dataclass
class DataclassUnit(_Described):
    model: Any
    label: str = "unit"

    def __call__(self, batch: Batch) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = self.model(batch)
        return out


@dataclass(slots=True)
class SlotsUnit:
    model: Any
    cutoff: float = cdist_models.CUTOFF
    num_interactions: int = 3

    def __call__(self, batch: Batch) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = self.model(batch)
        return out


class _Calculator:
    def __init__(self) -> None:
        self.model = _model()


class _Engine:
    def __init__(self) -> None:
        self.calculator = _Calculator()


class NestedUnit(_Described):
    """An object holding an object holding the module."""

    def __init__(self) -> None:
        self.engine = _Engine()

    def __call__(self, batch: Batch) -> dict[str, torch.Tensor]:
        return self.engine.calculator.model(batch)


class TupleUnit(_Described):
    def __init__(self) -> None:
        self.parts = ("config", _model())

    def __call__(self, batch: Batch) -> dict[str, torch.Tensor]:
        return self.parts[1](batch)


class PlainListModule(torch.nn.Module):
    """An nn.Module that keeps the model in a plain list (not registered as a submodule)."""

    cutoff = cdist_models.CUTOFF
    num_interactions = 3

    def __init__(self) -> None:
        super().__init__()
        self.stages = [_model()]

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = self.stages[0](batch)
        return out


def _run(model: Any, batch: Batch) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = model(batch)
    return out


def _described(fn: Any) -> Any:
    fn.cutoff = cdist_models.CUTOFF
    fn.num_interactions = 3
    return fn


def list_factory() -> ListUnit:
    return ListUnit()


def dict_factory() -> DictUnit:
    return DictUnit()


def dataclass_factory() -> DataclassUnit:
    return DataclassUnit(_model())


def slots_factory() -> SlotsUnit:
    return SlotsUnit(_model())


def nested_factory() -> NestedUnit:
    return NestedUnit()


def tuple_factory() -> TupleUnit:
    return TupleUnit()


def plain_list_module_factory() -> PlainListModule:
    return PlainListModule()


def closure_factory() -> Callable[[Batch], dict[str, torch.Tensor]]:
    model = _model()

    def run(batch: Batch) -> dict[str, torch.Tensor]:
        return _run(model, batch)

    return _described(run)  # type: ignore[no-any-return]


def partial_factory() -> Callable[[Batch], dict[str, torch.Tensor]]:
    return _described(functools.partial(_run, _model()))  # type: ignore[no-any-return]


CASES: dict[str, tuple[Callable[[], Any], str]] = {
    "list": (list_factory, f"models.0.{FIRST}"),
    "dict": (dict_factory, f"heads.mlip.{FIRST}"),
    "dataclass": (dataclass_factory, f"model.{FIRST}"),
    "slots_dataclass": (slots_factory, f"model.{FIRST}"),
    "nested_object": (nested_factory, f"engine.calculator.model.{FIRST}"),
    "tuple": (tuple_factory, f"parts.1.{FIRST}"),
    "plain_list_in_module": (plain_list_module_factory, f"stages.0.{FIRST}"),
    "closure": (closure_factory, f"model.{FIRST}"),
    "partial": (partial_factory, f"args.0.{FIRST}"),
}
"""Case → (factory, the first divergent module's name as the layer diagnostic should report it)."""


def sample_batch() -> Batch:
    return cdist_models.sample_batch()
