"""`reaper.retire`: processes are killed before it returns; on the CPU they are also reaped then, on a
CUDA device the wait for them (and what follows it) happens in the background, and the owner's exit
waits for it."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from distcheck.processes import reaper

pytestmark = pytest.mark.procs

CTX = multiprocessing.get_context("spawn")


def _sleep_forever() -> None:
    time.sleep(600)


def _running(pid: int | None) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _started(n: int) -> list[multiprocessing.process.BaseProcess]:
    procs = [CTX.Process(target=_sleep_forever, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def test_cpu_processes_are_killed_and_reaped_before_retire_returns() -> None:
    procs = _started(2)
    done: list[bool] = []
    reaper.retire(procs, ["cpu", "cpu"], lambda: done.append(True))
    assert [p.exitcode for p in procs] == [-9, -9]
    assert done == [True]
    assert reaper.pending() == 0


def test_gpu_processes_are_killed_at_once_and_reaped_in_the_background() -> None:
    procs = _started(2)
    release = threading.Event()
    done: list[bool] = []

    def then() -> None:  # held back, to see that retire does not wait for it
        release.wait(30)
        done.append(True)

    t0 = time.perf_counter()
    reaper.retire(procs, ["cuda:0", "cuda:0"], then)
    assert time.perf_counter() - t0 < 5
    assert done == [] and reaper.pending() == 1
    deadline = time.monotonic() + 10  # killed already: each ends with nothing more sent to it
    while any(_running(p.pid) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_running(p.pid) for p in procs)
    assert not reaper.settle(0.2), "settle returned though `then` had not run"
    release.set()
    assert reaper.settle(30)
    assert done == [True] and reaper.pending() == 0
    assert [p.exitcode for p in procs] == [-9, -9]


def test_a_failing_cleanup_still_counts_as_reaped() -> None:
    procs = _started(1)

    def then() -> None:
        raise OSError("the run directory is gone")

    reaper.retire(procs, ["cuda:1"], then)
    assert reaper.settle(30)
    assert procs[0].exitcode == -9


def test_slow_to_die_only_on_a_cuda_device() -> None:
    assert reaper.slow_to_die(["cpu", "cuda:1"])
    assert reaper.slow_to_die(["cuda"])
    assert not reaper.slow_to_die(["cpu", "cpu"])
    assert not reaper.slow_to_die([])


def test_the_owner_waits_for_the_background_reaping_when_it_exits(tmp_path: Path) -> None:
    marker = tmp_path / "reaped"
    script = textwrap.dedent(
        f"""
        import multiprocessing, time
        from distcheck.processes import reaper

        def nap():
            time.sleep(600)

        def then():
            time.sleep(0.5)
            open({str(marker)!r}, "w").write("done")

        if __name__ == "__main__":
            p = multiprocessing.get_context("spawn").Process(target=nap, daemon=True)
            p.start()
            reaper.retire([p], ["cuda:0"], then)
            print("returned", flush=True)
        """
    )
    path = tmp_path / "owner.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "returned" in out.stdout
    assert marker.read_text() == "done", "the owner exited before its retired processes were reaped"


def test_kept_ranks_and_the_reference_child_on_a_gpu_end_through_the_reaper() -> None:
    """A validation's ranks (`ResidentRanks.release`) and its reference child (`PendingField.close`)
    ran on a CUDA device: both are killed at once, and their run directories go once they are reaped."""
    from distcheck.processes.caller_context import CallerContext
    from distcheck.processes.rank_source import RankWant
    from distcheck.processes.resident import ResidentRanks
    from distcheck.processes.run_dirs import RunDir
    from distcheck.validate.reference_field import PendingField

    ranks, ranks_dir = _started(2), RunDir("run")
    kept = ResidentRanks()
    kept.keep(ranks, ranks_dir, RankWant("m:f", "off", 2, ("cuda:0", "cuda:0"), "gloo", {}, CallerContext()))
    child, child_dir = _started(1), RunDir("ref")
    field = PendingField(child, child_dir, time.perf_counter() + 60, None, "cuda:0")
    field.abandon()
    kept.release()
    field.close()  # closing again changes nothing
    kept.release()
    assert reaper.settle(30)
    assert [p.exitcode for p in (*ranks, *child)] == [-9, -9, -9]
    assert not os.path.exists(ranks_dir.path) and not os.path.exists(child_dir.path)
    assert field.collect()["status"] == "not_measured"
