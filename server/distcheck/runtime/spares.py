"""Pre-warmed rank processes ("spares"): started before a run needs them, each used for one job.

A spare is forked from the rank pool's forkserver, which imported torch and distcheck and never
initialises CUDA, so a spare may create its own CUDA context; what it does then is in
`spares_child`. Being the forkserver's child, it obeys every lifeline rule of a rank: it dies with
the forkserver, which dies with the owner (SIGKILL included) and kills everything under it, and its
run directory is the run's own. A spare runs exactly one job (a rank or the reference run) and
exits, so every rank still starts pristine; only torch, its CUDA context and third-party packages
are warm, never the user's modules.

`SparePool` (one per process, `pool()`) holds the idle spares. `want(counts)` asks for spares per
device, started and refilled in the background (a keeper thread) while the want holds; `claim`
takes one (or starts one at once when none is idle), `settle` at the end of a validation drops
the idle ones unless `keep_warm` asked to keep them; idle spares exit after `idle_timeout_s`.
Their number (`max_spares`) and GPU memory (`max_gpu_bytes`, from what warm spares report) are
bounded; `report()` says what is held. Environment: DISTCHECK_SPARES=0 turns spares off (every
process forked as before), DISTCHECK_SPARES_MAX, DISTCHECK_SPARES_MAX_GPU_MB, DISTCHECK_SPARES_IDLE_S,
DISTCHECK_SPARES_KEEP_S (keep warm between validations for that long, as `keep_warm` does).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from . import lifeline

__all__ = [
    "Spare",
    "SparePool",
    "enabled",
    "keep_warm",
    "pool",
    "prestart",
    "process",
    "report",
]

MIB = 1024 * 1024


def enabled() -> bool:
    """Whether runs use spares: not turned off by DISTCHECK_SPARES=0, and ranks start from a forkserver
    (the only pool a spare can be forked from without inheriting an initialised CUDA)."""
    if os.environ.get("DISTCHECK_SPARES", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    method = os.environ.get("DISTCHECK_START_METHOD")
    import multiprocessing as mp

    return (method or "forkserver") == "forkserver" and "forkserver" in mp.get_all_start_methods()


def _env_float(name: str, default: float | None) -> float | None:
    try:
        return float(os.environ[name])
    except (KeyError, ValueError):
        return default


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
        """Have the spare become a rank of a coming run and build its wrapper now (`spares_child`)."""
        self.built = self._send(("build", {**order, **_context()}))
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
        if self.exitcode is None and self._send(("run", target, args, _context())):
            self._close_conn()
            return
        from .spares_start import main_hidden

        self._close_conn()
        with contextlib.suppress(Exception):
            self._proc.kill()
            self._proc.join(5)
        self._proc = self._ctx.Process(target=target, args=args, name=name, daemon=False)
        with main_hidden():
            self._proc.start()

    def retire(self) -> None:
        """Ask the spare to exit, then make sure it and anything under it is gone."""
        from .supervise import stop_all

        self._send(("exit",))
        self._close_conn()
        stop_all([self._proc])

    def _close_conn(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None


def _context() -> dict[str, Any]:
    """What a process forked now would have inherited and a spare adopts: the import path, the cwd."""
    return {"sys_path": list(sys.path), "cwd": os.getcwd()}


def _forkserver_ready() -> bool:
    """Whether the forkserver runs and has got through its preload far enough to have armed itself
    (it then leads its own process group: `lifeline.arm_forkserver`). The keeper forks only then: a
    start holds the start lock until the fork, and a main thread kept waiting on that lock inside
    `helpers_ignore_sigint` for a whole torch import would lose a Ctrl-C."""
    pid = _forkserver_pid()
    if not pid or not _forkserver_alive():
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


def _forkserver_alive() -> bool:
    try:
        from multiprocessing import forkserver

        pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return False
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


class SparePool:
    """The idle spares of this process, per device, and the keeper thread that refills them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._idle: list[Spare] = []
        self._wanted: dict[str, int] = {}
        self._packages: tuple[str, ...] = ()
        self._expires = 0.0
        self._starting: dict[str, int] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        self._paused = 0
        self.max_spares = int(_env_float("DISTCHECK_SPARES_MAX", 8) or 8)
        gpu_mb = _env_float("DISTCHECK_SPARES_MAX_GPU_MB", None)
        self.max_gpu_bytes: int | None = int(gpu_mb * MIB) if gpu_mb is not None else None
        self.idle_timeout_s = float(_env_float("DISTCHECK_SPARES_IDLE_S", 600.0) or 600.0)
        self.keep_s: float | None = _env_float("DISTCHECK_SPARES_KEEP_S", None)
        self.counts = {"started": 0, "claimed_warm": 0, "claimed_warming": 0, "started_on_claim": 0, "retired": 0}
        self._gpu_estimate: dict[str, int] = {}
        atexit.register(self.close)

    # -- asking ---------------------------------------------------------------------------------------
    def want(self, counts: Mapping[str, int], packages: Sequence[str] = (), hold_s: float | None = None) -> None:
        """Have at least `counts[device]` spares of each device warm or warming, now and after each claim,
        for `hold_s` seconds (default `idle_timeout_s`), with `packages` imported. Returns at once;
        the forkserver is started here (the calling thread must be the one that may start helpers:
        the main thread), the spares in the background."""
        if not enabled() or self._closed:
            return
        from .spares_start import process_context

        with lifeline.helpers_ignore_sigint():
            process_context()
        stale: list[Spare] = []
        with self._cond:
            for device, n in counts.items():
                self._wanted[device] = max(self._wanted.get(device, 0), int(n))
            merged = tuple(dict.fromkeys(packages))  # the coming validation's, not an earlier target's
            if merged != self._packages:  # idle spares with other packages are replaced
                self._packages = merged
                stale = [s for s in self._idle if set(s.packages) != set(merged)]
                self._idle = [s for s in self._idle if s not in stale]
            self._expires = time.monotonic() + (hold_s if hold_s is not None else self.idle_timeout_s)
            self._ensure_thread()
            self._cond.notify_all()
        self._retire(stale)

    def claim(self, device: str) -> Spare | None:
        """A spare for `device`: an idle one (a warm one first), else one forked now. None when spares
        are off. A claim triggers the refill of what `want` asked for."""
        if not enabled() or self._closed:
            return None
        with self._cond:
            alive = [s for s in self._idle if s.device == device and s.exitcode is None]
            alive.sort(key=lambda s: not s.ready())
            spare = alive[0] if alive else None
            if spare is not None:
                self._idle.remove(spare)
                self.counts["claimed_warm" if spare.ready() else "claimed_warming"] += 1
                self._cond.notify_all()
                return spare
            packages = self._packages
        from .spares_start import process_context

        with lifeline.helpers_ignore_sigint():
            ctx = process_context()
        self.counts["started_on_claim"] += 1
        return self._start(ctx, device, packages)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No background refill in the body (claims still fork at once): for a validation on a machine
        with too few cores to run its processes and warm new spares at the same time."""
        with self._cond:
            self._paused += 1
        try:
            yield
        finally:
            with self._cond:
                self._paused -= 1
                self._cond.notify_all()

    def lower(self, counts: Mapping[str, int]) -> None:
        """Want at most `counts[device]` spares of these devices from now on (what is idle stays until
        claimed or expired); no-op while `keep_warm` holds spares for the next validation."""
        with self._cond:
            if self.keep_s:
                return
            for device, n in counts.items():
                if device in self._wanted:
                    self._wanted[device] = min(self._wanted[device], int(n))

    def settle(self) -> None:
        """End of a validation: keep the wanted spares warm for `keep_s` when `keep_warm` asked for it,
        else drop every idle spare now."""
        with self._cond:
            if self.keep_s:
                self._expires = time.monotonic() + self.keep_s
                self._cond.notify_all()
                return
            self._wanted.clear()
            self._wait_starts()
            idle, self._idle = self._idle, []
        self._retire(idle)

    def _wait_starts(self, timeout: float = 30.0) -> None:
        """Wait (lock held, bounded) until no spare is being forked: one that is would appear after
        the caller dropped the idle ones. The keeper retires it, since nothing wants it any more."""
        deadline = time.monotonic() + timeout
        while any(self._starting.values()) and time.monotonic() < deadline:
            self._cond.wait(0.05)

    def trim(self) -> None:
        """Drop every idle spare and every want now."""
        with self._cond:
            self._wanted.clear()
            self._wait_starts()
            idle, self._idle = self._idle, []
        self._retire(idle)

    def close(self) -> None:
        """Stop refilling and drop the idle spares (at exit: multiprocessing would wait for them)."""
        with self._cond:
            self._closed = True
            busy = any(self._starting.values())
            self._cond.notify_all()
        if busy:  # a spare still being forked (the pool importing torch): the forkserver takes it along
            lifeline.stop_forkserver()
        self.trim()

    def report(self) -> dict[str, Any]:
        """What the pool holds: idle spares per device (warm or still warming), their memory as they
        reported it (PSS, GPU bytes and where that figure comes from), the bounds and the counters."""
        with self._cond:
            idle = list(self._idle)
            for s in idle:
                s.ready()  # reads a warm-up report that came in (under the lock, as the keeper does)
            wanted = dict(self._wanted)
        per_device: dict[str, dict[str, Any]] = {}
        for s in idle:
            d = per_device.setdefault(s.device, {"idle": 0, "warm": 0, "memory_bytes": 0, "gpu_bytes": 0})
            d["idle"] += 1
            if s.info is not None:
                d["warm"] += 1
                d["memory_bytes"] += int(s.info.get("memory_bytes", 0))
                d["gpu_bytes"] += int(s.info.get("gpu_bytes", 0))
                d["gpu_bytes_source"] = s.info.get("gpu_bytes_source")
                d.setdefault("warm_seconds", []).append(round(float(s.info.get("warm_seconds", 0.0)), 3))
                phases = {k: round(float(v), 3) for k, v in dict(s.info.get("phases") or {}).items()}
                d.setdefault("warm_phases", []).append(phases)
                failed = s.info.get("failed_imports") or []
                if failed:
                    d["failed_imports"] = sorted(set(d.get("failed_imports", [])) | set(failed))
        return {
            "enabled": enabled(),
            "devices": per_device,
            "wanted": wanted,
            "packages": list(self._packages),
            "max_spares": self.max_spares,
            "max_gpu_bytes": self.max_gpu_bytes,
            "idle_timeout_s": self.idle_timeout_s,
            "keep_s": self.keep_s,
            "counts": dict(self.counts),
        }

    # -- the keeper ---------------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._keep, name="distcheck-spares", daemon=True)
            self._thread.start()

    def _keep(self) -> None:
        # Signals are the main thread's: one delivered here would not interrupt the main thread's
        # blocking call (Ctrl-C while it waits for the pool to import torch would go unnoticed).
        synchronous = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT}
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - synchronous)
        started = False
        while True:
            with self._cond:
                busy = self._wanted or self._idle
                if not started:  # right after a start, look for the next deficit at once
                    self._cond.wait(timeout=(0.05 if not _forkserver_ready() else 1.0) if busy else None)
                if self._closed:
                    return
                dead = [s for s in self._idle if s.exitcode is not None]
                self._idle = [s for s in self._idle if s.exitcode is None]
                expired: list[Spare] = []
                if self._wanted and time.monotonic() > self._expires:
                    self._wanted.clear()
                    expired, self._idle = self._idle, []
                device = self._next_device() if not self._paused and _forkserver_ready() else None
                if device is not None:
                    self._starting[device] = self._starting.get(device, 0) + 1
                packages = self._packages
                ctx = _forkserver_context()
            self._retire(dead + expired, count=bool(expired))
            started = False
            if device is None:
                continue
            spare: Spare | None = None
            try:
                if ctx is not None and _forkserver_ready():  # never restart it from here (see `want`)
                    spare = self._start(ctx, device, packages)
            except Exception:
                spare = None
            with self._cond:
                have = sum(1 for s in self._idle if s.device == device)
                keep = not self._closed and packages == self._packages and have < self._wanted.get(device, 0)
                if keep and spare is not None:
                    self._idle.append(spare)
            if spare is not None and not keep:  # no longer wanted while it was being forked
                spare.retire()
            with self._cond:
                self._starting[device] -= 1
                self._cond.notify_all()
            started = spare is not None
            if spare is None:
                time.sleep(0.5)  # the forkserver is gone or refused: wait for the next `want`

    def _next_device(self) -> str | None:
        """A device short of its wanted spares, within the bounds (called with the lock held)."""
        total = len(self._idle) + sum(self._starting.values())
        if total >= self.max_spares:
            return None
        for device, n in self._wanted.items():
            have = sum(1 for s in self._idle if s.device == device) + self._starting.get(device, 0)
            if have >= n:
                continue
            if self.max_gpu_bytes is not None and device.startswith("cuda"):
                for s in self._idle:
                    if s.device == device and s.ready() and s.info is not None:
                        est = int(s.info.get("gpu_bytes", 0))
                        self._gpu_estimate[device] = max(self._gpu_estimate.get(device, 0), est)
                if (have + 1) * self._gpu_estimate.get(device, 0) > self.max_gpu_bytes:
                    continue
            return device
        return None

    def _start(self, ctx: Any, device: str, packages: tuple[str, ...]) -> Spare:
        from .spares_child import spare_main
        from .spares_start import main_hidden

        parent, child = ctx.Pipe(duplex=True)
        plan = {"device": device, "packages": list(packages), "idle_timeout_s": self.idle_timeout_s}
        proc = ctx.Process(target=spare_main, args=(child, plan), name="distcheck-spare", daemon=False)
        try:
            with main_hidden():
                proc.start()
        finally:
            child.close()
        self.counts["started"] += 1
        return Spare(proc, parent, device, packages, ctx)

    def _retire(self, spares: Sequence[Spare], count: bool = True) -> None:
        for s in spares:
            s.retire()
        if count:
            self.counts["retired"] += len(spares)


def _forkserver_context() -> Any:
    from .spares_start import _CONTEXTS

    return _CONTEXTS.get("forkserver")


_POOL: SparePool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> SparePool:
    """This process's spare pool (made on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = SparePool()
        return _POOL


def process(ctx: Any, device: str, target: Callable[..., Any], args: tuple[Any, ...], name: str) -> Any:
    """The process that will run `target(*args)` on `device`: a claimed spare bound to the job, or
    (spares off, or not a forkserver pool) a plain process of `ctx`. Either way, `start()` it."""
    spare = pool().claim(device) if ctx.get_start_method() == "forkserver" else None
    if spare is None:
        return ctx.Process(target=target, args=args, name=name, daemon=False)
    return spare.bind(target, args, name)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def roomy(world_size: int) -> bool:
    """Whether there are cores enough to refill spares while a validation of `world_size` ranks runs
    (two per process of it, the reference included); on fewer, the refill waits for its end."""
    return usable_cores() >= 2 * (world_size + 1)


def rank_counts(devices: Sequence[str], reference: bool = True) -> dict[str, int]:
    """Spares one validation takes per device: a rank per entry of `devices`, plus the reference run
    on the first device."""
    counts: dict[str, int] = {}
    for d in [*devices, *([devices[0]] if reference and devices else [])]:
        counts[d] = counts.get(d, 0) + 1
    return counts


def _listed(devices: Sequence[str] | str, world_size: int) -> list[str]:
    """One device per rank, as `launch.resolve_devices` gives them; torch only for plain `"cuda"`."""
    if isinstance(devices, str):
        if devices == "cpu" or devices.startswith("cuda:"):
            return [devices] * world_size
        from .launch import resolve_devices

        return resolve_devices(devices, world_size)
    return [str(d) for d in devices]


def keep_warm(
    devices: Sequence[str] | str | None = None,
    world_size: int = 2,
    *,
    packages: Sequence[str] = (),
    idle_timeout_s: float = 600.0,
) -> SparePool:
    """Keep each validation's spares (a spare per rank plus one for its reference) warm after it, for the
    next one, until nothing has asked for them for `idle_timeout_s`: for a long-lived process such as
    the editor's runner (DISTCHECK_SPARES_KEEP_S does the same). With `devices`, those of a validation
    of `world_size` ranks are started now too. Returns the pool."""
    the_pool = pool()
    the_pool.keep_s = float(idle_timeout_s)
    if devices is not None:
        the_pool.want(rank_counts(_listed(devices, world_size)), packages, hold_s=float(idle_timeout_s))
    return the_pool


def prestart(devices: Sequence[str] | str = "cpu", world_size: int = 2, *, factory: str | None = None) -> SparePool:
    """Start the spares of one coming validation now and return at once: for the CLI, before it loads
    the target and the sample (and before it imports torch: this imports none for `"cpu"`, `"cuda:N"`
    or a list). `factory` (as the user wrote it) picks the packages that target's model imported last
    time (`spares_cache`)."""
    from .spares_cache import packages_for

    the_pool = pool()
    the_pool.want(rank_counts(_listed(devices, world_size)), packages_for(factory) if factory else ())
    return the_pool


def report() -> dict[str, Any]:
    """`pool().report()`."""
    return pool().report()
