"""Junk outputs get a verdict, not a crash: every way a wrapper's outputs can be unusable ends in an
errored attempt naming the output (and the rank) and what to change, through the library and the CLI
(whose --json / --junit files are always written), and the comparison and next_action are total over
NaN, inf and missing numbers."""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch

from distcheck import cli, validate_on_cpu
from distcheck.report import Attempt, OutputVerdict, TraceReport
from distcheck.report.parts import ReportMeta
from distcheck.runtime.consolidate import RankRows, consolidate
from distcheck.runtime.factory import load_object
from distcheck.runtime.model import WrapperError
from distcheck.spec import MLIPSpec
from distcheck.validate.diff import compare_output
from distcheck.validate.next_action import next_action

pytestmark = pytest.mark.procs

HERE = os.path.dirname(os.path.abspath(__file__))
JUNK = os.path.join(HERE, "junk_models", "outputs.py")


def _sample() -> Any:
    return load_object(f"{JUNK}:sample_batch")()


def _validate(junk: str, **options: Any) -> tuple[TraceReport, list[str]]:
    events: list[str] = []
    report = validate_on_cpu(
        f"{JUNK}:factory_{junk}",
        _sample(),
        world_size=2,
        timeout_sec=60,
        progress=lambda event, info: events.append(event),
        **options,
    )
    assert TraceReport.from_json(report.to_json()) == report  # whatever went wrong, the report is JSON
    return report, events


@pytest.fixture(autouse=True)
def _no_processes_left() -> Iterator[None]:
    yield
    me = psutil.Process()
    left = []
    for child in me.children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.Error:
            continue
        if ("forkserver" in cmd or "resource_tracker" in cmd) and child.ppid() == me.pid:
            continue  # the warm pool stays for the life of the process
        left.append((child.pid, cmd))
    assert not left, f"processes left behind: {left}"


@pytest.mark.parametrize("junk", ["clean", "float32_forces", "complex_forces"])
def test_the_clean_model_and_every_floating_dtype_pass(junk: str) -> None:
    """The baseline: without junk the tiny model validates (so every failure below is the junk's), and
    any floating-point or complex dtype is a valid output."""
    report, _ = _validate(junk)
    assert report.verdict == "passed", report.next_action


# --------------------------------------------------------------------------------------------------
# found in the single-process reference: no distributed attempt is made

REFERENCE_JUNK = {
    "list": (None, "returned list"),
    "tuple": (None, "returned tuple"),
    "none_value": ("forces", "returned NoneType for output 'forces'"),
    "float_value": ("energy", "returned float for output 'energy'"),
    "numpy_value": ("forces", "returned numpy.ndarray for output 'forces'"),
    "int_dtype": ("energy", "output 'energy' is int64"),
    "int_forces": ("forces", "output 'forces' is int32"),
    "bool_dtype": ("mask", "output 'mask' is bool"),
}


@pytest.mark.parametrize("junk", sorted(REFERENCE_JUNK))
def test_unusable_reference_outputs_are_an_error_before_any_attempt(junk: str) -> None:
    output, said = REFERENCE_JUNK[junk]
    report, events = _validate(junk)
    assert report.verdict == "error"
    assert "attempt_started" not in events
    (attempt,) = report.attempts
    assert attempt.error is not None and attempt.error.type == "WrapperError"
    assert said in attempt.error.message
    head = report.next_action.split("\n")[0]
    assert said in head and "internal error" not in report.next_action
    assert "distcheck/runtime/model.py" not in head  # no pointer into distcheck's own code
    if junk.endswith("dtype"):
        assert "floating point" in head and report.meta.output_problems[0].output == output


def _nonfinite(junk: str) -> dict[str, dict[str, int]]:
    """What the model returns in one process, counted here: NaN and inf per output."""
    outputs = load_object(f"{JUNK}:factory_{junk}")()(_sample())
    found = {}
    for name, value in outputs.items():
        nan, inf = int(torch.isnan(value).sum()), int(torch.isinf(value).sum())
        if nan or inf:
            found[name] = {"nan": nan, "inf": inf, "elements": value.numel()}
    return found


@pytest.mark.parametrize("junk", ["nan", "inf", "neg_inf_one"])
def test_nonfinite_reference_is_a_model_problem_and_runs_no_attempt(junk: str) -> None:
    expected = _nonfinite(junk)
    assert expected  # the junk really is non-finite in one process
    report, events = _validate(junk)
    assert report.verdict == "error"
    assert "attempt_started" not in events
    (attempt,) = report.attempts
    assert attempt.error is not None and attempt.error.type == "NonFiniteReference"
    assert report.meta.reference_nonfinite == expected
    head = report.next_action.split("\n")[0]
    assert "model or the sample, not of distribution" in head
    assert "fix the model or the sample in one process first" in head
    for name, counts in expected.items():
        assert name in head
        if counts["nan"]:
            assert f"{counts['nan']} NaN" in head
        if counts["inf"]:
            assert f"{counts['inf']} inf" in head


@pytest.mark.parametrize(
    "kinds, output, fitting",
    [({"forces": "per_graph"}, "forces", "per_node"), ({"energy": "per_node"}, "energy", "per_graph")],
)
def test_a_kind_that_contradicts_the_reference_shape_is_an_error(
    kinds: dict[str, str], output: str, fitting: str
) -> None:
    spec = {"format": "distcheck-spec", "version": 1, "output_kinds": kinds}
    report, events = _validate("clean", spec=spec)
    assert report.verdict == "error" and "attempt_started" not in events
    problem = report.meta.output_problems[0]
    assert problem.output == output and problem.problem == "kind"
    assert f"set output_kinds.{output} to {fitting}" in report.next_action.split("\n")[0]


# --------------------------------------------------------------------------------------------------
# found on the ranks: one errored attempt, no auto-fix after it

RANK_JUNK = {
    # junk: (output, rank named, words of the message)
    "drop_row_ranks": ("forces", 0, "one row per atom"),
    "drop_row_rank1": ("forces", 1, "one row per atom"),
    "extra_row_rank1": ("forces", 1, "one row per atom"),
    "scalar_forces_ranks": ("forces", 0, "returned a scalar"),
    "flat_forces_ranks": ("forces", 0, "one row per atom"),
    "trailing_ranks": ("forces", 0, "trailing shape [3]"),
    "trailing_rank1": ("forces", 1, "trailing shape"),
    "energy_column_ranks": ("energy", 0, "same shape on every rank"),
    "energy_column_rank1": ("energy", 1, "shape"),
    "missing_ranks": ("forces", 0, "returned no output 'forces'"),
    "missing_rank1": ("forces", 1, "not from rank 1"),
    "extra_ranks": ("debug", 0, "which the single-process run did not"),
    "extra_rank1": ("debug", 1, "came from rank 1 but not from rank 0"),
    "int_dtype_ranks": ("energy", 0, "is int64 on rank 0"),
    "int_dtype_rank1": ("energy", 1, "is int64 on rank 1"),
    "bool_dtype_ranks": ("mask", 0, "which the single-process run did not"),
    "none_value_rank1": ("forces", 1, "returned NoneType for output 'forces'"),
    "float_value_ranks": ("energy", 0, "returned float for output 'energy'"),
    "list_rank1": (None, 1, "returned list"),
}


@pytest.mark.parametrize("junk", sorted(RANK_JUNK))
def test_unusable_rank_outputs_are_an_errored_attempt_naming_output_and_rank(junk: str) -> None:
    output, rank, said = RANK_JUNK[junk]
    report, _ = _validate(junk)  # auto-fix on: no spec change can fix this, so one attempt only
    assert report.verdict == "error", report.next_action
    (attempt,) = report.attempts
    error = attempt.error
    assert error is not None and not attempt.verdicts
    assert said in error.message
    if error.phase == "outputs" or junk.endswith("_rank1"):
        assert error.rank == rank
    else:  # raised in every rank: whichever rank failed first is named
        assert error.rank in (0, 1)
    head = report.next_action.split("\n")[0]
    assert said in head and "internal error" not in report.next_action
    if output is not None:
        assert repr(output) in head
    if error.phase == "outputs":  # found by the validator (the others are raised in the rank)
        problems = report.meta.output_problems
        assert problems is not None and problems[0].output == output and problems[0].rank == rank


@pytest.mark.parametrize(
    "junk, output, what",
    [("nan_ranks", "energy", "NaN"), ("inf_ranks", "forces", "inf"), ("nan_rank1", "energy", "NaN")],
)
def test_nonfinite_rank_outputs_fail_naming_rank_output_and_kind(junk: str, output: str, what: str) -> None:
    report, _ = _validate(junk, auto_fix=False)
    assert report.verdict == "failed"
    error = report.attempts[0].error
    assert error is not None and error.type == "NonFiniteOutput"
    assert f"{what} values in output {output!r}" in error.message
    assert f"produced {what} in output {output}" in error.hint
    assert error.hint in report.next_action


# --------------------------------------------------------------------------------------------------
# consolidation: typed errors, never a bare ValueError / IndexError / RuntimeError


def _rows(n_local: int, owned: int) -> RankRows:
    return RankRows(local_ids=torch.arange(n_local), owned_mask=torch.arange(n_local) < owned)


@pytest.mark.parametrize(
    "outputs, kinds, name, rank",
    [
        ([{"f": torch.zeros(4, 3)}, {}], {}, "f", 1),  # missing on rank 1
        ([{"e": torch.zeros(1)}, {"e": torch.zeros(1), "x": torch.zeros(1)}], {}, "x", 1),  # extra on rank 1
        ([{"f": torch.zeros(4, 3)}, {"f": torch.zeros(3, 3)}], {"f": "per_node"}, "f", 1),  # rows
        ([{"f": torch.zeros(())}, {"f": torch.zeros(())}], {"f": "per_node"}, "f", 0),  # scalar per node
        ([{"f": torch.zeros(4, 3)}, {"f": torch.zeros(4, 2)}], {"f": "per_node"}, "f", 1),  # trailing shape
        ([{"s": torch.zeros(1, 3)}, {"s": torch.zeros(2, 3)}], {"s": "per_graph"}, "s", 1),  # all-reduce shape
        ([{"f": torch.zeros(4, 3, dtype=torch.float64)}, {"f": torch.zeros(4, 3)}], {"f": "per_node"}, "f", None),
    ],
)
def test_consolidation_raises_a_wrapper_error_naming_the_output(
    outputs: list[dict[str, torch.Tensor]], kinds: dict[str, str], name: str, rank: int | None
) -> None:
    spec = MLIPSpec.from_dict(
        {"format": "distcheck-spec", "version": 1, "output_kinds": kinds, "all_reduce_outputs": ["s"]}
    )
    with pytest.raises(WrapperError) as caught:
        consolidate(outputs, [_rows(4, 2), _rows(4, 2)], spec, num_atoms=4, num_systems=1)
    assert caught.value.output == name and caught.value.rank == rank
    assert repr(name) in str(caught.value)


# --------------------------------------------------------------------------------------------------
# totality over NaN, inf and missing numbers

_VALUES = [0.0, 1.0, -2.5, 1e308, -1e308, math.nan, math.inf, -math.inf]
_SHAPES: list[Callable[[torch.Tensor], torch.Tensor]] = [
    lambda t: t,  # [64, 2]
    lambda t: t[0, 0],  # a scalar
    lambda t: t[:0],  # empty
    lambda t: t[:, :1],  # [64, 1]
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.complex128, torch.int64, torch.bool])
def test_compare_output_is_total(dtype: torch.dtype) -> None:
    ref_vals = torch.tensor([[a, b] for a in _VALUES for b in _VALUES], dtype=torch.float64)
    for got_vals in (ref_vals, ref_vals.flip(0), torch.full_like(ref_vals, math.nan), ref_vals * 0):
        for kind in ("per_node", "per_graph", "global"):
            for shape_of in _SHAPES:
                ref, got = shape_of(ref_vals), shape_of(got_vals)
                if dtype.is_complex:
                    got = got.to(dtype)
                elif not dtype.is_floating_point:
                    got = torch.nan_to_num(got, nan=0.0, posinf=7.0, neginf=-7.0).to(dtype)
                v = compare_output("x", got, ref, kind, 1e-5, 1e-4)
                verdict = OutputVerdict(**v)
                assert OutputVerdict.from_dict(verdict.to_dict()) == verdict
                _next_action_of({"x": verdict}, atol=1e-5, rtol=1e-4)


def _attempt(verdicts: dict[str, OutputVerdict]) -> Attempt:
    return Attempt(
        index=0,
        spec=MLIPSpec(),
        rationale="r",
        rule=None,
        passed=all(v.passed for v in verdicts.values()),
        max_abs_diff={k: v.max_abs_diff for k, v in verdicts.items()},
        max_rel_diff={k: v.max_rel_diff for k, v in verdicts.items()},
        verdicts=verdicts,
        handler_counts={},
        error=None,
        helper_diagnostics=[],
        layer_divergence={"first_divergent": {"module": "m", "class": "C", "rel_diff": None}},
        partition_health={"per_rank": {}, "degenerate": []},
        halo_completeness={},
        timings={},
    )


def _next_action_of(verdicts: dict[str, OutputVerdict], atol: Any, rtol: Any) -> str:
    meta = ReportMeta(atol=atol, rtol=rtol, world_size=2)
    report = TraceReport(ok=False, spec=MLIPSpec(), attempts=[_attempt(verdicts)], next_action="", meta=meta)
    text = next_action(report)
    assert text.startswith(("OK — ", "FAIL — "))
    return text


@pytest.mark.parametrize("diff", [None, math.nan, math.inf, -math.inf, 3.0])
@pytest.mark.parametrize("tol", [1e-5, math.inf, {"energy": 1e-3, "default": 1e-5}, {"forces": 1e-3}, None])
def test_next_action_is_total_over_missing_and_nonfinite_numbers(diff: float | None, tol: Any) -> None:
    verdict = OutputVerdict("energy", "per_graph", False, diff, diff, "mismatch", None, 1, 1)
    text = _next_action_of({"energy": verdict}, atol=tol, rtol=tol)
    assert "energy" in text.split("\n")[0]


# --------------------------------------------------------------------------------------------------
# the CLI: exit 2, and the report files are written

CLI_JUNK = {
    "inf": "forces",
    "int_dtype": "energy",
    "drop_row_rank1": "forces",
    "missing_rank1": "forces",
    "scalar_forces_ranks": "forces",
    "extra_ranks": "debug",
}


def _files(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "out" / "report.json", tmp_path / "out" / "junit.xml"


def _junit_error(path: Path) -> str:
    root = ET.parse(path).getroot()
    errors = [e for e in root.iter("error")]
    assert errors and root.get("errors") == str(len(errors))
    return " ".join(f"{e.get('message')} {e.text}" for e in errors)


@pytest.mark.parametrize("junk", sorted(CLI_JUNK))
def test_cli_writes_the_report_files_and_exits_2(junk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = CLI_JUNK[junk]
    json_path, junit_path = _files(tmp_path)
    code = cli.main(
        ["validate", f"{JUNK}:factory_{junk}", "--sample", f"{JUNK}:sample_batch", "--device", "cpu",
         "--world-size", "2", "--timeout", "60", "--json", str(json_path), "--junit", str(junit_path)]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == cli.EXIT_ERROR, out + err
    assert "internal error" not in out + err
    assert out.startswith("ERROR") and repr(output) in out.split("\n")[0]
    report = TraceReport.from_json(json_path.read_text())
    assert report.verdict == "error" and repr(output) in report.next_action.split("\n")[0]
    assert repr(output) in _junit_error(junit_path)


def test_cli_writes_an_error_report_when_the_validation_cannot_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    json_path, junit_path = _files(tmp_path)
    missing = tmp_path / "nowhere.py"
    code = cli.main(["validate", f"{missing}:model_factory", "--json", str(json_path), "--junit", str(junit_path)])
    _, err = capsys.readouterr()
    assert code == cli.EXIT_ERROR
    report = TraceReport.from_json(json_path.read_text())
    assert report.verdict == "error"
    error = report.attempts[0].error
    assert error is not None and error.type == "ConfigError" and str(missing) in error.message
    assert error.message in err  # the same words as on stderr
    assert str(missing) in _junit_error(junit_path)


def test_cli_writes_an_error_report_for_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import distcheck.validate

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a distcheck bug")

    monkeypatch.setattr(distcheck.validate, "validate_on_cpu", broken)
    json_path, junit_path = _files(tmp_path)
    code = cli.main(
        ["validate", f"{JUNK}:factory_clean", "--sample", f"{JUNK}:sample_batch", "--device", "cpu",
         "--json", str(json_path), "--junit", str(junit_path)]
    )  # fmt: skip
    _, err = capsys.readouterr()
    assert code == cli.EXIT_ERROR and "internal error: KeyError" in err
    report = TraceReport.from_json(json_path.read_text())
    error = report.attempts[0].error
    assert report.verdict == "error" and error is not None and error.type == "KeyError"
    assert "a distcheck bug" in error.traceback
    assert "KeyError" in _junit_error(junit_path)
