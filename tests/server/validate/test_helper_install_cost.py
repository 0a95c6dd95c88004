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
