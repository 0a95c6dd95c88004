"""What a running rank tells its parent: its phase, and on request its Python stack.

A rank (or the reference run) `install`s a beacon in its run directory. `set_phase` rewrites one
fixed-size record in `<name>.phase` in place (one `pwrite`, cheap enough to mark every collective),
and `collective(op)` marks the time spent inside a collective (`collective:all_reduce` within the
phase `forward`), so the parent can tell the ranks waiting for their peers from the one that never
arrived. `faulthandler` writes every
thread's Python stack to `<name>.stack` when the rank gets `STACK_SIGNAL`, even while it is stuck
in native code; the parent asks for it (`request_stack`) before it kills a rank that timed out.

Without an installed beacon (ranks a launcher started, the validator's own process) every call is a
no-op. No torch.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import time
from collections.abc import Iterator
from typing import IO, NamedTuple

__all__ = [
    "COLLECTIVE",
    "STACK_SIGNAL",
    "StackFrame",
    "collective",
    "current_phase",
    "format_stack",
    "install",
    "parse_stack",
    "read_state",
    "request_stacks",
    "set_phase",
]

STACK_SIGNAL = signal.SIGUSR2
COLLECTIVE = "collective:"
"""Prefix of the mark a rank carries while inside a collective (`collective:all_reduce`)."""

_RECORD = 128


class _Beacon:
    def __init__(self, fd: int, stack: IO[str]) -> None:
        self.fd = fd
        self.stack = stack
        self.phase = ""
        self.collective = ""

    def write(self) -> None:
        record = f"{self.phase}\n{self.collective}".encode("utf-8", "replace")[:_RECORD].ljust(_RECORD)
        with contextlib.suppress(OSError):
            os.pwrite(self.fd, record, 0)


_beacon: _Beacon | None = None


def install(workdir: str, name: str) -> None:
    """Start this process's beacon: `<workdir>/<name>.phase` and the stack dump on `STACK_SIGNAL`."""
    global _beacon
    fd = os.open(os.path.join(workdir, f"{name}.phase"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    stack = open(os.path.join(workdir, f"{name}.stack"), "w")
    faulthandler.register(STACK_SIGNAL, file=stack, all_threads=True, chain=False)
    _beacon = _Beacon(fd, stack)


def set_phase(phase: str) -> None:
    """Record that this process is now in `phase` (no-op without a beacon)."""
    b = _beacon
    if b is None:
        return
    b.phase, b.collective = phase, ""
    b.write()


def current_phase() -> str:
    """The phase last recorded in this process ('' without a beacon)."""
    return _beacon.phase if _beacon is not None else ""


@contextlib.contextmanager
def collective(op: str) -> Iterator[None]:
    """Mark the body as inside collective `op` (within the current phase). On an exception the mark
    stays, so the failure says the rank failed inside the collective (a peer vanished)."""
    b = _beacon
    if b is None:
        yield
        return
    outer = b.collective
    b.collective = COLLECTIVE + op
    b.write()
    yield
    b.collective = outer
    b.write()


def read_state(workdir: str, name: str) -> tuple[str | None, str | None]:
    """`(phase, collective)` a process last recorded in `workdir`: its phase, and the collective it was
    inside (`"all_reduce"`) or None; `(None, None)` when it recorded nothing."""
    try:
        with open(os.path.join(workdir, f"{name}.phase"), "rb") as fh:
            text = fh.read(_RECORD).decode("utf-8", "replace")
    except OSError:
        return None, None
    phase, _, mark = text.partition("\n")
    mark = mark.strip()
    op = mark[len(COLLECTIVE) :] if mark.startswith(COLLECTIVE) else None
    return phase.strip() or None, op or None


def request_stacks(workdir: str, pids: dict[str, int], wait: float = 1.0) -> dict[str, str]:
    """Ask running processes (`{name: pid}`, each with a beacon in `workdir`) for their Python stacks
    and return each dump; '' for one that sent none within `wait` seconds (no beacon yet, or gone)."""
    asked: dict[str, str] = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError):
            os.kill(pid, STACK_SIGNAL)
            asked[name] = os.path.join(workdir, f"{name}.stack")
    deadline = time.monotonic() + wait
    sizes: dict[str, int] = {}
    while asked and time.monotonic() < deadline:
        now = {name: _size(path) for name, path in asked.items()}
        if all(n > 0 and sizes.get(name) == n for name, n in now.items()):
            break  # every dump has stopped growing
        sizes = now
        time.sleep(0.05)
    out = {name: "" for name in pids}
    for name, path in asked.items():
        with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as fh:
            out[name] = fh.read()
    return out


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class StackFrame(NamedTuple):
    """One frame of a dumped stack."""

    file: str
    line: int
    function: str


_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')
_ENTRY_FUNCTIONS = ("_rank_entry", "_reference_entry")


def parse_stack(dump: str) -> list[StackFrame]:
    """The main thread's frames from a faulthandler dump, outermost first (as in a traceback): the
    thread that runs the rank's entry function, else the thread that took the signal, else the first."""
    threads: list[tuple[bool, list[StackFrame]]] = []
    for line in dump.splitlines():
        head = _THREAD.match(line)
        if head:
            threads.append((head.group(1) == "Current thread", []))
            continue
        frame = _FRAME.match(line)
        if frame and threads:
            threads[-1][1].append(StackFrame(frame.group(1), int(frame.group(2)), frame.group(3)))
    if not threads:
        return []
    chosen = next((fs for _, fs in threads if any(f.function in _ENTRY_FUNCTIONS for f in fs)), None)
    if chosen is None:
        chosen = next((fs for cur, fs in threads if cur), threads[0][1])
    return list(reversed(chosen))


def format_stack(frames: list[StackFrame], title: str) -> str:
    """`frames` (outermost first) as a traceback-like block headed by `title`."""
    lines = [f"{title} (most recent call last):"]
    lines += [f'  File "{f.file}", line {f.line}, in {f.function}' for f in frames]
    return "\n".join(lines) + "\n"
