"""The trust evidence of real reports as diagnostics: unrouted aggregations on the op's line and its
caller's, suspicious outputs where failing outputs show, ranks that disagree on the first module's
`class` line, an under-declared receptive field on the factory.

The fixtures are real reports (`tests/extension/fixtures/regenerate_evidence.py`); their recorded
paths (`/work/main/...`) are moved to this checkout. Several shapes of each: an unrouted op at a
Python line, in a scripted function of another module imported by name (fixed by auto-fix, not
fixed, already eager), and with no location at all.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from lsprotocol import types

from distcheck.lsp import locate
from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import CODES, PlaceContext, report_diagnostics
from distcheck.lsp.diagnostics_place import full_text
from distcheck.report import TraceReport
from distcheck.spec import MLIPSpec

from .harness import ROOT

FIXTURES = ROOT / "tests" / "extension" / "fixtures"
ACCURACY = ROOT / "examples" / "accuracy"
RANK_SPLIT = ROOT / "tests" / "server" / "validate" / "accuracy_models" / "rank_split.py"
SHALLOW = ROOT / "tests" / "server" / "validate" / "sensitivity_models" / "shallow_depth.py"
COUPLED = ROOT / "tests" / "server" / "validate" / "sensitivity_models" / "global_coupled.py"
ERROR, WARNING = types.DiagnosticSeverity.Error, types.DiagnosticSeverity.Warning


def _data(name: str) -> dict[str, Any]:
    text = (FIXTURES / f"{name}.json").read_text().replace("/work/main/", f"{ROOT}/")
    data: dict[str, Any] = json.loads(text)
    return data


def _report(data: dict[str, Any]) -> TraceReport:
    return TraceReport.from_dict(data)


def _only_first(data: dict[str, Any]) -> dict[str, Any]:
    """The report as if auto-fix had been off: the first attempt alone."""
    out = copy.deepcopy(data)
    out["attempts"] = out["attempts"][:1]
    out["best_attempt"] = 0
    out["spec"] = out["attempts"][0]["spec"]
    out["ok"] = False
    return out


def _context(factory_file: Path, spec_text: str | None = None) -> PlaceContext:
    return PlaceContext(
        target="t",
        spec_path=str(factory_file.with_suffix(".distspec.json")),
        spec_text=spec_text,
        roots=[str(ROOT)],
        search_dirs=[str(ROOT), str(ROOT / "tests" / "server" / "validate")],
        read=read_disk,
        files=lambda: locate.iter_python_files([str(ACCURACY), str(RANK_SPLIT.parent)]),
        factory_file=str(factory_file),
    )


def _info(d: types.Diagnostic) -> dict[str, Any]:
    assert isinstance(d.data, dict)
    return d.data


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if needle in line)


def _by_code(out: dict[str, list[types.Diagnostic]], code: str) -> list[tuple[str, types.Diagnostic]]:
    return [(path, d) for path, ds in out.items() for d in ds if d.code == code]


def test_the_new_codes_are_published() -> None:
    assert {"unrouted-aggregation", "suspicious-output", "rank-disagreement", "receptive-field"} <= set(CODES)


def test_unrouted_at_a_python_line_without_a_fix() -> None:
    out = report_diagnostics(_report(_data("unrouted_python")), _context(ACCURACY / "named_only.py"))
    ((path, d),) = _by_code(out, "unrouted-aggregation")
    assert Path(path) == ACCURACY / "named_only.py"
    assert d.range.start.line == 20 and "scatter_reduce" in (ACCURACY / "named_only.py").read_text().splitlines()[20]
    assert d.severity == ERROR and "scatter_reduce(prod) (atoms → systems)" in d.message and "ran 2×" in full_text(d)
    assert "on ranks 0, 1" in full_text(d) and "What to do: rewrite it in a form the handlers route" in full_text(d)
    assert _info(d)["op"] == "scatter_reduce(prod)" and _info(d)["origin"] == "python" and _info(d)["count"] == 2


def test_unrouted_in_an_imported_scripted_function_fixed_by_auto_fix() -> None:
    out = report_diagnostics(_report(_data("unrouted_fixed")), _context(ACCURACY / "scripted_imported.py"))
    found = _by_code(out, "unrouted-aggregation")
    ops, caller = ACCURACY / "scripted_ops.py", ACCURACY / "scripted_imported.py"
    where = sorted((Path(p).name, d.range.start.line) for p, d in found)
    assert where == sorted(
        [("scripted_ops.py", 19), ("scripted_ops.py", 24), ("scripted_imported.py", 17), ("scripted_imported.py", 20)]
    )
    assert "scatter_add" in ops.read_text().splitlines()[19] and "index_add" in ops.read_text().splitlines()[24]
    assert "scatter_receivers" in caller.read_text().splitlines()[17]
    for _, d in found:
        assert d.severity == WARNING, "the passing fix routes it"
        assert "auto-fix 'run_torchscript_eagerly' makes every output match" in full_text(d) and "routes" in full_text(
            d
        )
    # the first attempt's rank disagreement is a symptom the fix removes: the failing outputs carry the fix
    assert not _by_code(out, "rank-disagreement")
    assert all("run_torchscript_eagerly" in full_text(d) for _, d in _by_code(out, "failing-output"))


def test_unrouted_in_a_scripted_function_without_a_fix_and_under_eager() -> None:
    data = _only_first(_data("unrouted_fixed"))
    out = report_diagnostics(_report(data), _context(ACCURACY / "scripted_imported.py"))
    found = _by_code(out, "unrouted-aggregation")
    assert len(found) == 4 and all(d.severity == ERROR for _, d in found)
    assert all('set distribution.torchscript to "eager"' in full_text(d) for _, d in found)
    assert any(
        "in scatter_receivers" in full_text(d) and "called from scripted_imported.py:18" in full_text(d)
        for _, d in found
    )
    data["attempts"][0]["spec"]["distribution"]["torchscript"] = "eager"
    out = report_diagnostics(_report(data), _context(ACCURACY / "scripted_imported.py"))
    found = _by_code(out, "unrouted-aggregation")
    assert found and all(
        "third_party_helpers" in full_text(d) and "set distribution" not in full_text(d) for _, d in found
    )


def test_unrouted_without_a_location_sits_on_the_factory() -> None:
    data = _data("unrouted_python")
    op = data["attempts"][0]["unrouted"][0]
    op.update(file=None, line=None, call_file=None, call_line=None, origin="native", location="unknown location")
    out = report_diagnostics(_report(data), _context(ACCURACY / "named_only.py"))
    ((path, d),) = _by_code(out, "unrouted-aggregation")
    assert Path(path) == ACCURACY / "named_only.py" and d.range.start.line == _line(
        ACCURACY / "named_only.py", "def model_factory"
    )
    assert "C++" in full_text(d)


def test_suspicious_outputs_are_warnings_where_failing_outputs_show() -> None:
    report = _report(_data("suspicious"))
    out = report_diagnostics(report, _context(COUPLED))
    assert not _by_code(out, "failing-output"), "within tolerance: not an error that it 'differs'"
    found = _by_code(out, "suspicious-output")
    assert sorted(_info(d)["output"] for _, d in found) == ["energy", "forces"]
    def_line = _line(COUPLED, "def model_factory")
    for path, d in found:
        assert Path(path) == COUPLED and d.range.start.line == def_line and d.severity == WARNING
        assert "within tolerance but" in d.message and "round-off floor 1e-13" in full_text(d)
        assert "× its round-off floor" in d.message and "What to do: FAIL — SUSPICIOUS" in full_text(d)
    energy = next(d for _, d in found if _info(d)["output"] == "energy")
    assert "1.47e+08×" in full_text(energy)
    spec_text = MLIPSpec.coerce(report.spec.to_dict()).to_json()
    out = report_diagnostics(report, _context(COUPLED, spec_text=spec_text))
    lines = spec_text.splitlines()
    on_spec = sorted((d.range.start.line, _info(d)["output"]) for _, d in _by_code(out, "suspicious-output"))
    assert on_spec == sorted(
        (next(i for i, t in enumerate(lines) if f'"{n}": "per_' in t), n) for n in ("energy", "forces")
    )


def test_rank_disagreement_on_the_first_module_that_disagrees() -> None:
    out = report_diagnostics(_report(_data("rank_disagreement")), _context(RANK_SPLIT))
    ((path, d),) = _by_code(out, "rank-disagreement")
    assert Path(path) == RANK_SPLIT and d.range.start.line == _line(RANK_SPLIT, "class Shift")
    assert d.severity == ERROR and "ranks 0, 1 disagree on energy" in full_text(d) and "rank 1 off" in full_text(d)
    assert "shift (accuracy_models.rank_split.Shift)" in full_text(d) and "What to do: look in shift" in full_text(d)
    assert _info(d)["ranks"] == [0, 1] and _info(d)["offReference"] == [1] and _info(d)["module"] == "shift"
    # no module found: where the failing output shows
    data = _data("rank_disagreement")
    data["attempts"][0]["rank_disagreements"][0]["first_module"] = None
    out = report_diagnostics(_report(data), _context(RANK_SPLIT))
    ((path, d),) = _by_code(out, "rank-disagreement")
    assert d.range.start.line == _line(RANK_SPLIT, "model_factory = ")  # the factory, as failing outputs
    assert "the code that computes energy" in full_text(d)


def test_under_declared_receptive_field_on_the_factory() -> None:
    out = report_diagnostics(_report(_data("receptive_fixed")), _context(SHALLOW))
    ((path, d),) = _by_code(out, "receptive-field")
    assert Path(path) == SHALLOW and d.range.start.line == _line(SHALLOW, "def model_factory")
    assert "declared 2 × 3 Å = 6 Å" in full_text(d) and "measured 3 hop(s)" in full_text(d)
    assert "halo_width 9.5 Å meanwhile" in full_text(d) and "set num_interactions = 3" in full_text(d)
    assert _info(d)["measuredDepth"] == 3


def _with_helper_op(flagged: bool, wrapped: bool) -> dict[str, Any]:
    """The failed helper report with the scripted op the observer finds inside `nbops.mol_sum`."""
    data = _data("helper_model_failed")
    nbops = f"{ROOT}/examples/thirdparty/nbops.py"
    a = data["attempts"][0]
    a["unrouted"] = [
        {
            "op": "aten.index_add", "aggregation": "per_atom_to_per_system", "origin": "torchscript", "count": 4,
            "file": nbops, "line": 26, "function": "_mol_sum", "call_file": nbops, "call_line": 39, "ranks": [0, 1],
        }
    ]  # fmt: skip
    h = a["helper_diagnostics"][0]
    h["already_wrapped"] = wrapped
    if not flagged:
        h.update(suspected_gap=None, consistency_passed=True)
    return data


def test_an_op_inside_a_flagged_or_adapted_helper_is_left_to_the_helper() -> None:
    ctx = _context(ROOT / "examples" / "helper_model.py")
    for flagged, wrapped in ((True, False), (False, True)):
        out = report_diagnostics(_report(_with_helper_op(flagged, wrapped)), ctx)
        assert not _by_code(out, "unrouted-aggregation"), (flagged, wrapped)
    out = report_diagnostics(_report(_with_helper_op(False, False)), ctx)
    found = _by_code(out, "unrouted-aggregation")
    assert sorted(d.range.start.line for _, d in found) == [25, 38] and all(
        "_mol_sum" in full_text(d) for _, d in found
    )
