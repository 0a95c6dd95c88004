"""The whole spec document, `MLIPSpec`: how the runtime distributes a wrapper, as hand-editable JSON.

A spec is data, not code: every field is JSON, and callables and ops are referenced by name
(`"package.module:function"`, `"namespace::op"`). Its parts are in `parts`; the field metadata that
drives the reader, the writer and the JSON Schema in `fields`. The reading and writing methods call
`reader`, `codec` and `file`, imported when called so that the model has no import cycle.
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from .errors import SpecError
from .fields import OUTPUT_KINDS, OUTPUT_NAME, SPEC_FORMAT, SPEC_VERSION, fields_to_dict, meta
from .parts import Distribution, HelperAdapter

if TYPE_CHECKING:
    from .file import FileState

__all__ = ["MLIPSpec"]


def _output_names(title: str, description: str) -> dict[str, Any]:
    """The metadata of a list of output names, each listed at most once."""
    return meta(title, description, items=OUTPUT_NAME, unique=True, unique_noun="output")


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
        metadata=meta("Distribution", "Policy, custom ops and third-party helper adapters."),
    )
    system_reductions: bool = field(
        default=True,
        metadata=meta(
            "System reductions",
            "Route per-atom to per-system reductions (index_add, scatter_add, ...) through the runtime.",
        ),
    )
    output_kinds: dict[str, str] = field(
        default_factory=dict,
        metadata=meta(
            "Output kinds",
            "Kind per output: per_node (n_atoms, ...), per_graph (n_systems, ...) or global.",
            keys=OUTPUT_NAME,
            values={
                "enum": OUTPUT_KINDS,
                "title": "Output kind",
                "description": "per_node, per_graph or global (already correct on every rank).",
            },
        ),
    )
    all_reduce_outputs: list[str] = field(
        default_factory=list,
        metadata=_output_names(
            "All-reduce outputs",
            "Outputs each rank holds only a partial of; summed over ranks.",
        ),
    )
    owned_only_outputs: list[str] = field(
        default_factory=list,
        metadata=_output_names(
            "Owned-only outputs",
            "per_node outputs read from owned rows only (instead of summing halo copies).",
        ),
    )

    # ---- construction and conversion

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MLIPSpec:
        """Read a spec document (a parsed JSON object); raises the first `SpecError` found."""
        from .reader import read_spec

        return read_spec(d)

    def to_dict(self) -> dict[str, Any]:
        """The full document, defaults included, keys in the documented order (`halo_width: null` too)."""
        return {"format": SPEC_FORMAT, "version": SPEC_VERSION, **fields_to_dict(self)}

    @classmethod
    def from_json(cls, text: str | bytes | bytearray | memoryview) -> MLIPSpec:
        """Read a spec from JSON text; a `SpecError` carries the line and column of the problem."""
        from .codec import spec_from_text

        return spec_from_text(text, file=None)

    def to_json(self) -> str:
        """The document as 2-space-indented JSON with a trailing newline (not validated)."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MLIPSpec:
        """Read a spec file.

        A missing or unreadable file raises `SpecError` with path `$` (chained from the `OSError`), so
        callers need to catch one exception type; `err.file` names the file.
        """
        from .codec import load_spec

        return load_spec(path)

    def save(self, path: str | os.PathLike[str], *, expected: FileState | None = None) -> bool:
        """Validate, then write the spec atomically (temp file + `os.replace`), creating parent dirs.

        A new file gets `to_json()`. An existing spec file is edited minimally, as the editor's quick
        fixes edit it: only the members whose meaning changed are rewritten, so its indentation, key
        order, compact arrays, line endings and trailing newline survive, and members it leaves out
        that hold their default stay out (`distcheck.spec.file.spec_text_over`). Returns True when the
        file changed (False: it already held exactly that text, nothing was written).

        Raises the first `SpecError` of `validate()` without touching the file if the spec is invalid.
        With `expected` (a `distcheck.spec.file.FileState` taken when the file was read), raises
        `SpecConflict` and leaves the file alone when it changed since; without it, the file is still
        re-read just before the rename and a change in between raises `SpecConflict`. An existing file
        keeps its permission bits; a symlink is written through to its target.
        """
        from .file import write_spec

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
        from .reader import validate_dict

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
