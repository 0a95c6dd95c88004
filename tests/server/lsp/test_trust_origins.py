"""Every module a target resolves to is placed as the import system would find it (issue: a bytecode-only
`.pyc` outside the workspace ran without confirmation because the lookup only knew `.py` files and waved
through what it did not find). No process, nothing imported: the finders only locate."""

from __future__ import annotations

import importlib.machinery
import py_compile
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcheck.lsp import trust
from distcheck.lsp.config import TargetInfo


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    workspace, outside = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    outside.mkdir()
    return workspace, outside


def _target(workspace: Path, factory: str, python_path: list[Path]) -> TargetInfo:
    return TargetInfo(name="t", factory=factory, root=str(workspace), python_path=[str(p) for p in python_path])


def _outside(workspace: Path, factory: str, python_path: list[Path], confirmed: tuple[str, ...] = ()) -> list[str]:
    return trust.code_outside(_target(workspace, factory, python_path), [str(workspace)], confirmed)


def test_a_bytecode_only_module_outside_needs_confirmation(places: tuple[Path, Path]) -> None:
    workspace, outside = places
    source = outside / "compiled.py"
    source.write_text("def model_factory():\n    return None\n")
    pyc = outside / "compiled.pyc"
    py_compile.compile(str(source), cfile=str(pyc))
    source.unlink()  # bytecode only
    found = _outside(workspace, "compiled:model_factory", [outside])
    assert found == [str(pyc)]
    assert _outside(workspace, "compiled:model_factory", [outside], confirmed=(str(pyc),)) == []


def test_an_extension_module_outside_needs_confirmation(places: tuple[Path, Path]) -> None:
    workspace, outside = places
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    ext = outside / f"fastmodel{suffix}"
    ext.write_bytes(b"\x7fELF not really")  # located by its name alone; nothing loads it
    assert _outside(workspace, "fastmodel:model_factory", [outside]) == [str(ext)]


def test_a_namespace_package_outside_needs_confirmation(places: tuple[Path, Path]) -> None:
    workspace, outside = places
    (outside / "nspkg" / "models").mkdir(parents=True)
    (outside / "nspkg" / "models" / "mlip.py").write_text("def model_factory():\n    return None\n")
    found = _outside(workspace, "nspkg.models.mlip:model_factory", [outside])
    assert str(outside / "nspkg") in found and str(outside / "nspkg" / "models" / "mlip.py") in found


def test_a_workspace_package_whose_module_lies_outside_through_its_path(places: tuple[Path, Path]) -> None:
    """A package in the workspace that extends its `__path__`... is placed by what the finder gives:
    here a plain package in the workspace and its module in it: nothing to confirm."""
    workspace, _ = places
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "__init__.py").write_text("")
    (workspace / "pkg" / "model.py").write_text("def model_factory():\n    return None\n")
    assert _outside(workspace, "pkg.model:model_factory", [workspace]) == []


def test_installed_and_builtin_modules_need_no_confirmation(places: tuple[Path, Path]) -> None:
    workspace, _ = places
    assert _outside(workspace, "json.decoder:JSONDecoder", []) == []  # the standard library
    assert _outside(workspace, "sys:getsizeof", []) == []  # built in
    assert _outside(workspace, "pytest:main", []) == []  # an installed package


def test_a_module_on_sys_path_outside_the_installed_packages_needs_confirmation(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a `.pth` file or PYTHONPATH would add it: found on the interpreter's path, yet no installed package."""
    workspace, outside = places
    (outside / "pth_model.py").write_text("def model_factory():\n    return None\n")
    monkeypatch.syspath_prepend(str(outside))
    assert _outside(workspace, "pth_model:model_factory", []) == [str(outside / "pth_model.py")]


class _Finder:
    """A meta path finder as an editable install adds one: it maps a name to a file anywhere."""

    def __init__(self, name: str, origin: str | None) -> None:
        self.name, self.origin = name, origin

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        loader = importlib.machinery.SourceFileLoader(fullname, self.origin or "")
        spec = importlib.machinery.ModuleSpec(fullname, loader, origin=self.origin)
        spec.has_location = self.origin is not None
        return spec


@pytest.fixture
def meta_finder() -> Iterator[list[Any]]:
    added: list[Any] = []
    yield added
    for finder in added:
        sys.meta_path.remove(finder)


def test_a_module_an_editable_installs_finder_maps_outside_needs_confirmation(
    places: tuple[Path, Path], meta_finder: list[Any]
) -> None:
    workspace, outside = places
    origin = outside / "editable_model.py"
    origin.write_text("def model_factory():\n    return None\n")
    finder = _Finder("editable_model", str(origin))
    sys.meta_path.insert(0, finder)
    meta_finder.append(finder)
    assert _outside(workspace, "editable_model:model_factory", []) == [str(origin)]


def test_a_module_found_with_nothing_to_place_is_refused(places: tuple[Path, Path], meta_finder: list[Any]) -> None:
    workspace, _ = places
    finder = _Finder("ghost_model", None)
    sys.meta_path.insert(0, finder)
    meta_finder.append(finder)
    with pytest.raises(trust.Unclassified, match="ghost_model"):
        _outside(workspace, "ghost_model:model_factory", [])


def test_a_module_no_finder_finds_runs_nothing_and_is_left_to_the_import_error(places: tuple[Path, Path]) -> None:
    workspace, _ = places
    assert _outside(workspace, "no_such_module_anywhere:model_factory", [workspace]) == []
    assert sys.path.count(str(workspace)) == 0  # the search directories are not left on sys.path
