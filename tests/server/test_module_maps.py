"""Every package's docstring is the map of its modules: one bullet per module, with its one-line job.

The map is the `Modules` section of the package's `__init__.py` docstring (a line `Modules` underlined
with `=`), whose bullets start with the modules they describe::

    Modules
    =======

    - `launch`: `run_distributed`, the owner's side of one run;
    - `supervise`, `reaper`: waiting for a run's processes, ending them;

A line ending in ":" may caption a group of bullets. A module is a `.py` file of the package
(`__main__` included, `__init__` not) or a subpackage (a directory with an `__init__.py`). The test
fails when a module is missing from its package's map, when the map names a module that does not
exist, names one twice, or has a line that is not a bullet.
Files are read with `ast`: nothing is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "server" / "distcheck"

HEADING = "Modules"
BULLET = re.compile(r"^- (`\w+`(?:(?:, and |, | and )`\w+`)*): \S")
NAME = re.compile(r"`(\w+)`")


def packages() -> list[Path]:
    """Every package directory under `server/distcheck`, the top level included."""
    return sorted(p.parent for p in ROOT.rglob("__init__.py") if "__pycache__" not in p.parts)


def modules(package: Path) -> set[str]:
    """The package's modules: its `.py` files but `__init__`, and its subpackages."""
    files = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    subpackages = {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    return files | subpackages


def module_map(docstring: str) -> tuple[list[str], list[str]]:
    """The names the `Modules` section's bullets start with (in order, repeats kept) and the lines of the
    section that are neither a bullet, its indented continuation, a group caption (ending in ":") nor
    blank. ([], []) without a section."""
    lines = docstring.splitlines()
    start = next(
        (i + 2 for i, line in enumerate(lines[:-1]) if line.strip() == HEADING and set(lines[i + 1].strip()) == {"="}),
        None,
    )
    if start is None:
        return [], []
    names: list[str] = []
    stray: list[str] = []
    in_bullets = False
    for i in range(start, len(lines)):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and set(lines[i + 1].strip()) == {"="}:
            break  # the next section's heading
        if not line.strip():
            continue
        match = BULLET.match(line)
        if match:
            in_bullets = True
            names.extend(NAME.findall(match.group(1)))
        elif in_bullets and not line.startswith("  ") and not line.endswith(":"):
            stray.append(line)
        # lines before the first bullet introduce the section; a line ending in ":" captions a group
    return names, stray


def package_docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""


def label(package: Path) -> str:
    return ".".join(("distcheck", *package.relative_to(ROOT).parts))


def test_packages_found() -> None:
    found = {label(p) for p in packages()}
    assert {"distcheck", "distcheck.processes.spares", "distcheck.validate"} <= found


@pytest.mark.parametrize("package", packages(), ids=label)
def test_docstring_maps_every_module(package: Path) -> None:
    names, stray = module_map(package_docstring(package))
    assert names, f"{label(package)}: its __init__.py docstring has no `{HEADING}` section with module bullets"
    assert not stray, f"{label(package)}: lines of the module map that are not '- `name`: job' bullets: {stray}"
    present = modules(package)
    missing = sorted(present - set(names))
    unknown = sorted(set(names) - present)
    repeated = sorted({n for n in names if names.count(n) > 1})
    assert not missing, f"{label(package)}: modules its docstring does not map: {missing}"
    assert not unknown, f"{label(package)}: its docstring maps modules that do not exist: {unknown}"
    assert not repeated, f"{label(package)}: modules mapped twice: {repeated}"


def test_module_map_reads_bullets() -> None:
    doc = (
        "Intro.\n\nModules\n=======\n\nOne job each.\n\n- `a`, `b` and `c`: jobs\n  more of it\n- `d`: job\n"
        "\nGroup:\n\n- `f`: job\n\nNext\n====\n- `e`: x\n"
    )
    assert module_map(doc) == (["a", "b", "c", "d", "f"], [])
    assert module_map("Modules\n=======\n\n- `a`: job\nstray text\n") == (["a"], ["stray text"])
    assert module_map("- `a`: no section") == ([], [])
