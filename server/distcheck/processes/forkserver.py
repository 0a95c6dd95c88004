"""How distcheck's processes are started: the warm forkserver pool and the lock around every start.

No torch here, so a process that has not imported torch yet (the CLI while it loads the target)
can start the pool, which then imports torch while the caller goes on. `launch` re-exports these
names; ranks, reference runs and spares all start through `process_context()` under `main_hidden()`.
`forkserver_ready()` and `forkserver_context()` tell the spares' keeper when it may fork from the pool.
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
from ..runtime.module_namespace import PRELOAD_RECORD

__all__ = [
    "BASE_PRELOAD",
    "extra_preload",
    "forkserver_context",
    "forkserver_ready",
    "main_hidden",
    "preload_modules",
    "process_context",
]

_CONTEXTS: dict[str, Any] = {}

BASE_PRELOAD: tuple[str, ...] = (
    "distcheck.processes.forkserver_init",  # first: the import guard, before anything else is imported
    "torch",
    "torch.distributed",
    # torch imports it lazily on the first `autograd.grad` given `grad_outputs` (nearly 1 s on a busy
    # CPU); it does not import TorchDynamo, which no rank needs (`observer.dynamo_disabled_lazily`)
    "torch.fx.experimental.symbolic_shapes",
    "distcheck.processes.launch",
    "distcheck.validate.instrument",
    "vesin",  # the neighbour lists' library, imported on a process's first neighbour list (0.05 s)
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
    extra = [m.strip() for m in os.environ.get("DISTCHECK_PRELOAD", "").split(",") if m.strip()]
    return [m for m in dict.fromkeys(extra) if m not in BASE_PRELOAD]


def process_context(method: str | None = None) -> Any:
    """The multiprocessing context ranks start from: by default a warm forkserver (`preload_modules()`
    imported once, alive for the life of this process) where available, else spawn. `method` (or the
    environment variable DISTCHECK_START_METHOD) forces one. Returns once the pool is starting (its
    imports go on in the background); the first process started from it waits for them."""
    method = method or os.environ.get("DISTCHECK_START_METHOD")
    if method is None:
        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    if method not in _CONTEXTS:
        ctx = mp.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(preload_modules())
        _CONTEXTS[method] = ctx
    _start_helpers(method)
    return _CONTEXTS[method]


def _start_helpers(method: str) -> None:
    """Start the forkserver and the resource tracker (both `python -c` processes, which would put
    the current directory first on their `sys.path`) from distcheck's private directory; each call
    after the first only checks that they are still alive."""
    import signal
    from multiprocessing import forkserver, resource_tracker

    with main_hidden(), importguard.clean_start():
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())
        resource_tracker.ensure_running()
        # starting the tracker, the stdlib blocks SIGINT and SIGTERM for it and then unblocks them, also
        # when the caller had them blocked (`lifeline.helpers_ignore_sigint`): the forkserver started
        # next would inherit a mask that lets a Ctrl-C kill it while it imports, with a traceback
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if method == "forkserver":
            forkserver.ensure_running()


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
