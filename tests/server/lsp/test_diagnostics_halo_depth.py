"""The editor's receptive-field diagnostic names the depth the attempts' halos give where the reference
could not measure it (`report.halo_depth`, the text `next_action` gives): a `local` halo that failed
and a wider one `widen_halo` passed with. Built from the `receptive_fixed` fixture: no process."""

from __future__ import annotations

import copy
from typing import Any

from distcheck.lsp.diagnostics import report_diagnostics
from distcheck.lsp.diagnostics_place import full_text
from distcheck.report.halo_depth import halo_bracket, halo_remedy
from distcheck.validate.next_action import next_action

from .test_diagnostics_evidence import SHALLOW, _by_code, _context, _data, _info, _report


def _widened(failed: float, passed: float) -> Any:
    """The fixture (cutoff 3 Å, 2 interactions declared) as an unmeasurable field whose `failed` Å halo
    failed at attempt 1 and whose `passed` Å halo passed after `widen_halo` at attempt 2."""
    data = _data("receptive_fixed")
    data["receptive_field"].update(
        status="unbounded", under_declared=False, measured_depth=None, measured_field=None, halo_width_set=None
    )
    first = copy.deepcopy(data["attempts"][0])
    first["passed"] = False
    first["spec"]["distribution"]["policy"]["halo_width"] = None
    first["halo_completeness"]["halo_width"] = failed
    for verdict in first["verdicts"].values():
        verdict.update(passed=False, status="mismatch")
    second = data["attempts"][0]
    second.update(index=1, rule="widen_halo")
    second["spec"]["distribution"]["policy"]["halo_width"] = passed
    second["halo_completeness"]["halo_width"] = passed
    second["fixes"] = [
        {"rule": "widen_halo", "op": "set", "path": ["distribution", "policy", "halo_width"], "value": passed}
    ]
    data["attempts"] = [first, second]
    data["best_attempt"] = 1
    return _report(data)


def test_the_depth_the_halos_give_is_on_the_factory() -> None:
    for failed, passed, depth in ((6.5, 13.0, 4), (6.5, 9.5, 3)):
        report = _widened(failed, passed)
        bracket = halo_bracket(report)
        assert bracket is not None and bracket.depth == depth
        ((_, d),) = _by_code(report_diagnostics(report, _context(SHALLOW)), "receptive-field")
        text = full_text(d)
        assert f"set num_interactions = {depth} on the wrapper" in text and f"{passed:g} Å passed" in text, text
        assert _info(d)["measuredDepth"] == depth
        assert halo_remedy(bracket) in next_action(report)  # the same words in next_action


def test_no_depth_no_diagnostic() -> None:
    report = _widened(6.5, 8.0)  # 8 Å holds no third interaction of 3 Å
    assert not _by_code(report_diagnostics(report, _context(SHALLOW)), "receptive-field")
