"""What the report and the editor say about aggregations named inside a `torch.autograd.Function`
(issue 32 item 5), read from the records alone (no processes).

The class of mistake: such a record was advised like any unrouted Python op ("each rank computed a
partial", "rewrite it in a form the handlers route"), though its values are exact and only the
Function's backward misses the exchange. Now `next_action` leads with the Function's class, the op's
line and the step for its kind (local mode for edges → atoms; the reduction out of the Function for a
reduction over atoms), keeps the line of any other unrouted op, and the daemon's diagnostic gives the
same step.
"""

from __future__ import annotations

from typing import Any

from distcheck.lsp.diagnostics_evidence import unrouted_advice
from distcheck.report import Attempt, OutputVerdict, UnroutedOp
from distcheck.runtime.function_mark import function_label, function_remedy
from distcheck.spec import MLIPSpec
from distcheck.validate.unrouted import unrouted_action

BARE = {"format": "distcheck-spec", "version": 1}


def _spec(scatter_mode: str = "halo_correction") -> MLIPSpec:
    return MLIPSpec.from_dict({**BARE, "distribution": {"policy": {"kind": "halo", "scatter_mode": scatter_mode}}})


def _attempt(spec: MLIPSpec, unrouted: list[UnroutedOp]) -> Attempt:
    v = OutputVerdict("forces", "per_node", False, 0.1, 0.1, "mismatch", [0, 0], 1, 1)
    a = Attempt(0, spec, "try", None, False, {}, {}, {"forces": v}, {}, None, [], None, {}, {}, {})
    a.unrouted = unrouted
    return a


def _inside(cls: str, op: str, aggregation: str, line: int) -> UnroutedOp:
    label = function_label(cls)
    return UnroutedOp(op, aggregation, "python", 2, "/m/model.py", line, label, "/m/model.py", 90, [0, 1])


def _lines(spec: MLIPSpec, *ops: UnroutedOp) -> list[str]:
    return unrouted_action(_attempt(spec, list(ops)))


def test_a_function_record_leads_with_its_class_line_and_step() -> None:
    (line,) = _lines(_spec(), _inside("EdgeMax", "scatter_reduce(amax)", "per_edge_to_per_atom", 40))
    assert line.startswith("FAIL — the backward of EdgeMax (torch.autograd.Function) is its own code")
    assert "(the values are exact)" in line and "each rank computed a partial" not in line
    assert "model.py:40, called from model.py:90" in line
    assert 'scatter_mode to "local"' in line and "rewrite it in a form" not in line


def test_the_step_follows_the_kind_of_aggregation() -> None:
    (line,) = _lines(_spec(), _inside("AtomTotal", "sum", "per_atom_total", 12))
    assert "move the reduction over atoms out of the Function" in line and '"local"' not in line
    both = function_remedy(["per_edge_to_per_atom", "per_atom_to_per_system"], "halo_correction")
    assert '"local"' in both and "out of the Function" in both
    # under local nothing crosses ranks inside the Function: local is never advised there
    assert '"local"' not in function_remedy(["per_edge_to_per_atom", "per_atom_total"], "local")


def test_other_unrouted_ops_keep_their_own_line() -> None:
    other = UnroutedOp("scatter_reduce(prod)", "per_atom_to_per_system", "python", 1, "/m/model.py", 70, "readout")
    lines = _lines(_spec(), _inside("EdgeSum", "index_add", "per_edge_to_per_atom", 30), other)
    assert len(lines) == 2 and "EdgeSum" in lines[0] and "EdgeSum" not in lines[1]
    assert "scatter_reduce(prod) ×1" in lines[1] and "each rank computed a partial" in lines[1]


def test_the_editor_gives_the_same_step() -> None:
    spec: Any = _spec()
    op = _inside("EdgeMax", "scatter_reduce(amax)", "per_edge_to_per_atom", 40)
    assert unrouted_advice(op, spec) == function_remedy(["per_edge_to_per_atom"], "halo_correction")
    plain = UnroutedOp("scatter_reduce(prod)", "per_atom_to_per_system", "python", 1, "/m/model.py", 70, "readout")
    assert unrouted_advice(plain, spec).startswith("rewrite it in a form the handlers route")


def test_the_editor_never_advises_eager_after_it_was_tried_and_rolled_back() -> None:
    """Scripted TorchScript: "eager" is the step until auto-fix ran it and rolled it back; then the
    diagnostic names the attempt and the next step (a helper adapter), as next_action does."""
    from distcheck.lsp.diagnostics_evidence import eager_tried
    from distcheck.report import Rollback, TraceReport
    from distcheck.report.parts import ReportMeta

    scripted = MLIPSpec.from_dict({**BARE, "distribution": {"torchscript": "scripted"}})
    eager = MLIPSpec.from_dict({**BARE, "distribution": {"torchscript": "eager"}})
    op = UnroutedOp("scatter_add", "per_edge_to_per_atom", "torchscript", 1, "/m/model.py", 12, "forward")
    first = _attempt(scripted, [op])
    assert unrouted_advice(op, scripted).startswith('set distribution.torchscript to "eager"')
    assert (
        eager_tried(TraceReport(ok=False, spec=scripted, attempts=[first], next_action="", meta=ReportMeta())) is None
    )
    second = _attempt(eager, [op])
    second.index, second.rolled_back = 1, Rollback(0, "worse")
    report = TraceReport(ok=False, spec=scripted, attempts=[first, second], next_action="", meta=ReportMeta())
    tried = eager_tried(report)
    assert tried is second
    advice = unrouted_advice(op, scripted, tried)
    assert '"eager" was tried (attempt 2) and rolled back' in advice and "third_party_helpers" in advice
    assert "auto-fix tries it" not in advice
    kept = _attempt(eager, [op])
    kept.index = 1
    assert (
        eager_tried(TraceReport(ok=False, spec=scripted, attempts=[first, kept], next_action="", meta=ReportMeta()))
        is None
    )
