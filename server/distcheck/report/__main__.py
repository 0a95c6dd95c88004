"""`python -m distcheck.report --write-schema PATH`: write the report's JSON Schema to PATH.

Exits 0 when written, 2 when it cannot be (or the arguments are wrong), with the reason on stderr.
"""

from __future__ import annotations

import argparse
import sys

from .schema import write_schema

parser = argparse.ArgumentParser(prog="python -m distcheck.report", description="distcheck report tools.")
parser.add_argument("--write-schema", metavar="PATH", required=True, help="write the report's JSON Schema to PATH")
args = parser.parse_args()
try:
    write_schema(args.write_schema)
except OSError as err:
    print(f"cannot write the report schema to {args.write_schema}: {err}; pick a writable path", file=sys.stderr)
    sys.exit(2)
