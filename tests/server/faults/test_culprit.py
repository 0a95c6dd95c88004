"""The rank that caused a failure is the one named: a rank that ends its own process (os._exit) before
or after its collectives, with code 0 or not, and a rank stuck outside any collective at a timeout
(named with its Python stack, the ranks waiting for it in a collective after it) — in a run of the
library, and in the CLI's report (a report is always written, the message says 'timed out after N s')."""

from __future__ import annotations

import json
import time

import pytest

from conftest import Faults, model
from distcheck import DistributedError, RankTimeout, run_distributed
from distcheck.runtime import load_object
from distcheck.validate.errors import translate

pytestmark = pytest.mark.procs

SPEC = {"format": "distcheck-spec", "version": 1}


def _run(faults: Faults, name: str, env: dict[str, str], timeout: float = 60.0) -> DistributedError:
    """`run_distributed` in this process; the ranks carry the test's marker (and `env`)."""
    batch = load_object(model(name).replace("model_factory", "sample_batch"))()
    env = {"DISTCHECK_TEST_MARKER": faults.marker, "FAULT_MARKER_DIR": str(faults.markers), **env}
    with pytest.raises(DistributedError) as info:
        run_distributed(model(name), batch, SPEC, world_size=2, timeout_sec=timeout, env=env)
    return info.value


@pytest.mark.parametrize(
    ("env", "code"),
    [
        ({}, 0),  # before the per-system all-reduce: rank 0 sees it vanish from inside the collective
        ({"VANISH_AFTER": "1"}, 0),  # after it: rank 0 finishes normally, rank 1 has no result
        ({"VANISH_CODE": "3"}, 3),
        ({"VANISH_IN": "0"}, 0),  # the other rank: not "rank 1 by default", nor "rank 0 by default"
    ],
    ids=["exit0-before-collective", "exit0-after-collective", "exit3", "rank0-exits"],
)
def test_a_rank_that_ends_its_own_process_is_named(faults: Faults, env: dict[str, str], code: int) -> None:
    t0 = time.perf_counter()
    err = _run(faults, "vanish", env)
    culprit = int(env.get("VANISH_IN", "1"))
    first = err.failures[0]
    assert (first.rank, first.type, first.phase, first.exitcode) == (culprit, "RankExited", "forward", code), first
    assert f"rank {culprit} failed during 'forward'" in str(err)
    assert f"exited with code {code}" in first.message and "without a result" in first.message
    assert "os._exit" in first.message
    assert all(f.rank != culprit for f in err.failures[1:])
    hint = translate(err)
    assert hint.startswith(f"Rank {culprit} ended its own process (exit code {code}) during the forward"), hint
    assert time.perf_counter() - t0 < 30


@pytest.mark.parametrize("how", ["spin", "sleep"])
def test_a_timeout_names_the_stuck_rank_with_its_stack(faults: Faults, how: str) -> None:
    t0 = time.perf_counter()
    err = _run(faults, "stuck", {"STUCK_HOW": how}, timeout=6.0)
    elapsed = time.perf_counter() - t0
    assert isinstance(err, RankTimeout)
    assert 6.0 <= elapsed < 6.0 + 10, elapsed
    text = str(err)
    assert "timed out after 6 s" in text and "timeout_sec bounds each run" in text
    assert "rank 1 in 'forward', busy outside any collective at" in text, text
    assert "rank 0 in 'forward', waiting for its peers in the collective all_reduce" in text, text
    assert "exited with code None" not in text
    stuck, waiting = err.failures
    function = "spin_forever" if how == "spin" else "sleep_forever"
    assert (stuck.rank, stuck.type, stuck.phase, stuck.collective) == (1, "RankStuck", "forward", None)
    assert stuck.frames[-1].function == function and stuck.frames[-1].file.endswith("stuck.py"), stuck.frames
    assert f"in {function}" in stuck.traceback and "Python stack of rank 1" in stuck.traceback
    assert (waiting.rank, waiting.type, waiting.collective) == (0, "RankWaiting", "all_reduce")
    hint = translate(err)
    assert hint.startswith("Rank 1 was still busy during the forward, outside any collective"), hint
    assert function in hint and "timeout_sec" in hint


def test_the_rank_that_waits_is_not_blamed_when_rank_0_is_stuck(faults: Faults) -> None:
    err = _run(faults, "stuck", {"STUCK_IN": "0"}, timeout=6.0)
    assert isinstance(err, RankTimeout)
    assert [(f.rank, f.type) for f in err.failures] == [(0, "RankStuck"), (1, "RankWaiting")]


def _report(faults: Faults, name: str, *args: str, **env: str) -> tuple[int, str, dict[str, object]]:
    path = faults.work / "report.json"
    proc = faults.cli(model(name), "--json", str(path), *args, **env)
    code = faults.finish(proc, timeout=55)
    err = faults.stderr(proc)
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err, json.loads(path.read_text())


def test_cli_reports_a_rank_that_vanished_after_its_collectives(faults: Faults) -> None:
    """Used to die with `FileNotFoundError: rank1.pt` and write no report."""
    code, _, report = _report(faults, "vanish", "--timeout", "60", VANISH_AFTER="1")
    assert code == 2
    error = report["attempts"][-1]["error"]  # type: ignore[index]
    assert (error["rank"], error["type"], error["phase"]) == (1, "RankExited", "forward"), error
    assert "Rank 1 ended its own process (exit code 0)" in error["hint"]


def test_cli_reports_a_reference_run_stuck_with_its_stack(faults: Faults) -> None:
    code, _, report = _report(faults, "stuck", "--timeout", "12", STUCK_IN="reference")
    assert code == 2
    error = report["attempts"][-1]["error"]  # type: ignore[index]
    assert (error["rank"], error["type"], error["phase"]) == (-1, "RankStuck", "reference"), error
    assert "timed out after 12 s" in error["message"] and "spin_forever" in error["message"]
    assert "in spin_forever" in error["traceback"]
    assert error["hint"].startswith("The single-process reference run timed out"), error["hint"]
