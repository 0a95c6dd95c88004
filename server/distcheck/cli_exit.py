"""The exit codes of `distcheck validate`, stated once: `EXIT_CODES`. The CLI's constants, its `--help`,
the report state → code mapping and the tables in README.md and docs/protocol.md are derived from it
(`tests/server/test_cli_exit.py` keeps the docs equal to `markdown_table()`).

Like a linter's: a pass that needed a fix is not a pass. The spec as given failing and only an auto-fixed
one passing (report state "passed_after_fix") exits `fixed` unless `--accept-fixed` is given, and the CLI
prints the fix and the `--save-spec` command that saves it where the next run reads it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

__all__ = ["EXIT_CODES", "ExitCode", "code_of", "exit_code", "help_line", "help_paragraph", "markdown_table"]


@dataclass(frozen=True)
class ExitCode:
    """One exit code: `code`, its `name` (the report state it stands for, where there is one) and what it
    means, as `--help` and the docs say it."""

    code: int
    name: str
    meaning: str


EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(0, "passed", "passed: the spec it started from passed (with --accept-fixed also a pass after auto-fix)"),
    ExitCode(1, "failed", "failed: an output is out of tolerance with the best spec tried"),
    ExitCode(2, "error", 'usage or setup error, or a report whose verdict is "error"'),
    ExitCode(3, "inconclusive", "inconclusive: the partition is degenerate, so a pass proves nothing"),
    ExitCode(
        4,
        "passed_after_fix",
        "passed only after auto-fix: the spec it started from still fails; the fix and the --save-spec command "
        "that saves it are printed (--accept-fixed exits 0 instead)",
    ),
    ExitCode(130, "interrupted", "interrupted (Ctrl-C); 128 + N when stopped by signal N (SIGTERM, SIGHUP)"),
)
"""Every exit code of `distcheck validate`."""

_BY_NAME = {e.name: e for e in EXIT_CODES}


def code_of(name: str) -> int:
    """The exit code called `name` (`KeyError` for a name `EXIT_CODES` does not hold)."""
    return _BY_NAME[name].code


def exit_code(state: str, *, accept_fixed: bool = False) -> int:
    """The exit code of a report in `state` (`TraceReport.state`): its own code, a pass after auto-fix
    the `passed` code when `accept_fixed`; a state without a code (a newer report) is an error."""
    if state == "passed_after_fix" and accept_fixed:
        return code_of("passed")
    found = _BY_NAME.get(state)
    return found.code if found is not None and state != "interrupted" else code_of("error")


def _short(e: ExitCode) -> str:
    return e.meaning.split(":")[0].split(",")[0].split(" (")[0]


def help_line() -> str:
    """`exit 0 passed, 1 failed, ...`: the `validate` subcommand's one-line help."""
    shown = [e for e in EXIT_CODES if e.name != "interrupted"]
    return "validate a model (exit " + ", ".join(f"{e.code} {_short(e)}" for e in shown) + ")"


def help_paragraph() -> str:
    """`Exit codes:` and one indented line per code: the paragraph `validate --help` shows."""
    lines = [
        textwrap.fill(
            e.meaning, width=100, initial_indent=f"  {e.code:<4}", subsequent_indent=" " * 6, break_on_hyphens=False
        )
        for e in EXIT_CODES
    ]
    return "Exit codes:\n" + "\n".join(lines) + "\n"


def markdown_table() -> str:
    """The exit codes as the Markdown table README.md and docs/protocol.md hold (checked by a test)."""
    rows = ["| exit code | meaning |", "| --- | --- |"]
    rows += [f"| {e.code} | {e.meaning} |" for e in EXIT_CODES]
    return "\n".join(rows) + "\n"
