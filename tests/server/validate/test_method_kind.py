"""`third_party_helpers` kind `"method"`: read, checked and written back by the spec; every attr_name form
the schema accepts, for every kind, gets the same answer from the schema, the spec reader and the
runtime's resolver; the helper trace records methods of watched classes and the diagnosis proposes a
method adapter for them. No rank processes (those are in test_method_kind_validate.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch

from distcheck.runtime.adapters import AdapterError, install_adapters
from distcheck.runtime.context import RankContext
from distcheck.spec import HELPER_KINDS, HelperAdapter, MLIPSpec, SpecError, json_schema, validate_json
from distcheck.validate.diagnosis import diagnose_helpers
from distcheck.validate.helpers import HelperTracer
from examples.thirdparty import methods

MOD = "examples.thirdparty.methods"
PKG = "examples.thirdparty"
REPLACEMENT = f"{MOD}:owned_sum"

N = 6
E = torch.arange(1.0, N + 1)
BATCH = torch.tensor([0, 0, 0, 1, 1, 1])
OWNED = torch.tensor([True, True, False, True, True, False])
ALL = torch.tensor([6.0, 15.0])
OWNED_ONLY = torch.tensor([3.0, 9.0])


TRACED: dict[str, Callable[[], torch.Tensor]] = {
    "MolSum.forward": lambda: methods.MolSum()(E, BATCH, 2),
    "ScaledMolSum.forward": lambda: methods.ScaledMolSum()(E, BATCH, 2),
    "Calculator.energy": lambda: methods.Calculator(1.0).energy(E, BATCH, 2),
    "Ops.static_sum": lambda: methods.Ops.static_sum(E, BATCH, 2),
    "Ops.class_sum": lambda: methods.Ops().class_sum(E, BATCH, 2),
}
"""Each shape of method (attr_name in examples.thirdparty.methods) → a call of it as a model makes it."""


def _doc(*helpers: dict[str, Any]) -> dict[str, Any]:
    return {"format": "distcheck-spec", "version": 1, "distribution": {"third_party_helpers": list(helpers)}}


def _ctx() -> RankContext:
    return RankContext(
        rank=0, world_size=1, num_global_atoms=N, num_systems=2, local_ids=torch.arange(N), owned_mask=OWNED
    )


# ---------------------------------------------------------------- spec: read, checked, written back


@pytest.mark.parametrize(
    "entry",
    [
        {"kind": "method", "module_path": MOD, "attr_name": "MolSum.forward", "atom_arg": 0, "atom_dim": 0},
        {"kind": "method", "module_path": MOD, "attr_name": "Ops.class_sum", "atom_arg": 1, "atom_dim": -1},
        {"kind": "method", "module_path": PKG, "attr_name": "methods.Calculator.energy", "atom_arg": 0, "atom_dim": 0},
        {"kind": "method", "module_path": MOD, "attr_name": "Calculator.energy", "replacement": REPLACEMENT},
    ],
)
def test_a_method_entry_round_trips_through_spec_json_with_the_keys_its_form_uses(entry: dict[str, Any]) -> None:
    spec = MLIPSpec.from_json(json.dumps(_doc(entry)))
    (helper,) = spec.distribution.third_party_helpers
    assert helper.kind == "method" and helper.qualname == f"{entry['module_path']}.{entry['attr_name']}"
    assert helper.to_dict() == entry  # the same keys, in the same order
    again = MLIPSpec.from_json(spec.to_json())
    assert again == spec and again.to_json() == spec.to_json()
    assert helper.swaps is ("replacement" in entry)


BAD_METHODS = [
    # (entry, the JSON path's last key, words the message must hold: the fix to write)
    ({"attr_name": "mol_sum"}, "attr_name", ['"<Class>.mol_sum"', '"kind": "reduction"']),
    ({"attr_name": "forward"}, "attr_name", ['"<Class>.forward"', "class of examples.thirdparty.methods"]),
    (
        {"attr_name": "Calculator.energy", "replacement": REPLACEMENT, "atom_arg": 1},
        "atom_arg",
        ['remove "replacement"'],
    ),
    (
        {"attr_name": "Calculator.energy", "replacement": REPLACEMENT, "atom_dim": 0},
        "atom_dim",
        ["without a replacement"],
    ),
]


@pytest.mark.parametrize(("extra", "key", "words"), BAD_METHODS)
def test_a_bad_method_entry_is_refused_naming_its_path_line_and_what_to_write(
    extra: dict[str, Any], key: str, words: list[str], tmp_path: Path
) -> None:
    entry = {"kind": "method", "module_path": MOD, **extra}
    text = json.dumps(
        _doc({"kind": "reduction", "module_path": PKG + ".nbops", "attr_name": "mol_sum"}, entry), indent=2
    )
    errors = validate_json(text)
    assert [e.path for e in errors] == [f"distribution.third_party_helpers[1].{key}"]
    (err,) = errors
    assert err.line == 1 + text[: text.index(f'"{key}"', text.index('"method"'))].count("\n")
    for w in words:
        assert w in err.message, err.message
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        MLIPSpec.load(path)
    assert str(info.value).startswith(f"distribution.third_party_helpers[1].{key}: ")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(text), json_schema())


# ---------------------------------------------------------------- schema, reader and runtime agree

FORMS: list[tuple[str, str]] = [
    (MOD, "owned_sum"),  # a module-level function
    (PKG, "nbops.mol_sum"),  # a function of a submodule
    (MOD, "MolSum.forward"),  # an nn.Module's forward
    (MOD, "ScaledMolSum.forward"),  # inherited
    (MOD, "Calculator.energy"),  # a plain class's method
    (MOD, "Ops.static_sum"),
    (MOD, "Ops.class_sum"),
    (PKG, "methods.Calculator.energy"),  # a class of a submodule
    (MOD, "calculator.energy"),  # through a module-level instance
    (MOD, "Ops.offset"),  # a class attribute that is not a method
    (MOD, "Missing.forward"),
]
"""Every shape of attr_name the schema's dotted pattern accepts, bound to real objects."""

KIND_FORMS = [("python", False), ("reduction", False), ("method", False), ("method", True)]
"""(kind, with a replacement): python always has one, reduction never."""

FUNCTIONS = {"owned_sum", "nbops.mol_sum"}
OBJECT_REFUSED = {"calculator.energy", "Ops.offset", "Missing.forward"}
"""Forms whose fault only the objects show (what the name is bound to): refused by the runtime alone."""


def _expected(kind: str, attr: str) -> str:
    if kind == "method" and "." not in attr:
        return "spec"  # a method needs a class: refused when the spec is read
    if attr in OBJECT_REFUSED or (kind == "method" and attr in FUNCTIONS):
        return "runtime"
    return "ok"


def _entry(module: str, attr: str, kind: str, replaced: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": kind, "module_path": module, "attr_name": attr}
    if replaced:
        entry["replacement"] = REPLACEMENT
    return entry


def _class_state() -> dict[str, dict[str, Any]]:
    return {c.__name__: dict(vars(c)) for c in (methods.MolSum, methods.ScaledMolSum, methods.Calculator, methods.Ops)}


def test_every_helper_kind_is_covered() -> None:
    assert {k for k, _ in KIND_FORMS} == set(HELPER_KINDS)


@pytest.mark.parametrize(("kind", "replaced"), KIND_FORMS)
@pytest.mark.parametrize(("module", "attr"), FORMS)
def test_schema_reader_and_runtime_agree_on_every_attr_name_form(
    module: str, attr: str, kind: str, replaced: bool
) -> None:
    entry = _entry(module, attr, kind, replaced or kind == "python")
    expected = _expected(kind, attr)
    try:
        jsonschema.validate(_doc(entry), json_schema())
        schema_ok = True
    except jsonschema.ValidationError:
        schema_ok = False
    reader_errors = validate_json(json.dumps(_doc(entry)))
    assert schema_ok == (not reader_errors), reader_errors
    assert schema_ok == (expected != "spec"), reader_errors

    # The runtime, given the entry without the reader (as a library caller can), refuses what the reader
    # refuses, and refuses an accepted form only for what the objects show, saying what to write.
    helper = HelperAdapter(**entry)
    before = _class_state()
    refusal: str | None = None
    try:
        with install_adapters([helper], _ctx()) as names:
            assert names == [helper.qualname]
    except AdapterError as exc:
        refusal = str(exc)
    assert _class_state() == before, "the classes are restored"
    assert (refusal is None) == (expected == "ok"), refusal
    if refusal is not None:
        assert "attr_name" in refusal, refusal  # what to change


def test_a_method_entry_naming_a_module_function_is_refused_at_run_time_with_the_kind_to_use() -> None:
    for module, attr in [(MOD, "owned_sum"), (PKG, "nbops.mol_sum")]:
        with pytest.raises(AdapterError, match=r'not a method of a class; name the class.*"kind": "reduction"'):
            with install_adapters([HelperAdapter(kind="method", module_path=module, attr_name=attr)], _ctx()):
                pass


@pytest.mark.parametrize("attr", sorted(TRACED))
def test_a_method_entry_reduces_through_halo_zeroed_rows_or_calls_its_replacement(attr: str) -> None:
    calls = TRACED
    with install_adapters([HelperAdapter.from_dict({"kind": "method", "module_path": MOD, "attr_name": attr})], _ctx()):
        assert torch.equal(calls[attr](), OWNED_ONLY)
    assert torch.equal(calls[attr](), ALL)
    swapped = HelperAdapter.from_dict(
        {"kind": "method", "module_path": MOD, "attr_name": attr, "replacement": f"{MOD}:_negated"}
    )
    with pytest.raises(AdapterError, match="replacement for"):
        with install_adapters([swapped], _ctx()):
            pass
    if attr == "Calculator.energy":
        entry = HelperAdapter.from_dict(
            {"kind": "method", "module_path": MOD, "attr_name": attr, "replacement": REPLACEMENT}
        )
        with install_adapters([entry], _ctx()):
            assert torch.equal(calls[attr](), -ALL)


# ---------------------------------------------------------------- helper trace and diagnosis


@pytest.mark.parametrize("attr", sorted(TRACED))
def test_the_helper_trace_records_a_watched_method_under_its_class_with_positions_after_self(attr: str) -> None:
    before = _class_state()
    tracer = HelperTracer([MOD], 1, rows=N, num_systems=2, owned_mask=OWNED)
    with tracer.installed():
        assert torch.equal(TRACED[attr](), ALL)
        methods.MolSum().parameters()  # torch's own methods are not the package's helpers
    assert _class_state() == before
    calls = tracer.collect()["calls"]
    assert list(calls) == [f"{MOD}.{attr}"]
    rec = calls[f"{MOD}.{attr}"]
    assert (rec["module"], rec["attr"], rec["method"], rec["n_calls"]) == (MOD, attr, True, 1)
    (sample,) = rec["samples"]
    assert sample["atom_arg"] == 0 and sample["arg_shapes"] == [[N], [N], None]
    assert torch.equal(sample["out_owned"], OWNED_ONLY)
    assert rec["source"]["file"].endswith("methods.py")


def test_an_overriding_class_outside_the_watched_modules_is_not_wrapped_over() -> None:
    class Local(methods.MolSum):  # defined here: its own forward is the one a call finds
        def forward(self, e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
            return e.sum().expand(n)

    tracer = HelperTracer([MOD], 1, rows=N, num_systems=2)
    with tracer.installed():
        assert torch.equal(Local()(E, BATCH, 2), torch.tensor([21.0, 21.0]))
    assert tracer.collect()["calls"] == {}


def _method_record(attr: str, out: torch.Tensor, owned: torch.Tensor | None) -> dict[str, Any]:
    sample = {
        "call": 0,
        "arg_shapes": [[10], [10], None],
        "atom_arg": 0,
        "out_shape": list(out.shape),
        "out_dtype": str(out.dtype),
        "out": out,
        "out_owned": owned,
    }
    return {"n_calls": 1, "samples": [sample], "source": None, "module": MOD, "attr": attr, "method": True}


@pytest.mark.parametrize("attr", sorted(TRACED))
def test_an_undeclared_method_whose_partials_add_up_gets_a_ready_method_adapter(attr: str) -> None:
    q = f"{MOD}.{attr}"
    ref = {"calls": {q: _method_record(attr, torch.tensor([4.0, 6.0]), None)}}
    ranks = [
        {"calls": {q: _method_record(attr, torch.tensor([3.0, 2.0]), torch.tensor([1.0, 2.0]))}},
        {"calls": {q: _method_record(attr, torch.tensor([4.0, 5.0]), torch.tensor([3.0, 4.0]))}},
    ]
    spec = MLIPSpec.from_dict(_doc())
    (diag,) = diagnose_helpers(ref, ranks, spec, 10, 2)
    assert (diag["module"], diag["function"]) == (MOD, attr)
    assert diag["likely_remedy"] == {
        "kind": "method",
        "module_path": MOD,
        "attr_name": attr,
        "atom_arg": 0,
        "atom_dim": 0,
    }
    assert HelperAdapter.from_dict(diag["likely_remedy"]).qualname == q  # ready: the reader accepts it as is
    declared = MLIPSpec.from_dict(_doc(diag["likely_remedy"]))
    (wrapped,) = diagnose_helpers(ref, ranks, declared, 10, 2)
    assert wrapped["already_wrapped"] and wrapped["likely_remedy"] is None
    # ranks that disagree and do not add up: no adapter, whatever the helper's kind
    ranks[1]["calls"][q]["samples"][0]["out_owned"] = torch.tensor([3.0, 9.0])
    (off,) = diagnose_helpers(ref, ranks, spec, 10, 2)
    assert off["likely_remedy"] is None and "ranks disagree" in off["suspected_gap"]
