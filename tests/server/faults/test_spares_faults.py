"""The fault rules hold for spares: whatever the owner is doing when it dies (SIGKILL included), its
idle spares, the spares building a validation's ranks ahead, the spares running ranks and the ranks
kept resident for a validation's later runs (and those running its first attempt ahead, while its
reference runs) are gone afterwards, with what they started, and no run directory is left. The
fixture checks the whole tree by marker; each test also checks the processes it saw by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from test_no_survivors import _gone

from conftest import MODELS, Faults, model

pytestmark = pytest.mark.procs

KEEP_WARM = """
import os, sys, time
from distcheck.processes import lifeline, spares
pool = spares.keep_warm("cpu", 2, idle_timeout_s=300)
deadline = time.monotonic() + 60
while pool.report()["devices"].get("cpu", {}).get("warm", 0) < 3 and time.monotonic() < deadline:
    time.sleep(0.05)
held = pool.report()["devices"]["cpu"]
pids = lifeline.descendants(os.getpid())
path = os.path.join(os.environ["FAULT_MARKER_DIR"], "spares")
open(path + ".tmp", "w").write(" ".join(map(str, pids)) + "\\n" + str(held["warm"]))
os.replace(path + ".tmp", path)
{then}
"""

VALIDATE = """
sys.path.insert(0, {models!r})
import faultkit
from distcheck import validate_on_cpu
from distcheck.processes.spares import learned
validate_on_cpu({factory!r}, faultkit.sample_batch(), world_size=2, auto_fix=False, layer_diagnostic=False,
                timeout_sec=120)
"""


def _driver(faults: Faults, then: str) -> str:
    script = faults.work / "driver.py"
    script.write_text(KEEP_WARM.replace("{then}", textwrap.dedent(then)))
    return str(script)


def _spare_pids(faults: Faults, proc: object) -> list[int]:
    text = faults.wait_marker("spares", proc, timeout=90)  # type: ignore[arg-type]
    pids, warm = text.split("\n")
    assert int(warm) >= 3, text
    return [int(p) for p in pids.split()]


def test_owner_killed_while_spares_idle_leaves_nothing(faults: Faults) -> None:
    proc = faults.start([sys.executable, _driver(faults, "time.sleep(600)")])
    pids = _spare_pids(faults, proc)
    assert len(pids) >= 4, pids  # the forkserver, its three spares (and the resource tracker)
    os.kill(proc.pid, signal.SIGKILL)
    assert faults.finish(proc, timeout=10) == -9
    assert all(_gone(p, wait=15) for p in pids), [p for p in pids if not _gone(p)]


@pytest.mark.parametrize(
    ("factory", "wait_for"),
    [("grandchild", "grandchild"), ("slow_factory", "factory-0")],
    ids=["spare-running-a-rank", "spares-building-ranks-ahead"],
)
def test_owner_killed_while_spares_work_leaves_nothing(faults: Faults, factory: str, wait_for: str) -> None:
    """Warm spares run the reference and the ranks: SIGKILL of the owner while rank 1 blocks in its
    forward with a grandchild in a new session, or while the ranks' spares build the model ahead
    (the reference run still building it too)."""
    then = VALIDATE.format(models=str(MODELS), factory=model(factory))
    proc = faults.start([sys.executable, _driver(faults, then)])
    pids = _spare_pids(faults, proc)
    seen = faults.wait_marker(wait_for, proc, timeout=90)
    os.kill(proc.pid, signal.SIGKILL)
    assert faults.finish(proc, timeout=10) == -9
    assert all(_gone(p, wait=15) for p in pids), [p for p in pids if not _gone(p)]
    assert _gone(int(seen), wait=10), f"{wait_for} (pid {seen}) outlived the owner"


def test_ctrl_c_while_ranks_build_ahead(faults: Faults) -> None:
    """The CLI interrupted while its reference run and the spares of both ranks build the model: exit
    130 with one line, no traceback, nothing left."""
    proc = faults.cli(model("slow_factory"), "--timeout", "120")
    built = [int(faults.wait_marker(f"factory-{r}", proc, timeout=90)) for r in ("reference", "0", "1")]
    os.killpg(proc.pid, signal.SIGINT)
    assert faults.finish(proc, timeout=20) == 130
    err = faults.stderr(proc)
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("distcheck: "), err
    assert all(_gone(p, wait=15) for p in built), built


def _resident_cli(faults: Faults) -> subprocess.Popen[str]:
    """The CLI with auto-fix on: its later runs are served by the first attempt's resident ranks."""
    argv = [sys.executable, "-m", "distcheck", "validate", model("resident_block"), "--world-size", "2"]
    return faults.start([*argv, "--device", "cpu", "--no-layer-diagnostic", "--timeout", "120"])


def test_ctrl_c_while_resident_ranks_serve_a_later_run(faults: Faults) -> None:
    """The CLI interrupted while the first attempt's ranks, kept resident, block in a later run: exit
    130 with one line, no traceback, and the resident ranks are gone with what they started."""
    proc = _resident_cli(faults)
    ranks = [int(faults.wait_marker(f"resident-{r}", proc, timeout=120)) for r in ("0", "1")]
    os.killpg(proc.pid, signal.SIGINT)
    assert faults.finish(proc, timeout=20) == 130
    err = faults.stderr(proc)
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("distcheck: "), err
    assert all(_gone(p, wait=15) for p in ranks), ranks


def test_owner_killed_while_resident_ranks_serve_a_later_run(faults: Faults) -> None:
    proc = _resident_cli(faults)
    ranks = [int(faults.wait_marker(f"resident-{r}", proc, timeout=120)) for r in ("0", "1")]
    os.kill(proc.pid, signal.SIGKILL)
    assert faults.finish(proc, timeout=10) == -9
    assert all(_gone(p, wait=15) for p in ranks), ranks


def test_ctrl_c_while_the_first_attempt_runs_ahead(faults: Faults) -> None:
    """The CLI interrupted while the ranks run the first attempt ahead (a first spec remembered for the
    target, the reference not yet reported): exit 130 with one line, no traceback, nothing left."""
    from distcheck.processes.spares import learned
    from distcheck.spec import MLIPSpec

    cache = faults.work / "cache"
    target = model("ahead_block")
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        learned.record_first_spec(target, "", MLIPSpec().to_dict())
    finally:
        if previous is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = previous
    proc = faults.cli(target, "--timeout", "120", XDG_CACHE_HOME=str(cache), DISTCHECK_ATTEMPT_AHEAD="1")
    ranks = [int(faults.wait_marker(f"ahead-{r}", proc, timeout=120)) for r in ("0", "1")]
    os.killpg(proc.pid, signal.SIGINT)
    assert faults.finish(proc, timeout=20) == 130
    err = faults.stderr(proc)
    assert "reference run finished" not in err, "the ranks did not run ahead of the reference"
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("distcheck: "), err
    assert all(_gone(p, wait=15) for p in ranks), ranks
