"""The `distcheck` command line's arguments: the parser, did-you-mean for mistyped options, and the
flags → validator options (`targets.OPTION_TYPES`) and sample keys (`sample_options.SAMPLE_KEYS`)."""

from __future__ import annotations

import argparse
import difflib
from typing import Any, NoReturn

from . import __version__
from .sample_options import DTYPES, SAMPLE_KEYS
from .targets import RANKS_PER_CORE

__all__ = ["SWITCHES", "VALUE_FLAGS", "build_parser", "cli_options", "sample_keys", "suggest_option"]

VALUE_FLAGS = {
    "world_size": "world_size",
    "device": "device",
    "atol": "atol",
    "rtol": "rtol",
    "max_fix_attempts": "max_fix_attempts",
    "backend": "backend",
    "helper_sample_every": "helper_sample_every",
    "timeout": "timeout_sec",
    "deadline": "deadline_sec",
}
"""argparse destination → validator option (`distcheck.targets.OPTION_TYPES`) for flags that take a value."""
SWITCHES = {
    "no_auto_fix": ("auto_fix", False),
    "no_layer_diagnostic": ("layer_diagnostic", False),
    "allow_oversubscribe": ("allow_oversubscribe", True),
}
"""argparse destination of a store_true flag → (validator option, the value it sets)."""


def cli_options(args: argparse.Namespace) -> dict[str, Any]:
    """The validator options given as flags (unchecked: `check_options` runs on the merged options)."""
    out: dict[str, Any] = {}
    for dest, option in VALUE_FLAGS.items():
        value = getattr(args, dest)
        if value is not None:
            out[option] = value
    for dest, (option, value) in SWITCHES.items():
        if getattr(args, dest):
            out[option] = value
    if args.no_watch:
        out["watched_helper_packages"] = []
    elif args.watch:
        out["watched_helper_packages"] = [p.strip() for item in args.watch for p in item.split(",") if p.strip()]
    return out


def sample_keys(args: argparse.Namespace) -> dict[str, Any]:
    """The sample-reading keys given as flags (`--frames`, `--dtype`), unchecked."""
    return {key: getattr(args, key) for key in SAMPLE_KEYS if getattr(args, key, None) is not None}


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
        help="validate a model (exit 0 passed, 1 failed, 2 error, 3 inconclusive)",
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
    g.add_argument("--world-size", type=int, metavar="N", help="number of ranks (default 2)")
    g.add_argument(
        "--device",
        metavar="DEV",
        help="auto (cuda:0 when torch sees a GPU, else the CPU), cpu, cuda (one rank per GPU), cuda:N (every rank "
        "on GPU N) or one device per rank: cuda:0,cuda:1",
    )
    g.add_argument("--atol", type=float, metavar="X", help="absolute tolerance (default 1e-5)")
    g.add_argument("--rtol", type=float, metavar="X", help="relative tolerance (default 1e-4)")
    g.add_argument("--no-auto-fix", action="store_true", help="try the initial spec only")
    g.add_argument("--max-fix-attempts", type=int, metavar="N", help="auto-fix attempts after the first (default 8)")
    g.add_argument("--backend", choices=("auto", "gloo", "nccl"), help="collective backend (default auto)")
    g.add_argument(
        "--timeout",
        type=float,
        metavar="SEC",
        help="seconds one run (the single-process reference, or one attempt's ranks) may take before its "
        "processes are killed (default 120)",
    )
    g.add_argument(
        "--deadline",
        type=float,
        metavar="SEC",
        help="seconds the whole validation may take: past it no new attempt starts, each run gets at most what is "
        "left, and the report stands on the best attempt so far (default: no deadline)",
    )
    g.add_argument(
        "--watch",
        action="append",
        metavar="PKG",
        help="package whose helpers are traced (repeatable or comma-separated; replaces the default aimnet.nbops)",
    )
    g.add_argument("--no-watch", action="store_true", help="trace no third-party helpers")
    g.add_argument("--helper-sample-every", type=int, metavar="N", help="record every Nth helper call (default 8)")
    g.add_argument("--no-layer-diagnostic", action="store_true", help="skip the per-module divergence search")
    g.add_argument(
        "--allow-oversubscribe",
        action="store_true",
        help=f"on the CPU, start more than {RANKS_PER_CORE} ranks per core this process may use (refused otherwise)",
    )
    g.add_argument("--spec", metavar="PATH", help="prior spec file to start from")
    g.add_argument(
        "--launcher",
        choices=("auto", "local", "torchrun"),
        default="auto",
        help="local: distcheck starts the ranks on this machine; torchrun: this process is one rank of a job "
        "torchrun started (one node or many; see the README); auto (default): torchrun when its RANK, "
        "WORLD_SIZE, MASTER_ADDR and MASTER_PORT are set",
    )
    o = v.add_argument_group("output")
    o.add_argument("--json", metavar="FILE", help="write the report as JSON")
    o.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per output)")
    o.add_argument("--save-spec", metavar="FILE", help="save the validated spec when the validation passed")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress; print only the verdict line")
    o.add_argument("--no-color", action="store_true", help="no ANSI colors (also: NO_COLOR set, or not a tty)")
    o.add_argument("--traceback", action="store_true", help=argparse.SUPPRESS)
    return parser
