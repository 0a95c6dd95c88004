"""Where tables and keys are in TOML text, and reading a pyproject's `[tool.distcheck]` table; no torch.

tomllib gives no line numbers, so `TomlIndex` finds them by a line scan: every `ConfigError` about a
config then names its line (the editor puts a `config-invalid` diagnostic there).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

from ..option_check import ConfigError
from ..options import OPTION_ALIASES

__all__ = ["TomlIndex", "distcheck_table", "parse_toml", "read_text"]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*(\]\]?)\s*(#.*)?$")
_KEY = re.compile(r"""^\s*([A-Za-z0-9_\-]+|"[^"]*"|'[^']*')\s*[.=]""")
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _header_name(raw: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in raw.split("."))


class TomlIndex:
    """Line numbers of table headers and keys in TOML text, found by a line scan (tomllib gives none).

    `table(name, occurrence)` is the 1-based line of the `occurrence`-th `[name]` / `[[name]]` header
    (None if absent); `key(name, occurrence, key)` the line of `key = ...` directly in that table.
    Multi-line strings and arrays are skipped, so their content is never mistaken for a key.
    """

    def __init__(self, text: str) -> None:
        self.headers: dict[str, list[int]] = {}
        self.keys: dict[tuple[str, int, str], int] = {}
        self.lines = text.splitlines()
        current: tuple[str, int] = ("", 0)
        depth = 0
        in_string: str | None = None
        for number, line in enumerate(self.lines, start=1):
            if in_string is not None:
                if in_string in line:
                    in_string = None
                continue
            if depth > 0:
                depth = max(0, depth + _bracket_balance(line))
                continue
            header = _HEADER.match(line)
            if header is not None and (header.group(1) == "[[") == (header.group(3) == "]]"):
                name = _header_name(header.group(2))
                seen = self.headers.setdefault(name, [])
                seen.append(number)
                current = (name, len(seen) - 1)
                continue
            key = _KEY.match(line)
            if key is not None:
                self.keys.setdefault((current[0], current[1], key.group(1).strip("\"'")), number)
                value = line.split("=", 1)[1] if "=" in line else ""
                for quote in ('"""', "'''"):
                    if value.count(quote) % 2 == 1:
                        in_string = quote
                depth = max(0, _bracket_balance(value))

    def table(self, name: str, occurrence: int = 0) -> int | None:
        """The line of the `occurrence`-th header `[name]` or `[[name]]`, or None."""
        found = self.headers.get(name, [])
        return found[occurrence] if occurrence < len(found) else None

    def key(self, name: str, occurrence: int, key: str) -> int | None:
        """The line of `key` directly in the `occurrence`-th table `name`, else that table's header line."""
        line = self.keys.get((name, occurrence, key))
        if line is None:
            for raw, alias in OPTION_ALIASES.items():
                if alias == key and (name, occurrence, raw) in self.keys:
                    return self.keys[(name, occurrence, raw)]
            return self.table(name, occurrence)
        return line


def _bracket_balance(text: str) -> int:
    """Opening minus closing brackets outside strings and comments (for multi-line arrays)."""
    balance = 0
    quote: str | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote is not None:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            break
        elif c in "[{":
            balance += 1
        elif c in "]}":
            balance -= 1
        i += 1
    return balance


def _toml_loads(text: str) -> dict[str, Any]:
    for name in ("tomllib", "tomli"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        try:
            data: dict[str, Any] = module.loads(text)
        except module.TOMLDecodeError as exc:
            where = _TOML_POSITION.search(str(exc))
            line = int(where.group(1)) if where else None
            column = int(where.group(2)) if where else None
            if where is None and "end of document" in str(exc):
                line = max(1, len(text.splitlines()))
            raise ConfigError(f"invalid TOML: {exc}", "fix the syntax of the file", line=line, column=column) from exc
        return data
    raise ConfigError(
        "reading pyproject.toml needs Python 3.11+ (tomllib) or the tomli package",
        "pip install tomli, or name the factory directly: distcheck validate path/file.py:model_factory",
    )


def read_text(path: str) -> str:
    """The text of the file `path`; `ConfigError` when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "check the path given to --config") from exc


def parse_toml(path: str, text: str) -> dict[str, Any]:
    """The TOML document `text` (of the file `path`); `ConfigError` with the line and column of a syntax error."""
    try:
        return _toml_loads(text)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err.message}", err.hint, config=path, line=err.line, column=err.column) from err


def distcheck_table(data: Mapping[str, Any]) -> Any:
    """`tool.distcheck` of a parsed pyproject (any type), or None when absent."""
    tool = data.get("tool")
    return tool.get("distcheck") if isinstance(tool, Mapping) else None
