"""`python -m distcheck.jobs.runner`: the editor daemon's long-lived child that runs validations.

The LSP daemon never imports torch or user code; this process does. It imports torch once, keeps the
`forkserver` of `distcheck.processes.launch.process_context()` warm (torch and distcheck preloaded) and
runs one validation at a time, so each run forks its reference and rank processes in well under a
second while the user's code is still imported fresh in every one of them.

Protocol (JSON lines; requests on stdin, messages on the original stdout; see docs/protocol.md)::

    → {"id": n, "method": "ping"}
    ← {"id": n, "pong": true, "pid": …, "torch": "2.x", "cuda": false, "python": "…"}
    → {"id": n, "method": "validate", "params": {"target": <Target.to_wire()>, "spec": <spec JSON> | null}}
    ← {"id": n, "event": "reference_started", "info": {…}}          (any number of progress events)
    ← {"id": n, "result": <TraceReport JSON>, "notice": str | null, "retire": [str] (only when retiring)}
      or {"id": n, "error": {"type", "message", "hint", "frames", "user_frame", "report"?}}
    → {"id": n, "method": "shutdown"}

One target per runner. This process imports the user's code (the factory's and the sample's modules:
`run_job` loads them here as the CLI does) and forgets those modules after each validation, its
global settings put back (`isolation.isolated_global_state`); what an import did to torch itself
cannot be put back (a `torch.Tensor` method or torch function wrapped, a global module hook, an op
registered). So a runner serves one target (`serving.serving_key`: the same factory, sample, project
directory and import path), as a fresh process would:

- a validation of another target than the one it imported is refused: it answers
  `{"id": n, "error": {"type": "RunnerRetired", ...}}` and exits (the daemon never sends one: it
  switches to its standby runner first, `lsp.runner_slot`);
- a validation whose code changed what cannot be put back (`GlobalStateGuard.unrestored`: torch's
  surface, the inter-op threads) is answered with `"retire": [why, ...]` beside its result, and the
  runner exits after that answer; the daemon's next validation runs in a fresh runner.

Anything else the process (or user code it imports) prints goes to stderr, which the daemon logs:
file descriptor 1 is pointed at stderr at start-up and the protocol uses a private duplicate. The
runner is its own process-group leader (the daemon starts it with `start_new_session=True`); ranks
and the reference run lead their own groups. If the daemon goes away, a watchdog kills every
process this runner started and exits.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from ..environment import read_settings
from ..options import EDITOR
from .bytecode import import_torch
from .serving import RETIRED_ERROR, serving_key

if TYPE_CHECKING:
    from ..report import TraceReport

__all__ = ["keep_spares_warm", "main", "validate"]

NO_GPU_NOTICE = (
    "no GPU here: validated on the CPU with gloo (set "
    f'{EDITOR.name("device")} to "cpu" to choose that, or run the editor where torch sees a GPU)'
)
"""One line (a notification): torch in the runner sees no CUDA device and the target asked for one."""


class _Channel:
    """The protocol's output: one JSON object per line, written under a lock."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def send(self, message: Mapping[str, Any]) -> None:
        self.raw(json.dumps(message, default=_jsonable, allow_nan=False))

    def raw(self, line: str) -> None:
        with self.lock:
            self.stream.write(line + "\n")
            self.stream.flush()


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def _clean_info(info: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, float) and value != value:  # NaN
            out[key] = None
        else:
            out[key] = value
    return out


def _frames(exc: BaseException) -> list[dict[str, Any]]:
    """Traceback frames of `exc` and of the exception it was raised from, outermost first."""
    from ..runtime.frames import exception_frames

    return [dataclasses.asdict(f) for f in exception_frames(exc)]


def _user_frame(exc: BaseException) -> dict[str, Any] | None:
    """Where the user's code is at fault (`runtime.frames`: a SyntaxError's own line first), or None."""
    from ..runtime.frames import user_frame_of

    found = user_frame_of(exc)
    return None if found is None else dataclasses.asdict(found)


def _cause(exc: BaseException) -> str | None:
    """What the user's code raised, as one line (`runtime.frames.root_cause_words`), or None."""
    from ..runtime.frames import root_cause_words

    return root_cause_words(exc)


def validate(
    params: Mapping[str, Any],
    emit: Callable[[str, Mapping[str, Any]], None],
    retire: Callable[[str], None] | None = None,
) -> tuple[Any, str | None]:
    """Run one job as the CLI would, hints in the editor's words; returns (the TraceReport, a notice or None).

    `params["target"]` is a `Target.to_wire()` (its options merged and checked by the daemon, checked
    again here), `params["spec"]` the prior spec or None: the file the one spec rule names
    (`jobs.spec_source`, which the daemon applied too), recorded in the report with its rule.
    `retire(why)` is called for each thing the job's code changed in this process that cannot be put
    back (this process must then serve no further validation), also when the job raised."""
    from ..runtime.isolation import isolated_global_state
    from ..spec import MLIPSpec
    from .devices import NO_GPU_NOTICE as FELL_BACK
    from .paths import pop_python_path, purge_user_modules, push_python_path
    from .run import run_job
    from .spec_source import spec_source
    from .target import Target

    target = Target.from_wire(params.get("target"))
    source = spec_source(target)
    raw_spec = params.get("spec")
    spec = MLIPSpec.coerce(raw_spec) if raw_spec is not None else None
    notices: list[str] = []
    guard = isolated_global_state()
    if retire is not None:
        guard.on_unrestored = _and_log(retire)
    with guard:  # what the target's code sets here must not reach the next validation
        before = set(sys.modules)
        home = os.getcwd()
        state = push_python_path(target.python_path)
        try:
            os.chdir(target.root)  # the user's code runs where the CLI would run it: in the project directory
            report = run_job(target, spec=spec, words=EDITOR, notice=notices.append, progress=emit, source=source)
        finally:
            os.chdir(home)
            pop_python_path(state)
            purge_user_modules(before, [*target.python_path, target.root])
    return report, NO_GPU_NOTICE if FELL_BACK in notices else None


def _and_log(retire: Callable[[str], None]) -> Callable[[str], None]:
    def report(message: str) -> None:
        print(f"distcheck runner: {message}", file=sys.stderr, flush=True)
        retire(message)

    return report


def _refusal(served: str, key: str) -> dict[str, Any]:
    """The answer to a validation of another target than the one this runner imported."""
    return {
        "type": RETIRED_ERROR,
        "message": "this runner imported another target's code and serves that target only "
        f"(it imported {served}, this validation is of {key})",
        "hint": "validate again: the editor starts a fresh runner for it",
        "frames": [],
    }


def _setup_report(found: Mapping[str, Any]) -> dict[str, Any]:
    """The one-attempt report of a validation that did not start (it replaces the editor's last one)."""
    from ..report import WorkerError
    from ..validate.crash import setup_report

    error = WorkerError.from_dict({**found, "rank": None, "phase": "setup"})
    return setup_report(error, None).to_dict()


def _error(exc: BaseException) -> dict[str, Any]:
    from ..option_check import ConfigError
    from .setup_errors import setup_error

    known = setup_error(exc, EDITOR)
    if known is not None:
        message, hint = known
        kind = "ConfigError" if isinstance(exc, ConfigError) else type(exc).__name__
        found = {"type": kind, "message": message, "hint": hint, "frames": _frames(exc), "user_frame": _user_frame(exc)}
        return {**found, "cause": _cause(exc), "report": _setup_report(found)}
    return {
        "type": type(exc).__name__,
        "message": f"internal error: {type(exc).__name__}: {exc}",
        "hint": "this is a distcheck bug: report it with the traceback from the distcheck output channel",
        "frames": _frames(exc),
        "user_frame": _user_frame(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }


def _kill_descendants() -> None:
    """Kill every process under this runner, in whatever process group or session it is (the
    forkserver, the ranks and what the model started), except this runner itself, and remove its run
    directories (`processes.run_dirs`)."""
    # The pool and the ranks start only after torch and the runtime are imported: without the runtime
    # nothing was started, and the watchdog thread must not import torch (the import guard is the
    # main thread's business).
    lifeline = sys.modules.get("distcheck.processes.lifeline")
    if lifeline is None:
        return
    try:
        lifeline.kill_tree()
        # the exit that follows runs no exit handler: the run directories go now
        sys.modules["distcheck.processes.run_dirs"].remove_own_run_dirs()
    except Exception as exc:  # never let the watchdog die: it is the runner's last line of defence
        print(f"distcheck runner: could not kill its processes: {exc}", file=sys.stderr, flush=True)


def _watchdog(parent: int) -> None:
    """Die with the daemon that started this runner, however it dies: the kernel sends SIGKILL when
    it exits (the forkserver then kills the ranks, see `processes.lifeline`). Where that cannot be set,
    or the daemon was gone before it was, notice within half a second, kill every process this
    runner started and exit."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            _kill_descendants()
            os._exit(3)


def _warm_pool() -> None:
    """Start the forkserver now (torch preloaded) so the first validation does not wait for it."""
    try:
        from ..processes.forkserver import process_context

        process_context()
    except Exception as exc:  # the pool starts on first use anyway
        print(f"distcheck runner: could not pre-start the process pool: {exc}", file=sys.stderr, flush=True)


KEEP_WARM_S = 600.0
"""How long the runner keeps spares warm after a validation (DISTCHECK_SPARES_KEEP_S overrides)."""


def _keep_seconds() -> float:
    keep_s = read_settings().spares_keep_s
    return KEEP_WARM_S if keep_s is None else keep_s


def keep_spares_warm(params: Mapping[str, Any], report: TraceReport | None = None) -> None:
    """Keep the spares of validations warm between them, for `_keep_seconds()` after the last one.

    Before a validation (`report` None): the pool keeps what that validation wants when it ends
    instead of dropping it. After one: the next validation of that shape (its devices and world size,
    the packages its target's model imported, as `processes.spares.learned` learned them) is prepared now.
    Never raises: without spares every process is forked as before."""
    try:
        from ..processes import spares

        if not spares.enabled():
            return
        keep_s = _keep_seconds()
        if report is None:
            spares.keep_warm(idle_timeout_s=keep_s)
            return
        from ..processes.spares.learned import packages_for

        devices, world_size = report.meta.devices, report.meta.world_size
        if devices is None or world_size is None or world_size < 1:
            spares.keep_warm(idle_timeout_s=keep_s)
            return
        target = params.get("target")
        factory = target.get("factory") if isinstance(target, Mapping) else None
        packages = packages_for(factory) if isinstance(factory, str) else []
        spares.keep_warm([str(d) for d in devices], world_size, packages=packages, idle_timeout_s=keep_s)
    except Exception as exc:  # spares are an optimisation: a validation never fails for them
        print(f"distcheck runner: could not keep spares warm: {exc}", file=sys.stderr, flush=True)


def main() -> int:
    """Serve requests from stdin until EOF or `shutdown`."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # whatever else writes to stdout (user code, libraries) ends up in the daemon's log
    channel = _Channel(os.fdopen(protocol_fd, "w", encoding="utf-8", buffering=1))
    parent = os.getppid()
    threading.Thread(target=_watchdog, args=(parent,), daemon=True, name="distcheck-watchdog").start()
    from .. import importguard

    importguard.install()  # before torch: nothing below may come from a project directory
    _warm_pool()  # its forkserver imports torch while this process does
    t0 = time.perf_counter()
    import_torch()
    import torch

    print(
        f"distcheck runner {os.getpid()}: torch {torch.__version__} imported in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    served: str | None = None  # the target whose code this process imported (`serving_key`)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
        except ValueError:
            print(f"distcheck runner: ignoring a line that is not JSON: {line[:200]!r}", file=sys.stderr, flush=True)
            continue
        if not isinstance(request, dict):
            continue
        req_id = request.get("id")
        method = request.get("method")
        if method == "ping":
            channel.send(
                {
                    "id": req_id,
                    "pong": True,
                    "pid": os.getpid(),
                    "torch": torch.__version__,
                    "cuda": bool(torch.cuda.is_available()),
                    "python": sys.version.split()[0],
                }
            )
        elif method == "shutdown":
            break
        elif method == "validate":

            def emit(event: str, info: Mapping[str, Any], req_id: Any = req_id) -> None:
                channel.send({"id": req_id, "event": event, "info": _clean_info(info)})

            params = request.get("params") or {}
            key = serving_key(params.get("target") if isinstance(params, Mapping) else None)
            if served is not None and key != served:  # never another target's code in this process
                channel.send({"id": req_id, "error": _refusal(served, key)})
                break
            served = key
            keep_spares_warm(params)
            reasons: list[str] = []
            try:
                report, notice = validate(params, emit, reasons.append)
            except Exception as exc:
                channel.send({"id": req_id, "error": _error(exc), **({"retire": reasons} if reasons else {})})
                if reasons:
                    break
                continue
            retire = f', "retire": {json.dumps(reasons)}' if reasons else ""
            channel.raw(
                f'{{"id": {json.dumps(req_id)}, "notice": {json.dumps(notice)}{retire}, "result": {report.to_json()}}}'
            )
            if reasons:  # what the job's code did to this process cannot be undone: a fresh runner serves next
                break
            keep_spares_warm(params, report)
        else:
            channel.send(
                {
                    "id": req_id,
                    "error": {
                        "type": "UnknownMethod",
                        "message": f"unknown method {method!r}",
                        "hint": "the daemon and the runner come from different distcheck versions; reinstall",
                        "frames": [],
                    },
                }
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
