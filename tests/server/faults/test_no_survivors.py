"""No process outlives a validation, however the process that runs it dies: the CLI (SIGTERM,
SIGHUP, SIGINT, SIGKILL, to it or to its process group), a script calling `validate_on_cpu`, and
the editor's runner when its daemon dies. Each case waits for a rank to be inside the forward with a
grandchild it started in a new session (out of every process group), then kills; the fixture then
checks that nothing of the tree is left (by marker and process group) and no run directory."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time

import pytest

from conftest import Faults, model
from distcheck import DistributedError, run_distributed
from distcheck.runtime import load_object

pytestmark = pytest.mark.procs


def _gone(pid: int, wait: float = 0.0) -> bool:
    """Whether process `pid` is gone (or a zombie), waiting up to `wait` seconds for it."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    return True
        except OSError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("sig", "to_group", "code", "says"),
    [
        (signal.SIGTERM, False, 143, "stopped by SIGTERM"),
        (signal.SIGHUP, True, 129, "stopped by SIGHUP"),  # a closed terminal signals the foreground group
        (signal.SIGINT, True, 130, "interrupted"),  # Ctrl-C signals the foreground group
        (signal.SIGKILL, False, -9, None),
        (signal.SIGKILL, True, -9, None),  # a CI runner killing the job's process group
    ],
    ids=["SIGTERM", "SIGHUP-group", "SIGINT-group", "SIGKILL", "SIGKILL-group"],
)
def test_cli_killed_during_the_forward_leaves_nothing(
    faults: Faults, sig: signal.Signals, to_group: bool, code: int, says: str | None
) -> None:
    proc = faults.cli(model("grandchild"), "--timeout", "120")
    grandchild = int(faults.wait_marker("grandchild", proc))
    (os.killpg if to_group else os.kill)(proc.pid, sig)
    assert faults.finish(proc, timeout=20) == code
    err = faults.stderr(proc)
    assert "Traceback" not in err and "internal error" not in err, err
    if says is not None:
        last = err.strip().splitlines()[-1]
        assert last.startswith("distcheck: ") and says in last, err
    # The fixture checks the whole tree; the grandchild in a new session explicitly here.
    assert _gone(grandchild, wait=10), "the rank's grandchild in a new session outlived the CLI"


@pytest.mark.parametrize(
    ("sig", "to_group", "code", "wait_for"),
    [
        (signal.SIGINT, True, 130, "pool"),  # while the pool imports torch and the reference process is being made
        (signal.SIGINT, True, 130, "marker"),  # while the reference run builds the model
        (signal.SIGTERM, False, 143, "pool"),
    ],
    ids=["ctrl-c-while-starting", "ctrl-c-in-the-factory", "SIGTERM-while-starting"],
)
def test_stop_while_the_reference_run_starts(
    faults: Faults, sig: signal.Signals, to_group: bool, code: int, wait_for: str
) -> None:
    proc = faults.cli(model("slow_factory"), "--timeout", "120", "--json", str(faults.work / "report.json"))
    if wait_for == "pool":
        faults.wait_stderr("reference run", proc)
        faults.wait_process("multiprocessing.forkserver import main", proc)
    else:
        faults.wait_marker("factory-reference", proc)
    (os.killpg if to_group else os.kill)(proc.pid, sig)
    assert faults.finish(proc, timeout=20) == code
    err = faults.stderr(proc)
    assert "Traceback" not in err and "internal error" not in err and "AssertionError" not in err, err
    assert err.strip().splitlines()[-1].startswith("distcheck: "), err


def test_grandchildren_of_ranks_that_returned_are_killed(faults: Faults) -> None:
    """The validation passes; the `sleep` each rank started in a new session does not outlive it."""
    proc = faults.cli(model("grandchild_returns"), "--timeout", "120")
    assert faults.finish(proc, timeout=50) == 0, faults.stderr(proc)
    pids = [int((faults.markers / f"grandchild-{r}").read_text()) for r in (0, 1)]
    assert all(_gone(p) for p in pids), pids


DRIVER = """
import sys
from distcheck import validate_on_cpu
sys.path.insert(0, {models!r})
import grandchild
report = validate_on_cpu({factory!r}, grandchild.sample_batch(), world_size=2, auto_fix=False,
                         layer_diagnostic=False, timeout_sec=120)
print(report.verdict)
"""


def test_library_caller_killed_leaves_nothing(faults: Faults) -> None:
    """A user's script that calls validate_on_cpu, killed with SIGKILL while a rank runs."""
    script = faults.work / "driver.py"
    models = os.path.dirname(model("grandchild").split(":")[0])
    script.write_text(textwrap.dedent(DRIVER.format(models=models, factory=model("grandchild"))))
    proc = faults.start([sys.executable, str(script)])
    grandchild = int(faults.wait_marker("grandchild", proc))
    os.kill(proc.pid, signal.SIGKILL)
    assert faults.finish(proc, timeout=10) == -9
    assert _gone(grandchild, wait=10), "the rank's grandchild in a new session outlived the script"


DAEMON = """
import json, subprocess, sys, time
runner = subprocess.Popen([sys.executable, "-m", "distcheck.jobs.runner"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, start_new_session=True, text=True)
request = {{"id": 1, "method": "validate", "params": json.loads({params!r})}}
runner.stdin.write(json.dumps(request) + "\\n")
runner.stdin.flush()
time.sleep(600)
"""


@pytest.mark.parametrize("victim", ["daemon", "runner"])
def test_runner_tree_dies_with_the_daemon_or_the_runner(faults: Faults, victim: str) -> None:
    """A stand-in for the LSP daemon starts the runner as the daemon does (its own session) and asks for
    a validation; SIGKILL of the daemon, or of the runner alone, takes the runner's pool, the ranks and
    their grandchild along."""
    target = {
        "name": None,
        "factory": model("grandchild"),
        "options": {"world_size": 2, "device": "cpu", "auto_fix": False, "layer_diagnostic": False},
        "root": str(faults.work),
    }
    params = {"target": target, "spec": None}
    script = faults.work / "daemon.py"
    script.write_text(DAEMON.format(params=json.dumps(params)))
    proc = faults.start([sys.executable, str(script)])
    grandchild = int(faults.wait_marker("grandchild", proc, timeout=50))
    if victim == "daemon":
        os.kill(proc.pid, signal.SIGKILL)
        assert faults.finish(proc, timeout=10) == -9
    else:
        os.kill(faults.wait_process("distcheck.jobs.runner", proc), signal.SIGKILL)
    assert _gone(grandchild, wait=10), f"the rank's grandchild outlived the {victim}"


def test_orphans_of_a_vanished_rank_die_with_the_run_not_with_the_caller(faults: Faults) -> None:
    """In a caller that lives on (the editor's runner, a notebook): the new-session child of a rank that
    ended itself is gone when run_distributed returns, not only when the caller exits."""
    batch = load_object(model("orphan").replace("model_factory", "sample_batch"))()
    env = {"DISTCHECK_TEST_MARKER": faults.marker, "FAULT_MARKER_DIR": str(faults.markers)}
    with pytest.raises(DistributedError) as info:
        run_distributed(model("orphan"), batch, {"format": "distcheck-spec", "version": 1}, env=env)
    assert info.value.failures[0].rank == 1
    assert _gone(int((faults.markers / "orphan").read_text()), wait=2), "the orphan outlived the run"
