"""One spare: a warm process forked from the pool's forkserver, waiting on its pipe for one job.

`Spare` has the process interface `supervise` and `stop_all` use, reads the spare's warm-up report
(`ready`), and hands it a job: `build` (become a rank of a coming run, `spares.child`), `bind` +
`start` (run a rank or reference body), `retire` (exit). Both messages carry the caller context of
the job (`caller_context.CallerContext`: the owner's environment, working directory and `sys.path`
when its run started), which the spare applies before anything else. A spare found dead when its job
is handed over is replaced by a process forked then, so the caller sees one process either way (a
spare of a forkserver that was restarted reads as dead). What the spare does on its side is in
`spares.child`. No torch.
"""

from __future__ import annotations

import contextlib
import pickle
import time
from collections.abc import Callable
from typing import Any

from ..caller_context import CallerContext, caller_of
from ..forkserver import main_hidden

__all__ = ["Spare", "inherited"]


class Spare:
    """One warm process waiting for its job, with the process interface `supervise` and `stop_all`
    use (`pid`, `sentinel`, `exitcode`, `join`, `is_alive`). `bind` + `start` hand it a rank or
    reference body; a spare found dead at that moment is replaced by a freshly forked process."""

    def __init__(self, proc: Any, conn: Any, device: str, packages: tuple[str, ...], ctx: Any) -> None:
        self._proc = proc
        self._conn = conn
        self._ctx = ctx
        self.device = device
        self.packages = packages
        self.info: dict[str, Any] | None = None
        self.started_at = time.monotonic()
        self._job: tuple[Callable[..., Any], tuple[Any, ...], str] | None = None
        self.built = False

    # -- the process interface -------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return int(self._proc.pid) if self._proc.pid is not None else None

    @property
    def sentinel(self) -> int:
        return int(self._proc.sentinel)

    @property
    def exitcode(self) -> int | None:
        code = self._proc.exitcode
        return None if code is None else int(code)

    @property
    def _popen(self) -> Any:  # stop_all reads it to tell started processes from the others
        return self._proc._popen

    @property
    def name(self) -> str:
        return str(self._proc.name)

    def join(self, timeout: float | None = None) -> None:
        self._proc.join(timeout)

    def is_alive(self) -> bool:
        return bool(self._proc.is_alive())

    # -- the job ---------------------------------------------------------------------------------
    def ready(self) -> bool:
        """Whether the spare has finished warming (reads its report without blocking)."""
        if self.info is None and self._conn is not None:
            with contextlib.suppress(EOFError, OSError, pickle.UnpicklingError):
                if self._conn.poll(0):
                    kind, info = pickle.loads(self._conn.recv_bytes())
                    if kind == "ready":
                        self.info = dict(info)
        return self.info is not None

    def _send(self, message: tuple[Any, ...]) -> bool:
        if self._conn is None:
            return False
        try:
            self._conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
            return True
        except (OSError, ValueError):
            return False

    def build(self, order: dict[str, Any]) -> bool:
        """Have the spare become a rank of a coming run and build its wrapper now (`spares.child`), under
        the order's caller context (this process's now when it carries none)."""
        self.built = self._send(("build", {**order, "caller": caller_of(order) or inherited()}))
        return self.built

    def bind(self, target: Callable[..., Any], args: tuple[Any, ...], name: str) -> Spare:
        """The job `start` hands over; returns self (used where a process object is built)."""
        self._job = (target, args, name)
        return self

    def start(self) -> None:
        """Hand over the bound job. A spare that died meanwhile (or cannot be reached) is replaced by a
        process forked now with the same job, so the caller sees one process either way."""
        assert self._job is not None, "bind a job first"
        target, args, name = self._job
        if self.exitcode is None and self._send(("run", target, args, _job_caller(args))):
            self._close_conn()
            return
        self._close_conn()
        with contextlib.suppress(Exception):
            self._proc.kill()
            self._proc.join(5)
        self._proc = self._ctx.Process(target=target, args=args, name=name, daemon=False)
        with main_hidden():
            self._proc.start()

    def retire(self) -> None:
        """Ask the spare to exit, then make sure it and anything under it is gone."""
        from ..supervise import stop_all

        self._send(("exit",))
        self._close_conn()
        stop_all([self._proc])

    def _close_conn(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None


def inherited() -> CallerContext:
    """What a process this one started now would have: its environment, working directory, import path."""
    return CallerContext.capture()


def _job_caller(args: tuple[Any, ...]) -> CallerContext:
    """The caller context of the job among a body's arguments (`(rank, job)` or `(job,)`), else now's."""
    for arg in args:
        if isinstance(arg, dict):
            found = caller_of(arg)
            if found is not None:
                return found
    return inherited()
