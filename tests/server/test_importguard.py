"""The import guard: project files never stand in for the standard library, torch or distcheck — in
the CLI, the rank pool's forkserver and resource tracker, the reference run and every rank."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import distcheck
from distcheck import importguard

pytestmark = pytest.mark.procs

ROOT = Path(__file__).resolve().parents[2]
# Modules the CLI, multiprocessing's `python -c` helpers, the ranks and torch import at start-up or lazily.
SHADOWED = ("json", "torch", "distcheck", "signal", "selectors", "socket", "multiprocessing", "numpy", "pickle")


def _shadow(project: Path, markers: Path) -> None:
    for name in SHADOWED:
        (project / f"{name}.py").write_text(
            f"import os as _os\nopen(_os.path.join({str(markers)!r}, '{name}.' + str(_os.getpid())), 'w').close()\n"
            f"raise ImportError('the project file {name}.py was imported')\n"
        )
    (project / "model.py").write_text(
        "import os\n"
        f"open(os.path.join({str(markers)!r}, 'model.' + str(os.getpid())), 'w').close()\n"
        "from examples.pair_potential import model_factory, sample_batch  # noqa: E402,F401\n"
    )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(distcheck.__file__).parents[1]), str(ROOT)])
    env.pop(importguard.UNTRUSTED_ENV, None)
    return env


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_cli_run_from_a_project_with_shadowing_files_imports_only_the_model(tmp_path: Path) -> None:
    project = tmp_path / "project"
    markers = tmp_path / "markers"
    project.mkdir()
    markers.mkdir()
    _shadow(project, markers)
    script = Path(sys.executable).with_name("distcheck")
    command = [str(script)] if script.exists() else [sys.executable, "-c", "from distcheck.cli import main; main()"]
    done = subprocess.run(
        [*command, "validate", "model:model_factory", "--sample", "model:sample_batch", "--world-size", "2"],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    found = sorted(p.name for p in markers.iterdir())
    assert done.returncode == 0, done.stdout + done.stderr
    assert [m for m in found if not m.startswith("model.")] == [], found
    # the model module ran in the CLI (sample), the reference run and both ranks
    assert len([m for m in found if m.startswith("model.")]) >= 3, found


def test_protected_names_cover_the_standard_library_torch_and_their_dependencies() -> None:
    names = importguard.protected_names()
    assert {"json", "os", "signal", "multiprocessing", "torch", "distcheck", "numpy"} <= names
    assert "sympy" in names or "filelock" in names  # torch's own requirements
    assert "examples" not in names and "model" not in names


def test_a_guarded_interpreter_ignores_shadowing_files_in_its_working_directory(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    _shadow(tmp_path, markers)
    code = (
        "import sys; sys.path.remove(''); from distcheck import importguard; importguard.install(); "
        f"sys.path.insert(0, {str(tmp_path)!r}); "
        "import json, pickle, selectors, socket; print(json.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert str(tmp_path) not in done.stdout
    assert sorted(markers.iterdir()) == []
    # without the guard the same imports run the project's files: the check above can fail
    plain = subprocess.run(
        [sys.executable, "-c", "import pickle"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60
    )
    assert plain.returncode != 0 and any(p.name.startswith("pickle.") for p in markers.iterdir())


def test_a_missing_protected_module_is_refused_not_taken_from_the_project(tmp_path: Path) -> None:
    (tmp_path / "tomllib_missing_probe.py").write_text("")
    code = (
        "import sys; from distcheck import importguard; importguard.install(); "
        f"sys.path.insert(0, {str(tmp_path)!r}); import distcheck.importguard as g; "
        "g._protected = g.protected_names() | {'tomllib_missing_probe'}\n"
        "try:\n    import tomllib_missing_probe\nexcept ModuleNotFoundError as e:\n    print('refused:', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert "refused:" in done.stdout and "outside the project's directories" in done.stdout, done.stdout + done.stderr
