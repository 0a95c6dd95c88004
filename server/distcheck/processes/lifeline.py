"""No process outlives its owner: parent-death signals, child subreapers, tree kills, run directories.

The owner is the process that calls `run_distributed` (the CLI, the editor's runner, a user's
script). Its processes form one tree: owner → forkserver → ranks / reference → whatever the model
starts, possibly in a new session (`setsid`, `start_new_session=True`), out of every process group.

- The forkserver (multiprocessing starts it with `python -c`; it imports `distcheck.processes.launch`
  among its preload modules, which calls `arm_forkserver`) leads its own process group, is a child
  subreaper (orphans of its subtree come back to it), and gets `OWNER_GONE_SIGNAL` when the owner
  dies however it dies, SIGKILL included. Then, and on SIGTERM/SIGHUP or its own exit, it kills
  every process under it and removes the owner's run directories.
- Every rank (`arm_child`) gets SIGKILL when the forkserver dies, is a subreaper too and, on its way
  out, kills what the model left running (`kill_tree`).
- Run directories (`run_dirs`) are `distcheck-<kind>-<owner pid>-XXXX` holding a lock the owner keeps
  while it runs, multiprocessing's directory of the owner (the forkserver's socket) among them; the
  forkserver removes a dead owner's (the owner names itself in `OWNER_VARIABLE`: one that died while
  the forkserver imported is not its parent by then), and each new one first removes those whose lock
  nobody holds (their owner died).

Linux only (prctl, /proc); elsewhere these functions do nothing and tree kills fall back to process
groups. No torch: the forkserver arms itself before anything else, and the CLI may use this module.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from types import FrameType

from .process_groups import kill_groups
from .run_dirs import run_dirs_of, sweep_run_dirs

__all__ = [
    "OWNER_GONE_SIGNAL",
    "OWNER_VARIABLE",
    "arm_child",
    "arm_forkserver",
    "become_subreaper",
    "descendants",
    "forkserver_pid",
    "helpers_ignore_sigint",
    "kill_tree",
    "set_parent_death_signal",
    "stop_forkserver",
]

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

OWNER_GONE_SIGNAL = signal.SIGUSR1
"""The forkserver's parent-death signal (its handler tells a dead owner from a finished thread)."""


OWNER_VARIABLE = "_DISTCHECK_FORKSERVER_OWNER"
"""The owner's pid, in the environment the owner starts its forkserver with (`forkserver`)."""

# Set in the forkserver by `arm_forkserver`; ranks forked from it inherit them.
_forkserver_pid: int | None = None
_forkserver_owner: int | None = None


# -- kernel switches -------------------------------------------------------------------------------
def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def set_parent_death_signal(sig: int) -> bool:
    """Have the kernel send `sig` to this process when the thread that started it exits (Linux).
    Returns whether it is set. The setting is not inherited by children this process forks."""
    return _prctl(PR_SET_PDEATHSIG, int(sig))


def become_subreaper() -> bool:
    """Make this process the one that adopts orphaned processes of its subtree (Linux), so children
    that left every process group (a new session) can still be found under it and killed."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


# -- process trees ---------------------------------------------------------------------------------
def _children_by_parent() -> dict[int, list[int]]:
    """Live (non-zombie) processes by parent pid, from /proc."""
    out: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 2 or fields[0] == b"Z":
            continue
        out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def descendants(root: int) -> list[int]:
    """Every live process under `root` (children, their children, …), parents before children."""
    return _under(_children_by_parent(), [root])


def _under(tree: dict[int, list[int]], roots: Iterable[int]) -> list[int]:
    found: list[int] = []
    seen: set[int] = set()
    todo = [c for r in roots for c in tree.get(r, [])]
    while todo:
        pid = todo.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        found.append(pid)
        todo.extend(tree.get(pid, []))
    return found


def kill_tree(roots: Iterable[int] | None = None, *, include_roots: bool = True) -> list[int]:
    """SIGKILL every process under `roots` (None: under this process), and the roots themselves when
    `include_roots`, however far it went: stops each one found and walks again until no new process
    appears (nothing forks away meanwhile), then kills them all and every process group one of them
    leads. This process and its own group are never signalled. Returns the pids signalled."""
    me = os.getpid()
    roots = [me] if roots is None else [r for r in roots if r > 0 and r != me]
    if not roots:
        return []
    stopped: list[int] = []

    def stop(pid: int) -> None:
        if pid != me and pid not in stopped:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)

    if include_roots:
        for r in roots:
            stop(r)
    for _ in range(50):
        before = len(stopped)
        # Walking from the stopped processes too finds the children of one whose parent was killed
        # meanwhile and that were adopted by a process among them.
        for pid in _under(_children_by_parent(), [*roots, *stopped]):
            stop(pid)
        if len(stopped) == before:
            break
    groups: set[int] = set()
    for pid in stopped:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                groups.add(pid)
    kill_groups(groups)
    for pid in stopped:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return stopped


# -- the forkserver ----------------------------------------------------------------------------------
def _importing_in_forkserver() -> bool:
    """Whether this import runs inside `multiprocessing.forkserver.main` (its preload loop)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back
    return False


def forkserver_pid() -> int | None:
    """The pid of the forkserver this process is (or was forked from), when `arm_forkserver` armed it."""
    return _forkserver_pid


def arm_forkserver() -> bool:
    """Arm multiprocessing's forkserver, when called while it imports its preload modules; elsewhere do
    nothing and return False. See the module docstring for what it then does."""
    global _forkserver_pid, _forkserver_owner
    if _forkserver_pid is not None or not _importing_in_forkserver():
        return False
    owner = _owner_of_forkserver()
    _forkserver_pid, _forkserver_owner = os.getpid(), owner
    with contextlib.suppress(OSError):
        os.setpgrp()  # a kill of the owner's process group leaves it alive to clean up
    become_subreaper()
    # Orphans it adopts are reaped by its SIGCHLD loop, which warns about pids it did not fork.
    warnings.filterwarnings("ignore", message="forkserver: waitpid returned unexpected pid")
    # blocked by helpers_ignore_sigint (the mask survives exec); ignoring SIGINT first drops a Ctrl-C
    # that is pending, so the imports still to come are not interrupted by it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    signal.signal(signal.SIGTERM, _forkserver_stopped)
    signal.signal(signal.SIGHUP, _forkserver_stopped)
    signal.signal(OWNER_GONE_SIGNAL, _forkserver_owner_gone)
    atexit.register(_forkserver_cleanup)
    set_parent_death_signal(OWNER_GONE_SIGNAL)
    if os.getppid() != owner:  # the owner died before the signal was set
        _forkserver_cleanup()
        os._exit(0)
    return True


def _owner_of_forkserver() -> int:
    """The process that started this forkserver: the one `OWNER_VARIABLE` names (taken out of the
    environment, so that nothing forked from here sees it), else the parent. The parent alone would be
    wrong where the owner died while this process imported its preload modules: the parent is then the
    process that adopted it."""
    named = os.environ.pop(OWNER_VARIABLE, "")
    return int(named) if named.isdigit() else os.getppid()


_PF_EXITING = 0x4  # /proc/<pid>/stat flags: the process has begun to exit


def _owner_alive() -> bool:
    """Whether the owner still runs. A dying owner closes its files (the forkserver's alive pipe reads
    EOF, its run directory locks are free) before the kernel re-parents the forkserver, so an owner that
    is still the parent but has begun to exit counts as gone."""
    if _forkserver_owner is None or os.getppid() != _forkserver_owner:
        return False
    try:
        with open(f"/proc/{_forkserver_owner}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return not sys.platform.startswith("linux")
    return fields[0] not in (b"Z", b"X") and not int(fields[6]) & _PF_EXITING


_stopping = False
"""Set once the forkserver has begun its last cleanup (from a signal or its exit handler): a stop or
owner-gone signal delivered meanwhile returns at once. Run again from inside the first, the cleanup
would wait forever on a lock the first holds (tempfile's, while it looks for run directories to
sweep), and the forkserver, an orphan by then, would keep the owner's stdout and stderr open."""


def _forkserver_cleanup() -> None:
    """Kill what the forkserver started and, when its owner is gone, sweep the owner's run directories.
    Runs once, from whichever comes first: a stop or owner-gone signal, or the exit handler when the
    owner closed the forkserver's pipe (an owner that exits then signals owner-gone a moment later,
    while this may still run)."""
    global _stopping
    if os.getpid() != _forkserver_pid or _stopping:
        return
    _stopping = True
    kill_tree()
    if _forkserver_owner is not None and not _owner_alive():
        _sweep_dying_owner(_forkserver_owner)
        _remove_owner_socket_dir()


_OWNER_EXIT_WAIT_S = 10.0


def _sweep_dying_owner(owner: int) -> None:
    """Remove `owner`'s run directories once their locks are free. A killed owner signals its forkserver
    while its last threads are still exiting (freeing a large address space first), so its files, the
    locks among them, can close a moment later: wait for that, bounded."""
    deadline = time.monotonic() + _OWNER_EXIT_WAIT_S
    while True:
        sweep_run_dirs(owner=owner)
        if not run_dirs_of(owner) or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _remove_owner_socket_dir() -> None:
    """Remove multiprocessing's `pymp-*` directory of a dead owner: it holds the socket this
    forkserver listens on, and the owner's exit handler that removes it never ran."""
    try:
        from multiprocessing import forkserver

        address = forkserver._forkserver._forkserver_address  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return
    if isinstance(address, str) and address and not address.startswith("\0"):
        directory = os.path.dirname(address)
        if os.path.basename(directory).startswith("pymp-"):
            shutil.rmtree(directory, ignore_errors=True)


def _forkserver_owner_gone(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _forkserver_pid or _stopping or _owner_alive():
        return  # a rank (not meant for it), cleaning up already, or only the owner's starting thread ended
    _forkserver_cleanup()
    os._exit(0)


def _forkserver_stopped(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _forkserver_pid:  # a just-forked rank that has not reset its handlers yet
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _stopping:  # the cleanup under way exits when it is done
        return
    _forkserver_cleanup()
    os._exit(128 + signum)


def stop_forkserver() -> None:
    """Kill this process's forkserver and everything under it now, for a run interrupted because this
    process is stopping (Ctrl-C, SIGTERM): a forkserver still importing its preload modules would
    notice its owner's death only once done. multiprocessing starts a fresh one for the next run."""
    try:
        from multiprocessing import forkserver

        pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return
    if pid:
        kill_tree([pid])


@contextlib.contextmanager
def helpers_ignore_sigint() -> Iterator[None]:
    """Start helper processes (the forkserver, the resource tracker) in the body with SIGINT, SIGTERM
    and SIGHUP blocked, which they keep through exec until they ignore SIGINT themselves
    (`arm_forkserver`, multiprocessing's resource tracker): a Ctrl-C in a terminal goes to the whole
    foreground process group, and a helper still importing its modules would die of it with a
    traceback on the user's screen. Only in the main thread. A stop signal that comes meanwhile is
    handled as soon as the body is done, by the handler that was there before, whichever thread the
    kernel gave it to."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGTERM and SIGHUP wait too: one that struck while multiprocessing starts a helper would leave
    # it running unrecorded (its pid not yet stored), out of reach of the clean-up that follows.
    # Blocking alone does not hold them: the kernel hands a process-directed signal that the main
    # thread blocks to another thread (torch's, say), and the main thread would then run the
    # handler mid-body, or, were it SIG_IGN, drop the signal. So each is recorded and raised again.
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    caught: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(stops))
    previous = {sig: signal.signal(sig, record) for sig in stops}
    try:
        yield
    finally:
        # unblocked first: what is pending reaches `record` (which cannot raise), so nothing can leave
        # the mask blocked; then the old handlers take back what was caught
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


# -- ranks -------------------------------------------------------------------------------------------
def arm_child(owner: int | None = None) -> None:
    """First thing in a rank or reference process: reset the handlers inherited from the forkserver,
    die with SIGKILL when the forkserver (or, without one, the owner `owner`) dies, and adopt the
    orphans of the model's processes. Exits at once when that parent is already gone."""
    for sig in (signal.SIGTERM, signal.SIGHUP, OWNER_GONE_SIGNAL):
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
    parent = _forkserver_pid if _forkserver_pid is not None else owner
    if set_parent_death_signal(signal.SIGKILL) and parent is not None and os.getppid() != parent:
        os._exit(1)
    become_subreaper()
