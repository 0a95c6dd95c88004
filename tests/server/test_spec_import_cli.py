"""`distcheck spec import FILE [-o OUT]` and `python -m distcheck.spec --import FILE [-o OUT]`.

Exit codes: 0 every field converted, 1 the spec written but some fields have no distcheck equivalent
(each listed on stderr as `file:line:column: path: message`), 2 nothing written (the file cannot be
imported, or OUT cannot be written, or the arguments are wrong). Never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from distcheck import cli
from distcheck.spec import MLIPSpec, import_anchor_spec
from distcheck.spec.cli import main as spec_main

FIXTURES = Path(__file__).parent / "fixtures" / "anchor_specs"
REPO = Path(__file__).resolve().parents[2]
Run = Callable[[list[str]], int]


def _distcheck(args: list[str]) -> int:
    return cli.main(["spec", "import", *args])


def _python_m(args: list[str]) -> int:
    return spec_main(["--import", *args])


ENTRY_POINTS = pytest.mark.parametrize("run", [_distcheck, _python_m], ids=["distcheck_spec_import", "python_m"])


@ENTRY_POINTS
@pytest.mark.parametrize("name", ["minimal.json", "mpnn_halo.json", "every_field.json", "refresh_halo.json"])
def test_an_exact_import_prints_the_spec_and_exits_0(run: Run, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / name
    assert run([str(path)]) == 0
    out, err = capsys.readouterr()
    assert MLIPSpec.from_json(out) == import_anchor_spec(path).spec
    assert "every field has its distcheck equivalent" in err
    assert "Traceback" not in err


@ENTRY_POINTS
def test_fields_without_equivalent_are_listed_with_their_lines_and_exit_1(
    run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    path = FIXTURES / "unmapped.json"
    assert run([str(path)]) == 1
    out, err = capsys.readouterr()
    result = import_anchor_spec(path)
    assert MLIPSpec.from_json(out) == result.spec
    lines = err.splitlines()
    for note in result.notes:
        assert f"{path}:{note.line}:{note.column}: {note.path}: {note.message}" in lines
    assert f"with {len(result.unmapped)} field(s) that have no distcheck equivalent" in lines[-1]


@ENTRY_POINTS
@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("wrong_version.json", "version: version 1"),
        ("malformed.json", "invalid JSON"),
        ("absent.json", "does not exist"),
    ],
)
def test_a_file_that_cannot_be_imported_exits_2_and_writes_nothing(
    run: Run, name: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out.distspec.json"
    assert run([str(FIXTURES / name), "-o", str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and not target.exists()
    assert words in err and "was not imported" in err and "Traceback" not in err
    assert err.startswith(str(FIXTURES / name))


@ENTRY_POINTS
def test_every_error_of_a_file_is_listed(run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads((FIXTURES / "mpnn_halo.json").read_text())
    doc["core"]["policy"]["kind"] = 5
    doc["owned_only_outputs"] = "charges"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc, indent=2))
    assert run([str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:5:" in err and "core.policy.kind" in err
    assert "owned_only_outputs: expected a list" in err
    assert "(2 error(s) above)" in err


@ENTRY_POINTS
@pytest.mark.parametrize(("name", "code"), [("every_field.json", 0), ("unmapped.json", 1)])
def test_output_goes_to_a_new_file(
    run: Run, name: str, code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "specs" / "model.distspec.json"
    assert run([str(FIXTURES / name), "-o", str(target)]) == code
    out, err = capsys.readouterr()
    assert out == ""
    assert MLIPSpec.load(target) == import_anchor_spec(FIXTURES / name).spec
    assert f"wrote {target}" in err


@ENTRY_POINTS
def test_output_over_a_distcheck_spec_updates_it(run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "model.distspec.json"
    MLIPSpec().save(target)
    assert run([str(FIXTURES / "every_field.json"), "-o", str(target)]) == 0
    assert MLIPSpec.load(target) == import_anchor_spec(FIXTURES / "every_field.json").spec


def _not_a_spec(tmp_path: Path) -> Path:
    path = tmp_path / "notes.json"
    path.write_text('{"mine": true}\n')
    return path


def _the_input(tmp_path: Path) -> Path:
    path = tmp_path / "anchor.json"
    path.write_bytes((FIXTURES / "mpnn_halo.json").read_bytes())
    return path


def _a_directory(tmp_path: Path) -> Path:
    return tmp_path


def _under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "file").write_text("x")
    return tmp_path / "file" / "spec.json"


@ENTRY_POINTS
@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_not_a_spec, "is not a distcheck spec, so it was left alone"),
        (_the_input, "is the file being imported"),
        (_a_directory, "is a directory"),
        (_under_a_file, "cannot write"),
    ],
    ids=["not_a_spec", "the_input", "directory", "under_a_file"],
)
def test_output_that_must_not_or_cannot_be_written_exits_2(
    run: Run, make: Callable[[Path], Path], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = make(tmp_path)
    source = target if make is _the_input else FIXTURES / "mpnn_halo.json"
    before = target.read_bytes() if target.is_file() else None
    assert run([str(source), "-o", str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and words in err and "Traceback" not in err
    if before is not None:
        assert target.read_bytes() == before


@pytest.mark.parametrize(
    "argv",
    [["spec"], ["spec", "import"], ["spec", "import", "a.json", "--outptu", "b"], ["spec", "export", "a.json"]],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: distcheck" in err and "Traceback" not in err


def test_a_misspelt_option_is_corrected(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["spec", "import", "a.json", "--outptu", "b"]) == 2
    assert "did you mean --output?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["--import", "a.json", "--validate", "b.json"], ["-o", "out.json"], ["--validate", "x", "-o", "y"]]
)
def test_python_m_refuses_import_options_out_of_place(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        spec_main(argv)
    assert info.value.code == 2
    assert "--import" in capsys.readouterr().err


@pytest.mark.procs
def test_the_installed_command_imports_without_torch(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    code = (
        "import sys\nfrom distcheck.cli import main\n"
        f"rc = main(['spec', 'import', {str(FIXTURES / 'unmapped.json')!r}, '-o', {str(target)!r}])\n"
        "sys.exit(rc if not any(m.split('.')[0] == 'torch' for m in sys.modules) else 99)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "server")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert MLIPSpec.load(target) == import_anchor_spec(FIXTURES / "unmapped.json").spec
    as_module = subprocess.run(
        [sys.executable, "-m", "distcheck", "spec", "import", str(FIXTURES / "minimal.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert as_module.returncode == 0, as_module.stderr
    assert MLIPSpec.from_json(as_module.stdout) == MLIPSpec()
