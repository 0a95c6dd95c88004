"""The first op whose value departs, in words (issue 32, item 8): the CLI's report text (layer section
and each rank disagreement) and `next_action` (the disagreement's FAIL line, the layer-divergence line,
the unknown-cause list) name the op with its file:line; without one they read as before. From the
real `divergent_op` and `rank_disagreement` reports, no processes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distcheck.report import DivergentOp, TraceReport, render_text
from distcheck.validate.evidence import disagreement_head, unknown_cause_lines
from distcheck.validate.next_action import next_action

FIXTURES = Path(__file__).resolve().parents[1] / "extension" / "fixtures"
OPS = [
    DivergentOp("Tensor.matmul", "/w/op_trace_models.py", 26, "reduce"),
    DivergentOp("torch.cumsum", "/w/op_trace_models.py", 32, "reduce", level="per_atom"),
    DivergentOp("Tensor.sum", "/w/op_trace_helper.py", 10, "total"),
    DivergentOp("Tensor.__getitem__", "/w/advice.py", 83, "AnchorModel.forward", ranks=[1]),
    DivergentOp("Tensor.sub", "/w/wrap.py", 159, "Wrapper.forward", site="/v/site-packages/aimnet/nbops.py:742"),
]


def test_an_op_a_package_issued_is_named_at_the_users_line_and_inside_the_package() -> None:
    assert OPS[-1].where == "`sub` at wrap.py:159 in Wrapper.forward, issued at aimnet/nbops.py:742"
    assert OPS[0].where == "`matmul` at op_trace_models.py:26 in reduce" and OPS[0].package_site is None


def _report(name: str) -> TraceReport:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return TraceReport.from_dict(data)


def _words(op: DivergentOp) -> str:
    return f"first op whose value departs: {op.where} ({op.op})"


def test_the_text_and_next_action_name_the_op_of_a_real_report() -> None:
    report = _report("divergent_op")
    op = report.attempts[0].layer_divergence.first_op  # type: ignore[union-attr]
    assert op is not None and op.where == "`matmul` at op_trace_models.py:26 in reduce"
    assert f"{_words(op)}, {op.file}:26" in render_text(report, color=False)
    assert _words(op) in next_action(report).split("\n")[0]


def test_each_op_is_named_in_a_disagreement_and_in_the_unknown_cause_list() -> None:
    for op in OPS:
        report = _report("rank_disagreement")
        first = report.attempts[0]
        first.rank_disagreements[0].first_op = op
        head = disagreement_head(first)
        assert head is not None and _words(op) in head and f"look at {op.where} for a value" in head
        assert f"{_words(op)}, {op.file}:{op.line}" in render_text(report, color=False)
        assert first.layer_divergence is not None
        first.layer_divergence.first_op = op
        lines = unknown_cause_lines(first, "energy", layer_diagnostic=True)
        assert f"- {_words(op)}: look at that line first" in lines


def test_without_an_op_the_words_are_as_before() -> None:
    report = _report("rank_disagreement")
    head = disagreement_head(report.attempts[0])
    assert head is not None and "first op" not in head and "look in shift for a value" in head
    assert "first op whose value departs" not in render_text(report, color=False)
