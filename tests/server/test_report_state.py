"""The verdict-state rule (`distcheck.report.report_state`, `TraceReport.state`): one field the editor shows,
with a pass that needed an auto-fix told apart from a pass of the spec as given."""

from __future__ import annotations

import json
import os

import pytest

from distcheck.report import REPORT_STATES, REPORT_VERDICTS, Attempt, OutputVerdict, TraceReport
from distcheck.report.parts import PartitionHealth, ReportMeta
from distcheck.spec import MLIPSpec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _attempt(index: int, passed: bool, *, degenerate: bool = False) -> Attempt:
    rel = 0.0 if passed else 0.5
    status = "ok" if passed else "mismatch"
    verdicts = {"energy": OutputVerdict("energy", "scalar", passed, rel, rel, status, None, 0, 1)}
    attempt = Attempt(index, MLIPSpec(), f"try {index}", None, passed, {}, {}, verdicts, {}, None, [], None, {}, {}, {})
    if degenerate:
        attempt.partition_health = PartitionHealth(degenerate=["rank 1 owns no atoms"])
    return attempt


def _report(*passed: bool, best: int | None = None, degenerate: bool = False) -> TraceReport:
    attempts = [_attempt(i, p, degenerate=degenerate) for i, p in enumerate(passed)]
    return TraceReport(
        ok=any(passed), spec=MLIPSpec(), attempts=attempts, next_action="", meta=ReportMeta(), best_index=best
    )


@pytest.mark.parametrize(
    ("passed", "best", "state"),
    [
        ((True,), None, "passed"),  # the spec as given passed
        ((False, True), None, "passed_after_fix"),  # only the fixed spec passed
        ((False, False, True), None, "passed_after_fix"),  # fixed on the third attempt
        ((False, True, True), None, "passed_after_fix"),  # the first pass counts, and it is a fix
        ((True, True), 0, "passed"),
        ((False, True), 1, "passed_after_fix"),  # an index given by the engine
        ((False,), None, "failed"),
        ((False, False), None, "failed"),
    ],
)
def test_a_pass_after_a_fix_is_its_own_state(passed: tuple[bool, ...], best: int | None, state: str) -> None:
    report = _report(*passed, best=best)
    assert report.state == state
    assert report.verdict == ("failed" if state == "failed" else "passed")  # the verdict (exit code) is unchanged


def test_other_verdicts_are_their_own_state() -> None:
    assert _report(False, True, degenerate=True).state == "inconclusive"  # a degenerate pass proves nothing
    assert _report(True, degenerate=True).state == "inconclusive"
    empty = TraceReport(ok=False, spec=MLIPSpec(), attempts=[], next_action="", meta=ReportMeta())
    assert empty.state == "error"


def test_every_state_is_a_verdict_or_the_fix_state() -> None:
    assert set(REPORT_STATES) == {*REPORT_VERDICTS, "passed_after_fix"}


def test_the_state_is_written_next_to_the_verdict_and_ignored_when_read() -> None:
    report = _report(False, True)
    doc = report.to_dict()
    assert doc["state"] == "passed_after_fix"
    keys = list(doc)
    assert keys.index("state") == keys.index("verdict") + 1
    doc["state"] = "passed"  # a reader never takes the written value over the rule
    assert TraceReport.from_dict(doc).state == "passed_after_fix"


def test_the_generated_schema_names_the_states() -> None:
    with open(os.path.join(ROOT, "extension", "schemas", "report.schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    assert schema["properties"]["state"]["enum"] == list(REPORT_STATES)
    with open(os.path.join(ROOT, "extension", "src", "reportSchema.ts"), encoding="utf-8") as f:
        ts = f.read()
    assert 'state?: "passed" | "passed_after_fix" | "failed" | "inconclusive" | "error";' in ts


def test_the_text_summary_line_does_not_call_a_fixed_pass_passed() -> None:
    assert _report(False, True).render_text().startswith("PASSED AFTER FIX")
    assert _report(False, False, True).render_text().startswith("PASSED AFTER FIX")
    first = _report(True).render_text()
    assert first.startswith("PASSED") and not first.startswith("PASSED AFTER FIX")
