"""`python -m distcheck.lsp.runner`: the daemon's long-lived child that runs validations.

The LSP daemon never imports torch or user code; this process does. It imports torch once, keeps the
`forkserver` of `distcheck.runtime.launch.process_context()` warm (torch and distcheck preloaded) and
runs one validation at a time, so each run forks its reference and rank processes in well under a
second while the user's code is still imported fresh in every one of them.

Protocol (JSON lines; requests on stdin, messages on the original stdout; see docs/protocol.md)::

    → {"id": n, "method": "ping"}
    ← {"id": n, "pong": true, "pid": …, "torch": "2.x", "cuda": false, "python": "…"}
    → {"id": n, "method": "validate", "params": {"factory", "sample", "sample_is_file", "spec",
                                                "spec_path", "options", "python_path", "cwd",
                                                "name", "config"}}
    ← {"id": n, "event": "reference_started", "info": {…}}          (any number of progress events)
    ← {"id": n, "result": <TraceReport JSON>, "notice": str | null}
      or {"id": n, "error": {"type", "message", "hint", "frames"}}
    → {"id": n, "method": "shutdown"}

Anything else the process (or user code it imports) prints goes to stderr, which the daemon logs:
file descriptor 1 is pointed at stderr at start-up and the protocol uses a private duplicate. The
runner is its own process-group leader (the daemon starts it with `start_new_session=True`); ranks
and the reference run lead their own groups. If the daemon goes away, a watchdog kills every
process this runner started and exits.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import IO, Any

__all__ = ["main"]

NO_GPU_NOTICE = (
    "no GPU: validated on the CPU with gloo (validate_on_cpu), because torch in the runner sees no CUDA "
    "device; run the editor where torch sees a GPU to validate with trace_and_validate, or set "
    'distcheck.device to "cpu" to validate on the CPU on purpose'
)


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


def _user_dirs(params: Mapping[str, Any]) -> list[str]:
    dirs = [str(d) for d in params.get("python_path") or []]
    if params.get("cwd"):
        dirs.append(str(params["cwd"]))
    return [os.path.abspath(d) for d in dirs]


def _purge_user_modules(before: set[str], dirs: list[str]) -> None:
    """Forget modules imported during a validation from the user's directories, so the next
    validation imports the user's code afresh (ranks always do; this process must too)."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    prefixes = [d.rstrip(os.sep) + os.sep for d in dirs]
    for name in [n for n in list(sys.modules) if n not in before]:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            continue
        path = os.path.abspath(file)
        if path.startswith(package_dir + os.sep) or "site-packages" in path or "dist-packages" in path:
            continue
        if any(path.startswith(p) for p in prefixes):
            del sys.modules[name]


def _frames(exc: BaseException) -> list[dict[str, Any]]:
    """Traceback frames of `exc` and of the exception it was raised from, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 5:
        chain.append(current)
        current = current.__cause__ or current.__context__
    frames: list[dict[str, Any]] = []
    for item in reversed(chain):
        for f in traceback.extract_tb(item.__traceback__):
            frames.append({"file": os.path.abspath(f.filename), "line": f.lineno or 0, "function": f.name})
    return frames


def validate(params: Mapping[str, Any], emit: Callable[[str, Mapping[str, Any]], None]) -> tuple[Any, str | None]:
    """Run one validation as the CLI would; returns (the TraceReport, a notice or None)."""
    import torch

    from .. import cli
    from ..cli_sample import add_dtype_hint
    from ..spec import MLIPSpec
    from ..targets import ConfigError, Target, check_options
    from ..validate import trace_and_validate, validate_on_cpu
    from ..validate.isolation import isolated_global_state

    with isolated_global_state():  # what the target's code sets here must not reach the next validation
        target = Target(
            name=params.get("name"),
            factory=str(params["factory"]),
            sample=params.get("sample"),
            sample_is_file=bool(params.get("sample_is_file")),
            frames=params.get("frames"),
            dtype=params.get("dtype"),
            root=str(params.get("cwd") or os.getcwd()),
            python_path=[str(p) for p in params.get("python_path") or []],
            config=params.get("config"),
        )
        options = dict(params.get("options") or {})
        check_options(options)
        before = set(sys.modules)
        home = os.getcwd()
        state = cli._push_python_path(target.python_path)
        try:
            # The user's code runs where the CLI would run it: in the project directory.
            os.chdir(target.root)
            factory = cli._import(target.factory, "factory")
            if not callable(factory):
                raise ConfigError(
                    f"factory {target.factory!r} is a {type(factory).__name__}, not a callable",
                    "point the target's factory at a function that returns the model",
                )
            batch, sample_info = cli._load_sample(target, factory)
            raw_spec = params.get("spec")
            spec = MLIPSpec.coerce(raw_spec) if raw_spec is not None else None
            notices: list[str] = []

            class _Notices(cli._Printer):
                def notice(self, text: str) -> None:
                    notices.append(text)

            device = cli._resolve_device(options, _Notices(sys.stderr, quiet=True))
            auto = str(params.get("options", {}).get("device", "auto")) == "auto"
            notice = NO_GPU_NOTICE if notices and auto else None

            def progress(event: str, info: Mapping[str, Any]) -> None:
                emit(event, info)

            kwargs: dict[str, Any] = dict(options, progress=progress, spec=spec)
            if device == "cpu":
                backend = kwargs.pop("backend", "auto")
                if backend == "nccl":
                    raise ConfigError(
                        "backend nccl needs CUDA devices, but the device is cpu", "use backend gloo or auto"
                    )
                report = validate_on_cpu(target.factory, batch, **kwargs)
            else:
                if not torch.cuda.is_available():
                    raise ConfigError(
                        f"device {device!r} needs CUDA, and torch in the runner sees no GPU",
                        'set distcheck.device to "auto" or "cpu"',
                    )
                report = trace_and_validate(target.factory, batch, device=device, **kwargs)
            report.target = {
                "name": target.name,
                "factory": cli._source_of(factory, target.factory),
                "sample": sample_info,
                "spec_path": params.get("spec_path"),
                "config": target.config,
            }
            add_dtype_hint(report, batch, sample_info)
            return report, notice
        finally:
            os.chdir(home)
            cli._pop_python_path(state)
            _purge_user_modules(before, _user_dirs(params))


def _error(exc: BaseException) -> dict[str, Any]:
    from .. import cli
    from ..targets import ConfigError

    if isinstance(exc, ConfigError):
        return {"type": "ConfigError", "message": exc.message, "hint": exc.hint, "frames": _frames(exc)}
    known = cli._setup_error(exc)
    if known is not None:
        message, hint = known
        return {"type": type(exc).__name__, "message": message, "hint": hint, "frames": _frames(exc)}
    return {
        "type": type(exc).__name__,
        "message": f"internal error: {type(exc).__name__}: {exc}",
        "hint": "this is a distcheck bug: report it with the traceback from the distcheck output channel",
        "frames": _frames(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }


def _kill_descendants() -> None:
    """Kill every process under this runner, in whatever process group or session it is (the
    forkserver, the ranks and what the model started), except this runner itself."""
    # The pool and the ranks start only after torch and the runtime are imported: without the runtime
    # nothing was started, and the watchdog thread must not import torch (the import guard is the
    # main thread's business).
    lifeline = sys.modules.get("distcheck.runtime.lifeline")
    if lifeline is None:
        return
    try:
        lifeline.kill_tree()
    except Exception as exc:  # never let the watchdog die: it is the runner's last line of defence
        print(f"distcheck runner: could not kill its processes: {exc}", file=sys.stderr, flush=True)


def _watchdog(parent: int) -> None:
    """Die with the daemon that started this runner, however it dies: the kernel sends SIGKILL when
    it exits (the forkserver then kills the ranks, see `runtime.lifeline`). Where that cannot be set,
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
        from ..runtime.launch import process_context

        process_context()
    except Exception as exc:  # the pool starts on first use anyway
        print(f"distcheck runner: could not pre-start the process pool: {exc}", file=sys.stderr, flush=True)


def main() -> int:
    """Serve requests from stdin until EOF or `shutdown`."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # whatever else writes to stdout (user code, libraries) ends up in the daemon's log
    channel = _Channel(os.fdopen(protocol_fd, "w", encoding="utf-8", buffering=1))
    parent = os.getppid()
    threading.Thread(target=_watchdog, args=(parent,), daemon=True, name="distcheck-watchdog").start()
    from .. import importguard

    importguard.install()  # before torch: nothing below may come from a project directory
    t0 = time.perf_counter()
    import torch

    print(
        f"distcheck runner {os.getpid()}: torch {torch.__version__} imported in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    warmed = False
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
            if not warmed:
                _warm_pool()
                warmed = True
        elif method == "shutdown":
            break
        elif method == "validate":
            if not warmed:
                _warm_pool()
                warmed = True

            def emit(event: str, info: Mapping[str, Any], req_id: Any = req_id) -> None:
                channel.send({"id": req_id, "event": event, "info": _clean_info(info)})

            try:
                report, notice = validate(request.get("params") or {}, emit)
            except Exception as exc:
                channel.send({"id": req_id, "error": _error(exc)})
                continue
            channel.raw(f'{{"id": {json.dumps(req_id)}, "notice": {json.dumps(notice)}, "result": {report.to_json()}}}')
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
