"""A failing output's expected/actual compare numbers (the two values at the worst element), and the
failure sits at the culprit line when the report names one (the first op whose value departs)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from distcheck.report.failures import output_failure, output_failures
from distcheck.report.model import Attempt, OutputVerdict
from distcheck.report.ops import DivergentOp
from distcheck.report.parts import ReportMeta

META = ReportMeta(atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(
    ("kind", "index", "where"),
    [("per_node", [4, 2], "atom 4, component z"), ("per_graph", [1], "system 1"), ("global", [0, 3], "element [0, 3]")],
)
def test_expected_and_actual_are_the_two_values(kind: str, index: list[int], where: str) -> None:
    v = OutputVerdict("q", kind, False, 0.5, 0.25, "mismatch", index, 2, 10, expected_value=2.0, actual_value=2.5)
    f = output_failure(v, META)
    assert f.expected.startswith(f"q at {where}: 2 (single process; within atol 1e-06, rtol 1e-05)")
    assert f.actual.startswith(f"q at {where}: 2.5 (distributed; max abs diff 0.5")
    assert "2/10 elements out of tolerance" in f.actual and f.expected != f.actual


def test_older_verdicts_without_values_keep_the_sentences() -> None:
    v = OutputVerdict("forces", "per_node", False, 0.1, 0.2, "mismatch", [3, 0], 1, 5)
    f = output_failure(v, META)
    assert "every element equal" in f.expected and "atom 3, component x" in f.actual


def _best(first_op: DivergentOp | None) -> Attempt:
    v = OutputVerdict(
        "energy", "per_graph", False, 1.0, 1.0, "mismatch", [0], 1, 1, expected_value=1.0, actual_value=2.0
    )
    w = OutputVerdict("forces", "per_node", True, 0.0, 0.0, "ok", None, 0, 4)
    layer = None if first_op is None else SimpleNamespace(first_op=first_op)
    return cast(Attempt, SimpleNamespace(verdicts={"energy": v, "forces": w}, layer_divergence=layer))


def test_the_failure_sits_at_the_first_op_that_departs() -> None:
    op = DivergentOp(op="torch.einsum", file="/w/readout.py", line=17, function="Readout.forward")
    (f,) = output_failures(_best(op), META)
    assert f.location is not None and (f.location.file, f.location.line, f.location.function) == (
        "/w/readout.py",
        17,
        "Readout.forward",
    )
    assert f.to_dict()["location"] == {"file": "/w/readout.py", "line": 17, "function": "Readout.forward"}
    (plain,) = output_failures(_best(None), META)
    assert plain.location is None and "location" not in plain.to_dict()
