"""Fault tests with real processes: the CLI, a library caller or the editor's runner, killed at chosen
moments. Every test gets its own marker (DISTCHECK_TEST_MARKER=<uuid>, inherited by every process of
its tree, found in /proc/*/environ whatever process group or session it moved to), its own TMPDIR and
a directory where the models write marker files the tests wait for. After each test, within a bounded
wait: no process carries the marker, nothing is left in the process groups the test started, no
process started by this pytest process is left (but its warm pool), and no run directory remains."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import psutil
import pytest

import distcheck

ROOT = Path(__file__).resolve().parents[3]
MODELS = Path(__file__).resolve().parent / "models"
SOURCE = Path(distcheck.__file__).resolve().parents[1]
LEAK_WAIT_S = 30.0  # generous: CI runs these on 2 busy cores


def _foreground_signals() -> None:
    """In the child before exec: SIGINT and SIGQUIT handled by default, as in a terminal's foreground job."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def model(name: str) -> str:
    """Factory reference of a fault model."""
    return f"{MODELS / name}.py:model_factory"


def marked_processes(marker: str) -> list[tuple[int, str]]:
    """Live processes whose environment holds DISTCHECK_TEST_MARKER=<marker>, with their command line."""
    needle = f"DISTCHECK_TEST_MARKER={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                found.append((int(entry), fh.read().replace(b"\0", b" ").decode(errors="replace")[:120]))
        except (OSError, IndexError):
            continue
    return found


def group_members(pgid: int) -> list[int]:
    """Live processes in process group `pgid`."""
    out = []
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
    return out


def own_leftovers() -> list[tuple[int, str]]:
    """Descendants of this pytest process but its forkserver and resource tracker (the warm pool)."""
    me = psutil.Process()
    found = []
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(child.cmdline())
            pool = "forkserver import main" in cmd or "resource_tracker import main" in cmd
            if pool and child.ppid() == me.pid:
                continue
            found.append((child.pid, cmd[:120]))
    return found


def run_dirs(base: Path, owner: int | None = None) -> list[str]:
    """distcheck run directories (and multiprocessing's pymp-* or distcheck-mp-* directories) under `base`."""
    names = []
    with contextlib.suppress(OSError):
        for name in os.listdir(base):
            if name.startswith(("distcheck-run-", "distcheck-ref-")):
                if owner is None or name.split("-")[2] == str(owner):
                    names.append(name)
            elif name.startswith(("pymp-", "distcheck-mp-")) and owner is None:
                names.append(name)
    return names


@dataclass
class Faults:
    """One test's marker, directories and started processes."""

    marker: str
    work: Path
    tmpdir: Path
    markers: Path
    started: list[subprocess.Popen[str]] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for a process tree of this test: marker, TMPDIR, model markers, distcheck and
        the repository root (for `examples`) importable."""
        keep = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env = dict(os.environ)
        env.update(
            DISTCHECK_TEST_MARKER=self.marker,
            TMPDIR=str(self.tmpdir),
            FAULT_MARKER_DIR=str(self.markers),
            PYTHONPATH=os.pathsep.join([str(SOURCE), str(ROOT), *keep]),
            NO_COLOR="1",
        )
        env.update(extra)
        return env

    def start(self, argv: Sequence[str], **extra: str) -> subprocess.Popen[str]:
        """Start `argv` in its own session (so the test can signal it like a terminal signals its
        foreground job), with SIGINT and SIGQUIT at their defaults as a shell gives its foreground job
        (a pytest started in the background by a script inherits them ignored, and a child would
        then ignore the test's Ctrl-C), and stdout and stderr in files of this test."""
        name = f"p{len(self.started)}"
        proc = subprocess.Popen(
            list(argv),
            cwd=self.work,
            env=self.env(**extra),
            stdin=subprocess.DEVNULL,
            stdout=open(self.work / f"{name}.out", "w"),  # the child keeps its copy; ours closes with the test
            stderr=open(self.work / f"{name}.err", "w"),
            text=True,
            start_new_session=True,
            preexec_fn=_foreground_signals,
        )
        proc.name = name  # type: ignore[attr-defined]
        self.started.append(proc)
        return proc

    def cli(self, factory: str, *args: str, **extra: str) -> subprocess.Popen[str]:
        """`python -m distcheck validate FACTORY` at world size 2 on the CPU, one attempt, plus `args`."""
        argv = [sys.executable, "-m", "distcheck", "validate", factory, "--world-size", "2", "--device", "cpu"]
        argv += ["--no-auto-fix", "--no-layer-diagnostic", *args]
        return self.start(argv, **extra)

    def stderr(self, proc: subprocess.Popen[str]) -> str:
        return (self.work / f"{proc.name}.err").read_text()  # type: ignore[attr-defined]

    def stdout(self, proc: subprocess.Popen[str]) -> str:
        return (self.work / f"{proc.name}.out").read_text()  # type: ignore[attr-defined]

    def wait_marker(self, name: str, proc: subprocess.Popen[str] | None = None, timeout: float = 45.0) -> str:
        """Wait for the model's marker file `name`; returns its text. Fails early when `proc` exits."""
        path = self.markers / name
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists():
                return path.read_text()
            if proc is not None and proc.poll() is not None:
                pytest.fail(f"{proc.args!r} exited with {proc.returncode} before marker {name}:\n{self.stderr(proc)}")
            time.sleep(0.05)
        pytest.fail(f"no marker {name} within {timeout} s")

    def wait_stderr(self, text: str, proc: subprocess.Popen[str], timeout: float = 45.0) -> None:
        """Wait until `proc` has written `text` to its stderr."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.stderr(proc):
                return
            if proc.poll() is not None:
                pytest.fail(f"exited with {proc.returncode} before writing {text!r}:\n{self.stderr(proc)}")
            time.sleep(0.02)
        pytest.fail(f"{text!r} not on stderr within {timeout} s:\n{self.stderr(proc)}")

    def wait_process(self, needle: str, proc: subprocess.Popen[str], timeout: float = 45.0) -> int:
        """Wait for a process of this test whose command line holds `needle`; returns its pid."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid, cmd in marked_processes(self.marker):
                if needle in cmd:
                    return pid
            if proc.poll() is not None:
                pytest.fail(f"exited with {proc.returncode} before a {needle!r} process:\n{self.stderr(proc)}")
            time.sleep(0.01)
        pytest.fail(f"no {needle!r} process within {timeout} s")

    def finish(self, proc: subprocess.Popen[str], timeout: float = 45.0) -> int:
        """Wait for `proc` to exit (bounded); its exit code."""
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{proc.args!r} still running after {timeout} s:\n{self.stderr(proc)}")


T = TypeVar("T")


def _wait_empty(probe: Callable[[], list[T]], timeout: float) -> list[T]:
    """Call `probe` until it finds nothing or `timeout` seconds have passed; what it found last."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.fixture
def faults(tmp_path: Path) -> Iterator[Faults]:
    """This test's `Faults`; afterwards every leak check of the module docstring, within a bounded wait
    (whatever is left is killed, so one failing test does not spill into the next)."""
    f = Faults(marker=uuid.uuid4().hex, work=tmp_path, tmpdir=tmp_path / "tmp", markers=tmp_path / "markers")
    f.tmpdir.mkdir()
    f.markers.mkdir()
    yield f
    for proc in f.started:  # a test that failed half-way: stop what it started, as a user would
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    marked = _wait_empty(lambda: marked_processes(f.marker), LEAK_WAIT_S)
    groups = _wait_empty(lambda: [g for p in f.started for g in group_members(p.pid)], 2.0)
    for pid in [*(m[0] for m in marked), *groups]:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not marked, f"processes outlived the test: {marked}"
    assert not groups, f"processes left in the test's process groups: {groups}"
    assert not run_dirs(f.tmpdir), f"left in TMPDIR: {run_dirs(f.tmpdir)}"


@pytest.fixture(autouse=True)
def no_leftovers_of_this_process() -> Iterator[None]:
    """In-process runs (run_distributed here) leave no process but the warm pool and no run directory."""
    yield
    left = _wait_empty(own_leftovers, LEAK_WAIT_S)
    for pid, _ in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left behind: {left}"
    dirs = run_dirs(Path(tempfile.gettempdir()), owner=os.getpid())
    assert not dirs, f"run directories left behind: {dirs}"
