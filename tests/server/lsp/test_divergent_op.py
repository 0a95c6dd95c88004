"""The first op whose value departs, on its line (issue 32, item 8): a report naming it puts the
`rank-disagreement` (ranks disagree on a replicated output) or the `divergent-op` diagnostic (an
output departs from the reference) on the user's line of that op, in every reduction form of
`tests/server/validate/op_trace_models.py` and in a helper in another file, not on `model_factory`
or the module's `class` line. No daemon, no processes: the recorded rank-disagreement report with
the op the ranks' trace names.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from distcheck.lsp import locate
from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import PlaceContext, report_diagnostics
from distcheck.lsp.diagnostics_place import full_text
from distcheck.report import TraceReport

from .harness import ROOT

FIXTURE = ROOT / "tests" / "extension" / "fixtures" / "rank_disagreement.json"
MODELS = ROOT / "tests" / "server" / "validate" / "op_trace_models.py"
HELPER = ROOT / "tests" / "server" / "validate" / "op_trace_helper.py"
FORMS = {
    "matmul": (MODELS, "Tensor.matmul"),
    "einsum": (MODELS, "torch.einsum"),
    "mm": (MODELS, "torch.mm"),
    "cumsum": (MODELS, "torch.cumsum"),
    "view_sum": (MODELS, "Tensor.sum"),
    "helper": (HELPER, "Tensor.sum"),
}


def marked_line(path: Path, form: str) -> int:
    """The 1-based line of `path` carrying `# op: <form>`."""
    [line] = [i for i, text in enumerate(path.read_text().splitlines(), start=1) if f"# op: {form}" in text]
    return line


def _op(form: str, against: str = "reference") -> dict[str, Any]:
    path, op = FORMS[form]
    return {
        "op": op,
        "file": str(path),
        "line": marked_line(path, form),
        "function": "total" if form == "helper" else "reduce",
        "level": "per_atom" if form == "cumsum" else "small",
        "against": against,
        "ranks": [0, 1],
        "rel_diff": 0.25,
        "compared": 6,
    }


def _context() -> PlaceContext:
    return PlaceContext(
        target="t",
        spec_path=str(MODELS.with_suffix(".distspec.json")),
        spec_text=None,
        roots=[str(ROOT)],
        search_dirs=[str(ROOT), str(MODELS.parent)],
        read=read_disk,
        files=lambda: locate.iter_python_files([str(MODELS.parent)]),
        factory_file=str(MODELS),
    )


def _report(form: str, disagreement: bool) -> TraceReport:
    data = json.loads(FIXTURE.read_text().replace("/work/main/", f"{ROOT}/"))
    first = data["attempts"][0]
    op = _op(form)
    if disagreement:
        for d in first["rank_disagreements"]:
            d["first_op"] = copy.deepcopy(op)
    else:
        first["rank_disagreements"] = []
    first["layer_divergence"]["first_op"] = op
    return TraceReport.from_dict(data)


def _by_code(out: dict[str, list[types.Diagnostic]], code: str) -> list[tuple[str, types.Diagnostic]]:
    return [(path, d) for path, ds in out.items() for d in ds if d.code == code]


@pytest.mark.parametrize("form", list(FORMS))
def test_a_rank_disagreement_sits_on_the_line_of_the_first_op(form: str) -> None:
    out = report_diagnostics(_report(form, disagreement=True), _context())
    ((path, d),) = _by_code(out, "rank-disagreement")
    want, op = FORMS[form]
    assert Path(path) == want and d.range.start.line == marked_line(want, form) - 1, (path, d.range)
    assert f"the first torch op whose value departs is {op} at {want.name}:{marked_line(want, form)}" in full_text(d)
    assert isinstance(d.data, dict) and d.data["opLine"] == marked_line(want, form)
    assert not _by_code(out, "divergent-op"), "the disagreement on that line says it once"


@pytest.mark.parametrize("form", list(FORMS))
def test_an_output_off_the_reference_puts_divergent_op_on_the_line(form: str) -> None:
    out = report_diagnostics(_report(form, disagreement=False), _context())
    ((path, d),) = _by_code(out, "divergent-op")
    want, op = FORMS[form]
    assert Path(path) == want and d.range.start.line == marked_line(want, form) - 1, (path, d.range)
    assert d.severity == types.DiagnosticSeverity.Error and op in d.message
    assert "What to do: look at this line" in full_text(d)
    factory = locate.definition(MODELS.read_text(), "model_factory", str(MODELS))
    assert factory is not None
    on_factory = [
        c.code for p, ds in out.items() if Path(p) == MODELS for c in ds if c.range.start.line == factory.line - 1
    ]
    assert "divergent-op" not in on_factory


def test_without_an_op_the_old_places_hold() -> None:
    """A report without `first_op` (older, or the trace found none): no `divergent-op`, and the
    disagreement on the first module's `class` line as before."""
    data = json.loads(FIXTURE.read_text().replace("/work/main/", f"{ROOT}/"))
    out = report_diagnostics(TraceReport.from_dict(data), _context())
    assert not _by_code(out, "divergent-op")
    ((_, d),) = _by_code(out, "rank-disagreement")
    assert isinstance(d.data, dict) and "opLine" not in d.data


def test_the_real_report_puts_divergent_op_on_the_matrix_product() -> None:
    """`divergent_op.json` (`regenerate_evidence.divergent_op`): the all-reduced energy of the `matmul`
    form departs from the reference; the ranks' trace names `e @ ones`, and the diagnostic is there."""
    text = (FIXTURE.parent / "divergent_op.json").read_text().replace("/work/main/", f"{ROOT}/")
    out = report_diagnostics(TraceReport.from_dict(json.loads(text)), _context())
    ((path, d),) = _by_code(out, "divergent-op")
    assert Path(path) == MODELS and d.range.start.line == marked_line(MODELS, "matmul") - 1
    assert "readout (op_trace_models.Readout)" in full_text(d) and "the 6 op(s) before it match" in full_text(d)
