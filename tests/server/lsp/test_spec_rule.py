"""The daemon's spec files are the one spec rule's (`distcheck.jobs.spec_source`): the path `distcheck/targets`
lists, and where quick fixes and fix-all write, is the file `distcheck validate` reads. The bug this
guards: the editor's fix-all wrote `<model>.distspec.json`, the editor then passed, and the CLI never read
that file (with --no-auto-fix it failed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from distcheck import cli
from distcheck.cli_target import resolve_target
from distcheck.jobs.spec_source import spec_source
from distcheck.report import TraceReport
from distcheck.spec import MLIPSpec
from examples import helper_model

from .harness import ROOT, Session, apply_workspace_edit, copy_examples, lsp_session, plain, uri

pytestmark = [pytest.mark.asyncio, pytest.mark.procs]

MODULE_TARGET = """
[[tool.distcheck.targets]]
name = "by_module"
factory = "examples.mpnn:model_factory"

[[tool.distcheck.targets]]
name = "configured"
factory = "mpnn.py:model_factory"
spec = "specs/configured.distspec.json"
"""


def _cli_source(ws: Path, name: str) -> tuple[str, str | None]:
    """(rule, path) of the spec the CLI reads for target `name` of the workspace's pyproject."""
    args = cli.build_parser().parse_args(["validate", name, "--config", str(ws / "pyproject.toml")])
    source = spec_source(resolve_target(args))
    return source.rule, source.path


async def _targets(s: Session) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in plain(await s.request("distcheck/targets", {}))}


@pytest.mark.timeout(60)
async def test_the_daemons_spec_paths_are_the_clis(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    with (ws / "pyproject.toml").open("a") as fh:
        fh.write(MODULE_TARGET)
    async with lsp_session(ws) as s:
        before = await _targets(s)
        for name in ("pair_potential", "helper_model", "by_module", "configured"):
            t = before[name]
            assert (t["specRule"], t["spec"]) == _cli_source(ws, name), name
            assert t["specUri"] == uri(t["spec"])
        assert before["helper_model"]["spec"] == str(ws / "helper_model.distspec.json")
        assert before["by_module"]["spec"] == str(ws / "mpnn.distspec.json"), "beside the module's file"
        assert before["configured"]["spec"] == str(ws / "specs" / "configured.distspec.json")
        assert before["configured"]["specConfigured"] is True and before["helper_model"]["specConfigured"] is False

        # a file beside the model is read by both; a configured spec still wins over it
        MLIPSpec.from_dict(helper_model.CORRECT_SPEC).save(ws / "mpnn.distspec.json")
        after = await _targets(s)
        assert (after["by_module"]["specRule"], after["configured"]["specRule"]) == ("beside-model", "wrapper")
        for name in ("by_module", "configured", "mpnn"):
            assert (after[name]["specRule"], after[name]["spec"]) == _cli_source(ws, name), name


async def _fix_all(s: Session, doc_uri: str) -> types.WorkspaceEdit:
    result = await s.client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=doc_uri),
            range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)),
            context=types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll]),
        )
    )
    (action,) = [a for a in result or [] if isinstance(a, types.CodeAction)]
    edit = (await s.client.code_action_resolve_async(action)).edit
    assert edit is not None
    return edit


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_the_editors_fix_all_is_what_the_cli_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = copy_examples(tmp_path)
    factory = ws / "helper_model.py"
    async with lsp_session(ws) as s:
        mark = s.rec.mark()
        started = await s.command("distcheck.validate", "helper_model")
        assert started["started"] is True
        payload = await s.wait_report("helper_model", mark)
        report = payload["report"]  # as JSON (the recorder's payloads do not round-trip rank-keyed maps)
        # no spec file: the wrapper's own spec failed, the auto-fixed one passed; the report says so
        assert report["state"] == "passed_after_fix"
        rule, path = _cli_source(ws, "helper_model")
        assert path == str(factory.with_suffix(".distspec.json")) and rule == "wrapper"
        assert (report["target"]["spec_rule"], report["target"]["spec_path"]) == (rule, path)
        assert f"save the fixed spec to {path}" in report["fix_failure"]
        assert path is not None

        # fix-all writes the file the rule reads
        edit = await _fix_all(s, uri(factory))
        written = apply_workspace_edit(edit, {})
        assert list(written) == [uri(path)]
        Path(path).write_text(written[uri(path)])
        assert json.loads(Path(path).read_text()) == payload["report"]["spec"]

    # the CLI reads it: a plain pass with auto-fix off, naming the file and the rule
    monkeypatch.chdir(tmp_path)
    report_path = tmp_path / "cli.json"
    env_path = [str(ROOT / "server"), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(env_path))
    args = ["validate", "helper_model", "--config", str(ws / "pyproject.toml"), "--no-auto-fix"]
    code = cli.main([*args, "--json", str(report_path)])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_PASSED, out + err
    assert f"  spec: {path} (beside-model)\n" in out
    plain_pass = TraceReport.from_json(report_path.read_text())
    assert plain_pass.state == "passed" and len(plain_pass.attempts) == 1
    assert plain_pass.target is not None
    assert (plain_pass.target.spec_rule, plain_pass.target.spec_path) == ("beside-model", path)
