"""`distcheck validate` reads the spec the one rule (`distcheck.jobs.spec_source`) names, and says which:
--spec, else `spec` in [tool.distcheck], else `<model>.distspec.json` beside the model file, else the
wrapper's own. And a pass that needed an auto-fix is not a pass (`distcheck.cli_exit`): its own exit
code, the fix and the command that saves it printed, a failure in the JUnit file with the Testing
view's text, unless --accept-fixed.

The first test and the last run a validation each (the `examples.helper_model` wrapper's own spec lacks
the adapter its TorchScript helper needs: `CORRECT_SPEC` has it); the precedence tests read the command
line only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from distcheck import cli, cli_exit
from distcheck.cli_output import Printer
from distcheck.cli_target import prior_spec, resolve_target
from distcheck.jobs.spec_source import spec_source
from distcheck.report import TraceReport
from distcheck.spec import MLIPSpec
from examples import helper_model

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "extension" / "fixtures"

# a model file of its own (beside which its spec file lies) for the example model
MODEL = "from examples.helper_model import model_factory, sample_batch  # noqa: F401\n"


def _spec_file(path: Path, spec: dict[str, object]) -> Path:
    MLIPSpec.from_dict(spec).save(path)
    return path


@pytest.mark.procs
def test_the_spec_beside_the_model_is_read_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The editor's fixes write `<model>.distspec.json`; the CLI reads it: a plain pass with auto-fix
    off (it failed, exit 1, and passed only after a fix without it, before the rule)."""
    (tmp_path / "m.py").write_text(MODEL)
    beside = _spec_file(tmp_path / "m.distspec.json", helper_model.CORRECT_SPEC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))  # `examples` importable here and in the ranks
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    report_path = tmp_path / "report.json"
    args = ["validate", "m.py:model_factory", "--world-size", "2", "--no-auto-fix", "--json", str(report_path)]
    code = cli.main(args)
    out, err = capsys.readouterr()
    assert code == cli.EXIT_PASSED, out + err
    assert out.startswith("PASSED")
    assert f"  spec: {beside} (beside-model)\n" in out, out
    report = TraceReport.from_json(report_path.read_text())
    assert report.state == "passed" and len(report.attempts) == 1
    assert report.target is not None
    assert (report.target.spec_path, report.target.spec_rule) == (str(beside), "beside-model")
    assert report.spec.helper("examples.thirdparty.nbops.mol_sum") is not None


def _args(*words: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(["validate", *words])


def _source(tmp_path: Path, *words: str) -> tuple[str, str | None, object]:
    """(rule, path, the prior spec's output kinds) the CLI's command line gives, without validating."""
    target = resolve_target(_args(*words))
    spec, source = prior_spec(target, Printer(io.StringIO(), quiet=True))
    assert source == spec_source(target), "the CLI reads what the one rule names"
    return source.rule, source.path, None if spec is None else spec.output_kinds


def test_precedence_explicit_then_pyproject_then_beside_model_then_wrapper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "m.py").write_text(MODEL)
    (project / "pyproject.toml").write_text(
        '[tool.distcheck]\npython_path = [".."]\n[[tool.distcheck.targets]]\nname = "plain"\n'
        'factory = "models/m.py:model_factory"\n[[tool.distcheck.targets]]\nname = "configured"\n'
        'factory = "models/m.py:model_factory"\nspec = "specs/configured.distspec.json"\n'
    )
    monkeypatch.chdir(project)
    beside = project / "models" / "m.distspec.json"
    configured = project / "specs" / "configured.distspec.json"
    explicit = tmp_path / "explicit.distspec.json"

    # nothing on disk: the wrapper's own spec, a fix goes beside the model (or to the configured file)
    assert _source(tmp_path, "plain") == ("wrapper", str(beside), None)
    assert _source(tmp_path, "configured") == ("wrapper", str(configured), None)
    # the file beside the model is read when it exists
    _spec_file(beside, {**helper_model.CORRECT_SPEC, "output_kinds": {"energy": "per_graph"}})
    assert _source(tmp_path, "plain") == ("beside-model", str(beside), {"energy": "per_graph"})
    assert _source(tmp_path, "models/m.py:model_factory") == ("beside-model", str(beside), {"energy": "per_graph"})
    # the pyproject's spec wins over it (missing, it is not replaced by the file beside the model)
    assert _source(tmp_path, "configured") == ("wrapper", str(configured), None)
    configured.parent.mkdir()
    _spec_file(configured, {**helper_model.CORRECT_SPEC, "output_kinds": {"forces": "per_node"}})
    assert _source(tmp_path, "configured") == ("pyproject", str(configured), {"forces": "per_node"})
    # --spec wins over both
    _spec_file(explicit, {**helper_model.CORRECT_SPEC, "output_kinds": {"charges": "per_node"}})
    for name in ("configured", "plain"):
        assert _source(tmp_path, name, "--spec", str(explicit)) == ("explicit", str(explicit), {"charges": "per_node"})


def test_a_module_reference_finds_its_model_file_on_the_search_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    target = resolve_target(_args("examples.helper_model:model_factory"))
    source = spec_source(target, exists=lambda _path: False)
    assert source.path == str(ROOT / "examples" / "helper_model.distspec.json") and source.rule == "wrapper"


def _fixed_report(tmp_path: Path) -> Path:
    """helper_model_autofix (a real pass after auto-fix) as if validated from `tmp_path/m.py`."""
    report = TraceReport.from_json((FIXTURES / "helper_model_autofix.json").read_text())
    assert report.state == "passed_after_fix"
    report.target = None
    path = tmp_path / "fixed.json"
    path.write_text(report.to_json())
    return path


@pytest.mark.parametrize("accept", [False, True])
def test_a_fixed_pass_exits_with_its_own_code_unless_accepted(
    accept: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI around a fixed pass (the job replaced by a recorded report: no processes start)."""
    (tmp_path / "m.py").write_text(MODEL)
    recorded = _fixed_report(tmp_path).read_text()

    def job(target: object, **kw: object) -> TraceReport:
        report = TraceReport.from_json(recorded)
        from distcheck.jobs.run import describe_target

        describe_target(report, target, helper_model.model_factory, {}, kw["source"])  # type: ignore[arg-type]
        return report

    monkeypatch.setattr(cli, "run_job", job)
    monkeypatch.setattr(cli, "started_early", lambda *a: contextlib.nullcontext())
    monkeypatch.chdir(tmp_path)
    junit = tmp_path / "junit.xml"
    words = ["validate", "m.py:model_factory", "--junit", str(junit), "--quiet"] + (
        ["--accept-fixed"] if accept else []
    )
    code = cli.main(words)
    out, err = capsys.readouterr()
    assert out.startswith("PASSED AFTER FIX")
    if accept:
        assert code == cli.EXIT_PASSED == 0, err
    else:
        assert code == cli.EXIT_FIXED == cli_exit.code_of("passed_after_fix") == 4, err
    report = TraceReport.from_json(recorded)
    assert report.fix_applied is not None
    beside = tmp_path / "m.distspec.json"
    # even with --quiet: the failure, the fix, and the command that saves it where the next run reads it
    assert "the wrapper's distribution_spec (wrapper), still fails: save the fixed spec to " + str(beside) in err
    assert "distcheck: the fix:\n  add " in err and "examples.thirdparty.nbops" in err
    assert f"  distcheck validate m.py:model_factory --junit {junit} --quiet --save-spec m.distspec.json\n" in err
    assert (
        "accepted as a pass (--accept-fixed)" if accept else "accept passes after auto-fix with --accept-fixed"
    ) in err
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    states = [p.get("value") for p in suite.iter("property") if p.get("name") == "state"]
    assert states == ["passed_after_fix"]
    if accept:  # accepted: the testcase passes, as the exit code says
        assert suite.get("failures") == "0" and suite.find("testcase/failure") is None
        return
    # the JUnit testcase failed with the text the Testing view shows (the report's fix_failure)
    assert suite.get("failures") == "1"
    (failure,) = suite.iter("failure")
    assert failure.get("type") == "fixed-pass"
    assert failure.get("message") == err.split("\n")[0].removeprefix("distcheck: ")
    assert (failure.text or "").endswith("--save-spec m.distspec.json")

    # the printed command saves the fix where the next run reads it (this run still exits with its code)
    assert cli.main([*words, "--save-spec", "m.distspec.json"]) == cli.EXIT_FIXED
    err = capsys.readouterr().err
    assert MLIPSpec.load(beside).to_dict() == report.spec.to_dict()
    assert "the fixed spec was saved to m.distspec.json: the next run starts from it" in err
    assert spec_source(resolve_target(_args("m.py:model_factory"))).rule == "beside-model"


def test_help_and_the_docs_state_the_exit_codes_of_the_record(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert " ".join(cli_exit.help_paragraph().split()) in text
    assert "--accept-fixed" in text
    table = cli_exit.markdown_table()
    for doc in ("README.md", "docs/protocol.md"):
        assert table in (ROOT / doc).read_text(), f"{doc} must hold cli_exit.markdown_table()"
    top = cli.build_parser().format_help()
    assert cli_exit.help_line() in " ".join(top.split())
    assert [e.code for e in cli_exit.EXIT_CODES] == [0, 1, 2, 3, 4, 130]
