"""The texts of the daemon's diagnostics: every code documented (a heading of docs/diagnostics.md and
the page the extension ships, which its `codeDescription` links), messages one short sentence, the
remedy and the evidence in the related information, each detail line saying something new. Checked
over every report fixture (with and without a spec file, with and without auto-fix), over the open
parts set by hand, and over the document diagnostics."""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from distcheck.lsp import discovery, locate
from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import (
    CODES,
    PlaceContext,
    config_diagnostic,
    report_diagnostics,
    runner_error_diagnostics,
    spec_invalid_diagnostics,
)
from distcheck.lsp.diagnostics_codes import MESSAGE_LIMIT, PAGE_SCHEME, PAGES_DIR, code_description, page_path, pages
from distcheck.lsp.diagnostics_place import details, make_diagnostic, short
from distcheck.lsp.text import Span
from distcheck.report import HaloCompleteness, TraceReport

from .harness import ROOT

FIXTURES = ROOT / "tests" / "extension" / "fixtures"
DOCS = ROOT / "docs" / "diagnostics.md"
FACTORY = ROOT / "examples" / "helper_model.py"
LSP = ROOT / "server" / "distcheck" / "lsp"

# codes whose message quotes text distcheck does not write (an exception's, a spec or config reader's):
# cut at the bound, the whole text kept in the related information
QUOTING = {"worker-error", "spec-invalid", "config-invalid"}


def _anchors(markdown: str) -> set[str]:
    """The anchors of the headings of a Markdown file, as GitHub spells them."""
    out = set()
    for line in markdown.splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            out.add(text.replace(" ", "-"))
    return out


def _context(spec_path: Path, spec_text: str | None) -> PlaceContext:
    return PlaceContext(
        target="t",
        spec_path=str(spec_path),
        spec_text=spec_text,
        roots=[str(ROOT)],
        search_dirs=[str(ROOT), str(ROOT / "examples"), str(ROOT / "tests" / "server" / "validate")],
        read=read_disk,
        files=lambda: locate.iter_python_files([str(ROOT / "examples"), str(ROOT / "tests" / "server" / "validate")]),
        factory_file=str(FACTORY),
    )


def _variants(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The report, and the report as if auto-fix had been off (its first attempt alone)."""
    first = copy.deepcopy(data)
    first["attempts"] = first["attempts"][:1]
    first.update(best_attempt=0, spec=first["attempts"][0]["spec"], ok=False)
    return [data, first]


def _published() -> list[types.Diagnostic]:
    """Every diagnostic the fixtures, a shallow halo, a runner error and broken documents give."""
    out: list[types.Diagnostic] = []
    spec_path = ROOT / "t.distspec.json"
    for path in sorted(FIXTURES.glob("*.json")):
        data = json.loads(path.read_text().replace("/work/main/", f"{ROOT}/"))
        for variant in _variants(data):
            report = TraceReport.from_dict(variant)
            spec_text = json.dumps(variant["attempts"][0]["spec"], indent=2)
            for text in (None, spec_text):
                found = report_diagnostics(report, _context(spec_path, text))
                out += [d for ds in found.values() for d in ds]
    shallow = TraceReport.from_dict(json.loads((FIXTURES / "unknown_cause.json").read_text()))
    shallow.attempts[0].halo_completeness = HaloCompleteness(
        False, 4.0, 12.0, "The halo is 4 Å but needs 12 Å. Set `distribution.policy.halo_width` >= 12 Å."
    )
    out += [d for ds in report_diagnostics(shallow, _context(spec_path, None)).values() for d in ds]
    frame = {"file": str(FACTORY), "line": 3, "function": "f"}
    runner = runner_error_diagnostics(
        "ConfigError", "importing the factory failed", "fix it", frame, _context(spec_path, None)
    )
    out += [d for ds in runner.values() for d in ds]
    broken = '{"format": "distcheck-spec", "version": 1, "distribution": {"policy": {"scater_mode": "local"}}}'
    out += spec_invalid_diagnostics(broken, str(spec_path))
    out += spec_invalid_diagnostics('{"format": ', str(spec_path))
    out.append(
        config_diagnostic(str(ROOT / "pyproject.toml"), None, 3, 1, "unknown key 'world_sise'", "use world_size")
    )
    unparsed = "def model_factory(:\n    pass\n\n\ndef sample_batch():\n    pass\n"
    broken_module = discovery.broken_module(str(FACTORY), unparsed)
    assert broken_module is not None
    out.append(discovery.syntax_diagnostic(broken_module, unparsed))
    return out


@pytest.fixture(scope="module")
def published() -> list[types.Diagnostic]:
    return _published()


def test_every_code_has_a_documented_anchor() -> None:
    anchors = _anchors(DOCS.read_text(encoding="utf-8"))
    assert set(CODES) - anchors == set(), "one section of docs/diagnostics.md per code"
    assert {a for a in anchors if a not in CODES} <= {"diagnostics"}, "no section of docs/diagnostics.md but a code's"


def test_every_code_links_its_shipped_page_and_the_pages_are_up_to_date() -> None:
    """One page per code under extension/media/diagnostics, as `pages` makes it from docs/diagnostics.md
    (regenerate: `.venv/bin/python -m distcheck.lsp.diagnostics_codes .`), and no page of no code."""
    wanted = pages(DOCS.read_text(encoding="utf-8"))
    shipped = {f"{PAGES_DIR}/{p.name}": p.read_text(encoding="utf-8") for p in (ROOT / PAGES_DIR).glob("*")}
    assert set(shipped) == set(wanted) == {page_path(code) for code in CODES}
    for rel, text in wanted.items():
        assert shipped[rel] == text, f"{rel} is stale: run python -m distcheck.lsp.diagnostics_codes ."
    for code in CODES:
        href = code_description(code).href
        assert href == f"{PAGE_SCHEME}:/{page_path(code)}" and (ROOT / page_path(code)).is_file(), code
        assert f"# distcheck: {code}\n" in wanted[page_path(code)]


def test_a_code_without_a_section_has_no_page() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    for code in ("halo-incomplete", "config-invalid"):
        with pytest.raises(ValueError, match=code):
            pages(docs.replace(f"## {code}\n", "## renamed\n"))


def test_the_packaged_extension_keeps_the_pages() -> None:
    """`.vscodeignore` lists what the VSIX holds (everything excluded, then kept): the pages' folder is kept
    and nothing after that drops it again."""
    rules = [r.strip() for r in (ROOT / ".vscodeignore").read_text().splitlines() if r.strip() and r[0] != "#"]
    keep = [i for i, r in enumerate(rules) if r in ("!extension/media/**", f"!{PAGES_DIR}/**", f"!{PAGES_DIR}/*.md")]
    assert keep, rules
    assert not [r for r in rules[keep[-1] + 1 :] if not r.startswith("!") and "media" in r], rules


def test_every_code_the_modules_publish_is_in_the_table() -> None:
    """The codes written in `add(...)` / `make_diagnostic(...)` calls of lsp/diagnostics*.py."""
    written: set[str] = set()
    for path in LSP.glob("diagnostics*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            at = {"add": 2, "make_diagnostic": 1}.get(name)
            if at is not None and len(node.args) > at and isinstance(node.args[at], ast.Constant):
                written.add(str(node.args[at].value))
    assert written and written <= set(CODES), sorted(written - set(CODES))
    with pytest.raises(KeyError):
        code_description("no-such-code")


def test_the_corpus_covers_every_code(published: list[types.Diagnostic]) -> None:
    assert {str(d.code) for d in published} == set(CODES)


def test_messages_are_one_short_sentence_with_the_remedy_related(published: list[types.Diagnostic]) -> None:
    for d in published:
        assert len(d.message) <= MESSAGE_LIMIT and "\n" not in d.message, (d.code, d.message)
        assert d.code_description is not None and d.code_description.href == code_description(str(d.code)).href
        related = [r.message for r in d.related_information or []]
        assert any(r.startswith("What to do: ") and len(r) > len("What to do: ") for r in related), (d.code, related)
        if str(d.code) not in QUOTING:
            assert not d.message.endswith("…"), f"{d.code}: its own message was cut: {d.message}"


def _repeats(d: types.Diagnostic) -> list[str]:
    """The detail lines whose text the message or an earlier line already holds."""
    said = [" ".join(d.message.split()).rstrip(" .…").casefold()]
    out = []
    for r in d.related_information or []:
        text = " ".join(r.message.removeprefix("What to do: ").split()).rstrip(" .").casefold()
        if any(text in earlier for earlier in said):
            out.append(r.message)
        said.append(text)
    return out


def test_each_detail_line_says_something_new(published: list[types.Diagnostic]) -> None:
    for d in published:
        assert _repeats(d) == [], (d.code, d.message)


@pytest.mark.parametrize(
    ("message", "todo", "evidence", "kept"),
    [
        ("Output 'energy' differs.", "fix it", ["Output 'energy' differs."], ["What to do: fix it"]),
        ("Output 'energy' differs from the reference.", None, ["differs from the reference"], []),
        ("Boom.", "set halo_width >= 5", ["set halo_width >= 5."], ["What to do: set halo_width >= 5"]),
        ("Boom.", None, ["rank 1 raised", "rank 1 raised", "RANK 1   raised."], ["rank 1 raised"]),
        ("Boom.", None, ["rank 1 raised ValueError", "ValueError"], ["rank 1 raised ValueError"]),
        ("x " * 100, None, [("x " * 100).strip()], [("x " * 100).strip()]),
    ],
)
def test_a_detail_repeating_the_message_or_an_earlier_detail_is_left_out(
    message: str, todo: str | None, evidence: list[str], kept: list[str]
) -> None:
    d = make_diagnostic(Span(0, 0, 0, 1), "worker-error", message, types.DiagnosticSeverity.Error, {}, path="/p/m.py",
                        todo=todo, evidence=evidence)  # fmt: skip
    assert [r.message for r in d.related_information or []] == kept
    assert details(["a b"], ["", "A  B.", "c", "c", "b c d"]) == ["c", "b c d"]


def test_related_information_sits_where_the_diagnostic_does(published: list[types.Diagnostic]) -> None:
    for d in published:
        for r in d.related_information or []:
            assert r.location.range == d.range and r.location.uri.startswith("file://"), d.code


def test_a_long_message_is_cut_at_a_word_and_kept_whole_in_the_evidence() -> None:
    words = "the size of tensor a (72) must match the size of tensor b (108) at non-singleton dimension 0 " * 3
    d = make_diagnostic(Span(0, 0, 0, 1), "worker-error", words, types.DiagnosticSeverity.Error, {}, path="/p/m.py")
    assert len(d.message) <= MESSAGE_LIMIT and d.message.endswith("…") and words.startswith(d.message[:-1])
    assert d.related_information is not None and d.related_information[0].message == words.strip()
    assert short("fits.") == ("fits.", None)
    assert short("two\nlines")[1] == "two\nlines"


def test_the_quick_fix_data_keys_are_unchanged(published: list[types.Diagnostic]) -> None:
    """The keys `code_actions.py` reads stay in `data` (the texts moved, the data did not)."""
    by_code: dict[str, set[str]] = {}
    for d in published:
        assert isinstance(d.data, dict)
        by_code.setdefault(str(d.code), set()).update(d.data)
    assert {"qualname", "remedy", "baseSpec", "specPath"} <= by_code["undeclared-helper"]
    assert {"rule", "edits", "spec", "specPath", "edit"} <= by_code["spec-fix"]
    assert {"spec", "specPath"} <= by_code["spec-missing"]
    assert {"output", "specPath"} <= by_code["failing-output"]
