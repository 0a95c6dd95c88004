"""`python -m distcheck.report`: write the report's JSON Schema (`--write-schema PATH`) and the extension's
report types generated from it (`--write-ts PATH`).

Exits 0 when written, 2 when a file cannot be written (or the arguments are wrong), with the reason on
stderr.
"""

from __future__ import annotations

import argparse
import sys

from .schema import write_schema
from .typescript import write_typescript

parser = argparse.ArgumentParser(prog="python -m distcheck.report", description="distcheck report tools.")
parser.add_argument("--write-schema", metavar="PATH", help="write the report's JSON Schema to PATH")
parser.add_argument("--write-ts", metavar="PATH", help="write the extension's report types (TypeScript) to PATH")
args = parser.parse_args()
if args.write_schema is None and args.write_ts is None:
    parser.error("nothing to do: give --write-schema PATH and/or --write-ts PATH")
for path, write in ((args.write_schema, write_schema), (args.write_ts, write_typescript)):
    if path is None:
        continue
    try:
        write(path)
    except OSError as err:
        print(f"cannot write {path}: {err}; pick a writable path", file=sys.stderr)
        sys.exit(2)
