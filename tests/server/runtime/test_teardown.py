"""When the `distcheck` command exits, nothing it started is left holding its output (`processes.teardown`).

The forkserver and multiprocessing's resource tracker inherit the command's stdout and stderr; left
to notice the owner's exit on their own, they hold a capturing pipe open after the command returned
(a CI run saw a `subprocess.run(capture_output=True)` of the CLI wait out its timeout with the CLI
long gone). These tests read, at the moment the command's process has exited, which processes still
hold its pipes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import distcheck

pytestmark = pytest.mark.procs

ROOT = Path(__file__).resolve().parents[3]
ENV = dict(os.environ, NO_COLOR="1", PYTHONPATH=os.pathsep.join([str(Path(distcheck.__file__).parents[1]), str(ROOT)]))


def pipe_holders(fd: int) -> list[str]:
    """The processes other than this one holding the pipe `fd` is an end of: 'pid ppid state cmdline'."""
    target = f"pipe:[{os.fstat(fd).st_ino}]"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if any(os.readlink(f"/proc/{name}/fd/{f}") == target for f in os.listdir(f"/proc/{name}/fd")):
                stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
                cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{name} ppid {stat[1]} {stat[0]} {cmd[:160]}")
        except OSError:
            continue
    return found


def _run_holding_pipes(args: list[str], timeout: float = 240) -> tuple[int, str, str, list[str]]:
    """Run `args` with its stdout and stderr on pipes (drained meanwhile); return its exit code, both
    outputs, and the processes that held either pipe at the moment it exited."""
    proc = subprocess.Popen(args, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())  # the inode outlives EOF
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    def drain(stream: object, key: str) -> None:
        for line in stream:  # type: ignore[attr-defined]
            chunks[key].append(line)

    readers = [
        threading.Thread(target=drain, args=(proc.stdout, "out"), daemon=True),
        threading.Thread(target=drain, args=(proc.stderr, "err"), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        code = proc.wait(timeout=timeout)
        holders = pipe_holders(out_fd) + pipe_holders(err_fd)
        for reader in readers:
            reader.join(timeout=30)
    finally:
        os.close(out_fd)
        os.close(err_fd)
        proc.kill()
    return code, b"".join(chunks["out"]).decode(), b"".join(chunks["err"]).decode(), holders


def test_the_validate_command_leaves_no_process_holding_its_output() -> None:
    code, out, err, holders = _run_holding_pipes(
        [
            sys.executable,
            "-m",
            "distcheck",
            "validate",
            "examples.pair_potential:model_factory",
            "--world-size",
            "2",
            "--no-auto-fix",
            "--no-layer-diagnostic",
        ]
    )
    assert code == 0, out + err
    assert "PASSED" in out
    assert holders == [], f"still holding the command's output after it exited: {holders}"


# A command that starts the pool (spares kept warm), then a process that leaves an orphan behind:
# the orphan's parent exits at once, so without a subreaper the orphan would belong to init.
ORPHAN_SCRIPT = textwrap.dedent(
    """
    import subprocess, sys, time
    from distcheck.processes import spares, teardown
    from distcheck.processes.forkserver import forkserver_ready, process_context

    assert teardown.adopt_orphans()
    process_context()  # the forkserver and the resource tracker
    spares.prestart("cpu", 2)
    deadline = time.monotonic() + 240
    while not forkserver_ready() and time.monotonic() < deadline:  # stopped when asked, not killed mid-import
        time.sleep(0.05)
    time.sleep(1)  # the keeper forking spares meanwhile
    subprocess.run([sys.executable, "-c",
        "import subprocess, sys; subprocess.Popen(['sleep', '600']); sys.exit(0)"], check=True)
    ended = teardown.end_helpers()
    print("stopped", sorted(ended.stopped), "killed", len(ended.killed), flush=True)
    """
)


def test_end_helpers_stops_the_pool_and_the_orphans_it_adopted() -> None:
    code, out, err, holders = _run_holding_pipes([sys.executable, "-c", ORPHAN_SCRIPT])
    assert code == 0, out + err
    assert "stopped ['forkserver', 'resource tracker']" in out, out + err
    assert holders == [], f"still holding the script's output after it exited: {holders}"


# The forkserver still importing torch when the command ends: not waited for past the bound, killed.
IMPORTING_SCRIPT = textwrap.dedent(
    """
    from distcheck.processes import teardown
    from distcheck.processes.forkserver import process_context

    process_context()  # returns while the forkserver imports its preload modules
    ended = teardown.end_helpers(timeout_s=0.0)
    print("stopped", sorted(ended.stopped), "killed", len(ended.killed), flush=True)
    """
)


def test_end_helpers_kills_a_forkserver_past_its_bound() -> None:
    code, out, err, holders = _run_holding_pipes([sys.executable, "-c", IMPORTING_SCRIPT])
    assert code == 0, out + err
    assert "'forkserver'" not in out.split("killed")[0] and "killed 0" not in out, out + err
    assert holders == [], f"still holding the script's output after it exited: {holders}"
