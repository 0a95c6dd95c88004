"""Quick fixes on spec text: formatting and key order kept, minimal versioned edits, CreateFile."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from distcheck.lsp import actions
from distcheck.lsp.diagnostics import spec_changes
from distcheck.spec import MLIPSpec, validate_json
from distcheck.spec import edit as jsontext
from examples import charge_eq, helper_model, mpnn, pair_potential, stress_model, unaware_model

from .harness import apply_text_edits

REMEDY = {
    "kind": "reduction",
    "module_path": "examples.thirdparty.nbops",
    "attr_name": "mol_sum",
    "atom_arg": 0,
    "atom_dim": 0,
}
SPECS = {
    "pair_potential": pair_potential.SPEC,
    "mpnn": mpnn.SPEC,
    "charge_eq": charge_eq.SPEC,
    "stress_model": stress_model.SPEC,
    "helper_model": helper_model.SPEC,
    "unaware_model": unaware_model.SPEC,
}


def _formats(spec: dict[str, Any]) -> dict[str, str]:
    canonical = MLIPSpec.from_dict(spec).to_json()
    return {
        "to_json": canonical,
        "four": json.dumps(spec, indent=4) + "\n",
        "tabs": json.dumps(spec, indent="\t"),
        "compact": json.dumps(spec),
        "crlf": canonical.replace("\n", "\r\n"),
    }


def _key_order(value: Any) -> Any:
    if isinstance(value, dict):
        return [(k, _key_order(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_key_order(v) for v in value]
    return value


def _apply(current: str | None, edit: types.WorkspaceEdit, doc: str = "file:///w/x.distspec.json") -> str:
    text = current or ""
    for change in edit.document_changes or []:
        if isinstance(change, types.TextDocumentEdit):
            text = apply_text_edits(text, list(change.edits))
    return text


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("style", ["to_json", "four", "tabs", "compact", "crlf"])
def test_declaring_a_helper_keeps_formatting_and_key_order(name: str, style: str) -> None:
    spec = MLIPSpec.from_dict(SPECS[name]).to_dict()
    text = _formats(spec)[style]
    new = actions.new_spec_text("undeclared-helper", {"remedy": REMEDY}, text)
    expected = json.loads(text)
    expected["distribution"]["third_party_helpers"] = [REMEDY]
    assert json.loads(new) == expected
    assert _key_order(json.loads(new)) == _key_order(expected)
    assert validate_json(new) == []
    # only lines around the array changed; everything before and after it is byte-identical
    head = text[: text.index('"third_party_helpers"')]
    tail = text[text.index("[]", text.index('"third_party_helpers"')) + 2 :]
    assert new.startswith(head) and new.endswith(tail)
    if style == "crlf":
        assert "\r\n" in new and "\n" not in new.replace("\r\n", "")
    if style == "tabs":
        assert '\n\t\t\t{\n\t\t\t\t"kind": "reduction",' in new
    if style == "compact":
        assert "\n" not in new
    # declaring it again replaces the entry instead of adding a second one
    again = actions.new_spec_text("undeclared-helper", {"remedy": dict(REMEDY, atom_dim=0)}, new)
    assert json.loads(again) == expected


def test_spec_fix_edits_apply_every_change_of_the_auto_fix() -> None:
    before = MLIPSpec.from_dict(unaware_model.WRONG_SPEC).to_dict()
    after = json.loads(json.dumps(before))
    after["distribution"]["policy"]["scatter_mode"] = "local"
    after["distribution"]["policy"]["halo_width"] = 13.5
    after["all_reduce_outputs"] = ["stress"]
    after["output_kinds"]["stress"] = "per_graph"
    changes = spec_changes(before, after)
    ops = sorted((c["op"], ".".join(c["path"])) for c in changes)
    assert ops == [
        ("append", "all_reduce_outputs"),
        ("set", "distribution.policy.halo_width"),
        ("set", "distribution.policy.scatter_mode"),
        ("set", "output_kinds.stress"),
    ]
    text = json.dumps(before, indent=3)
    new = actions.new_spec_text("spec-fix", {"edits": changes}, text)
    assert json.loads(new) == after
    assert '   "all_reduce_outputs": [\n      "stress"\n   ],' in new
    # and back again: removing an item and restoring values
    back = actions.new_spec_text("spec-fix", {"edits": spec_changes(after, before)}, new)
    assert json.loads(back) == before


def test_save_spec_on_an_existing_file_changes_only_what_differs() -> None:
    old = MLIPSpec.from_dict(helper_model.SPEC).to_dict()
    new_spec = MLIPSpec.from_dict(helper_model.CORRECT_SPEC).to_dict()
    text = json.dumps(old, indent=2).replace('"version": 1,', '"version": 1,   ')  # odd spacing survives
    new = actions.new_spec_text("save-spec", {"spec": new_spec}, text)
    assert json.loads(new) == new_spec and '"version": 1,   ' in new
    edits = jsontext.minimal_edits(text, new)
    assert len(edits) == 1 and all(e.new_text.count("\n") <= 8 for e in edits)


def test_workspace_edit_is_versioned_and_minimal_with_utf16_positions() -> None:
    spec = MLIPSpec.from_dict(mpnn.SPEC).to_dict()
    spec["output_kinds"] = {"\U0001f600nergy": "per_graph", "forces": "per_node"}
    text = json.dumps(spec, indent=2)
    changes = [{"op": "set", "path": ["output_kinds", "forces"], "value": "per_graph"}]
    new = actions.new_spec_text("spec-fix", {"edits": changes}, text)
    edit = actions.workspace_edit("file:///w/mpnn.distspec.json", text, 7, new, check_spec=False)
    assert edit.document_changes is not None
    (doc_edit,) = edit.document_changes
    assert isinstance(doc_edit, types.TextDocumentEdit)
    assert doc_edit.text_document.version == 7
    (one,) = doc_edit.edits
    assert one.range.start.line == one.range.end.line and len(one.new_text) < 20
    assert apply_text_edits(text, [one]) == new
    # without documentChanges support: plain `changes`
    plain = actions.workspace_edit("file:///w/a.json", text, 7, new, document_changes=False, check_spec=False)
    assert plain.changes is not None and apply_text_edits(text, list(plain.changes["file:///w/a.json"])) == new


def test_missing_spec_file_is_created() -> None:
    spec = MLIPSpec.from_dict(pair_potential.SPEC).to_dict()
    text = actions.new_spec_text("spec-missing", {"spec": spec}, None)
    assert text == MLIPSpec.from_dict(spec).to_json()
    edit = actions.workspace_edit("file:///w/pair.distspec.json", None, None, text)
    assert edit.document_changes is not None
    create, fill = edit.document_changes
    assert isinstance(create, types.CreateFile) and create.uri == "file:///w/pair.distspec.json"
    assert create.options is not None and create.options.overwrite is False
    assert isinstance(fill, types.TextDocumentEdit) and fill.text_document.version is None
    assert _apply(None, edit) == text
    # a helper fix without a file: the attempt's spec plus the adapter
    created = actions.new_spec_text("undeclared-helper", {"remedy": REMEDY, "baseSpec": helper_model.SPEC}, None)
    assert json.loads(created)["distribution"]["third_party_helpers"] == [REMEDY]
    # as in an existing file, the adapter replaces an entry for the same function
    older = dict(helper_model.SPEC, distribution={"third_party_helpers": [dict(REMEDY, atom_dim=1)]})
    replaced = actions.new_spec_text("undeclared-helper", {"remedy": REMEDY, "baseSpec": older}, None)
    assert json.loads(replaced)["distribution"]["third_party_helpers"] == [REMEDY]
    # a spec-fix without a file writes the whole working spec
    full = actions.new_spec_text("spec-fix", {"edits": [{"op": "set", "path": ["x"], "value": 1}], "spec": spec}, None)
    assert json.loads(full) == spec


def test_fixes_refuse_what_they_cannot_do() -> None:
    with pytest.raises(actions.ActionError, match="fix its JSON"):
        actions.new_spec_text("undeclared-helper", {"remedy": REMEDY}, '{"format": ')
    with pytest.raises(actions.ActionError, match="no ready adapter"):
        actions.new_spec_text("undeclared-helper", {"remedy": None}, "{}")
    with pytest.raises(actions.ActionError, match="invalid"):
        valid = '{"format": "distcheck-spec", "version": 1}'
        actions.workspace_edit("file:///x.json", valid, 1, '{"format": "distcheck-spec", "version": 1, "bad": 1}')
    assert actions.action_title("undeclared-helper", {"remedy": None}, "x.json", True) is None
    title = actions.action_title("spec-fix", {"edits": [{"op": "set", "path": ["a"], "value": 1}] * 2}, "x", True)
    assert title == "Apply auto-fix 'auto-fix': set a to 1 (and 1 more)"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=120, deadline=None)
@given(
    base=st.dictionaries(st.text(min_size=1, max_size=4), json_values, max_size=4),
    key=st.text(min_size=1, max_size=4),
    value=json_values,
    indent=st.sampled_from([None, 1, 2, 4, "\t"]),
)
def test_set_value_and_minimal_edits_round_trip(base: dict[str, Any], key: str, value: Any, indent: Any) -> None:
    text = json.dumps(base, indent=indent, ensure_ascii=False)
    new = jsontext.set_value(text, ["outer", key], value)
    expected = dict(base)
    outer = expected.get("outer")
    if isinstance(outer, dict):
        expected["outer"] = {**outer, key: value}
    elif "outer" not in expected:
        expected["outer"] = {key: value}
    else:
        with pytest.raises(jsontext.JsonEditError):
            jsontext.set_value(text, ["outer", key, "deeper"], value)
        return
    assert json.loads(new) == expected
    assert jsontext.apply_edits(text, jsontext.minimal_edits(text, new)) == new
    appended = jsontext.append_item(new, ["list"], value) if not isinstance(expected.get("list"), (dict, str)) else new
    assert jsontext.apply_edits(new, jsontext.minimal_edits(new, appended)) == appended
