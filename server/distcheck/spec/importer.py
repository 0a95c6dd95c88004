"""Reading nvalchemi-toolkit's spec files: a version-2 `MLIPSpec` JSON document → a distcheck `MLIPSpec`.

The toolkit (`nvalchemi.distributed.MLIPSpec.save`) writes `{"version": 2, "core": {...},
"system_reductions", "node_energy_key", "node_virial_key", "gp_replicate_geometry",
"owned_only_outputs", "all_reduce_outputs", "output_kinds": [[name, kind], ...]}`; `import_core`
reads `core`. `import_anchor_spec` (a parsed document or a file) and `anchor_spec_from_text` give an
`AnchorImport`: the converted spec, which distcheck's own reader has accepted, and an `ImportNote`
for every field with no exact distcheck equivalent (its JSON path, line and column in the toolkit's
file, what the converted spec does instead and what to do). What the toolkit's reader would refuse
(a version other than 2, a missing `core`, a wrong type, an unknown transform), and what distcheck's
reader refuses in the result (an owned-only output that is not per-node, an op listed twice), raise
`SpecError` at the toolkit file's path; `convert_anchor_text` lists every such error instead.

Imports no torch (orjson only).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .codec import _decode, load_spec
from .errors import SpecError, json_type, show
from .fields import OUTPUT_KINDS, SPEC_FORMAT, SPEC_VERSION
from .import_core import BAD, TOOLKIT, Conversion, ImportNote, Parts, convert_core
from .jsontext import Locations
from .model import MLIPSpec
from .reader import read_spec, validate_dict

__all__ = [
    "ANCHOR_SPEC_VERSION",
    "AnchorImport",
    "ImportNote",
    "anchor_spec_from_text",
    "convert_anchor_text",
    "import_anchor_spec",
]

ANCHOR_SPEC_VERSION = 2
"""The version of nvalchemi-toolkit's spec files this reads (the one its `MLIPSpec.save` writes)."""

_TOP_KEYS = (
    "version",
    "core",
    "system_reductions",
    "node_energy_key",
    "node_virial_key",
    "gp_replicate_geometry",
    "owned_only_outputs",
    "all_reduce_outputs",
    "output_kinds",
)
_NAMES = "a list of output name strings"


@dataclass
class AnchorImport:
    """A converted spec and what did not carry over.

    `spec` is valid (distcheck's reader accepted it); `notes` lists, in file order of discovery, every
    field of the toolkit's file that the spec does not hold as it was (`ImportNote`); `file` is the
    file read, if any.
    """

    spec: MLIPSpec
    notes: list[ImportNote] = field(default_factory=list)
    file: str | None = None

    @property
    def unmapped(self) -> list[ImportNote]:
        """The notes of fields whose meaning the spec does not keep (`lossy`): each needs a look."""
        return [n for n in self.notes if n.lossy]

    @property
    def exact(self) -> bool:
        """True when every field the toolkit's file holds has its meaning in `spec`."""
        return not self.unmapped


def _kind_pairs(c: Conversion, raw: Any) -> list[tuple[Parts, Any, Any]]:
    """(path, name, kind) of each entry of `output_kinds`: `[[name, kind], ...]` as the toolkit writes it, or
    `{name: kind}` as it also reads; a name or kind of the wrong type is `BAD` (its error recorded)."""
    if isinstance(raw, Mapping):
        return [
            (("output_kinds", k), k, c.typed(v, ("output_kinds", k), (str,), "an output kind string"))
            for k, v in raw.items()
        ]
    found: list[tuple[Parts, Any, Any]] = []
    for i, item in enumerate(raw):
        here: Parts = ("output_kinds", i)
        pair = c.typed(item, here, (list,), 'a [name, kind] pair such as ["forces", "per_node"]')
        if pair is not BAD and len(pair) != 2:
            c.error(here, f'expected a [name, kind] pair, got {len(pair)} items; write ["forces", "per_node"]')
        elif pair is not BAD:
            name = c.typed(pair[0], (*here, 0), (str,), "an output name string")
            found.append((here, name, c.typed(pair[1], (*here, 1), (str,), "an output kind string")))
    return found


def _outputs(c: Conversion, doc: Mapping[str, Any], out: dict[str, Any]) -> None:
    """The output classification: lists and `output_kinds` (pairs, or an object as the toolkit also reads)."""
    for key in ("owned_only_outputs", "all_reduce_outputs"):
        names = c.value(doc, key, (), (list,), _NAMES, default=[])
        if names is not BAD:
            out[key] = [c.typed(n, (key, i), (str,), "an output name string") for i, n in enumerate(names)]
    raw = c.value(doc, "output_kinds", (), (list, Mapping), "a list of [name, kind] pairs", default=[])
    if raw is BAD:
        return
    kinds: dict[str, Any] = {}
    for here, name, kind in _kind_pairs(c, raw):
        if name is BAD or kind is BAD:
            continue
        if kind == "unknown":
            c.note(
                here,
                f'output {show(name)} has kind "unknown"; the converted spec leaves it out and distcheck '
                "infers its kind from the reference run, as the toolkit does; nothing to do",
                lossy=False,
            )
            continue
        if kind not in OUTPUT_KINDS:
            c.error(
                here,
                f"{show(kind)} is not an output kind of {TOOLKIT}; write one of per_node, per_graph, global or unknown",
            )
            continue
        c.came_from(("output_kinds", name), here)
        kinds[name] = kind
    out["output_kinds"] = kinds


def _keys_for_reductions(c: Conversion, doc: Mapping[str, Any]) -> None:
    """Notes for the fields that ask the toolkit to build an output from another; distcheck does not."""
    for key, built in (("node_energy_key", "energy"), ("node_virial_key", "stress")):
        name = c.value(doc, key, (), (str, type(None)), "an output name string or null")
        if isinstance(name, str):
            c.note(
                (key,),
                f'{key} {show(name)} has no distcheck equivalent: the toolkit replaces the wrapper\'s "{built}" '
                f"with the owned-row sum of {show(name)} over ranks, distcheck compares what the wrapper returns; "
                f'compute "{built}" from {show(name)} in forward with a per-atom → per-system reduction '
                "(index_add, scatter_add, ...), which distcheck routes over ranks",
            )
    replicate = c.value(doc, "gp_replicate_geometry", (), (bool,), "true or false")
    if replicate is True:
        c.note(
            ("gp_replicate_geometry",),
            "gp_replicate_geometry applies to the toolkit's graph-parallel policy only, which distcheck does not "
            "have (it cuts the system into slabs with a halo); nothing was converted; remove it",
        )


def _convert(data: Any, c: Conversion) -> dict[str, Any] | None:
    """The distcheck document for the toolkit's parsed document `data` (None when it cannot be one)."""
    if not isinstance(data, Mapping):
        c.error(
            (),
            f"expected a JSON object at the top level, got {json_type(data)}; give a file that "
            f"{TOOLKIT}'s MLIPSpec.save wrote",
        )
        return None
    if data.get("format") == SPEC_FORMAT:
        c.error(
            ("format",),
            "this is already a distcheck spec, nothing to import; use it as it is "
            "(distcheck validate TARGET --spec FILE), or check it with python -m distcheck.spec "
            "--validate FILE",
        )
        return None
    version = data.get("version")
    if "version" not in data:
        c.error(
            ("version",),
            f'required field "version" is missing: a spec file of {TOOLKIT} has "version": '
            f"{ANCHOR_SPEC_VERSION}; give a file its MLIPSpec.save wrote",
        )
        return None
    if version != ANCHOR_SPEC_VERSION or isinstance(version, bool):
        c.error(
            ("version",),
            f"version {show(version)}: distcheck imports version {ANCHOR_SPEC_VERSION} of "
            f"{TOOLKIT}'s spec files only (what its MLIPSpec.save writes); save the spec again "
            "with a toolkit that writes version 2, or write the distcheck spec by hand "
            '(docs/spec.md, "The spec")',
        )
        return None
    c.unknown_keys(data, (), _TOP_KEYS, "the document")
    out: dict[str, Any] = {"format": SPEC_FORMAT, "version": SPEC_VERSION}
    core = c.value(data, "core", (), (Mapping,), 'an object {"policy": ...}', required='{"policy": {"kind": "halo"}}')
    if core is not BAD:
        out["distribution"] = convert_core(c, core, ("core",))
    reductions = c.value(data, "system_reductions", (), (bool,), "true or false", default=True)
    if reductions is not BAD:
        out["system_reductions"] = reductions
    _keys_for_reductions(c, data)
    _outputs(c, data, out)
    return out


def _place(text: str | None, c: Conversion, file: str | None) -> None:
    """Lines and columns of every note and error in the toolkit file's `text`, and keys it repeats."""
    where = Locations(text) if text is not None else None
    if where is not None:
        for parts, _offset in where.duplicates:
            c.note(
                parts,
                f"key {show(parts[-1])} appears more than once in this object; only the last one was "
                "converted (as the toolkit reads it); remove the other occurrences",
            )
    for i, note in enumerate(c.notes):
        found = where.locate(note.parts) if where is not None else None
        if found is not None:
            c.notes[i] = replace(note, line=found[0], column=found[1])
    for err in c.sink.errors:
        err.file = file
        found = where.locate(err.parts) if where is not None else None
        if found is not None:
            err.line, err.column = found


def _run(data: Any, text: str | None, file: str | None) -> tuple[AnchorImport | None, list[SpecError]]:
    c = Conversion()
    doc = _convert(data, c)
    if doc is not None and not c.sink.errors:
        for err in validate_dict(doc):  # distcheck's reader on the result, its errors at the toolkit's paths
            c.error(c.theirs(err.parts), f"distcheck cannot take this: {err.message}")
    _place(text, c, file)
    if c.sink.errors or doc is None:
        return None, c.sink.errors
    return AnchorImport(read_spec(doc), c.notes, file), []


def convert_anchor_text(
    text: str | bytes | bytearray | memoryview, *, file: str | None = None
) -> tuple[AnchorImport | None, list[SpecError]]:
    """(the import, []) for the toolkit's JSON `text`, or (None, every error) when it cannot be imported.

    Every error is a `SpecError` at the toolkit file's JSON path with its line and column (broken JSON or
    text that is not UTF-8: one error at `$`); `file` names the file in them.
    """
    try:
        src, data = _decode(text, file)
    except SpecError as err:
        return None, [err]
    return _run(data, src, file)


def anchor_spec_from_text(text: str | bytes | bytearray | memoryview, *, file: str | None = None) -> AnchorImport:
    """The import of the toolkit's JSON `text`; raises the first `SpecError` (with its line and column)."""
    result, errors = convert_anchor_text(text, file=file)
    if errors:
        raise errors[0]
    assert result is not None
    return result


def read_anchor_file(path: str | os.PathLike[str]) -> tuple[AnchorImport | None, list[SpecError]]:
    """`convert_anchor_text` of the file at `path`; a missing or unreadable file is one error at `$`."""
    name = os.fspath(path)
    try:
        data = Path(name).read_bytes()
    except OSError as exc:
        what = "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be read: {exc.strerror or exc}"
        return None, [SpecError("$", f"file {name!r} {what}; check the path", parts=(), file=name)]
    return convert_anchor_text(data, file=name)


def import_anchor_spec(source: Mapping[str, Any] | str | os.PathLike[str]) -> AnchorImport:
    """Convert an nvalchemi-toolkit version-2 `MLIPSpec`: a parsed JSON document (a mapping, as its
    `MLIPSpec.to_dict()` gives) or the path of a file its `MLIPSpec.save` wrote.

    Returns an `AnchorImport` whose `spec` distcheck's reader accepted and whose `notes` name every field
    without an exact equivalent; raises the first `SpecError` (at the toolkit's JSON path, with `file`,
    line and column when read from a file) for input that cannot be imported.
    """
    if isinstance(source, Mapping):
        result, errors = _run(source, None, None)
    else:
        result, errors = read_anchor_file(source)
    if errors:
        raise errors[0]
    assert result is not None
    return result


def existing_spec_problem(path: str | os.PathLike[str]) -> str | None:
    """Why an import must not be written to `path` (a directory, a file that is not a distcheck spec, which
    it would overwrite), or None (no file there, or a distcheck spec the import may update)."""
    name = os.fspath(path)
    if os.path.isdir(name):
        return f"{name} is a directory; give a file path for the converted spec"
    if not os.path.lexists(name):
        return None
    try:
        load_spec(name)
    except SpecError:
        return f"{name} exists and is not a distcheck spec, so it was left alone; give a new path, or remove it first"
    return None
