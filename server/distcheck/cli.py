"""`distcheck validate TARGET`: validate a model from the terminal or CI.

TARGET is a factory reference (`path/file.py:factory` or `package.module:factory`), a `.py` file
defining `model_factory`, or the name of a target in `[tool.distcheck]` of the nearest
`pyproject.toml` (searched upwards from the current directory, or given with `--config`). Progress goes
to stderr one plain line per event; the report goes to stdout. Exit codes: 0 passed, 1 failed,
2 usage or setup error (and a report whose verdict is "error"), 3 inconclusive, 130 interrupted.

A structure-file sample (`--sample traj.extxyz`) gives one system per frame; `--frames 0:10` (an index
or a start:stop:step slice) picks some, `--dtype float32` reads them for a float32 model.

Targets and their configuration are read by `distcheck.targets` (see its docstring for the format).
The directory of the pyproject is put on `sys.path` too; with a factory reference on the command line
the current directory is (as `python -m` does).

Validator options (config key / flag): `world_size` (--world-size), `device` (--device), `atol`,
`rtol`, `auto_fix` (--no-auto-fix), `max_fix_attempts`, `backend`, `timeout_sec` (--timeout: one
run, i.e. the reference or one attempt's ranks), `deadline_sec` (--deadline: the whole validation),
`watched_helper_packages` (--watch / --no-watch), `helper_sample_every`, `layer_diagnostic`
(--no-layer-diagnostic), `allow_oversubscribe` (--allow-oversubscribe: more than 4 ranks per CPU
core). Flags win over the target's entry, which wins over the table's defaults. Every value is
checked before anything starts (NaN, inf or negative tolerances, a timeout or deadline that is not
a finite number > 0, fewer than 2 ranks, more ranks than atoms of the sample's smallest system: exit
code 2).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from . import cli_args, importguard
from .cli_args import cli_options
from .cli_junit import junit_xml
from .cli_output import Printer, one_line, print_error, progress_line, rank_tag
from .cli_report import error_report, save_spec_state, show_and_write, write_text
from .cli_sample import add_dtype_hint, import_object, load_sample, source_of, where_raised
from .cli_target import describe_target, loaded_factory, prior_spec, resolve_device, resolve_target
from .targets import ConfigError, Target, check_options, check_rank_count, find_config, load_targets

if TYPE_CHECKING:
    from .report import TraceReport
    from .runtime.group import LauncherEnv

__all__ = [
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERRUPTED",
    "EXIT_PASSED",
    "ConfigError",
    "Target",
    "build_parser",
    "find_config",
    "junit_xml",
    "load_targets",
    "main",
]

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
EXIT_INCONCLUSIVE = 3
EXIT_INTERRUPTED = 130

_VERDICT_EXIT = {"passed": EXIT_PASSED, "failed": EXIT_FAILED, "error": EXIT_ERROR, "inconclusive": EXIT_INCONCLUSIVE}

# The names the editor's runner (`lsp/runner.py`) and older callers use; the code lives in cli_*.py.
_Printer = Printer
_import = import_object
_load_sample = load_sample
_source_of = source_of
_resolve_device = resolve_device
_where_raised = where_raised
_one_line = one_line
_progress_line = progress_line
_write_text = write_text
_error = print_error
_rank_tag = rank_tag
_error_report = error_report


# --------------------------------------------------------------------------------------------------
# running


def _validate(target: Target, options: dict[str, Any], printer: _Printer) -> TraceReport:
    from .validate import trace_and_validate, validate_on_cpu

    factory = loaded_factory(target)
    batch, sample_info = _load_sample(target, factory)
    spec = prior_spec(target, printer)
    device = _resolve_device(options, printer)
    kwargs = dict(options, progress=printer.progress, spec=spec)
    if device == "cpu":
        backend = kwargs.pop("backend", "auto")
        if backend == "nccl":
            raise ConfigError("backend nccl needs CUDA devices, but the device is cpu", "use --backend gloo or auto")
        report = validate_on_cpu(target.factory, batch, **kwargs)
    else:
        report = trace_and_validate(target.factory, batch, device=device, **kwargs)
    describe_target(report, target, factory, sample_info)
    add_dtype_hint(report, batch, sample_info)
    return report


def _launcher(choice: str) -> LauncherEnv | None:
    """Where this process sits in a launched job when the validation runs across it (`--launcher
    torchrun`, or `auto` with torchrun's variables set), else None (distcheck starts its own ranks)."""
    from .runtime.errors import SetupError
    from .runtime.group import launcher_env

    if choice == "local":
        return None
    try:
        env = launcher_env()
    except SetupError:
        if choice == "torchrun":
            raise
        return None  # `auto` with stray variables (a RANK exported for something else): run locally
    if env is None and choice == "torchrun":
        raise ConfigError(
            "--launcher torchrun, but RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are not set",
            "start it with torchrun, e.g. torchrun --nproc-per-node=2 -m distcheck validate TARGET",
        )
    return env


def _validate_launched(
    target: Target, options: dict[str, Any], printer: _Printer, job: LauncherEnv, cli_world_size: int | None
) -> TraceReport | None:
    """Every rank of a launched job runs this; rank 0 gets the report, the others None."""
    from .validate import validate_launched

    factory = loaded_factory(target)
    batch: Any = None
    sample_info: dict[str, Any] = {}
    spec: Any = None
    if job.rank == 0:  # the sample and the prior spec travel from rank 0 with every attempt
        batch, sample_info = _load_sample(target, factory)
        spec = prior_spec(target, printer)
    job_size = job.world_size
    world_size = options.pop("world_size", None)
    if world_size is not None and world_size != job_size:
        if cli_world_size is not None:
            raise ConfigError(
                f"--world-size {world_size} but the launcher started {job_size} ranks",
                "leave out --world-size under torchrun (the job's size is --nnodes × --nproc-per-node)",
            )
        printer.notice(f"world_size {world_size} from the config is replaced by the launcher's {job_size} ranks")
    text = str(options.pop("device", "auto"))
    device: str | list[str] = text.split(",") if "," in text else text
    report = validate_launched(target.factory, batch, device=device, progress=printer.progress, spec=spec, **options)
    if report is not None:
        describe_target(report, target, factory, sample_info)
        add_dtype_hint(report, batch, sample_info)
    return report


def _finish(report: TraceReport, target: Target, args: argparse.Namespace, printer: _Printer, out: TextIO) -> int:
    """Show the report, write the files asked for, and return the verdict's exit code."""
    show_and_write(report, target, args, printer, out)
    return _VERDICT_EXIT.get(report.verdict, EXIT_ERROR)


@dataclass
class _PathState:
    sys_path: list[str]
    pythonpath: str | None
    untrusted: list[str]


def _push_python_path(dirs: Sequence[str]) -> _PathState:
    """Put `dirs` first on `sys.path` (ranks inherit it) and on PYTHONPATH (processes they start),
    with the import guard on: the standard library, torch and distcheck never resolve to them."""
    importguard.install()
    state = _PathState(list(sys.path), os.environ.get("PYTHONPATH"), importguard.distrust(dirs))
    unique = list(dict.fromkeys(dirs))
    for d in reversed(unique):
        if d in sys.path:
            sys.path.remove(d)
        sys.path.insert(0, d)
    current = [p for p in (state.pythonpath or "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([*unique, *(p for p in current if p not in unique)])
    return state


def _pop_python_path(state: _PathState) -> None:
    sys.path[:] = state.sys_path
    importguard.restore(state.untrusted)
    if state.pythonpath is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = state.pythonpath


@contextlib.contextmanager
def _report_stream(out: TextIO) -> Iterator[TextIO]:
    """A stream on the real standard output for the report, with file descriptor 1 pointed at stderr
    meanwhile: whatever the model's packages print when this process imports them (and, under a
    launcher, while this process runs the model) must not end up inside the report."""
    try:
        out.flush()
        saved = os.dup(out.fileno())
    except (AttributeError, OSError, ValueError):  # not a real file (captured in tests): leave it be
        yield out
        return
    report = os.fdopen(os.dup(saved), "w", encoding=getattr(out, "encoding", None) or "utf-8", closefd=True)
    os.dup2(sys.stderr.fileno(), out.fileno())
    try:
        yield report
    finally:
        report.flush()
        out.flush()
        os.dup2(saved, out.fileno())
        os.close(saved)
        report.close()


def _cmd_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    args.save_spec_state = save_spec_state(args.save_spec)  # first: edits made during the run must survive
    job = _launcher(args.launcher)
    printer = _Printer(err, args.quiet or (job is not None and job.rank != 0))  # rank 0 speaks for the job
    target = resolve_target(args)
    options = {**target.options, **cli_options(args)}
    check_options(options)
    if job is None:  # a launched job's size is the launcher's, checked when it joins
        check_rank_count(options.get("world_size", 2))
    state = _push_python_path(target.python_path)
    try:
        with _report_stream(out) as stream:
            if job is None:
                report = _validate(target, options, printer)
            else:
                launched = _validate_launched(target, options, printer, job, args.world_size)
                if launched is None:
                    return EXIT_PASSED  # a follower: rank 0 reports the verdict
                report = launched
            return _finish(report, target, args, printer, stream)
    finally:
        _pop_python_path(state)


def build_parser() -> argparse.ArgumentParser:
    """The `distcheck` argument parser (`validate --help` shows this module's docstring)."""
    return cli_args.build_parser(description=__doc__)


def _setup_error(exc: BaseException) -> tuple[str, str] | None:
    """`(message, hint)` for the errors that mean "cannot validate as asked", else None."""
    from .runtime.errors import SetupError
    from .runtime.factory import FactoryError
    from .spec import SpecError

    if isinstance(exc, SpecError):
        if exc.path == "$" and exc.line is None:
            return f"cannot use the spec: {exc.message}", "fix the path given to --spec (or spec = in the config)"
        where = f"{exc.file}:{exc.line}" if exc.file and exc.line else (exc.file or "the spec")
        return f"invalid spec in {where}: {exc}", "fix the spec file, or drop --spec to start from the wrapper's spec"
    if isinstance(exc, FactoryError):
        return str(exc), (
            "point TARGET at a factory defined with `def` at module scope ('path/file.py:function' or "
            "'package.module:function'), not a lambda, closure or nested function"
        )
    if isinstance(exc, SetupError):
        return str(exc), "change the options (see distcheck validate --help)"
    if isinstance(exc, RuntimeError) and ("CUDA" in str(exc) or "cuda" in str(exc)):
        return str(exc), "use --device cpu (or auto) on a machine without a GPU"
    return None


class _Stopped(BaseException):
    """SIGTERM or SIGHUP in the CLI: raised like KeyboardInterrupt, so every `finally` on the way out
    runs (ranks and what they started killed, run directories removed) before the exit."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """While the command runs, the first SIGTERM or SIGHUP raises `_Stopped` in the main thread; one
    more while it cleans up exits at once (the warm pool then kills the ranks itself, see
    `runtime.lifeline`). The previous handlers are restored on the way out."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def handler(signum: int, frame: object) -> None:
        nonlocal stopping
        if stopping:
            os._exit(128 + signum)
        stopping = True
        raise _Stopped(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `distcheck` command line; returns the exit code (see the module docstring)."""
    out, err = sys.stdout, sys.stderr
    try:
        with _stop_signals():
            return _main(argv, out, err)
    except _Stopped as exc:
        name = _signal_name(exc.signum)
        with contextlib.suppress(OSError, ValueError):  # the terminal may be gone (SIGHUP)
            err.write(
                f"distcheck: stopped by {name}; the validation was cancelled, every process it started has ended "
                "and no report was written (run the command again for a verdict)\n"
            )
            err.flush()
        return 128 + exc.signum


def _main(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(list(argv) if argv is not None else None)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR)
        if args.command != "validate":
            parser.print_help(err)
            return EXIT_ERROR
        try:
            return _cmd_validate(args, out, err)
        except ConfigError as exc:
            if args.traceback:
                raise
            _error(err, exc.message, exc.hint)
            _error_report(args, err, "ConfigError", exc.message, exc.hint)
            return EXIT_ERROR
        except Exception as exc:
            if args.traceback:
                raise
            known = _setup_error(exc)
            if known is None:
                known = (
                    f"internal error: {type(exc).__name__}: {_one_line(exc)}{_where_raised(exc)}",
                    "rerun with --traceback for the full traceback and report it as a distcheck bug",
                )
            _error(err, *known)
            trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            _error_report(args, err, type(exc).__name__, *known, trace)
            return EXIT_ERROR
    except KeyboardInterrupt:
        err.write("distcheck: interrupted; the validation was stopped\n")
        err.flush()
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
