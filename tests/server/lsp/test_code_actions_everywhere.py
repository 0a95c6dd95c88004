"""Fixes where the error is: a failed validation's spec fixes are offered on every diagnostic they
clear (the failing outputs in the spec JSON, the first divergent module's class line), a
`source.fixAll` applies all of them in one versioned edit, and the panel's server requests
(`distcheck/helperFix`, `distcheck/locateModule`, typed `distcheck/lastReport`) answer for found /
not found / bad params.

One real validation per session of `examples/helper_model` (its spec lacks the adapter of the
watched helper `examples.thirdparty.nbops.mol_sum`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from distcheck.spec import MLIPSpec
from examples import helper_model

from .harness import Session, apply_workspace_edit, copy_examples, lsp_session, uri

pytestmark = [pytest.mark.asyncio, pytest.mark.slow, pytest.mark.procs]

HELPER = "examples.thirdparty.nbops.mol_sum"


async def _validate(s: Session, target: str, *extra: Any) -> tuple[dict[str, Any], int]:
    mark = s.rec.mark()
    started = await s.command("distcheck.validate", target, *extra)
    assert started["started"] is True
    return await s.wait_report(target, mark), mark


async def _actions(
    s: Session, doc_uri: str, diags: list[types.Diagnostic], only: list[str] | None = None
) -> list[types.CodeAction]:
    where = diags[0].range if diags else types.Range(start=types.Position(0, 0), end=types.Position(0, 0))
    result = await s.client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=doc_uri),
            range=where,
            context=types.CodeActionContext(diagnostics=diags, only=only or [types.CodeActionKind.QuickFix]),
        )
    )
    return [a for a in result or [] if isinstance(a, types.CodeAction)]


async def _resolved_edit(s: Session, action: types.CodeAction) -> types.WorkspaceEdit:
    edit = (await s.client.code_action_resolve_async(action)).edit
    assert edit is not None
    return edit


async def _refused(s: Session, method: str, params: Any) -> str:
    with pytest.raises(JsonRpcException) as raised:
        await s.request(method, params)
    assert raised.value.code == -32602, raised.value
    return str(raised.value)


@pytest.mark.timeout(240)
async def test_failing_output_in_the_spec_offers_the_adapter_fix_and_it_validates(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    spec_file = ws / "helper_model.distspec.json"
    original = MLIPSpec.from_dict(helper_model.SPEC).to_json()
    spec_file.write_text(original)
    readout = ws / "helper_readout.py"
    async with lsp_session(ws) as s:
        spec_uri = s.open(spec_file, "json", version=1)
        # without auto-fix no attempt passes: the failing outputs carry no spec change of their own
        payload, mark = await _validate(s, "helper_model", {"autoFix": False})
        assert payload["report"]["attempts"][0]["passed"] is False and len(payload["report"]["attempts"]) == 1
        failing = [d for d in s.diagnostics(spec_uri, mark) or [] if d.code == "failing-output"]
        assert failing and all("edits" not in (d.data or {}) for d in failing)

        # every failing output in the spec JSON, and the divergent module's class line, offer the adapter
        for d in failing:
            (action,) = await _actions(s, spec_uri, [d])
            assert action.title == f"Declare {HELPER} as a reduction adapter in {spec_file.name}"
        module = [d for d in s.diagnostics(uri(readout), mark) or [] if d.code == "first-divergent-module"]
        assert module and [a.title for a in await _actions(s, uri(readout), module)] == [action.title]

        # the panel's request answers with the same fix, resolved; unknown helpers and targets do not
        fix = await s.request("distcheck/helperFix", {"qualname": HELPER, "target": "helper_model"})
        assert fix is not None and fix.title == action.title
        assert await s.request("distcheck/helperFix", {"qualname": "examples.thirdparty.nbops.nope"}) is None
        assert "validate it first" in await _refused(s, "distcheck/helperFix", {"qualname": HELPER, "target": "mpnn"})
        assert "'qualname' is missing" in await _refused(s, "distcheck/helperFix", {"target": "helper_model"})
        assert "must be a non-empty string" in await _refused(s, "distcheck/helperFix", {"qualname": 3})

        # the fix edits the open buffer (versioned), not the disk; the buffer then validates
        edit = await _resolved_edit(s, action)
        (doc_edit,) = edit.document_changes or []
        assert isinstance(doc_edit, types.TextDocumentEdit) and doc_edit.text_document.version == 1
        fixed = apply_workspace_edit(edit, {spec_uri: original})[spec_uri]
        helpers = json.loads(fixed)["distribution"]["third_party_helpers"]
        assert [f"{h['module_path']}.{h['attr_name']}" for h in helpers] == [HELPER]
        s.change(spec_uri, fixed, version=2)
        assert spec_file.read_text() == original
        spec_file.write_text(fixed)  # saved, as a validation reads the spec on disk
        payload, mark = await _validate(s, "helper_model", {"autoFix": False})
        assert payload["report"]["attempts"][0]["passed"] is True
        assert s.diagnostics(spec_uri, mark) == []
        # nothing left to fix: no fix-all
        assert await _actions(s, spec_uri, [], only=[types.CodeActionKind.SourceFixAll]) == []


@pytest.mark.timeout(240)
async def test_fix_all_applies_every_spec_fix_in_one_edit(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    spec_file = ws / "helper_model.distspec.json"
    original = MLIPSpec.from_dict(helper_model.SPEC).to_json()
    spec_file.write_text(original)
    async with lsp_session(ws) as s:
        spec_uri = s.open(spec_file, "json", version=3)
        payload, _ = await _validate(s, "helper_model")
        report = payload["report"]
        assert report["verdict"] == "passed" and report["attempts"][0]["passed"] is False

        # offered under `source.fixAll` (and `source`), not among the quick fixes
        (action,) = await _actions(s, spec_uri, [], only=[types.CodeActionKind.SourceFixAll])
        assert action.kind == types.CodeActionKind.SourceFixAll and "helper_model" in action.title
        sources = await _actions(s, spec_uri, [], only=[types.CodeActionKind.Source])
        assert action.title in [a.title for a in sources]
        assert all(a.kind != types.CodeActionKind.SourceFixAll for a in await _actions(s, spec_uri, []))
        # also from the model file, whose diagnostics the same fixes clear
        assert [a.title for a in await _actions(s, uri(ws / "helper_model.py"), [], only=["source.fixAll"])] == [
            action.title
        ]

        # the auto-fix's changes and the helper adapter (the same entry) in one versioned edit
        edit = await _resolved_edit(s, action)
        (doc_edit,) = edit.document_changes or []
        assert isinstance(doc_edit, types.TextDocumentEdit) and doc_edit.text_document.version == 3
        fixed = apply_workspace_edit(edit, {spec_uri: original})[spec_uri]
        assert json.loads(fixed) == report["spec"]
        s.change(spec_uri, fixed, version=4)
        spec_file.write_text(fixed)  # saved, as a validation reads the spec on disk
        payload, mark = await _validate(s, "helper_model")
        assert payload["report"]["attempts"][0]["passed"] is True
        assert s.diagnostics(spec_uri, mark) == []


@pytest.mark.timeout(60)
async def test_requests_take_typed_params(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    readout = ws / "helper_readout.py"
    async with lsp_session(ws) as s:
        # a module class by its dotted name: the file its module resolves to, at the `class` name
        found = await s.request("distcheck/locateModule", {"cls": "examples.helper_readout.MoleculeEnergyReadout"})
        assert found is not None and found.uri == uri(readout)
        line = readout.read_text().splitlines()[found.range.start.line]
        assert line[found.range.start.character : found.range.end.character] == "MoleculeEnergyReadout"
        assert line.lstrip().startswith("class MoleculeEnergyReadout")
        # a name the module path does not resolve: found by its class name in the workspace
        again = await s.request("distcheck/locateModule", {"cls": "elsewhere.MoleculeEnergyReadout", "module": "r"})
        assert again is not None and again.uri == found.uri and again.range.start.line == found.range.start.line
        for missing in ("examples.helper_readout.NoSuchClass", "torch.nn.Linear"):
            assert await s.request("distcheck/locateModule", {"cls": missing}) is None

        bad = [
            ("distcheck/locateModule", {}, "'cls' is missing"),
            ("distcheck/locateModule", {"cls": 5}, "must be a non-empty string"),
            ("distcheck/locateModule", ["examples.X"], "pass an object"),
            ("distcheck/locateModule", {"cls": "a.B", "klass": 1}, "is not one of its keys"),
            ("distcheck/lastReport", {}, "'target' is missing"),
            ("distcheck/lastReport", {"target": 7}, "must be a non-empty string"),
        ]
        for method, params, words in bad:
            assert words in await _refused(s, method, params), (method, params)
        assert await s.request("distcheck/lastReport", {"target": "helper_model"}) is None
