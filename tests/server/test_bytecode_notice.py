"""Where installed packages carry no bytecode and the interpreter writes none, every new process
compiles torch from source: `runtime/bytecode_cache` finds that and, where its cache cannot stand in
(turned off, or no private directory), the CLI says which command compiles them once."""

from __future__ import annotations

import compileall
import sys
from pathlib import Path

import pytest

from distcheck import cli
from distcheck.jobs import bytecode
from distcheck.processes import bytecode_cache

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


def test_a_package_without_bytecode_in_an_interpreter_that_writes_none_is_named_where_the_cache_is_off(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(bytecode_cache, "use", lambda packages=None: None)  # off, or no private directory
    assert bytecode_cache.uncompiled(["slowpkg_bc", "no_such_package_bc"]) == [str(package)]
    notice = bytecode.bytecode_notice(["slowpkg_bc"])
    assert notice is not None
    assert "every new Python process here compiles slowpkg_bc from source" in notice
    assert "no bytecode was installed and none is written" in notice
    assert f"-m compileall -q -j 0 {package}`" in notice
    assert "DISTCHECK_BYTECODE_CACHE" not in notice, "the cache is on: no advice to turn it on"
    monkeypatch.setenv("DISTCHECK_BYTECODE_CACHE", "0")
    assert "unset DISTCHECK_BYTECODE_CACHE=0" in (bytecode.bytecode_notice(["slowpkg_bc"]) or "")


def test_nothing_to_say_where_distcheck_s_cache_keeps_the_bytecode(
    package: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(bytecode_cache, "use", lambda packages=None: str(tmp_path))
    assert bytecode_cache.uncompiled(["slowpkg_bc"]) == [str(package)]
    assert bytecode.bytecode_notice(["slowpkg_bc"]) is None


def test_nothing_to_say_once_compiled_or_when_bytecode_is_written(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # the first import writes it
    monkeypatch.setattr(bytecode_cache, "use", lambda packages=None: None)
    assert bytecode_cache.uncompiled(["slowpkg_bc"]) == [] and bytecode.bytecode_notice(["slowpkg_bc"]) is None
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert compileall.compile_dir(str(package), quiet=1)
    assert bytecode_cache.uncompiled(["slowpkg_bc"]) == []


def test_importing_torch_ahead_leaves_a_missing_torch_to_the_target_s_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    bytecode.import_torch()  # says nothing: loading the target reports the missing torch with its advice


@pytest.mark.procs
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
