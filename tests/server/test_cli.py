"""The `distcheck` command line, in process (`main([...])`) and as `python -m distcheck`."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import ase.io
import pytest

import distcheck
from distcheck import cli
from distcheck.report import TraceReport
from distcheck.spec import MLIPSpec
from examples import pair_potential, unaware_model

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CONFIG = EXAMPLES / "pyproject.toml"


def _run_module(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m distcheck ARGS` in `cwd`, with the repository root off the path (the CLI must make
    `examples` importable itself) but distcheck importable even where it is not installed."""
    keep = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(distcheck.__file__).parents[1]), *keep]))
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "distcheck", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.procs
def test_factory_path_passes_and_writes_a_json_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    path_before = list(sys.path)
    report_path = tmp_path / "out" / "report.json"
    code = cli.main(
        ["validate", "examples/pair_potential.py:model_factory", "--world-size", "2", "--json", str(report_path)]
    )
    out, err = capsys.readouterr()
    assert code == cli.EXIT_PASSED, out + err
    assert out.startswith("PASSED"), out
    for line in ("reference run…", "attempt 1/9: initial spec", "rank 1 finished", "attempt 1 passed"):
        assert line in err, err
    report = TraceReport.from_json(report_path.read_text())
    assert report.verdict == "passed" and report.ok
    assert report.meta.world_size == 2
    assert report.target is not None
    assert report.target.factory.file == str(EXAMPLES / "pair_potential.py")
    assert report.target.sample["qualname"] == "sample_batch"
    assert sys.path == path_before, "main() must leave sys.path as it found it"


@pytest.mark.procs
def test_named_target_from_the_examples_config_as_a_subprocess(tmp_path: Path) -> None:
    """helper_model: python_path from the config makes `examples` importable, watched_helper_packages
    lets auto-fix declare the adapter. Only the fixed spec passes: not a pass (exit 4), the fix and the
    command that saves it printed, and the JUnit testcase failed with the Testing view's text."""
    report_path, junit = tmp_path / "helper.json", tmp_path / "junit.xml"
    args = ["validate", "helper_model", "--config", str(CONFIG), "--json", str(report_path), "--junit", str(junit)]
    proc = _run_module(args, tmp_path)
    assert proc.returncode == cli.EXIT_FIXED == 4, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "attempt 2/" in proc.stderr and "declare_helper_adapter" in proc.stderr
    assert proc.stdout.startswith("PASSED AFTER FIX")
    report = TraceReport.from_json(report_path.read_text())
    assert report.verdict == "passed" and report.state == "passed_after_fix" and len(report.attempts) >= 2
    assert report.spec.helper("examples.thirdparty.nbops.mol_sum") is not None
    assert report.meta.watched_helper_packages == ["examples.thirdparty.nbops"]
    assert report.target is not None and report.target.name == "helper_model"
    beside = EXAMPLES / "helper_model.distspec.json"
    assert (report.target.spec_path, report.target.spec_rule) == (str(beside), "wrapper")
    assert f"  spec: the wrapper's distribution_spec (wrapper); a fix is saved to {beside}\n" in proc.stdout
    assert report.fix_failure is not None and f"distcheck: {report.fix_failure}\n" in proc.stderr
    assert "distcheck: the fix:\n  add " in proc.stderr
    assert f"  distcheck validate {' '.join(args[1:])} --save-spec {beside}\n" in proc.stderr
    (failure,) = ET.parse(junit).getroot().iter("failure")
    assert failure.get("type") == "fixed-pass" and failure.get("message") == report.fix_failure


@pytest.mark.procs
def test_failing_validation_exits_1_with_junit_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec_path = tmp_path / "wrong.distspec.json"
    MLIPSpec.from_dict(unaware_model.WRONG_SPEC).save(spec_path)
    junit, report_path, saved = tmp_path / "junit.xml", tmp_path / "report.json", tmp_path / "saved.json"
    args = ["validate", "examples.unaware_model:model_factory", "--world-size", "2", "--spec", str(spec_path)]
    args += ["--no-auto-fix", "--junit", str(junit), "--json", str(report_path), "--save-spec", str(saved)]
    code = cli.main(args)
    out, err = capsys.readouterr()
    assert code == cli.EXIT_FAILED, out + err
    assert out.startswith("FAILED")
    assert not saved.exists() and "not saving the spec" in err
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) >= 1
    (case,) = suite.iter("testcase")  # one testcase per target, one failure per failing output
    failures = {f.get("type"): f for f in case.findall("failure")}
    assert "output:forces" in failures and "degenerate" not in failures
    assert "out of tolerance" in failures["output:forces"].get("message", "")
    # A degenerate partition is a failure of the target's testcase.
    report = TraceReport.from_json(report_path.read_text())
    assert len(report.attempts) == 1 and report.verdict == "failed"
    report.attempts[0].partition_health.degenerate = ["rank 1 has no remote atoms"]
    failed = next(f for f in cli.junit_xml(report, "unaware").iter("failure") if f.get("type") == "degenerate")
    assert failed is not None and failed.text == "rank 1 has no remote atoms"


@pytest.mark.procs
def test_structure_file_sample_and_save_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    structure = tmp_path / "sample.extxyz"
    ase.io.write(structure, pair_potential.sample_batch().to_ase())
    spec_path = tmp_path / "specs" / "pair.distspec.json"
    monkeypatch.chdir(ROOT)
    args = ["validate", "examples.pair_potential:model_factory", "--sample", str(structure), "--world-size", "2"]
    code = cli.main([*args, "--save-spec", str(spec_path), "--quiet"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_PASSED, out + err
    assert out.count("\n") == 1 and out.startswith("PASSED"), "--quiet prints only the verdict line"
    assert "reference run" not in err
    spec = MLIPSpec.load(spec_path)
    assert spec.output_kinds == {"energy": "per_graph", "forces": "per_node"}


@pytest.mark.procs
def test_bad_target_as_a_subprocess_exits_2_without_traceback(tmp_path: Path) -> None:
    proc = _run_module(["validate", "no_such_package.models:model_factory"], tmp_path)
    assert proc.returncode == cli.EXIT_ERROR
    assert "distcheck: error:" in proc.stderr and "no_such_package" in proc.stderr
    assert "what to do:" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.procs
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["examples/no_such_file.py:model_factory"], "does not exist"),
        (["examples/pair_potential.py:no_such_factory"], "no attribute"),
        (["examples.pair_potential:SPEC"], "not a callable"),
        (["examples.pair_potential:model_factory", "--sample", "missing.xyz"], "neither an existing structure file"),
        (["examples.pair_potential:model_factory", "--spec", "missing.json"], "does not exist"),
        (["examples.pair_potential:model_factory", "--world-size", "0"], "world_size must be at least 1"),
        (["examples.pair_potential:model_factory", "--device", "tpu"], "device 'tpu' not understood"),
        (["no_such_target", "--config", str(CONFIG)], "no target named 'no_such_target'"),
        (["--config", str(CONFIG)], "defines several targets"),
    ],
)
def test_setup_errors_exit_2_with_a_message(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert cli.main(["validate", *args]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("distcheck: error:") and expected in err, err
    assert "Traceback" not in err


def test_config_forms_options_and_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    targets = {t.name: t for t in cli.load_targets(str(CONFIG))}
    assert set(targets) == {
        "pair_potential",
        "mpnn",
        "charge_eq",
        "stress_model",
        "helper_model",
        "unaware_model",
        "aimnet2",
        "mace",
        "schnet",
    }
    helper = targets["helper_model"]
    assert helper.factory == f"{EXAMPLES / 'helper_model.py'}:model_factory"
    assert helper.sample == f"{EXAMPLES / 'helper_model.py'}:sample_batch" and not helper.sample_is_file
    assert helper.options == {"world_size": 2, "watched_helper_packages": ["examples.thirdparty.nbops"]}
    assert helper.python_path == [str(ROOT)]
    assert targets["mpnn"].options == {"world_size": 2}

    # One target directly in [tool.distcheck], found from a subdirectory; a structure-file sample.
    project = tmp_path / "project"
    _write(project / "data" / "water.xyz", "1\n\nO 0 0 0\n")
    _write(
        project / "pyproject.toml",
        '[tool.distcheck]\nfactory = "pkg.models:make"\nsample = "data/water.xyz"\nspec = "m.json"\n'
        'atol = 1e-6\ntimeout = 30\npython_path = ["src"]\n',
    )
    (project / "sub" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(project / "sub" / "deeper")
    found = cli.find_config()
    assert found == str(project / "pyproject.toml")
    (single,) = cli.load_targets(found)
    assert single.name == "default" and single.factory == "pkg.models:make"
    assert single.sample == str(project / "data" / "water.xyz") and single.sample_is_file
    assert single.spec == str(project / "m.json")
    assert single.options == {"atol": 1e-6, "timeout_sec": 30.0}
    assert single.python_path == [str(project / "src")]


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[tool.distcheck]\nfactory = "m:f"\nworld_sise = 2\n', "unknown key 'world_sise'"),
        ('[tool.distcheck]\nfactory = "m:f"\nworld_size = "two"\n', "'world_size' must be an integer"),
        ('[[tool.distcheck.targets]]\nfactory = "m:f"\n', "has no 'name'"),
        (
            '[[tool.distcheck.targets]]\nname = "a"\nfactory = "m:f"\n[[tool.distcheck.targets]]\nname = "a"\n'
            'factory = "m:g"\n',
            "used more than once",
        ),
        ("[tool.distcheck\n", "invalid TOML"),
        ("[tool.other]\n", "has no [tool.distcheck] table"),
    ],
)
def test_config_errors_exit_2(tmp_path: Path, toml: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    config = _write(tmp_path / "pyproject.toml", toml)
    assert cli.main(["validate", "a", "--config", str(config)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("distcheck: error:") and expected in err, err


def test_usage_errors_and_interrupt(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.main(["validate", "--no-such-flag"]) == cli.EXIT_ERROR
    assert cli.main([]) == cli.EXIT_ERROR
    assert cli.main(["--version"]) == 0
    capsys.readouterr()

    def interrupted(*_: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_cmd_validate", interrupted)
    assert cli.main(["validate", "examples.pair_potential:model_factory"]) == cli.EXIT_INTERRUPTED
    assert "interrupted" in capsys.readouterr().err
