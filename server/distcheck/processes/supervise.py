"""The parent's side of a run: wait for the processes it started, name the culprit, stop the rest.

`supervise` waits on the processes' sentinels until each has exited with its result, or one has
failed, or `timeout_sec` (the bound of this one run) has passed. On a failure the others get a
moment to fail on their own (a vanished peer breaks their collectives), then everything is killed and
`DistributedError` lists the failures culprit first: a rank that raised outside a collective, was
killed by a signal, or exited without a result comes before the ranks that only saw it vanish from
inside a collective. On a timeout each running process is asked for its Python stack
(`beacon.request_stacks`) before it is killed, and `RankTimeout` names the rank that was busy outside
any collective first, with its stack, and the ranks that waited for it in a collective after it.

`stop_all` kills a run's processes with everything they started (`lifeline.kill_tree`) and the
orphans such processes left with the forkserver, then waits for them: `kill_now` and `reap`, its two
halves, let `reaper` wait off the caller's path. No torch.
"""

from __future__ import annotations

import json
import multiprocessing.connection
import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..runtime import beacon
from ..runtime.errors import DistributedError, Frame, RankFailure, RankTimeout
from ..runtime.frames import innermost_user_frame
from . import lifeline

__all__ = ["kill_now", "read_failure", "reap", "stop_all", "supervise"]

RESIDENT_POLL_S = 0.002
"""How often the wait looks for the results of processes that stay alive after their run."""

SETTLE_S = 1.0
"""How long the other processes may take to fail on their own once one has failed."""


Who = Callable[[int], str]


def _rank_name(r: int) -> str:
    return f"rank {r}"


# -- stopping --------------------------------------------------------------------------------------
def stop_all(procs: Sequence[Any]) -> None:
    """Kill every started process of `procs` and everything it started (process groups, new sessions,
    orphans adopted by the forkserver), then reap them. Safe on processes that never started."""
    kill_now(procs)
    reap(procs)


def kill_now(procs: Sequence[Any]) -> None:
    """Send SIGKILL to every started process of `procs` that is still running and to everything it
    started (its tree, what is left of its process group); returns without waiting for any to end."""
    started = [p for p in procs if getattr(p, "_popen", None) is not None and p.pid is not None]
    lifeline.kill_tree([p.pid for p in started if p.exitcode is None])
    for p in started:
        try:  # what is left of a dead process's group (children that did not change group)
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


def reap(procs: Sequence[Any]) -> None:
    """Wait for the killed processes of `procs` to end (5 s each at most), then kill the orphans they
    left with the forkserver."""
    for p in procs:
        if getattr(p, "_popen", None) is not None and p.pid is not None:
            p.join(timeout=5)
    _kill_adopted_orphans()


def _kill_adopted_orphans() -> None:
    """Kill the processes the forkserver adopted from a rank that died: they left their rank's session
    (only distcheck's ranks, not the processes the forkserver forked itself, live in its session)."""
    try:
        from multiprocessing import forkserver

        server = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return
    if not server:
        return
    session = _session(server)
    tree = lifeline._children_by_parent()
    orphans = [pid for pid in tree.get(server, []) if session is not None and _session(pid) not in (None, session)]
    if orphans:
        lifeline.kill_tree(orphans)


def _session(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rfind(b")") + 2 :].split()[3])
    except (OSError, ValueError, IndexError):
        return None


# -- reading what a process left -------------------------------------------------------------------
def _read_log_tail(workdir: str, name: str) -> str:
    try:
        with open(os.path.join(workdir, f"{name}.log"), "rb") as fh:
            return fh.read()[-4000:].decode("utf-8", "replace")
    except OSError:
        return ""


def _last_lines(log_tail: str) -> str:
    last = [line.strip() for line in log_tail.strip().splitlines() if line.strip()][-3:]
    return "; its last output: " + " | ".join(last) if last else ""


def read_failure(
    workdir: str, rank: int, exitcode: int | None, *, who: str | None = None, file_rank: int | None = None
) -> RankFailure:
    """Why process `rank` stopped, from what it left in `workdir`: its error record (exception, frames,
    traceback), else the signal that killed it, else its exit code — with its phase and log tail.
    `file_rank` names its files when they differ from `rank`; `who` names it in the message."""
    fr = rank if file_rank is None else file_rank
    name = f"rank{fr}"
    who = who or _rank_name(rank)
    phase, op = beacon.read_state(workdir, name)
    phase = phase or "starting"
    log_tail = _read_log_tail(workdir, name)
    rec: dict[str, Any] | None = None
    try:
        with open(os.path.join(workdir, f"{name}.error.json")) as fh:
            rec = json.load(fh)
    except (OSError, ValueError):
        pass
    if rec is not None:
        return RankFailure(
            rank=rank,
            type=rec["type"],
            message=rec["message"],
            phase=phase,
            frames=[Frame(**f) for f in rec["frames"]],
            traceback=rec["traceback"],
            exitcode=exitcode,
            log_tail=log_tail,
            peak_memory_bytes=rec.get("peak_memory_bytes"),
            collective=op,
            partial=rec.get("partial"),
        )
    if exitcode is not None and exitcode < 0:
        try:
            signame = signal.Signals(-exitcode).name
        except ValueError:
            signame = f"signal {-exitcode}"
        message = (
            f"{who} was killed by {signame} during {_during(phase, op)} (out of memory or a crash in native code?)"
        )
        kind = "RankKilled"
    else:
        message = (
            f"{who} exited with code {exitcode} during {_during(phase, op)} without a result and without a Python "
            "exception: "
            "the model or a library it calls ended the process (os._exit(), or exit() in native code) instead "
            "of returning or raising"
        )
        kind = "RankExited"
    message += _last_lines(log_tail)
    return RankFailure(
        rank=rank, type=kind, message=message, phase=phase, exitcode=exitcode, log_tail=log_tail, collective=op
    )


def _during(phase: str, op: str | None) -> str:
    return f"{phase!r}" + (f" (inside the collective {op})" if op else "")


def _is_victim(f: RankFailure) -> bool:
    """A Python exception raised inside a collective: the rank saw a peer vanish, it did not cause it."""
    return f.type not in ("RankKilled", "RankExited") and f.collective is not None


# -- timeouts --------------------------------------------------------------------------------------
def _innermost_user_frame(frames: Sequence[Frame]) -> Frame | None:
    return innermost_user_frame(frames) or (frames[-1] if frames else None)


def _at(frames: Sequence[Frame]) -> str:
    f = _innermost_user_frame(frames)
    return f" at {f.file}:{f.line} in {f.function}" if f is not None else ""


def _timed_out_failure(
    workdir: str, rank: int, dump: str, timeout_sec: float, who: str, file_rank: int, single: bool
) -> RankFailure:
    name = f"rank{file_rank}"
    phase, op = beacon.read_state(workdir, name)
    phase = phase or "starting"
    if op is None and phase == "rendezvous":
        op = "init_process_group"  # waiting for the peers to join the group
    frames = [Frame(f.file, f.line, f.function) for f in beacon.parse_stack(dump)]
    log_tail = _read_log_tail(workdir, name)
    title = f"Python stack of {who} when it was stopped"
    stack = beacon.format_stack(beacon.parse_stack(dump), title) if frames else ""
    if op is not None:
        kind = "RankWaiting"
        message = (
            f"{who} was waiting for its peers in the collective {op} when the run timed out after {timeout_sec:g} s"
        )
    else:
        kind = "RankStuck"
        outside = "" if single else ", outside any collective,"
        message = f"{who} was still busy in {phase!r}{outside} when it timed out after {timeout_sec:g} s{_at(frames)}"
        if not frames:
            message += " (it sent no Python stack: it was stuck before its beacon started, or in native code)"
    return RankFailure(
        rank=rank,
        type=kind,
        message=message,
        phase=phase,
        frames=frames,
        traceback=stack,
        log_tail=log_tail,
        collective=op,
    )


def _timeout_message(
    failures: Sequence[RankFailure], finished: Sequence[int], timeout_sec: float, who: Who, label: str, single: bool
) -> str:
    head = f"{label} timed out after {timeout_sec:g} s (timeout_sec bounds each run)"
    stuck = [f for f in failures if f.type == "RankStuck"]
    waiting = [f for f in failures if f.type == "RankWaiting"]
    outside = "" if single else " outside any collective"
    parts = [f"{who(f.rank)} in {f.phase!r}, busy{outside}{_at(f.frames)}" for f in stuck]
    parts += [f"{who(f.rank)} in {f.phase!r}, waiting for its peers in the collective {f.collective}" for f in waiting]
    if finished:
        parts.append(", ".join(who(r) for r in finished) + " had already returned its result")
    text = f"{head}: " + "; ".join(parts) + "."
    if not single:
        text += " Every rank was killed."
    if stuck:
        first = stuck[0]
        if first.phase in ("starting", "rendezvous"):
            text += (
                f" {who(first.rank).capitalize()} never got through {first.phase!r}: check its log for an import that "
                "hangs, "
                "or raise timeout_sec if starting is merely slow here."
            )
        elif first.frames:
            name = who(first.rank)
            text += (
                f" {name[:1].upper() + name[1:]}'s stack (in the failure record) shows where it was: a loop or a "
                "blocking call there never returned; fix it, or raise timeout_sec if the model is merely this slow on "
                "the sample."
            )
        else:
            text += " If the model is merely this slow on the sample, raise timeout_sec."
    else:
        ops = {(f.phase, f.collective) for f in waiting}
        if len(ops) > 1 or finished:
            text += (
                " The ranks took different code paths (e.g. branching on the local atom count, or skipping a layer "
                "on a rank that holds no atoms of a system): make every rank run the same collectives."
            )
        else:
            text += " If the model is merely slow, raise timeout_sec."
    return text


# -- the wait --------------------------------------------------------------------------------------
def supervise(
    procs: Sequence[Any],
    workdir: str,
    *,
    timeout_sec: float,
    t_start: float,
    has_result: Callable[[int], bool],
    on_finished: Callable[[int, int | None], None] | None = None,
    who: Who = _rank_name,
    rank_of: Callable[[int], int] = lambda i: i,
    label: str = "the run",
    resident: bool = False,
) -> None:
    """Wait until every process in `procs` has exited 0 with its result (`has_result(i)`); raise
    `DistributedError` when one fails (the culprit first) or `RankTimeout` once `timeout_sec` has
    passed since `t_start` (stacks captured, every process killed). `rank_of(i)` is the rank recorded
    in a failure of process i (its files are `rank<i>.*`), `who(rank)` how messages name it, `label`
    the run ("the run", "the reference run"). With `resident` a process is done once its result is
    there (it stays alive for a next run); one that exits is done only with its result, as always."""
    deadline = t_start + timeout_sec
    pending = {p.sentinel: (i, p) for i, p in enumerate(procs)}
    failures: list[RankFailure] = []
    finished: list[int] = []

    def collect(ready: list[Any]) -> None:
        for sentinel in ready:
            i, p = pending.pop(sentinel)
            p.join()
            if on_finished:
                on_finished(i, p.exitcode)
            if p.exitcode == 0 and has_result(i):
                finished.append(rank_of(i))
                continue
            failures.append(read_failure(workdir, rank_of(i), p.exitcode, who=who(rank_of(i)), file_rank=i))

    while pending and not failures:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            names = {f"rank{i}": p.pid for i, p in pending.values() if p.pid is not None}
            dumps = beacon.request_stacks(workdir, names)
            running = sorted(pending.values(), key=lambda ip: ip[0])
            stop_all(procs)
            single = len(procs) == 1
            timed = [
                _timed_out_failure(
                    workdir, rank_of(i), dumps.get(f"rank{i}", ""), timeout_sec, who(rank_of(i)), i, single
                )
                for i, _ in running
            ]
            timed.sort(key=lambda f: f.type != "RankStuck")  # stable: the busy ones first, by rank
            raise RankTimeout(_timeout_message(timed, finished, timeout_sec, who, label, single), timed)
        collect(
            multiprocessing.connection.wait(list(pending), timeout=min(remaining, RESIDENT_POLL_S if resident else 1.0))
        )
        if resident and not failures:
            for sentinel, (i, _) in list(pending.items()):
                if has_result(i):
                    del pending[sentinel]
                    if on_finished:
                        on_finished(i, None)
                    finished.append(rank_of(i))
    if not failures:
        return
    settle = time.perf_counter() + SETTLE_S
    while pending and time.perf_counter() < settle:
        collect(multiprocessing.connection.wait(list(pending), timeout=max(0.0, settle - time.perf_counter())))
    stopped = [i for i, _ in pending.values()]
    stop_all(procs)
    for i in sorted(stopped):  # killed by us: listed only when they had recorded an error of their own
        if os.path.exists(os.path.join(workdir, f"rank{i}.error.json")):
            failures.append(read_failure(workdir, rank_of(i), procs[i].exitcode, who=who(rank_of(i)), file_rank=i))
    failures.sort(key=_is_victim)  # stable: the culprits first, in the order they failed
    first = failures[0]
    where = f" at {first.frames[-1].file}:{first.frames[-1].line}" if first.frames else ""
    others = " The other ranks were stopped." if len(procs) > 1 else ""
    raise DistributedError(
        f"{who(first.rank)} failed during {first.phase!r}: {first.type}: {first.message}{where}.{others}", failures
    )
