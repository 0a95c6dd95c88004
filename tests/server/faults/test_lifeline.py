"""The pieces the fault suite relies on, one by one: tree kills that reach processes in other process
groups and sessions, run directories swept only once their owner is gone, the forkserver arming that
does nothing elsewhere, and stack dumps read back as frames."""

from __future__ import annotations

import faulthandler
import fcntl
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import Faults
from distcheck.processes import lifeline, run_dirs
from distcheck.runtime import beacon

SPAWNER = """
import subprocess, sys, time
pids = [
    subprocess.Popen(["sleep", "300"], start_new_session=True).pid,  # a new session
    subprocess.Popen(["sleep", "300"], process_group=0).pid,  # a new process group, same session
    subprocess.Popen(["sleep", "300"]).pid,  # plain
]
inner = subprocess.Popen([sys.executable, "-c", "import subprocess, time; "
    "subprocess.Popen(['sleep', '300'], start_new_session=True); time.sleep(300)"])  # two levels down
pids.append(inner.pid)
open(sys.argv[1] + ".tmp", "w").write(" ".join(map(str, pids)))
__import__("os").replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.procs
def test_kill_tree_reaches_other_groups_and_sessions(faults: Faults, tmp_path: Path) -> None:
    out = tmp_path / "pids"
    proc = faults.start([sys.executable, "-c", SPAWNER, str(out)])
    deadline = time.monotonic() + 30
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(p) for p in out.read_text().split()]
    time.sleep(0.3)  # the innermost sleep is started by the last child
    tree = lifeline.descendants(proc.pid)
    assert set(pids) <= set(tree) and len(tree) == len(pids) + 1, (pids, tree)
    killed = lifeline.kill_tree([proc.pid])
    assert set(tree) | {proc.pid} <= set(killed)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in tree if _alive(p)]


def test_kill_tree_never_signals_this_process() -> None:
    assert lifeline.kill_tree([os.getpid()]) == []


def _run_dir(base: Path, owner: int, *, lock: bool, age: float = 0.0) -> Path:
    path = base / f"distcheck-run-{owner}-x{len(os.listdir(base))}"
    path.mkdir()
    (path / "rank0.log").write_text("log")
    if lock:
        (path / "owner.lock").write_text("")
    if age:
        os.utime(path, (time.time() - age, time.time() - age))
    return path


def test_sweep_removes_only_run_dirs_whose_owner_is_gone(tmp_path: Path) -> None:
    stale = _run_dir(tmp_path, 999_999, lock=True)  # lock file nobody holds: its owner died
    old_unlocked = _run_dir(tmp_path, 999_998, lock=False, age=3600)
    young_unlocked = _run_dir(tmp_path, 999_997, lock=False)  # may be one being created right now
    other = tmp_path / "distcheck-other-1-x"
    other.mkdir()
    held = _run_dir(tmp_path, os.getpid(), lock=True)  # its owner (this process) holds the lock
    fd = os.open(held / "owner.lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        removed = run_dirs.sweep_run_dirs(tmpdir=str(tmp_path))
    finally:
        os.close(fd)
    assert sorted(removed) == sorted([str(stale), str(old_unlocked)])
    assert young_unlocked.exists() and other.exists() and held.exists()
    assert run_dirs.sweep_run_dirs(owner=12345, tmpdir=str(tmp_path)) == []
    assert run_dirs.sweep_run_dirs(owner=os.getpid(), tmpdir=str(tmp_path)) == [str(held)]  # lock released


def test_run_dir_is_named_after_its_owner_and_kept_while_it_lives() -> None:
    run = run_dirs.make_run_dir("run")
    try:
        name = os.path.basename(run.path)
        assert name.startswith(f"distcheck-run-{os.getpid()}-")
        assert str(run.path) not in run_dirs.sweep_run_dirs(owner=os.getpid())
        assert os.path.isdir(run.path)
    finally:
        run.remove()
    assert not os.path.exists(run.path)
    run.remove()  # idempotent
    assert os.path.dirname(run.path) == tempfile.gettempdir()


def test_arming_the_forkserver_does_nothing_outside_it() -> None:
    group = os.getpgrp()
    assert lifeline.arm_forkserver() is False
    assert os.getpgrp() == group and lifeline.forkserver_pid() is None


def _waits_here(ready: threading.Event, done: threading.Event) -> None:
    ready.set()
    done.wait(30)


def test_a_stack_dump_reads_back_as_frames(tmp_path: Path) -> None:
    ready, done = threading.Event(), threading.Event()
    worker = threading.Thread(target=_waits_here, args=(ready, done))
    worker.start()
    ready.wait(10)
    path = tmp_path / "dump"
    try:
        with open(path, "w") as fh:
            faulthandler.dump_traceback(fh, all_threads=True)
    finally:
        done.set()
        worker.join()
    dump = path.read_text()
    frames = beacon.parse_stack(dump)
    # No rank entry function in this process: the thread that dumped is taken, outermost first.
    assert frames[-1].function == "test_a_stack_dump_reads_back_as_frames", frames
    assert beacon.parse_stack("") == [] and beacon.parse_stack("garbage\n") == []
    text = beacon.format_stack(frames, "Python stack of rank 1")
    assert text.startswith("Python stack of rank 1 (most recent call last):\n")
    assert f'File "{__file__}"' in text


NESTED_SIGNALS = """
import os, signal, sys
from distcheck.processes import lifeline
lifeline._forkserver_pid = os.getpid()  # as if this process were the armed forkserver
lifeline._owner_alive = lambda: False
calls = []

def kill_tree(*args, **kwargs):
    calls.append(1)
    if len(calls) == 1:  # signals delivered while the first cleanup runs
        lifeline._forkserver_owner_gone(signal.SIGUSR1, None)
        lifeline._forkserver_stopped(signal.SIGTERM, None)

lifeline.kill_tree = kill_tree
os._exit = lambda code: (print(len(calls), code, flush=True), sys.exit(0))
lifeline._forkserver_owner_gone(signal.SIGUSR1, None)
"""


@pytest.mark.procs
def test_a_stop_signal_during_the_forkserver_cleanup_does_not_run_it_again() -> None:
    """A second owner-gone or stop signal delivered while the forkserver cleans up returns at once (run
    again from inside the first, the cleanup waited forever on tempfile's lock, and the orphaned
    forkserver kept its owner's output pipes open): the cleanup runs once and the process exits."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", NESTED_SIGNALS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0"], done.stdout


SIGNAL_DURING_EXIT_CLEANUP = """
import os, signal, sys
from distcheck.processes import lifeline
lifeline._forkserver_pid, lifeline._forkserver_owner = os.getpid(), os.getppid()  # as if armed
lifeline._owner_alive = lambda: False
lifeline.kill_tree = lambda *args, **kwargs: None
lifeline._remove_owner_socket_dir = lambda: None
sweeps = []

def sweep(owner):
    sweeps.append(owner)
    if len(sweeps) == 1:  # the owner's death signal, and a stop, while the exit handler sweeps
        lifeline._forkserver_owner_gone(signal.SIGUSR1, None)
        lifeline._forkserver_stopped(signal.SIGTERM, None)

lifeline._sweep_dying_owner = sweep
os._exit = lambda code: (print("exit", code, flush=True), sys.exit(3))
lifeline._forkserver_cleanup()  # what the exit handler runs once the owner closed the forkserver's pipe
print(len(sweeps), flush=True)
"""


@pytest.mark.procs
def test_an_owner_gone_signal_during_the_exit_cleanup_does_not_run_it_again() -> None:
    """An owner that closes its forkserver's pipe and then dies: the forkserver's exit handler cleans
    up, and the owner's death signal arrives meanwhile. The handler returns at once (run again from
    inside the first cleanup, the sweep waited forever on tempfile's lock, found orphaned by the
    latency bench after the editor daemon's runner exited)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_DURING_EXIT_CLEANUP], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1"], done.stdout


HELPER_MASKS = """
import json, signal, sys
from multiprocessing import util
from distcheck.processes import forkserver, lifeline

masks = []
spawn = util.spawnv_passfds

def recording(path, args, passfds):
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, ())  # what the exec'd helper starts with
    masks.append([args[-1].split(";")[0].split()[1], sorted(int(s) for s in blocked)])
    return spawn(path, args, passfds)

util.spawnv_passfds = recording
with lifeline.helpers_ignore_sigint():
    forkserver.process_context("forkserver")
print(json.dumps(masks))
"""


@pytest.mark.procs
def test_helpers_start_with_the_stop_signals_blocked() -> None:
    """The resource tracker and the forkserver are both exec'd with SIGINT, SIGTERM and SIGHUP blocked,
    so a Ctrl-C to the terminal's process group while they import cannot kill them with a traceback
    on the user's screen. (The stdlib unblocks SIGINT and SIGTERM after starting the tracker, which
    forkserver.ensure_running does first: a CI run caught the forkserver printing `Fatal Python error:
    init_import_site` after a Ctrl-C.)"""
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-c", HELPER_MASKS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    masks = json.loads(done.stdout.strip().splitlines()[-1])
    assert [name for name, _ in masks] == ["multiprocessing.resource_tracker", "multiprocessing.forkserver"], masks
    stops = {int(signal.SIGINT), int(signal.SIGTERM), int(signal.SIGHUP)}
    for name, blocked in masks:
        assert stops <= set(blocked), (name, blocked)
