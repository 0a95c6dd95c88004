"""Method adapters on shapes of user code the first tests did not cover (`lazy_pkg.nested`): a class
nested in another (`Outer.Inner.method`: plain, static, class), a static and a class method a subclass
inherits, an attr_name through a submodule its package never imports, and the per-atom tensor passed
by keyword. Each is patched for the block, halo rows zeroed, and restored; the schema, the reader and
the JSON round trip agree with the runtime; the helper trace records such methods under the name an
entry uses, and end to end (world size 2, gloo) a flagged one gets a ready entry that makes it pass."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from typing import Any

import jsonschema
import nested_method_models as models
import pytest
import torch
from lazy_pkg import nested
from test_method_kind import ALL, BATCH, OWNED, OWNED_ONLY, E, N  # the same six atoms, two molecules

from distcheck import validate_on_cpu
from distcheck.runtime.adapters import AdapterError, install_adapters
from distcheck.runtime.context import RankContext
from distcheck.spec import HelperAdapter, MLIPSpec, json_schema, validate_json
from distcheck.validate.helpers import HelperTracer

MOD = "lazy_pkg.nested"

CALLS: dict[str, Callable[[], torch.Tensor]] = {
    "Outer.Inner.plain": lambda: nested.Outer.Inner().plain(E, BATCH, 2),
    "Outer.Inner.static_sum": lambda: nested.Outer.Inner.static_sum(E, BATCH, 2),
    "Outer.Inner.class_sum": lambda: nested.Outer.Inner().class_sum(E, BATCH, 2),
    "Child.static_sum": lambda: nested.Child.static_sum(E, BATCH, 2),
    "Child.class_sum": lambda: nested.Child().class_sum(E, BATCH, 2),
}
"""attr_name in lazy_pkg.nested → a positional call of it."""

KEYWORD_CALLS: dict[str, Callable[[], torch.Tensor]] = {
    "Outer.Inner.plain": lambda: nested.Outer.Inner().plain(e=E, batch=BATCH, n=2),
    "Outer.Inner.static_sum": lambda: nested.Outer.Inner.static_sum(E, batch=BATCH, n=2),
    "Outer.Inner.class_sum": lambda: nested.Outer.Inner.class_sum(n=2, batch=BATCH, e=E),
    "Child.static_sum": lambda: nested.Child().static_sum(e=E, batch=BATCH, n=2),
    "Child.class_sum": lambda: nested.Child.class_sum(e=E, batch=BATCH, n=2),
}
"""The same methods with the per-atom tensor (or everything) passed by keyword."""


def _ctx() -> RankContext:
    return RankContext(
        rank=0, world_size=1, num_global_atoms=N, num_systems=2, local_ids=torch.arange(N), owned_mask=OWNED
    )


def _entry(attr: str, kind: str = "method", module: str = MOD, **extra: Any) -> HelperAdapter:
    return HelperAdapter.from_dict({"kind": kind, "module_path": module, "attr_name": attr, **extra})


def _state() -> dict[str, dict[str, Any]]:
    classes = (nested.Outer, nested.Outer.Inner, nested.Base, nested.Child)
    return {c.__qualname__: dict(vars(c)) for c in classes}


@pytest.mark.parametrize("kind", ["method", "reduction"])
@pytest.mark.parametrize("attr", sorted(CALLS))
def test_a_nested_or_inherited_method_is_adapted_for_the_block_and_restored(attr: str, kind: str) -> None:
    before = _state()
    assert torch.equal(CALLS[attr](), ALL)
    ctx = _ctx()
    with install_adapters([_entry(attr, kind)], ctx) as names:
        assert names == [f"{MOD}.{attr}"]
        assert torch.equal(CALLS[attr](), OWNED_ONLY)
        assert torch.equal(KEYWORD_CALLS[attr](), OWNED_ONLY), "the tensor passed by keyword is masked too"
    assert ctx.handler_counts[f"adapter[{MOD}.{attr}]"] == 2
    assert _state() == before, "every class dict is as it was (an inherited method removed again)"
    assert torch.equal(CALLS[attr](), ALL) and torch.equal(KEYWORD_CALLS[attr](), ALL)


def test_static_and_class_methods_keep_their_kind_and_only_the_named_class_is_patched() -> None:
    with install_adapters(
        [_entry("Child.static_sum"), _entry("Child.class_sum"), _entry("Outer.Inner.class_sum")], _ctx()
    ):
        assert isinstance(vars(nested.Child)["static_sum"], staticmethod)
        assert isinstance(vars(nested.Child)["class_sum"], classmethod)
        assert isinstance(vars(nested.Outer.Inner)["class_sum"], classmethod)
        assert torch.equal(nested.Base.static_sum(E, BATCH, 2), ALL), "the base class is left alone"
        assert torch.equal(nested.Base().class_sum(E, BATCH, 2), ALL)
    assert "static_sum" not in vars(nested.Child) and "class_sum" not in vars(nested.Child)


def test_a_class_method_adapted_on_the_base_class_reaches_the_subclass_and_keeps_cls() -> None:
    with install_adapters([_entry("Base.class_sum")], _ctx()):
        assert torch.equal(nested.Child.class_sum(e=E, batch=BATCH, n=2), OWNED_ONLY)


def test_a_replacement_gets_the_call_as_it_was_made() -> None:
    entry = _entry("Outer.Inner.static_sum", replacement=f"{MOD}:owned_sum")
    with install_adapters([entry], _ctx()):
        assert torch.equal(nested.Outer.Inner.static_sum(e=E, batch=BATCH, n=2), -ALL)
    assert torch.equal(nested.Outer.Inner.static_sum(e=E, batch=BATCH, n=2), ALL)


def test_an_attr_name_through_a_submodule_nobody_imported_imports_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import lazy_pkg

    monkeypatch.delitem(sys.modules, MOD)
    monkeypatch.delattr(lazy_pkg, "nested")
    with install_adapters([_entry("nested.Outer.Inner.plain", module="lazy_pkg")], _ctx()) as names:
        assert names == ["lazy_pkg.nested.Outer.Inner.plain"]
        fresh = sys.modules[MOD]
        assert fresh is not nested and torch.equal(fresh.Outer.Inner().plain(E, BATCH, 2), OWNED_ONLY)
    assert torch.equal(fresh.Outer.Inner().plain(E, BATCH, 2), ALL)


def test_a_missing_submodule_or_nested_class_is_refused_by_name() -> None:
    for module, attr, words in [
        ("lazy_pkg", "missing.Outer.plain", "lazy_pkg has no attribute 'missing'"),
        (MOD, "Outer.Missing.plain", "lazy_pkg.nested.Outer has no attribute 'Missing'"),
    ]:
        with pytest.raises(AdapterError, match=words):
            with install_adapters([_entry(attr, module=module)], _ctx()):
                pass


def test_atom_arg_past_every_parameter_is_still_refused_naming_the_fix() -> None:
    with install_adapters([_entry("Outer.Inner.plain", atom_arg=3)], _ctx()):
        with pytest.raises(AdapterError, match=r"3 positional arguments after self.*Fix atom_arg"):
            nested.Outer.Inner().plain(e=E, batch=BATCH, n=2)


# ---------------------------------------------------------------- spec: schema, reader, round trip

SPEC_ENTRIES = [
    {"kind": "method", "module_path": MOD, "attr_name": "Outer.Inner.static_sum", "atom_arg": 0, "atom_dim": 0},
    {
        "kind": "method",
        "module_path": "lazy_pkg",
        "attr_name": "nested.Outer.Inner.plain",
        "atom_arg": 0,
        "atom_dim": -1,
    },
    {"kind": "method", "module_path": MOD, "attr_name": "Child.class_sum", "replacement": f"{MOD}:owned_sum"},
    {"kind": "reduction", "module_path": MOD, "attr_name": "Outer.Inner.class_sum", "atom_arg": 0, "atom_dim": 0},
]


@pytest.mark.parametrize("entry", SPEC_ENTRIES, ids=lambda e: f"{e['kind']}:{e['attr_name']}")
def test_dotted_entries_are_accepted_alike_and_round_trip(entry: dict[str, Any]) -> None:
    doc = {"format": "distcheck-spec", "version": 1, "distribution": {"third_party_helpers": [entry]}}
    jsonschema.validate(doc, json_schema())
    assert validate_json(json.dumps(doc)) == []
    spec = MLIPSpec.from_json(json.dumps(doc))
    (helper,) = spec.distribution.third_party_helpers
    assert helper.to_dict() == entry
    again = MLIPSpec.from_json(spec.to_json())
    assert again == spec and again.to_json() == spec.to_json()
    before = _state()
    with install_adapters([helper], _ctx()) as names:
        assert names == [helper.qualname]
    assert _state() == before


# ---------------------------------------------------------------- helper trace


@pytest.mark.parametrize("attr", sorted(KEYWORD_CALLS))
def test_the_trace_records_nested_and_keyword_called_methods_under_their_entry_names(attr: str) -> None:
    before = _state()
    tracer = HelperTracer([MOD], 1, rows=N, num_systems=2, owned_mask=OWNED)
    with tracer.installed():
        assert torch.equal(KEYWORD_CALLS[attr](), ALL)
    assert _state() == before
    calls = tracer.collect()["calls"]
    assert list(calls) == [f"{MOD}.{attr}"], "one record, under the attr_name a method entry uses"
    (sample,) = calls[f"{MOD}.{attr}"]["samples"]
    assert sample["atom_arg"] == 0 and sample["arg_shapes"] == [[N], [N], None]
    assert torch.equal(sample["out_owned"], OWNED_ONLY), "the keyword tensor was masked for the re-run"


# ---------------------------------------------------------------- end to end

OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0, "auto_fix": False, "watched_helper_packages": [MOD]}


@pytest.mark.procs
@pytest.mark.parametrize("attr", sorted(models.FACTORIES))
def test_a_keyword_called_nested_or_inherited_method_is_flagged_and_its_entry_passes(attr: str) -> None:
    factory = models.FACTORIES[attr]
    report = validate_on_cpu(factory, models.sample_batch(), spec=copy.deepcopy(models.SPEC), **OPTIONS)
    assert not report.ok
    flagged = [h for h in report.attempts[0].helper_diagnostics if h.flagged]
    assert [h.qualname for h in flagged] == [f"{MOD}.{attr}"]
    remedy = flagged[0].likely_remedy
    assert remedy == {"kind": "method", "module_path": MOD, "attr_name": attr, "atom_arg": 0, "atom_dim": 0}
    fixed = MLIPSpec.coerce(copy.deepcopy(models.SPEC))
    fixed.distribution.third_party_helpers.append(HelperAdapter.from_dict(remedy))
    again = validate_on_cpu(factory, models.sample_batch(), spec=MLIPSpec.from_json(fixed.to_json()), **OPTIONS)
    assert again.ok, again.next_action
    assert again.attempts[0].handler_counts.get(f"adapter[{MOD}.{attr}]", 0) > 0
