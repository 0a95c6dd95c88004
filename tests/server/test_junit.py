"""The CLI's JUnit has the Testing view's shape: one testcase per target (named as the target), one
`<failure>` per failing output carrying the text of `report.failures` (the records the editor's Testing
view shows), an `<error>` at the user's line for a worker error, a failure for a degenerate partition."""

from __future__ import annotations

import copy
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from distcheck.report.document import TraceReport
from distcheck.report.failures import output_failure
from distcheck.report.junit import junit_xml
from distcheck.report.model import Frame, OutputVerdict
from distcheck.report.parts import ReportMeta, TargetInfo

FIXTURES = Path(__file__).resolve().parents[1] / "extension" / "fixtures"


def _report(name: str) -> TraceReport:
    return TraceReport.from_json((FIXTURES / f"{name}.json").read_text())


def _case(root: ET.Element) -> ET.Element:
    cases = list(root.iter("testcase"))
    assert len(cases) == 1, [c.get("name") for c in cases]
    return cases[0]


@pytest.mark.parametrize("fixture", ["helper_model_failed", "unknown_cause", "rank_disagreement", "suspicious"])
def test_one_testcase_per_target_one_failure_per_failing_output(fixture: str) -> None:
    report = _report(fixture)
    root = junit_xml(report, "my_target")
    case = _case(root)
    assert case.get("name") == "my_target"
    failing = [n for n, v in report.attempts[report.best_index or 0].verdicts.items() if not v.passed]
    failures = case.findall("failure")
    assert failing and [f.get("type") for f in failures] == [f"output:{n}" for n in failing]
    # the same text the report JSON gives the Testing view
    records = TraceReport.from_json(report.to_json()).to_dict()["failures"]
    assert [f.get("message") for f in failures] == [r["message"] for r in records]
    for f, r in zip(failures, records, strict=True):
        assert f.text is not None and f"expected: {r['expected']}\nactual: {r['actual']}" in f.text
    suite = root.find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "1", "0")


def test_a_plain_passing_report_is_one_passing_testcase() -> None:
    root = junit_xml(_report("receptive_fixed"), "t")
    case = _case(root)
    assert case.find("failure") is None and case.find("error") is None
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "0"


@pytest.mark.parametrize("fixture", ["helper_model_autofix", "unrouted_fixed"])
def test_a_pass_after_auto_fix_is_a_failure_with_the_testing_views_text(fixture: str) -> None:
    """The Testing view records `fix_failure` (testingResults.fixFailureMessage); the JUnit failure's
    message is that text, its body the fix and the command that saves it."""
    report = _report(fixture)
    report.target = TargetInfo(name="t", spec_path="/ws/model.distspec.json", spec_rule="wrapper")
    assert report.state == "passed_after_fix"
    root = junit_xml(report, "t", save_command="distcheck validate t --save-spec model.distspec.json")
    case = _case(root)
    (failure,) = case.findall("failure")
    assert failure.get("type") == "fixed-pass" and case.find("error") is None
    doc = TraceReport.from_json(report.to_json()).to_dict()
    assert failure.get("message") == doc["fix_failure"] == report.fix_failure
    assert report.fix_failure is not None and report.fix_applied is not None
    assert report.fix_failure.startswith(f"Passed only after auto-fix ({' '.join(report.fix_applied.split())})")
    assert "the wrapper's distribution_spec (wrapper), still fails: save the fixed spec to /ws/model.distspec.json" in (
        report.fix_failure
    )
    text = failure.text or ""
    assert text.startswith("fix: ") and ("\n  set " in text or "\n  add " in text), text
    assert text.endswith("save it: distcheck validate t --save-spec model.distspec.json")
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["state"] == "passed_after_fix" and props["spec"] == "the wrapper's distribution_spec (wrapper)"


def test_the_spec_file_read_is_named_in_the_fix_failure_and_the_text() -> None:
    report = _report("helper_model_autofix")
    report.target = TargetInfo(name="t", spec_path="/ws/m.distspec.json", spec_rule="beside-model")
    assert report.fix_failure is not None
    assert "the spec it started from, /ws/m.distspec.json (beside-model), still fails" in report.fix_failure
    assert "spec: /ws/m.distspec.json (beside-model)\n" in report.render_text()
    report.target = TargetInfo(name="t", spec_path="/ws/m.distspec.json", spec_rule="wrapper")
    assert "spec: the wrapper's distribution_spec (wrapper); a fix is saved to /ws/m.distspec.json\n" in (
        report.render_text()
    )
    report.target = TargetInfo(name="t")  # an older report: no rule recorded, no spec line
    assert "spec:" not in report.render_text().split("final spec:")[0]


def test_a_worker_error_is_an_error_at_the_users_line() -> None:
    report = _report("worker_error")
    best = report.best_attempt
    assert best is not None and best.error is not None
    best.error.user_frame = Frame("/ws/model.py", 42, "forward")
    case = _case(junit_xml(report, "t"))
    error = case.find("error")
    assert error is not None and error.get("type") == best.error.type
    assert error.text is not None and error.text.startswith("at /ws/model.py:42")
    assert case.find("failure") is None


def test_a_degenerate_partition_is_a_failure_of_the_targets_testcase() -> None:
    case = _case(junit_xml(_report("degenerate"), "t"))
    types = [f.get("type") for f in case.findall("failure")]
    assert types == ["degenerate"]


def test_no_attempt_is_an_error() -> None:
    report = _report("helper_model_failed")
    empty = TraceReport(ok=False, spec=report.spec, attempts=[], next_action="x", meta=report.meta)
    case = _case(junit_xml(empty, "t"))
    assert case.find("error") is not None


def _verdict(status: str, **kw: object) -> OutputVerdict:
    fields: dict[str, object] = dict(
        name="forces", kind="per_node", passed=False, max_abs_diff=0.5, max_rel_diff=0.25, status=status,
        worst_index=[7, 1], n_failing=3, n_total=30,
    )  # fmt: skip
    fields.update(kw)
    return OutputVerdict(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("atol", "expected_atol"),
    [(1e-3, "0.001"), ({"forces": 2e-3, "default": 9.0}, "0.002"), ({"per_node": 3e-3, "default": 9.0}, "0.003"),
     ({"default": 4e-3}, "0.004")],
)  # fmt: skip
def test_the_failure_text_names_the_tolerance_that_applies(atol: object, expected_atol: str) -> None:
    f = output_failure(_verdict("mismatch"), ReportMeta(atol=atol, rtol=1e-4))
    assert f"atol {expected_atol}," in f.message and f"atol {expected_atol}," in f.expected
    assert "3/30 elements" in f.message and "0.5" in f.message
    assert "atom 7, component y" in f.actual and "0.25" in f.actual


@pytest.mark.parametrize(
    ("status", "says"),
    [("missing", "missing"), ("shape", "shape"), ("nonfinite", "non-finite"), ("suspicious", "round-off")],
)
def test_each_status_says_what_the_distributed_run_gave(status: str, says: str) -> None:
    v = _verdict(status, max_abs_diff=math.nan if status == "nonfinite" else 0.5)
    f = output_failure(v, ReportMeta(atol=1e-5, rtol=1e-4))
    assert says in f.message and says in f.actual and "out of tolerance" not in f.message
    assert f.output == "forces" and f.message.startswith("forces:")


def test_failures_round_trip_as_a_derived_key() -> None:
    report = _report("helper_model_failed")
    doc = report.to_dict()
    assert [r["output"] for r in doc["failures"]] == ["energy", "forces", "charges"]
    assert TraceReport.from_dict(copy.deepcopy(doc)) == report
