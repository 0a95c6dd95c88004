"""The processes under the editor's runner, as the daemon tracks and kills them: `snapshot` of the
runner's descendants (pid → create time, so a reused pid is never killed), `Tracked` (what was seen
and the rank pids the runner reported), `kill_all` (stop the runner's group, kill every group and
process found or recorded, wait for them). psutil, no torch; called from worker threads."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from ..processes.process_groups import kill_groups

__all__ = ["Tracked", "kill_all", "running", "snapshot"]


@dataclass
class Tracked:
    """Processes seen under the runner: pid → create time (to never kill a reused pid)."""

    procs: dict[int, float] = field(default_factory=dict)
    rank_pids: set[int] = field(default_factory=set)


def snapshot(root_pid: int) -> dict[int, float]:
    import psutil

    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return {}
    out: dict[int, float] = {}
    for child in children:
        try:
            out[child.pid] = child.create_time()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def kill_all(root_pid: int | None, tracked: dict[int, float], rank_pids: set[int], wait: float) -> list[int]:
    """Kill `root_pid`'s group and every process (and process group) under it or recorded; returns
    the pids that were alive. Runs in a worker thread."""
    import psutil

    if root_pid is not None:
        with contextlib.suppress(OSError):
            os.killpg(root_pid, signal.SIGSTOP)
    found = dict(tracked)
    if root_pid is not None:
        found.update(snapshot(root_pid))
    procs: list[Any] = []
    for pid, created in found.items():
        try:
            proc = psutil.Process(pid)
            if abs(proc.create_time() - created) > 0.01:
                continue
            procs.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    for pid in rank_pids:
        if pid not in found:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                procs.append(psutil.Process(pid))
    groups: set[int] = set()
    for proc in procs:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(proc.pid))
    if root_pid is not None:
        groups.add(root_pid)
    kill_groups(groups)
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc.kill()
    if root_pid is not None:
        with contextlib.suppress(OSError):
            os.kill(root_pid, signal.SIGKILL)
    deadline = time.monotonic() + wait
    alive = list(procs)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if running(p)]
        if alive:
            time.sleep(0.02)
    return [p.pid for p in procs if p not in alive]


def running(proc: Any) -> bool:
    """Alive and not a zombie (a zombie's parent may be gone; it holds nothing)."""
    import psutil

    try:
        return bool(proc.is_running()) and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
