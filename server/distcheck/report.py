"""The validation report: what `trace_and_validate` found, as data that round-trips through JSON.

`TraceReport` is the whole document: the bottom line (`ok`, `verdict`, `next_action`), the spec that
works (or the best one tried), every `Attempt` with its per-output `OutputVerdict`s, the worker error
(`WorkerError` with `Frame`s) if a rank failed, the third-party helper findings (`HelperDiagnosis`),
layer divergence, partition health and timings. Everything the editor needs to place a diagnostic is a
file + line in the report, so the daemon never imports the user's code — and this module never imports
torch.

JSON promises (`to_json` / `from_json`, `to_dict` / `from_dict`, orjson underneath):

- Lossless: `TraceReport.from_json(r.to_json()) == r`, non-finite floats and int-keyed dicts included.
- The text is strict JSON (valid UTF-8, no `NaN` / `Infinity` literals): a non-finite float is written
  as one of the strings `"NaN"`, `"Infinity"`, `"-Infinity"`. In the free-form dicts (`meta`,
  `partition_health`, `layer_divergence`, ...) a genuine string that would read back as one of those
  (`"NaN"`, `"~NaN"`, ...) is written with one more leading `~`, so strings survive too.
- Rank-keyed dicts (`HelperDiagnosis.n_calls_per_rank`, and any dict stored under a `"per_rank"` key in
  the free-form dicts) have int keys in Python and decimal-string keys in JSON; reading restores the
  ints. Anywhere else a free-form dict must have string keys (`to_dict` raises `TypeError` otherwise).
- Free-form values must be JSON-like: None, bool, int, float, str, lists/tuples, dicts. Numbers of other
  types (numpy scalars) are stored as int / float, tuples as lists; anything else raises `TypeError`
  naming where it is.
- The document carries `"report_version": REPORT_VERSION`; reading a newer one raises `ValueError`
  saying to upgrade distcheck. Reading is strict: a missing field, an unknown field or a wrong type
  raises `ValueError` naming its JSON path. Derived values (`verdict`, `fix_applied`, `best_attempt`,
  `failing_outputs`, `qualname`) are written for readers in other languages and ignored when read.

Equality of the records is equality of their JSON form (`to_dict()`), so `NaN == NaN` there.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from distcheck.spec import MLIPSpec, SpecError

if TYPE_CHECKING:
    from distcheck.report_checks import (
        ReceptiveField,
        RoundoffFloor,
        SampleWarning,
        SuspiciousOutput,
        SystemHealth,
    )


def _checks() -> ModuleType:
    """`distcheck.report_checks` (the trust-check records), imported when first needed: it builds on
    this module's codec, so it cannot be imported at the top."""
    import distcheck.report_checks as checks

    return checks

__all__ = [
    "DEADLINE_STAGES",
    "REPORT_VERDICTS",
    "REPORT_VERSION",
    "UNROUTED_AGGREGATIONS",
    "UNROUTED_ORIGINS",
    "VERDICT_STATUSES",
    "Attempt",
    "CrashTrace",
    "DeadlineReached",
    "DivergentModule",
    "Frame",
    "HelperDiagnosis",
    "OutputVerdict",
    "RankDisagreement",
    "Rollback",
    "TraceReport",
    "UnroutedOp",
    "WorkerError",
    "attempt_rank",
    "best_attempt_index",
    "merge_unrouted",
    "tolerance_for",
]

REPORT_VERSION = 1
"""The newest report version this distcheck reads and the version it writes."""

VERDICT_STATUSES: tuple[str, ...] = ("ok", "mismatch", "missing", "shape", "nonfinite", "suspicious")
"""`OutputVerdict.status` values: within tolerance, out of tolerance, absent from the distributed
outputs, wrong shape, non-finite values where the reference is finite, within tolerance but far
above the round-off floor (`report_checks.SuspiciousOutput`; not passed)."""

REPORT_VERDICTS: tuple[str, ...] = ("passed", "failed", "inconclusive", "error")
"""`TraceReport.verdict` values (the CLI maps them to exit codes 0, 1, 3, 2)."""

_PathT = tuple[str | int, ...]


# --------------------------------------------------------------------------------------------------
# JSON encoding helpers

_NONFINITE_TEXT = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_ESCAPED_TEXT = re.compile(r"~*(NaN|Infinity|-Infinity)")


def _where(path: _PathT) -> str:
    """A JSON path as shown in errors: `$`, `attempts[1].verdicts.energy`, ..."""
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _enc_float(x: float) -> float | str:
    """A float as JSON: itself if finite, else `"NaN"`, `"Infinity"` or `"-Infinity"`."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _enc_opt_float(x: float | None) -> float | str | None:
    return None if x is None else _enc_float(x)


def _enc_free(value: Any, path: _PathT, *, int_keys: bool = False) -> Any:
    """A free-form value as JSON (see the module docstring); `int_keys` for a rank-keyed dict."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return "~" + value if _ESCAPED_TEXT.fullmatch(value) else value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return _enc_float(float(value))
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if int_keys and isinstance(key, numbers.Integral) and not isinstance(key, bool):
                name = str(int(key))
            elif isinstance(key, str):
                name = key
            else:
                what = "int or str" if int_keys else "str"
                raise TypeError(
                    f"report field {_where(path)} has a {type(key).__name__} key {key!r}; keys there must be "
                    f"{what} (only dicts under a 'per_rank' key may use int rank keys)"
                )
            out[name] = _enc_free(item, (*path, name), int_keys=name == "per_rank")
        return out
    if isinstance(value, (list, tuple)):
        return [_enc_free(item, (*path, i)) for i, item in enumerate(value)]
    raise TypeError(
        f"report field {_where(path)} holds a {type(value).__module__}.{type(value).__qualname__}, which "
        "JSON cannot hold; store plain Python values (None, bool, int, float, str, list, dict)"
    )


def _dec_free(value: Any, path: _PathT, *, int_keys: bool = False) -> Any:
    """The inverse of `_enc_free` on parsed JSON."""
    if isinstance(value, str):
        if value in _NONFINITE_TEXT:
            return _NONFINITE_TEXT[value]
        return value[1:] if _ESCAPED_TEXT.fullmatch(value) else value
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key: str | int = int(key) if int_keys and _is_decimal(key) else key
            out[new_key] = _dec_free(item, (*path, key), int_keys=key == "per_rank")
        return out
    if isinstance(value, list):
        return [_dec_free(item, (*path, i)) for i, item in enumerate(value)]
    return value


def _is_decimal(key: str) -> bool:
    return re.fullmatch(r"-?(0|[1-9][0-9]*)", key) is not None


def _enc_free_dict(value: Mapping[str, Any] | None, path: _PathT) -> dict[str, Any] | None:
    if value is None:
        return None
    encoded = _enc_free(value, path)
    if not isinstance(encoded, dict):
        raise TypeError(f"report field {_where(path)} must be a dict, got {type(value).__name__}")
    return encoded


# --------------------------------------------------------------------------------------------------
# JSON decoding helpers: strict, each error names its JSON path

_T = TypeVar("_T")


def _bad(path: _PathT, message: str) -> ValueError:
    return ValueError(f"report {_where(path)}: {message}")


def _kind_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return f"a Python {type(value).__name__}"


def _fields(
    d: object, path: _PathT, required: Sequence[str], optional: Sequence[str] = (), ignored: Sequence[str] = ()
) -> Mapping[str, Any]:
    """`d` checked to be an object with every `required` key and no key outside the three lists."""
    if not isinstance(d, Mapping):
        raise _bad(path, f"expected an object, got {_kind_of(d)}")
    for key in required:
        if key not in d:
            raise _bad((*path, key), "required field is missing")
    allowed = {*required, *optional, *ignored}
    for key in d:
        if key not in allowed:
            raise _bad((*path, str(key)), f"unknown field; allowed fields here are {', '.join(sorted(allowed))}")
    return d


def _get_str(d: Mapping[str, Any], key: str, path: _PathT) -> str:
    value = d[key]
    if not isinstance(value, str):
        raise _bad((*path, key), f"expected a string, got {_kind_of(value)}")
    return value


def _get_opt_str(d: Mapping[str, Any], key: str, path: _PathT) -> str | None:
    return None if d[key] is None else _get_str(d, key, path)


def _dec_int(value: object, path: _PathT) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(path, f"expected an integer, got {_kind_of(value)}")
    return value


def _dec_opt_int(value: object, path: _PathT) -> int | None:
    return None if value is None else _dec_int(value, path)


def _dec_bool(value: object, path: _PathT) -> bool:
    if not isinstance(value, bool):
        raise _bad(path, f"expected true or false, got {_kind_of(value)}")
    return value


def _dec_opt_bool(value: object, path: _PathT) -> bool | None:
    return None if value is None else _dec_bool(value, path)


def _dec_float(value: object, path: _PathT) -> float:
    if isinstance(value, str) and value in _NONFINITE_TEXT:
        return _NONFINITE_TEXT[value]
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _bad(path, f'expected a number (or "NaN", "Infinity", "-Infinity"), got {_kind_of(value)}')
    return float(value)


def _dec_opt_float(value: object, path: _PathT) -> float | None:
    return None if value is None else _dec_float(value, path)


def _dec_list(value: object, path: _PathT, item: Callable[[Any, _PathT], _T]) -> list[_T]:
    if not isinstance(value, list):
        raise _bad(path, f"expected an array, got {_kind_of(value)}")
    return [item(v, (*path, i)) for i, v in enumerate(value)]


def _dec_str_map(value: object, path: _PathT, item: Callable[[Any, _PathT], _T]) -> dict[str, _T]:
    if not isinstance(value, Mapping):
        raise _bad(path, f"expected an object, got {_kind_of(value)}")
    return {str(k): item(v, (*path, str(k))) for k, v in value.items()}


def _dec_rank_map(value: object, path: _PathT, item: Callable[[Any, _PathT], _T]) -> dict[int, _T]:
    if not isinstance(value, Mapping):
        raise _bad(path, f"expected an object, got {_kind_of(value)}")
    out: dict[int, _T] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not _is_decimal(k):
            raise _bad((*path, str(k)), 'expected a rank written as a decimal integer key such as "0"')
        out[int(k)] = item(v, (*path, k))
    return out


def _dec_free_dict(value: object, path: _PathT) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(path, f"expected an object, got {_kind_of(value)}")
    decoded = _dec_free(value, path)
    assert isinstance(decoded, dict)
    return decoded


def _dec_opt_free_dict(value: object, path: _PathT) -> dict[str, Any] | None:
    return None if value is None else _dec_free_dict(value, path)


def _dec_opt_str(value: object, path: _PathT) -> str | None:
    return None if value is None else _dec_str(value, path)


def _dec_str(value: object, path: _PathT) -> str:
    if not isinstance(value, str):
        raise _bad(path, f"expected a string, got {_kind_of(value)}")
    return value


def _dec_spec(value: object, path: _PathT) -> MLIPSpec:
    if not isinstance(value, Mapping):
        raise _bad(path, f"expected a spec object, got {_kind_of(value)}")
    try:
        return MLIPSpec.from_dict(value)
    except SpecError as err:
        raise _bad(path, f"invalid spec: {err}") from err


# --------------------------------------------------------------------------------------------------
# Records


class _Record:
    """Equality by JSON form (so NaN equals NaN, tuples equal lists); subclasses define `to_dict`."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        if self is other:
            return True
        try:
            return self.to_dict() == other.to_dict()  # type: ignore[attr-defined]
        except (TypeError, ValueError):
            return False

    __hash__ = None  # type: ignore[assignment]


@dataclass(eq=False)
class Frame(_Record):
    """One traceback frame: `file` (path as the worker saw it), 1-based `line`, `function` name."""

    file: str
    line: int
    function: str

    def to_dict(self) -> dict[str, Any]:
        """`{"file", "line", "function"}`."""
        return {"file": self.file, "line": int(self.line), "function": self.function}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Frame:
        """Read a frame; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> Frame:
        m = _fields(d, path, ("file", "line", "function"))
        return cls(
            file=_get_str(m, "file", path),
            line=_dec_int(m["line"], (*path, "line")),
            function=_get_str(m, "function", path),
        )


@dataclass(eq=False)
class WorkerError(_Record):
    """An exception raised in the reference process or a rank, translated for the user.

    `type` is the exception class name, `message` its text, `rank` the rank it came from (None for the
    reference run or the parent), `phase` when it happened (e.g. "setup", "forward", "backward",
    "consolidate"). `frames` are ordered outermost first, as Python prints them; `hint` is the translated,
    actionable explanation (what went wrong in distcheck's terms and what to change); `traceback` is the
    raw formatted traceback, kept for the curious.
    """

    type: str
    message: str
    rank: int | None
    phase: str
    frames: list[Frame]
    hint: str
    traceback: str = ""

    def innermost_in(self, root: str | os.PathLike[str]) -> Frame | None:
        """The innermost frame whose file lies under the directory `root` (or is `root`), or None.

        Paths are compared after `abspath` + `normpath` (+ `normcase`), without touching the filesystem
        beyond the current directory, so relative frame paths are taken relative to the current directory.
        """
        base = _norm(os.fspath(root))
        prefix = base if base.endswith(os.sep) else base + os.sep
        for frame in reversed(self.frames):
            path = _norm(frame.file)
            if path == base or path.startswith(prefix):
                return frame
        return None

    @property
    def innermost(self) -> Frame | None:
        """The innermost frame of all (the last one), or None when there are no frames."""
        return self.frames[-1] if self.frames else None

    def to_dict(self) -> dict[str, Any]:
        """Every field, frames as `Frame.to_dict()` objects."""
        return {
            "type": self.type,
            "message": self.message,
            "rank": None if self.rank is None else int(self.rank),
            "phase": self.phase,
            "frames": [f.to_dict() for f in self.frames],
            "hint": self.hint,
            "traceback": self.traceback,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WorkerError:
        """Read a worker error; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> WorkerError:
        m = _fields(d, path, ("type", "message", "rank", "phase", "frames", "hint"), ("traceback",))
        return cls(
            type=_get_str(m, "type", path),
            message=_get_str(m, "message", path),
            rank=_dec_opt_int(m["rank"], (*path, "rank")),
            phase=_get_str(m, "phase", path),
            frames=_dec_list(m["frames"], (*path, "frames"), Frame._read),
            hint=_get_str(m, "hint", path),
            traceback=_get_str(m, "traceback", path) if "traceback" in m else "",
        )


def _norm(path: str) -> str:
    return os.path.normcase(os.path.normpath(os.path.abspath(path)))


UNROUTED_AGGREGATIONS: tuple[str, ...] = (
    "per_atom_to_per_system",
    "per_edge_to_per_atom",
    "per_edge_to_per_system",
    "per_atom_total",
)
"""`UnroutedOp.aggregation` values: atoms into systems (by the system index, a count, a segment), edges
into atoms (`halo_correction` only: under `local` an edge aggregation needs no correction), edges
into systems, and a total over every atom of the batch."""

UNROUTED_ORIGINS: tuple[str, ...] = ("torchscript", "custom_op", "native", "python")
"""`UnroutedOp.origin` values: inside a TorchScript function or module (the `distribution.torchscript:
"eager"` remedy makes the handlers see it), inside an undeclared `torch.ops` kernel (declare it in
`custom_ops`), below Python with no script found at the call site (C++, serialized TorchScript), or a
Python-level call in a form no handler covers."""


@dataclass(eq=False)
class UnroutedOp(_Record):
    """An aggregation a rank ran that no handler routed, so its result is this rank's partial.

    `op` is the operation (`"aten.index_add"`, `"scatter_reduce(prod)"`), `aggregation` one of
    `UNROUTED_AGGREGATIONS`, `origin` one of `UNROUTED_ORIGINS`, `count` how often it ran (summed over
    `ranks` in an attempt). `file`/`line` locate the op itself (the line of a scripted function, read
    from the TorchScript graph's source range, or the Python line), `function` names the function
    holding it; `call_file`/`call_line` are the Python line that called into TorchScript (None when the
    op is itself at a Python line). Any location may be None when it could not be found.
    """

    op: str
    aggregation: str
    origin: str
    count: int
    file: str | None = None
    line: int | None = None
    function: str | None = None
    call_file: str | None = None
    call_line: int | None = None
    ranks: list[int] = dataclasses.field(default_factory=list)

    @property
    def location(self) -> str:
        """`file:line` of the op (else of its call site), or `"unknown location"`."""
        if self.file is not None:
            return f"{self.file}:{self.line if self.line is not None else '?'}"
        if self.call_file is not None:
            return f"{self.call_file}:{self.call_line if self.call_line is not None else '?'}"
        return "unknown location"

    @property
    def key(self) -> tuple[str, str, str, str | None, int | None, str | None, int | None]:
        """What identifies the same op on different ranks (everything but `count` and `ranks`)."""
        return (self.op, self.aggregation, self.origin, self.file, self.line, self.call_file, self.call_line)

    def to_dict(self) -> dict[str, Any]:
        """Every field plus the derived `location`."""
        return {
            "op": self.op,
            "aggregation": self.aggregation,
            "origin": self.origin,
            "count": int(self.count),
            "file": self.file,
            "line": None if self.line is None else int(self.line),
            "function": self.function,
            "call_file": self.call_file,
            "call_line": None if self.call_line is None else int(self.call_line),
            "ranks": [int(r) for r in self.ranks],
            "location": self.location,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UnroutedOp:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> UnroutedOp:
        m = _fields(
            d,
            path,
            ("op", "aggregation", "origin", "count"),
            ("file", "line", "function", "call_file", "call_line", "ranks"),
            ignored=("location",),
        )
        aggregation, origin = _get_str(m, "aggregation", path), _get_str(m, "origin", path)
        if aggregation not in UNROUTED_AGGREGATIONS:
            allowed = ", ".join(UNROUTED_AGGREGATIONS)
            raise _bad((*path, "aggregation"), f"expected one of {allowed}, got {aggregation!r}")
        if origin not in UNROUTED_ORIGINS:
            raise _bad((*path, "origin"), f"expected one of {', '.join(UNROUTED_ORIGINS)}, got {origin!r}")
        return cls(
            op=_get_str(m, "op", path),
            aggregation=aggregation,
            origin=origin,
            count=_dec_int(m["count"], (*path, "count")),
            file=_dec_opt_str(m.get("file"), (*path, "file")),
            line=_dec_opt_int(m.get("line"), (*path, "line")),
            function=_dec_opt_str(m.get("function"), (*path, "function")),
            call_file=_dec_opt_str(m.get("call_file"), (*path, "call_file")),
            call_line=_dec_opt_int(m.get("call_line"), (*path, "call_line")),
            ranks=_dec_list(m.get("ranks", []), (*path, "ranks"), _dec_int),
        )


def merge_unrouted(per_rank: Sequence[tuple[int, Sequence[UnroutedOp]]]) -> list[UnroutedOp]:
    """One record per op and location over ranks: counts summed, the ranks that ran it listed, in
    first-seen order."""
    merged: dict[tuple[Any, ...], UnroutedOp] = {}
    for rank, ops in per_rank:
        for op in ops:
            seen = merged.get(op.key)
            if seen is None:
                merged[op.key] = dataclasses.replace(op, count=int(op.count), ranks=[rank])
            else:
                seen.count += int(op.count)
                if rank not in seen.ranks:
                    seen.ranks.append(rank)
    return list(merged.values())


@dataclass(eq=False)
class OutputVerdict(_Record):
    """One output of one attempt compared with the reference run.

    `name` is the output key, `kind` its output kind (per_node / per_graph / global). `passed` is True
    iff every element is within tolerance (`status == "ok"`). `max_abs_diff` / `max_rel_diff` are the
    largest differences (None when not computable: missing output, wrong shape; NaN or inf when values
    are non-finite). `status` is one of `VERDICT_STATUSES`. `worst_index` is the index (one int per
    dimension) of the worst element, or None; `n_failing` of `n_total` elements are out of tolerance.
    """

    name: str
    kind: str
    passed: bool
    max_abs_diff: float | None
    max_rel_diff: float | None
    status: str
    worst_index: list[int] | None
    n_failing: int
    n_total: int

    def to_dict(self) -> dict[str, Any]:
        """Every field; non-finite diffs as "NaN" / "Infinity" / "-Infinity"."""
        return {
            "name": self.name,
            "kind": self.kind,
            "passed": bool(self.passed),
            "max_abs_diff": _enc_opt_float(self.max_abs_diff),
            "max_rel_diff": _enc_opt_float(self.max_rel_diff),
            "status": self.status,
            "worst_index": None if self.worst_index is None else [int(i) for i in self.worst_index],
            "n_failing": int(self.n_failing),
            "n_total": int(self.n_total),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OutputVerdict:
        """Read a verdict; raises `ValueError` naming the JSON path of a problem (bad status included)."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> OutputVerdict:
        names = ("name", "kind", "passed", "max_abs_diff", "max_rel_diff", "status", "worst_index")
        m = _fields(d, path, (*names, "n_failing", "n_total"))
        status = _get_str(m, "status", path)
        if status not in VERDICT_STATUSES:
            raise _bad((*path, "status"), f"expected one of {', '.join(VERDICT_STATUSES)}, got {status!r}")
        worst = m["worst_index"]
        return cls(
            name=_get_str(m, "name", path),
            kind=_get_str(m, "kind", path),
            passed=_dec_bool(m["passed"], (*path, "passed")),
            max_abs_diff=_dec_opt_float(m["max_abs_diff"], (*path, "max_abs_diff")),
            max_rel_diff=_dec_opt_float(m["max_rel_diff"], (*path, "max_rel_diff")),
            status=status,
            worst_index=None if worst is None else _dec_list(worst, (*path, "worst_index"), _dec_int),
            n_failing=_dec_int(m["n_failing"], (*path, "n_failing")),
            n_total=_dec_int(m["n_total"], (*path, "n_total")),
        )


@dataclass(eq=False)
class HelperDiagnosis(_Record):
    """What the helper trace found about one third-party helper (`module.function`).

    `n_calls_ref` calls in the reference run, `n_calls_per_rank` per rank (int rank keys). `pattern` is
    the recognised behaviour (e.g. "per_system_sum") with `pattern_confidence` in [0, 1].
    `consistency_check` names the check run on its per-rank results (e.g. "sum_over_ranks_matches_ref")
    and `consistency_passed` its outcome (None: not run). `already_wrapped` is True when the spec
    already declares an adapter for it. `suspected_gap` says in words what goes wrong (None: nothing
    suspected). `likely_remedy` is a ready `third_party_helpers` spec entry (a `HelperAdapter.to_dict()`
    object) that a quick fix can insert as is, or None. `source` is `{"file", "line"}` of the helper's
    definition, or None. `divergence_notes` are further observations, one sentence each.
    """

    module: str
    function: str
    n_calls_ref: int
    n_calls_per_rank: dict[int, int]
    pattern: str
    pattern_confidence: float
    consistency_check: str
    consistency_passed: bool | None
    already_wrapped: bool
    suspected_gap: str | None
    likely_remedy: dict[str, Any] | None
    source: dict[str, Any] | None
    divergence_notes: list[str]

    @property
    def qualname(self) -> str:
        """`"module.function"`, the name spec entries (`HelperAdapter.qualname`) and handlers use."""
        return f"{self.module}.{self.function}"

    @property
    def flagged(self) -> bool:
        """True when something is suspected: a `suspected_gap`, or a failed consistency check."""
        return self.suspected_gap is not None or self.consistency_passed is False

    def to_dict(self) -> dict[str, Any]:
        """Every field plus the derived `qualname`; rank keys as decimal strings."""
        return self._encode(())

    def _encode(self, _path: _PathT) -> dict[str, Any]:
        return {
            "module": self.module,
            "function": self.function,
            "qualname": self.qualname,
            "n_calls_ref": int(self.n_calls_ref),
            "n_calls_per_rank": {str(int(r)): int(n) for r, n in self.n_calls_per_rank.items()},
            "pattern": self.pattern,
            "pattern_confidence": _enc_float(self.pattern_confidence),
            "consistency_check": self.consistency_check,
            "consistency_passed": None if self.consistency_passed is None else bool(self.consistency_passed),
            "already_wrapped": bool(self.already_wrapped),
            "suspected_gap": self.suspected_gap,
            "likely_remedy": _enc_free_dict(self.likely_remedy, (*_path, "likely_remedy")),
            "source": _enc_free_dict(self.source, (*_path, "source")),
            "divergence_notes": list(self.divergence_notes),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HelperDiagnosis:
        """Read a helper diagnosis; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> HelperDiagnosis:
        required = (
            "module",
            "function",
            "n_calls_ref",
            "n_calls_per_rank",
            "pattern",
            "pattern_confidence",
            "consistency_check",
            "consistency_passed",
            "already_wrapped",
            "suspected_gap",
            "likely_remedy",
            "source",
            "divergence_notes",
        )
        m = _fields(d, path, required, ignored=("qualname",))
        return cls(
            module=_get_str(m, "module", path),
            function=_get_str(m, "function", path),
            n_calls_ref=_dec_int(m["n_calls_ref"], (*path, "n_calls_ref")),
            n_calls_per_rank=_dec_rank_map(m["n_calls_per_rank"], (*path, "n_calls_per_rank"), _dec_int),
            pattern=_get_str(m, "pattern", path),
            pattern_confidence=_dec_float(m["pattern_confidence"], (*path, "pattern_confidence")),
            consistency_check=_get_str(m, "consistency_check", path),
            consistency_passed=_dec_opt_bool(m["consistency_passed"], (*path, "consistency_passed")),
            already_wrapped=_dec_bool(m["already_wrapped"], (*path, "already_wrapped")),
            suspected_gap=_get_opt_str(m, "suspected_gap", path),
            likely_remedy=_dec_opt_free_dict(m["likely_remedy"], (*path, "likely_remedy")),
            source=_dec_opt_free_dict(m["source"], (*path, "source")),
            divergence_notes=_dec_list(m["divergence_notes"], (*path, "divergence_notes"), _dec_str),
        )


@dataclass(eq=False)
class DivergentModule(_Record):
    """The first module, in call order, whose per-system output differs across ranks beyond the tolerances
    (from the layer hooks every rank runs).

    `module` is its name in the wrapper (`"readout.bias"`), `cls` its class (`"pkg.mod.Class"`; the JSON
    key is `class`), `key` the call (`"readout.bias#0"`: its first call), `ranks` the ranks whose value
    there differs from rank 0's, `max_abs` the largest difference between two ranks, `systems` the
    systems (rows) where they differ.
    """

    module: str
    cls: str
    key: str
    ranks: list[int]
    max_abs: float
    systems: list[int] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Every field (`cls` as `class`); a non-finite `max_abs` as a string."""
        return {
            "module": self.module,
            "class": self.cls,
            "key": self.key,
            "ranks": [int(r) for r in self.ranks],
            "max_abs": _enc_float(self.max_abs),
            "systems": [int(s) for s in self.systems],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DivergentModule:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> DivergentModule:
        m = _fields(d, path, ("module", "class", "key", "ranks", "max_abs"), ("systems",))
        return cls(
            module=_get_str(m, "module", path),
            cls=_get_str(m, "class", path),
            key=_get_str(m, "key", path),
            ranks=_dec_list(m["ranks"], (*path, "ranks"), _dec_int),
            max_abs=_dec_float(m["max_abs"], (*path, "max_abs")),
            systems=_dec_list(m.get("systems", []), (*path, "systems"), _dec_int),
        )


@dataclass(eq=False)
class RankDisagreement(_Record):
    """A replicated output (per-graph or global, not all-reduced) whose value differs between ranks
    beyond the tolerances: consolidation keeps one rank's value, so the attempt fails on this alone.

    `output` and `kind` name it; `ranks` are the ranks in disagreement (each differs from another one),
    `off_reference` those of them whose own value is out of tolerance against the single-process
    reference (empty when every rank is within tolerance of the reference but not of each other).
    `max_abs` is the largest difference between two ranks, `max_rel` that difference relative to the
    reference; `systems` the systems (rows of a per-graph output) where the ranks differ ([] for a
    global output); `first_module` the first module whose per-system value differs across ranks
    (None when the layer hooks found none or did not run).
    """

    output: str
    kind: str
    ranks: list[int]
    off_reference: list[int]
    max_abs: float
    max_rel: float
    systems: list[int] = dataclasses.field(default_factory=list)
    first_module: DivergentModule | None = None

    @property
    def summary(self) -> str:
        """One line: the output, the ranks, the size of the difference and the systems."""
        ranks = ", ".join(str(r) for r in self.ranks)
        text = f"ranks {ranks} disagree on {self.output} ({self.kind}, replicated): max |Δ| {self.max_abs:.3g}"
        if self.systems:
            text += f" in system{'s' if len(self.systems) > 1 else ''} {', '.join(str(s) for s in self.systems[:8])}"
            text += ", …" if len(self.systems) > 8 else ""
        if self.off_reference:
            off = ", ".join(str(r) for r in self.off_reference)
            text += f"; rank{'s' if len(self.off_reference) > 1 else ''} {off} off the single-process value"
        return text

    def to_dict(self) -> dict[str, Any]:
        """Every field plus the derived `summary`; non-finite numbers as strings."""
        return {
            "output": self.output,
            "kind": self.kind,
            "ranks": [int(r) for r in self.ranks],
            "off_reference": [int(r) for r in self.off_reference],
            "max_abs": _enc_float(self.max_abs),
            "max_rel": _enc_float(self.max_rel),
            "systems": [int(s) for s in self.systems],
            "first_module": None if self.first_module is None else self.first_module.to_dict(),
            "summary": self.summary,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RankDisagreement:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> RankDisagreement:
        m = _fields(
            d,
            path,
            ("output", "kind", "ranks", "off_reference", "max_abs", "max_rel"),
            ("systems", "first_module"),
            ignored=("summary",),
        )
        first = m.get("first_module")
        return cls(
            output=_get_str(m, "output", path),
            kind=_get_str(m, "kind", path),
            ranks=_dec_list(m["ranks"], (*path, "ranks"), _dec_int),
            off_reference=_dec_list(m["off_reference"], (*path, "off_reference"), _dec_int),
            max_abs=_dec_float(m["max_abs"], (*path, "max_abs")),
            max_rel=_dec_float(m["max_rel"], (*path, "max_rel")),
            systems=_dec_list(m.get("systems", []), (*path, "systems"), _dec_int),
            first_module=None if first is None else DivergentModule._read(first, (*path, "first_module")),
        )


@dataclass(eq=False)
class Rollback(_Record):
    """An auto-fix attempt that made the comparison worse than attempt `to_attempt` (by `attempt_rank`):
    its mutation was dropped and the next attempt started from `to_attempt`'s spec. `reason` says how
    it was worse, in words."""

    to_attempt: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """`{"to_attempt", "reason"}`."""
        return {"to_attempt": int(self.to_attempt), "reason": self.reason}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rollback:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> Rollback:
        m = _fields(d, path, ("to_attempt", "reason"))
        return cls(to_attempt=_dec_int(m["to_attempt"], (*path, "to_attempt")), reason=_get_str(m, "reason", path))


def _read_rollback(value: object, path: _PathT) -> Rollback | None:
    return None if value is None else Rollback._read(value, path)


@dataclass(eq=False)
class CrashTrace(_Record):
    """What a rank that raised had recorded before it did: `handler_counts` (the dispatch trace so far)
    and `modules`, the sub-modules whose forward had returned, in call order (`"name#call"`; the
    last one is the last module that finished before the crash). `phase` is the rank's phase then."""

    rank: int
    phase: str
    handler_counts: dict[str, int]
    modules: list[str]

    @property
    def last_module(self) -> str | None:
        """The last module whose forward returned before the crash, None if none did."""
        return self.modules[-1] if self.modules else None

    def to_dict(self) -> dict[str, Any]:
        """Every field."""
        return {
            "rank": int(self.rank),
            "phase": self.phase,
            "handler_counts": {k: int(v) for k, v in self.handler_counts.items()},
            "modules": list(self.modules),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CrashTrace:
        """Read one; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> CrashTrace:
        m = _fields(d, path, ("rank", "phase", "handler_counts", "modules"))
        return cls(
            rank=_dec_int(m["rank"], (*path, "rank")),
            phase=_get_str(m, "phase", path),
            handler_counts=_dec_str_map(m["handler_counts"], (*path, "handler_counts"), _dec_int),
            modules=_dec_list(m["modules"], (*path, "modules"), _dec_str),
        )


@dataclass(eq=False)
class Attempt(_Record):
    """One distributed run (or re-consolidation) under one spec, compared with the reference.

    `index` counts attempts from 0; `spec` is the spec tried; `rationale` says why it was tried and
    `rule` names the inference / auto-fix rule that produced it (None for the prior). `passed` is True
    iff every output is within tolerance and no error occurred. `max_abs_diff` / `max_rel_diff` map
    output name to its largest difference (None: not computable); `verdicts` map output name to its
    `OutputVerdict`. `handler_counts` is the dispatch trace (handler name -> times fired). `error` is the
    worker error, if any. `helper_diagnostics` are the helper-trace findings. `layer_divergence` (free
    form, None if not run) locates the first module whose outputs diverge, conventionally
    `{"first_module", "file", "line", "max_abs_diff", ...}`. `partition_health` is conventionally
    `{"per_rank": {rank: {"owned", "halo", "remote"}}, "degenerate": [message, ...]}` and
    `halo_completeness` e.g. `{"complete": bool, "message": str, "per_rank": {...}}`. `timings` maps a
    phase to seconds. `reused_run` is True when the attempt re-consolidated an earlier run's per-rank
    outputs instead of running ranks. `unrouted` lists the aggregations the ranks ran that no handler
    routed (`UnroutedOp`, merged over ranks); absent in older reports, read as [].
    `rank_disagreements` lists the replicated outputs whose value differs between ranks
    (`RankDisagreement`; any entry fails the attempt). `rolled_back` is set when this auto-fix attempt
    made things worse and the next one started from an earlier spec (`Rollback`). `crash_traces` hold,
    for each rank that raised, the handler counts and modules it had recorded before (`CrashTrace`).
    All three are absent in older reports and read as [] / None / [].
    `suspicious` lists the outputs within tolerance whose error is far above the round-off floor
    (`report_checks.SuspiciousOutput`; any entry fails the attempt); `system_health` the systems of
    the batch some rank cannot test (`report_checks.SystemHealth`; each is also a `degenerate`
    message). Both absent in older reports, read as [].
    """

    index: int
    spec: MLIPSpec
    rationale: str
    rule: str | None
    passed: bool
    max_abs_diff: dict[str, float | None]
    max_rel_diff: dict[str, float | None]
    verdicts: dict[str, OutputVerdict]
    handler_counts: dict[str, int]
    error: WorkerError | None
    helper_diagnostics: list[HelperDiagnosis]
    layer_divergence: dict[str, Any] | None
    partition_health: dict[str, Any]
    halo_completeness: dict[str, Any]
    timings: dict[str, float]
    reused_run: bool = False
    unrouted: list[UnroutedOp] = dataclasses.field(default_factory=list)
    rank_disagreements: list[RankDisagreement] = dataclasses.field(default_factory=list)
    rolled_back: Rollback | None = None
    crash_traces: list[CrashTrace] = dataclasses.field(default_factory=list)
    suspicious: list[SuspiciousOutput] = dataclasses.field(default_factory=list)
    system_health: list[SystemHealth] = dataclasses.field(default_factory=list)

    @property
    def failing_outputs(self) -> list[str]:
        """Names of the outputs whose verdict did not pass, in verdict order."""
        return [name for name, v in self.verdicts.items() if not v.passed]

    @property
    def degenerate(self) -> list[str]:
        """The degenerate-partition messages (`partition_health["degenerate"]`), [] if none."""
        found = self.partition_health.get("degenerate") or []
        return [str(m) for m in found] if isinstance(found, (list, tuple)) else [str(found)]

    def to_dict(self) -> dict[str, Any]:
        """Every field plus the derived `failing_outputs`; the spec as `MLIPSpec.to_dict()`."""
        return self._encode(())

    def _encode(self, _path: _PathT) -> dict[str, Any]:
        return {
            "index": int(self.index),
            "spec": self.spec.to_dict(),
            "rationale": self.rationale,
            "rule": self.rule,
            "passed": bool(self.passed),
            "failing_outputs": self.failing_outputs,
            "max_abs_diff": {k: _enc_opt_float(v) for k, v in self.max_abs_diff.items()},
            "max_rel_diff": {k: _enc_opt_float(v) for k, v in self.max_rel_diff.items()},
            "verdicts": {k: v.to_dict() for k, v in self.verdicts.items()},
            "handler_counts": {k: int(v) for k, v in self.handler_counts.items()},
            "error": None if self.error is None else self.error.to_dict(),
            "helper_diagnostics": [
                h._encode((*_path, "helper_diagnostics", i)) for i, h in enumerate(self.helper_diagnostics)
            ],
            "layer_divergence": _enc_free_dict(self.layer_divergence, (*_path, "layer_divergence")),
            "partition_health": _enc_free_dict(self.partition_health, (*_path, "partition_health")),
            "halo_completeness": _enc_free_dict(self.halo_completeness, (*_path, "halo_completeness")),
            "timings": {k: _enc_float(v) for k, v in self.timings.items()},
            "reused_run": bool(self.reused_run),
            "unrouted": [u.to_dict() for u in self.unrouted],
            "rank_disagreements": [d.to_dict() for d in self.rank_disagreements],
            "rolled_back": None if self.rolled_back is None else self.rolled_back.to_dict(),
            "crash_traces": [c.to_dict() for c in self.crash_traces],
            "suspicious": [x.to_dict() for x in self.suspicious],
            "system_health": [x.to_dict() for x in self.system_health],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attempt:
        """Read an attempt; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> Attempt:
        optional: tuple[str, ...] = ("reused_run", "unrouted", "rank_disagreements", "rolled_back", "crash_traces")
        optional += ("suspicious", "system_health")
        required = [f.name for f in dataclasses.fields(cls) if f.name not in optional]
        m = _fields(d, path, required, optional, ignored=("failing_outputs",))
        error = m["error"]
        return cls(
            index=_dec_int(m["index"], (*path, "index")),
            spec=_dec_spec(m["spec"], (*path, "spec")),
            rationale=_get_str(m, "rationale", path),
            rule=_get_opt_str(m, "rule", path),
            passed=_dec_bool(m["passed"], (*path, "passed")),
            max_abs_diff=_dec_str_map(m["max_abs_diff"], (*path, "max_abs_diff"), _dec_opt_float),
            max_rel_diff=_dec_str_map(m["max_rel_diff"], (*path, "max_rel_diff"), _dec_opt_float),
            verdicts=_dec_str_map(m["verdicts"], (*path, "verdicts"), OutputVerdict._read),
            handler_counts=_dec_str_map(m["handler_counts"], (*path, "handler_counts"), _dec_int),
            error=None if error is None else WorkerError._read(error, (*path, "error")),
            helper_diagnostics=_dec_list(m["helper_diagnostics"], (*path, "helper_diagnostics"), HelperDiagnosis._read),
            layer_divergence=_dec_opt_free_dict(m["layer_divergence"], (*path, "layer_divergence")),
            partition_health=_dec_free_dict(m["partition_health"], (*path, "partition_health")),
            halo_completeness=_dec_free_dict(m["halo_completeness"], (*path, "halo_completeness")),
            timings=_dec_str_map(m["timings"], (*path, "timings"), _dec_float),
            reused_run=_dec_bool(m["reused_run"], (*path, "reused_run")) if "reused_run" in m else False,
            unrouted=_dec_list(m.get("unrouted", []), (*path, "unrouted"), UnroutedOp._read),
            rank_disagreements=_dec_list(
                m.get("rank_disagreements", []), (*path, "rank_disagreements"), RankDisagreement._read
            ),
            rolled_back=_read_rollback(m.get("rolled_back"), (*path, "rolled_back")),
            crash_traces=_dec_list(m.get("crash_traces", []), (*path, "crash_traces"), CrashTrace._read),
            suspicious=_dec_list(m.get("suspicious", []), (*path, "suspicious"), _checks().SuspiciousOutput._read),
            system_health=_dec_list(m.get("system_health", []), (*path, "system_health"), _checks().SystemHealth._read),
        )


DEADLINE_STAGES: tuple[str, ...] = ("reference", "attempt", "between_attempts")
"""`DeadlineReached.stage` values: the reference run or an attempt's run was cut short at the deadline,
or the deadline passed between attempts (so the next one was not started)."""


@dataclass(eq=False)
class DeadlineReached(_Record):
    """The whole-validation deadline (`deadline_sec`) passed before the validation was done.

    `deadline_sec` is the deadline, `elapsed_sec` the seconds from the start to the stop, `attempts`
    the number of attempts made (the report stands on the best of them), `stage` one of
    `DEADLINE_STAGES`.
    """

    deadline_sec: float
    elapsed_sec: float
    attempts: int
    stage: str

    def to_dict(self) -> dict[str, Any]:
        """`{"deadline_sec", "elapsed_sec", "attempts", "stage"}`."""
        return {
            "deadline_sec": _enc_float(self.deadline_sec),
            "elapsed_sec": _enc_float(self.elapsed_sec),
            "attempts": int(self.attempts),
            "stage": self.stage,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DeadlineReached:
        """Read it; raises `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls, d: object, path: _PathT) -> DeadlineReached:
        m = _fields(d, path, ("deadline_sec", "elapsed_sec", "attempts", "stage"))
        stage = _get_str(m, "stage", path)
        if stage not in DEADLINE_STAGES:
            raise _bad((*path, "stage"), f"expected one of {', '.join(DEADLINE_STAGES)}, got {stage!r}")
        return cls(
            deadline_sec=_dec_float(m["deadline_sec"], (*path, "deadline_sec")),
            elapsed_sec=_dec_float(m["elapsed_sec"], (*path, "elapsed_sec")),
            attempts=_dec_int(m["attempts"], (*path, "attempts")),
            stage=stage,
        )


# --------------------------------------------------------------------------------------------------
# The one definition of the best attempt


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


def _read_checks(m: Mapping[str, Any]) -> dict[str, Any]:
    """The report's trust-check fields (`receptive_field`, `roundoff`, `sample_warnings`) as keywords."""
    checks = _checks()
    field, floor = m.get("receptive_field"), m.get("roundoff")
    return {
        "receptive_field": None if field is None else checks.ReceptiveField._read(field, ("receptive_field",)),
        "roundoff": None if floor is None else checks.RoundoffFloor._read(floor, ("roundoff",)),
        "sample_warnings": _dec_list(m.get("sample_warnings", []), ("sample_warnings",), checks.SampleWarning._read),
    }


@dataclass(eq=False)
class TraceReport(_Record):
    """The result of one validation: the bottom line, the working (or best) spec and every attempt.

    `ok` is the engine's bottom line (True iff an attempt passed). `spec` is the spec that passed, or
    the best one tried. `attempts` are in the order run. `next_action` tells the user what to do; its
    first line is a one-liner. `meta` holds world_size, device, backend, tolerances (`"atol"` /
    `"rtol"`: a number, or a dict per output name or output kind, with an optional `"default"`),
    versions and timings; an optional `"root"` (project directory) picks the traceback frame to show.
    `target` says what was validated, e.g. `{"factory": {"file", "line", "qualname"}, "sample": {...},
    "spec_path": ...}`. `deadline` is set when the whole-validation deadline stopped it early (its
    JSON field is written only then). `best_index` is the position in `attempts` of the attempt the
    report stands on (JSON `best_attempt`): the engine sets it with `best_attempt_index`, the one
    definition of "best"; `spec`, the headline in `next_action`, the verdict, the CLI, the daemon and
    the editor panel all read it, never recompute it. Left None with attempts present (a report built
    by hand, or read from an older document that lacks it), it is computed with `best_attempt_index`;
    a value out of range raises `ValueError`.
    `receptive_field` (`report_checks.ReceptiveField`), `roundoff` (`report_checks.RoundoffFloor`) and
    `sample_warnings` (`report_checks.SampleWarning`) say how far the verdict can be trusted; each is
    written to JSON only when set or non-empty.
    """

    ok: bool
    spec: MLIPSpec
    attempts: list[Attempt]
    next_action: str
    meta: dict[str, Any]
    target: dict[str, Any] | None = None
    deadline: DeadlineReached | None = None
    best_index: int | None = None
    receptive_field: ReceptiveField | None = None
    roundoff: RoundoffFloor | None = None
    sample_warnings: list[SampleWarning] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
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
        """The rationale of the best attempt when it passed and is not the first attempt; None otherwise."""
        best = self.best_attempt
        if best is None or not best.passed or best is self.attempts[0]:
            return None
        return best.rationale

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

    # ---- JSON

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: `report_version`, every field (`best_index` as `best_attempt`: the position
        of the best attempt in `attempts`, or null), and the derived `verdict` and `fix_applied`."""
        return {
            "report_version": REPORT_VERSION,
            "ok": bool(self.ok),
            "verdict": self.verdict,
            "fix_applied": self.fix_applied,
            "best_attempt": None if self.best_attempt is None else int(self.best_index or 0),
            "next_action": self.next_action,
            "spec": self.spec.to_dict(),
            "attempts": [a._encode(("attempts", i)) for i, a in enumerate(self.attempts)],
            "meta": _enc_free_dict(self.meta, ("meta",)),
            "target": _enc_free_dict(self.target, ("target",)),
            **({} if self.deadline is None else {"deadline": self.deadline.to_dict()}),
            **({} if self.receptive_field is None else {"receptive_field": self.receptive_field.to_dict()}),
            **({} if self.roundoff is None else {"roundoff": self.roundoff.to_dict()}),
            **({"sample_warnings": [w.to_dict() for w in self.sample_warnings]} if self.sample_warnings else {}),
        }

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
        m = _fields(
            d,
            (),
            ("ok", "spec", "attempts", "next_action", "meta"),
            ("target", "deadline", "best_attempt", "receptive_field", "roundoff", "sample_warnings"),
            ignored=("report_version", "verdict", "fix_applied"),
        )
        target = m.get("target")
        deadline = m.get("deadline")
        attempts = _dec_list(m["attempts"], ("attempts",), Attempt._read)
        best = _dec_opt_int(m.get("best_attempt"), ("best_attempt",))
        if best is not None and not 0 <= best < len(attempts):
            raise _bad(("best_attempt",), f"expected the position of one of the {len(attempts)} attempts, got {best}")
        if best is None and attempts and "best_attempt" in m:
            raise _bad(("best_attempt",), "null, but the report has attempts: expected the position of one of them")
        return cls(
            ok=_dec_bool(m["ok"], ("ok",)),
            spec=_dec_spec(m["spec"], ("spec",)),
            attempts=attempts,
            next_action=_get_str(m, "next_action", ()),
            meta=_dec_free_dict(m["meta"], ("meta",)),
            target=None if target is None else _dec_free_dict(target, ("target",)),
            deadline=None if deadline is None else DeadlineReached._read(deadline, ("deadline",)),
            best_index=best,
            **_read_checks(m),
        )

    def to_json(self, *, indent: bool = False) -> str:
        """The report as strict JSON text: one line by default (fits a JSON-lines pipe), or
        2-space-indented with a trailing newline when `indent` is True."""
        if indent:
            return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
        return orjson.dumps(self.to_dict()).decode()

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
        """A compact human report for terminals and CI logs (ANSI colors only when `color`).

        First line: the verdict and the first line of `next_action`. Then, per attempt: index, rule and
        rationale, PASS/FAIL, a table of outputs against the tolerances in `meta`, handler counts, the
        error (type, message, hint, innermost frame), flagged helpers with their remedy as JSON, the
        first divergent module, partition health per rank and degenerate messages. Last, the final spec
        as JSON. Control characters in user-supplied text are shown as `\\xNN` escapes; everything else
        (Unicode, quotes, backslashes) is printed as is.
        """
        return _Renderer(self, color).render()


# --------------------------------------------------------------------------------------------------
# Text rendering

_ANSI = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2"}
_VERDICT_COLOR = {"passed": "green", "failed": "red", "inconclusive": "yellow", "error": "red"}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(text: object, *, one_line: bool = False) -> str:
    """`text` with control characters shown as `\\xNN` (and, if `one_line`, newlines as spaces)."""
    s = str(text)
    if one_line:
        s = " ".join(s.split("\n"))
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s).replace("\t", "    ")


def _num(x: object) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return _clean(x, one_line=True)
    v = float(x)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if isinstance(x, numbers.Integral):
        return str(int(x))
    return f"{v:.3g}"


def _json_line(value: object) -> str:
    """Compact JSON of a free-form value (non-finite floats as strings, Unicode kept)."""
    try:
        return orjson.dumps(_enc_free(value, ())).decode()
    except TypeError:
        return _clean(repr(value), one_line=True)


def tolerance_for(tol: object, name: str, kind: str) -> object:
    """The tolerance that applies to output `name` of `kind`: `tol` itself, or its entry by name, then kind,
    then `"default"` when `tol` is a mapping (None when none applies)."""
    if isinstance(tol, Mapping):
        for key in (name, kind, "default"):
            if key in tol:
                return tol[key]
        return None
    return tol


def _rank_order(item: tuple[Any, Any]) -> tuple[int, int, str]:
    key = item[0]
    if isinstance(key, int):
        return (0, key, "")
    return (1, 0, str(key))


class _Renderer:
    def __init__(self, report: TraceReport, color: bool) -> None:
        self.report = report
        self.color = color
        self.lines: list[str] = []

    def paint(self, text: str, style: str) -> str:
        if not self.color:
            return text
        return f"\x1b[{_ANSI[style]}m{text}\x1b[0m"

    def add(self, text: str, indent: int = 0) -> None:
        pad = " " * indent
        for line in text.split("\n"):
            self.lines.append(pad + line if line else "")

    def render(self) -> str:
        r = self.report
        verdict = r.verdict
        action_lines = _clean(r.next_action).strip("\n").split("\n") if r.next_action.strip() else []
        head = self.paint(verdict.upper(), _VERDICT_COLOR[verdict])
        self.add(f"{head}: {action_lines[0]}" if action_lines else head)
        for line in action_lines[1:]:
            self.add(line, 2)
        self.render_meta()
        for attempt in r.attempts:
            self.add("")
            self.render_attempt(attempt)
        self.add("")
        self.add(self.paint("final spec:", "bold"))
        self.add(_clean(r.spec.to_json()).rstrip("\n"))
        return "\n".join(self.lines) + "\n"

    def render_meta(self) -> None:
        r = self.report
        parts = [f"{key} {_num(r.meta[key])}" for key in ("world_size", "device", "backend") if key in r.meta]
        parts += [
            f"{key} {_num(r.meta[key]) if not isinstance(r.meta[key], Mapping) else _json_line(r.meta[key])}"
            for key in ("atol", "rtol")
            if key in r.meta
        ]
        if parts:
            self.add(", ".join(parts), 2)
        hosts = r.meta.get("hosts")
        if r.meta.get("launcher") == "torchrun" and isinstance(hosts, list):
            self.add(_clean(f"ranks started by torchrun on {len(hosts)} host(s): {', '.join(map(str, hosts))}"), 2)
        factory = (r.target or {}).get("factory")
        if isinstance(factory, Mapping):
            where = f"{factory.get('file', '?')}:{factory.get('line', '?')}"
            self.add(_clean(f"target: {factory.get('qualname', '?')} ({where})", one_line=True), 2)
        fix = r.fix_applied
        if fix is not None:
            self.add(_clean(f"fix applied: {fix}", one_line=True), 2)
        self.render_checks()

    def render_checks(self) -> None:
        """The receptive field, the round-off floor and the sample warnings, one line each."""
        r, checks = self.report, _checks()
        if r.receptive_field is not None:
            line = checks.receptive_line(r.receptive_field)
            style = "yellow" if r.receptive_field.under_declared else "dim"
            self.add(self.paint(line.split(":", 1)[0] + ":", style) + _clean(line.split(":", 1)[1], one_line=True), 2)
        if r.roundoff is not None and r.roundoff.status == "measured":
            floors = ", ".join(f"{k} {_num(v)}" for k, v in r.roundoff.floors.items())
            text = f"round-off floor ({r.roundoff.note}): {floors}"
            self.add(_clean(text, one_line=True), 2)
        for w in r.sample_warnings:
            self.add(self.paint("sample:", "yellow") + " " + _clean(f"{w.message} {w.remedy}", one_line=True), 2)

    def render_attempt(self, a: Attempt) -> None:
        status = self.paint("PASS", "green") if a.passed else self.paint("FAIL", "red")
        rule = f" [{a.rule}]" if a.rule else ""
        reused = " (re-consolidated an earlier run)" if a.reused_run else ""
        self.add(_clean(f"attempt {a.index}{rule} ", one_line=True) + status + _clean(f"{reused}", one_line=True))
        if a.rationale:
            self.add(_clean(a.rationale), 2)
        self.render_outputs(a)
        if a.handler_counts:
            counts = ", ".join(f"{name}={n}" for name, n in a.handler_counts.items())
            self.add(_clean(f"handlers: {counts}", one_line=True), 2)
        else:
            self.add("handlers: none fired", 2)
        for x in a.suspicious:
            self.add(self.paint("suspicious:", "yellow") + " " + _clean(_checks().suspicious_line(x), one_line=True), 2)
        for u in a.unrouted:
            where = f" (called from {u.call_file}:{u.call_line})" if u.call_file else ""
            text = f"{u.op} ×{u.count} {u.aggregation} in {u.origin} at {u.location}{where}"
            self.add(self.paint("unrouted:", "yellow") + " " + _clean(text, one_line=True), 2)
        for d in a.rank_disagreements:
            self.add(self.paint("ranks disagree:", "red") + " " + _clean(d.summary, one_line=True), 2)
            m = d.first_module
            if m is not None:
                text = f"first module whose per-system value differs across ranks: {m.module} ({m.cls}), max |Δ| "
                self.add(_clean(text + _num(m.max_abs), one_line=True), 4)
        if a.rolled_back is not None:
            text = f"rolled back to attempt {a.rolled_back.to_attempt}: {a.rolled_back.reason}"
            self.add(self.paint("rolled back:", "yellow") + " " + _clean(text, one_line=True), 2)
        if a.error is not None:
            self.render_error(a.error)
        for c in a.crash_traces:
            last = c.last_module or "none"
            counts = ", ".join(f"{name}={n}" for name, n in c.handler_counts.items()) or "none fired"
            text = f"before the crash on rank {c.rank} ({c.phase}): handlers {counts}; last module returned: {last}"
            self.add(_clean(text, one_line=True), 4)
        for h in a.helper_diagnostics:
            if h.flagged:
                self.render_helper(h)
        quiet = [
            f"{h.qualname} (adapter declared)" if h.already_wrapped else h.qualname
            for h in a.helper_diagnostics
            if not h.flagged
        ]
        if quiet:
            self.add(_clean("helpers traced: " + ", ".join(quiet), one_line=True), 2)
        if a.layer_divergence:
            self.render_layers(a.layer_divergence)
        self.render_partition(a)

    def render_outputs(self, a: Attempt) -> None:
        names = list(a.verdicts) + [n for n in (*a.max_abs_diff, *a.max_rel_diff) if n not in a.verdicts]
        names = list(dict.fromkeys(names))
        if not names:
            return
        atol = self.report.meta.get("atol")
        rtol = self.report.meta.get("rtol")
        rows = [["output", "kind", "max abs", "atol", "max rel", "rtol", "status"]]
        styles: list[str | None] = [None]
        for name in names:
            v = a.verdicts.get(name)
            kind = v.kind if v else "?"
            abs_diff = v.max_abs_diff if v else a.max_abs_diff.get(name)
            rel_diff = v.max_rel_diff if v else a.max_rel_diff.get(name)
            if v is None:
                state, style = "-", None
            elif v.passed:
                state, style = v.status, "green"
            else:
                state, style = f"{v.status} ({v.n_failing}/{v.n_total})", "red"
                if v.worst_index is not None:
                    state += f" worst at {v.worst_index}"
            cells = [name, kind, _num(abs_diff), _num(tolerance_for(atol, name, kind))]
            cells += [_num(rel_diff), _num(tolerance_for(rtol, name, kind)), state]
            rows.append([_clean(c, one_line=True) for c in cells])
            styles.append(style)
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        for row, style in zip(rows, styles):
            text = "  ".join(cell.ljust(w) for cell, w in zip(row, widths))
            last = row[-1]
            self.add(f"{text}  {self.paint(last, style) if style else last}".rstrip(), 2)

    def render_error(self, e: WorkerError) -> None:
        where = f"rank {e.rank}" if e.rank is not None else "reference/parent"
        head = self.paint("error:", "red")
        self.add(f"{head} " + _clean(f"{e.type} on {where} during {e.phase}: {e.message}", one_line=True), 2)
        if e.hint:
            self.add(_clean(f"hint: {e.hint}"), 4)
        root = self.report.meta.get("root")
        frame = e.innermost_in(root) if isinstance(root, str) and root else None
        frame = frame or e.innermost
        if frame is not None:
            self.add(_clean(f"at {frame.file}:{frame.line} in {frame.function}", one_line=True), 4)

    def render_helper(self, h: HelperDiagnosis) -> None:
        calls = ", ".join(f"rank {r}: {n}" for r, n in sorted(h.n_calls_per_rank.items()))
        text = f"helper {h.qualname}: pattern {h.pattern} ({_num(h.pattern_confidence)}), calls ref {h.n_calls_ref}"
        self.add(
            self.paint("flagged", "yellow") + " " + _clean(text + (f"; {calls}" if calls else ""), one_line=True), 2
        )
        if h.source:
            self.add(_clean(f"defined at {h.source.get('file', '?')}:{h.source.get('line', '?')}", one_line=True), 4)
        if h.consistency_check:
            outcome = {True: "passed", False: "failed", None: "not run"}[h.consistency_passed]
            self.add(_clean(f"check {h.consistency_check}: {outcome}", one_line=True), 4)
        if h.suspected_gap:
            self.add(_clean(f"suspected gap: {h.suspected_gap}", one_line=True), 4)
        if h.likely_remedy is not None:
            self.add("remedy (third_party_helpers entry): " + _clean(_json_line(h.likely_remedy)), 4)
        for note in h.divergence_notes:
            self.add(_clean(f"- {note}", one_line=True), 4)

    def render_layers(self, ld: Mapping[str, Any]) -> None:
        module = ld.get("first_module")
        if module is None:
            self.add("layer divergence: " + _clean(_json_line(ld)), 2)
            return
        text = f"first divergent module: {module}"
        if ld.get("file"):
            text += f" ({ld['file']}:{ld.get('line', '?')})"
        if "max_abs_diff" in ld:
            text += f", max abs {_num(ld['max_abs_diff'])}"
        self.add(_clean(text, one_line=True), 2)

    def render_partition(self, a: Attempt) -> None:
        per_rank = a.partition_health.get("per_rank")
        if isinstance(per_rank, Mapping) and per_rank:
            cells = []
            for rank, stats in sorted(per_rank.items(), key=_rank_order):
                if isinstance(stats, Mapping):
                    counts = " ".join(f"{k} {_num(stats.get(k))}" for k in ("owned", "halo", "remote"))
                else:
                    counts = _num(stats)
                cells.append(f"rank {rank}: {counts}")
            self.add(_clean("partition: " + "; ".join(cells), one_line=True), 2)
        for message in a.degenerate:
            self.add(self.paint("degenerate:", "yellow") + " " + _clean(message, one_line=True), 2)
        hc = a.halo_completeness
        if hc and hc.get("complete") is False:
            self.add(self.paint("halo incomplete:", "yellow") + " " + _clean(hc.get("message", ""), one_line=True), 2)
