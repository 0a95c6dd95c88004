"""`python -m distcheck.spec`: write the spec's JSON Schema, check spec files, import the toolkit's.

`--write-schema PATH` writes `json_schema()`; `--validate SPEC...` lists every error of each file as
`file:line:column: path: message` on stderr. Exits 0 when all is well, 1 when a spec has errors, 2
when the schema cannot be written (or the arguments are wrong).

`--import FILE [-o OUT]` (also `distcheck spec import FILE [-o OUT]`, through `import_command`) converts
an nvalchemi-toolkit version-2 `MLIPSpec` file and writes the distcheck spec to OUT (a new file, or a
distcheck spec it updates) or to stdout; each field without an exact equivalent is listed on stderr as
`file:line:column: path: message`. Exits 0 when every field converted exactly, 1 when the spec was
written but some fields have no equivalent (listed), 2 when FILE cannot be read or imported (every
error listed, nothing written) or OUT cannot be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from .codec import validate_json
from .errors import SpecError
from .file import SpecConflict
from .importer import existing_spec_problem, read_anchor_file
from .schema import write_schema

__all__ = ["import_command", "main"]


def _where(name: str, line: int | None, column: int | None) -> str:
    return f"{name}:{line}:{column}" if line is not None else name


def _write_import(spec_out: str, file: str, save: Callable[[str], object], err: TextIO) -> bool:
    """Write the converted spec (`save(path)`) to `spec_out`; False after saying why it could not be."""
    try:
        same = os.path.exists(spec_out) and os.path.samefile(spec_out, file)
    except OSError:
        same = False
    problem = (
        f"-o {spec_out} is the file being imported; give another path" if same else existing_spec_problem(spec_out)
    )
    if problem is None:
        try:
            save(spec_out)
            return True
        except SpecConflict as exc:
            problem = f"{exc}; run the import again"
        except OSError as exc:
            problem = f"cannot write {spec_out}: {exc.strerror or exc}; give a path in a directory you can write to"
    print(f"distcheck: {problem}", file=err)
    return False


def import_command(file: str, output: str | None, out: TextIO, err: TextIO) -> int:
    """Import the toolkit's spec `file` and write the distcheck spec to `output` (None: to `out`); notes and
    errors go to `err`. Returns 0 (exact), 1 (written, some fields without an equivalent) or 2 (nothing
    written: `file` could not be imported or `output` written)."""
    result, errors = read_anchor_file(file)
    for e in errors:
        print(f"{_where(file, e.line, e.column)}: {e}", file=err)
    if result is None:
        print(f"distcheck: {file} was not imported ({len(errors)} error(s) above); fix them and run it again", file=err)
        return 2
    for note in result.notes:
        print(f"{_where(file, note.line, note.column)}: {note}", file=err)
    if output is None:
        out.write(result.spec.to_json())
        out.flush()
        written = "the distcheck spec is on stdout"
    elif _write_import(output, file, result.spec.save, err):
        written = f"wrote {output}"
    else:
        return 2
    lost = len(result.unmapped)
    if lost:
        print(
            f"distcheck: imported {file} with {lost} field(s) that have no distcheck equivalent (listed above); "
            f"{written}; see to each, then check the model with distcheck validate TARGET --spec SPEC",
            file=err,
        )
        return 1
    print(
        f"distcheck: imported {file}, every field has its distcheck equivalent; {written}; check the model "
        "with distcheck validate TARGET --spec SPEC",
        file=err,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run `python -m distcheck.spec` with `argv`; returns the exit status (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m distcheck.spec",
        description="distcheck spec tools: write the JSON Schema, check spec files.",
    )
    parser.add_argument("--write-schema", metavar="PATH", help="write the spec's JSON Schema to PATH")
    parser.add_argument("--validate", metavar="SPEC", nargs="+", help="check spec files and list every error")
    parser.add_argument(
        "--import",
        dest="import_file",
        metavar="FILE",
        help="convert an nvalchemi-toolkit version-2 MLIPSpec JSON file into a distcheck spec",
    )
    parser.add_argument("-o", "--output", metavar="OUT", help="with --import: write the spec to OUT, not stdout")
    args = parser.parse_args(argv)
    if args.import_file is not None:
        if args.write_schema or args.validate:
            parser.error("--import runs alone: give --write-schema / --validate in another call")
        return import_command(args.import_file, args.output, sys.stdout, sys.stderr)
    if args.output is not None:
        parser.error("-o/--output goes with --import FILE")
    if not args.write_schema and not args.validate:
        parser.error("nothing to do: give --write-schema PATH, --validate SPEC... or --import FILE")
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
            errors = [SpecError("$", f"cannot read the file: {exc.strerror or exc}; check the path", file=name)]
        for err in errors:
            where = f"{name}:{err.line}:{err.column}" if err.line is not None else name
            print(f"{where}: {err}", file=sys.stderr)
        status = max(status, 1 if errors else 0)
    return status
