"""The editor's receptive-field diagnostic follows the measurement's decision: a depth short by hops
says "set num_interactions = N", a reach a longer cutoff explains says "set cutoff = C" (the same
text as `next_action`, `validate.field_advice.field_remedy`), and a field that covers the model says
nothing. Built from the `receptive_fixed` report fixture with its receptive field rewritten."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distcheck.lsp.diagnostics import report_diagnostics
from distcheck.lsp.diagnostics_place import full_text
from distcheck.validate.field_advice import field_remedy

from .test_diagnostics_evidence import SHALLOW, _by_code, _context, _data, _info, _line, _report


def _with_field(**changes: Any) -> Any:
    data = _data("receptive_fixed")
    data["receptive_field"].update(changes)
    return _report(data)


def test_a_short_cutoff_is_named_with_the_cutoff_to_set() -> None:
    report = _with_field(
        measured_depth=2,
        measured_field=7.4,
        reach_hops=4,
        reach_angstrom=7.2,
        remedy="cutoff",
        suggested_cutoff=4.0,
        under_declared=True,
    )
    ((path, d),) = _by_code(report_diagnostics(report, _context(SHALLOW)), "receptive-field")
    assert Path(path) == SHALLOW and d.range.start.line == _line(SHALLOW, "def model_factory")
    text = full_text(d)
    remedy = field_remedy(report.receptive_field)
    assert remedy is not None and remedy.startswith("set cutoff = 4 on the wrapper") and remedy in text
    assert "Cutoff under-declared" in text and "7.2 Å" in text and "num_interactions =" not in text
    assert _info(d)["suggestedCutoff"] == 4.0


def test_a_short_depth_and_a_covered_field() -> None:
    deeper = _with_field(remedy="depth")
    ((_, d),) = _by_code(report_diagnostics(deeper, _context(SHALLOW)), "receptive-field")
    assert "set num_interactions = 3 on the wrapper" in full_text(d)
    covered = _with_field(remedy="none", under_declared=False, measured_depth=2)
    assert not _by_code(report_diagnostics(covered, _context(SHALLOW)), "receptive-field")
