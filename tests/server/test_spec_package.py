"""Tests for the layout of `distcheck.spec`: one job a module, the API stated once, one JSON-text scanner.

The spec package holds the model, its reader, codec, schema, CLI, the project's one JSON-text scanner,
minimal text edits and guarded saves. These tests keep it that way: public names come from the package
(`from distcheck.spec import X`) and resolve to one definition each; no module outside
`distcheck.spec.jsontext` scans JSON text or takes the scanner's names from anywhere else; the
scanner's positions are checked against the standard library's decoder on arbitrary documents; and
the package's CLI answers every failure with a line that says what to do, never a traceback.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distcheck.spec
from distcheck.spec import jsontext, locate_path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "server" / "distcheck"
SPEC_DIR = PACKAGE / "spec"
MAX_LINES = 400

# The names the module `distcheck.spec` exported before it became a package: they must stay importable.
PROMISED = {
    "ARG_TRANSFORMS", "GATHER_MODES", "HELPER_KINDS", "OUTPUT_KINDS", "OUTPUT_TRANSFORMS", "POLICY_KINDS",
    "SCATTER_MODES", "SCHEMA_URI", "SPEC_FORMAT", "SPEC_VERSION", "TORCHSCRIPT_MODES", "CustomOp",
    "Distribution", "HelperAdapter", "MLIPSpec", "PathPart", "Policy", "SpecError", "format_path",
    "json_schema", "locate_path", "validate_dict", "validate_json", "write_schema",
}  # fmt: skip


def _sources() -> list[Path]:
    """Every Python file that may import from the package: the library, its tests, examples, benches."""
    roots = [PACKAGE, REPO / "tests", REPO / "examples", REPO / "bench"]
    found = (p for root in roots if root.is_dir() for p in root.rglob("*.py"))
    return sorted(p for p in found if not any(d.startswith(".") or d == "node_modules" for d in p.parts))


def _module_name(path: Path) -> str | None:
    """The dotted name of a library module (None outside `server/distcheck`)."""
    try:
        rel = path.relative_to(REPO / "server")
    except ValueError:
        return None
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(absolute module, imported names, line) of every `from X import ...` in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = _module_name(path)
    is_package = path.name == "__init__.py"
    found: list[tuple[str, list[str], int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        if node.level:
            if here is None:
                continue
            base = here.split(".")
            keep = len(base) - node.level + (1 if is_package else 0)
            module = ".".join([*base[:keep], *([module] if module else [])])
        found.append((module, [a.name for a in node.names], node.lineno))
    return found


# --------------------------------------------------------------------------------------------------
# one job a module, the API stated once


def test_spec_is_a_package_of_small_modules() -> None:
    found = importlib.util.find_spec("distcheck.spec")
    assert found is not None and found.submodule_search_locations, "distcheck.spec must be a package"
    modules = sorted(SPEC_DIR.glob("*.py"))
    assert len(modules) >= 8
    too_long = {p.name: n for p in modules if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not too_long, f"split these modules (over {MAX_LINES} lines): {too_long}"
    for p in modules:
        doc = ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))
        assert doc, f"{p.name} says in a docstring what its one job is"


@pytest.mark.parametrize(
    "old", ["distcheck.spectext", "distcheck.spec_edit", "distcheck.spec_file", "distcheck.lsp.jsontext"]
)
def test_the_old_module_paths_are_gone(old: str) -> None:
    assert importlib.util.find_spec(old) is None, f"{old} moved into distcheck.spec; import it from there"


def test_the_package_keeps_every_promised_name() -> None:
    missing = PROMISED - set(distcheck.spec.__all__)
    assert not missing, missing
    for name in distcheck.spec.__all__:
        assert hasattr(distcheck.spec, name), name


def test_every_public_name_has_one_definition() -> None:
    """A name of the package's API is the object of the submodule that defines it, not a copy."""
    for name in distcheck.spec.__all__:
        value = getattr(distcheck.spec, name)
        owner = getattr(value, "__module__", None)
        if isinstance(value, type) or callable(value):
            assert owner is not None and owner.startswith("distcheck.spec."), (name, owner)
            assert getattr(importlib.import_module(owner), name) is value, name
    submodules = [p.stem for p in SPEC_DIR.glob("*.py") if p.stem not in ("__init__", "__main__")]
    for stem in submodules:
        module = importlib.import_module(f"distcheck.spec.{stem}")
        for name in getattr(module, "__all__", ()):
            assert hasattr(module, name), f"distcheck.spec.{stem}.__all__ names {name}, which it lacks"


def test_importers_use_only_the_stated_api() -> None:
    """`from distcheck.spec import X` anywhere in the project names a public name of the package."""
    allowed = set(distcheck.spec.__all__)
    submodules = {p.stem for p in SPEC_DIR.glob("*.py")}
    wrong: list[str] = []
    for path in _sources():
        if path.parent == SPEC_DIR:
            continue
        for module, names, line in _imports(path):
            if module != "distcheck.spec":
                continue
            wrong.extend(f"{path.relative_to(REPO)}:{line}: {n}" for n in names if n not in allowed | submodules)
    assert not wrong, "import these from the package's __all__ (or add them to it): " + ", ".join(wrong)


@pytest.mark.procs
def test_the_package_imports_no_torch() -> None:
    code = (
        "import sys, importlib, pkgutil, distcheck.spec as s\n"
        "for m in pkgutil.iter_modules(s.__path__):\n"
        "    if m.name != '__main__': importlib.import_module('distcheck.spec.' + m.name)\n"
        "bad = sorted(n for n in sys.modules\n"
        "             if n.split('.')[0] in ('torch', 'numpy') or n.startswith('distcheck.lsp'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "server")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------------------------------
# one JSON-text scanner


SCANNER_NAMES = set(jsontext.__all__)


def test_no_module_but_the_scanner_defines_its_vocabulary() -> None:
    """A second scanner would define the tree's types again (a `Node`, a `Locations`, a parse error, the
    path type)."""
    again: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == SPEC_DIR / "jsontext.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            again.extend(f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names if n in SCANNER_NAMES)
    assert not again, "use distcheck.spec.jsontext instead of: " + ", ".join(again)


def test_the_scanner_is_taken_from_the_scanner() -> None:
    """The scanner's names come from `distcheck.spec.jsontext` (or `edit`, for the error its edits raise)."""
    owners = {"distcheck.spec.jsontext"}
    elsewhere: list[str] = []
    for path in _sources():
        for module, names, line in _imports(path):
            if not module.startswith("distcheck"):
                continue
            for name in names:
                if name == "jsontext" and module != "distcheck.spec":
                    elsewhere.append(f"{path.relative_to(REPO)}:{line}: jsontext from {module}")
                elif name in SCANNER_NAMES and module not in owners:
                    if name == "JsonEditError" and module == "distcheck.spec.edit":
                        continue
                    elsewhere.append(f"{path.relative_to(REPO)}:{line}: {name} from {module}")
    assert not elsewhere, "import from distcheck.spec.jsontext: " + ", ".join(elsewhere)
    from distcheck.spec import edit

    assert edit.JsonEditError is jsontext.JsonEditError


# --------------------------------------------------------------------------------------------------
# the scanner's positions, against the standard library's decoder

_KEY = st.text(
    alphabet=st.sampled_from(["a", "b", "_", "-", "é", "ß", "\U0001f600", '"', "\\", "\n", " ", "."]),
    min_size=0,
    max_size=4,
)
_LEAF = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-10, 10, allow_nan=False) | _KEY
_DOC = st.recursive(
    _LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY, inner, max_size=3),
    max_leaves=12,
)
_DECODER = json.JSONDecoder()


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    out = [(path, value)]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*path, i)))
    return out


def _offset(text: str, line: int, column: int) -> int:
    """The code-point offset of a 1-based line and column, lines split on LF only."""
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    return starts[line - 1] + column - 1


def _write(doc: Any, indent: int | None, ascii_only: bool, newline: str) -> str:
    return json.dumps(doc, indent=indent, ensure_ascii=ascii_only).replace("\n", newline)


@settings(max_examples=150, deadline=None)
@given(_DOC, st.sampled_from([None, 0, 1, 2, 4]), st.booleans(), st.sampled_from(["\n", "\r\n", "\r"]), st.booleans())
def test_every_path_is_located_at_its_key_or_value(
    doc: Any, indent: int | None, ascii_only: bool, newline: str, bom: bool
) -> None:
    """Lines are counted on LF only (a lone CR is white space within a line), columns in code points."""
    text = _write(doc, indent, ascii_only, newline)
    full = ("\ufeff" if bom else "") + text
    for path, value in _paths(doc):
        where = locate_path(full, path)
        assert where is not None, path
        offset = _offset(text, *where)
        found, _ = _DECODER.raw_decode(text, offset)
        if path and isinstance(path[-1], str):
            assert found == path[-1], (path, where)  # the key's string starts there
        else:
            assert found == value, (path, where)  # the item (or the root) starts there


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_KEY, _LEAF, min_size=1, max_size=4), st.integers(1, 3), st.booleans())
def test_repeated_keys_are_found_where_they_stand(members: dict[str, Any], repeats: int, crlf: bool) -> None:
    pieces = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in members.items()]
    first = next(iter(members))
    pieces += [f"{json.dumps(first)}: {n}" for n in range(repeats)]
    text = "{" + (",\r\n" if crlf else ",\n").join(pieces) + "}"
    where = jsontext.Locations(text)
    assert [path for path, _ in where.duplicates] == [(first,)] * repeats
    for _, offset in where.duplicates:
        key, end = _DECODER.raw_decode(text, offset)
        assert key == first
        assert text[end:].lstrip().startswith(":")
    # The path of a repeated key points at its last occurrence, as JSON readers keep the last value.
    assert where.keys[(first,)] == where.duplicates[-1][1]
    line, column = where.position(where.duplicates[-1][1])
    assert _offset(text, line, column) == where.duplicates[-1][1]


@pytest.mark.parametrize(
    "text",
    ['{"a": 1', '{"a" 1}', "[1, 2", "[1 2]", '{"a": 1,}', "", '{"a": [}', '"open', "1 2", "{1: 2}"],
)
def test_invalid_text_is_refused_and_located_nowhere(text: str) -> None:
    with pytest.raises(jsontext.JsonEditError) as info:
        jsontext.parse(text)
    assert "invalid JSON" in str(info.value)
    assert jsontext.Locations(text).locate(["a"]) is None
    assert locate_path(text, ["a"]) is None


# --------------------------------------------------------------------------------------------------
# the package's CLI


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "server")}
    return subprocess.run(
        [sys.executable, "-m", "distcheck.spec", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.procs
@pytest.mark.parametrize("shape", ["parent-is-a-file", "target-is-a-directory", "parent-cannot-be-made"])
def test_schema_that_cannot_be_written_says_what_to_do(tmp_path: Path, shape: str) -> None:
    blocker = tmp_path / "plain"
    blocker.write_text("x")
    target = {
        "parent-is-a-file": blocker / "schema.json",
        "target-is-a-directory": tmp_path,
        "parent-cannot-be-made": Path("/proc/distcheck-no-such-dir/schema.json"),
    }[shape]
    done = _cli("--write-schema", str(target))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"cannot write {target}: ")
    assert "give a file path in a directory you can write to" in done.stderr
    assert blocker.read_text() == "x"


@pytest.mark.procs
def test_a_schema_failure_still_validates_the_files(tmp_path: Path) -> None:
    good = tmp_path / "good.distspec.json"
    good.write_text(distcheck.spec.MLIPSpec().to_json())
    bad = tmp_path / "bad.distspec.json"
    bad.write_text('{"format": "distcheck-spec", "version": 1, "colour": 1}')
    done = _cli("--write-schema", str(tmp_path), "--validate", str(good), str(bad))
    assert done.returncode == 2
    column = bad.read_text().index('"colour"') + 1
    assert f'{bad}:1:{column}: colour: unknown field "colour"' in done.stderr
    assert str(good) not in done.stderr
