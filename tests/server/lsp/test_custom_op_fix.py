"""The daemon's `undeclared-custom-op` diagnostic and its quick fix (issue 17 item 4), over the real
report `tests/extension/fixtures/custom_op.json` (`examples/custom_op_model.py` with its kernels
undeclared): one diagnostic per aggregating kernel on the line that calls it, none for the elementwise
kernel, and a fix that inserts the ready entry into `distribution.custom_ops` of the spec text —
formatting kept, an entry of the same op replaced, a missing file created — whose result, read back,
declares exactly what makes the model pass."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from distcheck.lsp import actions, locate
from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import PlaceContext, report_diagnostics
from distcheck.report import TraceReport
from distcheck.spec import MLIPSpec, validate_json

from .harness import ROOT

FIXTURE = ROOT / "tests" / "extension" / "fixtures" / "custom_op.json"
MODEL = ROOT / "examples" / "custom_op_model.py"
SPEC_PATH = ROOT / "t.distspec.json"
KERNELS = {"distcheck_example::edge_to_atom": "# kernel: edges", "distcheck_example::segment_sum": "# kernel: atoms"}


def _report(data: dict[str, Any] | None = None) -> TraceReport:
    raw = FIXTURE.read_text().replace("/work/main/", f"{ROOT}/")
    return TraceReport.from_dict(data if data is not None else json.loads(raw))


def _context(spec_text: str | None) -> PlaceContext:
    return PlaceContext(
        target="t",
        spec_path=str(SPEC_PATH),
        spec_text=spec_text,
        roots=[str(ROOT)],
        search_dirs=[str(ROOT), str(ROOT / "examples")],
        read=read_disk,
        files=lambda: locate.iter_python_files([str(ROOT / "examples")]),
        factory_file=str(MODEL),
    )


def _line(marker: str) -> int:
    lines = [i for i, text in enumerate(MODEL.read_text().splitlines()) if marker in text]
    assert len(lines) == 1
    return lines[0]  # 0-based, as LSP ranges are


def _kernel_diagnostics(report: TraceReport, spec_text: str | None = None) -> list[Any]:
    found = report_diagnostics(report, _context(spec_text))
    return [d for d in found.get(str(MODEL), []) if d.code == "undeclared-custom-op"]


@pytest.fixture(scope="module")
def report() -> TraceReport:
    return _report()


def test_each_aggregating_kernel_gets_a_diagnostic_on_its_call_line(report: TraceReport) -> None:
    found = _kernel_diagnostics(report)
    assert sorted((d.data["op"], d.range.start.line) for d in found) == sorted(
        (op, _line(marker)) for op, marker in KERNELS.items()
    )
    for d in found:
        entry = d.data["entry"]
        assert entry["op"] == d.data["op"] and d.data["specPath"] == str(SPEC_PATH)
        related = [r.message for r in d.related_information or []]
        assert any(json.dumps(entry) in r and r.startswith("What to do: ") for r in related), related
        assert any("per-atom" in r or "per-edge" in r for r in related), "the roles a rank saw are shown"
    every = [d for ds in report_diagnostics(report, _context(None)).values() for d in ds]
    assert not any("shifted_softplus" in json.dumps(d.data) for d in every), "the elementwise kernel is not flagged"
    unrouted = [d.data for d in every if d.code == "unrouted-aggregation" and isinstance(d.data, dict)]
    assert not any(data.get("op") in KERNELS for data in unrouted), "one code per kernel"


@pytest.mark.parametrize("style", ["to_json", "four", "compact"])
def test_the_quick_fixes_insert_the_entries_and_the_spec_then_declares_them(report: TraceReport, style: str) -> None:
    spec = report.attempts[0].spec.to_dict()
    text = {
        "to_json": MLIPSpec.from_dict(spec).to_json(),
        "four": json.dumps(spec, indent=4) + "\n",
        "compact": json.dumps(spec),
    }[style]
    fixes = [d.data for d in _kernel_diagnostics(report, text)]
    assert len(fixes) == 2
    for fix in fixes:
        title = actions.action_title("undeclared-custom-op", fix, SPEC_PATH.name, True)
        assert title == f"Declare the kernel {fix['op']} in distribution.custom_ops of {SPEC_PATH.name}"
    once = text
    for fix in fixes:
        once = actions.new_spec_text("undeclared-custom-op", fix, once)
    assert validate_json(once) == []
    declared = {c.op: c.to_dict() for c in MLIPSpec.from_json(once).distribution.custom_ops}
    assert declared == {f["op"]: f["entry"] for f in fixes}
    if style == "four":
        assert '\n    "distribution": {' in once, "indentation kept"
    # again: the same op's entry is replaced, not added twice
    again = actions.new_spec_text("undeclared-custom-op", fixes[0], once)
    assert len(MLIPSpec.from_json(again).distribution.custom_ops) == 2
    # the report's fixes (fix-all) give the same spec
    listed = [f for f in actions.report_fixes(report, str(SPEC_PATH)) if f["code"] == "undeclared-custom-op"]
    assert sorted(f["op"] for f in listed) == sorted(KERNELS)
    assert MLIPSpec.from_json(actions.all_fixes_text(listed, text)) == MLIPSpec.from_json(once)


def test_a_missing_spec_file_is_created_with_the_entries(report: TraceReport) -> None:
    fixes = [f for f in actions.report_fixes(report, str(SPEC_PATH)) if f["code"] == "undeclared-custom-op"]
    created = actions.all_fixes_text(fixes, None)
    spec = MLIPSpec.from_json(created)
    assert {c.op for c in spec.distribution.custom_ops} == set(KERNELS)
    assert spec.output_kinds == report.attempts[0].spec.output_kinds, "built on the validated spec"


def test_no_fix_when_calls_of_one_kernel_need_different_entries_or_none_fits(report: TraceReport) -> None:
    data = json.loads(report.to_json())
    ops = data["attempts"][0]["unrouted"]
    clash = copy.deepcopy(next(u for u in ops if u["op"] == "distcheck_example::segment_sum"))
    clash["line"] = clash["line"] + 1
    clash["kernel"]["entry"]["output_transforms"] = {"0": "scatter_outputs"}
    ops.append(clash)
    none_fits = next(u for u in ops if u["op"] == "distcheck_example::edge_to_atom")
    none_fits["kernel"].update(entry=None, no_entry="pass x by position, then validate again")
    changed = _report(data)
    assert actions.custom_op_fixes(changed, str(SPEC_PATH)) == []
    for d in _kernel_diagnostics(changed):
        assert d.data["entry"] is None
        assert actions.action_title("undeclared-custom-op", d.data, SPEC_PATH.name, True) is None
        todo = next(r.message for r in d.related_information or [] if r.message.startswith("What to do: "))
        assert "by position" in todo or "its own kernel" in todo, todo
    with pytest.raises(actions.ActionError, match="no ready custom_ops entry"):
        actions.new_spec_text("undeclared-custom-op", {"op": "ns::x", "entry": None}, "{}")


def test_a_declared_kernel_gets_no_fix(report: TraceReport) -> None:
    data = json.loads(report.to_json())
    entries = [u["kernel"]["entry"] for u in data["attempts"][0]["unrouted"]]
    data["attempts"][0]["spec"].setdefault("distribution", {})["custom_ops"] = entries
    assert actions.custom_op_fixes(_report(data), str(SPEC_PATH)) == []


def test_fixture_is_the_model_in_the_examples() -> None:
    assert Path(MODEL).exists() and "custom_op_model.py" in FIXTURE.read_text()
