"""The `undeclared-helper` quick fix for a helper that is a method of a class: the report's ready adapter
is of kind `method`, the fix's title says so, and its edit applied to a spec file — in any formatting,
beside other helpers, over an entry for the same method of another kind, or creating the file — gives
that spec and nothing else. Through the daemon: the diagnostic's code action and `distcheck/helperFix`
make the same edit on the open buffer, and the fixed spec validates.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter

from distcheck import TraceReport, validate_on_cpu
from distcheck.lsp import actions
from distcheck.spec import HelperAdapter, MLIPSpec, validate_json

from .harness import ROOT, apply_workspace_edit, copy_examples, lsp_session, plain, uri

pytestmark = pytest.mark.procs

MODELS = ROOT / "tests" / "server" / "validate" / "method_kind_models.py"
MODULE = "examples.thirdparty.methods"
ATTR = "Calculator.energy"
QUALNAME = f"{MODULE}.{ATTR}"
REMEDY = {"kind": "method", "module_path": MODULE, "attr_name": ATTR, "atom_arg": 0, "atom_dim": 0}
OTHER = {"kind": "reduction", "module_path": "examples.thirdparty.nbops", "attr_name": "mol_count", "atom_arg": 0}


def _models() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("method_kind_models_for_lsp", MODELS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def report() -> TraceReport:
    models = _models()
    return validate_on_cpu(
        f"{MODELS}:factory_instance",
        models.sample_batch(),
        spec=copy.deepcopy(models.SPEC),
        world_size=2,
        auto_fix=False,
        timeout_sec=60.0,
        watched_helper_packages=[MODULE],
    )


def _base() -> dict[str, Any]:
    return MLIPSpec.from_dict(_models().SPEC).to_dict()


def _expected(base: dict[str, Any], *helpers: dict[str, Any]) -> MLIPSpec:
    spec = MLIPSpec.from_dict(base)
    spec.distribution.third_party_helpers = [HelperAdapter.from_dict(h) for h in helpers]
    return spec


def test_the_reports_fix_is_a_method_adapter_and_says_so(report: TraceReport) -> None:
    (fix,) = actions.helper_fixes(report, "/w/method.distspec.json")
    assert fix["qualname"] == QUALNAME and fix["remedy"] == REMEDY
    assert actions.action_title("undeclared-helper", fix, "method.distspec.json", True) == (
        f"Declare {QUALNAME} as a method adapter in method.distspec.json"
    )
    assert [f["code"] for f in actions.report_fixes(report, "/w/method.distspec.json")] == ["undeclared-helper"]


def _shapes() -> dict[str, tuple[str | None, tuple[dict[str, Any], ...]]]:
    """Spec file text before the fix (None: no file) → the helpers the fixed spec must hold."""
    base = _base()
    other = copy.deepcopy(base)
    other["distribution"]["third_party_helpers"] = [OTHER]
    stale = copy.deepcopy(base)  # the same method declared before as another kind, with a wrong atom_arg
    stale["distribution"]["third_party_helpers"] = [
        {"kind": "reduction", "module_path": MODULE, "attr_name": ATTR, "atom_arg": 2, "atom_dim": 0}
    ]
    return {
        "canonical": (MLIPSpec.from_dict(base).to_json(), (REMEDY,)),
        "four spaces": (json.dumps(base, indent=4) + "\n", (REMEDY,)),
        "compact, crlf": (json.dumps(base).replace("{", "{\r\n"), (REMEDY,)),
        "beside another helper": (json.dumps(other, indent=2), (OTHER, REMEDY)),
        "over the same method of another kind": (json.dumps(stale, indent=2), (REMEDY,)),
        "no file yet": (None, (REMEDY,)),
    }


@pytest.mark.parametrize("shape", list(_shapes()))
def test_the_fix_applied_to_a_spec_file_gives_that_spec(report: TraceReport, shape: str, tmp_path: Path) -> None:
    text, helpers = _shapes()[shape]
    path = tmp_path / "method.distspec.json"
    (fix,) = actions.helper_fixes(report, str(path))
    new = actions.new_spec_text("undeclared-helper", fix, text)
    assert validate_json(new) == []
    # the versioned workspace edit the daemon sends, applied to the file's text, gives the same text
    doc = uri(path)
    edit = actions.workspace_edit(doc, text, 3 if text is not None else None, new)
    applied = apply_workspace_edit(edit, {doc: text or ""})[doc]
    assert applied == new
    path.write_text(applied, newline="")
    loaded = MLIPSpec.load(path)
    expected = _expected(json.loads(text) if text is not None else report.attempts[0].spec.to_dict(), *helpers)
    assert loaded == expected
    if text is not None:  # only the helpers changed
        before, after = json.loads(text), json.loads(applied)
        before["distribution"].pop("third_party_helpers", None)
        after["distribution"].pop("third_party_helpers")
        assert before == after
    # applying it again changes nothing
    assert actions.new_spec_text("undeclared-helper", fix, applied) == applied


TARGET = """

[[tool.distcheck.targets]]
name = "method_model"
factory = "method_model.py:factory_instance"
sample = "method_model.py:sample_batch"
watched_helper_packages = ["examples.thirdparty.methods"]
"""


@pytest.mark.asyncio
@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_the_daemon_offers_the_method_fix_where_the_method_is_and_the_fixed_spec_validates(
    tmp_path: Path,
) -> None:
    ws = copy_examples(tmp_path)
    shutil.copy(MODELS, ws / "method_model.py")
    with open(ws / "pyproject.toml", "a", encoding="utf-8") as config:
        config.write(TARGET)
    spec_file = ws / "method_model.distspec.json"
    original = MLIPSpec.from_dict(_base()).to_json()
    spec_file.write_text(original)
    async with lsp_session(ws) as s:
        spec_uri = s.open(spec_file, "json", version=1)
        mark = s.rec.mark()
        started = await s.command("distcheck.validate", "method_model", {"autoFix": False})
        assert started["started"] is True
        payload = await s.wait_report("method_model", mark)
        assert payload["report"]["attempts"][0]["passed"] is False
        source = uri(ws / "thirdparty" / "methods.py")
        flagged = [d for d in s.diagnostics(source, mark) or [] if d.code == "undeclared-helper"]
        assert flagged, "the undeclared method is marked where it is defined"
        assert QUALNAME in flagged[0].message
        text = (ws / "thirdparty" / "methods.py").read_text().splitlines()[flagged[0].range.start.line]
        assert "def energy" in text

        result = await s.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=source),
                range=flagged[0].range,
                context=types.CodeActionContext(diagnostics=flagged[:1], only=[types.CodeActionKind.QuickFix]),
            )
        )
        (action,) = [a for a in result or [] if isinstance(a, types.CodeAction)]
        assert action.title == f"Declare {QUALNAME} as a method adapter in {spec_file.name}"
        resolved = await s.client.code_action_resolve_async(action)
        assert resolved.edit is not None
        fixed = apply_workspace_edit(resolved.edit, {spec_uri: original})[spec_uri]
        assert MLIPSpec.from_json(fixed) == _expected(_base(), REMEDY)

        answer = await s.request("distcheck/helperFix", {"qualname": QUALNAME, "target": "method_model"})
        panel = default_converter().structure(plain(answer), types.CodeAction)
        assert panel.title == action.title and panel.edit is not None
        assert apply_workspace_edit(panel.edit, {spec_uri: original})[spec_uri] == fixed

        spec_file.write_text(fixed)
        s.change(spec_uri, fixed, version=2)
        mark = s.rec.mark()
        await s.command("distcheck.validate", "method_model", {"autoFix": False})
        payload = await s.wait_report("method_model", mark)
        assert payload["report"]["attempts"][0]["passed"] is True, payload["report"]["next_action"]
