"""File targets are found by a workspace scan, not only among open buffers; a model file that does not
parse stays a target and gets a `model-syntax-error` diagnostic at the error (`lsp.discovery`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distcheck.lsp import discovery
from distcheck.lsp.diagnostics_codes import CODES

TARGET = "import torch\n\n\ndef model_factory():\n    return None\n\n\ndef sample_batch():\n    return None\n"

BROKEN = {
    "missing colon": ("def model_factory()\n    return 1\n\ndef sample_batch():\n    return 2\n", 1),
    "unclosed paren": ("x = (1,\n\ndef model_factory():\n    return 1\n\ndef sample_batch():\n    return 2\n", 1),
    "bad indent": ("def model_factory():\n    return 1\n      y = 2\n\ndef sample_batch():\n    return 2\n", 3),
    "stray token later": ("def model_factory():\n    return 1\n\ndef sample_batch():\n    return 2 +\n", 5),
    "async factory": ("async def model_factory():\n    return 1\n\ndef sample_batch():\n    return 2\nif\n", 6),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_module_that_does_not_parse_is_still_a_target_with_the_error_line(case: str) -> None:
    source, error_line = BROKEN[case]
    bad = discovery.broken_module("/w/m.py", source)
    assert bad is not None, case
    factory_line = next(i for i, line in enumerate(source.splitlines(), 1) if "def model_factory" in line)
    assert (bad.line, bad.error_line) == (factory_line, error_line)
    diagnostic = discovery.syntax_diagnostic(bad, source)
    assert diagnostic.code == "model-syntax-error" and diagnostic.range.start.line == error_line - 1
    assert "SyntaxError" in diagnostic.message or "Error" in diagnostic.message


def test_parsing_modules_and_non_targets_are_not_broken_modules() -> None:
    assert discovery.broken_module("/w/ok.py", TARGET) is None
    assert discovery.broken_module("/w/half.py", "def model_factory(:\n") is None  # no sample_batch: no target
    assert discovery.broken_module("/w/nested.py", "class A:\n    def model_factory(self):\n        pass\n") is None
    nul = discovery.broken_module(
        "/w/nul.py", "def model_factory():\n    return 1\x00\ndef sample_batch():\n    pass\n"
    )
    assert nul is not None and nul.line == 1


def test_the_code_is_documented() -> None:
    assert "model-syntax-error" in CODES


def _tree(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "model.py").write_text(TARGET)
    (root / "other.py").write_text("def helper():\n    return 1\n")
    for hidden in (".venv/lib/site-packages", "node_modules/x", ".git", "build", "deep/site-packages/y"):
        (root / hidden).mkdir(parents=True)
        (root / hidden / "model.py").write_text(TARGET)


def test_the_scan_finds_unopened_files_and_skips_environments_and_build_output(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = discovery.scan([str(tmp_path)], {}, discovery.FileMemo())
    assert sorted(found) == [os.path.normpath(tmp_path / "pkg" / "model.py")]


def test_an_open_buffer_speaks_for_its_file_and_open_files_outside_the_folders_count(tmp_path: Path) -> None:
    _tree(tmp_path)
    model = os.path.normpath(tmp_path / "pkg" / "model.py")
    outside = os.path.normpath(tmp_path.parent / f"{tmp_path.name}-outside.py")
    other = os.path.normpath(tmp_path / "other.py")
    buffers = {model: "# emptied in the editor, not saved\n", outside: TARGET, other: TARGET}
    found = discovery.scan([str(tmp_path)], buffers, discovery.FileMemo())
    assert sorted(found) == sorted([outside, other])


def test_the_memo_reads_a_changed_file_again(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    memo = discovery.FileMemo()
    assert memo.text(str(path)) is None
    path.write_text(TARGET + "# grown\n")
    assert memo.text(str(path)) == TARGET + "# grown\n"
    path.unlink()
    assert memo.text(str(path)) is None


def test_the_scan_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "MAX_FILES", 3)
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(TARGET)
    said: list[str] = []
    found = discovery.scan([str(tmp_path)], {}, discovery.FileMemo(), said.append)
    assert len(found) == 3 and said and "more than 3" in said[0]


def test_assigned_factories_and_samples_count_as_definitions() -> None:
    source = "from m import make, sample\n\nmodel_factory = make\nsample_batch: object = sample\nx = (\n"
    bad = discovery.broken_module("/w/a.py", source)
    assert bad is not None and bad.line == 3


def test_the_scan_diagnostic_gives_way_to_the_validation_of_the_same_error() -> None:
    from lsprotocol import types

    from distcheck.lsp.store import DiagnosticsStore

    sent: list[types.PublishDiagnosticsParams] = []
    store = DiagnosticsStore(sent.append)
    source = "def model_factory(:\n    pass\n\n\ndef sample_batch():\n    pass\n"
    bad = discovery.broken_module("/w/m.py", source)
    assert bad is not None
    scanned = discovery.syntax_diagnostic(bad, source)
    store.replace("model-syntax-error", {"/w/m.py": [scanned]})
    assert [d.code for d in sent[-1].diagnostics] == ["model-syntax-error"]
    worker = types.Diagnostic(
        range=scanned.range, message="SyntaxError: invalid syntax (m.py, line 1)", code="worker-error"
    )
    store.replace("target:m.py", {"/w/m.py": [worker]})
    assert [d.code for d in sent[-1].diagnostics] == ["worker-error"]
    store.replace("target:m.py", {})
    assert [d.code for d in sent[-1].diagnostics] == ["model-syntax-error"]
