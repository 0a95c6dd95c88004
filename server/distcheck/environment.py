"""distcheck's environment variables, declared once: every `DISTCHECK_*` switch is a `Switch` of `SWITCHES`.

Each `Switch` states its name, its kind (how its value is read), its default (the value when it is
unset, empty or unreadable), what it means, the modules that read it and whether it is `internal`
(set by distcheck itself for its own processes, documented but not for the user to set). From this
record come `Settings` (one typed attribute per switch), `read_settings` (the one reader of the
environment for them) and `docs/environment.md` (`environment_markdown()`, printed by
`python -m distcheck.environment`; kept equal to it by `tests/server/test_environment_record.py`, which
also fails on a `DISTCHECK_*` name in `server/` that the record lacks).

A validation reads its `Settings` once when it starts (`validate.run_setup.settle_run`: `RunSetup.settings`)
and passes them down; the thin reads of `processes.spares.settings` (`enabled()`, `pool_bounds()`, ...)
read the record afresh at each call. Nothing is read at import, so a switch set after import takes
effect from the next validation on, as it would in a new process.

An unreadable value (`DISTCHECK_SPARES_MAX=abc`) takes the default and is reported once per process and
value as an `EnvironmentSwitchWarning` naming the variable, the value, what was used instead and what
to write. No torch here (the editor daemon and the CLI import it before torch).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KINDS",
    "RANK",
    "SWITCHES",
    "UNTRUSTED_PATHS",
    "EnvironmentSwitchWarning",
    "Settings",
    "Switch",
    "environment_markdown",
    "read_settings",
    "switch",
]

KINDS: dict[str, str] = {
    "flag": "on or off: 1, true, yes, on / 0, false, no, off (any case)",
    "tri-state": "on, off or automatic: 1, true, yes, on / 0, false, no, off / auto (or unset)",
    "int": "a whole number",
    "seconds": "a finite number of seconds",
    "MB": "a finite number of megabytes (MiB)",
    "list": "names separated by commas (`,`); blanks and repeats are dropped",
    "paths": "directories separated by the path separator (`:`, `;` on Windows)",
    "choice": "one of the values listed",
    "text": "any text",
}
"""Each kind of switch and how its value is written (the kinds' legend of docs/environment.md)."""

_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


class EnvironmentSwitchWarning(UserWarning):
    """A `DISTCHECK_*` variable whose value could not be read; its default was used instead."""


@dataclass(frozen=True)
class Switch:
    """One environment switch: its facts, each stated once.

    `kind` is one of `KINDS`. `default` is the value `Settings` holds when the variable is unset, empty
    or unreadable (None where unset means something no value spells: `unset` says what, in words).
    The bound of an `int`, `seconds` or `MB`: `minimum` (exclusive when `exclusive`); of a `choice`,
    `choices`. `meaning` is the sentence docs/environment.md shows. `readers`: the functions that read it
    (`module.py:function`, the module's path under `server/distcheck/`), each through `read_settings`.
    `elsewhere`: (reader, value) for a reader that, where the switch is unset, uses a default of its own
    (`DISTCHECK_SPARES_KEEP_S`: a library call keeps nothing warm, the editor's runner 600 s). `internal`:
    distcheck sets it for its own processes (the user does not), in the functions `setters` names.
    """

    name: str
    kind: str
    default: Any
    meaning: str
    readers: tuple[str, ...]
    internal: bool = False
    unset: str = ""
    minimum: float | None = None
    exclusive: bool = False
    choices: tuple[str, ...] = ()
    elsewhere: tuple[tuple[str, Any], ...] = ()
    setters: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}")

    @property
    def attribute(self) -> str:
        """Its `Settings` attribute: the name without `DISTCHECK_`, lower case (`spares_max`)."""
        return self.name.removeprefix("DISTCHECK_").lower()

    @property
    def words(self) -> str:
        """What a valid value looks like, in words (for the warning and the documentation)."""
        if self.kind in ("int", "seconds", "MB") and self.minimum is not None:
            bound = f"{'>' if self.exclusive else '>='} {_number(self.minimum)}"
            what = {"int": "a whole number", "seconds": "a finite number of seconds", "MB": "a finite number of MiB"}
            return f"{what[self.kind]} {bound}"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        return KINDS[self.kind]

    def shown_default(self) -> str:
        """The default as docs/environment.md and the warnings say it."""
        return _shown(self.default, self.unset)

    def parse(self, raw: str) -> Any:
        """The value `raw` (stripped, not empty) means; `ValueError` when it means none."""
        kind, low = self.kind, raw.lower()
        if kind in ("flag", "tri-state"):
            if low in _ON:
                return True
            if low in _OFF:
                return False
            if kind == "tri-state" and low == "auto":
                return None
            raise ValueError(raw)
        if kind in ("int", "seconds", "MB"):
            number: float = int(raw) if kind == "int" else float(raw)
            if (
                number != number
                or abs(number) == float("inf")
                or (self.minimum is not None and (number <= self.minimum if self.exclusive else number < self.minimum))
            ):
                raise ValueError(raw)
            return number
        if kind == "list":
            return tuple(dict.fromkeys(p.strip() for p in raw.split(",") if p.strip()))
        if kind == "paths":
            return tuple(dict.fromkeys(p for p in raw.split(os.pathsep) if p))
        if kind == "choice":
            if raw not in self.choices:
                raise ValueError(raw)
            return raw
        return raw


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _shown(value: Any, unset: str) -> str:
    if value is None:
        return unset or "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ", ".join(value) if value else "none"
    if isinstance(value, (int, float)):
        return _number(value)
    return str(value)


RANK = Switch(
    "DISTCHECK_RANK",
    "text",
    None,
    "Set in every rank process to its rank (`0`, `1`, ...) and in the reference run's process to `reference`: a "
    "validation started where it is set (a module that validates when imported) is refused.",
    ("processes/launch.py:run_distributed",),
    internal=True,
    setters=("runtime/rank.py:configure_rank_process", "validate/reference.py:_reference_entry"),
    unset="unset (not a rank)",
)
"""Set by distcheck in its rank and reference processes (`runtime/rank.py`, `validate/reference.py`)."""

UNTRUSTED_PATHS = Switch(
    "DISTCHECK_UNTRUSTED_PATHS",
    "paths",
    (),
    "The project directories whose files may never be imported in place of the standard library, torch or "
    "distcheck (`importguard`), passed by a distcheck process to the processes it starts.",
    ("importguard.py:_env_untrusted",),
    internal=True,
    setters=("importguard.py:distrust", "importguard.py:restore"),
)
"""Set by `importguard.distrust` for the processes distcheck starts."""

SWITCHES: tuple[Switch, ...] = (
    Switch(
        "DISTCHECK_SPARES",
        "flag",
        True,
        "Pre-warmed rank processes (spares, forked from the process pool before a run needs them): off starts every "
        "process only when it is needed. A start method other than forkserver (DISTCHECK_START_METHOD) turns them "
        "off too.",
        ("processes/spares/settings.py:enabled",),
    ),
    Switch(
        "DISTCHECK_SPARES_MAX",
        "int",
        8,
        "The most spares held at once (read when this process's spare pool is made).",
        ("processes/spares/settings.py:pool_bounds",),
        minimum=1,
    ),
    Switch(
        "DISTCHECK_SPARES_MAX_GPU_MB",
        "MB",
        None,
        "The most GPU memory the spares of one GPU may hold, estimated from what warm spares report (read when "
        "the spare pool is made).",
        ("processes/spares/settings.py:pool_bounds",),
        unset="unbounded",
        minimum=0,
        exclusive=True,
    ),
    Switch(
        "DISTCHECK_SPARES_IDLE_S",
        "seconds",
        600.0,
        "How long an idle spare, or what a validation asked the pool for, lasts without a job (read when the "
        "spare pool is made).",
        ("processes/spares/settings.py:pool_bounds",),
        minimum=0,
        exclusive=True,
    ),
    Switch(
        "DISTCHECK_SPARES_KEEP_S",
        "seconds",
        None,
        "Keep each validation's spares warm for the next one for this long after it, as `spares.keep_warm` does; 0 "
        "keeps nothing.",
        ("processes/spares/settings.py:pool_bounds", "jobs/runner.py:_keep_seconds"),
        unset="not kept (a library call)",
        minimum=0,
        elsewhere=(("jobs/runner.py:_keep_seconds", 600.0),),
    ),
    Switch(
        "DISTCHECK_RESIDENT_RANKS",
        "flag",
        True,
        "A validation keeps the ranks of a run that ended well for its next run (auto-fix attempts, the control "
        "run): off starts every run in new ranks.",
        ("processes/spares/settings.py:resident_enabled",),
    ),
    Switch(
        "DISTCHECK_ATTEMPT_AHEAD",
        "tri-state",
        None,
        "A target validated before runs its first attempt while its reference runs, under the spec its last "
        "validation's first attempt used: on always, off never (the attempt waits for the reference).",
        ("processes/spares/settings.py:attempt_ahead_enabled",),
        unset="auto: where there is a CPU core for the reference and one for each rank",
    ),
    Switch(
        "DISTCHECK_FIELD_CACHE",
        "flag",
        True,
        "A validation of the same model on the same sample takes the receptive field measured before "
        "(`validate/field_cache.py`): off measures it every time.",
        ("processes/spares/settings.py:field_cache_enabled",),
    ),
    Switch(
        "DISTCHECK_BYTECODE_CACHE",
        "flag",
        True,
        "distcheck's processes keep the bytecode of packages installed without it in distcheck's cache "
        "(`processes/bytecode_cache.py`): off compiles them from source in every new process, and `distcheck "
        "validate` prints the `compileall` command that compiles them once.",
        ("processes/spares/settings.py:bytecode_cache_enabled",),
    ),
    Switch(
        "DISTCHECK_START_METHOD",
        "choice",
        None,
        "How rank and reference processes start (multiprocessing's start method); anything but forkserver turns "
        "spares off.",
        ("processes/forkserver.py:process_context", "processes/spares/settings.py:enabled"),
        unset="forkserver where the platform has it, else spawn",
        choices=("forkserver", "spawn", "fork"),
    ),
    Switch(
        "DISTCHECK_PRELOAD",
        "list",
        (),
        "Modules the process pool imports once for all ranks beside distcheck's own (slow-to-import third-party "
        "packages such as `aimnet.models`), read when the pool starts; never one that initialises CUDA on import "
        "(name it in DISTCHECK_SPARE_PACKAGES instead).",
        ("processes/forkserver.py:extra_preload",),
    ),
    Switch(
        "DISTCHECK_SPARE_PACKAGES",
        "list",
        (),
        "Packages every spare imports after its fork, beside those the target's model imported last time "
        "(`processes/spares/learned.py`).",
        ("processes/spares/learned.py:packages_for",),
    ),
    UNTRUSTED_PATHS,
    RANK,
)
"""Every `DISTCHECK_*` environment variable: the public ones first, then the internal ones."""

_BY_NAME: dict[str, Switch] = {s.name: s for s in SWITCHES}


def switch(name: str) -> Switch:
    """The `Switch` called `name` (`DISTCHECK_SPARES_MAX`); `KeyError` for anything else."""
    return _BY_NAME[name]


@dataclass(frozen=True)
class Settings:
    """The switches as one moment's environment set them (`read_settings`): one attribute per `Switch`
    (`Switch.attribute`), its value or its default. `problems` are the warnings of the unreadable values."""

    spares: bool
    spares_max: int
    spares_max_gpu_mb: float | None
    spares_idle_s: float
    spares_keep_s: float | None
    resident_ranks: bool
    attempt_ahead: bool | None
    field_cache: bool
    bytecode_cache: bool
    start_method: str | None
    preload: tuple[str, ...]
    spare_packages: tuple[str, ...]
    untrusted_paths: tuple[str, ...]
    rank: str | None
    problems: tuple[str, ...] = ()

    def start_method_in_use(self) -> str:
        """The start method ranks start with: DISTCHECK_START_METHOD, else forkserver where the platform
        has it, else spawn."""
        if self.start_method is not None:
            return self.start_method
        import multiprocessing as mp  # not at import: importguard imports this module before its guard

        return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


_REPORTED: set[tuple[str, str]] = set()
"""The (variable, value) pairs already warned about in this process."""


def _problem(s: Switch, raw: str) -> str:
    return (
        f"distcheck: {s.name}={raw!r} is not {s.words}; using the default ({s.shown_default()}) instead. "
        f"Set {s.name} to {s.words}, or unset it (see docs/environment.md)."
    )


def read_settings(environ: Mapping[str, str] = os.environ, *, warn: bool = True) -> Settings:
    """The switches as `environ` sets them now. An unset or empty variable takes its default; so does an
    unreadable one, which is reported (with `warn`, once per process and value) as an
    `EnvironmentSwitchWarning` and listed in `Settings.problems`. Never raises."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for s in SWITCHES:
        raw = environ.get(s.name, "").strip()
        value = s.default
        if raw:
            try:
                value = s.parse(raw)
            except ValueError:
                problems.append(_problem(s, raw))
                if warn and (s.name, raw) not in _REPORTED:
                    _REPORTED.add((s.name, raw))
                    warnings.warn(problems[-1], EnvironmentSwitchWarning, stacklevel=2)
        values[s.attribute] = value
    return Settings(**values, problems=tuple(problems))


# --------------------------------------------------------------------------------------------------
# docs/environment.md


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default_cell(s: Switch) -> str:
    shown = s.shown_default()
    text = f"`{shown}`" if s.default not in (None, ()) else shown
    for reader, value in s.elsewhere:
        text += f"; `{reader}`: `{_shown(value, '')}`"
    return text


def _table(switches: list[Switch], setters: bool = False) -> list[str]:
    head = "| Variable | Kind | Default | Meaning | Read by |" + (" Set by |" if setters else "")
    lines = [head, "|" + " --- |" * (6 if setters else 5)]
    for s in switches:
        kind = s.kind if not s.choices else f"{s.kind}: {', '.join(f'`{c}`' for c in s.choices)}"
        row = f"| `{s.name}` | {kind} | {_default_cell(s)} | {_cell(s.meaning)} | {_functions(s.readers)} |"
        lines.append(row + (f" {_functions(s.setters)} |" if setters else ""))
    return lines


def _functions(where: tuple[str, ...]) -> str:
    return "<br>".join(f"`{w}`" for w in where)


def environment_markdown() -> str:
    """docs/environment.md: every switch of `SWITCHES` with its kind, default and meaning."""
    public = [s for s in SWITCHES if not s.internal]
    internal = [s for s in SWITCHES if s.internal]
    lines = [
        "# Environment variables",
        "",
        "<!-- Generated from `distcheck.environment.SWITCHES` by `python -m distcheck.environment > "
        "docs/environment.md`; `tests/server/test_environment_record.py` keeps it equal. Edit the record, not "
        "this file. -->",
        "",
        "Every `DISTCHECK_*` variable distcheck reads. A validation reads them when it starts, so one set after "
        "`import distcheck` takes effect from the next validation on; the spare pool's bounds "
        "(`DISTCHECK_SPARES_MAX`, `DISTCHECK_SPARES_MAX_GPU_MB`, `DISTCHECK_SPARES_IDLE_S`) are read when a "
        "process makes its spare pool (its first validation with spares), and `DISTCHECK_PRELOAD` when the "
        "process pool starts. An unset or empty variable takes its default; so does one whose value cannot be "
        "read, with a warning on stderr that names the variable, the value and what was used instead.",
        "",
        "*Read by* and *Set by* name functions as `module.py:function`, the module's path under `server/distcheck/`.",
        "",
        "## Switches",
        "",
        *_table(public),
        "",
        "## Internal",
        "",
        "Set by distcheck itself for the processes it starts; listed so that none is a surprise, not to be set "
        "by hand.",
        "",
        *_table(internal, setters=True),
        "",
        "## Kinds",
        "",
        *(f"- **{kind}**: {words}" for kind, words in KINDS.items() if any(s.kind == kind for s in SWITCHES)),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(environment_markdown())
