"""The environment record (`distcheck.environment`): docs/environment.md is generated from it, every
`DISTCHECK_*` name in server/ is in it, each default is what the code uses when the variable is unset,
an unreadable value warns once and takes the default, and a switch changed between two reads (two
validations) takes effect at the second."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from distcheck import environment
from distcheck.environment import (
    SWITCHES,
    EnvironmentSwitchWarning,
    Settings,
    Switch,
    environment_markdown,
    read_settings,
    switch,
)
from distcheck.processes.spares import settings as spares_settings

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "server"
PACKAGE = SERVER / "distcheck"
DOC = ROOT / "docs" / "environment.md"

NAME = re.compile(r"(?<![A-Za-z0-9_])DISTCHECK_[A-Z0-9_]*[A-Z0-9]")
"""A `DISTCHECK_*` name, not part of a longer identifier (`_DISTCHECK_DIR` is a module's directory)."""


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No `DISTCHECK_*` variable set, and no value warned about yet in this process."""
    for name in [n for n in os.environ if n.startswith("DISTCHECK_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(environment, "_REPORTED", set())
    yield


# --------------------------------------------------------------------------------------------------
# the record, its Settings and its documentation


def test_the_documentation_is_the_records() -> None:
    assert DOC.read_text(encoding="utf-8") == environment_markdown(), (
        "docs/environment.md is generated: run `cd server && python -m distcheck.environment > ../docs/environment.md`"
    )


@pytest.mark.procs
def test_python_m_prints_the_documentation_without_torch() -> None:
    code = "import runpy, sys; runpy.run_module('distcheck.environment', run_name='__main__'); "
    code += "sys.stderr.write('torch' if 'torch' in sys.modules else '')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=SERVER, check=True)
    assert done.stdout == environment_markdown() and done.stderr == ""


def test_settings_has_one_typed_attribute_per_switch() -> None:
    attributes = [f.name for f in dataclasses.fields(Settings) if f.name != "problems"]
    assert attributes == [s.attribute for s in SWITCHES]
    assert len({s.name for s in SWITCHES}) == len(SWITCHES)
    for s in SWITCHES:
        assert s.name.startswith("DISTCHECK_") and s.meaning.endswith(".") and s.readers, s.name
        assert switch(s.name) is s
        assert (s.default is None) == bool(s.unset), f"{s.name}: a None default says what unset means"
        assert not s.setters or s.internal, f"{s.name}: only an internal switch is set by distcheck"
    with pytest.raises(dataclasses.FrozenInstanceError):
        read_settings().spares = False  # type: ignore[misc]


def _server_files() -> Iterator[Path]:
    for path in SERVER.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and not any(p.endswith(".egg-info") for p in path.parts):
            yield path


@pytest.mark.procs
def test_every_distcheck_name_in_server_and_docs_is_recorded() -> None:
    """A variable added anywhere in server/ (or named in the README or docs) without a `Switch` fails here."""
    recorded = {s.name for s in SWITCHES}
    files = [*_server_files(), ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    unrecorded: dict[str, set[str]] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for name in set(NAME.findall(text)) - recorded:
            unrecorded.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert not unrecorded, f"DISTCHECK_* names missing from distcheck.environment.SWITCHES: {unrecorded}"


def test_no_module_but_the_record_spells_a_switch_in_code() -> None:
    """Every read (and every set) of a switch names it through the record: no string literal that is a
    switch's name in code outside environment.py (docstrings and messages may mention them)."""
    literals: list[str] = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "environment.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
                literals.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value}")
    assert not literals, literals


def _function_source(where: str) -> str:
    module, _, function = where.partition(":")
    path = PACKAGE / module
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return ast.get_source_segment(source, node) or ""
    raise AssertionError(f"{where}: no function {function} in {module}")


@pytest.mark.parametrize("s", SWITCHES, ids=[s.name for s in SWITCHES])
def test_the_readers_and_setters_named_read_and_set_it(s: Switch) -> None:
    for where in s.readers:
        assert f".{s.attribute}" in _function_source(where), f"{where} does not read Settings.{s.attribute}"
    for where in s.setters:
        _function_source(where)
        module = (PACKAGE / where.partition(":")[0]).read_text(encoding="utf-8")
        assert f"{s.attribute.upper()}.name" in module, f"{where} sets {s.name} by the record's name"


# --------------------------------------------------------------------------------------------------
# the defaults are what the code uses when unset


def _runner_keep() -> float:
    from distcheck.jobs.runner import _keep_seconds

    return _keep_seconds()


def _start_method(monkeypatch: pytest.MonkeyPatch) -> str:
    """The start method `process_context()` picks with nothing named, without starting any process."""
    from distcheck.processes import forkserver

    monkeypatch.setattr(forkserver, "_CONTEXTS", {})
    monkeypatch.setattr(forkserver, "_start_helpers", lambda method: None)
    monkeypatch.setattr(forkserver, "_restart_if_stale", lambda: None, raising=False)
    return str(forkserver.process_context().get_start_method())


def _untrusted() -> list[str]:
    from distcheck import importguard

    return importguard._env_untrusted()


def _preload() -> tuple[str, ...]:
    from distcheck.processes.forkserver import extra_preload

    return tuple(extra_preload())


def _spare_packages() -> tuple[str, ...]:
    from distcheck.processes.spares.learned import packages_for

    return tuple(packages_for(None))


def _attempt_ahead(monkeypatch: pytest.MonkeyPatch) -> bool | None:
    """None where the code decides by the cores (auto), else the forced answer."""
    from distcheck import rank_limits

    monkeypatch.setattr(rank_limits, "usable_cores", lambda: 3)
    with_cores, without = spares_settings.attempt_ahead_enabled(2), spares_settings.attempt_ahead_enabled(3)
    return None if (with_cores, without) == (True, False) else with_cores


UNSET: dict[str, Callable[[pytest.MonkeyPatch], Any]] = {
    "DISTCHECK_SPARES": lambda mp: spares_settings.enabled(),
    "DISTCHECK_SPARES_MAX": lambda mp: spares_settings.pool_bounds().max_spares,
    "DISTCHECK_SPARES_MAX_GPU_MB": lambda mp: spares_settings.pool_bounds().max_gpu_bytes,
    "DISTCHECK_SPARES_IDLE_S": lambda mp: spares_settings.pool_bounds().idle_timeout_s,
    "DISTCHECK_SPARES_KEEP_S": lambda mp: spares_settings.pool_bounds().keep_s,
    "DISTCHECK_RESIDENT_RANKS": lambda mp: spares_settings.resident_enabled(),
    "DISTCHECK_ATTEMPT_AHEAD": _attempt_ahead,
    "DISTCHECK_FIELD_CACHE": lambda mp: spares_settings.field_cache_enabled(),
    "DISTCHECK_BYTECODE_CACHE": lambda mp: spares_settings.bytecode_cache_enabled(),
    "DISTCHECK_START_METHOD": lambda mp: None if _start_method(mp) == read_settings().start_method_in_use() else "?",
    "DISTCHECK_PRELOAD": lambda mp: _preload(),
    "DISTCHECK_SPARE_PACKAGES": lambda mp: _spare_packages(),
    "DISTCHECK_UNTRUSTED_PATHS": lambda mp: tuple(_untrusted()),
    "DISTCHECK_RANK": lambda mp: read_settings().rank,
}
"""What the code that reads each switch uses when it is unset, as the record's default says it."""

ELSEWHERE: dict[str, Callable[[], Any]] = {"jobs/runner.py:_keep_seconds": _runner_keep}
"""The readers with a default of their own (`Switch.elsewhere`)."""


def test_every_switch_has_its_unset_check() -> None:
    assert set(UNSET) == {s.name for s in SWITCHES}
    assert set(ELSEWHERE) == {reader for s in SWITCHES for reader, _ in s.elsewhere}


@pytest.mark.parametrize("s", SWITCHES, ids=[s.name for s in SWITCHES])
def test_the_default_is_what_the_code_uses_when_unset(s: Switch, monkeypatch: pytest.MonkeyPatch) -> None:
    assert getattr(read_settings({}), s.attribute) == s.default
    assert UNSET[s.name](monkeypatch) == s.default
    for reader, value in s.elsewhere:
        assert ELSEWHERE[reader]() == value, reader


def test_the_two_switches_read_twice_agree_with_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """DISTCHECK_SPARES_KEEP_S: unset, a library call keeps nothing warm and the editor's runner 600 s;
    set, both take the value. DISTCHECK_START_METHOD: the process pool and `spares.enabled` pick the
    same method, unset and set."""
    assert spares_settings.pool_bounds().keep_s is None and _runner_keep() == 600.0
    monkeypatch.setenv("DISTCHECK_SPARES_KEEP_S", "0")
    assert spares_settings.pool_bounds().keep_s == 0.0 and _runner_keep() == 0.0
    monkeypatch.setenv("DISTCHECK_SPARES_KEEP_S", "45")
    assert spares_settings.pool_bounds().keep_s == 45.0 and _runner_keep() == 45.0
    assert _start_method(monkeypatch) == "forkserver" and spares_settings.enabled()
    monkeypatch.setenv("DISTCHECK_START_METHOD", "spawn")
    assert _start_method(monkeypatch) == "spawn" and not spares_settings.enabled()


def test_a_validation_inside_a_rank_is_refused_by_the_records_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from distcheck.processes.launch import run_distributed
    from distcheck.runtime.errors import SetupError

    monkeypatch.setenv(environment.RANK.name, "0")
    with pytest.raises(SetupError, match="inside a rank"):
        run_distributed("examples.pair_potential:model_factory", None, None, world_size=2)


# --------------------------------------------------------------------------------------------------
# values: read, unreadable, changed


@pytest.mark.parametrize(
    ("name", "raw", "value"),
    [
        ("DISTCHECK_SPARES", "OFF", False),
        ("DISTCHECK_SPARES", " yes ", True),
        ("DISTCHECK_SPARES_MAX", "3", 3),
        ("DISTCHECK_SPARES_MAX_GPU_MB", "512.5", 512.5),
        ("DISTCHECK_SPARES_IDLE_S", "30", 30.0),
        ("DISTCHECK_SPARES_KEEP_S", "0", 0.0),
        ("DISTCHECK_ATTEMPT_AHEAD", "auto", None),
        ("DISTCHECK_ATTEMPT_AHEAD", "1", True),
        ("DISTCHECK_ATTEMPT_AHEAD", "false", False),
        ("DISTCHECK_START_METHOD", "spawn", "spawn"),
        ("DISTCHECK_PRELOAD", " aimnet.models, mace.modules,,aimnet.models ", ("aimnet.models", "mace.modules")),
        ("DISTCHECK_UNTRUSTED_PATHS", f"/a{os.pathsep}/b c{os.pathsep}{os.pathsep}/a", ("/a", "/b c")),
        ("DISTCHECK_RANK", "reference", "reference"),
        ("DISTCHECK_FIELD_CACHE", "", True),
    ],
)
def test_a_value_is_read_as_its_kind(name: str, raw: str, value: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings = read_settings({name: raw})
    assert getattr(settings, switch(name).attribute) == value and settings.problems == ()


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("DISTCHECK_SPARES_MAX", "abc"),
        ("DISTCHECK_SPARES_MAX", "0"),
        ("DISTCHECK_SPARES_MAX", "2.5"),
        ("DISTCHECK_SPARES_MAX_GPU_MB", "nan"),
        ("DISTCHECK_SPARES_MAX_GPU_MB", "0"),
        ("DISTCHECK_SPARES_IDLE_S", "-1"),
        ("DISTCHECK_SPARES_IDLE_S", "inf"),
        ("DISTCHECK_SPARES_KEEP_S", "soon"),
        ("DISTCHECK_SPARES", "maybe"),
        ("DISTCHECK_ATTEMPT_AHEAD", "sometimes"),
        ("DISTCHECK_START_METHOD", "thread"),
    ],
)
def test_an_unreadable_value_warns_once_and_takes_the_default(name: str, raw: str) -> None:
    s = switch(name)
    with pytest.warns(EnvironmentSwitchWarning) as caught:
        settings = read_settings({name: raw})
    assert getattr(settings, s.attribute) == s.default
    (message,) = [str(w.message) for w in caught]
    assert f"{name}={raw!r}" in message and f"using the default ({s.shown_default()}) instead" in message
    assert f"Set {name} to {s.words}, or unset it" in message and settings.problems == (message,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process and value: the second read warns nothing
        again = read_settings({name: raw})
    assert again == settings


def test_an_unreadable_bound_reaches_the_pool_as_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTCHECK_SPARES_MAX", "abc")
    with pytest.warns(EnvironmentSwitchWarning, match=r"DISTCHECK_SPARES_MAX='abc' is not a whole number >= 1"):
        bounds = spares_settings.pool_bounds()
    assert bounds.max_spares == 8
    monkeypatch.setenv("DISTCHECK_SPARES_MAX_GPU_MB", "512")
    monkeypatch.setenv("DISTCHECK_SPARES_MAX", "4")
    assert spares_settings.pool_bounds().max_gpu_bytes == 512 * spares_settings.MIB
    assert spares_settings.pool_bounds().max_spares == 4


def test_a_switch_changed_between_two_reads_takes_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is read at import: each read sees the environment of its moment, and a `Settings` value
    read before keeps what it read."""
    before = read_settings()
    monkeypatch.setenv("DISTCHECK_RESIDENT_RANKS", "0")
    monkeypatch.setenv("DISTCHECK_PRELOAD", "slowpkg")
    assert not spares_settings.resident_enabled() and _preload() == ("slowpkg",)
    assert before.resident_ranks and spares_settings.resident_enabled(before)
    monkeypatch.delenv("DISTCHECK_RESIDENT_RANKS")
    assert spares_settings.resident_enabled()


def test_each_validation_reads_the_switches_when_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """`settle_run` (every validation's start) reads the environment then, into `RunSetup.settings`: a
    switch set between two validations is the second's."""
    from distcheck.options import OPTIONS
    from distcheck.validate.run_setup import ValidationRequest, settle_run
    from examples import pair_potential

    options: dict[str, Any] = {o.name: o.default for o in OPTIONS}
    request = ValidationRequest(
        pair_potential.model_factory, pair_potential.sample_batch(), spec=None, **{**options, "device": "cpu"}
    )
    first = settle_run(request, None).settings
    monkeypatch.setenv("DISTCHECK_ATTEMPT_AHEAD", "0")
    monkeypatch.setenv("DISTCHECK_SPARES_MAX", "many")
    with pytest.warns(EnvironmentSwitchWarning, match="DISTCHECK_SPARES_MAX='many'"):
        second = settle_run(request, None).settings
    assert first.attempt_ahead is None and second.attempt_ahead is False
    assert second.spares_max == 8 and second.problems and not first.problems
