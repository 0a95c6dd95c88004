"""Importing nvalchemi-toolkit's spec files (`distcheck.spec.import_anchor_spec`, `anchor_spec_from_text`).

The fixtures in `fixtures/anchor_specs/` have the shape the toolkit's `MLIPSpec.save` writes
(`json.dumps(to_dict(), indent=2)`: `version`, `core` with `policy` / `custom_ops` /
`third_party_helpers` / `shard_fields`, the output classification with `output_kinds` as
`[name, kind]` pairs). Three classes of field are covered, each in several shapes: fields with an
exact distcheck equivalent (converted, no note), fields distcheck does not need (a note that is not
lossy) and fields with no equivalent (a lossy note at the field's path and line, the converted spec
does not pretend to hold them); and every input the toolkit's reader or distcheck's refuses (a
`SpecError` at the toolkit file's path, with its line, saying what to write).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distcheck.spec import (
    AnchorImport,
    MLIPSpec,
    SpecError,
    anchor_spec_from_text,
    import_anchor_spec,
)
from distcheck.spec.importer import convert_anchor_text

FIXTURES = Path(__file__).parent / "fixtures" / "anchor_specs"
Doc = dict[str, Any]


def fixture(name: str) -> Doc:
    data: Doc = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def text_of(doc: Any) -> str:
    return json.dumps(doc, indent=2)  # as the toolkit's MLIPSpec.save writes it


def changed(edit: Callable[[Doc], None], base: str = "mpnn_halo.json") -> str:
    """The text of fixture `base` after `edit`, laid out as the toolkit writes it."""
    doc = copy.deepcopy(fixture(base))
    edit(doc)
    return text_of(doc)


def present(doc: Any, parts: tuple[str | int, ...]) -> bool:
    """Whether the JSON path `parts` is in `doc`."""
    for p in parts:
        if isinstance(p, int) and isinstance(doc, list) and p < len(doc):
            doc = doc[p]
        elif isinstance(p, str) and isinstance(doc, dict) and p in doc:
            doc = doc[p]
        else:
            return False
    return True


def key_line(text: str, line: int | None) -> str:
    assert line is not None, "the note or error has no line"
    return text.splitlines()[line - 1]


# --------------------------------------------------------------------------------------------------
# fields with a distcheck equivalent


def test_the_least_the_toolkit_reads_is_distchecks_default_spec() -> None:
    result = import_anchor_spec(FIXTURES / "minimal.json")
    assert result.exact and result.notes == []
    assert result.spec == MLIPSpec()
    assert result.file == str(FIXTURES / "minimal.json")


def test_a_preset_converts_with_its_output_kinds() -> None:
    result = import_anchor_spec(FIXTURES / "mpnn_halo.json")
    assert result.exact and result.notes == []
    spec = result.spec
    assert (spec.distribution.policy.kind, spec.distribution.policy.scatter_mode) == ("halo", "halo_correction")
    assert spec.output_kinds == {
        "atomic_energies": "per_node",
        "energy": "per_graph",
        "forces": "per_node",
        "stress": "per_graph",
    }
    assert spec.system_reductions is True and spec.owned_only_outputs == [] and spec.all_reduce_outputs == []


def test_every_field_with_an_equivalent_keeps_its_meaning() -> None:
    result = import_anchor_spec(FIXTURES / "every_field.json")
    assert result.exact, [str(n) for n in result.unmapped]
    spec = result.spec
    assert spec.validate() == []
    assert MLIPSpec.from_json(spec.to_json()) == spec
    assert spec.distribution.policy.scatter_mode == "local"
    ops = {op.op: (op.arg_transforms, op.output_transforms) for op in spec.distribution.custom_ops}
    assert ops == {
        "mylib::fused_message": ({"0": "gather_inputs", "2": "slice_owned"}, {"0": "scatter_outputs"}),
        "mylib::structure_factor": ({}, {"0": "all_reduce_sum"}),
    }
    helpers = [h.to_dict() for h in spec.distribution.third_party_helpers]
    assert helpers == [  # a jit helper swapped for a plain-Python copy is distcheck's python helper
        {
            "kind": "python",
            "module_path": "aimnet.nbops",
            "attr_name": "mol_sum",
            "replacement": "mypkg.dd:owned_mol_sum",
        },
        {
            "kind": "python",
            "module_path": "mymace.scripts",
            "attr_name": "envelopes",
            "replacement": "mypkg.dd:envelopes_plain",
        },
    ]
    assert spec.system_reductions is False
    assert spec.owned_only_outputs == ["charges"] and spec.all_reduce_outputs == ["stress"]
    assert spec.output_kinds["charges"] == "per_node"
    # what distcheck does not need is said, but is not a loss
    assert sorted(n.path for n in result.notes) == ["core.shard_fields", "core.third_party_helpers[2].mode"]
    assert not any(n.lossy for n in result.notes)


def test_an_owned_complete_policy_becomes_owned_complete() -> None:
    result = import_anchor_spec(FIXTURES / "refresh_halo.json")
    assert result.exact
    assert result.spec.distribution.policy.kind == "halo"
    assert result.spec.distribution.policy.scatter_mode == "owned_complete"


@pytest.mark.parametrize("scatter", ["halo_correction", "local"])
def test_a_halo_policy_keeps_its_scatter_mode(scatter: str) -> None:
    text = changed(lambda d: d["core"]["policy"].update(scatter_mode=scatter))
    result = anchor_spec_from_text(text)
    assert result.exact and result.spec.distribution.policy.scatter_mode == scatter


def test_output_kinds_may_be_an_object_as_the_toolkit_also_reads() -> None:
    result = anchor_spec_from_text(changed(lambda d: d.update(output_kinds={"forces": "per_node", "e": "global"})))
    assert result.exact and result.spec.output_kinds == {"forces": "per_node", "e": "global"}


def test_a_document_a_path_and_text_give_the_same_spec() -> None:
    path = FIXTURES / "every_field.json"
    by_path = import_anchor_spec(path)
    by_name = import_anchor_spec(str(path))
    by_doc = import_anchor_spec(fixture("every_field.json"))
    by_text = anchor_spec_from_text(path.read_bytes(), file="x.json")
    assert by_path.spec == by_name.spec == by_doc.spec == by_text.spec
    assert by_doc.file is None and by_text.file == "x.json"
    assert [n.line for n in by_doc.notes] == [None, None]  # no text, no lines
    assert all(n.line is not None for n in by_path.notes)


# --------------------------------------------------------------------------------------------------
# fields distcheck does not need: a note, not a loss


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d["core"].update(shard_fields=["positions"]), "core.shard_fields"),
        (lambda d: d["core"].update(shard_fields=[]), "core.shard_fields"),
        (
            lambda d: d["core"]["third_party_helpers"].append(
                {"kind": "jit", "module_path": "m.s", "attr_name": "f", "replacement": None, "mode": "marshal"}
            ),
            "core.third_party_helpers[0].mode",
        ),
        (
            lambda d: d["core"]["third_party_helpers"].append(
                {
                    "kind": "method",
                    "module_path": "e3nn.o3",
                    "class_name": "SphericalHarmonics",
                    "method_name": "forward",
                    "replacement": None,
                    "mode": "marshal",
                }
            ),
            "core.third_party_helpers[0].mode",
        ),
        (lambda d: d["output_kinds"].append(["charges", "unknown"]), "output_kinds[4]"),
    ],
    ids=["shard_fields", "no_shard_fields", "jit_marshal", "method_marshal", "unknown_kind"],
)
def test_fields_distcheck_does_not_need_are_noted_without_loss(edit: Callable[[Doc], None], path: str) -> None:
    text = changed(edit)
    result = anchor_spec_from_text(text)
    assert [n.path for n in result.notes] == [path]
    note = result.notes[0]
    assert not note.lossy and result.exact
    assert "nothing to do" in note.message
    assert result.spec.distribution.third_party_helpers == []  # a marshal helper needs no entry
    assert "charges" not in result.spec.output_kinds  # left to inference, as the toolkit leaves it
    assert key_line(text, note.line).strip().startswith(('"mode"', '"shard_fields"', "["))


# --------------------------------------------------------------------------------------------------
# fields with no equivalent: a lossy note at the field, and the spec does not pretend to hold it


def _helper(**entry: Any) -> Callable[[Doc], None]:
    return lambda d: d["core"]["third_party_helpers"].append(entry)


def _policy(**policy: Any) -> Callable[[Doc], None]:
    return lambda d: d["core"].update(policy=policy)


def _op(args: dict[str, str], outs: dict[str, str]) -> Callable[[Doc], None]:
    return lambda d: d["core"]["custom_ops"].append(
        {
            "op": "pme::spread",
            "arg_transforms": {k: {"type": v} for k, v in args.items()},
            "output_transforms": {k: {"type": v} for k, v in outs.items()},
        }
    )


LOSSY: list[tuple[str, Callable[[Doc], None], str, str]] = [
    ("policy_local", _policy(kind="local"), "core.policy.kind", "single-process"),
    ("policy_shard", _policy(kind="shard"), "core.policy.kind", "storage only"),
    ("policy_graph_parallel", _policy(kind="graph_parallel"), "core.policy.kind", "slabs"),
    ("policy_byo", _policy(kind="halo2"), "core.policy.kind", 'did you mean "halo"'),
    ("gather_local", _policy(kind="halo", gather_mode="local"), "core.policy.gather_mode", "halo_read"),
    (
        "refresh_summing",
        _policy(kind="refresh_halo", scatter_mode="halo_correction"),
        "core.policy.scatter_mode",
        '"scatter_mode": "halo_correction"',
    ),
    (
        "gather_full",
        _op({"0": "gather_inputs_full", "1": "gather_inputs"}, {}),
        "core.custom_ops[0].arg_transforms.0.type",
        "gather_inputs",
    ),
    (
        "slice_outputs",
        _op({}, {"0": "slice_outputs_owned", "1": "scatter_outputs"}),
        "core.custom_ops[0].output_transforms.0.type",
        "scatter_outputs",
    ),
    (
        "python_declared",
        _helper(kind="python", module_path="aimnet.nbops", attr_name="mol_sum", replacement=None),
        "core.third_party_helpers[0].replacement",
        "--watch aimnet",
    ),
    (
        "python_no_replacement_key",
        _helper(kind="python", module_path="aimnet.nbops", attr_name="mol_sum"),
        "core.third_party_helpers[0].replacement",
        "--watch aimnet",
    ),
    (
        "python_locals",
        _helper(kind="python", module_path="a.b", attr_name="f", replacement="w:make.<locals>.f"),
        "core.third_party_helpers[0].replacement",
        "module level",
    ),
    (
        "python_no_colon",
        _helper(kind="python", module_path="a.b", attr_name="f", replacement="w.f"),
        "core.third_party_helpers[0].replacement",
        '"package.module:function"',
    ),
    (
        "jit_declared",
        _helper(kind="jit", module_path="m.s", attr_name="f", replacement=None, mode="eager"),
        "core.third_party_helpers[0].replacement",
        "--watch m",
    ),
    (
        "method_wrap",
        _helper(
            kind="method",
            module_path="aimnet.modules.aev",
            class_name="ConvSV",
            method_name="forward",
            replacement="w:rewrap",
            mode="wrap",
        ),
        "core.third_party_helpers[0].replacement",
        '"attr_name": "ConvSV.forward"',
    ),
    (
        "method_declared",
        _helper(
            kind="method",
            module_path="aimnet.modules.aev",
            class_name="ConvSV",
            method_name="forward",
            replacement=None,
            mode="wrap",
        ),
        "core.third_party_helpers[0].replacement",
        "--watch aimnet",
    ),
    (
        "module_forward",
        _helper(kind="module_forward", target="cueq.Conv.forward", label="conv_tp"),
        "core.third_party_helpers[0].kind",
        '"Class.forward"',
    ),
    (
        "helper_byo",
        _helper(kind="pythn", module_path="a", attr_name="f"),
        "core.third_party_helpers[0].kind",
        'did you mean "python"',
    ),
    ("node_energy_key", lambda d: d.update(node_energy_key="node_e"), "node_energy_key", "index_add"),
    ("node_virial_key", lambda d: d.update(node_virial_key="node_w"), "node_virial_key", '"stress"'),
    ("gp_replicate", lambda d: d.update(gp_replicate_geometry=True), "gp_replicate_geometry", "remove it"),
    ("top_unknown", lambda d: d.update(compile={"static_shapes": True}), "compile", "remove it"),
    ("top_typo", lambda d: d.update(owned_only_output=["q"]), "owned_only_output", 'did you mean "owned_only_outputs"'),
    ("core_adapters", lambda d: d["core"].update(adapters=[]), "core.adapters", "remove it"),
    ("policy_extra", _policy(kind="halo", ghost_width=6.0), "core.policy.ghost_width", "remove it"),
    (
        "helper_extra",
        _helper(kind="python", module_path="a", attr_name="f", replacement="w:g", install_site="x:1"),
        "core.third_party_helpers[0].install_site",
        "remove it",
    ),
]


@pytest.mark.parametrize(("edit", "path", "advice"), [c[1:] for c in LOSSY], ids=[c[0] for c in LOSSY])
def test_a_field_without_equivalent_is_named_at_its_line(edit: Callable[[Doc], None], path: str, advice: str) -> None:
    text = changed(edit)
    result = anchor_spec_from_text(text, file="anchor.json")
    assert [n.path for n in result.unmapped] == [path]
    note = result.unmapped[0]
    assert not result.exact and note.lossy
    assert advice in note.message
    assert str(note) == f"{path}: {note.message}"
    last = note.parts[-1]
    if isinstance(last, str) and present(json.loads(text), note.parts):  # a missing key is placed at its parent
        assert f'"{last}":' in key_line(text, note.line)
    else:
        assert note.line is not None
    assert result.spec.validate() == []


@pytest.mark.parametrize("kind", ["local", "shard", "graph_parallel", "halo2"])
def test_a_policy_without_equivalent_leaves_distchecks_default(kind: str) -> None:
    result = anchor_spec_from_text(changed(_policy(kind=kind, scatter_mode="local")))
    assert result.spec.distribution.policy == MLIPSpec().distribution.policy


@pytest.mark.parametrize(
    ("edit", "kept"),
    [
        (_op({"0": "gather_inputs_full", "1": "gather_inputs"}, {}), ({"1": "gather_inputs"}, {})),
        (_op({}, {"0": "slice_outputs_owned", "1": "scatter_outputs"}), ({}, {"1": "scatter_outputs"})),
    ],
)
def test_a_transform_without_equivalent_passes_its_position_through(
    edit: Callable[[Doc], None], kept: tuple[dict[str, str], dict[str, str]]
) -> None:
    (op,) = anchor_spec_from_text(changed(edit)).spec.distribution.custom_ops
    assert (op.arg_transforms, op.output_transforms) == kept


def test_helpers_left_out_do_not_shift_the_paths_of_the_others() -> None:
    def edit(d: Doc) -> None:
        d["core"]["third_party_helpers"] = [
            {"kind": "python", "module_path": "a.b", "attr_name": "f", "replacement": None},
            {"kind": "module_forward", "target": "x.Y.forward", "label": "y"},
            {"kind": "python", "module_path": "a b", "attr_name": "g", "replacement": "w:g"},
        ]

    with pytest.raises(SpecError) as info:
        anchor_spec_from_text(changed(edit))
    assert info.value.path == "core.third_party_helpers[2].module_path"


def test_the_unmapped_fixture_names_every_field_and_keeps_the_rest() -> None:
    result = import_anchor_spec(FIXTURES / "unmapped.json")
    assert [n.path for n in result.unmapped] == [
        "core.policy.kind",
        "core.custom_ops[0].arg_transforms.0.type",
        "core.custom_ops[0].output_transforms.0.type",
        "core.third_party_helpers[0].replacement",
        "core.third_party_helpers[1].replacement",
        "core.third_party_helpers[2].kind",
        "node_energy_key",
        "node_virial_key",
        "gp_replicate_geometry",
    ]
    spec = result.spec
    assert spec.distribution.third_party_helpers == []
    assert [(o.op, o.arg_transforms, o.output_transforms) for o in spec.distribution.custom_ops] == [
        ("pme::spread_charges", {}, {})
    ]
    assert spec.output_kinds == {"energy": "per_graph", "forces": "per_node"}


def test_a_repeated_key_is_noted_where_it_repeats() -> None:
    text = (
        '{"version": 2,\n "core": {"policy": {"kind": "halo"}},\n "system_reductions": true,\n'
        ' "system_reductions": false}'
    )
    result = anchor_spec_from_text(text)
    (note,) = result.unmapped
    assert (note.path, note.line) == ("system_reductions", 4)
    assert result.spec.system_reductions is False  # the last one, as the toolkit's json.loads reads it


# --------------------------------------------------------------------------------------------------
# input that cannot be imported: a SpecError at the toolkit file's path, with what to write


def _set(path: list[Any], value: Any) -> Callable[[Doc], None]:
    def edit(d: Doc) -> None:
        target: Any = d
        for p in path[:-1]:
            target = target[p]
        target[path[-1]] = value

    return edit


def _drop(*path: Any) -> Callable[[Doc], None]:
    def edit(d: Doc) -> None:
        target: Any = d
        for p in path[:-1]:
            target = target[p]
        del target[path[-1]]

    return edit


ONE_OP = [{"op": "mylib::k", "arg_transforms": {"0": {"type": "gather_inputs"}}, "output_transforms": {}}]
PY = {"kind": "python", "module_path": "a.b", "attr_name": "f", "replacement": "w:g"}
ERRORS: list[tuple[str, Callable[[Doc], None], str, str]] = [
    ("version_1", _set(["version"], 1), "version", "version 2"),
    ("version_3", _set(["version"], 3), "version", "version 2"),
    ("version_string", _set(["version"], "2"), "version", "version 2"),
    ("version_true", _set(["version"], True), "version", "version 2"),
    ("version_missing", _drop("version"), "version", '"version": 2'),
    ("core_missing", _drop("core"), "core", '"core": {"policy"'),
    ("core_list", _set(["core"], []), "core", "write an object"),
    ("policy_missing", _drop("core", "policy"), "core.policy", '"policy": {"kind": "halo"}'),
    ("policy_string", _set(["core", "policy"], "halo"), "core.policy", "write a policy object"),
    ("kind_missing", _drop("core", "policy", "kind"), "core.policy.kind", '"kind": "halo"'),
    ("kind_number", _set(["core", "policy", "kind"], 5), "core.policy.kind", "write a policy kind string"),
    (
        "scatter_typo",
        _set(["core", "policy", "scatter_mode"], "halo_corection"),
        "core.policy.scatter_mode",
        'did you mean "halo_correction"',
    ),
    (
        "gather_unknown",
        _set(["core", "policy", "gather_mode"], "global"),
        "core.policy.gather_mode",
        '"halo_read", "local"',
    ),
    ("ops_object", _set(["core", "custom_ops"], {}), "core.custom_ops", "write a list"),
    (
        "op_missing",
        _set(["core", "custom_ops"], [{"arg_transforms": {}}]),
        "core.custom_ops[0].op",
        '"op": "mylib::kernel"',
    ),
    ("op_number", _set(["core", "custom_ops"], [{"op": 3}]), "core.custom_ops[0].op", "namespace::name"),
    ("op_dotted", _set(["core", "custom_ops"], [{"op": "mylib.k"}]), "core.custom_ops[0].op", "namespace::name"),
    ("op_twice", _set(["core", "custom_ops"], ONE_OP * 2), "core.custom_ops[1]", "listed twice"),
    (
        "transform_typo",
        _set(["core", "custom_ops"], [{"op": "a::b", "arg_transforms": {"0": {"type": "gather_input"}}}]),
        "core.custom_ops[0].arg_transforms.0.type",
        'did you mean "gather_inputs"',
    ),
    (
        "transform_string",
        _set(["core", "custom_ops"], [{"op": "a::b", "output_transforms": {"0": "scatter_outputs"}}]),
        "core.custom_ops[0].output_transforms.0",
        '{"type": "scatter_outputs"}',
    ),
    (
        "position_word",
        _set(["core", "custom_ops"], [{"op": "a::b", "arg_transforms": {"x": {"type": "slice_owned"}}}]),
        "core.custom_ops[0].arg_transforms.x",
        '"0", "1"',
    ),
    (
        "position_negative",
        _set(["core", "custom_ops"], [{"op": "a::b", "arg_transforms": {"-1": {"type": "slice_owned"}}}]),
        "core.custom_ops[0].arg_transforms.-1",
        '"0", "1"',
    ),
    (
        "helper_kind_missing",
        _set(["core", "third_party_helpers"], [{"module_path": "a", "attr_name": "f"}]),
        "core.third_party_helpers[0].kind",
        '"kind": "python"',
    ),
    (
        "helper_module_missing",
        _set(["core", "third_party_helpers"], [{"kind": "python", "attr_name": "f"}]),
        "core.third_party_helpers[0].module_path",
        '"module_path"',
    ),
    (
        "helper_bad_module",
        _set(["core", "third_party_helpers"], [{**PY, "module_path": "a b"}]),
        "core.third_party_helpers[0].module_path",
        "dotted module path",
    ),
    ("helper_twice", _set(["core", "third_party_helpers"], [PY, PY]), "core.third_party_helpers[1]", "twice"),
    (
        "method_class_missing",
        _set(["core", "third_party_helpers"], [{"kind": "method", "module_path": "a", "method_name": "forward"}]),
        "core.third_party_helpers[0].class_name",
        '"class_name"',
    ),
    (
        "jit_mode",
        _set(["core", "third_party_helpers"], [{**PY, "kind": "jit", "mode": "fast"}]),
        "core.third_party_helpers[0].mode",
        '"eager", "marshal"',
    ),
    (
        "replacement_number",
        _set(["core", "third_party_helpers"], [{**PY, "replacement": 5}]),
        "core.third_party_helpers[0].replacement",
        '"package.module:function"',
    ),
    ("reductions_string", _set(["system_reductions"], "yes"), "system_reductions", "true or false"),
    ("owned_string", _set(["owned_only_outputs"], "charges"), "owned_only_outputs", "list of output name"),
    ("owned_item", _set(["owned_only_outputs"], [5]), "owned_only_outputs[0]", "output name string"),
    ("owned_per_graph", _set(["owned_only_outputs"], ["energy"]), "owned_only_outputs[0]", "per_node"),
    (
        "owned_and_reduced",
        lambda d: d.update(owned_only_outputs=["forces"], all_reduce_outputs=["forces"]),
        "owned_only_outputs[0]",
        "keep it in one",
    ),
    ("kinds_string", _set(["output_kinds"], "forces"), "output_kinds", "[name, kind] pairs"),
    (
        "kinds_triple",
        _set(["output_kinds"], [["forces", "per_node", "x"]]),
        "output_kinds[0]",
        '["forces", "per_node"]',
    ),
    ("kinds_value", _set(["output_kinds"], [["forces", "per_atom"]]), "output_kinds[0]", "per_node, per_graph"),
    ("kinds_name", _set(["output_kinds"], [[5, "per_node"]]), "output_kinds[0][0]", "output name string"),
    ("node_energy_number", _set(["node_energy_key"], 1), "node_energy_key", "output name string or null"),
]


@pytest.mark.parametrize(("edit", "path", "advice"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_input_that_cannot_be_imported_is_refused_at_its_path(
    edit: Callable[[Doc], None], path: str, advice: str
) -> None:
    text = changed(edit)
    with pytest.raises(SpecError) as info:
        anchor_spec_from_text(text, file="anchor.json")
    err = info.value
    assert err.path == path, str(err)
    assert advice in err.message
    assert err.file == "anchor.json" and err.line is not None
    last = err.parts[-1] if err.parts else None
    if isinstance(last, str) and present(json.loads(text), err.parts):  # a missing key is placed at its parent
        assert f'"{last}":' in key_line(text, err.line)
    result, errors = convert_anchor_text(text)
    assert result is None and errors[0].path == path


@pytest.mark.parametrize(
    ("text", "path", "advice"),
    [
        (MLIPSpec().to_json(), "format", "already a distcheck spec"),
        ("[1, 2]", "$", "got array"),
        ("null", "$", "got null"),
        ((FIXTURES / "malformed.json").read_text(), "$", "fix the syntax there"),
        ((FIXTURES / "wrong_version.json").read_text(), "version", "imports version 2"),
        (b'{"version": 2, "core": {"policy": {"kind": "h\xffalo"}}}', "$", "save it as UTF-8"),
    ],
    ids=["distcheck_spec", "array", "null", "malformed", "wrong_version", "not_utf8"],
)
def test_a_file_that_is_no_toolkit_spec_is_refused(text: str | bytes, path: str, advice: str) -> None:
    result, errors = convert_anchor_text(text, file="f.json")
    assert result is None and len(errors) == 1
    assert (errors[0].path, errors[0].file) == (path, "f.json")
    assert advice in errors[0].message


def test_every_error_is_listed_at_once() -> None:
    def edit(d: Doc) -> None:
        d["core"]["policy"]["kind"] = 5
        d["system_reductions"] = "yes"
        d["output_kinds"] = [["forces", "per_atom"]]

    result, errors = convert_anchor_text(changed(edit))
    assert result is None
    assert [e.path for e in errors] == ["core.policy.kind", "system_reductions", "output_kinds[0]"]


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_a_file_that_cannot_be_read_is_one_error(tmp_path: Path, make: str) -> None:
    path = tmp_path / "spec.json"
    if make == "directory":
        path.mkdir()
    with pytest.raises(SpecError) as info:
        import_anchor_spec(path)
    assert info.value.path == "$" and info.value.file == str(path)
    assert "check the path" in info.value.message


def test_the_import_record_is_what_the_package_exports() -> None:
    result = import_anchor_spec(fixture("minimal.json"))
    assert isinstance(result, AnchorImport) and result.unmapped == [] and result.exact
