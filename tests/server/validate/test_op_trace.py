"""The line, not just the module (issue 32, item 8): when an output departs through an aggregation no
handler routes, the report names the first torch op whose value departs, with the user's file:line,
and the editor's diagnostic sits on that line.

One model class (`op_trace_models.ReductionModel`), its per-system energy reduced from per-atom
energies in each form no handler routes: `e @ ones`, `torch.einsum("i->", e)`, `torch.mm`,
`torch.cumsum(e, 0)[-1]`, `.view(-1).sum()` of a wider tensor, and a `.sum` over a reshaped view in a
helper in another file (the line named is the helper's). Replicated (ranks disagree on the energy) and
all-reduced (the summed energy departs from the reference). The control, a plain sum the handlers
route, passes with nothing named and no diagnostic run. A flat forward (no module to tell) is searched
whole. World size 2, no auto-fix: one run of the ranks per validation, and one diagnostic run (the
ranks again, tracing their ops) when it failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import op_trace_models
import pytest
from accuracy_models import advice

from distcheck import TraceReport, validate_on_cpu
from distcheck.lsp import locate
from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import PlaceContext, report_diagnostics
from distcheck.report import DivergentOp

pytestmark = pytest.mark.procs

HERE = Path(__file__).resolve().parent
MODELS = HERE / "op_trace_models.py"
HELPER = HERE / "op_trace_helper.py"
OPS = {
    "matmul": "Tensor.matmul",
    "einsum": "torch.einsum",
    "mm": "torch.mm",
    "cumsum": "torch.cumsum",
    "view_sum": "Tensor.sum",
    "helper": "Tensor.sum",
}
OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0, "auto_fix": False}


def _marked(form: str) -> tuple[Path, int]:
    path = HELPER if form == "helper" else MODELS
    [line] = [i for i, text in enumerate(path.read_text().splitlines(), start=1) if f"# op: {form}" in text]
    return path, line


def _validate(form: str, **spec: Any) -> TraceReport:
    factory = getattr(op_trace_models, f"factory_{form}")
    report = validate_on_cpu(
        factory, op_trace_models.sample_batch(), spec={"format": "distcheck-spec", "version": 1, **spec}, **OPTIONS
    )
    assert TraceReport.from_json(report.to_json()) == report  # the op survives JSON
    return report


def _diagnostic_lines(report: TraceReport, code: str) -> list[tuple[Path, int]]:
    ctx = PlaceContext(
        target="t",
        spec_path=str(MODELS.with_suffix(".distspec.json")),
        spec_text=None,
        roots=[str(HERE)],
        search_dirs=[str(HERE)],
        read=read_disk,
        files=lambda: locate.iter_python_files([str(HERE)]),
        factory_file=str(MODELS),
    )
    out = report_diagnostics(report, ctx)
    return [(Path(p), d.range.start.line + 1) for p, ds in out.items() for d in ds if d.code == code]


def _named(op: DivergentOp | None, form: str) -> None:
    path, line = _marked(form)
    assert op is not None, form
    assert (Path(op.file), op.line, op.op) == (path, line, OPS[form]), (form, op)
    assert op.function == ("total" if form == "helper" else "reduce")
    assert op.compared >= 3, f"{form}: the ops before it (positions, pair energies) were compared and matched"


def test_every_unrouted_form_is_named_at_its_line() -> None:
    """Replicated energy: the ranks disagree; the disagreement and the layer divergence name the op
    at the form's line (the helper's own line for `helper`) and the diagnostic sits there, not on the
    factory nor the `Readout` class."""
    for form in op_trace_models.FORMS:
        report = _validate(form)
        first = report.attempts[0]
        assert report.verdict == "failed", form
        [split] = first.rank_disagreements
        assert split.output == "energy" and split.first_module is not None and split.first_module.module == "readout"
        _named(split.first_op, form)
        assert first.layer_divergence is not None
        _named(first.layer_divergence.first_op, form)
        assert split.first_op is not None and split.first_op.against == "reference"
        assert _diagnostic_lines(report, "rank-disagreement") == [_marked(form)], form


def test_an_all_reduced_output_off_the_reference_is_named_at_its_line() -> None:
    """All-reduced energy (each rank's partial summed, halo rows counted twice): no disagreement, the
    energy departs from the reference; `divergent-op` sits on the op's line. The routed control passes
    and names nothing."""
    for form in ("matmul", "helper"):
        report = _validate(form, all_reduce_outputs=["energy"])
        first = report.attempts[0]
        assert report.verdict == "failed" and first.rank_disagreements == []
        assert first.layer_divergence is not None
        _named(first.layer_divergence.first_op, form)
        assert _diagnostic_lines(report, "divergent-op") == [_marked(form)], form
    control = _validate("routed")
    assert control.verdict == "passed", control.next_action
    assert control.attempts[0].layer_divergence is not None and control.attempts[0].layer_divergence.first_op is None
    assert "diagnostic_run" not in control.attempts[0].timings, "no divergence: the ranks trace nothing"


def test_a_flat_forward_is_searched_whole() -> None:
    """No sub-module to tell (one flat forward, `accuracy_models.advice.AnchorModel`, whose per-atom
    energies read `pos[:1]`): the whole forward's ops are compared and the anchor is named on rank 1,
    which holds another atom there; `next_action` says so and `divergent-op` sits on that line."""
    path = HERE / "accuracy_models" / "advice.py"
    [line] = [i for i, t in enumerate(path.read_text().splitlines(), start=1) if "pos - pos[:1]" in t]
    report = validate_on_cpu(f"{path}:factory_anchor", advice.sample_batch(), **OPTIONS)
    first = report.attempts[0]
    assert first.layer_divergence is not None and first.layer_divergence.first_divergent is None
    op = first.layer_divergence.first_op
    assert op is not None and (Path(op.file), op.line, op.op, op.ranks) == (path, line, "Tensor.__getitem__", [1])
    assert f"- first op whose value departs: `[…]` at advice.py:{line} in AnchorModel.forward" in report.next_action
    assert first.timings["diagnostic_run"] > 0
    assert _diagnostic_lines(report, "divergent-op") == [(path, line)]
