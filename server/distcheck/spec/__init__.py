"""The distribution spec: how the runtime distributes a wrapper, as versioned, hand-editable JSON.

A spec is data, not code: every field is JSON, and callables and ops are referenced by name
(`"package.module:function"`, `"namespace::op"`). `MLIPSpec` is the whole document; `Distribution`,
`Policy`, `CustomOp` and `HelperAdapter` are its parts. All are plain mutable dataclasses.

Reading never guesses: an unknown field, a wrong type, a bad enum value, a newer format version or a
contradiction raises `SpecError`, whose `.path` is the JSON path of the problem and whose message says
what to do. When the JSON text is at hand (`from_json`, `load`, `validate_json`) the error also carries
the 1-based line and column of the offending key. `validate_dict` / `validate_json` collect every
error instead of stopping at the first. `json_schema()` derives the JSON Schema from the same fields;
`python -m distcheck.spec --write-schema PATH` writes it for the editor.

This module states the package's public API once. Imports no torch (orjson only), so the editor
daemon can import it.

Modules
=======

- `fields`: constants, enum values, patterns and the field-metadata language;
- `parts`, `model`: the dataclasses (`Policy` ... `Distribution`; `MLIPSpec`);
- `errors`: `SpecError`, JSON paths, the words of messages;
- `reader`: a parsed document → a spec or every error (paths, did-you-mean);
- `checks`: the checks across the fields of one object, run by the reader;
- `codec`: JSON text and files → a spec, errors with line and column;
- `schema`: the JSON Schema;
- `cli`, `__main__`: `python -m distcheck.spec`;
- `jsontext`: the project's one JSON-text scanner (offsets of keys and values);
- `edit`: minimal, formatting-preserving edits of JSON text;
- `file`: guarded, atomic saves;
- `importer`: nvalchemi-toolkit's version-2 spec files → a spec (`import_anchor_spec`,
  `anchor_spec_from_text`: an `AnchorImport` with an `ImportNote` per field that has no exact
  equivalent);
- `import_core`: the toolkit's `core` section as distcheck's `distribution`;
- `import_helpers`: the toolkit's third-party helpers as distcheck's.
"""

from .codec import locate_path, validate_json
from .errors import SpecError, format_path
from .fields import (
    ARG_TRANSFORMS,
    GATHER_MODES,
    HELPER_KINDS,
    OUTPUT_KINDS,
    OUTPUT_TRANSFORMS,
    POLICY_KINDS,
    SCATTER_MODES,
    SCHEMA_URI,
    SPEC_FORMAT,
    SPEC_VERSION,
    TORCHSCRIPT_MODES,
)
from .file import FileState, SpecConflict
from .importer import AnchorImport, ImportNote, anchor_spec_from_text, import_anchor_spec
from .jsontext import PathPart
from .model import MLIPSpec
from .parts import CustomOp, Distribution, HelperAdapter, Policy
from .reader import validate_dict
from .schema import json_schema, write_schema

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
    "AnchorImport",
    "CustomOp",
    "Distribution",
    "FileState",
    "HelperAdapter",
    "ImportNote",
    "MLIPSpec",
    "PathPart",
    "Policy",
    "SpecConflict",
    "SpecError",
    "anchor_spec_from_text",
    "format_path",
    "import_anchor_spec",
    "json_schema",
    "locate_path",
    "validate_dict",
    "validate_json",
    "write_schema",
]
