"""The CLI starts a local run's process pool and spares before it loads the target and the sample
(`jobs/early_start.py`), so their start overlaps that load, and drops what a failed load left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import distcheck
from distcheck import cli
from distcheck.jobs import early_start
from distcheck.options import CLI
from distcheck.processes import forkserver, spares
from distcheck.processes.spares import learned

ROOT = Path(__file__).resolve().parents[2]
FACTORY = "/project/model.py:model_factory"


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """What `start_early` starts, recorded instead of started."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(forkserver, "process_context", lambda: calls.append(("pool",)))

    def prestart(devices: Any, world_size: int, *, factory: str | None = None) -> None:
        calls.append(("spares", devices, world_size, factory))

    monkeypatch.setattr(spares, "prestart", prestart)
    monkeypatch.delenv("DISTCHECK_SPARES", raising=False)
    monkeypatch.delenv("DISTCHECK_START_METHOD", raising=False)
    monkeypatch.setattr(learned, "installed_torch_version", lambda: "2.13.0+cu130")  # a CUDA build
    return calls


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"device": "cpu", "world_size": 3}, ("spares", "cpu", 3, FACTORY)),
        ({"device": "cuda:1"}, ("spares", "cuda:1", 2, FACTORY)),  # the default world size
        ({"device": "cuda:0,cuda:1"}, ("spares", ["cuda:0", "cuda:1"], 2, FACTORY)),
        ({"device": "cpu,cpu,cpu"}, ("spares", "cpu", 3, FACTORY)),  # the list sets the world size
    ],
)
def test_devices_named_outright_start_the_pool_and_that_validations_spares(
    started: list[tuple[Any, ...]], options: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    early_start.start_early(options, FACTORY, CLI)
    assert started == [("pool",), expected]


@pytest.mark.parametrize(
    "options",
    [
        {},  # auto: torch decides, once it is imported
        {"device": "auto"},
        {"device": "cuda", "world_size": 2},  # one rank per GPU: torch counts them
        {"device": "cuda:0,cuda:1", "world_size": 3},  # refused later, with its hint
    ],
)
def test_devices_that_need_torch_or_a_check_start_only_the_pool(
    started: list[tuple[Any, ...]], options: dict[str, Any]
) -> None:
    early_start.start_early(options, FACTORY, CLI)
    assert started == [("pool",)]


def test_auto_with_a_cpu_build_of_torch_starts_spares_on_the_cpu(
    started: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(learned, "installed_torch_version", lambda: "2.13.0+cpu")
    early_start.start_early({"world_size": 3}, FACTORY, CLI)
    assert started == [("pool",), ("spares", "cpu", 3, FACTORY)]


@pytest.mark.procs
def test_the_torch_build_is_read_without_importing_torch() -> None:
    code = (
        "import sys; from distcheck.processes.spares import learned; "
        "print(learned.installed_torch_version().endswith('+cpu'), 'torch' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(distcheck.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    import importlib.metadata

    cpu_build = importlib.metadata.version("torch").endswith("+cpu")
    assert out.stdout.split() == [str(cpu_build), "False"], out.stdout + out.stderr


def test_with_spares_off_only_the_pool_starts(started: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTCHECK_SPARES", "0")
    early_start.start_early({"device": "cpu"}, FACTORY, CLI)
    assert started == [("pool",)]


def test_a_start_that_fails_is_left_to_the_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise OSError("no forkserver today")

    monkeypatch.setattr(forkserver, "process_context", broken)
    early_start.start_early({"device": "cpu"}, FACTORY, CLI)  # does not raise


EARLY_MODEL = """
import json, os
from distcheck.processes import forkserver, spares

try:  # the first process to import this file is the CLI; ranks and the reference import it later
    with open(os.environ["DISTCHECK_TEST_EARLY"], "x") as fh:
        json.dump({"pool": forkserver.forkserver_context() is not None,
                   "wanted": spares.pool().report()["wanted"]}, fh)
except FileExistsError:
    pass

from examples.pair_potential import model_factory, sample_batch
"""


@pytest.mark.procs
def test_the_cli_has_started_the_pool_and_spares_when_it_imports_the_factory(tmp_path: Path) -> None:
    (tmp_path / "early_model.py").write_text(EARLY_MODEL)
    seen = tmp_path / "seen.json"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(Path(distcheck.__file__).parents[1]), str(ROOT)]),
        DISTCHECK_TEST_EARLY=str(seen),
        NO_COLOR="1",
    )
    env.pop("DISTCHECK_SPARES", None)
    proc = subprocess.run(
        [sys.executable, "-m", "distcheck", "validate", "early_model.py:model_factory", "--device", "cpu"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == cli.EXIT_PASSED, proc.stdout + proc.stderr
    assert json.loads(seen.read_text()) == {"pool": True, "wanted": {"cpu": 3}}


@pytest.mark.procs
def test_spares_a_failed_load_left_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.py").write_text("def model_factory():\n    return None\n")  # and no sample_batch
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DISTCHECK_SPARES", raising=False)
    monkeypatch.setattr(spares.pool(), "keep_s", None)  # as in a CLI process: nothing kept warm
    code = cli.main(["validate", "broken.py:model_factory", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_ERROR, err
    report = spares.report()
    assert report["wanted"] == {} and report["devices"] == {}, report


@pytest.mark.procs
def test_the_cli_reaches_the_early_start_without_importing_torch(tmp_path: Path) -> None:
    """Everything `_cmd_validate` does before it starts the pool (the launcher check among it) leaves
    torch unimported, so the forkserver's torch import overlaps the CLI's own."""
    code = """
import sys
from distcheck import cli
from distcheck.jobs import early_start
seen = []
early_start.start_early = lambda options, factory, words: seen.append("torch" in sys.modules)
cli.main(["validate", "missing.py:model_factory", "--device", "cpu"])
print(seen)
"""
    env = dict(os.environ, PYTHONPATH=str(Path(distcheck.__file__).parents[1]))
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    (tmp_path / "missing.py").write_text("def model_factory():\n    return None\n")
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.stdout.strip().splitlines()[-1:] == ["[False]"], proc.stdout + proc.stderr
