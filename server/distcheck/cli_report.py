"""What a `distcheck validate` run leaves behind: the report on stdout, `--json`, `--junit`, `--save-spec`,
and the one-attempt error report CI still finds when the validation could not start."""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from .cli_output import Printer, print_error, rank_tag
from .jobs.target import Target, is_path_reference
from .option_check import ConfigError
from .report.junit import fix_changes, write_junit

if TYPE_CHECKING:
    from .report import TraceReport

__all__ = [
    "error_report",
    "fixed_pass_advice",
    "save_command",
    "save_spec_state",
    "show_and_write",
    "suite_name",
    "write_text",
]


def suite_name(reference: str) -> str:
    """`stem.attr` for a factory reference (`path/model.py:make` → `model.make`), as JUnit names the suite."""
    where, _, attr = reference.rpartition(":")
    stem = os.path.splitext(os.path.basename(where))[0] if is_path_reference(where) else where
    return f"{stem}.{attr}"


def write_text(path: str, text: str) -> None:
    """Write `text` to `path` (UTF-8), creating its directory."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def show_and_write(
    report: TraceReport, target: Target, args: argparse.Namespace, printer: Printer, out: TextIO
) -> None:
    """Print the report on `out` (the verdict line only with --quiet) and write the files the command
    line asked for; `ConfigError` when one cannot be written."""
    color = not args.no_color and "NO_COLOR" not in os.environ and bool(getattr(out, "isatty", lambda: False)())
    text = report.render_text(color=color)
    out.write(text.split("\n")[0] + "\n" if args.quiet else text)
    out.flush()
    args.report_written = True  # from here on a failure is about these files: no error report over them
    try:
        if args.json:
            write_text(args.json, report.to_json(indent=True))
            printer.notice(f"wrote the report to {args.json}")
        if args.junit:
            command = save_command(args, _save_path(report)) if report.state == "passed_after_fix" else None
            name = target.name or suite_name(target.factory)
            write_junit(report, name, args.junit, save_command=command, accept_fixed=args.accept_fixed)
            printer.notice(f"wrote JUnit XML to {args.junit}")
        if args.save_spec:
            if report.verdict == "passed":
                _save_spec(report, args, printer)
            else:
                printer.notice(f"not saving the spec to {args.save_spec}: the validation {report.verdict}")
    except OSError as exc:
        raise ConfigError(f"cannot write {exc.filename}: {exc.strerror or exc}", "check the output path") from exc


def _shown(path: str) -> str:
    """`path` relative to the current directory when it lies below it, else as it is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _save_path(report: TraceReport) -> str | None:
    """Where a fix of `report` is saved: the target's spec file, the one the next run reads."""
    return report.target.spec_path if report.target is not None else None


def save_command(args: argparse.Namespace, path: str | None) -> str:
    """This command line again with `--save-spec PATH` (any --save-spec / --accept-fixed of its own left
    out): the command that validates again and saves the fixed spec to `path` (`FILE` when None)."""
    words: list[str] = []
    given: Sequence[str] = getattr(args, "argv", None) or ["validate"]
    skip = False
    for word in given:
        if skip:
            skip = False
        elif word == "--save-spec":
            skip = True
        elif not word.startswith("--save-spec=") and word != "--accept-fixed":
            words.append(word)
    return "distcheck " + shlex.join([*words, "--save-spec", _shown(path) if path else "FILE"])


def fixed_pass_advice(report: TraceReport, args: argparse.Namespace) -> list[str]:
    """What the CLI prints (even with --quiet) after a pass that needed an auto-fix: the failure's one
    line (`report.fix_failure`, the JUnit and Testing-view text), the fix as spec changes, the command that
    saves it where the next run reads it, and how to accept such passes instead."""
    lines = [f"distcheck: {report.fix_failure or 'passed only after auto-fix'}"]
    changes = fix_changes(report)
    if changes:
        lines.append("distcheck: the fix:")
        lines += [f"  {c}" for c in changes]
    path = _save_path(report)
    saved = args.save_spec and report.verdict == "passed"
    if saved and path and os.path.abspath(args.save_spec) == os.path.abspath(path):
        lines.append(f"distcheck: the fixed spec was saved to {_shown(path)}: the next run starts from it")
    elif path:
        lines.append("distcheck: save it where the next run reads it:")
        lines.append(f"  {save_command(args, path)}")
    else:
        lines.append(
            "distcheck: save it with --save-spec FILE and name the file with --spec FILE (or spec = ... in "
            "[tool.distcheck]): the model's file was not found to put it beside"
        )
    if args.accept_fixed:
        lines.append("distcheck: accepted as a pass (--accept-fixed)")
    else:
        lines.append("distcheck: or accept passes after auto-fix with --accept-fixed")
    return lines


def save_spec_state(path: str | None) -> Any:
    """What the --save-spec file holds before the run (None without --save-spec), so that saving at the
    end can tell whether someone changed it meanwhile."""
    if not path:
        return None
    from .spec.file import FileState

    return FileState.of(path)


def _save_spec(report: TraceReport, args: argparse.Namespace, printer: Printer) -> None:
    """Save the validated spec to --save-spec, minimally edited; if the file changed during the run it is
    left alone, the spec goes to a new file beside it, and the warning (shown even with --quiet) says where."""
    from .spec.file import FileState, save_guarded

    expected = getattr(args, "save_spec_state", None) or FileState.of(args.save_spec)
    outcome = save_guarded(report.spec, args.save_spec, expected)
    if outcome.conflict is None:
        printer.notice(outcome.message)
    else:
        printer.write(f"distcheck: warning: {outcome.message}", always=True)


def error_report(
    args: argparse.Namespace, err: TextIO, error_type: str, message: str, hint: str, trace: str = ""
) -> None:
    """Write --json / --junit for a validation that ended in an error before it had a report (a setup
    error, a bug): CI always finds the files, with verdict "error" and the message shown on stderr. Not
    when the report's own files were being written (they are what failed), nor on a follower rank."""
    follower = bool(rank_tag()) and os.environ.get("RANK") != "0"
    if not (args.json or args.junit) or getattr(args, "report_written", False) or follower:
        return
    from .report import WorkerError
    from .validate.crash import setup_report  # the one way to build a setup error's report

    error = WorkerError(
        type=error_type, message=message, rank=None, phase="setup", frames=[], hint=hint, traceback=trace
    )
    report = setup_report(error, args.target)
    target = str(args.target or "distcheck")
    try:
        if args.json:
            write_text(args.json, report.to_json(indent=True))
        if args.junit:
            write_junit(report, suite_name(target) if ":" in target else target, args.junit)
    except OSError as exc:
        print_error(
            err, f"cannot write the error report {exc.filename}: {exc.strerror or exc}", "check the output path"
        )
