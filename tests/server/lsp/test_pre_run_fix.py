"""A pass under a spec distcheck changed before the first run is offered as a fix in the editor, as an
auto-fix after a failed attempt is (issue 32, item 1): the spec-fix diagnostic and quick fix carry the
attempt's `fixes` (`TraceReport.fix_edits`), with no failed attempt before it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from distcheck.lsp import locate
from distcheck.lsp.actions import report_fixes
from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import PlaceContext, report_diagnostics
from distcheck.report import TraceReport
from distcheck.report.fixes import PRE_RUN_RULE, SpecFix

from .harness import ROOT, copy_examples

FIXTURES = ROOT / "tests" / "extension" / "fixtures"


@pytest.fixture()
def examples(tmp_path: Path) -> Path:
    return copy_examples(tmp_path)


def _fixed_first(examples: Path) -> TraceReport:
    """The auto-fixed fixture's passing attempt as the only one, its change made before the first run."""
    text = (FIXTURES / "helper_model_autofix.json").read_text().replace("/work/main/examples/", f"{examples}/")
    report = TraceReport.from_dict(json.loads(text))
    best = report.best_attempt
    assert best is not None and best.passed
    changes = report.fix_edits()
    assert changes, "the fixture's fix"
    only = dataclasses.replace(best, index=0, rule=PRE_RUN_RULE, rolled_back=None)
    only.fixes = [SpecFix(PRE_RUN_RULE, c["op"], list(c["path"]), c.get("value")) for c in changes]
    return dataclasses.replace(report, attempts=[only], best_index=0)


def test_a_pre_run_fix_is_a_spec_fix_in_the_editor(examples: Path) -> None:
    report = _fixed_first(examples)
    assert report.state == "passed_after_fix" and report.fix_applied is not None
    ctx = PlaceContext(
        target="helper_model",
        spec_path=str(examples / "helper_model.distspec.json"),
        spec_text=None,
        roots=[str(examples)],
        search_dirs=[str(examples.parent), str(examples)],
        read=read_disk,
        files=lambda: locate.iter_python_files([str(examples)]),
        factory_file=str(examples / "helper_model.py"),
    )
    out = report_diagnostics(report, ctx)
    fixes = [d for ds in out.values() for d in ds if d.code == "spec-fix"]
    assert fixes, out
    data = fixes[0].data
    assert isinstance(data, dict) and data["rule"] == PRE_RUN_RULE and data["edits"] == report.fix_edits()
    (quick,) = [f for f in report_fixes(report, ctx.spec_path) if f["code"] == "spec-fix"]
    assert quick["edits"] == report.fix_edits() and quick["spec"] == report.spec.to_dict()
