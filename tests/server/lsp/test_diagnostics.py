"""Report JSON fixtures → diagnostics: codes, files, lines, messages and quick-fix data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from distcheck.lsp import locate
from distcheck.lsp.config import read_disk
from distcheck.lsp.diagnostics import (
    PlaceContext,
    config_diagnostic,
    report_diagnostics,
    runner_error_diagnostics,
    spec_invalid_diagnostics,
)
from distcheck.lsp.diagnostics_place import full_text
from distcheck.report import Frame, HaloCompleteness, TargetInfo, TraceReport
from distcheck.spec import MLIPSpec
from examples import helper_model

from .harness import ROOT, copy_examples

FIXTURES = ROOT / "tests" / "extension" / "fixtures"


def _report(name: str, examples: Path, **changes: Any) -> TraceReport:
    """A fixture report with its recorded paths moved to `examples` (the fixtures name /work/main/...)."""
    text = (FIXTURES / f"{name}.json").read_text()
    data = json.loads(text.replace("/work/main/examples/", f"{examples}/"))
    for key, value in changes.items():
        data[key] = value
    return TraceReport.from_dict(data)


def _context(examples: Path, spec_text: str | None = None, **kw: Any) -> PlaceContext:
    fields: dict[str, Any] = {
        "target": "helper_model",
        "spec_path": str(examples / "helper_model.distspec.json"),
        "spec_text": spec_text,
        "roots": [str(examples)],
        "search_dirs": [str(examples.parent), str(examples)],
        "read": read_disk,
        "files": lambda: locate.iter_python_files([str(examples)]),
        "factory_file": str(examples / "helper_model.py"),
    }
    return PlaceContext(**{**fields, **kw})


def _data(d: types.Diagnostic) -> dict[str, Any]:
    """The diagnostic's data (every distcheck diagnostic carries an object)."""
    assert isinstance(d.data, dict), d
    return d.data


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if needle in line)


def _summary(out: dict[str, list[Any]], base: Path) -> list[tuple[str, int, str]]:
    return sorted(
        (str(Path(p).relative_to(base)), d.range.start.line, str(d.code)) for p, ds in out.items() for d in ds
    )


@pytest.fixture()
def examples(tmp_path: Path) -> Path:
    return copy_examples(tmp_path)


def test_failed_helper_report(examples: Path) -> None:
    out = report_diagnostics(_report("helper_model_failed", examples), _context(examples))
    model, readout, nbops = (
        examples / "helper_model.py",
        examples / "helper_readout.py",
        examples / "thirdparty/nbops.py",
    )
    def_line = _line(model, "def model_factory")
    calls = [i for i, line in enumerate(model.read_text().splitlines()) if "nbops.mol_sum(" in line]
    assert _summary(out, examples) == sorted(
        [
            *[("helper_model.py", def_line, "failing-output")] * 3,
            *[("helper_model.py", line, "undeclared-helper") for line in calls],
            ("helper_readout.py", _line(readout, "class MoleculeEnergyReadout"), "first-divergent-module"),
            # the partial sums of mol_sum make the ranks disagree on the replicated energy, from readout on
            ("helper_readout.py", _line(readout, "class MoleculeEnergyReadout"), "rank-disagreement"),
            ("helper_readout.py", _line(readout, "return mol_sum("), "undeclared-helper"),
            ("thirdparty/nbops.py", _line(nbops, "def mol_sum"), "undeclared-helper"),
        ]
    )
    failing = [d for d in out[str(model)] if d.code == "failing-output"]
    energy = next(d for d in failing if _data(d)["output"] == "energy")
    verdict = _report("helper_model_failed", examples).attempts[0].verdicts["energy"]
    assert f"max abs diff {verdict.max_abs_diff:.3g} (atol 1e-05)" in full_text(energy)
    assert f"max rel diff {verdict.max_rel_diff:.3g} (rtol 0.0001)" in full_text(energy)
    assert "attempt 1" in full_text(energy) and "What to do: FAIL" in full_text(energy)
    assert "edits" not in _data(energy), "no auto-fix passed, so no fix is offered"
    (definition,) = out[str(nbops)]
    assert _data(definition)["remedy"]["attr_name"] == "mol_sum" and _data(definition)["target"] == "helper_model"
    line = nbops.read_text().splitlines()[definition.range.start.line]
    assert line[definition.range.start.character : definition.range.end.character] == "mol_sum"
    module = next(d for d in out[str(readout)] if d.code == "first-divergent-module")
    assert "MoleculeEnergyReadout" in full_text(module) and "What to do" in full_text(module)


def test_auto_fixed_report_with_and_without_a_spec_file(examples: Path) -> None:
    report = _report("helper_model_autofix", examples)
    out = report_diagnostics(report, _context(examples))
    model = str(examples / "helper_model.py")
    (fix,) = [d for d in out[model] if d.code == "spec-fix"]
    assert _data(fix)["rule"] == "declare_helper_adapter" and _data(fix)["spec"] == report.spec.to_dict()
    assert _data(fix)["edits"] == [
        {
            "op": "append",
            "path": ["distribution", "third_party_helpers"],
            "value": helper_model.CORRECT_SPEC["distribution"]["third_party_helpers"][0],
        }
    ]
    assert "no spec file yet" in full_text(fix)
    assert all("spec-fix quick fix" in full_text(d) for d in out[model] if d.code == "failing-output")

    spec_text = MLIPSpec.from_dict(helper_model.SPEC).to_json()
    spec_path = str(examples / "helper_model.distspec.json")
    out = report_diagnostics(report, _context(examples, spec_text=spec_text))
    on_spec = sorted((d.range.start.line, d.code) for d in out[spec_path])
    lines = spec_text.splitlines()
    expected = [
        (next(i for i, t in enumerate(lines) if f'"{n}": "per_' in t), "failing-output")
        for n in ("energy", "forces", "charges")
    ]
    expected.append((next(i for i, t in enumerate(lines) if '"third_party_helpers"' in t), "spec-fix"))
    assert on_spec == sorted(expected)
    assert not any(d.code in ("failing-output", "spec-fix") for d in out.get(model, []))


def test_worker_error_degenerate_and_halo(examples: Path, tmp_path: Path) -> None:
    def worker_error(user: Path) -> TraceReport:
        """The fixture with its user file (recorded in /tmp/fx) moved to `user`."""
        text = (FIXTURES / "worker_error.json").read_text().replace("/tmp/fx/", f"{user}/")
        return TraceReport.from_json(text.replace("/work/main/examples/", f"{examples}/"))

    # the rank stores the innermost frame in the user's code (user_frame); while that file cannot be
    # read the diagnostic stays on the factory
    out = report_diagnostics(worker_error(tmp_path / "gone"), _context(examples))
    model = examples / "helper_model.py"
    (error,) = out[str(model)]
    assert error.code == "worker-error" and error.range.start.line == _line(model, "def model_factory")
    assert error.message.startswith(
        "RuntimeError on rank 1 during forward"
    ) and "What to do: Shape mismatch" in full_text(error)
    # where it can, the diagnostic lands on the stored frame's line of the user's file
    user = tmp_path / "fx"
    user.mkdir()
    report = worker_error(user)
    stored = next(a.error for a in report.attempts if a.error is not None)
    assert stored.user_frame is not None and stored.user_frame.file == str(user / "buggy_models.py")
    line = stored.user_frame.line
    (user / "buggy_models.py").write_text("\n" * (line - 1) + "    x = a + b\n")
    out = report_diagnostics(report, _context(examples, roots=[str(examples), str(user)]))
    (error,) = out[str(user / "buggy_models.py")]
    assert (error.range.start.line, error.range.start.character, error.range.end.character) == (line - 1, 4, 13)
    # the stored frame is used as it is, never re-derived from the traceback
    stored.user_frame = Frame(str(user / "buggy_models.py"), line + 2, "forward")
    (user / "buggy_models.py").write_text("\n" * (line + 1) + "    y = c\n")
    out = report_diagnostics(report, _context(examples, roots=[str(examples), str(user)]))
    (error,) = out[str(user / "buggy_models.py")]
    assert (error.range.start.line, error.range.start.character, error.range.end.character) == (line + 1, 4, 9)

    degenerate = _report("degenerate", examples)
    degenerate.target = TargetInfo(sample={"file": str(model), "line": 1, "qualname": "sample_batch"})
    out = report_diagnostics(degenerate, _context(examples))
    (d,) = out[str(model)]
    assert d.code == "degenerate-partition" and d.range.start.line == _line(model, "def sample_batch")
    assert "proves nothing" in full_text(d) and "no remote atoms" in full_text(d)

    halo = _report("helper_model_failed", examples)
    halo.attempts[0].halo_completeness = HaloCompleteness(
        matches=False,
        halo_width=4.0,
        required_width=12.0,
        interpretation="The halo is 4 Å but needs 12 Å. Set `distribution.policy.halo_width` >= 12 Å.",
    )
    out = report_diagnostics(halo, _context(examples))
    (d,) = [d for d in out[str(model)] if d.code == "halo-incomplete"]
    assert d.range.start.line == _line(model, "def sample_batch") and "halo_width` >= 12" in full_text(d)


def test_passed_report_without_spec_is_spec_missing_and_with_spec_is_clean(examples: Path) -> None:
    report = _report("helper_model_autofix", examples)
    report.attempts = report.attempts[1:]
    report.attempts[0].index = 0
    report.best_index = 0  # the report's own best attempt, which every reader uses
    out = report_diagnostics(report, _context(examples))
    (d,) = out[str(examples / "helper_model.py")]
    assert d.code == "spec-missing" and _data(d)["spec"] == report.spec.to_dict()
    assert _data(d)["specPath"].endswith("helper_model.distspec.json")
    assert report_diagnostics(report, _context(examples, spec_text=report.spec.to_json())) == {}


def test_runner_error_spec_invalid_and_config(examples: Path) -> None:
    frame = {"file": str(examples / "helper_model.py"), "line": 3, "function": "<module>"}
    out = runner_error_diagnostics("ConfigError", "importing the factory failed", "fix it", frame, _context(examples))
    (d,) = out[str(examples / "helper_model.py")]
    assert d.code == "worker-error" and d.range.start.line == 2 and "What to do: fix it" in full_text(d)

    text = '{\n  "format": "distcheck-spec",\n  "version": 1,\n  "system_reductions": "yes"\n}\n'
    (d,) = spec_invalid_diagnostics(text, "x.distspec.json")
    assert d.code == "spec-invalid" and (d.range.start.line, d.range.start.character) == (3, 2)
    assert d.range.end.character == 2 + len('"system_reductions"') and "system_reductions" in full_text(d)
    assert spec_invalid_diagnostics(MLIPSpec().to_json(), "ok.json") == []

    d = config_diagnostic("p.toml", "[tool.distcheck]\n  world_sise = 2\n", 2, None, "unknown key", "use world_size")
    assert d.code == "config-invalid" and (d.range.start.line, d.range.start.character, d.range.end.character) == (
        1,
        2,
        16,
    )
    assert d.message == "unknown key" and full_text(d) == "unknown key\nWhat to do: use world_size"
