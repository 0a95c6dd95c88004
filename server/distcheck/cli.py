"""`distcheck validate TARGET`: validate a model from the terminal or CI.

TARGET is a factory reference (`path/file.py:factory` or `package.module:factory`), a `.py` file
defining `model_factory`, or the name of a target in `[tool.distcheck]` of the nearest
`pyproject.toml` (searched upwards from the current directory, or given with `--config`). Progress goes
to stderr one plain line per event; the report goes to stdout. The exit codes are listed below
(`distcheck.cli_exit`).

The spec it starts from is the first of: --spec PATH, the target's `spec = ...` in [tool.distcheck],
`<model>.distspec.json` beside the model file (when it exists), the wrapper's own distribution_spec
(`distcheck.jobs.spec_source`); the report's `spec:` line names the file and the rule. A pass that needed
an auto-fix is not a pass: it exits with its own code (below) and prints the fix and the --save-spec
command that writes it where the next run reads it; --accept-fixed accepts it as a pass.

A structure-file sample (`--sample traj.extxyz`) gives one system per frame; `--frames 0:10` (an index
or a start:stop:step slice) picks some, `--dtype float32` reads them for a float32 model.

Targets and their configuration are read by `distcheck.jobs.pyproject` (see its docstring for the
format). The directory of the pyproject is put on `sys.path` too; with a factory reference on the command
line the current directory is (as `python -m` does). The run itself is the job layer's
(`distcheck.jobs.run`), shared with the editor's runner; its hints name this command's flags.

Flags win over the target's entry, which wins over the table's defaults. Every value is checked before
anything starts (NaN, inf or negative tolerances, a timeout or deadline that is not a finite number > 0,
fewer than 2 ranks, more ranks than atoms of the sample's smallest system: exit code 2).

`distcheck spec import FILE [-o OUT]` converts an nvalchemi-toolkit version-2 `MLIPSpec` file into a
distcheck spec (`distcheck.spec.cli.import_command`): exit 0 every field converted, 1 written with some
fields that have no equivalent (listed on stderr), 2 nothing written.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import textwrap
import traceback
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from . import cli_args, cli_exit
from .cli_args import cli_options
from .cli_output import Printer, one_line, print_error
from .cli_report import error_report, fixed_pass_advice, save_spec_state, show_and_write
from .cli_target import prior_spec, resolve_target
from .jobs.bytecode import bytecode_notice, import_torch
from .jobs.early_start import started_early
from .jobs.paths import pop_python_path, push_python_path
from .jobs.pyproject import find_config, load_targets
from .jobs.run import describe_target, loaded_factory, run_job
from .jobs.sample import add_dtype_hint, load_sample, where_raised
from .jobs.setup_errors import setup_error
from .jobs.target import Target
from .option_check import ConfigError, check_options
from .options import CLI, OPTIONS
from .rank_limits import check_rank_count
from .report.junit import junit_xml

if TYPE_CHECKING:
    from .report import TraceReport
    from .runtime.launcher_env import LauncherEnv

__all__ = [
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_FIXED",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERRUPTED",
    "EXIT_PASSED",
    "ONE_HOST_TORCHRUN",
    "ConfigError",
    "Target",
    "build_parser",
    "find_config",
    "junit_xml",
    "load_targets",
    "main",
]

EXIT_PASSED = cli_exit.code_of("passed")
EXIT_FAILED = cli_exit.code_of("failed")
EXIT_ERROR = cli_exit.code_of("error")
EXIT_INCONCLUSIVE = cli_exit.code_of("inconclusive")
EXIT_FIXED = cli_exit.code_of("passed_after_fix")
EXIT_INTERRUPTED = cli_exit.code_of("interrupted")

ONE_HOST_TORCHRUN = (
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nproc-per-node=2 --rdzv-backend=c10d "
    '--rdzv-conf=store_type=file --rdzv-endpoint="$(mktemp -d)/rdzv" --local-addr=127.0.0.1 '
    "-m distcheck validate TARGET"
)
"""torchrun on one host with every socket of the job listening on loopback only (docs/gpus.md, "One
host", says what each part is for)."""

# --------------------------------------------------------------------------------------------------
# running


def _validate(target: Target, options: dict[str, Any], printer: Printer) -> TraceReport:
    """The job of a local run: `target` with the merged, checked `options`, hints in the CLI's words."""
    target.options = options
    spec, source = prior_spec(target, printer)
    return run_job(target, spec=spec, words=CLI, notice=printer.notice, progress=printer.progress, source=source)


def _launcher(choice: str) -> LauncherEnv | None:
    """Where this process sits in a launched job when the validation runs across it (`--launcher
    torchrun`, or `auto` with torchrun's variables set), else None (distcheck starts its own ranks)."""
    from .runtime.errors import SetupError
    from .runtime.launcher_env import launcher_env

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
            f"start it with torchrun (docs/gpus.md); on one host, listening on loopback only: {ONE_HOST_TORCHRUN}",
        )
    return env


def _validate_launched(
    target: Target, options: dict[str, Any], printer: Printer, job: LauncherEnv, cli_world_size: int | None
) -> TraceReport | None:
    """Every rank of a launched job runs this; rank 0 gets the report, the others None."""
    from .validate import validate_launched

    factory = loaded_factory(target)
    batch: Any = None
    sample_info: dict[str, Any] = {}
    spec: Any = None
    source = None
    if job.rank == 0:  # the sample and the prior spec travel from rank 0 with every attempt
        batch, sample_info = load_sample(target, factory, CLI)
        spec, source = prior_spec(target, printer)
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
        describe_target(report, target, factory, sample_info, source)
        add_dtype_hint(report, batch, sample_info, CLI)
    return report


def _finish(report: TraceReport, target: Target, args: argparse.Namespace, printer: Printer, out: TextIO) -> int:
    """Show the report, write the files asked for, and return the exit code of its state (`cli_exit`): a
    pass after auto-fix also prints the fix and the command that saves it, unless --accept-fixed."""
    show_and_write(report, target, args, printer, out)
    code = cli_exit.exit_code(report.state, accept_fixed=args.accept_fixed)
    if report.state == "passed_after_fix":
        for line in fixed_pass_advice(report, args):
            printer.write(line, always=True)
    return code


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
    printer = Printer(err, args.quiet or (job is not None and job.rank != 0))  # rank 0 speaks for the job
    target = resolve_target(args)
    options = {**target.options, **cli_options(args)}
    check_options(options)
    if job is None:  # a launched job's size is the launcher's, checked when it joins
        check_rank_count(options.get("world_size", 2), CLI)
    # a local run's pool and spares start now, while the target and the sample load
    early = started_early(options, target.factory, CLI) if job is None else contextlib.nullcontext()
    state = push_python_path(target.python_path)
    try:
        with early, _report_stream(out) as stream:
            import_torch()  # while the pool starts; before the target, so its bytecode can be kept
            if job is None:
                report = _validate(target, options, printer)
            else:
                launched = _validate_launched(target, options, printer, job, args.world_size)
                if launched is None:
                    return EXIT_PASSED  # a follower: rank 0 reports the verdict
                report = launched
            if job is None and (slow := bytecode_notice()) is not None:
                printer.notice(slow)
            return _finish(report, target, args, printer, stream)
    finally:
        pop_python_path(state)


def _cmd_spec(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`distcheck spec import FILE [-o OUT]` (the parser requires the subcommand)."""
    from .spec.cli import import_command

    return import_command(args.file, args.output, out, err)


def _options_paragraph() -> str:
    """The validator options as `--help` lists them: name (the pyproject key) and flag, from the record."""
    names = ", ".join(f"{o.name} ({o.flag}{' / ' + o.cli_off if o.cli_off else ''})" for o in OPTIONS)
    return "\n" + textwrap.fill(f"Validator options (pyproject key and flag): {names}.", width=100) + "\n"


def _exit_paragraph() -> str:
    """The exit codes as `--help` lists them, from `cli_exit.EXIT_CODES`."""
    return "\n" + cli_exit.help_paragraph()


def build_parser() -> argparse.ArgumentParser:
    """The `distcheck` argument parser (`validate --help` shows this module's docstring and the options)."""
    return cli_args.build_parser(description=(__doc__ or "") + _exit_paragraph() + _options_paragraph())


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
    `processes.lifeline`). The previous handlers are restored on the way out."""
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
            words = list(argv) if argv is not None else sys.argv[1:]
            args = parser.parse_args(words)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR)
        args.argv = words  # the command line, for the command that saves a fix
        if args.command == "spec":
            return _cmd_spec(args, out, err)
        if args.command != "validate":
            parser.print_help(err)
            return EXIT_ERROR
        try:
            return _cmd_validate(args, out, err)
        except ConfigError as exc:
            if args.traceback:
                raise
            print_error(err, exc.message, exc.hint)
            error_report(args, err, "ConfigError", exc.message, exc.hint)
            return EXIT_ERROR
        except Exception as exc:
            if args.traceback:
                raise
            known = setup_error(exc, CLI)
            if known is None:
                known = (
                    f"internal error: {type(exc).__name__}: {one_line(exc)}{where_raised(exc)}",
                    "rerun with --traceback for the full traceback and report it as a distcheck bug",
                )
            print_error(err, *known)
            trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            error_report(args, err, type(exc).__name__, *known, trace)
            return EXIT_ERROR
    except KeyboardInterrupt:
        err.write("distcheck: interrupted; the validation was stopped\n")
        err.flush()
        return EXIT_INTERRUPTED


def run() -> NoReturn:
    """The `distcheck` command (console script and `python -m distcheck`): `main()` on this process's
    arguments; then every process it started has ended (`processes.teardown`), so a pipe reading the
    output closes as the command exits; then exit with main's code."""
    from .processes import teardown

    teardown.adopt_orphans()
    code = main()
    teardown.end_helpers()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
