"""What installing the helper trace costs a process: it searches only modules that may hold a watched
helper (not torch's, numpy's, the standard library's or distcheck's: a tenth of a second per rank
otherwise) and looks up a helper's source only once it has been called."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest
import torch

from distcheck.validate import helpers
from examples.thirdparty import nbops

WATCHED = "examples.thirdparty.nbops"


def test_a_helper_imported_by_name_is_traced_where_user_code_holds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    original = nbops.mol_sum
    user = types.ModuleType("user_model_module")
    user.mol_sum = nbops.mol_sum  # type: ignore[attr-defined]  # `from ...nbops import mol_sum`
    monkeypatch.setitem(sys.modules, "user_model_module", user)
    monkeypatch.setattr(json, "mol_sum", nbops.mol_sum, raising=False)  # a standard-library module
    tracer = helpers.HelperTracer([WATCHED], 1, rows=3, num_systems=1)
    with tracer.installed():
        assert getattr(user.mol_sum, "__distcheck_traced__", False), "the user's module must see the traced helper"
        assert json.mol_sum is original, "the standard library is not searched"  # type: ignore[attr-defined]
        user.mol_sum(torch.ones(3, 2), torch.zeros(3, dtype=torch.long), 1)
    assert user.mol_sum is original and nbops.mol_sum is original, "restored after the block"
    assert tracer.collect()["calls"][f"{WATCHED}.mol_sum"]["n_calls"] == 1


def test_a_helpers_source_is_looked_up_only_once_it_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up: list[Any] = []
    real = helpers.definition_site  # type: ignore[attr-defined]

    def counting(fn: Any) -> Any:
        looked_up.append(fn)
        return real(fn)

    monkeypatch.setattr(helpers, "definition_site", counting)
    tracer = helpers.HelperTracer([WATCHED], 1, rows=3, num_systems=1)
    with tracer.installed():
        assert looked_up == [], "no source is read while installing"
        nbops.mol_sum(torch.ones(3, 2), torch.zeros(3, dtype=torch.long), 1)
    calls = tracer.collect()["calls"]
    assert list(calls) == [f"{WATCHED}.mol_sum"] and len(looked_up) == 1
    source = calls[f"{WATCHED}.mol_sum"]["source"]
    assert source is not None and source["file"].endswith("nbops.py")


def test_what_the_forkserver_preloaded_is_not_searched_but_a_watched_package_and_later_imports_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a process of the pool (`processes.preloaded` loaded), the modules imported for every process
    before any target's code (torch's dependencies: sympy alone has hundreds) are not searched; a module
    imported later, and any module of a watched package, are."""
    original = nbops.mol_sum
    early, later = types.ModuleType("preloaded_dependency"), types.ModuleType("spare_package_module")
    early.mol_sum = later.mol_sum = nbops.mol_sum  # type: ignore[attr-defined]
    sibling = types.ModuleType("examples.thirdparty.sibling")  # the watched package's own top level
    sibling.mol_sum = nbops.mol_sum  # type: ignore[attr-defined]
    for module in (early, later, sibling):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    snapshot = types.ModuleType("distcheck.processes.preloaded")
    snapshot.MODULES = frozenset({early.__name__, sibling.__name__})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, snapshot.__name__, snapshot)
    with helpers.HelperTracer([WATCHED], 1, rows=3, num_systems=1).installed():
        assert early.mol_sum is original, "a module the forkserver preloaded is not searched"  # type: ignore[attr-defined]
        assert getattr(later.mol_sum, "__distcheck_traced__", False)  # type: ignore[attr-defined]
        assert getattr(sibling.mol_sum, "__distcheck_traced__", False)  # type: ignore[attr-defined]
    assert later.mol_sum is original and sibling.mol_sum is original  # type: ignore[attr-defined]


def test_outside_the_pool_every_module_but_the_never_list_is_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "distcheck.processes.preloaded", raising=False)
    module = types.ModuleType("preloaded_dependency")
    module.mol_sum = nbops.mol_sum  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with helpers.HelperTracer([WATCHED], 1, rows=3, num_systems=1).installed():
        assert getattr(module.mol_sum, "__distcheck_traced__", False)  # type: ignore[attr-defined]
