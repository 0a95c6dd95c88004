"""The distribution spec: how the runtime distributes a wrapper, as versioned, hand-editable JSON.

A spec is data, not code: every field is JSON, and callables and ops are referenced by name
(`"package.module:function"`, `"namespace::op"`). `MLIPSpec` is the whole document; `Distribution`,
`Policy`, `CustomOp` and `HelperAdapter` are its parts. All are plain mutable dataclasses.

Reading never guesses: an unknown field, a wrong type, a bad enum value, a newer format version or a
contradiction raises `SpecError`, whose `.path` is the JSON path of the problem (`$` for the document,
`distribution.policy.scatter_mode`, `distribution.third_party_helpers[1].replacement`, ...) and whose
message says what to do. When the JSON text is at hand (`from_json`, `load`, `validate_json`) the error
also carries the 1-based line and column of the offending key. `validate_dict` / `validate_json` collect
every error instead of stopping at the first.

`json_schema()` derives a JSON Schema (draft 2020-12) from the same dataclass fields, metadata and enum
tuples that drive the reader, so the two cannot drift apart; `python -m distcheck.spec --write-schema
PATH` writes it for the editor.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import functools
import hashlib
import math
import os
import re
import sys
import types
import typing
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union

import orjson

from .spectext import Locations

if TYPE_CHECKING:
    from .spec_file import FileState

__all__ = [
    "ARG_TRANSFORMS",
    "GATHER_MODES",
    "HELPER_KINDS",
    "OUTPUT_KINDS",
    "OUTPUT_TRANSFORMS",
    "POLICY_KINDS",
    "SCATTER_MODES",
    "SCHEMA_URI",
    "SPEC_FORMAT",
    "SPEC_VERSION",
    "TORCHSCRIPT_MODES",
    "CustomOp",
    "Distribution",
    "HelperAdapter",
    "MLIPSpec",
    "PathPart",
    "Policy",
    "SpecError",
    "format_path",
    "json_schema",
    "locate_path",
    "validate_dict",
    "validate_json",
    "write_schema",
]

SPEC_FORMAT = "distcheck-spec"
"""The value of the top-level `format` field of every spec document."""
SPEC_VERSION = 1
"""The newest spec version this distcheck reads and the version it writes."""
SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect `json_schema()` produces."""

POLICY_KINDS: tuple[str, ...] = ("halo", "replicated")
SCATTER_MODES: tuple[str, ...] = ("halo_correction", "local")
TORCHSCRIPT_MODES: tuple[str, ...] = ("scripted", "eager")
GATHER_MODES: tuple[str, ...] = ("halo_read",)
OUTPUT_KINDS: tuple[str, ...] = ("per_node", "per_graph", "global")
HELPER_KINDS: tuple[str, ...] = ("python", "reduction")
ARG_TRANSFORMS: tuple[str, ...] = ("gather_inputs", "slice_owned", "none")
OUTPUT_TRANSFORMS: tuple[str, ...] = ("scatter_outputs", "all_reduce_sum", "none")

# Patterns are written so that Python's `re.fullmatch` and ECMA-262 (JSON Schema) read them alike.
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_IDENT}(\.{_IDENT})*"
_OP_NAME_PATTERN = rf"^{_IDENT}::{_IDENT}(\.{_IDENT})?$"
_DOTTED_PATTERN = rf"^{_DOTTED}$"
_REPLACEMENT_PATTERN = rf"^{_DOTTED}:{_DOTTED}$"
_POSITION_PATTERN = r"^(0|[1-9][0-9]*)$"

PathPart = str | int
"""One step of a JSON path: an object key (str) or a list index (int)."""


# --------------------------------------------------------------------------------------------------
# Errors and paths


_PLAIN_KEY = re.compile(r"[\w\-]+")


def format_path(parts: Sequence[PathPart]) -> str:
    """The JSON path of `parts` as shown to users: `$` for the root, keys dotted, list items `[i]`.

    A key that is not made of (Unicode) letters, digits, `_` and `-` is written as a quoted JSON string in
    brackets (`output_kinds["my.output"]`), so every path reads back unambiguously.
    """
    if not parts:
        return "$"
    out: list[str] = []
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _PLAIN_KEY.fullmatch(part):
            out.append(f".{part}" if out else part)
        else:
            out.append(f"[{orjson.dumps(part).decode()}]")
    return "".join(out)


class SpecError(ValueError):
    """A spec that cannot be read, with the JSON path of the problem and what to do about it.

    `path` is the dotted JSON path (`$` for the document itself), `parts` the same path as keys and
    indices, `message` the explanation (it always ends with what to change). `line` and `column` are
    1-based (columns count Unicode code points) and set when the JSON text was at hand; `file` is the
    file the spec came from, if any. `str(err)` is `f"{path}: {message}"`.
    """

    def __init__(
        self,
        path: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        parts: Sequence[PathPart] | None = None,
        file: str | None = None,
    ) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message
        self.line = line
        self.column = column
        self.parts: tuple[PathPart, ...] = tuple(parts) if parts is not None else ()
        self.file = file

    @classmethod
    def at(cls, parts: Sequence[PathPart], message: str) -> SpecError:
        """An error at the path `parts` (formatted with `format_path`)."""
        return cls(format_path(parts), message, parts=parts)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        kwargs = {
            "line": self.line,
            "column": self.column,
            "parts": self.parts,
            "file": self.file,
        }
        return (_rebuild_spec_error, (self.path, self.message, kwargs))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record: path, message, line, column, file."""
        return {
            "path": self.path,
            "message": self.message,
            "line": self.line,
            "column": self.column,
            "file": self.file,
        }


def _rebuild_spec_error(path: str, message: str, kwargs: dict[str, Any]) -> SpecError:
    return SpecError(path, message, **kwargs)


class _Sink:
    """Collects errors while a document is walked."""

    def __init__(self) -> None:
        self.errors: list[SpecError] = []

    def add(self, parts: Sequence[PathPart], message: str) -> None:
        self.errors.append(SpecError.at(parts, message))

    def has(self, parts: Sequence[PathPart]) -> bool:
        key = tuple(parts)
        return any(e.parts == key for e in self.errors)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return f"Python {type(value).__name__}"


def _show(value: object, limit: int = 40) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _quote_all(values: Sequence[str]) -> str:
    return ", ".join(orjson.dumps(v).decode() for v in values)


# --------------------------------------------------------------------------------------------------
# Field metadata: one description drives the reader, the writer and the JSON Schema.
#
# Keys: title, description (editor hover); enum (allowed strings); pattern + pattern_hint (regex and
# the words the error uses); min_length; minimum / exclusive_minimum (numbers) and range_hint (what to
# write instead); example (JSON text used when a required field is missing); items / keys / values
# (sub-metadata for list items, dict keys and dict values); unique (True for plain items, or the
# attribute that identifies an object item) and
# unique_noun (how an item is called in the duplicate message).


def _meta(title: str, description: str, **rules: Any) -> dict[str, Any]:
    return {"title": title, "description": description, **rules}


_OUTPUT_NAME = {
    "min_length": 1,
    "title": "Output name",
    "description": "A key of the wrapper's output mapping.",
}


@dataclass
class Policy:
    """How atoms are laid out on ranks and how per-atom aggregations are corrected.

    `halo_width`, when given, is a width in Å greater than 0; an int is stored as a float. `None`
    means the runtime derives it from the wrapper (cutoff, interaction depth, scatter mode).
    """

    _schema_title: ClassVar[str] = "Policy"
    _schema_description: ClassVar[str] = "How atoms are laid out on ranks."

    kind: str = field(
        default="halo",
        metadata=_meta(
            "Policy kind",
            "halo: each rank holds its owned atoms, then halo atoms; replicated: every rank holds every "
            "atom (a control).",
            enum=POLICY_KINDS,
        ),
    )
    scatter_mode: str = field(
        default="halo_correction",
        metadata=_meta(
            "Scatter mode",
            "halo_correction: halo one cutoff deep, halo rows refreshed from their owners after each "
            "per-atom aggregation; local: no per-layer exchange, the halo must cover the receptive field.",
            enum=SCATTER_MODES,
        ),
    )
    gather_mode: str = field(
        default="halo_read",
        metadata=_meta("Gather mode", "How per-atom inputs are read: halo_read.", enum=GATHER_MODES),
    )
    halo_width: float | None = field(
        default=None,
        metadata=_meta(
            "Halo width (Å)",
            "Depth of the halo in Å; null = derived from the wrapper (cutoff, depth, mode).",
            exclusive_minimum=0,
            range_hint="write a width in Å above 0, or null to derive it from the wrapper",
        ),
    )

    def __post_init__(self) -> None:
        if isinstance(self.halo_width, int) and not isinstance(self.halo_width, bool):
            self.halo_width = float(self.halo_width)

    def to_dict(self) -> dict[str, Any]:
        """The policy as a JSON object, every field written, in field order."""
        return _fields_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """Read a policy object; raises the first `SpecError` (paths relative to the policy)."""
        return _from_part_dict(cls, d)


@dataclass
class CustomOp:
    """An opaque kernel (`torch.ops.namespace.name`) with transforms per argument and per output.

    `arg_transforms` and `output_transforms` map decimal positions (`"0"`, `"1"`, ...) to a transform
    from `ARG_TRANSFORMS` / `OUTPUT_TRANSFORMS`; positions not listed are passed through unchanged.
    """

    _schema_title: ClassVar[str] = "Custom op"
    _schema_description: ClassVar[str] = (
        "An opaque torch.ops kernel and how to transform its arguments and outputs."
    )

    op: str = field(
        metadata=_meta(
            "Op name",
            'The op as "namespace::name" (torch.ops.namespace.name).',
            pattern=_OP_NAME_PATTERN,
            pattern_hint='a custom op name "namespace::name" (as in torch.ops.namespace.name)',
            example='"mylib::fused_message"',
        )
    )
    arg_transforms: dict[str, str] = field(
        default_factory=dict,
        metadata=_meta(
            "Argument transforms",
            'Transform per argument position ("0", "1", ...): gather_inputs, slice_owned or none.',
            keys={
                "pattern": _POSITION_PATTERN,
                "pattern_hint": 'an argument position written as a decimal integer such as "0" or "2"',
                "title": "Argument position",
                "description": "Zero-based position of the argument.",
            },
            values={
                "enum": ARG_TRANSFORMS,
                "title": "Argument transform",
                "description": "gather_inputs: refresh halo rows first; slice_owned: pass owned rows only.",
            },
        ),
    )
    output_transforms: dict[str, str] = field(
        default_factory=dict,
        metadata=_meta(
            "Output transforms",
            'Transform per output position ("0", "1", ...): scatter_outputs, all_reduce_sum or none.',
            keys={
                "pattern": _POSITION_PATTERN,
                "pattern_hint": 'an output position written as a decimal integer such as "0" or "1"',
                "title": "Output position",
                "description": "Zero-based position of the output.",
            },
            values={
                "enum": OUTPUT_TRANSFORMS,
                "title": "Output transform",
                "description": "scatter_outputs: send halo rows to owners; all_reduce_sum: sum over ranks.",
            },
        ),
    )

    def to_dict(self) -> dict[str, Any]:
        """The op as a JSON object, every field written, in field order."""
        return _fields_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CustomOp:
        """Read a custom-op object; raises the first `SpecError` (paths relative to the entry)."""
        return _from_part_dict(cls, d)


@dataclass
class HelperAdapter:
    """A helper in another package that is swapped while a rank runs.

    `kind="python"` swaps `module_path.attr_name` for `replacement`, given as
    `"package.module:function"`. `kind="reduction"` uses the generic per-system reduction adapter:
    zero the halo rows of argument `atom_arg` along dimension `atom_dim`, call the original, all-reduce
    the result; it takes no replacement. A `reduction` entry is written with kind, module_path,
    attr_name, atom_arg, atom_dim; a `python` entry with kind, module_path, attr_name, replacement
    (and atom_arg / atom_dim only if they were changed from 0, which validation then rejects).
    """

    _schema_title: ClassVar[str] = "Third-party helper"
    _schema_description: ClassVar[str] = "A helper function in another package, swapped while a rank runs."

    kind: str = field(
        metadata=_meta(
            "Adapter kind",
            'python: swap in "replacement"; reduction: the generic per-system reduction adapter.',
            enum=HELPER_KINDS,
            example='"reduction"',
        )
    )
    module_path: str = field(
        metadata=_meta(
            "Module",
            'Dotted module that defines the helper, e.g. "aimnet.nbops".',
            pattern=_DOTTED_PATTERN,
            pattern_hint='a dotted module path such as "aimnet.nbops"',
            example='"aimnet.nbops"',
        )
    )
    attr_name: str = field(
        metadata=_meta(
            "Attribute",
            'Name of the helper in its module, e.g. "mol_sum".',
            pattern=_DOTTED_PATTERN,
            pattern_hint='an attribute name such as "mol_sum" (dots allowed for class attributes)',
            example='"mol_sum"',
        )
    )
    replacement: str | None = field(
        default=None,
        metadata=_meta(
            "Replacement",
            'python helpers only: "package.module:function" to call instead.',
            pattern=_REPLACEMENT_PATTERN,
            pattern_hint='a replacement "package.module:function" (dotted module, a colon, the function)',
            example='"mypkg.dd:owned_segment_sum"',
        ),
    )
    atom_arg: int = field(
        default=0,
        metadata=_meta(
            "Atom argument",
            "reduction helpers only: position of the per-atom argument.",
            minimum=0,
        ),
    )
    atom_dim: int = field(
        default=0,
        metadata=_meta(
            "Atom dimension",
            "reduction helpers only: dimension of that argument that runs over atoms.",
        ),
    )

    @property
    def qualname(self) -> str:
        """`"module_path.attr_name"`, the name the dispatch trace and the diagnostics use."""
        return f"{self.module_path}.{self.attr_name}"

    def to_dict(self) -> dict[str, Any]:
        """The entry as a JSON object with the keys its kind uses (see the class docstring)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "module_path": self.module_path,
            "attr_name": self.attr_name,
        }
        if self.kind == "python":
            out["replacement"] = self.replacement
            if self.atom_arg != 0:
                out["atom_arg"] = self.atom_arg
            if self.atom_dim != 0:
                out["atom_dim"] = self.atom_dim
        else:
            if self.replacement is not None:
                out["replacement"] = self.replacement
            out["atom_arg"] = self.atom_arg
            out["atom_dim"] = self.atom_dim
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HelperAdapter:
        """Read a helper entry; raises the first `SpecError` (paths relative to the entry)."""
        return _from_part_dict(cls, d)


@dataclass
class Distribution:
    """The distribution section: the policy, the custom ops and the third-party helper adapters.

    Custom ops are unique by `op`, helpers by `qualname`.
    """

    _schema_title: ClassVar[str] = "Distribution"
    _schema_description: ClassVar[str] = "How the runtime distributes the wrapper."

    policy: Policy = field(
        default_factory=Policy,
        metadata=_meta("Policy", "How atoms are laid out on ranks and aggregations corrected."),
    )
    custom_ops: list[CustomOp] = field(
        default_factory=list,
        metadata=_meta(
            "Custom ops",
            "One entry per opaque kernel (torch.ops) the runtime cannot see into.",
            unique="op",
            unique_noun="custom op",
        ),
    )
    third_party_helpers: list[HelperAdapter] = field(
        default_factory=list,
        metadata=_meta(
            "Third-party helpers",
            "Helpers in other packages swapped while a rank runs.",
            unique="qualname",
            unique_noun="helper",
        ),
    )
    torchscript: str = field(
        default="scripted",
        metadata=_meta(
            "TorchScript",
            "scripted: ranks run TorchScript compiled (aggregations inside it are unseen); eager: ranks run "
            "it as Python, so the handlers route every aggregation.",
            enum=TORCHSCRIPT_MODES,
        ),
    )

    def to_dict(self) -> dict[str, Any]:
        """The section as a JSON object, every field written, in field order."""
        return _fields_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Distribution:
        """Read a distribution object; raises the first `SpecError` (paths relative to the section)."""
        return _from_part_dict(cls, d)


@dataclass
class MLIPSpec:
    """A whole spec document: how the runtime distributes a wrapper and consolidates its outputs.

    Promises: `from_dict(spec.to_dict()) == spec` and `from_json(spec.to_json()) == spec` for every
    valid spec; reading rejects anything it does not understand with a `SpecError` naming the JSON
    path; `save` never writes an invalid spec and never leaves a half-written file.
    """

    _schema_title: ClassVar[str] = "distcheck distribution spec"
    _schema_description: ClassVar[str] = (
        "How distcheck's runtime distributes an MLIP wrapper over ranks and consolidates its outputs."
    )

    distribution: Distribution = field(
        default_factory=Distribution,
        metadata=_meta("Distribution", "Policy, custom ops and third-party helper adapters."),
    )
    system_reductions: bool = field(
        default=True,
        metadata=_meta(
            "System reductions",
            "Route per-atom to per-system reductions (index_add, scatter_add, ...) through the runtime.",
        ),
    )
    output_kinds: dict[str, str] = field(
        default_factory=dict,
        metadata=_meta(
            "Output kinds",
            "Kind per output: per_node (n_atoms, ...), per_graph (n_systems, ...) or global.",
            keys=_OUTPUT_NAME,
            values={
                "enum": OUTPUT_KINDS,
                "title": "Output kind",
                "description": "per_node, per_graph or global (already correct on every rank).",
            },
        ),
    )
    all_reduce_outputs: list[str] = field(
        default_factory=list,
        metadata=_meta(
            "All-reduce outputs",
            "Outputs each rank holds only a partial of; summed over ranks.",
            items=_OUTPUT_NAME,
            unique=True,
            unique_noun="output",
        ),
    )
    owned_only_outputs: list[str] = field(
        default_factory=list,
        metadata=_meta(
            "Owned-only outputs",
            "per_node outputs read from owned rows only (instead of summing halo copies).",
            items=_OUTPUT_NAME,
            unique=True,
            unique_noun="output",
        ),
    )

    # ---- construction and conversion

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MLIPSpec:
        """Read a spec document (a parsed JSON object); raises the first `SpecError` found."""
        sink = _Sink()
        spec = _parse_document(d, sink)
        if sink.errors:
            raise sink.errors[0]
        assert spec is not None
        return spec

    def to_dict(self) -> dict[str, Any]:
        """The full document, defaults included, keys in the documented order (`halo_width: null` too)."""
        return {"format": SPEC_FORMAT, "version": SPEC_VERSION, **_fields_to_dict(self)}

    @classmethod
    def from_json(cls, text: str | bytes | bytearray | memoryview) -> MLIPSpec:
        """Read a spec from JSON text; a `SpecError` carries the line and column of the problem."""
        return _spec_from_text(text, file=None)

    def to_json(self) -> str:
        """The document as 2-space-indented JSON with a trailing newline (not validated)."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MLIPSpec:
        """Read a spec file.

        A missing or unreadable file raises `SpecError` with path `$` (chained from the `OSError`), so
        callers need to catch one exception type; `err.file` names the file.
        """
        name = os.fspath(path)
        try:
            data = Path(name).read_bytes()
        except FileNotFoundError as exc:
            raise SpecError(
                "$",
                f"file {name!r} does not exist; check the path, "
                "or create the spec with MLIPSpec().save(path)",
                parts=(),
                file=name,
            ) from exc
        except OSError as exc:
            raise SpecError(
                "$",
                f"cannot read {name!r}: {exc.strerror or exc}; check the path and its permissions",
                parts=(),
                file=name,
            ) from exc
        return _spec_from_text(data, file=name)

    def save(self, path: str | os.PathLike[str], *, expected: FileState | None = None) -> bool:
        """Validate, then write the spec atomically (temp file + `os.replace`), creating parent dirs.

        A new file gets `to_json()`. An existing spec file is edited minimally, as the editor's quick
        fixes edit it: only the members whose meaning changed are rewritten, so its indentation, key
        order, compact arrays, line endings and trailing newline survive, and members it leaves out
        that hold their default stay out (`distcheck.spec_file.spec_text_over`). Returns True when the
        file changed (False: it already held exactly that text, nothing was written).

        Raises the first `SpecError` of `validate()` without touching the file if the spec is invalid.
        With `expected` (a `distcheck.spec_file.FileState` taken when the file was read), raises
        `SpecConflict` and leaves the file alone when it changed since; without it, the file is still
        re-read just before the rename and a change in between raises `SpecConflict`. An existing file
        keeps its permission bits; a symlink is written through to its target.
        """
        from .spec_file import write_spec

        name = os.fspath(path)
        errors = self.validate()
        if errors:
            err = errors[0]
            err.file = name
            raise err
        return write_spec(self, name, expected)

    @classmethod
    def coerce(cls, x: object) -> MLIPSpec:
        """An `MLIPSpec` from what a wrapper's `distribution_spec` may hold.

        An `MLIPSpec` gives a deep copy, a mapping is read with `from_dict`, a `str` or `os.PathLike`
        is loaded as a file; anything else raises `TypeError`.
        """
        if isinstance(x, MLIPSpec):
            return x.copy()
        if isinstance(x, Mapping):
            return cls.from_dict(x)
        if isinstance(x, (str, os.PathLike)):
            return cls.load(x)
        raise TypeError(
            f"cannot make an MLIPSpec from a {type(x).__name__}; pass an MLIPSpec, a dict holding the "
            "spec's JSON object, or a path (str or os.PathLike) to a spec JSON file"
        )

    def copy(self) -> MLIPSpec:
        """A deep copy: mutating it never changes this spec."""
        return copy.deepcopy(self)

    # ---- queries

    def validate(self) -> list[SpecError]:
        """Every error in this (possibly hand-mutated) spec, as `validate_dict(self.to_dict())` sees it."""
        return validate_dict(self.to_dict())

    def signature(self) -> str:
        """A stable 16-hex-digit hash of the spec's meaning, for de-duplicating specs.

        Computed over the canonical JSON (sorted keys) with `all_reduce_outputs`,
        `owned_only_outputs`, custom ops (by op) and helpers (by qualname) sorted, since their order
        carries no meaning; any other difference changes it.
        """
        d = self.to_dict()
        d["all_reduce_outputs"] = sorted(d["all_reduce_outputs"])
        d["owned_only_outputs"] = sorted(d["owned_only_outputs"])
        dist = d["distribution"]
        dist["custom_ops"] = sorted(dist["custom_ops"], key=lambda o: str(o["op"]))
        dist["third_party_helpers"] = sorted(
            dist["third_party_helpers"], key=lambda h: (str(h["module_path"]), str(h["attr_name"]))
        )
        if dist.get("torchscript") == "scripted":
            del dist["torchscript"]  # the default: signatures of specs from before the field stay the same
        blob = orjson.dumps(d, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(blob).hexdigest()[:16]

    def helper(self, qualname: str) -> HelperAdapter | None:
        """The declared helper whose `qualname` (`"module_path.attr_name"`) is `qualname`, or None."""
        for h in self.distribution.third_party_helpers:
            if h.qualname == qualname:
                return h
        return None


_Part = TypeVar("_Part", Policy, CustomOp, HelperAdapter, Distribution)


def _fields_to_dict(obj: Any) -> dict[str, Any]:
    return {f.name: _to_json_value(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _to_json_value(value: Any) -> Any:
    if isinstance(value, (Policy, CustomOp, HelperAdapter, Distribution)):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_to_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _to_json_value(v) for k, v in value.items()}
    return value


def _from_part_dict(cls: type[_Part], d: Mapping[str, Any]) -> _Part:
    sink = _Sink()
    value, ok = _parse_object(cls, d, (), sink)
    if sink.errors:
        raise sink.errors[0]
    assert ok and isinstance(value, cls)
    return value


# --------------------------------------------------------------------------------------------------
# Reading: a walk over the dataclass fields, collecting every error


class _Bad:
    """Marks a value that could not be read."""


_BAD = _Bad()


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _union_args(tp: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return typing.get_args(tp)
    return None


def _expected_words(tp: Any, meta: Mapping[str, Any]) -> tuple[str, str]:
    """(what was expected, what to write instead) for a type error on a value of type `tp`."""
    args = _union_args(tp)
    if args is not None:
        inner = next(a for a in args if a is not type(None))
        what, _ = _expected_words(inner, meta)
        return f"{what} or null", f"write {what} or null"
    if tp is bool:
        return "a boolean", "set it to true or false"
    if tp is int:
        return "an integer", "write a whole number such as 0"
    if tp is float:
        return "a number", "write a number such as 6.0"
    if tp is str:
        if "enum" in meta:
            return "a string", f"set it to one of {_quote_all(meta['enum'])}"
        return "a string", "write it as a JSON string in double quotes"
    origin = typing.get_origin(tp)
    if origin is list:
        return "an array", "write a JSON array [...]"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "an object", "write a JSON object {...}"
    return str(tp), "fix its type"


def _type_error(
    sink: _Sink, parts: Sequence[PathPart], tp: Any, meta: Mapping[str, Any], value: object
) -> None:
    what, fix = _expected_words(tp, meta)
    sink.add(parts, f"expected {what}, got {_json_type(value)} {_show(value)}; {fix}")


def _parse_value(
    tp: Any, meta: Mapping[str, Any], value: Any, parts: tuple[PathPart, ...], sink: _Sink
) -> Any:
    """The value read as `tp`, or `_BAD` after recording why not (best-effort for containers)."""
    args = _union_args(tp)
    if args is not None:
        if value is None and type(None) in args:
            return None
        inner = next(a for a in args if a is not type(None))
        if not _is_instance_of(inner, value):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        return _parse_value(inner, meta, value, parts, sink)
    if tp is bool:
        if not isinstance(value, bool):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        return _check_number(meta, value, parts, sink)
    if tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        if not math.isfinite(value):
            sink.add(parts, f"expected a finite number, got {value!r}; write a finite number")
            return _BAD
        checked = _check_number(meta, value, parts, sink)
        return checked if isinstance(checked, _Bad) else float(value)
    if tp is str:
        if not isinstance(value, str):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        return _check_string(meta, value, parts, sink)
    origin = typing.get_origin(tp)
    if origin is list:
        return _parse_list(typing.get_args(tp)[0], meta, value, parts, sink)
    if origin is dict:
        return _parse_dict(typing.get_args(tp)[1], meta, value, parts, sink)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        obj, _ok = _parse_object(tp, value, parts, sink)
        return obj
    raise TypeError(f"spec field type {tp!r} is not supported")  # a bug in this module, not in a spec


def _is_instance_of(tp: Any, value: object) -> bool:
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


def _check_number(meta: Mapping[str, Any], value: float, parts: tuple[PathPart, ...], sink: _Sink) -> Any:
    name = parts[-1] if parts else "value"
    if "exclusive_minimum" in meta and not value > meta["exclusive_minimum"]:
        low = meta["exclusive_minimum"]
        fix = meta.get("range_hint", f"write a number above {low}")
        sink.add(parts, f"{name} must be greater than {low}, got {_show(value)}; {fix}")
        return _BAD
    if "minimum" in meta and not value >= meta["minimum"]:
        low = meta["minimum"]
        sink.add(parts, f"{name} must be {low} or more, got {_show(value)}; write a number of at least {low}")
        return _BAD
    return value


def _check_string(meta: Mapping[str, Any], value: str, parts: tuple[PathPart, ...], sink: _Sink) -> Any:
    if "enum" in meta and value not in meta["enum"]:
        sink.add(
            parts, f"expected one of {_quote_all(meta['enum'])}, got {_show(value)}; set it to one of those"
        )
        return _BAD
    if meta.get("min_length", 0) > len(value):
        sink.add(parts, 'expected a non-empty string, got ""; write the name')
        return _BAD
    if "pattern" in meta and not re.fullmatch(meta["pattern"], value):
        hint = meta.get("pattern_hint", f"a string matching {meta['pattern']}")
        sink.add(parts, f"expected {hint}, got {_show(value)}; rewrite it in that form")
        return _BAD
    return value


def _parse_list(
    item_tp: Any, meta: Mapping[str, Any], value: Any, parts: tuple[PathPart, ...], sink: _Sink
) -> Any:
    if not isinstance(value, (list, tuple)):
        _type_error(sink, parts, list[Any], meta, value)
        return _BAD
    item_meta: Mapping[str, Any] = meta.get("items", {})
    unique = meta.get("unique")
    noun = meta.get("unique_noun", "entry")
    seen: dict[Any, int] = {}
    out: list[Any] = []
    for i, item in enumerate(value):
        before = len(sink.errors)
        parsed = _parse_value(item_tp, item_meta, item, (*parts, i), sink)
        if len(sink.errors) != before or isinstance(parsed, _Bad):
            continue
        if unique:
            key = parsed if unique is True else getattr(parsed, unique)
            if key in seen:
                first = format_path((*parts, seen[key]))
                sink.add(
                    (*parts, i),
                    f"{noun} {_show(key)} is listed twice (first at {first}); remove this entry"
                    + (" or merge the two" if unique is not True else ""),
                )
                continue
            seen[key] = i
        out.append(parsed)
    return out


def _parse_dict(
    value_tp: Any, meta: Mapping[str, Any], value: Any, parts: tuple[PathPart, ...], sink: _Sink
) -> Any:
    if not isinstance(value, Mapping):
        _type_error(sink, parts, dict[str, Any], meta, value)
        return _BAD
    key_meta: Mapping[str, Any] = meta.get("keys", {})
    value_meta: Mapping[str, Any] = meta.get("values", {})
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            sink.add(
                (*parts, str(key)), f"keys must be strings, got {_json_type(key)} {_show(key)}; quote the key"
            )
            continue
        before = len(sink.errors)
        if _check_string(key_meta, key, (*parts, key), sink) is _BAD:
            continue
        parsed = _parse_value(value_tp, value_meta, item, (*parts, key), sink)
        if len(sink.errors) == before and not isinstance(parsed, _Bad):
            out[key] = parsed
    return out


def _unknown_field_message(key: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    guess = f"did you mean {_show(close[0])}? " if close else ""
    return (
        f"unknown field {_show(key)}; {guess}allowed fields here are {_quote_all(allowed)}; "
        "remove it or correct its name"
    )


def _parse_object(
    cls: type,
    value: Any,
    parts: tuple[PathPart, ...],
    sink: _Sink,
    *,
    extra_keys: Sequence[str] = (),
) -> tuple[Any, bool]:
    """(instance of `cls` or `_BAD`, whether the object was error-free)."""
    if not isinstance(value, Mapping):
        _type_error(sink, parts, cls, {}, value)
        return _BAD, False
    before = len(sink.errors)
    hints = _type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    allowed = [*extra_keys, *fields]
    values: dict[str, Any] = {}
    for key, item in value.items():
        if key in extra_keys:
            continue
        if not isinstance(key, str) or key not in fields:
            sink.add((*parts, str(key)), _unknown_field_message(str(key), allowed))
            continue
        parsed = _parse_value(hints[key], fields[key].metadata, item, (*parts, key), sink)
        if not isinstance(parsed, _Bad):
            values[key] = parsed
    for name, f in fields.items():
        if name in value:
            continue
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            example = f.metadata.get("example", "...")
            sink.add((*parts, name), f'required field "{name}" is missing; add it, e.g. "{name}": {example}')
    check = _SEMANTIC_CHECKS.get(cls)
    if check is not None:
        check(value, values, parts, sink)
    if len(sink.errors) != before:
        return _BAD, False
    return cls(**values), True


def _check_helper(
    raw: Mapping[str, Any], values: dict[str, Any], parts: tuple[PathPart, ...], sink: _Sink
) -> None:
    kind = values.get("kind")
    if kind == "python":
        if raw.get("replacement") is None:
            sink.add(
                (*parts, "replacement"),
                'a "python" helper needs a replacement; add "replacement": "package.module:function", '
                'or use "kind": "reduction" for the generic per-system reduction adapter',
            )
        for key in ("atom_arg", "atom_dim"):
            if key in raw:
                sink.add(
                    (*parts, key),
                    f'{key} applies only to "reduction" helpers; remove it or set "kind": "reduction"',
                )
    elif kind == "reduction":
        rparts = (*parts, "replacement")
        if raw.get("replacement") is not None and not sink.has(rparts):
            sink.add(
                rparts,
                'a "reduction" helper uses the generic adapter and takes no replacement; remove '
                '"replacement" or set "kind": "python"',
            )


def _check_spec(
    raw: Mapping[str, Any], values: dict[str, Any], parts: tuple[PathPart, ...], sink: _Sink
) -> None:
    kinds: dict[str, str] = values.get("output_kinds", {})
    owned = raw.get("owned_only_outputs")
    reduced = raw.get("all_reduce_outputs")
    reduced_names = (
        {r for r in reduced if isinstance(r, str)} if isinstance(reduced, (list, tuple)) else set()
    )
    if not isinstance(owned, (list, tuple)):
        return
    for i, name in enumerate(owned):
        if not isinstance(name, str):
            continue
        iparts = (*parts, "owned_only_outputs", i)
        if sink.has(iparts):
            continue  # already reported (a duplicate)
        kind = kinds.get(name)
        kind_path = format_path((*parts, "output_kinds", name))
        if kind is not None and kind != "per_node":
            sink.add(
                iparts,
                f"{_show(name)} has output kind {_show(kind)} ({kind_path}) but owned_only_outputs holds "
                f'per_node outputs only; remove it from owned_only_outputs or set {kind_path} to "per_node"',
            )
        elif name in reduced_names:
            sink.add(
                iparts,
                f"{_show(name)} is in both all_reduce_outputs and owned_only_outputs, which contradict "
                "each other; keep it in one of them",
            )


_SEMANTIC_CHECKS: dict[type, Any] = {HelperAdapter: _check_helper, MLIPSpec: _check_spec}


def _parse_document(d: object, sink: _Sink) -> MLIPSpec | None:
    """The spec in `d`, or None after recording errors; stops early on a foreign or newer document."""
    if not isinstance(d, Mapping):
        sink.add(
            (), f"expected a JSON object at the top level, got {_json_type(d)}; write the spec as {{...}}"
        )
        return None
    if "format" not in d:
        sink.add(("format",), f'required field "format" is missing; add "format": "{SPEC_FORMAT}"')
    elif d["format"] != SPEC_FORMAT:
        sink.add(
            ("format",),
            f'expected "{SPEC_FORMAT}", got {_show(d["format"])}; this is not a distcheck spec — if it is '
            f'meant to be one, set "format": "{SPEC_FORMAT}"',
        )
        return None
    if "version" not in d:
        sink.add(("version",), f'required field "version" is missing; add "version": {SPEC_VERSION}')
    else:
        version = d["version"]
        if not isinstance(version, int) or isinstance(version, bool):
            sink.add(
                ("version",),
                f"expected an integer version, got {_json_type(version)} {_show(version)}; "
                f'set "version": {SPEC_VERSION}',
            )
        elif version > SPEC_VERSION:
            sink.add(
                ("version",),
                f"this spec has version {version} but this distcheck reads versions up to {SPEC_VERSION}: "
                "the spec was written by a newer distcheck; upgrade distcheck (pip install -U distcheck)",
            )
            return None
        elif version < 1:
            sink.add(("version",), f'version must be 1 or more, got {version}; set "version": {SPEC_VERSION}')
    spec, ok = _parse_object(MLIPSpec, d, (), sink, extra_keys=("format", "version"))
    return spec if ok and not sink.errors else None


def validate_dict(d: object) -> list[SpecError]:
    """Every error in the spec document `d` (a parsed JSON object), in the order found; [] if valid.

    Only stops early when `d` is not a distcheck spec (wrong `format`) or is from a newer version,
    where the other errors would be noise.
    """
    sink = _Sink()
    _parse_document(d, sink)
    return sink.errors


# --------------------------------------------------------------------------------------------------
# JSON text: decoding, locating paths, duplicate keys


def _decode(text: str | bytes | bytearray | memoryview, file: str | None) -> tuple[str, Any]:
    """(the text as str, the parsed JSON); raises SpecError at `$` for undecodable or broken JSON."""
    if isinstance(text, str):
        src = text
    else:
        raw = bytes(text)
        try:
            src = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpecError(
                "$",
                f"the file is not valid UTF-8 (bad byte at offset {exc.start}); save it as UTF-8",
                parts=(),
                file=file,
            ) from exc
    if src.startswith("\ufeff"):
        src = src[1:]
    try:
        data = orjson.loads(src)
    except orjson.JSONDecodeError as exc:
        raise SpecError(
            "$",
            f"invalid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}; fix the syntax there",
            line=exc.lineno,
            column=exc.colno,
            parts=(),
            file=file,
        ) from exc
    return src, data


class _Locator:
    """Line and column of paths in spec text, read off the one JSON-text scanner (`spectext`)."""

    def __init__(self, text: str) -> None:
        self.scanner = Locations(text)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def locate(self, parts: Sequence[PathPart]) -> tuple[int, int] | None:
        offset = self.scanner.offset(parts)
        return None if offset is None else self.position(offset)


def locate_path(text: str, parts: Sequence[PathPart]) -> tuple[int, int] | None:
    """1-based (line, column) of the key at `parts` in JSON `text` (of the item, for list items).

    A path that is not in the text (a missing field) falls back to its nearest present ancestor.
    Best effort: None if the text cannot be scanned. Columns count Unicode code points.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    return _Locator(text).locate(parts)


def _errors_in_text(src: str, data: Any, file: str | None) -> list[SpecError]:
    errors = validate_dict(data)
    locator: _Locator | None = None
    if errors or isinstance(data, Mapping):
        locator = _Locator(src)
        for child, offset in locator.scanner.duplicates:
            err = SpecError.at(
                child,
                f"key {_show(child[-1])} appears more than once in this object and only the last one "
                "counts; remove the other occurrences",
            )
            err.line, err.column = locator.position(offset)
            errors.append(err)
    for err in errors:
        err.file = file
        if err.line is None and locator is not None:
            where = locator.locate(err.parts)
            if where is not None:
                err.line, err.column = where
    return errors


def validate_json(text: str | bytes | bytearray | memoryview, *, file: str | None = None) -> list[SpecError]:
    """Every error in the JSON spec `text`, each with line and column; [] if valid.

    Broken JSON gives one error at `$`; a key repeated within one object is reported too (JSON readers
    keep only the last one).
    """
    try:
        src, data = _decode(text, file)
    except SpecError as err:
        return [err]
    return _errors_in_text(src, data, file)


def _spec_from_text(text: str | bytes | bytearray | memoryview, file: str | None) -> MLIPSpec:
    src, data = _decode(text, file)
    errors = _errors_in_text(src, data, file)
    if errors:
        raise errors[0]
    return MLIPSpec.from_dict(data)


# --------------------------------------------------------------------------------------------------
# JSON Schema, derived from the dataclasses


def _schema_for(tp: Any, meta: Mapping[str, Any]) -> dict[str, Any]:
    args = _union_args(tp)
    if args is not None:
        inner = next(a for a in args if a is not type(None))
        schema = _schema_for(inner, meta)
        schema["type"] = [schema["type"], "null"]
        return schema
    if tp is bool:
        return {"type": "boolean"}
    if tp is int or tp is float:
        schema = {"type": "integer" if tp is int else "number"}
        if "minimum" in meta:
            schema["minimum"] = meta["minimum"]
        if "exclusive_minimum" in meta:
            schema["exclusiveMinimum"] = meta["exclusive_minimum"]
        return schema
    if tp is str:
        schema = {"type": "string"}
        if "enum" in meta:
            schema["enum"] = list(meta["enum"])
        if "pattern" in meta:
            schema["pattern"] = meta["pattern"]
        if "min_length" in meta:
            schema["minLength"] = meta["min_length"]
        return schema
    origin = typing.get_origin(tp)
    if origin is list:
        item_tp = typing.get_args(tp)[0]
        schema = {
            "type": "array",
            "items": _annotated(_schema_for(item_tp, meta.get("items", {})), meta.get("items")),
        }
        if meta.get("unique") is True:
            schema["uniqueItems"] = True
        return schema
    if origin is dict:
        value_tp = typing.get_args(tp)[1]
        keys: Mapping[str, Any] = meta.get("keys", {})
        names = _schema_for(str, keys)
        del names["type"]
        schema = {"type": "object"}
        if names:
            schema["propertyNames"] = names
        schema["additionalProperties"] = _annotated(
            _schema_for(value_tp, meta.get("values", {})), meta.get("values")
        )
        return schema
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _object_schema(tp)
    raise TypeError(f"spec field type {tp!r} has no schema")


def _annotated(schema: dict[str, Any], meta: Mapping[str, Any] | None) -> dict[str, Any]:
    if not meta or "title" not in meta:
        return schema
    return {"title": meta["title"], "description": meta["description"], **schema}


def _object_schema(cls: type, extra_properties: Mapping[str, Any] | None = None) -> dict[str, Any]:
    hints = _type_hints(cls)
    properties: dict[str, Any] = dict(extra_properties or {})
    required = list(extra_properties or {})
    for f in dataclasses.fields(cls):
        inner = _schema_for(hints[f.name], f.metadata)
        inner.pop("title", None)
        inner.pop("description", None)
        prop: dict[str, Any] = {
            "title": f.metadata["title"],
            "description": f.metadata["description"],
            **inner,
        }
        if f.default is not dataclasses.MISSING:
            prop["default"] = _to_json_value(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            prop["default"] = _to_json_value(f.default_factory())
        else:
            required.append(f.name)
        properties[f.name] = prop
    schema: dict[str, Any] = {
        "title": getattr(cls, "_schema_title", cls.__name__),
        "description": getattr(cls, "_schema_description", ""),
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    if cls is HelperAdapter:
        schema["allOf"] = [
            {
                "if": {"properties": {"kind": {"const": "python"}}, "required": ["kind"]},
                "then": {
                    "required": ["replacement"],
                    "properties": {"replacement": {"type": "string"}},
                    "not": {"anyOf": [{"required": ["atom_arg"]}, {"required": ["atom_dim"]}]},
                },
            },
            {
                "if": {"properties": {"kind": {"const": "reduction"}}, "required": ["kind"]},
                "then": {"properties": {"replacement": {"type": "null"}}},
            },
        ]
    return schema


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a spec document, derived from the dataclasses.

    Every property has a title and a short description, every object forbids additional
    properties, `format` and `version` are required, and `python` helpers require `replacement`.
    Semantic checks that span fields (owned-only outputs vs. output kinds, duplicate helpers) are
    only done by the reader.
    """
    top = {
        "format": {
            "title": "Format",
            "description": f'Always "{SPEC_FORMAT}".',
            "const": SPEC_FORMAT,
        },
        "version": {
            "title": "Version",
            "description": f"Spec format version; this distcheck writes and reads {SPEC_VERSION}.",
            "type": "integer",
            "const": SPEC_VERSION,
        },
    }
    body = _object_schema(MLIPSpec, top)
    return {"$schema": SCHEMA_URI, **body}


def _schema_text() -> str:
    return orjson.dumps(json_schema(), option=orjson.OPT_INDENT_2).decode() + "\n"


def write_schema(path: str | os.PathLike[str]) -> None:
    """Write `json_schema()` to `path` as 2-space-indented JSON (keys in definition order) + newline."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_schema_text(), encoding="utf-8")


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m distcheck.spec",
        description="distcheck spec tools: write the JSON Schema, check spec files.",
    )
    parser.add_argument("--write-schema", metavar="PATH", help="write the spec's JSON Schema to PATH")
    parser.add_argument("--validate", metavar="SPEC", nargs="+", help="check spec files and list every error")
    args = parser.parse_args(argv)
    if not args.write_schema and not args.validate:
        parser.error("nothing to do: give --write-schema PATH and/or --validate SPEC...")
    status = 0
    if args.write_schema:
        write_schema(args.write_schema)
        print(f"wrote {args.write_schema}")
    for name in args.validate or ():
        try:
            errors = validate_json(Path(name).read_bytes(), file=name)
        except OSError as exc:
            errors = [
                SpecError("$", f"cannot read the file: {exc.strerror or exc}; check the path", file=name)
            ]
        for err in errors:
            where = f"{name}:{err.line}:{err.column}" if err.line is not None else name
            print(f"{where}: {err}", file=sys.stderr)
        status = max(status, 1 if errors else 0)
    return status


if __name__ == "__main__":
    sys.exit(_main())
