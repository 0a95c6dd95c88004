"""Option bounds at every entry point (library, run_distributed, CLI, pyproject table, editor settings)
and the whole-validation deadline.

A refused option must be refused before any process starts: the tests replace the functions that
start processes (the reference run, `run_distributed`, the process pool) with ones that fail the test,
and check that this process has no new children.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

import distcheck
import distcheck.processes.launch as launch
import distcheck.validate.executor as executor
import distcheck.validate.rank_runs as rank_runs
from distcheck import cli, rank_limits
from distcheck.jobs.pyproject import load_targets
from distcheck.lsp.config import SETTING_KEYS, load_workspace_targets, read_disk, read_settings
from distcheck.option_check import ConfigError, OptionError, check_option
from distcheck.options import EDITOR_SETTINGS, OPTION_ALIASES
from distcheck.report import DeadlineReached, ReportMeta, TraceReport
from distcheck.runtime.factory import load_object
from distcheck.validate import validate_on_cpu
from distcheck.validate.deadline import Budget
from distcheck.validate.next_action import next_action
from examples import pair_potential, unaware_model

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MODELS = HERE / "option_bound_models.py"
FAULTS = HERE / "runtime" / "fault_models.py"
PAIR = "examples.pair_potential:model_factory"

NAN, INF = math.nan, math.inf

# (option, bad value, words the message must hold): every shape of a bad value, per option.
BAD_VALUES: list[tuple[str, Any, str]] = [
    ("atol", NAN, "finite number >= 0"),
    ("atol", INF, "finite number >= 0"),
    ("atol", -1.0, "finite number >= 0"),
    ("atol", "abc", "a number"),
    ("atol", True, "a number"),
    ("rtol", NAN, "finite number >= 0"),
    ("rtol", -INF, "finite number >= 0"),
    ("rtol", -1e-9, "finite number >= 0"),
    ("timeout_sec", 0, "finite number of seconds > 0"),
    ("timeout_sec", -1, "finite number of seconds > 0"),
    ("timeout_sec", NAN, "finite number of seconds > 0"),
    ("timeout_sec", INF, "finite number of seconds > 0"),
    ("timeout_sec", "abc", "a number"),
    ("deadline_sec", 0, "finite number of seconds > 0"),
    ("deadline_sec", -5.0, "finite number of seconds > 0"),
    ("deadline_sec", NAN, "finite number of seconds > 0"),
    ("deadline_sec", INF, "finite number of seconds > 0"),
    ("world_size", 0, "at least 1"),
    ("world_size", -1, "at least 1"),
    ("world_size", True, "an integer"),
    ("world_size", "abc", "an integer"),
    ("world_size", 2.0, "an integer"),
    ("max_fix_attempts", -1, ">= 0"),
    ("max_fix_attempts", True, "an integer"),
    ("helper_sample_every", 0, "at least 1"),
    ("helper_sample_every", -3, "at least 1"),
    ("allow_oversubscribe", "yes", "true or false"),
    ("allow_oversubscribe", 1, "true or false"),
]


def _ids(cases: list[tuple[str, Any, str]]) -> list[str]:
    return [f"{o}={v!r}" for o, v, _ in cases]


class ProcessStarted(AssertionError):
    """Raised by the stand-ins of the functions that start processes."""


@pytest.fixture
def no_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every way a validation starts a process fails the test (and is recorded); afterwards this
    process must have no child it did not have before but the warm pool's forkserver, which the CLI
    starts on purpose before its sample loads (`jobs/early_start`)."""
    started: list[str] = []
    before = {p.pid for p in _descendants()}

    def refuse(name: str) -> Any:
        def stand_in(*_args: Any, **_kwargs: Any) -> Any:
            started.append(name)
            raise ProcessStarted(f"{name} was called: a process would have started")

        return stand_in

    monkeypatch.setattr(executor, "run_reference", refuse("run_reference"))
    monkeypatch.setattr(rank_runs, "run_distributed", refuse("run_distributed"))
    monkeypatch.setattr(launch, "process_context", refuse("process_context"))
    yield started
    after = {p.pid for p in _descendants()}
    assert after <= before, f"new child processes: {after - before}"


def _descendants() -> list[psutil.Process]:
    me = psutil.Process()
    alive = []
    for child in me.children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.Error:
            continue
        if ("forkserver import main" in cmd or "resource_tracker import main" in cmd) and child.ppid() == me.pid:
            continue  # the warm pool stays by design
        alive.append(child)
    return alive


def _assert_no_ranks_left() -> None:
    deadline = time.monotonic() + 10
    while _descendants() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _descendants(), [p.cmdline() for p in _descendants()]


# --------------------------------------------------------------------------------------------------
# the check itself


@pytest.mark.parametrize(("option", "value", "words"), BAD_VALUES, ids=_ids(BAD_VALUES))
def test_check_option_names_the_option_the_value_and_what_is_valid(option: str, value: Any, words: str) -> None:
    with pytest.raises(OptionError) as refused:
        check_option(option, value)
    err = refused.value
    assert isinstance(err, ValueError) and isinstance(err, ConfigError)
    assert err.option == option and err.message.startswith(option)
    assert words in err.message and repr(value) in err.message
    assert err.hint and option in err.hint


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("atol", 0.0),
        ("rtol", 1e-12),
        ("timeout_sec", 0.5),
        ("deadline_sec", None),
        ("deadline_sec", 30),
        ("world_size", 1),
        ("max_fix_attempts", 0),
        ("helper_sample_every", 1),
        ("allow_oversubscribe", True),
    ],
)
def test_valid_edges_are_accepted(option: str, value: Any) -> None:
    check_option(option, value)


# --------------------------------------------------------------------------------------------------
# library


@pytest.mark.parametrize(("option", "value", "words"), BAD_VALUES, ids=_ids(BAD_VALUES))
def test_library_refuses_before_any_process(option: str, value: Any, words: str, no_processes: list[str]) -> None:
    t0 = time.perf_counter()
    with pytest.raises(OptionError) as refused:
        validate_on_cpu(pair_potential.model_factory, pair_potential.sample_batch(), **{option: value})
    assert refused.value.option == option and words in refused.value.message
    assert no_processes == [] and time.perf_counter() - t0 < 5


@pytest.mark.parametrize("world_size", [17, 100, 1000, 10**6])
def test_more_ranks_than_atoms_of_the_smallest_system(world_size: int, no_processes: list[str]) -> None:
    two_systems = load_object(f"{MODELS}:two_systems")
    with pytest.raises(OptionError) as refused:
        validate_on_cpu(pair_potential.model_factory, two_systems(), world_size=world_size, allow_oversubscribe=True)
    message = refused.value.message
    assert refused.value.option == "world_size"
    assert f"world_size {world_size} is more than the 16 atoms of system 1" in message, message
    assert "every rank must own atoms of every system" in message and "at most 16" in refused.value.hint
    assert no_processes == []


def test_cpu_oversubscription_needs_allow_oversubscribe(
    monkeypatch: pytest.MonkeyPatch, no_processes: list[str]
) -> None:
    monkeypatch.setattr(rank_limits, "usable_cores", lambda: 1)  # 4 ranks at most
    batch = pair_potential.sample_batch()  # 320 atoms: only the core bound applies
    for world_size in (5, 64):
        with pytest.raises(OptionError) as refused:
            validate_on_cpu(pair_potential.model_factory, batch, world_size=world_size)
        err = refused.value
        assert err.option == "world_size" and "more than 4 per core on the 1 core" in err.message
        assert "allow_oversubscribe=True" in err.hint and "--allow-oversubscribe" not in err.hint  # library words
    assert no_processes == []
    # forced: the checks pass and the validation goes on to the reference run (stopped here)
    with pytest.raises(ProcessStarted):
        validate_on_cpu(pair_potential.model_factory, batch, world_size=5, allow_oversubscribe=True)
    assert no_processes == ["run_reference"]


def test_default_limit_follows_the_affinity_mask() -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert rank_limits.usable_cores() == cores and rank_limits.cpu_rank_limit() == rank_limits.RANKS_PER_CORE * cores


@pytest.mark.parametrize("timeout", [NAN, INF, 0.0, -1.0, True, "abc"])
def test_run_distributed_refuses_a_bad_timeout(timeout: Any, no_processes: list[str]) -> None:
    with pytest.raises(OptionError) as refused:
        distcheck.run_distributed(PAIR, pair_potential.sample_batch(), {}, timeout_sec=timeout)
    assert refused.value.option == "timeout_sec" and no_processes == []


@pytest.mark.parametrize("world_size", [0, -2, True, "2"])
def test_run_distributed_refuses_a_bad_world_size(world_size: Any, no_processes: list[str]) -> None:
    with pytest.raises(OptionError) as refused:
        distcheck.run_distributed(PAIR, pair_potential.sample_batch(), {}, world_size=world_size)
    assert refused.value.option == "world_size" and no_processes == []


# --------------------------------------------------------------------------------------------------
# CLI


CLI_FLAGS: list[tuple[list[str], str]] = [
    (["--atol", "nan"], "atol must be a finite number >= 0, got nan"),
    (["--atol", "inf"], "atol must be a finite number >= 0, got inf"),
    (["--atol", "-1"], "atol must be a finite number >= 0, got -1.0"),
    (["--rtol", "NaN"], "rtol must be a finite number >= 0, got nan"),
    (["--rtol=-inf"], "rtol must be a finite number >= 0, got -inf"),
    (["--timeout", "0"], "timeout_sec must be a finite number of seconds > 0, got 0.0"),
    (["--timeout", "-1"], "timeout_sec must be a finite number of seconds > 0, got -1.0"),
    (["--timeout", "nan"], "timeout_sec must be a finite number of seconds > 0, got nan"),
    (["--timeout", "inf"], "timeout_sec must be a finite number of seconds > 0, got inf"),
    (["--deadline", "0"], "deadline_sec must be a finite number of seconds > 0, got 0.0"),
    (["--deadline", "inf"], "deadline_sec must be a finite number of seconds > 0, got inf"),
    (["--world-size", "0"], "world_size must be at least 1, got 0"),
    (["--world-size", "-4"], "world_size must be at least 1, got -4"),
    (["--world-size", "1000"], "world_size 1000 is more than the 320 atoms of the sample"),
    (["--world-size", str(10**6)], f"world_size {10**6} is more than the 320 atoms of the sample"),
    (["--world-size", "abc"], "invalid int value: 'abc'"),
    (["--world-size", "2.5"], "invalid int value: '2.5'"),
    (["--atol", "abc"], "invalid float value: 'abc'"),
    (["--max-fix-attempts", "-1"], "max_fix_attempts must be >= 0, got -1"),
    (["--helper-sample-every", "0"], "helper_sample_every must be at least 1, got 0"),
]


@pytest.mark.procs
@pytest.mark.parametrize(("flags", "expected"), CLI_FLAGS, ids=[" ".join(f) for f, _ in CLI_FLAGS])
def test_cli_flags_exit_2_before_any_process(
    flags: list[str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_processes: list[str],
) -> None:
    monkeypatch.chdir(ROOT)
    assert cli.main(["validate", PAIR, "--device", "cpu", *flags]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err, err
    if "invalid" not in expected:  # argparse's own messages come with the usage line instead
        assert err.startswith("distcheck: error:") and "what to do:" in err, err
    assert no_processes == []


@pytest.mark.procs
def test_cli_allow_oversubscribe_flag(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, no_processes: list[str]
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(rank_limits, "usable_cores", lambda: 1)
    assert cli.main(["validate", PAIR, "--device", "cpu", "--world-size", "6"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "world_size 6 would start 6 rank processes on the CPU" in err and "--allow-oversubscribe" in err
    assert no_processes == []
    cli.main(["validate", PAIR, "--device", "cpu", "--world-size", "6", "--allow-oversubscribe"])
    assert no_processes == ["run_reference"]  # past every check: the reference run was next


@pytest.mark.procs
def test_cli_subprocess_refuses_1000_ranks_fast(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(distcheck.__file__).parents[1]), str(ROOT)]))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "distcheck", "validate", PAIR, "--device", "cpu", "--world-size", "1000"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    seconds = time.perf_counter() - t0
    assert proc.returncode == cli.EXIT_ERROR, proc.stderr
    assert "world_size 1000 is more than the 320 atoms of the sample" in proc.stderr
    assert "what to do: use a world_size of at most 320" in proc.stderr and "Traceback" not in proc.stderr
    assert "rank 0 started" not in proc.stderr and "reference run" not in proc.stderr
    assert seconds < 60  # importing torch and the example, no rank


# --------------------------------------------------------------------------------------------------
# pyproject table


TABLE_VALUES: list[tuple[str, str, str]] = [
    ("atol", "nan", "atol must be a finite number >= 0, got nan"),
    ("atol", "inf", "atol must be a finite number >= 0, got inf"),
    ("atol", "-1.0", "atol must be a finite number >= 0, got -1.0"),
    ("rtol", "-inf", "rtol must be a finite number >= 0, got -inf"),
    ("timeout", "0", "timeout_sec must be a finite number of seconds > 0, got 0.0"),
    ("timeout_sec", "nan", "timeout_sec must be a finite number of seconds > 0, got nan"),
    ("timeout_sec", "-1", "timeout_sec must be a finite number of seconds > 0, got -1.0"),
    ("deadline", "inf", "deadline_sec must be a finite number of seconds > 0, got inf"),
    ("deadline_sec", "0", "deadline_sec must be a finite number of seconds > 0, got 0.0"),
    ("world_size", '"abc"', "'world_size' must be an integer, got 'abc'"),
    ("world_size", "true", "'world_size' must be an integer, got True"),
    ("world_size", "0", "world_size must be at least 1, got 0"),
    ("max_fix_attempts", "-1", "max_fix_attempts must be >= 0, got -1"),
    ("helper_sample_every", "0", "helper_sample_every must be at least 1, got 0"),
    ("allow_oversubscribe", '"yes"', "'allow_oversubscribe' must be true or false, got 'yes'"),
]


def _pyproject(tmp_path: Path, key: str, value: str, *, in_target: bool) -> tuple[Path, int]:
    """A config with `key = value` in the table or in the second target; the 1-based line of that key."""
    if in_target:
        text = (
            '[tool.distcheck]\nworld_size = 2\n\n[[tool.distcheck.targets]]\nname = "a"\nfactory = "m.py:f"\n\n'
            f'[[tool.distcheck.targets]]\nname = "b"\nfactory = "m.py:f"\n{key} = {value}\n'
        )
    else:
        text = f'[tool.distcheck]\nfactory = "m.py:f"\n{key} = {value}\nspec = "m.json"\n'
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    line = [i for i, ln in enumerate(text.splitlines(), start=1) if ln.startswith(f"{key} =")][-1]
    return path, line


@pytest.mark.parametrize("in_target", [False, True], ids=["table", "target"])
@pytest.mark.parametrize(("key", "value", "expected"), TABLE_VALUES, ids=[f"{k}={v}" for k, v, _ in TABLE_VALUES])
def test_pyproject_values_are_refused_on_their_line(
    key: str, value: str, expected: str, in_target: bool, tmp_path: Path
) -> None:
    path, line = _pyproject(tmp_path, key, value, in_target=in_target)
    with pytest.raises(OptionError) as refused:
        load_targets(str(path))
    err = refused.value
    assert expected in err.message and err.config == str(path) and err.line == line, (err.message, err.line)
    assert err.option == OPTION_ALIASES.get(key, key) and err.hint
    # the daemon shows the same problem on the same line
    problem = load_workspace_targets(str(tmp_path), read_disk).problem
    assert problem is not None and problem.line == line and expected in problem.message


@pytest.mark.parametrize(("key", "value", "expected"), TABLE_VALUES[:6], ids=[k for k, _, _ in TABLE_VALUES[:6]])
def test_cli_with_a_bad_pyproject_exits_2(
    key: str,
    value: str,
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_processes: list[str],
) -> None:
    path, _ = _pyproject(tmp_path, key, value, in_target=False)
    assert cli.main(["validate", "--config", str(path)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("distcheck: error:") and expected in err and str(path) in err and "Traceback" not in err
    assert no_processes == []


@pytest.mark.procs
def test_pyproject_world_size_above_the_atoms_is_refused_at_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_processes: list[str]
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        f'[tool.distcheck]\nfactory = "{ROOT / "examples" / "pair_potential.py"}:model_factory"\n'
        f'world_size = {10**6}\ndevice = "cpu"\nallow_oversubscribe = true\n'
    )
    (target,) = load_targets(str(path))
    assert target.options["allow_oversubscribe"] is True and target.options["world_size"] == 10**6
    assert cli.main(["validate", "--config", str(path)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"world_size {10**6} is more than the 320 atoms of the sample" in err and no_processes == []


# --------------------------------------------------------------------------------------------------
# editor settings


SETTINGS: list[tuple[str, Any, str]] = [
    ("atol", NAN, "atol must be a finite number >= 0, got nan"),
    ("atol", INF, "atol must be a finite number >= 0, got inf"),
    ("rtol", -1, "rtol must be a finite number >= 0, got -1.0"),
    ("timeoutSec", 0, "timeout_sec must be a finite number of seconds > 0, got 0.0"),
    ("timeoutSec", NAN, "timeout_sec must be a finite number of seconds > 0, got nan"),
    ("timeoutSec", -1, "timeout_sec must be a finite number of seconds > 0, got -1.0"),
    ("deadlineSec", INF, "deadline_sec must be a finite number of seconds > 0, got inf"),
    ("deadlineSec", 0, "deadline_sec must be a finite number of seconds > 0, got 0.0"),
    ("worldSize", 0, "world_size must be at least 1, got 0"),
    ("worldSize", "abc", "must be an integer, got 'abc'"),
    ("worldSize", True, "must be an integer, got True"),
    ("worldSize", 2.5, "must be an integer, got 2.5"),
    ("maxFixAttempts", -1, "max_fix_attempts must be >= 0, got -1"),
    ("helperSampleEvery", 0, "helper_sample_every must be at least 1, got 0"),
    ("allowOversubscribe", "yes", "must be true or false, got 'yes'"),
]


@pytest.mark.parametrize(("key", "value", "expected"), SETTINGS, ids=[f"{k}={v!r}" for k, v, _ in SETTINGS])
def test_bad_settings_are_left_out_with_a_message(key: str, value: Any, expected: str) -> None:
    settings = read_settings({key: value, "atol": 1e-6} if key != "atol" else {key: value})
    assert SETTING_KEYS[key] not in settings.options
    (problem,) = settings.problems
    assert problem.startswith(f"setting distcheck.{key}") and expected in problem, problem


def test_new_settings_reach_the_options() -> None:
    settings = read_settings({"deadlineSec": 30, "allowOversubscribe": True, "timeoutSec": 0.5, "deadline": 9})
    assert settings.problems == []
    assert settings.options == {"deadline_sec": 9.0, "allow_oversubscribe": True, "timeout_sec": 0.5}


def test_package_json_declares_exactly_the_options_with_bounds() -> None:
    props: Mapping[str, Any] = json.loads((ROOT / "package.json").read_text())["contributes"]["configuration"][
        "properties"
    ]
    declared = {
        k.removeprefix("distcheck.") for k in props if k.removeprefix("distcheck.").split(".")[0] not in EDITOR_SETTINGS
    }
    assert declared == set(SETTING_KEYS)
    world = props["distcheck.worldSize"]
    assert world["minimum"] == 1 and "maximum" not in world  # the bound is the sample's atoms, not a constant
    assert "one run" in props["distcheck.timeoutSec"]["markdownDescription"]
    assert "whole validation" in props["distcheck.deadlineSec"]["markdownDescription"]
    for key in ("timeoutSec", "deadlineSec"):
        assert props[f"distcheck.{key}"]["exclusiveMinimum"] == 0
    for key in ("atol", "rtol", "maxFixAttempts"):
        assert props[f"distcheck.{key}"]["minimum"] == 0


# --------------------------------------------------------------------------------------------------
# the whole-validation deadline


def test_budget_clips_each_run_to_what_is_left() -> None:
    assert Budget(120.0, None).run_timeout() == 120.0
    budget = Budget(120.0, 10.0, start=time.perf_counter() - 4.0)
    assert 5.5 < budget.run_timeout() <= 6.0 and budget.clipped and not budget.expired()
    assert Budget(3.0, 10.0).run_timeout() == 3.0
    late = Budget(120.0, 10.0, start=time.perf_counter() - 11.0)
    assert late.expired() and 0 < late.run_timeout() <= 0.01
    assert late.run_timeout(clip=False) == 120.0 and not late.clipped


def test_deadline_round_trips_and_is_typed() -> None:
    report = TraceReport(ok=False, spec=distcheck.MLIPSpec(), attempts=[], next_action="", meta=ReportMeta())
    assert "deadline" not in report.to_dict() and TraceReport.from_json(report.to_json()).deadline is None
    report.deadline = DeadlineReached(deadline_sec=30.0, elapsed_sec=31.5, attempts=2, stage="between_attempts")
    again = TraceReport.from_json(report.to_json())
    assert again == report and isinstance(again.deadline, DeadlineReached) and again.deadline.attempts == 2
    bad = report.to_dict()
    bad["deadline"]["stage"] = "later"
    with pytest.raises(ValueError, match=r"deadline\.stage"):
        TraceReport.from_dict(bad)


@pytest.mark.procs
def test_deadline_between_attempts_keeps_the_best_attempt() -> None:
    deadline = 20.0
    t_call = time.perf_counter()
    events: list[str] = []

    def progress(event: str, info: Mapping[str, Any]) -> None:
        events.append(event)
        if event == "attempt_finished":  # the evaluation outlasts the deadline: no second attempt may start
            time.sleep(max(0.0, t_call + deadline + 0.2 - time.perf_counter()))

    report = validate_on_cpu(
        unaware_model.model_factory,
        unaware_model.sample_batch(),
        spec=unaware_model.WRONG_SPEC,  # without a deadline, attempt 2 (halo_correction_to_local) passes
        deadline_sec=deadline,
        progress=progress,
    )
    assert events.count("attempt_started") == 1 and len(report.attempts) == 1
    assert report.deadline is not None and report.deadline.stage == "between_attempts"
    assert report.deadline.attempts == 1 and report.deadline.elapsed_sec >= deadline
    assert report.verdict == "failed" and not report.ok
    first, second, *_ = report.next_action.split("\n")
    assert first.startswith("FAIL — the deadline of 20 s was reached after 1 attempt") and "raise deadline_sec" in first
    assert second.startswith("best attempt so far: ")
    assert report.meta.deadline_sec == deadline
    _assert_no_ranks_left()


@pytest.mark.procs
def test_deadline_cuts_a_hanging_attempt() -> None:
    t0 = time.perf_counter()
    report = validate_on_cpu(
        f"{FAULTS}:factory_sleep", pair_potential.sample_batch(), timeout_sec=120, deadline_sec=12, auto_fix=False
    )
    seconds = time.perf_counter() - t0
    assert seconds < 40, seconds  # the deadline, not timeout_sec, stopped it
    assert report.deadline is not None and report.deadline.stage in ("attempt", "reference")
    if report.deadline.stage == "attempt":  # the usual case: the reference takes well under 12 s
        assert report.deadline.attempts == 1 and "during attempt 1" in report.next_action.split("\n")[0]
    assert report.verdict == "error" and report.next_action.startswith("FAIL — the deadline of 12 s was reached")
    _assert_no_ranks_left()


@pytest.mark.procs
def test_cli_deadline_cuts_the_reference_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "report.json"
    t0 = time.perf_counter()
    code = cli.main(
        [
            "validate",
            f"{MODELS}:factory_slow_reference",
            "--sample",
            f"{MODELS}:two_systems",
            "--device",
            "cpu",
            "--deadline",
            "4",
            "--json",
            str(out),
        ]
    )
    assert time.perf_counter() - t0 < 30
    assert code == cli.EXIT_ERROR
    report = TraceReport.from_json(out.read_text())
    assert report.deadline is not None and report.deadline.stage == "reference" and report.deadline.attempts == 0
    head = report.next_action.split("\n")[0]
    assert head.startswith("FAIL — the deadline of 4 s was reached during the single-process reference run"), head
    assert "raise deadline_sec (--deadline" in head
    assert head in capsys.readouterr().out
    _assert_no_ranks_left()


def test_next_action_names_the_stage() -> None:
    report = TraceReport(ok=False, spec=distcheck.MLIPSpec(), attempts=[], next_action="", meta=ReportMeta())
    report.deadline = DeadlineReached(deadline_sec=5.0, elapsed_sec=5.2, attempts=0, stage="between_attempts")
    assert next_action(report).startswith(
        "FAIL — the deadline of 5 s was reached after the reference run, before the first distributed attempt"
    )
    assert TraceReport.from_json(report.to_json()).verdict == "error"
