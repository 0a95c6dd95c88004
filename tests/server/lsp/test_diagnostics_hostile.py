"""The hostile corpus of `tests/server/test_hostile_text.py` through the LSP diagnostics (issue 33.2):
a report's, a runner error's, a spec document's and a config's diagnostics, serialised as the daemon
sends them (UTF-8 JSON) and parsed back, hold no character that acts and still show what was there,
escaped (`safe_text.for_editor`, applied once, in `make_diagnostic`); so do the daemon's log, notices
and progress messages.

The extension's panel applies the same rule in TypeScript (`extension/src/safeText.ts`);
`tests/extension/corpus/safe_text.json`, written from this corpus by this module (run it:
`.venv/bin/python tests/server/lsp/test_diagnostics_hostile.py`), is what Python shows for each input,
and `tests/extension/safeText.test.ts` checks the TypeScript rule shows the same."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter

from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import (
    PlaceContext,
    config_diagnostic,
    report_diagnostics,
    runner_error_diagnostics,
    spec_invalid_diagnostics,
)
from distcheck.report import TraceReport
from distcheck.safe_text import MAX_LINE, UNSAFE, for_editor

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "extension" / "fixtures"
CORPUS_FILE = ROOT / "tests" / "extension" / "corpus" / "safe_text.json"
FACTORY = ROOT / "examples" / "helper_model.py"


def _hostile() -> dict[str, str]:
    """`HOSTILE` of tests/server/test_hostile_text.py: one corpus for every surface."""
    spec = importlib.util.spec_from_file_location("hostile_text", ROOT / "tests" / "server" / "test_hostile_text.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.HOSTILE)


HOSTILE = _hostile()
EXTRA = {"astral_and_layout": "énergie 😀\tforces\nline two", "many_lines": ("x" * (MAX_LINE + 5) + "\n") * 3}
"""Inputs beside the corpus that pin what stays: a character beyond the BMP, a tab and newlines, cuts per line."""

_ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _context(spec_text: str | None = None) -> PlaceContext:
    return PlaceContext(
        target="t",
        spec_path=str(ROOT / "t.distspec.json"),
        spec_text=spec_text,
        roots=[str(ROOT)],
        search_dirs=[str(ROOT), str(ROOT / "examples")],
        read=read_disk,
        files=lambda: [],
        factory_file=str(FACTORY),
    )


def _diagnostics(text: str) -> list[types.Diagnostic]:
    data = json.loads((FIXTURES / "worker_error.json").read_text().replace("/work/main/", f"{ROOT}/"))
    data["attempts"][0]["error"]["message"] = f"boom {text}"
    data["attempts"][0]["error"]["hint"] = f"rename {text}"
    out = [d for ds in report_diagnostics(TraceReport.from_dict(data), _context()).values() for d in ds]
    runner = runner_error_diagnostics("ImportError", f"boom {text}", f"install {text}", None, _context())
    out += [d for ds in runner.values() for d in ds]
    spec = json.dumps({"format": "distcheck-spec", "version": 1, text[:200]: 1})
    out += spec_invalid_diagnostics(spec, str(ROOT / "t.distspec.json"))
    out.append(config_diagnostic(str(ROOT / "pyproject.toml"), None, 1, 1, f"unknown key {text!r}", f"drop {text}"))
    return out


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_diagnostics_show_hostile_text_escaped_and_serialise(name: str) -> None:
    text = HOSTILE[name]
    found = _diagnostics(text)
    assert {str(d.code) for d in found} >= {"worker-error", "spec-invalid", "config-invalid"}
    converter = default_converter()  # type: ignore[no-untyped-call]
    sent = json.dumps(converter.unstructure(found), ensure_ascii=False).encode("utf-8")  # as pygls sends
    for d in json.loads(sent):
        shown = [d["message"], *(r["message"] for r in d.get("relatedInformation") or [])]
        for line in shown:
            assert not _ACTING.search(line), (d["code"], repr(_ACTING.search(line)))
            assert all(len(part) <= MAX_LINE + 120 for part in line.split("\n"))
        assert json.dumps(d["data"], ensure_ascii=False).encode("utf-8")
    if UNSAFE.search(text) and name != "huge":
        every = "\n".join(r.message for d in found for r in d.related_information or [])
        assert for_editor(text) in every, "what was there is still shown, escaped"


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_daemons_messages_and_progress_show_hostile_text_escaped(name: str) -> None:
    """`window/logMessage`, `window/showMessage` and `$/progress` carry target names, paths and
    exception messages too: the same rule, at `DistcheckServer.log` / `show` and `Runs._progress`."""
    from types import SimpleNamespace

    from distcheck.lsp.runs import Run, Runs
    from distcheck.lsp.server import DistcheckServer

    text = HOSTILE[name]
    sent: list[Any] = []
    server = DistcheckServer()
    server.window_log_message = sent.append  # type: ignore[method-assign,assignment]
    server.window_show_message = sent.append  # type: ignore[method-assign,assignment]
    server.show("error", f"Distcheck could not validate {text}: boom {text}")
    progress = SimpleNamespace(report=lambda _token, p: sent.append(p), end=lambda _token, p: sent.append(p))
    runs = Runs.__new__(Runs)
    runs._server = SimpleNamespace(work_done_progress=progress)  # type: ignore[assignment]
    run = Run(target=None, overrides={}, token="t", progress=True)  # type: ignore[arg-type]
    runs._progress(run, "report", f"rank 0: {text}")
    runs._progress(run, "end", f"error: {text}")
    assert len(sent) == 4
    for params in sent:
        assert not _ACTING.search(params.message), (type(params).__name__, repr(_ACTING.search(params.message)))
        assert all(len(part) <= MAX_LINE + 120 for part in params.message.split("\n"))


def corpus() -> list[dict[str, Any]]:
    """Each input and what `for_editor` shows for it (the 1 MB one as a repeated character)."""
    out: list[dict[str, Any]] = []
    for name, text in sorted({**HOSTILE, **EXTRA}.items()):
        entry: dict[str, Any] = {"name": name, "shown": for_editor(text)}
        if len(set(text)) == 1 and len(text) > MAX_LINE:
            entry["repeat"] = [text[0], len(text)]
        else:
            entry["input"] = text
        out.append(entry)
    return out


def _corpus_json() -> str:
    rule = {"unsafe": UNSAFE.pattern, "max_line": MAX_LINE}
    return json.dumps({"rule": rule, "cases": corpus()}, indent=1, ensure_ascii=True) + "\n"


def test_the_typescript_rule_is_checked_on_todays_corpus() -> None:
    assert CORPUS_FILE.read_text(encoding="utf-8") == _corpus_json(), (
        f"{CORPUS_FILE} is stale: run .venv/bin/python tests/server/lsp/test_diagnostics_hostile.py"
    )


if __name__ == "__main__":
    CORPUS_FILE.parent.mkdir(parents=True, exist_ok=True)
    CORPUS_FILE.write_text(_corpus_json(), encoding="utf-8")
