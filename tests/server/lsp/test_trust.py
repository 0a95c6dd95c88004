"""Workspace trust: nothing of a workspace runs before a validation is asked for in a trusted
workspace, and then only the target's own modules — never a project file named like the standard
library, torch or distcheck, in the daemon, the runner, the forkserver or a rank."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from .harness import copy_examples, lsp_session

pytestmark = [pytest.mark.slow, pytest.mark.procs]

# Names a workspace might hold that distcheck's processes import at some point (at start-up, lazily
# later, or in the forkserver's `python -c`): each writes a marker if it is ever imported.
SHADOWED = ("json", "torch", "distcheck", "signal", "selectors", "socket", "multiprocessing", "numpy", "orjson")

MARKED_MODEL = """\"\"\"The target's own module: importing it is expected once a validation is asked for.\"\"\"
import os
open(os.path.join({markers!r}, "model." + str(os.getpid())), "w").close()

from examples.pair_potential import model_factory, sample_batch  # noqa: E402,F401
"""


def _shadow(ws: Path, markers: Path) -> None:
    for name in SHADOWED:
        (ws / f"{name}.py").write_text(
            f"import os as _os\nopen(_os.path.join({str(markers)!r}, '{name}.' + str(_os.getpid())), 'w').close()\n"
            f"raise ImportError('the workspace file {name}.py was imported')\n"
        )
    (ws / "marked_model.py").write_text(MARKED_MODEL.format(markers=str(markers)))
    with (ws / "pyproject.toml").open("a") as fh:
        fh.write(
            '\n[[tool.distcheck.targets]]\nname = "marked"\nfactory = "marked_model:model_factory"\n'
            'sample = "marked_model:sample_batch"\n'
        )


def _markers(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


@pytest.fixture()
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = copy_examples(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    _shadow(ws, markers)
    return ws, markers


@pytest.mark.timeout(120)
@pytest.mark.asyncio
async def test_untrusted_workspace_runs_nothing_and_validation_is_refused(workspace: tuple[Path, Path]) -> None:
    ws, markers = workspace
    async with lsp_session(ws, trusted=False) as s:
        s.open(ws / "marked_model.py", "python")
        s.open(ws / "pyproject.toml", "toml")
        await asyncio.sleep(2.0)
        info = await s.debug_info()
        assert info["runner"] is None, "no runner may start before a validation is asked for"
        with pytest.raises(JsonRpcException) as refused:
            await s.command("distcheck.validate", "marked")
        assert "not trusted" in refused.value.message and "trust the workspace" in refused.value.message
        await asyncio.sleep(1.0)
        assert (await s.debug_info())["runner"] is None
    assert _markers(markers) == []


@pytest.mark.timeout(240)
@pytest.mark.asyncio
async def test_trusted_workspace_imports_only_the_target_once_asked(workspace: tuple[Path, Path]) -> None:
    ws, markers = workspace
    async with lsp_session(ws, {"worldSize": 2, "device": "cpu"}) as s:
        await asyncio.sleep(2.0)
        assert (await s.debug_info())["runner"] is None, "the runner starts with the first validation"
        assert _markers(markers) == []
        mark = s.rec.mark()
        await s.command("distcheck.validate", "marked")
        payload = await s.wait_report("marked", mark, timeout=200)
        assert payload["report"]["verdict"] == "passed", payload["report"].get("next_action")
    found = _markers(markers)
    assert found and all(name.startswith("model.") for name in found), found


@pytest.mark.timeout(120)
@pytest.mark.asyncio
async def test_trust_granted_later_enables_validation(workspace: tuple[Path, Path]) -> None:
    ws, _markers_dir = workspace
    async with lsp_session(ws, {"worldSize": 2, "device": "cpu"}, trusted=False) as s:
        with pytest.raises(JsonRpcException):
            await s.command("distcheck.validate", "marked")
        s.client.protocol.notify("distcheck/trust", {"trusted": True})
        await asyncio.sleep(0.5)
        started = await s.command("distcheck.validate", "marked")
        assert started["started"] is True
        await s.command("distcheck.cancel", "marked")


@pytest.mark.timeout(120)
@pytest.mark.asyncio
async def test_a_factory_outside_the_workspace_needs_confirmation(tmp_path: Path, workspace: tuple[Path, Path]) -> None:
    ws, markers = workspace
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "foreign.py").write_text(
        f"import os\nopen(os.path.join({str(markers)!r}, 'foreign.' + str(os.getpid())), 'w').close()\n"
        "from examples.pair_potential import model_factory, sample_batch  # noqa: E402,F401\n"
    )
    with (ws / "pyproject.toml").open("a") as fh:
        fh.write(
            f'\n[[tool.distcheck.targets]]\nname = "foreign"\nfactory = "{outside / "foreign.py"}:model_factory"\n'
            f'sample = "{outside / "foreign.py"}:sample_batch"\n'
        )
    async with lsp_session(ws, {"worldSize": 2, "device": "cpu"}) as s:
        with pytest.raises(JsonRpcException) as refused:
            await s.command("distcheck.validate", "foreign")
        err = refused.value
        assert "outside the workspace" in err.message and str(outside / "foreign.py") in err.message
        data = err.data if isinstance(err.data, dict) else getattr(err.data, "_asdict", lambda: {})()
        assert data.get("kind") == "outside-workspace" and str(outside / "foreign.py") in data.get("paths", [])
        assert _markers(markers) == []
        # confirming exactly those paths lets it run
        started = await s.command("distcheck.validate", "foreign", {"confirmOutsideWorkspace": data["paths"]})
        assert started["started"] is True
        await s.command("distcheck.cancel", "foreign")


def test_the_shadow_files_fire_when_a_plain_python_starts_in_the_workspace(workspace: tuple[Path, Path]) -> None:
    """What the daemon guards against does happen to a process started the ordinary way (so the
    tests above can fail)."""
    ws, markers = workspace
    subprocess.run([sys.executable, "-c", "import json"], cwd=ws, capture_output=True, timeout=30)
    assert any(name.startswith("json.") for name in _markers(markers))
