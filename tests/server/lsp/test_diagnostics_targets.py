"""A target's diagnostics appear only in that target's files: never on another target's model file or
spec file (`PlaceContext.others`). Each way a diagnostic finds its file is tried with the other
target's model file in its way: a scan for a helper's call sites, a scan for a module's class, a frame
of the report (a worker error's line), an op's line; what the report itself names is shown on this
target's factory instead, saying where it happened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import PlaceContext, report_diagnostics, runner_error_diagnostics
from distcheck.report import TraceReport

from .harness import ROOT

FIXTURES = ROOT / "tests" / "extension" / "fixtures"

A_MODEL = "def model_factory():\n    return None\n\n\ndef sample_batch():\n    return None\n"
B_MODEL = """from examples.thirdparty.nbops import mol_sum


class MoleculeEnergyReadout:
    def forward(self, x, idx):
        return mol_sum(x, idx, 2)


def model_factory():
    return MoleculeEnergyReadout()


def sample_batch():
    raise ValueError("b")
"""


def _workspace(tmp: Path) -> tuple[Path, Path, Path]:
    a, b = tmp / "a_model.py", tmp / "b_model.py"
    a.write_text(A_MODEL)
    b.write_text(B_MODEL)
    spec_b = tmp / "b_model.distspec.json"
    spec_b.write_text("{}\n")
    return a, b, spec_b


def _context(tmp: Path, a: Path, b: Path, others: list[Path]) -> PlaceContext:
    return PlaceContext(
        target="a",
        spec_path=str(tmp / "a_model.distspec.json"),
        spec_text=None,
        roots=[str(tmp)],
        search_dirs=[str(tmp)],
        read=read_disk,
        files=lambda: [str(a), str(b)],
        factory_file=str(a),
        others=[str(p) for p in others],
    )


def _report(name: str, edit: Any = None) -> TraceReport:
    data = json.loads((FIXTURES / name).read_text().replace("/work/main/", f"{ROOT}/"))
    if edit is not None:
        edit(data)
    return TraceReport.from_dict(data)


def _frame_in(b: Path) -> Any:
    def edit(data: dict[str, Any]) -> None:
        data["attempts"][0]["error"]["user_frame"] = {"file": str(b), "line": 14, "function": "sample_batch"}

    return edit


def _op_in(b: Path) -> Any:
    def edit(data: dict[str, Any]) -> None:
        for op in data["attempts"][0]["unrouted"]:
            op.update(file=str(b), line=6, call_file=None, call_line=None)

    return edit


SHAPES = {
    "helper call site (workspace scan)": ("helper_model_failed.json", None, "undeclared-helper"),
    "divergent module's class (workspace scan)": ("helper_model_failed.json", None, "first-divergent-module"),
    "worker error's frame (the report's)": ("worker_error.json", _frame_in, "worker-error"),
    "unrouted op's line (the report's)": ("unrouted_python.json", _op_in, "unrouted-aggregation"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_another_targets_files_get_none_of_this_targets_diagnostics(tmp_path: Path, shape: str) -> None:
    a, b, spec_b = _workspace(tmp_path)
    fixture, edit, code = SHAPES[shape]
    report = _report(fixture, edit(b) if edit is not None else None)

    alone = report_diagnostics(report, _context(tmp_path, a, b, others=[]))
    assert code in {str(d.code) for d in alone.get(str(b), [])}, "the shape must reach b_model.py on its own"

    placed = report_diagnostics(report, _context(tmp_path, a, b, others=[b, spec_b]))
    assert str(b) not in placed and str(spec_b) not in placed, sorted(placed)
    if "(the report's)" in shape:  # what happened there is still shown, on this target's factory
        moved = [d for d in placed.get(str(a), []) if str(d.code) == code]
        assert moved, sorted(placed)
        evidence = [r.message for d in moved for r in d.related_information or []]
        assert any("b_model.py line" in e and "another target's file" in e for e in evidence), evidence


def test_a_runner_error_in_another_targets_file_is_shown_on_this_factory(tmp_path: Path) -> None:
    a, b, spec_b = _workspace(tmp_path)
    frame = {"file": str(b), "line": 14, "function": "sample_batch"}
    ctx = _context(tmp_path, a, b, others=[b, spec_b])
    placed = runner_error_diagnostics("ValueError", "b", "fix the sample", frame, ctx)
    assert list(placed) == [str(a)]


def test_a_file_that_is_this_targets_own_too_keeps_its_diagnostics(tmp_path: Path) -> None:
    """Two targets sharing one model file (two factories of one module): it is each one's own."""
    a, b, spec_b = _workspace(tmp_path)
    frame = {"file": str(a), "line": 2, "function": "model_factory"}
    ctx = _context(tmp_path, a, b, others=[a, b, spec_b])
    placed = runner_error_diagnostics("ValueError", "a", "fix the factory", frame, ctx)
    assert list(placed) == [str(a)]


def test_the_daemon_names_every_other_targets_model_and_spec_files(tmp_path: Path) -> None:
    """`Runs._other_targets_files`: the configured targets' files but the validated one's."""
    from types import SimpleNamespace

    from distcheck.lsp.config import load_workspace_targets
    from distcheck.lsp.runs import Runs
    from distcheck.lsp.store import DiagnosticsStore
    from distcheck.lsp.workspace import WorkspaceState

    a, b, spec_b = _workspace(tmp_path)
    (tmp_path / "c_model.py").write_text(A_MODEL)
    (tmp_path / "pyproject.toml").write_text(
        "".join(
            f'[[tool.distcheck.targets]]\nname = "{n}"\nfactory = "{n}_model.py:model_factory"\n'
            f'sample = "{n}_model.py:sample_batch"\n\n'
            for n in ("a", "b", "c")
        )
    )
    server = SimpleNamespace(workspace=None, log=lambda *_: None, encoding="utf-16")
    runs = Runs.__new__(Runs)
    runs._workspace = WorkspaceState(server, DiagnosticsStore(lambda _params: None))  # type: ignore[arg-type]
    targets = {t.name: t for t in load_workspace_targets(str(tmp_path), read_disk).targets}
    others = runs._other_targets_files(targets["a"], [str(tmp_path)])
    assert {str(b), str(spec_b), str(tmp_path / "c_model.py")} <= others
    assert str(a) not in others and str(tmp_path / "a_model.distspec.json") not in others
