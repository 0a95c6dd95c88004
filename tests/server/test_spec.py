"""Tests for `distcheck.spec`: the spec data model, its JSON I/O, errors and JSON Schema."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcheck.spec import (
    ARG_TRANSFORMS,
    GATHER_MODES,
    OUTPUT_KINDS,
    OUTPUT_TRANSFORMS,
    POLICY_KINDS,
    SCATTER_MODES,
    SPEC_FORMAT,
    SPEC_VERSION,
    CustomOp,
    Distribution,
    HelperAdapter,
    MLIPSpec,
    Policy,
    SpecError,
    format_path,
    json_schema,
    locate_path,
    validate_dict,
    validate_json,
    write_schema,
)

REPO = Path(__file__).resolve().parents[2]
SCHEMA_FILE = REPO / "extension" / "schemas" / "distspec.schema.json"

# The example from DESIGN.md section 2.3, verbatim.
EXAMPLE: dict[str, Any] = {
    "format": "distcheck-spec",
    "version": 1,
    "distribution": {
        "policy": {
            "kind": "halo",
            "scatter_mode": "halo_correction",
            "gather_mode": "halo_read",
            "halo_width": None,
        },
        "custom_ops": [
            {
                "op": "mylib::fused_message",
                "arg_transforms": {"0": "gather_inputs"},
                "output_transforms": {"0": "scatter_outputs"},
            }
        ],
        "third_party_helpers": [
            {
                "kind": "reduction",
                "module_path": "aimnet.nbops",
                "attr_name": "mol_sum",
                "atom_arg": 0,
                "atom_dim": 0,
            },
            {
                "kind": "python",
                "module_path": "mylib.segment",
                "attr_name": "segment_sum",
                "replacement": "mywrapper.dd:owned_segment_sum",
            },
        ],
        "torchscript": "scripted",
    },
    "system_reductions": True,
    "output_kinds": {
        "energy": "per_graph",
        "forces": "per_node",
        "stress": "per_graph",
        "charges": "per_node",
    },
    "all_reduce_outputs": ["stress"],
    "owned_only_outputs": ["charges"],
}


def example() -> dict[str, Any]:
    return copy.deepcopy(EXAMPLE)


def with_change(path: str, value: Any) -> dict[str, Any]:
    """The example with the value at a slash-separated path set.

    `_DELETE` as the value removes the key; `+` as the last step appends to a list.
    """
    doc = example()
    *parents, last = path.split("/")
    node: Any = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    key: Any = int(last) if isinstance(node, list) and last != "+" else last
    if key == "+":
        node.append(value)
    elif value is _DELETE:
        del node[key]
    else:
        node[key] = value
    return doc


_DELETE = object()


def keys_in_order(d: Any) -> Any:
    """The nested key order of a JSON value (lists of keys per object)."""
    if isinstance(d, dict):
        return [(k, keys_in_order(v)) for k, v in d.items()]
    if isinstance(d, list):
        return [keys_in_order(v) for v in d]
    return None


# ------------------------------------------------------------------ round trips


def test_example_reads_into_the_dataclasses() -> None:
    spec = MLIPSpec.from_dict(example())
    assert spec.distribution.policy == Policy()
    assert spec.distribution.custom_ops == [
        CustomOp("mylib::fused_message", {"0": "gather_inputs"}, {"0": "scatter_outputs"})
    ]
    assert spec.distribution.third_party_helpers == [
        HelperAdapter("reduction", "aimnet.nbops", "mol_sum"),
        HelperAdapter("python", "mylib.segment", "segment_sum", replacement="mywrapper.dd:owned_segment_sum"),
    ]
    assert spec.system_reductions is True
    assert spec.output_kinds["forces"] == "per_node"
    assert spec.all_reduce_outputs == ["stress"]
    assert spec.owned_only_outputs == ["charges"]


def test_example_writes_back_exactly_with_key_order() -> None:
    out = MLIPSpec.from_dict(example()).to_dict()
    assert out == EXAMPLE
    assert keys_in_order(out) == keys_in_order(EXAMPLE)


def test_to_json_is_two_space_indented_with_trailing_newline() -> None:
    text = MLIPSpec.from_dict(example()).to_json()
    assert text.endswith("}\n") and not text.endswith("\n\n")
    lines = text.splitlines()
    assert lines[0] == "{"
    assert lines[1] == '  "format": "distcheck-spec",'
    assert lines[2] == '  "version": 1,'
    assert '      "halo_width": null' in lines
    assert orjson.loads(text) == EXAMPLE


FIELD_VARIANTS: list[tuple[str, MLIPSpec]] = [
    ("policy.kind", MLIPSpec(Distribution(policy=Policy(kind="replicated")))),
    ("policy.scatter_mode", MLIPSpec(Distribution(policy=Policy(scatter_mode="local")))),
    ("policy.halo_width", MLIPSpec(Distribution(policy=Policy(halo_width=7.25)))),
    (
        "custom_ops",
        MLIPSpec(Distribution(custom_ops=[CustomOp("ns::op", {"1": "slice_owned"}, {"2": "none"})])),
    ),
    ("custom_ops.bare", MLIPSpec(Distribution(custom_ops=[CustomOp("ns::op.default")]))),
    (
        "third_party_helpers.reduction",
        MLIPSpec(Distribution(third_party_helpers=[HelperAdapter("reduction", "a.b", "c", atom_arg=2, atom_dim=-1)])),
    ),
    (
        "third_party_helpers.python",
        MLIPSpec(Distribution(third_party_helpers=[HelperAdapter("python", "a", "C.f", replacement="x.y:z.w")])),
    ),
    ("system_reductions", MLIPSpec(system_reductions=False)),
    ("output_kinds", MLIPSpec(output_kinds={"e": "global", "f": "per_node", "s": "per_graph"})),
    ("all_reduce_outputs", MLIPSpec(all_reduce_outputs=["stress", "virial"])),
    (
        "owned_only_outputs",
        MLIPSpec(output_kinds={"q": "per_node"}, owned_only_outputs=["q", "unknown_kind"]),
    ),
]


@pytest.mark.parametrize(("name", "spec"), FIELD_VARIANTS, ids=[n for n, _ in FIELD_VARIANTS])
def test_every_field_round_trips(name: str, spec: MLIPSpec) -> None:
    assert spec != MLIPSpec(), "each variant must differ from the defaults, or the test proves nothing"
    assert MLIPSpec.from_dict(spec.to_dict()) == spec
    assert MLIPSpec.from_json(spec.to_json()) == spec
    assert MLIPSpec.from_json(spec.to_json().encode()) == spec
    assert validate_dict(spec.to_dict()) == []


def test_halo_width_int_is_stored_as_float() -> None:
    spec = MLIPSpec.from_dict(with_change("distribution/policy/halo_width", 6))
    assert spec.distribution.policy.halo_width == 6.0
    assert type(spec.distribution.policy.halo_width) is float
    assert type(Policy(halo_width=3).halo_width) is float
    assert '"halo_width": 6.0' in spec.to_json()


# Strategies over valid specs.
_names = st.text(min_size=1, max_size=8)
_idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
_dotted = st.lists(_idents, min_size=1, max_size=3).map(".".join)
_positions = st.integers(min_value=0, max_value=12).map(str)

_policies = st.builds(
    Policy,
    kind=st.sampled_from(POLICY_KINDS),
    scatter_mode=st.sampled_from(SCATTER_MODES),
    gather_mode=st.sampled_from(GATHER_MODES),
    halo_width=st.none()
    | st.floats(min_value=0.0, exclude_min=True, allow_nan=False, allow_infinity=False)
    | st.integers(min_value=1, max_value=10**6),
)
_custom_ops = st.builds(
    CustomOp,
    op=st.tuples(_idents, _idents).map("::".join),
    arg_transforms=st.dictionaries(_positions, st.sampled_from(ARG_TRANSFORMS), max_size=3),
    output_transforms=st.dictionaries(_positions, st.sampled_from(OUTPUT_TRANSFORMS), max_size=3),
)
_helpers = st.one_of(
    st.builds(
        HelperAdapter,
        kind=st.just("reduction"),
        module_path=_dotted,
        attr_name=_dotted,
        atom_arg=st.integers(min_value=0, max_value=8),
        atom_dim=st.integers(min_value=-3, max_value=3),
    ),
    st.builds(
        HelperAdapter,
        kind=st.just("python"),
        module_path=_dotted,
        attr_name=_dotted,
        replacement=st.tuples(_dotted, _dotted).map(":".join),
    ),
)


@st.composite
def valid_specs(draw: st.DrawFn) -> MLIPSpec:
    output_kinds = draw(st.dictionaries(_names, st.sampled_from(OUTPUT_KINDS), max_size=5))
    all_reduce = draw(st.lists(_names, unique=True, max_size=4))
    owned_candidates = [n for n, k in output_kinds.items() if k == "per_node"] + ["not_in_output_kinds"]
    owned_candidates = [n for n in owned_candidates if n not in all_reduce]
    owned = draw(st.lists(st.sampled_from(owned_candidates), unique=True, max_size=3)) if owned_candidates else []
    return MLIPSpec(
        distribution=Distribution(
            policy=draw(_policies),
            custom_ops=draw(st.lists(_custom_ops, unique_by=lambda o: o.op, max_size=3)),
            third_party_helpers=draw(st.lists(_helpers, unique_by=lambda h: h.qualname, max_size=3)),
        ),
        system_reductions=draw(st.booleans()),
        output_kinds=output_kinds,
        all_reduce_outputs=all_reduce,
        owned_only_outputs=owned,
    )


@settings(max_examples=200, deadline=None)
@given(valid_specs())
def test_hypothesis_round_trip(spec: MLIPSpec) -> None:
    assert validate_dict(spec.to_dict()) == []
    assert MLIPSpec.from_dict(spec.to_dict()) == spec
    assert MLIPSpec.from_json(spec.to_json()) == spec
    assert validate_json(spec.to_json()) == []
    assert MLIPSpec.from_json(spec.to_json()).signature() == spec.signature()


# ------------------------------------------------------------------ defaults


def test_minimal_document_gives_all_defaults() -> None:
    spec = MLIPSpec.from_dict({"format": "distcheck-spec", "version": 1})
    assert spec == MLIPSpec()
    assert spec.distribution.policy.kind == "halo"
    assert spec.distribution.policy.scatter_mode == "halo_correction"
    assert spec.distribution.policy.gather_mode == "halo_read"
    assert spec.distribution.policy.halo_width is None
    assert spec.distribution.custom_ops == [] and spec.distribution.third_party_helpers == []
    assert spec.system_reductions is True
    assert spec.output_kinds == {} and spec.all_reduce_outputs == [] and spec.owned_only_outputs == []


def test_partial_sections_fill_defaults() -> None:
    spec = MLIPSpec.from_dict(
        {
            "format": "distcheck-spec",
            "version": 1,
            "distribution": {
                "policy": {"scatter_mode": "local"},
                "custom_ops": [{"op": "a::b"}],
                "third_party_helpers": [{"kind": "reduction", "module_path": "m", "attr_name": "f"}],
            },
        }
    )
    assert spec.distribution.policy == Policy(scatter_mode="local")
    assert spec.distribution.custom_ops == [CustomOp("a::b", {}, {})]
    helper = spec.distribution.third_party_helpers[0]
    assert (helper.atom_arg, helper.atom_dim, helper.replacement) == (0, 0, None)
    assert spec.system_reductions is True


def test_default_spec_writes_every_field() -> None:
    assert MLIPSpec().to_dict() == {
        "format": SPEC_FORMAT,
        "version": SPEC_VERSION,
        "distribution": {
            "policy": {
                "kind": "halo",
                "scatter_mode": "halo_correction",
                "gather_mode": "halo_read",
                "halo_width": None,
            },
            "custom_ops": [],
            "third_party_helpers": [],
            "torchscript": "scripted",
        },
        "system_reductions": True,
        "output_kinds": {},
        "all_reduce_outputs": [],
        "owned_only_outputs": [],
    }


def test_helper_entries_write_the_keys_of_their_kind() -> None:
    red = HelperAdapter("reduction", "aimnet.nbops", "mol_sum", atom_arg=1, atom_dim=2)
    py = HelperAdapter("python", "mylib.segment", "segment_sum", replacement="w.dd:f")
    assert list(red.to_dict()) == ["kind", "module_path", "attr_name", "atom_arg", "atom_dim"]
    assert list(py.to_dict()) == ["kind", "module_path", "attr_name", "replacement"]
    assert red.qualname == "aimnet.nbops.mol_sum"
    assert py.qualname == "mylib.segment.segment_sum"


# ------------------------------------------------------------------ errors with exact paths

BAD_CASES: list[tuple[str, Any, str, str]] = [
    # (id, document, expected path, a fragment the message must contain)
    ("bool-as-string", with_change("system_reductions", "yes"), "system_reductions", "expected a boolean"),
    ("bool-as-int", with_change("system_reductions", 1), "system_reductions", "got integer 1"),
    (
        "halo-width-string",
        with_change("distribution/policy/halo_width", "6"),
        "distribution.policy.halo_width",
        "got string",
    ),
    (
        "halo-width-bool",
        with_change("distribution/policy/halo_width", True),
        "distribution.policy.halo_width",
        "got boolean",
    ),
    (
        "halo-width-zero",
        with_change("distribution/policy/halo_width", 0),
        "distribution.policy.halo_width",
        "greater than 0",
    ),
    (
        "halo-width-negative",
        with_change("distribution/policy/halo_width", -2.5),
        "distribution.policy.halo_width",
        "-2.5",
    ),
    (
        "halo-width-nan",
        with_change("distribution/policy/halo_width", float("nan")),
        "distribution.policy.halo_width",
        "finite",
    ),
    (
        "atom-arg-bool",
        with_change("distribution/third_party_helpers/0/atom_arg", True),
        "distribution.third_party_helpers[0].atom_arg",
        "expected an integer",
    ),
    (
        "atom-arg-float",
        with_change("distribution/third_party_helpers/0/atom_arg", 1.0),
        "distribution.third_party_helpers[0].atom_arg",
        "got number",
    ),
    (
        "atom-arg-negative",
        with_change("distribution/third_party_helpers/0/atom_arg", -1),
        "distribution.third_party_helpers[0].atom_arg",
        "0 or more",
    ),
    ("distribution-null", with_change("distribution", None), "distribution", "expected an object"),
    ("policy-list", with_change("distribution/policy", []), "distribution.policy", "expected an object"),
    (
        "custom-ops-object",
        with_change("distribution/custom_ops", {}),
        "distribution.custom_ops",
        "expected an array",
    ),
    (
        "helper-not-object",
        with_change("distribution/third_party_helpers/1", "mylib.segment.segment_sum"),
        "distribution.third_party_helpers[1]",
        "expected an object",
    ),
    ("output-kinds-list", with_change("output_kinds", ["energy"]), "output_kinds", "expected an object"),
    (
        "all-reduce-string",
        with_change("all_reduce_outputs", "stress"),
        "all_reduce_outputs",
        "expected an array",
    ),
    (
        "all-reduce-item-int",
        with_change("all_reduce_outputs", ["stress", 3]),
        "all_reduce_outputs[1]",
        "expected a string",
    ),
    ("all-reduce-item-empty", with_change("all_reduce_outputs", [""]), "all_reduce_outputs[0]", "non-empty"),
    (
        "op-not-string",
        with_change("distribution/custom_ops/0/op", 5),
        "distribution.custom_ops[0].op",
        "expected a string",
    ),
    # unknown fields, one per level
    ("unknown-top", with_change("extra", 1), "extra", 'unknown field "extra"'),
    (
        "unknown-distribution",
        with_change("distribution/polcy", {}),
        "distribution.polcy",
        'did you mean "policy"',
    ),
    (
        "unknown-policy",
        with_change("distribution/policy/width", 3),
        "distribution.policy.width",
        '"halo_width"',
    ),
    (
        "unknown-custom-op",
        with_change("distribution/custom_ops/0/args", {}),
        "distribution.custom_ops[0].args",
        "allowed fields",
    ),
    (
        "unknown-helper",
        with_change("distribution/third_party_helpers/1/module", "x"),
        "distribution.third_party_helpers[1].module",
        '"module_path"',
    ),
    # bad enums
    (
        "enum-policy-kind",
        with_change("distribution/policy/kind", "sharded"),
        "distribution.policy.kind",
        '"halo", "replicated"',
    ),
    (
        "enum-scatter-mode",
        with_change("distribution/policy/scatter_mode", "halo"),
        "distribution.policy.scatter_mode",
        'expected one of "halo_correction", "local", "owned_complete", got "halo"; set it to one of those',
    ),
    (
        "enum-gather-mode",
        with_change("distribution/policy/gather_mode", "all"),
        "distribution.policy.gather_mode",
        '"halo_read"',
    ),
    (
        "enum-helper-kind",
        with_change("distribution/third_party_helpers/0/kind", "sum"),
        "distribution.third_party_helpers[0].kind",
        '"python", "reduction"',
    ),
    (
        "enum-output-kind",
        with_change("output_kinds/forces", "per_atom"),
        "output_kinds.forces",
        '"per_node", "per_graph", "global"',
    ),
    (
        "enum-arg-transform",
        with_change("distribution/custom_ops/0/arg_transforms/0", "gather"),
        "distribution.custom_ops[0].arg_transforms.0",
        '"gather_inputs"',
    ),
    (
        "enum-output-transform",
        with_change("distribution/custom_ops/0/output_transforms/0", "scatter"),
        "distribution.custom_ops[0].output_transforms.0",
        '"scatter_outputs"',
    ),
    # versions and format
    ("version-newer", with_change("version", 2), "version", "newer distcheck"),
    ("version-zero", with_change("version", 0), "version", "got 0"),
    ("version-negative", with_change("version", -1), "version", "got -1"),
    ("version-string", with_change("version", "1"), "version", "expected an integer version"),
    ("version-float", with_change("version", 1.0), "version", "expected an integer version"),
    ("version-bool", with_change("version", True), "version", "got boolean"),
    ("version-missing", with_change("version", _DELETE), "version", "missing"),
    ("format-missing", with_change("format", _DELETE), "format", "missing"),
    ("format-wrong", with_change("format", "nvalchemi-spec"), "format", "not a distcheck spec"),
    # helpers
    (
        "python-no-replacement",
        with_change("distribution/third_party_helpers/1/replacement", _DELETE),
        "distribution.third_party_helpers[1].replacement",
        "needs a replacement",
    ),
    (
        "python-null-replacement",
        with_change("distribution/third_party_helpers/1/replacement", None),
        "distribution.third_party_helpers[1].replacement",
        "needs a replacement",
    ),
    (
        "replacement-no-colon",
        with_change("distribution/third_party_helpers/1/replacement", "mywrapper.dd.owned_segment_sum"),
        "distribution.third_party_helpers[1].replacement",
        '"package.module:function"',
    ),
    (
        "replacement-two-colons",
        with_change("distribution/third_party_helpers/1/replacement", "a:b:c"),
        "distribution.third_party_helpers[1].replacement",
        'got "a:b:c"',
    ),
    (
        "replacement-empty-module",
        with_change("distribution/third_party_helpers/1/replacement", ":f"),
        "distribution.third_party_helpers[1].replacement",
        "package.module:function",
    ),
    (
        "reduction-with-replacement",
        with_change("distribution/third_party_helpers/0/replacement", "a.b:c"),
        "distribution.third_party_helpers[0].replacement",
        "takes no replacement",
    ),
    (
        "python-with-atom-arg",
        with_change("distribution/third_party_helpers/1/atom_arg", 1),
        "distribution.third_party_helpers[1].atom_arg",
        'only to "reduction"',
    ),
    (
        "helper-missing-module",
        with_change("distribution/third_party_helpers/0/module_path", _DELETE),
        "distribution.third_party_helpers[0].module_path",
        "required field",
    ),
    (
        "helper-bad-module",
        with_change("distribution/third_party_helpers/0/module_path", "aimnet/nbops"),
        "distribution.third_party_helpers[0].module_path",
        "dotted module path",
    ),
    # custom ops
    (
        "op-no-namespace",
        with_change("distribution/custom_ops/0/op", "fused_message"),
        "distribution.custom_ops[0].op",
        '"namespace::name"',
    ),
    (
        "op-missing",
        with_change("distribution/custom_ops/0/op", _DELETE),
        "distribution.custom_ops[0].op",
        "required field",
    ),
    (
        "arg-key-not-int",
        with_change("distribution/custom_ops/0/arg_transforms", {"x": "gather_inputs"}),
        "distribution.custom_ops[0].arg_transforms.x",
        "decimal integer",
    ),
    (
        "arg-key-negative",
        with_change("distribution/custom_ops/0/arg_transforms", {"-1": "gather_inputs"}),
        "distribution.custom_ops[0].arg_transforms.-1",
        "decimal integer",
    ),
    (
        "arg-key-leading-zero",
        with_change("distribution/custom_ops/0/arg_transforms", {"01": "gather_inputs"}),
        "distribution.custom_ops[0].arg_transforms.01",
        "decimal integer",
    ),
    # semantics
    (
        "owned-only-per-graph",
        with_change("owned_only_outputs", ["stress"]),
        "owned_only_outputs[0]",
        "per_node outputs only",
    ),
    ("owned-only-global", with_change("output_kinds/charges", "global"), "owned_only_outputs[0]", '"global"'),
    (
        "owned-and-all-reduced",
        with_change("all_reduce_outputs", ["stress", "charges"]),
        "owned_only_outputs[0]",
        "both",
    ),
    (
        "duplicate-all-reduce",
        with_change("all_reduce_outputs", ["stress", "energy", "stress"]),
        "all_reduce_outputs[2]",
        "listed twice (first at all_reduce_outputs[0])",
    ),
    (
        "duplicate-owned-only",
        with_change("owned_only_outputs", ["charges", "charges"]),
        "owned_only_outputs[1]",
        "listed twice",
    ),
    (
        "duplicate-helper",
        with_change(
            "distribution/third_party_helpers/+",
            {"kind": "python", "module_path": "aimnet.nbops", "attr_name": "mol_sum", "replacement": "a:b"},
        ),
        "distribution.third_party_helpers[2]",
        'helper "aimnet.nbops.mol_sum" is listed twice',
    ),
    (
        "duplicate-custom-op",
        with_change("distribution/custom_ops/+", {"op": "mylib::fused_message"}),
        "distribution.custom_ops[1]",
        'custom op "mylib::fused_message"',
    ),
    ("non-object-document", [], "$", "top level"),
]


@pytest.mark.parametrize(("name", "doc", "path", "fragment"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_malformed_input_names_the_exact_path(name: str, doc: Any, path: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        MLIPSpec.from_dict(doc)
    err = info.value
    assert err.path == path, str(err)
    assert fragment in err.message, err.message
    assert str(err) == f"{path}: {err.message}"
    # Every message says what to do after the diagnosis.
    diagnosis, _, advice = err.message.rpartition("; ")
    assert diagnosis and advice, err.message
    # validate_dict agrees: the same error comes first.
    errors = validate_dict(doc)
    assert errors and errors[0].path == path and errors[0].message == err.message


@pytest.mark.parametrize(("name", "doc", "path", "fragment"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_malformed_json_text_locates_the_key(name: str, doc: Any, path: str, fragment: str) -> None:
    if name == "halo-width-nan":
        pytest.skip("NaN cannot be written as JSON")
    text = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()
    with pytest.raises(SpecError) as info:
        MLIPSpec.from_json(text)
    err = info.value
    assert err.path == path
    assert err.line is not None and err.column is not None
    assert (err.line, err.column) == locate_path(text, err.parts)
    # Independently: the position is the key's opening quote (or, for a list item or a missing key,
    # the start of the item / the nearest enclosing object that exists).
    node: Any = doc
    present: list[Any] = []
    for part in err.parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int):
            node = node[part]
        else:
            break
        present.append(part)
    at = text.splitlines()[err.line - 1][err.column - 1 :]
    if present and isinstance(present[-1], str):
        assert at.startswith(orjson.dumps(present[-1]).decode()), (at, present)
    else:
        assert at.startswith(orjson.dumps(node).decode()[:1]), (at, present)


def test_newer_version_says_to_upgrade_and_hides_other_errors() -> None:
    doc = with_change("version", 7)
    doc["new_field_from_the_future"] = {"x": 1}
    errors = validate_dict(doc)
    assert [e.path for e in errors] == ["version"]
    assert "written by a newer distcheck" in errors[0].message
    assert "upgrade distcheck" in errors[0].message
    assert "version 7" in errors[0].message


def test_unknown_field_lists_the_allowed_keys() -> None:
    err = validate_dict(with_change("distribution/policy/scatter", "local"))[0]
    for allowed in ("kind", "scatter_mode", "gather_mode", "halo_width"):
        assert f'"{allowed}"' in err.message
    assert 'did you mean "scatter_mode"' in err.message


def test_path_quotes_keys_that_are_not_plain() -> None:
    doc = with_change("output_kinds/my.output", "per_atom")
    assert validate_dict(doc)[0].path == 'output_kinds["my.output"]'
    assert format_path(()) == "$"
    assert format_path(("distribution", "third_party_helpers", 1, "replacement")) == (
        "distribution.third_party_helpers[1].replacement"
    )
    assert format_path(("output_kinds", 'a "b"')) == 'output_kinds["a \\"b\\""]'


def test_validate_dict_reports_every_error_at_once() -> None:
    doc = example()
    doc["distribution"]["policy"]["scatter_mode"] = "halo"
    doc["distribution"]["policy"]["extra"] = True
    doc["distribution"]["third_party_helpers"][1].pop("replacement")
    doc["output_kinds"]["forces"] = "per_atom"
    doc["owned_only_outputs"] = ["stress"]
    doc["system_reductions"] = "true"
    paths = [e.path for e in validate_dict(doc)]
    assert sorted(paths) == sorted(
        [
            "distribution.policy.scatter_mode",
            "distribution.policy.extra",
            "distribution.third_party_helpers[1].replacement",
            "output_kinds.forces",
            "owned_only_outputs[0]",
            "system_reductions",
        ]
    )
    with pytest.raises(SpecError) as info:
        MLIPSpec.from_dict(doc)
    assert info.value.path == paths[0]


def test_validate_dict_of_a_valid_document_is_empty() -> None:
    assert validate_dict(example()) == []
    assert validate_dict({"format": "distcheck-spec", "version": 1}) == []


def test_invalid_entry_is_not_also_reported_as_a_duplicate() -> None:
    doc = example()
    doc["distribution"]["third_party_helpers"].append(
        {"kind": "python", "module_path": "aimnet.nbops", "attr_name": "mol_sum"}  # no replacement
    )
    assert [e.path for e in validate_dict(doc)] == ["distribution.third_party_helpers[2].replacement"]


# ------------------------------------------------------------------ JSON text


BROKEN = '{\n  "format": "distcheck-spec",\n  "version": 1,\n  "system_reductions": tru\n}\n'


def test_broken_json_gives_line_and_column() -> None:
    with pytest.raises(SpecError) as info:
        MLIPSpec.from_json(BROKEN)
    err = info.value
    assert err.path == "$"
    assert (err.line, err.column) == (4, 24)  # the "t" of "tru"
    assert "line 4, column 24" in err.message
    assert str(err).startswith("$: invalid JSON")


def test_missing_comma_is_located() -> None:
    text = '{\n  "format": "distcheck-spec"\n  "version": 1\n}'
    err = validate_json(text)[0]
    assert (err.path, err.line, err.column) == ("$", 3, 3)


def test_from_json_locates_the_offending_key() -> None:
    text = (
        "{\n"
        '  "format": "distcheck-spec",\n'
        '  "version": 1,\n'
        '  "distribution": {\n'
        '    "policy": {"kind": "halo",\n'
        '               "scatter_mode": "halo"}\n'
        "  }\n"
        "}\n"
    )
    with pytest.raises(SpecError) as info:
        MLIPSpec.from_json(text)
    err = info.value
    assert err.path == "distribution.policy.scatter_mode"
    assert (err.line, err.column) == (6, 16)


def test_list_item_errors_point_at_the_item() -> None:
    text = (
        '{"format": "distcheck-spec", "version": 1,\n'
        ' "all_reduce_outputs": ["stress",\n'
        '                        "stress"]}\n'
    )
    err = validate_json(text)[0]
    assert err.path == "all_reduce_outputs[1]"
    assert (err.line, err.column) == (3, 25)


def test_missing_field_is_located_at_its_object() -> None:
    text = '{"format": "distcheck-spec", "version": 1,\n "distribution": {"custom_ops": [\n   {"arg_transforms": {}}]}}'
    err = validate_json(text)[0]
    assert err.path == "distribution.custom_ops[0].op"
    assert (err.line, err.column) == (3, 4)


def test_columns_count_characters_not_bytes() -> None:
    text = '{"format": "distcheck-spec", "version": 1, "output_kinds": {"énergie": "per_atom"}}'
    err = validate_json(text)[0]
    assert err.path == "output_kinds.énergie"
    assert err.column == text.index('"énergie"') + 1
    assert validate_json(text.encode())[0].column == err.column


def test_duplicate_keys_in_text_are_errors() -> None:
    text = '{"format": "distcheck-spec", "version": 1,\n "system_reductions": true,\n "system_reductions": false}'
    errors = validate_json(text)
    assert [(e.path, e.line, e.column) for e in errors] == [("system_reductions", 3, 2)]
    assert "more than once" in errors[0].message
    with pytest.raises(SpecError):
        MLIPSpec.from_json(text)


def test_byte_order_mark_and_bytes_are_accepted() -> None:
    text = MLIPSpec.from_dict(example()).to_json()
    assert MLIPSpec.from_json(("\ufeff" + text).encode()) == MLIPSpec.from_dict(example())
    assert MLIPSpec.from_json(bytearray(text.encode())) == MLIPSpec.from_dict(example())


def test_invalid_utf8_is_a_spec_error() -> None:
    with pytest.raises(SpecError) as info:
        MLIPSpec.from_json(b'{"format": "\xff"}')
    assert info.value.path == "$" and "UTF-8" in info.value.message


def test_non_object_json_document() -> None:
    with pytest.raises(SpecError) as info:
        MLIPSpec.from_json("[1, 2]")
    assert info.value.path == "$"
    assert (info.value.line, info.value.column) == (1, 1)


# ------------------------------------------------------------------ files


def test_save_load_round_trip(tmp_path: Path) -> None:
    spec = MLIPSpec.from_dict(example())
    spec.distribution.policy.halo_width = 9.5
    target = tmp_path / "nested" / "dir" / "model.distspec.json"
    spec.save(target)
    assert target.read_text() == spec.to_json()
    assert MLIPSpec.load(target) == spec
    assert MLIPSpec.load(str(target)) == spec
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.distspec.json"]  # no temp file left


def test_save_overwrites_and_keeps_permissions(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    MLIPSpec().save(target)
    os.chmod(target, 0o640)
    MLIPSpec(system_reductions=False).save(target)
    assert MLIPSpec.load(target).system_reductions is False
    assert target.stat().st_mode & 0o777 == 0o640


def test_save_refuses_an_invalid_spec(tmp_path: Path) -> None:
    spec = MLIPSpec()
    spec.distribution.third_party_helpers.append(HelperAdapter("python", "m", "f"))  # no replacement
    target = tmp_path / "s.json"
    with pytest.raises(SpecError) as info:
        spec.save(target)
    assert info.value.path == "distribution.third_party_helpers[0].replacement"
    assert info.value.file == str(target)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_save_rejects_a_callable_instead_of_a_name(tmp_path: Path) -> None:
    spec = MLIPSpec()
    spec.distribution.third_party_helpers.append(
        HelperAdapter("python", "m", "f", replacement=print)  # type: ignore[arg-type]
    )
    with pytest.raises(SpecError) as info:
        spec.save(tmp_path / "s.json")
    assert info.value.path == "distribution.third_party_helpers[0].replacement"


def test_load_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(SpecError) as info:
        MLIPSpec.load(missing)
    assert info.value.path == "$"
    assert "does not exist" in info.value.message
    assert info.value.file == str(missing)
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_load_broken_file_carries_file_and_position(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text(BROKEN)
    with pytest.raises(SpecError) as info:
        MLIPSpec.load(path)
    assert (info.value.file, info.value.line, info.value.column) == (str(path), 4, 24)


def test_load_locates_schema_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(orjson.dumps(with_change("output_kinds/forces", "per_atom"), option=orjson.OPT_INDENT_2).decode())
    with pytest.raises(SpecError) as info:
        MLIPSpec.load(path)
    lines = path.read_text().splitlines()
    assert info.value.path == "output_kinds.forces"
    assert info.value.line is not None and info.value.column is not None
    assert lines[info.value.line - 1][info.value.column - 1 :].startswith('"forces"')


# ------------------------------------------------------------------ coerce, copy, signature, helper


def test_coerce_accepts_spec_dict_str_and_pathlike(tmp_path: Path) -> None:
    spec = MLIPSpec.from_dict(example())
    copied = MLIPSpec.coerce(spec)
    assert copied == spec and copied is not spec
    copied.distribution.third_party_helpers.clear()
    copied.output_kinds["new"] = "global"
    assert len(spec.distribution.third_party_helpers) == 2 and "new" not in spec.output_kinds
    assert MLIPSpec.coerce(example()) == spec
    path = tmp_path / "s.json"
    spec.save(path)
    assert MLIPSpec.coerce(str(path)) == spec
    assert MLIPSpec.coerce(path) == spec


@pytest.mark.parametrize("bad", [42, None, b"{}", ["format"], 3.5])
def test_coerce_rejects_other_types(bad: object) -> None:
    with pytest.raises(TypeError) as info:
        MLIPSpec.coerce(bad)
    text = str(info.value)
    assert type(bad).__name__ in text
    for accepted in ("MLIPSpec", "dict", "path"):
        assert accepted in text


def test_coerce_dict_errors_are_spec_errors() -> None:
    with pytest.raises(SpecError):
        MLIPSpec.coerce(with_change("version", 3))


def test_copy_is_deep() -> None:
    spec = MLIPSpec.from_dict(example())
    other = spec.copy()
    other.distribution.policy.scatter_mode = "local"
    other.distribution.custom_ops[0].arg_transforms["1"] = "slice_owned"
    assert spec.distribution.policy.scatter_mode == "halo_correction"
    assert spec.distribution.custom_ops[0].arg_transforms == {"0": "gather_inputs"}
    assert other != spec


def test_signature_ignores_order_of_unordered_lists() -> None:
    a = MLIPSpec.from_dict(example())
    b = a.copy()
    a.all_reduce_outputs = ["stress", "virial"]
    b.all_reduce_outputs = ["virial", "stress"]
    a.output_kinds["dipole"] = "per_node"
    b.output_kinds["dipole"] = "per_node"
    a.owned_only_outputs = ["charges", "dipole"]
    b.owned_only_outputs = ["dipole", "charges"]
    b.distribution.third_party_helpers.reverse()
    b.output_kinds = dict(reversed(list(b.output_kinds.items())))
    assert a != b
    assert a.signature() == b.signature()


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: setattr(s.distribution.policy, "scatter_mode", "local"),
        lambda s: setattr(s.distribution.policy, "halo_width", 5.0),
        lambda s: setattr(s, "system_reductions", False),
        lambda s: s.all_reduce_outputs.append("energy"),
        lambda s: s.output_kinds.update(forces="global"),
        lambda s: s.distribution.custom_ops[0].arg_transforms.update({"0": "slice_owned"}),
        lambda s: s.distribution.third_party_helpers.pop(),
        lambda s: setattr(s.distribution.third_party_helpers[0], "atom_dim", 1),
    ],
)
def test_signature_changes_with_meaning(mutate: Any) -> None:
    a = MLIPSpec.from_dict(example())
    b = a.copy()
    mutate(b)
    assert a.signature() != b.signature()


def test_signature_is_stable_and_short() -> None:
    sig = MLIPSpec().signature()
    assert len(sig) == 16 and all(c in "0123456789abcdef" for c in sig)
    # Pinned: signatures may be stored to de-duplicate specs across runs, so they must not drift.
    assert sig == "683469b5358ae9ec"


def test_helper_lookup() -> None:
    spec = MLIPSpec.from_dict(example())
    helper = spec.helper("aimnet.nbops.mol_sum")
    assert helper is not None and helper.kind == "reduction"
    assert spec.helper("mylib.segment.segment_sum") is spec.distribution.third_party_helpers[1]
    assert spec.helper("aimnet.nbops") is None
    assert spec.helper("mol_sum") is None


def test_validate_finds_errors_in_a_mutated_spec() -> None:
    spec = MLIPSpec.from_dict(example())
    assert spec.validate() == []
    spec.owned_only_outputs.append("energy")  # per_graph
    assert [e.path for e in spec.validate()] == ["owned_only_outputs[1]"]


def test_parts_read_their_own_dicts_with_relative_paths() -> None:
    assert Policy.from_dict({"scatter_mode": "local"}) == Policy(scatter_mode="local")
    assert HelperAdapter.from_dict(EXAMPLE["distribution"]["third_party_helpers"][0]).qualname == (
        "aimnet.nbops.mol_sum"
    )
    with pytest.raises(SpecError) as info:
        Distribution.from_dict({"policy": {"kind": "x"}})
    assert info.value.path == "policy.kind"
    with pytest.raises(SpecError) as info2:
        CustomOp.from_dict({"op": "a::b", "arg_transforms": {"0": "nope"}})
    assert info2.value.path == "arg_transforms.0"


def test_spec_error_pickles_and_serialises() -> None:
    err = validate_json(BROKEN)[0]
    again = pickle.loads(pickle.dumps(err))
    assert (again.path, again.message, again.line, again.column, str(again)) == (
        err.path,
        err.message,
        err.line,
        err.column,
        str(err),
    )
    assert isinstance(again, ValueError)
    assert err.to_dict()["line"] == 4


# ------------------------------------------------------------------ JSON Schema


def test_committed_schema_is_up_to_date() -> None:
    assert SCHEMA_FILE.exists(), (
        "extension/schemas/distspec.schema.json is missing; run "
        "`python -m distcheck.spec --write-schema extension/schemas/distspec.schema.json`"
    )
    committed = orjson.loads(SCHEMA_FILE.read_bytes())
    assert committed == json_schema(), (
        "extension/schemas/distspec.schema.json is stale; run "
        "`python -m distcheck.spec --write-schema extension/schemas/distspec.schema.json`"
    )


def test_write_schema_output_format(tmp_path: Path) -> None:
    target = tmp_path / "schemas" / "s.json"
    write_schema(target)
    text = target.read_text()
    assert text.endswith("}\n")
    assert text.splitlines()[1] == '  "$schema": "https://json-schema.org/draft/2020-12/schema",'
    assert orjson.loads(text) == json_schema()
    assert SCHEMA_FILE.read_text() == text, "run `python -m distcheck.spec --write-schema ...` to refresh"


@pytest.mark.procs
def test_module_cli_writes_the_schema(tmp_path: Path) -> None:
    target = tmp_path / "out.schema.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "server")}
    done = subprocess.run(
        [sys.executable, "-m", "distcheck.spec", "--write-schema", str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(target.read_bytes()) == json_schema()


@pytest.mark.procs
def test_module_cli_validates_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(BROKEN)
    env = {**os.environ, "PYTHONPATH": str(REPO / "server")}
    done = subprocess.run(
        [sys.executable, "-m", "distcheck.spec", "--validate", str(bad)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"{bad}:4:24: $: invalid JSON" in done.stderr


def _walk_schema(node: Any, where: str = "#") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((where, node))
        for k, v in node.items():
            found.extend(_walk_schema(v, f"{where}/{k}"))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found.extend(_walk_schema(v, f"{where}/{i}"))
    return found


def test_schema_shape() -> None:
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["required"] == ["format", "version"]
    assert schema["properties"]["format"]["const"] == "distcheck-spec"
    assert list(schema["properties"]) == list(EXAMPLE)
    objects_with_properties = [(w, n) for w, n in _walk_schema(schema) if "properties" in n and "if" not in w]
    checked = 0
    for where, node in objects_with_properties:
        if "/allOf/" in where:
            continue  # if/then fragments only constrain
        checked += 1
        assert node.get("additionalProperties") is False, where
        for name, prop in node["properties"].items():
            assert prop.get("title") and prop.get("description"), f"{where}/properties/{name}"
            assert len(prop["description"]) <= 200, f"{where}/properties/{name}: keep hover text short"
    assert checked == 5  # document, distribution, policy, custom op, helper
    policy = schema["properties"]["distribution"]["properties"]["policy"]["properties"]
    assert policy["scatter_mode"]["enum"] == list(SCATTER_MODES)
    assert policy["halo_width"]["default"] is None
    assert schema["properties"]["system_reductions"]["default"] is True


def test_schema_follows_the_dataclasses() -> None:
    # The schema is derived, not hand-written: a change to the enum tuples shows up in it.
    schema = json_schema()
    kinds = schema["properties"]["output_kinds"]["additionalProperties"]["enum"]
    assert kinds == list(OUTPUT_KINDS)
    helper = schema["properties"]["distribution"]["properties"]["third_party_helpers"]["items"]
    assert helper["required"] == ["kind", "module_path", "attr_name"]
    assert list(helper["properties"]) == [f.name for f in dataclasses.fields(HelperAdapter)]


@pytest.fixture(scope="module")
def validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(json_schema())
    return jsonschema.Draft202012Validator(json_schema())


@pytest.mark.parametrize(
    "doc",
    [
        EXAMPLE,
        {"format": "distcheck-spec", "version": 1},
        MLIPSpec().to_dict(),
        with_change("distribution/policy/halo_width", 4.5),
        with_change("distribution/third_party_helpers/0/replacement", None),
    ],
)
def test_schema_accepts_good_documents(validator: Any, doc: dict[str, Any]) -> None:
    assert validate_dict(doc) == []
    assert list(validator.iter_errors(doc)) == []


@pytest.mark.parametrize(
    "doc",
    [
        with_change("format", _DELETE),
        with_change("format", "other"),
        with_change("version", 2),
        with_change("extra", 1),
        with_change("distribution/policy/extra", 1),
        with_change("distribution/policy/scatter_mode", "halo"),
        with_change("distribution/policy/halo_width", 0),
        with_change("distribution/third_party_helpers/1/replacement", _DELETE),
        with_change("distribution/third_party_helpers/1/replacement", "no_colon"),
        with_change("distribution/third_party_helpers/0/replacement", "a:b"),
        with_change("distribution/third_party_helpers/1/atom_arg", 1),
        with_change("distribution/custom_ops/0/op", "noname"),
        with_change("distribution/custom_ops/0/arg_transforms", {"x": "none"}),
        with_change("output_kinds/forces", "per_atom"),
        with_change("all_reduce_outputs", ["stress", "stress"]),
        with_change("system_reductions", 1),
    ],
)
def test_schema_rejects_bad_documents(validator: Any, doc: dict[str, Any]) -> None:
    assert validate_dict(doc) != []
    assert list(validator.iter_errors(doc)) != []


@settings(max_examples=50, deadline=None)
@given(valid_specs())
def test_schema_accepts_every_valid_spec(spec: MLIPSpec) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(spec.to_dict(), json_schema(), cls=jsonschema.Draft202012Validator)
