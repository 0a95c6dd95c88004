"""How distcheck's processes are started: the warm forkserver pool and the lock around every start.

No torch here, so a process that has not imported torch yet (the CLI while it loads the target)
can start the pool, which then imports torch while the caller goes on. `launch` re-exports these
names; ranks, reference runs and spares all start through `process_context()` under `main_hidden()`.
`forkserver_ready()` and `forkserver_context()` tell the spares' keeper when it may fork from the pool.

The forkserver's environment is fixed when it starts, and so is every process forked from it, except
for what each job carries and applies (`caller_context`). Variables that take effect only when a
process starts (`caller_context.is_start_time`: CUDA's, the loader's, the interpreter's, the thread
pools', torch's) cannot be applied that way: when the caller's values of them are no longer those the
running forkserver started with, `process_context` restarts it before the run (`_restart_if_stale`),
and everything forked from the old one (idle spares, resident or prepared ranks) ends with it. The
new one starts under the caller's values, and warm starts are warm again from the next run on.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

from .. import importguard
from ..environment import read_settings
from ..runtime.module_namespace import PRELOAD_RECORD
from . import lifeline
from .caller_context import start_time_values
from .run_dirs import multiprocessing_dir

__all__ = [
    "BASE_PRELOAD",
    "extra_preload",
    "forkserver_context",
    "forkserver_ready",
    "main_hidden",
    "preload_modules",
    "process_context",
    "running_pid",
]

_CONTEXTS: dict[str, Any] = {}

BASE_PRELOAD: tuple[str, ...] = (
    "distcheck.processes.forkserver_init",  # first: the import guard, before anything else is imported
    "torch",
    "torch.distributed",
    # torch imports it lazily on the first `autograd.grad` given `grad_outputs` (a rank's first forward
    # would pay it); it does not import TorchDynamo, which no rank needs (`observer.dynamo_disabled_lazily`)
    "torch.fx.experimental.symbolic_shapes",
    "distcheck.processes.launch",
    "distcheck.validate.instrument",
    "vesin",  # the neighbour lists' library, imported on a process's first neighbour list
    # what torch loads lazily on the first forward under a rank's modes, loaded once here
    "distcheck.processes.mode_warmup",
    PRELOAD_RECORD,  # last: the names of all of the above (`module_namespace.preloaded_modules`)
)


def preload_modules() -> list[str]:
    """What the forkserver imports once for all ranks: `BASE_PRELOAD` plus the comma-separated modules
    in DISTCHECK_PRELOAD (slow-to-import third-party packages such as `aimnet.models`). A module that
    fails to import there is skipped by multiprocessing; ranks still import user code afresh. A module
    that initialises CUDA on import must not be preloaded: processes forked from the pool then cannot
    use the GPU ("CUDA error: initialization error"); name it for the spares instead
    (DISTCHECK_SPARE_PACKAGES), which import it after the fork."""
    return [*BASE_PRELOAD, *extra_preload()]


def extra_preload() -> list[str]:
    """The modules DISTCHECK_PRELOAD names (comma-separated) for the forkserver beside distcheck's own."""
    return [m for m in read_settings(warn=False).preload if m not in BASE_PRELOAD]


def process_context(method: str | None = None) -> Any:
    """The multiprocessing context ranks start from: by default a warm forkserver (`preload_modules()`
    imported once, alive for the life of this process) where available, else spawn. `method` (or the
    environment variable DISTCHECK_START_METHOD) forces one. Returns once the pool is starting (its
    imports go on in the background); the first process started from it waits for them. A forkserver
    started under other values of the start-time variables than this process has now is restarted
    first (see the module docstring)."""
    method = method or read_settings().start_method_in_use()
    with _START_LOCK:  # no process forked between the restart and the new forkserver's start
        if method not in _CONTEXTS:
            ctx = mp.get_context(method)
            if method == "forkserver":
                ctx.set_forkserver_preload(preload_modules())
            _CONTEXTS[method] = ctx
        if method == "forkserver":
            _restart_if_stale()
        _start_helpers(method)
    return _CONTEXTS[method]


_STARTED_UNDER: dict[str, str] | None = None
"""The start-time variables (`caller_context.start_time_values`) of this process when it started the
running forkserver, as the forkserver and everything forked from it have them."""


def _restart_if_stale() -> None:
    """Stop the running forkserver (and everything forked from it) when this process's start-time
    variables are no longer those it started under; the caller starts the next one (`_start_helpers`).
    Called with the start lock held."""
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver  # type: ignore[attr-defined]
    if _STARTED_UNDER is None or server._forkserver_pid is None:
        return
    if start_time_values(os.environ) == _STARTED_UNDER:
        return
    with server._lock:
        pid, alive_fd, address = server._forkserver_pid, server._forkserver_alive_fd, server._forkserver_address
        server._forkserver_pid = server._forkserver_alive_fd = server._forkserver_address = None
        lifeline.kill_tree([pid])
        if alive_fd is not None:
            with contextlib.suppress(OSError):
                os.close(alive_fd)
        # once it is gone, each process forked from it reads as ended (its status pipe closed), so a
        # spare, prepared or resident rank of the old one is never handed a job
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        if isinstance(address, str) and address and not address.startswith("\0"):
            with contextlib.suppress(OSError):
                os.unlink(address)


def _start_helpers(method: str) -> None:
    """Start the forkserver and the resource tracker (both `python -c` processes, which would put
    the current directory first on their `sys.path`) from distcheck's private directory; each call
    after the first only checks that they are still alive."""
    global _STARTED_UNDER
    import signal
    from multiprocessing import forkserver, resource_tracker

    before = _forkserver_pid() if method == "forkserver" else None
    values = start_time_values(os.environ)  # the caller's, before `clean_start` sets its own
    with main_hidden(), importguard.clean_start():
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())
        resource_tracker.ensure_running()
        # starting the tracker, the stdlib blocks SIGINT and SIGTERM for it and then unblocks them, also
        # when the caller had them blocked (`lifeline.helpers_ignore_sigint`): the forkserver started
        # next would inherit a mask that lets a Ctrl-C kill it while it imports, with a traceback
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if method == "forkserver":
            multiprocessing_dir()  # its socket's directory: swept with the run directories
            os.environ[lifeline.OWNER_VARIABLE] = str(os.getpid())  # who it must clean up after
            try:
                forkserver.ensure_running()
            finally:
                os.environ.pop(lifeline.OWNER_VARIABLE, None)
            if _STARTED_UNDER is None or _forkserver_pid() != before:
                _STARTED_UNDER = values


_START_LOCK = threading.RLock()


@contextlib.contextmanager
def main_hidden() -> Iterator[None]:
    """Keep multiprocessing from re-running the parent's `__main__` in each rank, and start one
    process at a time (the spares' keeper thread starts processes too).

    Ranks import the factory by reference, so the parent's script is not needed there; re-running it
    would execute the user's top-level code once per rank.
    """
    with _START_LOCK:
        main = sys.modules.get("__main__")
        saved: dict[str, Any] = {
            k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__
        }
        try:
            for k in saved:
                if k == "__spec__":
                    main.__dict__[k] = None
                else:
                    del main.__dict__[k]
            yield
        finally:
            if main is not None:
                main.__dict__.update(saved)


def forkserver_context() -> Any:
    """The forkserver context if `process_context` made one, else None (never starts it)."""
    return _CONTEXTS.get("forkserver")


def forkserver_ready() -> bool:
    """Whether the forkserver runs and has got through its preload far enough to have armed itself
    (it then leads its own process group: `lifeline.arm_forkserver`). The keeper forks only then: a
    start holds the start lock until the fork, and a main thread kept waiting on that lock inside
    `helpers_ignore_sigint` for a whole torch import would lose a Ctrl-C."""
    pid = _forkserver_pid()
    if not pid or not _forkserver_alive(pid):
        return False
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def running_pid() -> int | None:
    """The pid of the running forkserver, None when none runs."""
    pid = _forkserver_pid()
    return pid if pid and _forkserver_alive(pid) else None


def _forkserver_pid() -> int | None:
    try:
        from multiprocessing import forkserver

        pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return None
    return int(pid) if pid else None


def _forkserver_alive(pid: int) -> bool:
    """Whether process `pid` exists and is neither a zombie nor dead (its state in /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False
