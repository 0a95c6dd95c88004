"""Spec documents (`spec-invalid`), pyproject configs (`config-invalid`), settings and file targets (found by
the workspace scan; one that does not parse stays a target with a `model-syntax-error` at its line)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from distcheck.lsp.diagnostics_place import full_text

from .harness import ROOT, Session, copy_examples, lsp_session, plain, uri

pytestmark = [pytest.mark.asyncio, pytest.mark.procs]

BAD_SPEC = """{
  "format": "distcheck-spec",
  "version": 1,
  "distribution": {
    "policy": {"kind": "halo", "scatter_mode": "halo_corection"},
    "\U0001f600\U0001f600": 1
  },
  "output_kinds": {"\U0001f600": "per_node", "energy": "per_graf"}
}
"""


async def _diagnostics_after(s: Session, doc_uri: str, since: int, timeout: float = 10.0) -> list[types.Diagnostic]:
    event = await s.rec.wait_for(
        lambda e: e.method == "textDocument/publishDiagnostics" and e.params.uri == doc_uri,
        since=since,
        timeout=timeout,
    )
    return list(event.params.diagnostics)


def _at(d: types.Diagnostic) -> tuple[int, int, int, int]:
    return (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)


@pytest.mark.timeout(60)
async def test_spec_invalid_at_the_exact_line_and_utf16_column(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    spec = ws / "broken.distspec.json"
    spec.write_text(BAD_SPEC)
    async with lsp_session(ws) as s:
        mark = s.rec.mark()
        doc = s.open(spec, "json")
        diags = await _diagnostics_after(s, doc, mark)
        assert {d.code for d in diags} == {"spec-invalid"} and all(d.source == "distcheck" for d in diags)
        by_line = {d.range.start.line: d for d in diags}
        assert set(by_line) == {4, 5, 7}
        assert "scatter_mode" in by_line[4].message and "halo_correction" in by_line[4].message
        # line 6: the unknown key made of two emoji: UTF-16 columns 4 .. 10 (each emoji is 2 code units)
        assert _at(by_line[5]) == (5, 4, 5, 10)
        # line 8: "energy" comes after an emoji key, so its UTF-16 column is one more than its code-point one
        line = BAD_SPEC.splitlines()[7]
        start = len(line[: line.index('"energy"')].encode("utf-16-le")) // 2
        assert _at(by_line[7]) == (7, start, 7, start + len('"energy"'))
        assert "per_graf" in by_line[7].message

        mark = s.rec.mark()
        s.change(doc, '{\n  "format": "distcheck-spec",\n  "version": 1,,\n}\n', version=2)
        (broken,) = await _diagnostics_after(s, doc, mark)
        assert broken.code == "spec-invalid" and broken.range.start.line == 2 and "invalid JSON" in broken.message

        mark = s.rec.mark()
        s.change(doc, '{"format": "distcheck-spec", "version": 1}\n', version=3)
        assert await _diagnostics_after(s, doc, mark) == []

        # other JSON files are left alone
        other = ws / "data.json"
        other.write_text('{"not": "a spec"}')
        mark = s.rec.mark()
        s.open(other, "json")
        await asyncio.sleep(0.3)
        assert s.diagnostics(uri(other), mark) is None


CONFIG = """[tool.distcheck]
python_path = [".."]

[[tool.distcheck.targets]]
name = "a"
factory = "pair_potential.py:model_factory"

[[tool.distcheck.targets]]
name = "b"
factory = "mpnn.py:model_factory"
world_sise = 2
"""


@pytest.mark.timeout(60)
async def test_bad_config_gives_one_diagnostic_on_the_offending_line(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    pyproject = ws / "pyproject.toml"
    pyproject.write_text(CONFIG)
    settings = {"worldSize": "two", "trace": {"server": "verbose"}}
    async with lsp_session(ws, settings=settings) as s:
        doc = uri(pyproject)
        await s.rec.wait_for(
            lambda e: e.method == "textDocument/publishDiagnostics" and e.params.uri == doc, timeout=10
        )
        (d,) = s.diagnostics(doc) or []
        assert d.code == "config-invalid" and d.range.start.line == 10
        assert "world_sise" in d.message and "What to do" in full_text(d)
        warned = await s.rec.wait_for(
            lambda e: e.method == "window/showMessage" and "distcheck.worldSize" in e.params.message, timeout=10
        )
        assert warned.params.type == types.MessageType.Warning
        listed = plain(await s.request("distcheck/targets", {}))
        assert [t for t in listed if t["source"] == "pyproject"] == [], "a broken config lists none of its targets"
        with pytest.raises(JsonRpcException) as refused:
            await s.command("distcheck.validate", "a")
        assert refused.value.code == -32602 and "config" in refused.value.message

        # fix it in the editor (unsaved): the diagnostic goes, the targets appear
        s.open(pyproject, "toml")
        mark = s.rec.mark()
        s.change(doc, CONFIG.replace("world_sise", "world_size"), version=2)
        await s.rec.wait_for(
            lambda e: (
                e.method == "textDocument/publishDiagnostics" and e.params.uri == doc and not e.params.diagnostics
            ),
            since=mark,
            timeout=10,
        )
        names = [t["name"] for t in plain(await s.request("distcheck/targets", {})) if t["source"] == "pyproject"]
        assert names == ["a", "b"]

        # broken TOML and an out-of-range option are reported on their lines too
        for text, line, words in [
            (CONFIG.replace('name = "b"', 'name = "b'), 8, "invalid TOML"),
            (CONFIG.replace("world_sise = 2", "world_size = 0"), 10, "world_size must be at least 1"),
        ]:
            mark = s.rec.mark()
            s.change(doc, text, version=3)
            (d,) = await _diagnostics_after(s, doc, mark)
            assert d.code == "config-invalid" and d.range.start.line == line and words in d.message, d


TOY = f"""import sys

sys.path.insert(0, {str(ROOT)!r})

from examples.pair_potential import model_factory as _factory
from examples.pair_potential import sample_batch as _sample


def model_factory():
    return _factory()


def sample_batch():
    return _sample()
"""


@pytest.mark.timeout(120)
@pytest.mark.slow
async def test_open_file_without_config_is_a_target(tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    toy = ws / "toy.py"
    toy.write_text(TOY)
    (ws / "helpers.py").write_text("def model_factory():\n    return None\n")
    async with lsp_session(ws) as s:
        # found by the workspace scan before any editor opens it; helpers.py (no sample_batch) is no target
        (target,) = plain(await s.request("distcheck/targets", {}))
        assert target["name"] == "toy.py" and target["source"] == "file"
        doc = s.open(toy, "python")
        s.open(ws / "helpers.py", "python")
        (target,) = plain(await s.request("distcheck/targets", {}))
        assert target["name"] == "toy.py" and target["source"] == "file" and target["line"] == 8
        assert target["specUri"] == uri(ws / "toy.distspec.json")
        mark = s.rec.mark()
        started = await s.command("distcheck.validate", doc)
        assert started["target"] == "toy.py"
        payload = await s.wait_report("toy.py", mark)
        assert payload["report"]["verdict"] == "passed"
        (d,) = s.diagnostics(doc, mark) or []
        assert d.code == "spec-missing" and d.range.start.line == 8
        # the runner imports the user's code afresh on every validation: a broken sample shows at its line
        toy.write_text(TOY.replace("    return _sample()", "    raise ValueError('no sample today')"))
        mark = s.rec.mark()
        await s.command("distcheck.validate", "toy.py")
        event = await s.rec.wait_for(
            lambda e: e.method == "textDocument/publishDiagnostics" and e.params.uri == doc and e.params.diagnostics,
            since=mark,
            timeout=60,
        )
        (error,) = event.params.diagnostics
        assert error.code == "worker-error" and error.range.start.line == 13
        assert "no sample today" in full_text(error) and "What to do" in full_text(error)
        shown = await s.rec.wait_for(
            lambda e: e.method == "window/showMessage" and "could not validate toy.py" in e.params.message,
            since=mark,
            timeout=10,
        )
        assert shown.params.type == types.MessageType.Error
        with pytest.raises(JsonRpcException) as refused:
            await s.command("distcheck.validate", uri(ws / "helpers.py"))
        assert refused.value.code == -32602 and "sample_batch" in refused.value.message
        t0 = time.monotonic()
        info = await s.debug_info()
        assert time.monotonic() - t0 < 1.0 and info["torchLoaded"] is False and info["userModules"] == []


@pytest.mark.timeout(60)
async def test_a_model_file_that_does_not_parse_stays_a_target_with_a_diagnostic_at_its_line(tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    toy = ws / "toy.py"
    broken = TOY.replace("def sample_batch():\n    return _sample()", "def sample_batch(:\n    return _sample()")
    toy.write_text(broken)
    error_line = broken.splitlines().index("def sample_batch(:")
    async with lsp_session(ws) as s:
        mark = s.rec.mark()
        (target,) = plain(await s.request("distcheck/targets", {}))
        assert target["name"] == "toy.py" and target["line"] == 8, "the file keeps its name and its factory line"
        event = await s.rec.wait_for(
            lambda e: (
                e.method == "textDocument/publishDiagnostics" and e.params.uri == uri(toy) and e.params.diagnostics
            ),
            since=mark,
            timeout=10,
        )
        (d,) = event.params.diagnostics
        assert d.code == "model-syntax-error" and d.range.start.line == error_line
        assert "SyntaxError" in d.message and "model_factory" in full_text(d)
        # fixed on disk: the diagnostic goes at the next look at the targets, the target stays
        toy.write_text(TOY)
        mark = s.rec.mark()
        (target,) = plain(await s.request("distcheck/targets", {}))
        assert target["name"] == "toy.py"
        cleared = await s.rec.wait_for(
            lambda e: e.method == "textDocument/publishDiagnostics" and e.params.uri == uri(toy), since=mark, timeout=10
        )
        assert list(cleared.params.diagnostics) == []
