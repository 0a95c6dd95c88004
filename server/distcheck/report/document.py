"""The report document: `TraceReport` (the bottom line, the spec, every attempt), `DeadlineReached`, and
the one definition of the best attempt (`attempt_rank`, `best_attempt_index`) and of the verdict state
(`report_state`).

JSON promises (`to_json` / `from_json`, `to_dict` / `from_dict`, orjson underneath):

- Lossless: `TraceReport.from_json(r.to_json()) == r`, non-finite floats and int-keyed dicts included.
- The text is strict JSON (valid UTF-8, no `NaN` / `Infinity` literals): a non-finite float is written
  as one of the strings `"NaN"`, `"Infinity"`, `"-Infinity"`. In the free-form values (the open
  records' `extra`, `meta.timings`, ...) a genuine string that would read back as one of those
  (`"NaN"`, `"~NaN"`, ...) is written with one more leading `~`, so strings survive too.
- Rank-keyed dicts (`HelperDiagnosis.n_calls_per_rank`, and any dict stored under a `"per_rank"` key in
  the free-form dicts) have int keys in Python and decimal-string keys in JSON; reading restores the
  ints. Anywhere else a free-form dict must have string keys (`to_dict` raises `TypeError` otherwise).
- Free-form values must be JSON-like: None, bool, int, float, str, lists/tuples, dicts. Numbers of other
  types (numpy scalars) are stored as int / float, tuples as lists; anything else raises `TypeError`
  naming where it is.
- The document carries `"report_version": REPORT_VERSION`; reading a newer one raises `ValueError`
  saying to upgrade distcheck. Reading is strict: a missing field, an unknown field or a wrong type
  raises `ValueError` naming its JSON path. Derived values (`verdict`, `state`, `fix_applied`, `failures`,
  `fix_failure`, `best_attempt`, `failing_outputs`, `qualname`) are written for readers in other languages
  and ignored when read.
- `extension/schemas/report.schema.json` (`distcheck.report.schema`) is the document's JSON Schema.

Equality of the records is equality of their JSON form (`to_dict()`), so `NaN == NaN` there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from distcheck.spec import MLIPSpec
from distcheck.spec.edit import spec_changes

from ..safe_text import json_safe
from .checks import ReceptiveField, RoundoffFloor, SampleWarning
from .codec import Record, wire
from .failures import OutputFailure, fixed_pass_message, output_failures
from .log_summary import SummaryLogger, log_summary
from .model import Attempt
from .parts import ReportMeta, TargetInfo, view
from .render import render_text
from .values import _bad, _kind_of, _PathT

__all__ = [
    "DEADLINE_STAGES",
    "REPORT_STATES",
    "REPORT_VERDICTS",
    "REPORT_VERSION",
    "DeadlineReached",
    "TraceReport",
    "attempt_rank",
    "best_attempt_index",
    "fixed_attempt",
    "report_state",
]

REPORT_VERSION = 1
"""The newest report version this distcheck reads and the version it writes."""

REPORT_VERDICTS: tuple[str, ...] = ("passed", "failed", "inconclusive", "error")
"""`TraceReport.verdict` values (the CLI's exit code is that of `state`: `distcheck.cli_exit`)."""

REPORT_STATES: tuple[str, ...] = ("passed", "passed_after_fix", "failed", "inconclusive", "error")
"""`TraceReport.state` values (`report_state`): the verdict, with "passed" split in two: "passed" when the
spec as given passed, "passed_after_fix" when only a spec distcheck changed did (a fix before the first
run or an auto-fix: the spec on disk still fails until the fix is applied). The editor shows this field
and never re-derives it."""


DEADLINE_STAGES: tuple[str, ...] = ("reference", "attempt", "between_attempts")
"""`DeadlineReached.stage` values: the reference run or an attempt's run was cut short at the deadline,
or the deadline passed between attempts (so the next one was not started)."""


@dataclass(eq=False)
class DeadlineReached(Record):
    """The whole-validation deadline (`deadline_sec`) passed before the validation was done.

    `deadline_sec` is the deadline, `elapsed_sec` the seconds from the start to the stop, `attempts`
    the number of attempts made (the report stands on the best of them), `stage` one of
    `DEADLINE_STAGES`.
    """

    deadline_sec: float
    elapsed_sec: float
    attempts: int
    stage: str = dataclasses.field(metadata=wire(enum=DEADLINE_STAGES))


def _badness(value: float | None) -> float:
    """A difference as a sort key: None (not computable) and NaN count as infinitely bad."""
    return math.inf if value is None or math.isnan(value) else value


def attempt_rank(attempt: Attempt) -> tuple[int, int, float]:
    """How good an attempt is, lower is better: `(tier, failing, worst)`.

    `tier` is 0 for an attempt that passed, 1 for one whose outputs were compared, 2 for one that
    ended before any comparison (an error without verdicts); `failing` is its number of failing
    outputs; `worst` the largest `max_rel_diff` among them (None or NaN count as infinite). The
    engine rolls an auto-fix attempt back when its rank is worse than the best so far.
    """
    if attempt.passed:
        return (0, 0, 0.0)
    if not attempt.verdicts:
        return (2, 0, math.inf)
    failing = [v for v in attempt.verdicts.values() if not v.passed]
    worst = max((_badness(v.max_rel_diff) for v in failing), default=0.0)
    return (1, len(failing), worst)


def best_attempt_index(attempts: Sequence[Attempt]) -> int | None:
    """The position of the attempt a report stands on, None when there are none: the attempt with the
    lowest `attempt_rank` (so the first that passed, else the compared one with the fewest failing
    outputs and then the smallest worst relative difference), the earliest on ties — a later attempt
    that is no better never replaces it. The engine, the report, the CLI, the daemon and the panel
    all use this one rule through `TraceReport.best_index`."""
    if not attempts:
        return None
    return min(range(len(attempts)), key=lambda i: (attempt_rank(attempts[i]), i))


def fixed_attempt(attempts: Sequence[Attempt], index: int | None) -> bool:
    """Whether attempt `index` ran under a spec distcheck changed from the one it was given: it carries
    `Attempt.fixes` (made before the first run or by an auto-fix rule), or it is a later attempt (an
    auto-fix; older reports carry no `fixes`). Inference filling in undeclared fields is no fix."""
    if index is None or not 0 <= index < len(attempts):
        return False
    return index > 0 or bool(attempts[index].fixes)


def report_state(verdict: str, attempts: Sequence[Attempt], best_index: int | None) -> str:
    """The one verdict-state rule (one of `REPORT_STATES`): `verdict` as is, except that a pass stood on
    a spec distcheck changed (`fixed_attempt`: a fix before the first run or an auto-fix) is
    "passed_after_fix"."""
    if verdict == "passed" and fixed_attempt(attempts, best_index):
        return "passed_after_fix"
    return verdict


@dataclass(eq=False)
class TraceReport(Record):
    """The result of one validation: the bottom line, the working (or best) spec and every attempt.

    `ok` is the engine's bottom line (True iff an attempt passed). `spec` is the spec that passed, or the best one
    tried. `attempts` are in the order run. `next_action` tells the user what to do; its first line is a one-liner.
    `meta` (`parts.ReportMeta`) says how the validation ran: world_size, devices, backend, tolerances, options,
    versions, timings, what the reference learned; its `root` (project directory) picks the traceback frame to show.
    `target` (`parts.TargetInfo`, None when not recorded) says what was validated: the factory and sample with their
    source lines, the spec and config files. Both are open records: keys they do not name are kept in `extra`.
    `deadline` is set when the whole-validation deadline stopped it early (its JSON field is written only then).
    `best_index` is the position in `attempts` of the attempt the report stands on (JSON `best_attempt`): the engine
    sets it with `best_attempt_index`, the one definition of "best"; `spec`, the headline in `next_action`, the
    verdict, the CLI, the daemon and the editor panel all read it, never recompute it. Left None with attempts
    present (a report built by hand, or read from an older document that lacks it), it is computed with
    `best_attempt_index`; a value out of range raises `ValueError`.
    `receptive_field` (`checks.ReceptiveField`), `roundoff` (`checks.RoundoffFloor`) and
    `sample_warnings` (`checks.SampleWarning`) say how far the verdict can be trusted; each is
    written to JSON only when set or non-empty.
    """

    ok: bool
    spec: MLIPSpec
    attempts: list[Attempt]
    next_action: str
    meta: ReportMeta
    target: TargetInfo | None = None
    deadline: DeadlineReached | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))
    best_index: int | None = dataclasses.field(default=None, metadata=wire(key="best_attempt"))
    receptive_field: ReceptiveField | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))
    roundoff: RoundoffFloor | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))
    sample_warnings: list[SampleWarning] = dataclasses.field(default_factory=list, metadata=wire(omit_empty=True))

    _derived = ("verdict", "state", "fix_applied", "failures", "fix_failure")
    _derived_enums = (("verdict", REPORT_VERDICTS), ("state", REPORT_STATES))
    _placed = (
        ("verdict", "ok"),
        ("state", "verdict"),
        ("fix_applied", "state"),
        ("best_attempt", "fix_applied"),
        ("next_action", "best_attempt"),
    )
    _ignored = ("report_version",)

    def __post_init__(self) -> None:
        # a free-form dict given for an open part (hand-built reports, older callers) is read as its record
        if isinstance(self.meta, Mapping):
            self.meta = view(ReportMeta, self.meta)
        if isinstance(self.target, Mapping):
            self.target = view(TargetInfo, self.target)
        if self.best_index is None:
            self.best_index = best_attempt_index(self.attempts)
        elif isinstance(self.best_index, bool) or not 0 <= self.best_index < len(self.attempts):
            raise ValueError(
                f"best_index {self.best_index!r} is not the position of one of the {len(self.attempts)} attempts"
            )

    # ---- derived

    @property
    def best_attempt(self) -> Attempt | None:
        """The attempt the report stands on (`attempts[best_index]`), None when there are no attempts."""
        if self.best_index is None or not 0 <= self.best_index < len(self.attempts):
            return None
        return self.attempts[self.best_index]

    @property
    def fix_applied(self) -> str | None:
        """The rationale of the best attempt when it passed under a spec distcheck changed
        (`fixed_attempt`); None otherwise."""
        best = self.best_attempt
        if best is None or not best.passed or not fixed_attempt(self.attempts, self.best_index):
            return None
        return best.rationale

    def fix_edits(self) -> list[dict[str, Any]]:
        """The changes from the spec as given to `spec` when the state is "passed_after_fix", as
        `spec.edit.spec_changes` writes them (what `--save-spec`'s file, JUnit and the editor's quick
        fix make): the best attempt's `fixes`, or, in an older report without them, the changes from
        the first attempt's spec; [] otherwise."""
        best = self.best_attempt
        if best is None or self.state != "passed_after_fix":
            return []
        if best.fixes:
            return [f.edit() for f in best.fixes]
        return spec_changes(self.attempts[0].spec.to_dict(), self.spec.to_dict())

    @property
    def failures(self) -> list[OutputFailure]:
        """`failures.output_failures` of the best attempt: one record per failing output, the text the
        JUnit file and the editor's Testing view both show."""
        return output_failures(self.best_attempt, self.meta)

    @property
    def fix_failure(self) -> str | None:
        """When the state is "passed_after_fix": `failures.fixed_pass_message`, the one text the JUnit file
        and the editor's Testing view both record as the failure (the spec it started from still fails,
        and where to save the fix); None otherwise."""
        fix = self.fix_applied
        if fix is None or self.state != "passed_after_fix":
            return None
        return fixed_pass_message(fix, self.target)

    @property
    def verdict(self) -> str:
        """One of `REPORT_VERDICTS`, judged on `best_attempt`.

        "error": no attempts, or the best attempt has an error and no verdicts; "inconclusive": the
        best attempt's partition is degenerate (`partition_health["degenerate"]` non-empty), so a pass
        proves nothing; else "passed" if it passed, "failed" if not.
        """
        best = self.best_attempt
        if best is None or (best.error is not None and not best.verdicts):
            return "error"
        if best.degenerate:
            return "inconclusive"
        return "passed" if best.passed else "failed"

    @property
    def state(self) -> str:
        """One of `REPORT_STATES` (`report_state` of `verdict` and the best attempt): what the editor's
        status item, panel badge and buttons show."""
        return report_state(self.verdict, self.attempts, self.best_index)

    # ---- JSON

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: `report_version`, every field (`best_index` as `best_attempt`: the position
        of the best attempt in `attempts`, or null), and the derived `verdict` and `fix_applied`;
        `deadline`, `receptive_field`, `roundoff` and `sample_warnings` only when set or non-empty."""
        return self._encode(())

    def _encode(self, path: _PathT) -> dict[str, Any]:
        out = super()._encode(path)
        out["best_attempt"] = None if self.best_attempt is None else out["best_attempt"]
        return {"report_version": REPORT_VERSION, **out}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TraceReport:
        """Read a report document; `ValueError` for a newer `report_version` or any malformed part."""
        if not isinstance(d, Mapping):
            raise _bad((), f"expected a report object, got {_kind_of(d)}")
        if "report_version" not in d:
            raise _bad(("report_version",), "missing; this is not a distcheck report")
        version = d["report_version"]
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise _bad(("report_version",), f"expected a positive integer, got {version!r}")
        if version > REPORT_VERSION:
            raise ValueError(
                f"this report has report_version {version} but this distcheck reads versions up to "
                f"{REPORT_VERSION}: it was written by a newer distcheck; upgrade distcheck "
                "(pip install -U distcheck)"
            )
        kwargs = cls._kwargs(d, ())
        best, n = kwargs["best_index"], len(kwargs["attempts"])
        if best is not None and not 0 <= best < n:
            raise _bad(("best_attempt",), f"expected the position of one of the {n} attempts, got {best}")
        if best is None and n and "best_attempt" in d:
            raise _bad(("best_attempt",), "null, but the report has attempts: expected the position of one of them")
        return cls(**kwargs)

    def to_json(self, *, indent: bool = False) -> str:
        """The report as strict JSON text: one line by default (fits a JSON-lines pipe), or
        2-space-indented with a trailing newline when `indent` is True. A lone surrogate in a string
        the user's code chose (which no UTF-8 writer takes) is written escaped (`safe_text.json_safe`)."""
        option = orjson.OPT_INDENT_2 if indent else 0
        data = self.to_dict()
        try:
            text = orjson.dumps(data, option=option).decode()
        except TypeError:  # "str is not valid UTF-8: surrogates not allowed"
            text = orjson.dumps(json_safe(data), option=option).decode()
        return text + "\n" if indent else text

    @classmethod
    def from_json(cls, text: str | bytes | bytearray | memoryview) -> TraceReport:
        """Read a report from JSON text; `ValueError` for broken JSON or as `from_dict`."""
        try:
            data = orjson.loads(bytes(text) if isinstance(text, memoryview) else text)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"report is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    # ---- text

    def render_text(self, color: bool = False) -> str:
        """A compact human report for terminals and CI logs (ANSI colors only when `color`): see
        `distcheck.report.render.render_text`."""
        return render_text(self, color)

    def log_summary(self, logger: SummaryLogger, *, prefix: str = "distcheck: ") -> None:
        """The lines of `render_text` written to `logger` (stdlib `logging` or loguru-style: anything with
        `info`; `warning` / `error` used when it has them): see `distcheck.report.log_summary.log_summary`."""
        log_summary(self, logger, prefix=prefix)
