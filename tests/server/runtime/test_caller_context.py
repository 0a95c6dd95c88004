"""Every job carries its caller's environment, working directory and import path as they are when the run
starts, whatever process serves it (`distcheck.processes.caller_context`).

In one long-lived process, a model whose distributed result is wrong in one mode (`caller_context_models`)
is validated twice, the mode changed in between: through an environment variable read when the model's
module is imported, a file read relative to the working directory, a helper module found first on a
directory put on `sys.path`, and a variable that only takes effect when a process starts
(`PYTHONHASHSEED`, which restarts the forkserver). Each verdict must be the one a fresh process gives
(a subprocess started with the same mode), under every lifecycle of the ranks: the defaults (spares,
resident ranks), the first attempt run ahead, spares off, resident ranks off. Then the reuse decisions
one by one: resident ranks, ranks built ahead and a run ahead made under another context serve no run.

The folder's fixture checks that no process is left after each test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import caller_context_models as models
import pytest

from conftest import HERE
from distcheck import run_distributed, validate_on_cpu
from distcheck.processes import forkserver, spares
from distcheck.processes.caller_context import CallerContext, is_start_time, start_time_values
from distcheck.processes.rank_source import ValidationRanks
from distcheck.processes.resident import ResidentRanks
from distcheck.processes.spares.prepared import prepare_ranks
from distcheck.runtime import load_object
from distcheck.runtime.factory import resolve_factory
from distcheck.runtime.run_result import RankLifecycle
from distcheck.spec import MLIPSpec
from distcheck.validate.attempt_ahead import AttemptAhead

pytestmark = pytest.mark.timeout(600)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
MODELS = f"{HERE}/caller_context_models.py"
SPEC = {"format": "distcheck-spec", "version": 1}

LIFECYCLES: dict[str, dict[str, str]] = {
    "defaults": {},
    "attempt_ahead": {"DISTCHECK_ATTEMPT_AHEAD": "1"},
    "no_spares": {"DISTCHECK_SPARES": "0"},
    "no_resident": {"DISTCHECK_RESIDENT_RANKS": "0"},
}

_FRESH_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from conftest import _stable_report
from distcheck import validate_on_cpu
from distcheck.runtime import load_object
models = sys.argv[2]
report = validate_on_cpu(
    models + ":model_factory", load_object(models + ":sample_batch")(), world_size=2, timeout_sec=120,
    auto_fix=False,
)
print("REPORT " + json.dumps(_stable_report(report)))
"""


def _validate() -> Any:
    return validate_on_cpu(
        f"{MODELS}:model_factory", models.sample_batch(), world_size=2, timeout_sec=120, auto_fix=False
    )


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, Any]]:
    """`fresh(mode)`: the stable report a fresh process gives, started with the model's mode variable
    set to `mode` ("" unset), in its own cache (each mode's subprocess runs once per module)."""
    found: dict[str, dict[str, Any]] = {}

    def report(mode: str) -> dict[str, Any]:
        if mode not in found:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("DISTCHECK_", "PYTEST_"))}
            env.pop(models.MODE_VARIABLE, None)
            if mode:
                env[models.MODE_VARIABLE] = mode
            env["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp(f"fresh-cache-{mode or 'clean'}"))
            out = subprocess.run(
                [sys.executable, "-c", _FRESH_SCRIPT, ROOT, MODELS],
                env=env,
                cwd=str(tmp_path_factory.mktemp("fresh-cwd")),
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            lines = [line for line in out.stdout.splitlines() if line.startswith("REPORT ")]
            assert lines, f"the fresh process gave no report:\n{out.stdout}\n{out.stderr}"
            found[mode] = json.loads(lines[-1][len("REPORT ") :])
        return found[mode]

    return report


@pytest.fixture
def lifecycle(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A fresh cache (so the first attempt can run ahead only in the second validation) and the
    lifecycle's switches."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("DISTCHECK_ATTEMPT_AHEAD", "DISTCHECK_SPARES", "DISTCHECK_RESIDENT_RANKS", models.MODE_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    for name, value in LIFECYCLES[request.param].items():
        monkeypatch.setenv(name, value)
    yield request.param


def _helper_dir(path: Path, mode: str) -> str:
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{models.HELPER_MODULE}.py").write_text(f"MODE = {mode!r}\n")
    return str(path)


Arrange = Callable[[pytest.MonkeyPatch, Path], None]


def _env(value: str) -> Arrange:
    def arrange(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        if value:
            monkeypatch.setenv(models.MODE_VARIABLE, value)
        else:
            monkeypatch.delenv(models.MODE_VARIABLE, raising=False)

    return arrange


def _cwd(mode: str) -> Arrange:
    def arrange(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        where = tmp_path / f"cwd-{mode}"
        where.mkdir()
        (where / models.MODE_FILE).write_text(mode)
        monkeypatch.chdir(where)

    return arrange


def _path(mode: str) -> Arrange:
    def arrange(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.syspath_prepend(_helper_dir(tmp_path / f"path-{mode}", mode))

    return arrange


def _hashseed(value: str) -> Arrange:
    def arrange(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.setenv(models.MODE_VARIABLE, "hashseed")
        if value:
            monkeypatch.setenv("PYTHONHASHSEED", value)
        else:
            monkeypatch.delenv("PYTHONHASHSEED", raising=False)

    return arrange


# (before the first validation, between the two, what a fresh process gives: first, second)
SCENARIOS: dict[str, tuple[Arrange, Arrange, tuple[str, str]]] = {
    "environment": (_env(""), _env("buggy"), ("", "buggy")),
    "environment_unset": (_env("buggy"), _env(""), ("buggy", "")),
    "working_directory": (_cwd("clean"), _cwd("buggy"), ("", "buggy")),
    "sys_path": (_path("clean"), _path("buggy"), ("", "buggy")),
    "start_time_variable": (_hashseed(""), _hashseed("0"), ("", "buggy")),
}


@pytest.mark.procs
@pytest.mark.slow
@pytest.mark.parametrize("lifecycle", sorted(LIFECYCLES), indirect=True)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_second_validation_sees_what_the_caller_changed_as_a_fresh_process_would(
    lifecycle: str,
    scenario: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fresh: Callable[[str], dict[str, Any]],
    stable_report: Callable[[Any], dict[str, Any]],
) -> None:
    before, between, (first_mode, second_mode) = SCENARIOS[scenario]
    pool = spares.pool()
    claimed_before = sum(pool.counts[k] for k in ("claimed_warm", "claimed_warming", "started_on_claim"))
    before(monkeypatch, tmp_path)
    first = _validate()
    between(monkeypatch, tmp_path)
    second = _validate()
    assert first.ok == (first_mode == ""), first.next_action
    assert second.ok == (second_mode == ""), second.next_action
    assert stable_report(first) == fresh(first_mode)
    assert stable_report(second) == fresh(second_mode)
    claimed = sum(pool.counts[k] for k in ("claimed_warm", "claimed_warming", "started_on_claim")) - claimed_before
    if lifecycle == "no_spares":
        assert claimed == 0, pool.counts
    else:
        assert claimed > 0, pool.counts
    # a first spec remembered under other values of the variables the model read is not offered
    # (`spares.learned.first_spec_for`): the second validation's first attempt then waits for its reference
    if lifecycle == "attempt_ahead" and not scenario.startswith("environment"):
        assert "ran_ahead" in second.attempts[0].timings, second.attempts[0].timings


# -- the reuse decisions, one by one ---------------------------------------------------------------
def _batch() -> Any:
    return load_object(f"{MODELS}:sample_batch")()


def _facts(run: Any) -> list[tuple[float, int]]:
    return [(float(out["facts"][0]), int(out["facts"][1])) for out in run.rank_outputs]


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(models.MODE_VARIABLE, raising=False)
    monkeypatch.delenv("DISTCHECK_SPARES", raising=False)


@pytest.mark.procs
@pytest.mark.parametrize("change", ["environment", "working_directory", "sys_path"])
def test_resident_ranks_serve_no_run_of_another_caller_context(
    clean: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: str
) -> None:
    """Between two runs of one validation's ranks the caller changes what the model reads: the next run
    is not served by the ranks kept from the last (which put back the last run's environment, working
    directory and path), and its ranks see the change."""
    before, between = {
        "environment": (_env(""), _env("buggy")),
        "working_directory": (_cwd("clean"), _cwd("buggy")),
        "sys_path": (_path("clean"), _path("buggy")),
    }[change]
    before(monkeypatch, tmp_path)
    with ResidentRanks() as kept:
        first = run_distributed(
            f"{MODELS}:probe_factory", _batch(), SPEC, world_size=2, ranks=ValidationRanks(resident=kept)
        )
        again = run_distributed(
            f"{MODELS}:probe_factory", _batch(), SPEC, world_size=2, ranks=ValidationRanks(resident=kept)
        )
        assert again.lifecycle is RankLifecycle.RESIDENT and _facts(again) == _facts(first)
        assert [buggy for buggy, _ in _facts(first)] == [0.0, 0.0]
        between(monkeypatch, tmp_path)
        changed = run_distributed(
            f"{MODELS}:probe_factory", _batch(), SPEC, world_size=2, ranks=ValidationRanks(resident=kept)
        )
    assert changed.lifecycle is not RankLifecycle.RESIDENT
    assert [buggy for buggy, _ in _facts(changed)] == [1.0, 1.0]
    assert not {pid for _, pid in _facts(changed)} & {pid for _, pid in _facts(first)}


@pytest.mark.procs
def test_ranks_built_ahead_under_another_caller_context_are_not_used(
    clean: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = prepare_ranks(resolve_factory(f"{MODELS}:probe_factory"), SPEC, 2, ["cpu", "cpu"])
    assert prepared is not None
    monkeypatch.setenv(models.MODE_VARIABLE, "buggy")
    run = run_distributed(
        f"{MODELS}:probe_factory", _batch(), SPEC, world_size=2, ranks=ValidationRanks(prepared=prepared)
    )
    assert prepared.used and run.lifecycle is not RankLifecycle.PREPARED
    assert [buggy for buggy, _ in _facts(run)] == [1.0, 1.0]


@pytest.mark.procs
def test_ranks_built_ahead_under_the_same_context_are_used(clean: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(models.MODE_VARIABLE, "buggy")
    prepared = prepare_ranks(resolve_factory(f"{MODELS}:probe_factory"), SPEC, 2, ["cpu", "cpu"])
    assert prepared is not None
    run = run_distributed(
        f"{MODELS}:probe_factory", _batch(), SPEC, world_size=2, ranks=ValidationRanks(prepared=prepared)
    )
    assert run.lifecycle is RankLifecycle.PREPARED
    assert [buggy for buggy, _ in _facts(run)] == [1.0, 1.0]


def test_a_run_ahead_under_another_caller_context_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = MLIPSpec()
    outcome = object()
    monkeypatch.delenv(models.MODE_VARIABLE, raising=False)
    early = AttemptAhead(spec, lambda s, sink: outcome)  # type: ignore[arg-type,return-value]
    early()
    monkeypatch.setenv(models.MODE_VARIABLE, "buggy")
    assert early.take(spec, lambda name, info: None) is None
    monkeypatch.delenv(models.MODE_VARIABLE)
    again = AttemptAhead(spec, lambda s, sink: outcome)  # type: ignore[arg-type,return-value]
    again()
    assert again.take(spec, lambda name, info: None) is outcome


# -- the record itself -----------------------------------------------------------------------------
def test_the_context_is_the_callers_at_capture_and_apply_puts_it_in_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DISTCHECK_TEST_CONTEXT", "1")
    captured = CallerContext.capture()
    assert captured.environ["DISTCHECK_TEST_CONTEXT"] == "1"
    assert captured.cwd == os.getcwd() and captured.sys_path == list(sys.path)
    monkeypatch.setenv("DISTCHECK_TEST_CONTEXT", "2")
    monkeypatch.setenv("DISTCHECK_TEST_CONTEXT_EXTRA", "x")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert CallerContext.capture() != captured
    captured.apply()
    assert os.environ["DISTCHECK_TEST_CONTEXT"] == "1" and "DISTCHECK_TEST_CONTEXT_EXTRA" not in os.environ
    assert os.getcwd() == captured.cwd and sys.path == captured.sys_path
    assert CallerContext.capture() == captured


def test_start_time_variables_are_named_in_one_place() -> None:
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING", "OMP_NUM_THREADS", "LD_PRELOAD", "PYTHONHASHSEED"):
        assert is_start_time(name), name
    # the import path is carried in every job; a distcheck switch or a model's own variable is read later
    for name in ("PYTHONPATH", "PYTHONSAFEPATH", "DISTCHECK_SPARES", models.MODE_VARIABLE, "NCCL_DEBUG"):
        assert not is_start_time(name), name
    assert start_time_values({"OMP_NUM_THREADS": "2", "HOME": "/h"}) == {"OMP_NUM_THREADS": "2"}


@pytest.mark.procs
def test_the_forkserver_restarts_when_a_start_time_variable_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    forkserver.process_context("forkserver")
    pid = forkserver.running_pid()
    assert pid is not None
    forkserver.process_context("forkserver")
    assert forkserver.running_pid() == pid, "restarted although nothing changed"
    monkeypatch.setenv("DISTCHECK_TEST_MODEL_MODE", "anything")
    forkserver.process_context("forkserver")
    assert forkserver.running_pid() == pid, "restarted for a variable read after the start"
    monkeypatch.setenv("OMP_NUM_THREADS", str(int(os.environ.get("OMP_NUM_THREADS", "1")) + 1))
    forkserver.process_context("forkserver")
    assert forkserver.running_pid() not in (None, pid)
