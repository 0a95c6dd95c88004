"""`python -m distcheck.spec`: write the spec's JSON Schema and check spec files.

`--write-schema PATH` writes `json_schema()`; `--validate SPEC...` lists every error of each file as
`file:line:column: path: message` on stderr. Exits 0 when all is well, 1 when a spec has errors, 2
when the schema cannot be written (or the arguments are wrong).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .codec import validate_json
from .errors import SpecError
from .schema import write_schema

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run `python -m distcheck.spec` with `argv`; returns the exit status (see the module docstring)."""
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
        try:
            write_schema(args.write_schema)
        except OSError as exc:
            print(
                f"cannot write {args.write_schema}: {exc.strerror or exc}; give a file path in a directory "
                "you can write to",
                file=sys.stderr,
            )
            status = 2
        else:
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
