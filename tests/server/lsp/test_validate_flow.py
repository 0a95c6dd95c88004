"""The daemon end to end over stdio: validate, diagnostics, quick fixes, validate again.

Each test starts `python -m distcheck.lsp` on a fresh copy of `examples/` (as `tmp_path/examples`, so
its pyproject's `python_path = [".."]` makes `examples.*` importable) and drives it with a
pytest-lsp client that records every notification in order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from distcheck.lsp.diagnostics_place import full_text
from distcheck.spec import MLIPSpec
from examples import helper_model

from .harness import Session, apply_workspace_edit, copy_examples, get_field, lsp_session, plain, uri

pytestmark = [pytest.mark.asyncio, pytest.mark.slow, pytest.mark.procs]


def _codes(diags: list[types.Diagnostic] | None) -> list[str]:
    return sorted(str(d.code) for d in diags or [])


def _line_of(path: Path, needle: str, start: int = 0) -> int:
    """0-based line of the first line containing `needle` at or after `start`."""
    for i, line in enumerate(path.read_text().splitlines()):
        if i >= start and needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {path}")


async def _actions(s: Session, doc_uri: str, diags: list[types.Diagnostic]) -> list[types.CodeAction]:
    result = await s.client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=doc_uri),
            range=diags[0].range,
            context=types.CodeActionContext(diagnostics=diags, only=[types.CodeActionKind.QuickFix]),
        )
    )
    return [a for a in result or [] if isinstance(a, types.CodeAction)]


async def _validate(s: Session, target: str) -> tuple[dict[str, Any], dict[str, Any], int]:
    mark = s.rec.mark()  # start listening before the command is sent
    started = await s.command("distcheck.validate", target)
    assert started["started"] is True and started["target"] == target
    payload = await s.wait_report(target, mark)
    return started, payload, mark


@pytest.mark.timeout(150)
async def test_passing_target_spec_missing_fix_creates_the_file(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    factory = ws / "pair_potential.py"
    spec_file = ws / "pair_potential.distspec.json"
    async with lsp_session(ws) as s:
        targets = plain(await s.request("distcheck/targets", {}))
        names = [t["name"] for t in targets]
        assert names[:6] == ["pair_potential", "mpnn", "charge_eq", "stress_model", "helper_model", "unaware_model"]
        configured = [t for t in targets if t["source"] == "pyproject"]
        assert configured == targets[: len(configured)], "config targets first, then the files the scan found"
        assert all(t["uri"] == uri(ws / "pyproject.toml") for t in configured)
        assert all(t["source"] == "file" and t["uri"] == t["factoryUri"] for t in targets[len(configured) :])
        factory_uri = s.open(factory, "python")

        started, payload, mark = await _validate(s, "pair_potential")
        report = payload["report"]
        assert report["verdict"] == "passed" and payload["specUri"] == uri(spec_file)
        assert "no GPU" in (payload["notice"] or "")
        assert "\n" not in payload["notice"] and len(payload["notice"]) <= 140  # one line of a notification
        assert "distcheck.device" in payload["notice"]
        # the report is the last message of a run: the notice and progress `end` were recorded before it
        order = [
            (e.method, get_field(e.params, "message") or get_field(get_field(e.params, "value"), "kind"))
            for e in s.rec.events[mark:]
        ]
        report_at = next(i for i, (method, _) in enumerate(order) if method == "distcheck/report")
        assert any(m == "window/showMessage" and "no GPU" in str(t) for m, t in order[:report_at])
        assert ("$/progress", "end") in order[:report_at]

        # progress: begin, reference run, attempt 1/n, ranks started and finished, end — in that order
        messages = s.progress_messages(started["token"], mark)
        assert messages[0] == ("begin", "Distcheck: pair_potential")
        assert messages[-1][0] == "end" and "OK" in str(messages[-1][1])
        texts = [m for _, m in messages]
        order = [texts.index("reference run"), texts.index("attempt 1/9: initial spec")]
        order += [texts.index("rank 0 started"), texts.index("rank 1 started")]
        order += [max(texts.index("rank 0 finished"), texts.index("rank 1 finished"))]
        assert order[:2] == sorted(order[:2]) and order[1] < min(order[2:4]) and max(order[2:4]) < order[4]

        # a passing target without a spec file: one spec-missing on the factory's def line
        diags = s.diagnostics(factory_uri, mark)
        assert _codes(diags) == ["spec-missing"]
        assert diags is not None
        (d,) = diags
        def_line = _line_of(factory, "def model_factory")
        assert d.range.start.line == def_line and d.source == "distcheck"
        line_text = factory.read_text().splitlines()[def_line]
        assert line_text[d.range.start.character : d.range.end.character] == "model_factory"
        assert "pair_potential.distspec.json" in full_text(d) and "quick fix" in full_text(d)

        # the quick fix, resolved lazily, creates the spec file
        (action,) = await _actions(s, factory_uri, diags)
        assert action.edit is None and action.title.startswith("Save the validated spec")
        resolved = await s.client.code_action_resolve_async(action)
        assert resolved.edit is not None and resolved.edit.document_changes is not None
        create = resolved.edit.document_changes[0]
        assert isinstance(create, types.CreateFile) and create.uri == uri(spec_file)
        written = apply_workspace_edit(resolved.edit, {})[uri(spec_file)]
        assert MLIPSpec.from_json(written).to_dict() == report["spec"]

        # the source action "Save validated spec" gives the same file, and distcheck.saveSpec writes it
        result = await s.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=factory_uri),
                range=d.range,
                context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.Source]),
            )
        )
        (source,) = [a for a in result or [] if isinstance(a, types.CodeAction)]
        assert source.kind == types.CodeActionKind.Source and source.title == "Save validated spec (pair_potential)"
        source_edit = (await s.client.code_action_resolve_async(source)).edit
        assert source_edit is not None and apply_workspace_edit(source_edit, {})[uri(spec_file)] == written
        saved = await s.command("distcheck.saveSpec", "pair_potential")
        assert saved == {"saved": uri(spec_file)} and spec_file.read_text() == written

        # validate again: it passes with the saved spec as the prior, and every diagnostic is gone
        _, payload, mark = await _validate(s, "pair_potential")
        assert payload["report"]["verdict"] == "passed"
        assert s.diagnostics(factory_uri, mark) == []
        last = await s.request("distcheck/lastReport", {"target": "pair_potential"})
        assert last is not None
        # saving a spec the file already holds is a no-op, not an "edit not applied" error
        again = await s.command("distcheck.saveSpec", "pair_potential")
        assert again == {"saved": uri(spec_file), "unchanged": True} and spec_file.read_text() == written

        # the daemon never imported torch or the user's code
        info = await s.debug_info()
        assert info["torchLoaded"] is False and info["userModules"] == []
        maps = Path(f"/proc/{info['pid']}/maps")
        if maps.exists():
            assert "libtorch" not in maps.read_text()


def _spaced_spec() -> str:
    """helper_model's own spec (no adapter) as a hand-formatted, 4-space-indented file."""
    return json.dumps(MLIPSpec.from_dict(helper_model.SPEC).to_dict(), indent=4) + "\n"


@pytest.mark.timeout(200)
async def test_failing_target_diagnostics_quick_fix_on_the_open_buffer(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    spec_file = ws / "helper_model.distspec.json"
    original = _spaced_spec()
    spec_file.write_text(original)
    model, readout, nbops = ws / "helper_model.py", ws / "helper_readout.py", ws / "thirdparty" / "nbops.py"
    async with lsp_session(ws) as s:
        spec_uri = s.open(spec_file, "json", version=1)
        _, payload, mark = await _validate(s, "helper_model")
        report = payload["report"]
        # auto-fix found the adapter; the user's spec (attempt 1) still fails
        assert report["verdict"] == "passed" and report["attempts"][0]["passed"] is False

        spec_diags = s.diagnostics(spec_uri, mark) or []
        assert _codes(spec_diags) == ["failing-output"] * 3 + ["spec-fix"]
        failing = {d.data["output"]: d for d in spec_diags if d.code == "failing-output"}
        for name, d in failing.items():
            assert d.range.start.line == _line_of(spec_file, f'"{name}": "per_')
            assert "max abs diff" in full_text(d) and "atol" in full_text(d) and "attempt 1" in d.message
        (fix,) = [d for d in spec_diags if d.code == "spec-fix"]
        assert fix.range.start.line == _line_of(spec_file, '"third_party_helpers"')
        assert "declare_helper_adapter" in fix.message

        # the helper: its definition and every call site in the workspace
        nbops_diags = s.diagnostics(uri(nbops), mark) or []
        assert _codes(nbops_diags) == ["undeclared-helper"]
        assert nbops_diags[0].range.start.line == _line_of(nbops, "def mol_sum")
        calls = [i for i, line in enumerate(model.read_text().splitlines()) if "nbops.mol_sum(" in line]
        model_diags = s.diagnostics(uri(model), mark) or []
        assert sorted(d.range.start.line for d in model_diags if d.code == "undeclared-helper") == calls
        readout_diags = s.diagnostics(uri(readout), mark) or []
        assert _codes(readout_diags) == ["first-divergent-module", "undeclared-helper"]
        module = next(d for d in readout_diags if d.code == "first-divergent-module")
        assert module.range.start.line == _line_of(readout, "class MoleculeEnergyReadout")
        call = next(d for d in readout_diags if d.code == "undeclared-helper")
        assert call.range.start.line == _line_of(readout, "mol_sum(", _line_of(readout, "def forward"))

        # the undeclared-helper fix and the spec-fix both insert the adapter, keeping the formatting
        (helper_action,) = await _actions(s, uri(nbops), nbops_diags)
        helper_edit = (await s.client.code_action_resolve_async(helper_action)).edit
        (action,) = await _actions(s, spec_uri, [fix])
        assert "Apply auto-fix 'declare_helper_adapter'" in action.title
        edit = (await s.client.code_action_resolve_async(action)).edit
        assert edit is not None and helper_edit is not None and edit.document_changes is not None
        (doc_edit,) = edit.document_changes
        assert isinstance(doc_edit, types.TextDocumentEdit)
        assert doc_edit.text_document.uri == spec_uri and doc_edit.text_document.version == 1
        fixed = apply_workspace_edit(edit, {spec_uri: original})[spec_uri]
        assert apply_workspace_edit(helper_edit, {spec_uri: original})[spec_uri] == fixed
        assert json.loads(fixed) == report["spec"]
        assert list(json.loads(fixed)) == list(json.loads(original)), "key order kept"
        block = json.dumps([helper_model.CORRECT_SPEC["distribution"]["third_party_helpers"][0]], indent=4)
        expected = original.replace(
            '"third_party_helpers": []', '"third_party_helpers": ' + block.replace("\n", "\n        ")
        )
        assert fixed == expected, "only the array changed, indented like the rest of the file"

        # apply it and save (the editor saves before validating; unsaved edits: test_validate_on_disk.py)
        s.change(spec_uri, fixed, version=2)
        spec_file.write_text(fixed)
        _, payload, mark = await _validate(s, "helper_model")
        assert payload["report"]["attempts"][0]["passed"] is True
        for doc in (spec_uri, uri(nbops), uri(model), uri(readout)):
            assert s.diagnostics(doc, mark) == [], doc
