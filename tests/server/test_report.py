"""Tests for `distcheck.report`: the report data model, its lossless JSON round trip and text rendering."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from typing import Any

import orjson
import pytest

from distcheck.report import (
    REPORT_VERDICTS,
    REPORT_VERSION,
    Attempt,
    Frame,
    HelperDiagnosis,
    OutputVerdict,
    RankCounts,
    TraceReport,
    WorkerError,
)
from distcheck.report.parts import ReportMeta
from distcheck.spec import HelperAdapter, MLIPSpec

PRIOR = MLIPSpec.from_dict(
    {
        "format": "distcheck-spec",
        "version": 1,
        "output_kinds": {"energy": "per_graph", "forces": "per_node", "charges": "per_node"},
        "owned_only_outputs": ["charges"],
    }
)

REMEDY = HelperAdapter(kind="reduction", module_path="aimnet.nbops", attr_name="mol_sum").to_dict()


def _fixed_spec() -> MLIPSpec:
    spec = PRIOR.copy()
    spec.distribution.third_party_helpers.append(HelperAdapter.from_dict(REMEDY))
    spec.distribution.policy.halo_width = 5.5
    return spec


def _verdict(name: str, kind: str, abs_diff: float | None, *, status: str = "ok", n_total: int = 12) -> OutputVerdict:
    passed = status == "ok"
    return OutputVerdict(
        name=name,
        kind=kind,
        passed=passed,
        max_abs_diff=abs_diff,
        max_rel_diff=None if abs_diff is None else abs_diff / 2,
        status=status,
        worst_index=None if passed else [3, 1],
        n_failing=0 if passed else min(5, n_total),
        n_total=n_total,
    )


def _health(degenerate: list[str] | None = None) -> dict[str, Any]:
    return {
        "per_rank": {0: {"owned": 7, "halo": 4, "remote": 5}, 1: {"owned": 5, "halo": 6, "remote": 7}},
        "degenerate": degenerate or [],
    }


def _helper(*, wrapped: bool = False) -> HelperDiagnosis:
    if wrapped:
        return HelperDiagnosis(
            module="aimnet.nbops",
            function="mol_sum",
            n_calls_ref=2,
            n_calls_per_rank={0: 2, 1: 2},
            pattern="per_system_sum",
            pattern_confidence=0.93,
            consistency_check="sum_over_ranks_matches_ref",
            consistency_passed=True,
            already_wrapped=True,
            suspected_gap=None,
            likely_remedy=None,
            source={"file": "/site-packages/aimnet/nbops.py", "line": 42},
            divergence_notes=[],
        )
    return HelperDiagnosis(
        module="aimnet.nbops",
        function="mol_sum",
        n_calls_ref=2,
        n_calls_per_rank={0: 2, 1: 2},
        pattern="per_system_sum",
        pattern_confidence=0.93,
        consistency_check="sum_over_ranks_matches_ref",
        consistency_passed=False,
        already_wrapped=False,
        suspected_gap="per-rank results are partial sums over owned+halo atoms",
        likely_remedy=dict(REMEDY),
        source={"file": "/site-packages/aimnet/nbops.py", "line": 42},
        divergence_notes=["rank sums add up to the reference within 1e-9"],
    )


def _error() -> WorkerError:
    return WorkerError(
        type="RuntimeError",
        message="element 0 of tensors does not require grad and does not have a grad_fn",
        rank=1,
        phase="backward",
        frames=[
            Frame("/proj/model.py", 80, "forward"),
            Frame("/proj/layers/energy.py", 17, "energy_head"),
            Frame("/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", 251, "grad"),
        ],
        hint="the distributed forward severed the autograd graph; rebind the result of index_add_",
        traceback="Traceback (most recent call last):\n  ...\nRuntimeError: element 0 ...",
    )


def _attempt(
    index: int,
    spec: MLIPSpec,
    *,
    passed: bool,
    rule: str | None = None,
    rationale: str = "prior spec",
    error: WorkerError | None = None,
    verdicts: dict[str, OutputVerdict] | None = None,
    degenerate: list[str] | None = None,
    helpers: list[HelperDiagnosis] | None = None,
    layer_divergence: dict[str, Any] | None = None,
) -> Attempt:
    if verdicts is None:
        if passed:
            verdicts = {
                "energy": _verdict("energy", "per_graph", 2.5e-7),
                "forces": _verdict("forces", "per_node", 1.25e-6),
            }
        else:
            verdicts = {
                "energy": _verdict("energy", "per_graph", 0.75, status="mismatch", n_total=2),
                "forces": _verdict("forces", "per_node", math.nan, status="nonfinite"),
            }
    return Attempt(
        index=index,
        spec=spec,
        rationale=rationale,
        rule=rule,
        passed=passed,
        max_abs_diff={k: v.max_abs_diff for k, v in verdicts.items()},
        max_rel_diff={k: v.max_rel_diff for k, v in verdicts.items()},
        verdicts=verdicts,
        handler_counts={"per_system_reduce": 4, "halo_read": 12},
        error=error,
        helper_diagnostics=helpers or [],
        layer_divergence=layer_divergence,
        partition_health=_health(degenerate),
        halo_completeness={"complete": True, "per_rank": {0: {"missing": 0}, 1: {"missing": 0}}},
        timings={"run": 1.5, "consolidate": 0.02},
    )


def _report(attempts: list[Attempt], *, ok: bool | None = None, spec: MLIPSpec | None = None) -> TraceReport:
    return TraceReport(
        ok=any(a.passed for a in attempts) if ok is None else ok,
        spec=spec or (attempts[-1].spec if attempts else PRIOR),
        attempts=attempts,
        next_action="Declare aimnet.nbops.mol_sum as a reduction helper\nThe validated spec is saved to model.json",
        meta={
            "world_size": 2,
            "device": "cuda:0",
            "backend": "gloo",
            "atol": {"energy": 1e-5, "default": 1e-4},
            "rtol": 1e-4,
            "versions": {"torch": "2.5.1", "distcheck": "0.1.0"},
            "timings": {"reference": 0.8, "total": math.inf},
        },
        target={
            "factory": {"file": "/proj/model.py", "line": 12, "qualname": "model_factory"},
            "sample": {"file": "/proj/model.py", "line": 30, "qualname": "sample_batch"},
            "spec_path": "/proj/model.distspec.json",
        },
    )


@pytest.fixture
def rich_report() -> TraceReport:
    """Three attempts: a crash, a failing run with a flagged helper, a passing fix."""
    crashed = _attempt(0, PRIOR, passed=False, error=_error(), verdicts={})
    failing = _attempt(
        1,
        PRIOR,
        passed=False,
        rule="autofix.detach_check",
        rationale="re-run with the autograd check relaxed",
        helpers=[_helper()],
        layer_divergence={  # the shape `validate.layers.compare_layers` writes, plus an int-keyed dict
            "first_divergent": {
                "module": "interactions.1.message",
                "class": "pkg.layers.Message",
                "key": "interactions.1.message#0",
                "rel_diff": math.inf,
                "ranks_sum": [1.0, -math.inf],
                "ref_sum": [1.0, 2.0],
            },
            "checked": 7,
            "max_rel_diff": math.inf,
            "per_rank": {0: -math.inf, 1: 0.5},
        },
    )
    fixed = _attempt(
        2,
        _fixed_spec(),
        passed=True,
        rule="helpers.declare_reduction",
        rationale="declare aimnet.nbops.mol_sum as a reduction helper (per-system sum over atoms)",
        helpers=[_helper(wrapped=True)],
    )
    fixed.reused_run = True
    fixed.timings["nan_timing"] = math.nan
    return _report([crashed, failing, fixed])


# -- JSON round trip --------------------------------------------------------------------------------


def _no_constants(name: str) -> Any:
    raise AssertionError(f"JSON contains the non-standard literal {name}")


def test_round_trip_is_lossless(rich_report: TraceReport) -> None:
    text = rich_report.to_json()
    again = TraceReport.from_json(text)
    assert again == rich_report
    assert again.to_json() == text
    # Also through bytes and the indented form.
    assert TraceReport.from_json(text.encode("utf-8")) == rich_report
    indented = rich_report.to_json(indent=True)
    assert indented.endswith("\n") and "\n  " in indented
    assert TraceReport.from_json(indented) == rich_report
    assert TraceReport.from_dict(rich_report.to_dict()) == rich_report


def test_json_is_strict_utf8_json(rich_report: TraceReport) -> None:
    rich_report.meta.extra["note"] = "halo 5.5 Å — ok"
    raw = rich_report.to_json().encode("utf-8")
    parsed = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
    assert parsed == orjson.loads(raw)
    assert parsed["report_version"] == REPORT_VERSION
    assert parsed["verdict"] == "passed"
    assert parsed["fix_applied"] == rich_report.attempts[2].rationale
    assert parsed["best_attempt"] == 2
    assert parsed["meta"]["note"] == "halo 5.5 Å — ok"
    forces = parsed["attempts"][1]["verdicts"]["forces"]
    assert forces["max_abs_diff"] == "NaN"
    assert parsed["attempts"][1]["failing_outputs"] == ["energy", "forces"]
    assert parsed["attempts"][1]["helper_diagnostics"][0]["qualname"] == "aimnet.nbops.mol_sum"
    assert parsed["attempts"][1]["helper_diagnostics"][0]["n_calls_per_rank"] == {"0": 2, "1": 2}
    assert parsed["attempts"][1]["layer_divergence"]["max_rel_diff"] == "Infinity"
    assert parsed["attempts"][1]["layer_divergence"]["per_rank"] == {"0": "-Infinity", "1": 0.5}
    assert parsed["meta"]["timings"]["total"] == "Infinity"
    assert TraceReport.from_dict(parsed) == rich_report


def test_non_finite_floats_come_back(rich_report: TraceReport) -> None:
    again = TraceReport.from_json(rich_report.to_json())
    v = again.attempts[1].verdicts["forces"]
    assert v.max_abs_diff is not None and math.isnan(v.max_abs_diff)
    assert v.max_rel_diff is not None and math.isnan(v.max_rel_diff)
    mad = again.attempts[1].max_abs_diff["forces"]
    assert mad is not None and math.isnan(mad)
    assert math.isnan(again.attempts[2].timings["nan_timing"])
    ld = again.attempts[1].layer_divergence
    assert ld is not None
    assert ld.first_divergent is not None
    assert ld.max_rel_diff == math.inf and ld.first_divergent.ranks_sum[1] == -math.inf
    assert ld.extra["per_rank"][0] == -math.inf  # a key the record does not name survives, int keys too
    assert again.meta.timings["total"] == math.inf
    assert again.attempts[1].verdicts["energy"].max_abs_diff == 0.75


def test_strings_that_look_like_non_finite_floats_stay_strings(rich_report: TraceReport) -> None:
    tricky = ["NaN", "Infinity", "-Infinity", "~NaN", "~~Infinity", "nan", "~", "~x"]
    rich_report.meta.extra["strings"] = tricky
    rich_report.meta.extra["floats"] = [math.nan, math.inf, -math.inf, -0.0, 1e300]
    again = TraceReport.from_json(rich_report.to_json())
    assert again.meta.extra["strings"] == tricky
    assert all(isinstance(s, str) for s in again.meta.extra["strings"])
    floats = again.meta.extra["floats"]
    assert math.isnan(floats[0]) and floats[1:3] == [math.inf, -math.inf]
    assert floats[3] == 0.0 and math.copysign(1.0, floats[3]) == -1.0
    assert floats[4] == 1e300


def test_int_keys_are_restored(rich_report: TraceReport) -> None:
    again = TraceReport.from_json(rich_report.to_json())
    helper = again.attempts[1].helper_diagnostics[0]
    assert helper.n_calls_per_rank == {0: 2, 1: 2}
    assert all(type(k) is int for k in helper.n_calls_per_rank)
    per_rank = again.attempts[1].partition_health.per_rank
    assert set(per_rank) == {0, 1} and all(type(k) is int for k in per_rank)
    assert per_rank[1] == RankCounts(owned=5, halo=6, remote=7)
    assert set(again.attempts[1].halo_completeness.extra["per_rank"]) == {0, 1}
    # Keys under other names stay strings, even when they look like numbers.
    rich_report.meta.extra["by_layer"] = {"0": 1.0, "1": 2.0}
    assert TraceReport.from_json(rich_report.to_json()).meta.extra["by_layer"] == {"0": 1.0, "1": 2.0}


def test_equality_notices_differences(rich_report: TraceReport) -> None:
    other = TraceReport.from_json(rich_report.to_json())
    other.attempts[1].verdicts["forces"].max_abs_diff = 1.0  # was NaN
    assert other != rich_report
    other = TraceReport.from_json(rich_report.to_json())
    other.attempts[1].helper_diagnostics[0].n_calls_per_rank[1] = 3
    assert other != rich_report
    other = TraceReport.from_json(rich_report.to_json())
    other.attempts[2].spec.distribution.policy.halo_width = 6.0
    assert other != rich_report
    other = TraceReport.from_json(rich_report.to_json())
    other.meta.extra["strings"] = ["NaN"]
    rich_report.meta.extra["strings"] = [math.nan]
    assert other != rich_report


def test_round_trip_of_minimal_report() -> None:
    report = TraceReport(ok=False, spec=MLIPSpec(), attempts=[], next_action="", meta=ReportMeta())
    text = report.to_json()
    assert TraceReport.from_json(text) == report
    assert TraceReport.from_json(text).target is None


def test_values_json_cannot_hold_are_refused(rich_report: TraceReport) -> None:
    rich_report.meta.extra["bad"] = {"x": object()}
    with pytest.raises(TypeError, match=r"meta\.bad\.x"):
        rich_report.to_json()
    del rich_report.meta.extra["bad"]
    rich_report.meta.extra["keys"] = {1: "one"}
    with pytest.raises(TypeError, match=r"int key"):
        rich_report.to_json()


def test_tuples_and_number_like_values_are_normalised(rich_report: TraceReport) -> None:
    rich_report.meta.extra["shape"] = (3, 4)
    again = TraceReport.from_json(rich_report.to_json())
    assert again.meta.extra["shape"] == [3, 4]
    assert again == rich_report


# -- reading is strict ------------------------------------------------------------------------------


def test_newer_report_version_is_refused(rich_report: TraceReport) -> None:
    d = rich_report.to_dict()
    d["report_version"] = REPORT_VERSION + 1
    with pytest.raises(ValueError, match="upgrade distcheck"):
        TraceReport.from_dict(d)
    with pytest.raises(ValueError, match="upgrade distcheck"):
        TraceReport.from_json(orjson.dumps(d))


def test_missing_version_unknown_fields_and_bad_values_are_refused(rich_report: TraceReport) -> None:
    d = rich_report.to_dict()
    no_version = copy.deepcopy(d)
    del no_version["report_version"]
    with pytest.raises(ValueError, match="report_version"):
        TraceReport.from_dict(no_version)
    unknown = copy.deepcopy(d)
    unknown["attempts"][1]["surprise"] = 1
    with pytest.raises(ValueError, match=r"attempts\[1\]\.surprise"):
        TraceReport.from_dict(unknown)
    bad_status = copy.deepcopy(d)
    bad_status["attempts"][1]["verdicts"]["energy"]["status"] = "meh"
    with pytest.raises(ValueError, match=r"attempts\[1\]\.verdicts\.energy\.status"):
        TraceReport.from_dict(bad_status)
    missing = copy.deepcopy(d)
    del missing["attempts"][0]["error"]["frames"]
    with pytest.raises(ValueError, match=r"attempts\[0\]\.error\.frames"):
        TraceReport.from_dict(missing)
    bad_float = copy.deepcopy(d)
    bad_float["attempts"][2]["timings"]["run"] = "fast"
    with pytest.raises(ValueError, match=r"timings\.run"):
        TraceReport.from_dict(bad_float)
    bad_spec = copy.deepcopy(d)
    bad_spec["spec"]["system_reductions"] = "yes"
    with pytest.raises(ValueError, match=r"\$\.spec"):
        TraceReport.from_dict(bad_spec)
    with pytest.raises(ValueError, match="not valid JSON"):
        TraceReport.from_json("{")


# -- derived properties -----------------------------------------------------------------------------


def test_fix_applied() -> None:
    first_passes = _report([_attempt(0, PRIOR, passed=True), _attempt(1, PRIOR, passed=True, rationale="other")])
    assert first_passes.fix_applied is None
    later_passes = _report(
        [
            _attempt(0, PRIOR, passed=False),
            _attempt(1, _fixed_spec(), passed=True, rationale="declare mol_sum", rule="helpers"),
        ]
    )
    assert later_passes.fix_applied == "declare mol_sum"
    none_pass = _report([_attempt(0, PRIOR, passed=False), _attempt(1, PRIOR, passed=False, rationale="x")])
    assert none_pass.fix_applied is None
    assert _report([]).fix_applied is None


def test_verdict_in_all_four_cases() -> None:
    passed = _report([_attempt(0, PRIOR, passed=False), _attempt(1, PRIOR, passed=True)])
    assert passed.verdict == "passed"
    failed = _report([_attempt(0, PRIOR, passed=False)])
    assert failed.verdict == "failed"
    inconclusive = _report([_attempt(0, PRIOR, passed=True, degenerate=["rank 1 has no remote atoms"])])
    assert inconclusive.verdict == "inconclusive"
    error = _report([_attempt(0, PRIOR, passed=False, error=_error(), verdicts={})])
    assert error.verdict == "error"
    assert {r.verdict for r in (passed, failed, inconclusive, error)} == set(REPORT_VERDICTS)


def test_verdict_edge_cases() -> None:
    assert _report([]).verdict == "error"
    # An error after the outputs were compared is a failure, not an error.
    with_verdicts = _report([_attempt(0, PRIOR, passed=False, error=_error())])
    assert with_verdicts.verdict == "failed"
    # A failing run beats a crash when picking the best attempt.
    crash_then_fail = _report(
        [_attempt(0, PRIOR, passed=False), _attempt(1, PRIOR, passed=False, error=_error(), verdicts={})]
    )
    assert crash_then_fail.best_attempt is crash_then_fail.attempts[0]
    assert crash_then_fail.verdict == "failed"
    # A degenerate partition on a failing best attempt is inconclusive too.
    assert _report([_attempt(0, PRIOR, passed=False, degenerate=["rank 0 owns no atoms"])]).verdict == "inconclusive"
    # A degenerate partition in an earlier, non-best attempt does not matter.
    mixed = _report(
        [_attempt(0, PRIOR, passed=False, degenerate=["rank 0 owns no atoms"]), _attempt(1, PRIOR, passed=True)]
    )
    assert mixed.verdict == "passed"


def test_best_attempt_prefers_pass_then_fewest_failures() -> None:
    one_bad = {
        "energy": _verdict("energy", "per_graph", 1e-7),
        "forces": _verdict("forces", "per_node", 3.0, status="mismatch"),
    }
    a0 = _attempt(0, PRIOR, passed=False)
    a1 = _attempt(1, PRIOR, passed=False, verdicts=one_bad)
    a2 = _attempt(2, PRIOR, passed=False)
    assert _report([a0, a1, a2]).best_attempt is a1
    a3 = _attempt(3, PRIOR, passed=True)
    a4 = _attempt(4, PRIOR, passed=True)
    assert _report([a0, a3, a4]).best_attempt is a3
    assert _report([]).best_attempt is None


def test_failing_outputs_and_qualname() -> None:
    attempt = _attempt(0, PRIOR, passed=False)
    assert attempt.failing_outputs == ["energy", "forces"]
    assert _attempt(0, PRIOR, passed=True).failing_outputs == []
    helper = _helper()
    assert helper.qualname == "aimnet.nbops.mol_sum"
    assert helper.qualname == HelperAdapter.from_dict(REMEDY).qualname


def test_innermost_in() -> None:
    err = _error()
    assert err.innermost_in("/proj") == Frame("/proj/layers/energy.py", 17, "energy_head")
    assert err.innermost_in("/proj/") == Frame("/proj/layers/energy.py", 17, "energy_head")
    assert err.innermost_in("/proj/model.py") == Frame("/proj/model.py", 80, "forward")
    assert err.innermost_in("/venv") == err.frames[-1]
    assert err.innermost_in("/pro") is None  # a prefix of a name is not a parent directory
    assert err.innermost_in("/elsewhere") is None
    assert WorkerError("E", "m", None, "setup", [], "h").innermost_in("/proj") is None


# -- text rendering ---------------------------------------------------------------------------------


def test_render_text_contents(rich_report: TraceReport) -> None:
    text = rich_report.render_text()
    lines = text.splitlines()
    assert lines[0] == "PASSED AFTER FIX: Declare aimnet.nbops.mol_sum as a reduction helper"
    assert "The validated spec is saved to model.json" in text
    # numbered from 1, as the diagnostics and the progress messages number them (docs/diagnostics.md)
    for index in range(3):
        assert f"attempt {index + 1}" in text
    assert "attempt 0" not in text
    assert "[helpers.declare_reduction] PASS" in text
    assert "[autofix.detach_check] FAIL" in text
    assert "fix applied: declare aimnet.nbops.mol_sum" in text
    # Output table: names, kinds, numbers and tolerances.
    for word in ("energy", "forces", "per_graph", "per_node", "max abs", "atol", "rtol"):
        assert word in text
    assert "2.5e-07" in text and "1.25e-06" in text and "0.75" in text
    assert "1e-05" in text and "0.0001" in text
    assert "NaN" in text
    assert "mismatch (2/2)" in text and "nonfinite (5/12)" in text
    # Handler counts, error, helper, layers, partition.
    assert "per_system_reduce=4" in text and "halo_read=12" in text
    assert "RuntimeError on rank 1 during backward" in text
    assert "hint: the distributed forward severed the autograd graph" in text
    assert "at /proj/layers/message.py" not in text
    assert "at /venv/lib/python3.11/site-packages/torch/autograd/__init__.py:251 in grad" in text
    assert "helper aimnet.nbops.mol_sum: pattern per_system_sum (0.93)" in text
    assert "suspected gap: per-rank results are partial sums" in text
    assert orjson.dumps(REMEDY).decode() in text
    assert "first divergent module: interactions.1.message (pkg.layers.Message), rel diff inf" in text
    assert "rank 0: owned 7 halo 4 remote 5; rank 1: owned 5 halo 6 remote 7" in text
    assert "re-consolidated an earlier run" in text
    assert text.count("flagged helper") == 1  # the wrapped helper of the passing attempt is not flagged
    assert "helpers traced: aimnet.nbops.mol_sum (adapter declared)" in text
    # The final spec, as JSON, ends the report.
    tail = text[text.index("final spec:") + len("final spec:") :]
    assert MLIPSpec.from_json(tail) == rich_report.spec


def test_render_text_prefers_frames_under_root(rich_report: TraceReport) -> None:
    rich_report.meta.root = "/proj"
    text = rich_report.render_text()
    assert "at /proj/layers/energy.py:17 in energy_head" in text


def test_render_text_degenerate_and_error_verdicts() -> None:
    inconclusive = _report(
        [_attempt(0, PRIOR, passed=True, degenerate=["rank 1 has no remote atoms: a pass proves nothing"])]
    )
    text = inconclusive.render_text()
    assert text.splitlines()[0].startswith("INCONCLUSIVE: ")
    assert "degenerate: rank 1 has no remote atoms: a pass proves nothing" in text
    crashed = _report([_attempt(0, PRIOR, passed=False, error=_error(), verdicts={})])
    assert crashed.render_text().splitlines()[0].startswith("ERROR: ")


def test_render_text_escapes_nothing_weird(rich_report: TraceReport) -> None:
    rich_report.next_action = 'Set "halo_width": 5.5 Å in C:\\proj\\spec.json\nthen re-run'
    err = rich_report.attempts[0].error
    assert err is not None
    err.message = "bad value \x1b[31mred\x1b[0m ünïcode"
    plain = rich_report.render_text()
    assert plain.splitlines()[0] == 'PASSED AFTER FIX: Set "halo_width": 5.5 Å in C:\\proj\\spec.json'
    assert "\x1b" not in plain
    assert "\\x1b[31mred" in plain  # the control character is shown, not executed
    assert "ünïcode" in plain
    assert "\\u" not in plain and "\\n" not in plain
    assert all(ch == "\n" or ch.isprintable() for ch in plain)
    colored = rich_report.render_text(color=True)
    assert "\x1b[33mPASSED AFTER FIX\x1b[0m" in colored
    assert "\x1b[31m" in colored
    assert colored.splitlines()[0].endswith("5.5 Å in C:\\proj\\spec.json")


def test_render_text_without_attempts_or_tolerances() -> None:
    report = TraceReport(ok=False, spec=MLIPSpec(), attempts=[], next_action="", meta=ReportMeta())
    text = report.render_text()
    assert text.splitlines()[0] == "ERROR"
    assert "final spec:" in text


# -- import hygiene ---------------------------------------------------------------------------------


@pytest.mark.procs
def test_import_does_not_import_torch() -> None:
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    server = os.path.join(os.path.dirname(os.path.dirname(here)), "server")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (server, env.get("PYTHONPATH")) if p)
    code = "import distcheck.report, sys; assert 'torch' not in sys.modules, 'torch was imported'"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# -- trust-check records (report.checks) -----------------------------------------------------------


def _checked_report() -> TraceReport:
    from distcheck.report import ReceptiveField, RoundoffFloor, SampleWarning, SuspiciousOutput, SystemHealth

    passed = _attempt(0, PRIOR, passed=True)
    passed.suspicious = [SuspiciousOutput("energy", "per_graph", 2.5e-7, 1e-13, 2.5e6, 100.0)]
    passed.verdicts["energy"].status, passed.verdicts["energy"].passed, passed.passed = "suspicious", False, False
    passed.system_health = [SystemHealth(1, 8, 0, 4, 4, 0, "no_remote", "system 1 (8 atoms) is held whole by rank 0")]
    report = _report([passed])
    report.receptive_field = ReceptiveField(
        "measured", 3.0, 2, 6.0, 3, 9.0, "forces", 2, True, halo_width_set=9.5, note="2 atoms", lower_bound=True
    )
    report.roundoff = RoundoffFloor(
        "measured", {"energy": 1e-13, "forces": math.inf}, {"energy": 1e-14, "forces": None}, 100.0, 0.5, "x"
    )
    report.sample_warnings = [SampleWarning("zero_forces", "forces ~0", "rattle", [0], ["forces"])]
    return report


def test_trust_check_records_round_trip() -> None:
    report = _checked_report()
    text = report.to_json()
    again = TraceReport.from_json(text)
    assert again == report and again.to_json() == text
    assert again.receptive_field == report.receptive_field and again.roundoff == report.roundoff
    assert again.attempts[0].suspicious == report.attempts[0].suspicious
    assert again.attempts[0].system_health == report.attempts[0].system_health
    assert again.sample_warnings == report.sample_warnings
    assert again.attempts[0].verdicts["energy"].status == "suspicious"
    bare = _report([_attempt(0, PRIOR, passed=True)])
    doc = bare.to_dict()
    assert not {"receptive_field", "roundoff", "sample_warnings"} & set(doc)  # written only when set
    del doc["attempts"][0]["suspicious"], doc["attempts"][0]["system_health"]  # an older report
    assert TraceReport.from_dict(doc) == bare
    text = report.render_text()
    assert "receptive field: declared 2 × 3 Å" in text and "UNDER-DECLARED" in text and "a lower bound" in text
    assert "suspicious: energy" in text and "sample: forces ~0 rattle" in text


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("receptive_field", "status"), "guessed"),
        (("roundoff", "status"), "maybe"),
        (("sample_warnings", 0, "kind"), "odd"),
        (("attempts", 0, "system_health", 0, "problem"), "no_luck"),
        (("attempts", 0, "suspicious", 0, "ratio"), "big"),
    ],
)
def test_trust_check_records_are_read_strictly(where: tuple[Any, ...], value: Any) -> None:
    doc = _checked_report().to_dict()
    node: Any = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(ValueError, match=str(where[-1])):
        TraceReport.from_dict(doc)


# -- rank disagreements, rollbacks, crash traces, the stored best attempt ---------------------------


def test_round_trip_of_disagreements_rollbacks_and_crash_traces() -> None:
    from distcheck.report import CrashTrace, DivergentModule, RankDisagreement, Rollback

    module = DivergentModule(module="readout.shift", cls="pkg.Shift", key="readout.shift#0", ranks=[1], max_abs=1.5)
    split = RankDisagreement(
        output="energy",
        kind="per_graph",
        ranks=[0, 1],
        off_reference=[1],
        max_abs=1.0,
        max_rel=math.nan,
        systems=[1],
        first_module=module,
    )
    failing = _attempt(0, PRIOR, passed=False)
    failing.rank_disagreements = [split, RankDisagreement("total", "global", [0, 1], [], 2e-5, 1e-5)]
    worse = _attempt(1, _fixed_spec(), passed=False, rule="widen_halo")
    worse.rolled_back = Rollback(to_attempt=0, reason="larger differences: forces max rel 0.9 (was 0.1)")
    crashed = _attempt(2, PRIOR, passed=False, error=_error(), verdicts={})
    crashed.crash_traces = [CrashTrace(rank=1, phase="forward", handler_counts={"halo_read": 2}, modules=["a", "b"])]
    report = _report([failing, worse, crashed])
    assert report.best_index == 0  # same count of failing outputs: the earlier one
    text = report.to_json()
    again = TraceReport.from_json(text)
    assert again == report and again.to_json() == text
    a0, a1, a2 = again.attempts
    assert a0.rank_disagreements[0].first_module == module and a0.rank_disagreements[1].first_module is None
    assert a1.rolled_back == worse.rolled_back and a2.crash_traces[0].last_module == "b"
    doc = report.to_dict()
    assert doc["attempts"][0]["rank_disagreements"][0]["first_module"]["class"] == "pkg.Shift"
    assert doc["attempts"][0]["rank_disagreements"][0]["summary"].startswith("ranks 0, 1 disagree on energy")
    # older reports have none of these fields
    for a in doc["attempts"]:
        del a["rank_disagreements"], a["rolled_back"], a["crash_traces"]
    old = TraceReport.from_dict(doc)
    assert old.attempts[0].rank_disagreements == [] and old.attempts[1].rolled_back is None
    rendered = report.render_text()
    assert "ranks disagree: ranks 0, 1 disagree on energy" in rendered
    assert "rolled back to attempt 1:" in rendered and "attempt 0" not in rendered
    assert "last module returned: b" in rendered
    bad = report.to_dict()
    bad["attempts"][0]["rank_disagreements"][0]["ranks"] = "0,1"
    with pytest.raises(ValueError, match=r"attempts\[0\]\.rank_disagreements\[0\]\.ranks|rank_disagreements"):
        TraceReport.from_dict(bad)


def test_the_best_attempt_is_stored_and_read_back() -> None:
    attempts = [_attempt(0, PRIOR, passed=False), _attempt(1, PRIOR, passed=False)]
    stored = TraceReport(ok=False, spec=PRIOR, attempts=attempts, next_action="", meta=ReportMeta(), best_index=1)
    doc = stored.to_dict()
    assert doc["best_attempt"] == 1 and TraceReport.from_dict(doc).best_attempt is not None
    assert TraceReport.from_dict(doc).best_index == 1  # read, not recomputed (the rule would give 0)
    del doc["best_attempt"]
    assert TraceReport.from_dict(doc).best_index == 0  # an older report: computed by the one rule
    doc["best_attempt"] = None
    with pytest.raises(ValueError, match="best_attempt"):
        TraceReport.from_dict(doc)
