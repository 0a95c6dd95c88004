"""The validator options, declared once: every entry point's spelling of them is derived from `OPTIONS`.

Each `Option` states its name (the library keyword, the `[tool.distcheck]` key and the report's `meta`
key), its type, its default, its one bound, its help text and how each caller spells it: the CLI flag
(`flag`, `cli_off`), the editor setting (`setting`: `distcheck.<camelCase>`) and the other table keys
(`aliases`). From this record come `OPTION_TYPES` and `check_option` (`option_check`), argparse's
validator flags (`cli_args`), the target-table keys (`jobs.pyproject`), the editor's `SETTING_KEYS`
(`lsp.config`), the library entry points' options (`option_values`, `validate.api`) and `package.json`'s
`contributes.configuration` (kept equal to it by `tests/server/test_options_record.py`).

`Vocabulary` phrases "set option X to V" in one caller's words (CLI flags, editor settings, pyproject
keys, library keywords), so that a hint produced below the caller names what that caller can change.

No torch here (the editor daemon imports it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLI",
    "EDITOR",
    "LIBRARY",
    "OPTIONS",
    "OPTION_ALIASES",
    "OPTION_TYPES",
    "OUTPUT_KINDS",
    "PYPROJECT",
    "TARGET_KEYS",
    "Option",
    "TargetKey",
    "Vocabulary",
    "camel",
    "option",
    "option_values",
]

OUTPUT_KINDS = ("per_node", "per_graph", "global")
"""The output kinds a per-output tolerance may name instead of an output (the spec's `output_kinds` values)."""


def camel(name: str) -> str:
    """`snake_case` → `camelCase` (`timeout_sec` → `timeoutSec`): how an option is spelled as a setting."""
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


@dataclass(frozen=True)
class Option:
    """One validator option: its facts, each stated once.

    `kind` is one of `int`, `float`, `bool`, `str`, `list[str]` and `tolerance` (a number, or a table of
    numbers per output name, output kind and `"default"`). The bound: `minimum` (exclusive when
    `exclusive`), `finite`, `choices` or `pattern` (a regular expression the whole value matches), with
    `words` saying the valid values in words and `example` a valid one (`choice_help`: one line per
    choice). `nullable`: None means "not set" (the `default`; a tuple for a list). `help` is the
    sentence the editor's settings show.
    `flag` is the CLI spelling, by default `--` and the name with dashes (for a bool, the switch that
    sets the opposite of `default`: `--no-auto-fix`, `--allow-oversubscribe`); `cli_help` its help, to
    which `--help` adds the default; `cli_off` is the switch that empties a list, with `cli_off_help`.
    `aliases` are other keys a table or the settings accept. `library`: whether every library entry
    point takes it as a keyword (`device` and `backend` are not `validate_on_cpu`'s).
    """

    name: str
    kind: str
    default: Any
    help: str
    words: str = ""
    example: str = ""
    minimum: float | None = None
    exclusive: bool = False
    finite: bool = False
    choices: tuple[str, ...] = ()
    choice_help: tuple[str, ...] = ()
    pattern: str | None = None
    nullable: bool = False
    flag: str = ""
    metavar: str = ""
    cli_off: str = ""
    cli_off_help: str = ""
    cli_help: str = ""
    aliases: tuple[str, ...] = ()
    library: bool = True

    def __post_init__(self) -> None:
        if not self.flag:
            off = "no-" if self.kind == "bool" and self.default else ""
            object.__setattr__(self, "flag", f"--{off}{self.name.replace('_', '-')}")

    @property
    def setting(self) -> str:
        """The editor setting's key under `distcheck.` (`worldSize`)."""
        return camel(self.name)

    @property
    def flag_sets(self) -> Any:
        """The value the CLI `flag` of a bool option sets (the opposite of its default)."""
        return not self.default if self.kind == "bool" else None


# Bounds (with their words and metavar) that several options share.
_AT_LEAST_ONE: dict[str, Any] = {"words": "at least 1", "minimum": 1, "metavar": "N"}
_SECONDS: dict[str, Any] = {
    "words": "a finite number of seconds > 0",
    "minimum": 0.0,
    "exclusive": True,
    "finite": True,
    "metavar": "SEC",
}


def _tolerance(name: str, default: float, what: str, example: str) -> Option:
    """`atol` / `rtol`: the `what` ("absolute", "relative") tolerance of the comparison with the reference."""
    return Option(
        name,
        "tolerance",
        default,
        f"{what.capitalize()} tolerance of the comparison with the single-process reference: a number for every "
        "output, or one per output name or output kind (per_node, per_graph, global) with an optional default.",
        words="a finite number >= 0",
        example=example,
        minimum=0.0,
        finite=True,
        metavar="X",
        cli_help=f"{what} tolerance; OUTPUT=X (repeatable) sets it for one output or output kind",
    )


OPTIONS: tuple[Option, ...] = (
    Option(
        "world_size",
        "int",
        2,
        "Number of ranks the model is domain-decomposed over (at least 2 for a validation): at most the atoms of the "
        "sample's smallest system and, on the CPU, 4 per core unless allow_oversubscribe is set.",
        example="2",
        cli_help="number of ranks",
        **_AT_LEAST_ONE,
    ),
    Option(
        "device",
        "str",
        "auto",
        "Device the ranks run on: auto (CUDA when torch sees a GPU, else the CPU with gloo), cpu, cuda (one rank per "
        "GPU), cuda:N (every rank on GPU N) or one device per rank separated by commas (cuda:0,cuda:1).",
        words="auto, cpu, cuda, cuda:N or one device per rank separated by commas (cuda:0,cuda:1)",
        example="cpu",
        pattern=r"auto|cpu|cuda|(cpu|cuda:\d+)(,(cpu|cuda:\d+))+|cuda:\d+",
        metavar="DEV",
        cli_help="auto (cuda:0 when torch sees a GPU, else the CPU), cpu, cuda (one rank per GPU), cuda:N (every rank "
        "on GPU N) or one device per rank: cuda:0,cuda:1",
        library=False,
    ),
    _tolerance("atol", 1e-5, "absolute", "1e-5"),
    _tolerance("rtol", 1e-4, "relative", "1e-4"),
    Option(
        "auto_fix",
        "bool",
        True,
        "Let the validator try spec fixes (auto-fix rules) when the first attempt fails.",
        cli_help="try the initial spec only",
    ),
    Option(
        "max_fix_attempts",
        "int",
        8,
        "Most auto-fix attempts after the first.",
        words=">= 0",
        example="8",
        minimum=0,
        metavar="N",
        cli_help="auto-fix attempts after the first",
    ),
    Option(
        "backend",
        "str",
        "auto",
        "torch.distributed backend of the ranks.",
        words="one of auto, gloo, nccl",
        example="auto",
        choices=("auto", "gloo", "nccl"),
        choice_help=(
            "gloo when ranks share a GPU or run on the CPU, NCCL when every rank has its own GPU",
            "gloo (CPU, or ranks sharing one GPU)",
            "NCCL (one GPU per rank)",
        ),
        cli_help="collective backend",
        library=False,
    ),
    Option(
        "timeout_sec",
        "float",
        120.0,
        "Seconds one run (the single-process reference, or one attempt's ranks) may take before its processes are "
        "killed; deadline_sec bounds the whole validation.",
        example="120",
        flag="--timeout",
        cli_help="seconds one run (the single-process reference, or one attempt's ranks) may take before its "
        "processes are killed",
        aliases=("timeout",),
        **_SECONDS,
    ),
    Option(
        "deadline_sec",
        "float",
        None,
        "Seconds the whole validation may take (empty: no deadline): past it no new attempt starts, each run gets at "
        "most what is left, and the report stands on the best attempt so far.",
        example="600",
        nullable=True,
        flag="--deadline",
        cli_help="seconds the whole validation may take: past it no new attempt starts, each run gets at most what is "
        "left, and the report stands on the best attempt so far (default: no deadline)",
        aliases=("deadline",),
        **_SECONDS,
    ),
    Option(
        "watched_helper_packages",
        "list[str]",
        ("aimnet.nbops",),
        "Third-party packages whose helpers are traced to find per-system reductions the runtime cannot see.",
        nullable=True,
        flag="--watch",
        metavar="PKG",
        cli_off="--no-watch",
        cli_off_help="trace no third-party helpers",
        cli_help="package whose helpers are traced (repeatable or comma-separated; replaces the default)",
        aliases=("watch",),
    ),
    Option(
        "helper_sample_every",
        "int",
        8,
        "Check every N-th call of a watched helper.",
        example="8",
        cli_help="record every Nth helper call",
        **_AT_LEAST_ONE,
    ),
    Option(
        "layer_diagnostic",
        "bool",
        True,
        "On failure, locate the first module whose outputs diverge.",
        cli_help="skip the per-module divergence search",
    ),
    Option(
        "allow_oversubscribe",
        "bool",
        False,
        "On the CPU, start more than 4 ranks per core (refused otherwise, so a large world_size cannot exhaust the "
        "machine).",
        cli_help="on the CPU, start more than 4 ranks per core this process may use (refused otherwise)",
    ),
)
"""Every validator option, in the order `--help` and the settings list them."""

_BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}

OPTION_TYPES: dict[str, str] = {o.name: o.kind for o in OPTIONS}
"""Option name → its kind (see `Option.kind`)."""
OPTION_ALIASES: dict[str, str] = {alias: o.name for o in OPTIONS for alias in o.aliases}
"""Other spellings a pyproject table or the settings accept for some options (`timeout`, `deadline`, `watch`)."""

EDITOR_SETTINGS: tuple[str, ...] = ("interpreter", "trace", "saveBeforeValidate")
"""The extension's own `distcheck.*` settings (first key segment): read by the editor, never validator options."""


def option(name: str) -> Option:
    """The `Option` called `name` (or one of its aliases); `KeyError` for anything else."""
    return _BY_NAME[OPTION_ALIASES.get(name, name)]


def option_values(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The validator options among `arguments` (a library entry point's `locals()`, its parameters), in
    `OPTIONS` order; every name the record does not list (the factory, the sample, `progress`, `spec`)
    is left out."""
    return {o.name: arguments[o.name] for o in OPTIONS if o.name in arguments}


@dataclass(frozen=True)
class TargetKey:
    """A key of a target that is not a validator option (what to validate and how to read the sample):
    its pyproject key and CLI flag, and `words`, what a valid value looks like."""

    name: str
    flag: str
    words: str


TARGET_KEYS: tuple[TargetKey, ...] = (
    TargetKey("sample", "--sample", "a structure file or 'path/file.py:sample_batch'"),
    TargetKey("frames", "--frames", "an index or slice of frames: 2, -1, 0:10, ::2"),
    TargetKey("dtype", "--dtype", "float64 or float32"),
    TargetKey("spec", "--spec", "a spec file"),
)
_TARGET_KEY: dict[str, TargetKey] = {k.name: k for k in TARGET_KEYS}


def _literal(value: Any, style: str) -> str:
    """`value` as the caller writes it: TOML/JSON literals for files and settings, Python for the library."""
    if style == "python":
        return repr(value)
    if style == "cli":
        if isinstance(value, bool):
            return ""
        return str(value)
    return json.dumps(value)  # JSON's true/false, numbers and strings are TOML's too


@dataclass(frozen=True)
class Vocabulary:
    """How one caller sets options and target keys: `cli` (flags), `editor` (settings, and the pyproject target
    for the keys that have no setting), `pyproject` (table keys) or `library` (keywords).

    `name(key)` is the spelling of a validator option or target key; `assign(key, value)` a complete "set it to
    value" (`--world-size 2`, `distcheck.worldSize: 2`, `world_size = 2`, `world_size=2`)."""

    style: str

    def name(self, key: str) -> str:
        """How this caller spells `key` (a validator option, one of its aliases, or a `TARGET_KEYS` name)."""
        if key in _TARGET_KEY:
            if self.style == "cli":
                return _TARGET_KEY[key].flag
            return f"{key} in the pyproject target" if self.style == "editor" else key
        o = option(key)
        if self.style == "cli":
            return o.flag
        if self.style == "editor":
            return f"distcheck.{o.setting}"
        return o.name

    def assign(self, key: str, value: Any) -> str:
        """ "Set `key` to `value`" in this caller's words."""
        if key in _TARGET_KEY:
            if self.style == "cli":
                return f"{_TARGET_KEY[key].flag} {value}"
            if self.style == "library":
                return f"{key}={value!r}"
            where = " in the pyproject target" if self.style == "editor" else ""
            return f"{key} = {json.dumps(value)}{where}"
        o = option(key)
        if self.style == "cli":
            if o.kind == "bool":
                return o.flag if value == o.flag_sets else f"leave out {o.flag}"
            return f"{o.flag} {_literal(value, 'cli')}"
        if self.style == "editor":  # a target's table wins over the settings (lsp.config): name both
            toml = PYPROJECT.assign(key, value)
            setting = f"distcheck.{o.setting}: {_literal(value, 'json')}"
            return f"{setting} (or {toml} where the target's pyproject table sets it)"
        if self.style == "library":
            return f"{o.name}={_literal(value, 'python')}"
        return f"{o.name} = {_literal(value, 'toml')}"

    def mapping(self) -> Mapping[str, str]:
        """Every validator option → its spelling for this caller."""
        return {o.name: self.name(o.name) for o in OPTIONS}


CLI = Vocabulary("cli")
EDITOR = Vocabulary("editor")
PYPROJECT = Vocabulary("pyproject")
LIBRARY = Vocabulary("library")
