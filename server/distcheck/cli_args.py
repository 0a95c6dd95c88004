"""The `distcheck` command line's arguments: the parser, did-you-mean for mistyped options, and the
flags → validator options and sample keys. The validator flags are derived from `distcheck.options.OPTIONS`
(spelling, metavar, help, choices): a value flag per option, a switch for a bool (the opposite of its
default), `--watch` / `--no-watch` for the watched packages, and `--atol` / `--rtol` taking a number or
`OUTPUT=number` (repeatable) for a tolerance per output or output kind."""

from __future__ import annotations

import argparse
import difflib
from typing import Any, NoReturn

from . import __version__
from .cli_exit import help_line
from .options import OPTIONS, Option
from .sample_options import DTYPES, SAMPLE_KEYS

__all__ = ["SWITCHES", "VALUE_FLAGS", "build_parser", "cli_options", "parse_tolerance", "sample_keys", "suggest_option"]


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


VALUE_FLAGS: dict[str, str] = {_dest(o.flag): o.name for o in OPTIONS if o.kind not in ("bool", "list[str]")}
"""argparse destination → validator option for flags that take a value (from `distcheck.options.OPTIONS`)."""
SWITCHES: dict[str, tuple[str, bool]] = {
    _dest(o.flag): (o.name, bool(o.flag_sets)) for o in OPTIONS if o.kind == "bool"
}
"""argparse destination of a store_true flag → (validator option, the value it sets)."""
_LISTS: dict[str, Option] = {_dest(o.flag): o for o in OPTIONS if o.kind == "list[str]"}


def parse_tolerance(text: str) -> tuple[str | None, float]:
    """One `--atol` / `--rtol` value: `X` (every output) or `OUTPUT=X` (one output name or kind), as
    `(output or None, X)`; `argparse.ArgumentTypeError` saying how to write it otherwise."""
    name, sep, number = text.rpartition("=")
    try:
        value = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid float value: {text!r} (give a number, e.g. 1e-5, or OUTPUT=number, e.g. forces=1e-4)"
        ) from None
    if sep and not name.strip():
        raise argparse.ArgumentTypeError(f"invalid tolerance {text!r}: name the output before '=' (forces=1e-4)")
    return (name.strip() if sep else None), value


def _tolerance(values: list[tuple[str | None, float]]) -> float | dict[str, float]:
    """The tolerance several `--atol` values give: one number, or a table whose `default` is the bare number."""
    if len(values) == 1 and values[0][0] is None:
        return values[0][1]
    return {("default" if name is None else name): value for name, value in values}


def cli_options(args: argparse.Namespace) -> dict[str, Any]:
    """The validator options given as flags (unchecked: `check_options` runs on the merged options)."""
    out: dict[str, Any] = {}
    for dest, option in VALUE_FLAGS.items():
        value = getattr(args, dest)
        if value is not None:
            out[option] = _tolerance(value) if isinstance(value, list) else value
    for dest, (option, value) in SWITCHES.items():
        if getattr(args, dest):
            out[option] = value
    for dest, o in _LISTS.items():
        if getattr(args, _dest(o.cli_off)):
            out[o.name] = []
        elif getattr(args, dest):
            out[o.name] = [p.strip() for item in getattr(args, dest) for p in item.split(",") if p.strip()]
    return out


def sample_keys(args: argparse.Namespace) -> dict[str, Any]:
    """The sample-reading keys given as flags (`--frames`, `--dtype`), unchecked."""
    return {key: getattr(args, key) for key in SAMPLE_KEYS if getattr(args, key, None) is not None}


def _help(o: Option) -> str:
    """The flag's help with the option's default (one without a default says what none means itself)."""
    if o.default is None or o.kind == "bool":
        return o.cli_help
    if isinstance(o.default, tuple):
        default = ", ".join(o.default)
    else:
        default = f"{o.default:g}" if isinstance(o.default, float) else str(o.default)
    return f"{o.cli_help} (default {default})"


def _add_option(group: argparse._ArgumentGroup, o: Option) -> None:
    """The flag(s) of one validator option, as the record spells them."""
    if o.kind == "bool":
        group.add_argument(o.flag, action="store_true", help=o.cli_help)
    elif o.kind == "list[str]":
        group.add_argument(o.flag, action="append", metavar=o.metavar, help=o.cli_help)
        group.add_argument(o.cli_off, action="store_true", help=o.cli_off_help)
    elif o.kind == "tolerance":
        group.add_argument(o.flag, type=parse_tolerance, action="append", metavar=o.metavar, help=_help(o))
    else:
        kinds: dict[str, Any] = {"int": int, "float": float, "str": str}
        extra: dict[str, Any] = {"choices": o.choices} if o.choices else {"metavar": o.metavar}
        group.add_argument(o.flag, type=kinds[o.kind], help=_help(o), **extra)


# --------------------------------------------------------------------------------------------------
# the parser

_UNRECOGNIZED = "unrecognized arguments: "


def _long_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every `--option` of `parser` and of its subcommands."""
    found: list[str] = []
    for action in parser._actions:
        found += [s for s in action.option_strings if s.startswith("--")]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _long_options(sub)
    return list(dict.fromkeys(found))


def suggest_option(word: str, options: list[str]) -> str | None:
    """The option `word` was most likely meant to be (`--world_size` → `--world-size`, `--atoll` →
    `--atol`, `--sampel` → `--sample`), or None when none is close."""
    name = word.split("=", 1)[0]
    if not name.startswith("-"):
        return None
    spelled = "--" + name.lstrip("-").replace("_", "-").lower()
    if spelled in options:
        return spelled
    close = difflib.get_close_matches(spelled, options, n=1, cutoff=0.7)
    return close[0] if close else None


class _Parser(argparse.ArgumentParser):
    """argparse with "did you mean --x?" after an unrecognized option; argparse's own exit (code 2) stays."""

    def error(self, message: str) -> NoReturn:
        if message.startswith(_UNRECOGNIZED):
            options = _long_options(self)
            words = message[len(_UNRECOGNIZED) :].split()
            meant = [(w, suggest_option(w, options)) for w in words if w.startswith("-")]
            hints = [f"{w.split('=', 1)[0]}: did you mean {s}?" for w, s in meant if s is not None]
            if hints:
                message += "\n  " + "\n  ".join(hints)
            elif meant:
                message += f"\n  {self.prog} validate --help lists every option"
        super().error(message)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The `distcheck` argument parser; `description` is the `validate` subcommand's help text."""
    parser = _Parser(
        prog="distcheck",
        description="Check that an interatomic potential gives the same answers domain-decomposed over ranks "
        "as in one process.",
    )
    parser.add_argument("--version", action="version", version=f"distcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    v = sub.add_parser(
        "validate",
        help=help_line(),
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        help="'path/file.py:factory', 'package.module:factory', a .py file defining model_factory, or a target "
        "name from [tool.distcheck] (optional when the config defines one target)",
    )
    v.add_argument(
        "--sample",
        metavar="SAMPLE",
        help="a structure file ASE can read (.xyz, .extxyz, .cif, ...) or 'path/file.py:callable_or_attr' / "
        "'package.module:attr' (default: the factory module's sample_batch)",
    )
    v.add_argument(
        "--frames",
        metavar="SEL",
        help="frames of a --sample trajectory file to validate, each one system of one run: an index (2, -1) or a "
        "slice start:stop:step (0:10, ::2); default every frame",
    )
    v.add_argument(
        "--dtype",
        choices=DTYPES,
        help="precision the sample is read at (a structure file) or cast to (a Python sample): float64 (the "
        "default for files) or float32, for a model that computes in float32",
    )
    v.add_argument("--config", metavar="PATH", help="pyproject.toml to read targets from (default: nearest upwards)")
    g = v.add_argument_group("validator options")
    for option in OPTIONS:
        _add_option(g, option)
    g.add_argument(
        "--spec",
        metavar="PATH",
        help="spec file to start from (default: the target's spec in [tool.distcheck], else <model>.distspec.json "
        "beside the model file when it exists, else the wrapper's distribution_spec)",
    )
    g.add_argument(
        "--launcher",
        choices=("auto", "local", "torchrun"),
        default="auto",
        help="local: distcheck starts the ranks on this machine; torchrun: this process is one rank of a job "
        "torchrun started (one node or many; see docs/gpus.md); auto (default): torchrun when its RANK, "
        "WORLD_SIZE, MASTER_ADDR and MASTER_PORT are set",
    )
    o = v.add_argument_group("output")
    o.add_argument("--json", metavar="FILE", help="write the report as JSON")
    o.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per output)")
    o.add_argument("--save-spec", metavar="FILE", help="save the validated spec when the validation passed")
    o.add_argument(
        "--accept-fixed",
        action="store_true",
        help="a validation that passed only after auto-fix exits as a pass instead of with its own code",
    )
    o.add_argument("--quiet", "-q", action="store_true", help="no progress; print only the verdict line")
    o.add_argument("--no-color", action="store_true", help="no ANSI colors (also: NO_COLOR set, or not a tty)")
    o.add_argument("--traceback", action="store_true", help=argparse.SUPPRESS)
    _add_spec_commands(sub)
    return parser


def _add_spec_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """`distcheck spec import FILE [-o OUT]` (the work is `distcheck.spec.cli.import_command`'s)."""
    spec = sub.add_parser("spec", help="spec tools: import a spec file of nvalchemi-toolkit")
    tools = spec.add_subparsers(dest="spec_command", metavar="SPEC_COMMAND", parser_class=_Parser, required=True)
    i = tools.add_parser(
        "import",
        help="convert an nvalchemi-toolkit MLIPSpec JSON file (version 2) into a distcheck spec "
        "(exit 0 exact, 1 some fields without equivalent, 2 error)",
        description="Convert an nvalchemi-toolkit version-2 MLIPSpec JSON file (what its MLIPSpec.save writes) into "
        "a distcheck spec. Each field without an exact distcheck equivalent is listed on stderr with its line and "
        "what to do. Exit codes: 0 every field converted, 1 the spec was written but some fields have no "
        "equivalent, 2 the file could not be imported or OUT not written (nothing written).",
    )
    i.add_argument("file", metavar="FILE", help="the toolkit's spec JSON file")
    i.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="write the distcheck spec to OUT (a new file or a distcheck spec it updates) instead of stdout",
    )
