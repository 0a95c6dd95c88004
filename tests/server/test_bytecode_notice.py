"""Where installed packages carry no bytecode and the interpreter writes none, every new process
compiles torch from source: `jobs/bytecode` finds that and the CLI says which command compiles it once."""

from __future__ import annotations

import compileall
import sys
from pathlib import Path

import pytest

from distcheck import cli
from distcheck.jobs import bytecode

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable package `slowpkg_bc` with no bytecode, on the path."""
    pkg = tmp_path / "slowpkg_bc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slowpkg_bc", raising=False)
    return pkg


def test_a_package_without_bytecode_in_an_interpreter_that_writes_none_is_named(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert bytecode.uncompiled(["slowpkg_bc", "no_such_package_bc"]) == [str(package)]
    notice = bytecode.bytecode_notice(["slowpkg_bc"])
    assert notice is not None
    assert "every new Python process here compiles slowpkg_bc from source" in notice
    assert "PYTHONDONTWRITEBYTECODE is set" in notice
    assert f"-m compileall -q -j 0 {package}`" in notice


def test_nothing_to_say_once_compiled_or_when_bytecode_is_written(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # the first import writes it
    assert bytecode.uncompiled(["slowpkg_bc"]) == [] and bytecode.bytecode_notice(["slowpkg_bc"]) is None
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert compileall.compile_dir(str(package), quiet=1)
    assert bytecode.uncompiled(["slowpkg_bc"]) == []


def test_the_cli_prints_the_notice_after_a_local_validation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(cli, "bytecode_notice", lambda: "every new Python process here compiles torch (test)")
    code = cli.main(["validate", "examples/pair_potential.py:model_factory", "--world-size", "2"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_PASSED, out + err
    assert "distcheck: every new Python process here compiles torch (test)" in err
    assert "compiles torch" not in out, "the notice goes to stderr, never into the report"
