"""Every walk over `sys.modules` reads modules through `runtime/module_namespace`, which never loads a
module that was only registered lazily (`importlib.util.LazyLoader`, as scipy and cupy register
theirs): a rank forgetting the user's modules, the field cache stamping their files, the spares learning
third-party packages, the runner purging a job's modules, the adapters looking for a helper's holders
and eager TorchScript mode swapping compiled functions each leave such a module unloaded. Runs in a
fresh interpreter, as a rank or the runner does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distcheck.runtime.module_namespace import module_file, namespace

ROOT = Path(__file__).resolve().parents[3]

LAZY = """
import importlib.util, json, sys

def lazy(name):
    spec = importlib.util.find_spec(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)  # registers it; runs nothing until an attribute is read
"""

CASE = """
    project = sys.argv[1]

    def loaded():
        return "heavy_dep_mn" in sys.modules

    from distcheck.processes import resident
    from distcheck.processes.spares import learned
    from distcheck.runtime import adapters
    from distcheck.jobs.paths import purge_user_modules
    from distcheck.validate.field_cache import module_files
    before = set(sys.modules)
    seen = {}

    lazy("lazy_user_mn")
    seen["module_files"] = [list(module_files(["lazy_user_mn"])), loaded()]
    seen["third_party_since"] = [sorted(learned.third_party_since(before)), loaded()]
    seen["holders"] = [len(adapters._holders(object())), loaded()]
    seen["forget_user_modules"] = ["lazy_user_mn" in resident.forget_user_modules(), loaded()]
    lazy("lazy_user_mn")
    purge_user_modules(before, [project])
    seen["purge_user_modules"] = ["lazy_user_mn" not in sys.modules, loaded()]
    print(json.dumps(seen))
"""


@pytest.mark.procs
def test_no_walk_over_sys_modules_loads_a_lazily_registered_module(tmp_path: Path) -> None:
    (tmp_path / "heavy_dep_mn.py").write_text("VALUE = 1\n")
    (tmp_path / "lazy_user_mn.py").write_text("import heavy_dep_mn\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "server")])}
    run = subprocess.run(
        [sys.executable, "-c", LAZY + textwrap.dedent(CASE), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen == {
        "module_files": [[str(tmp_path / "lazy_user_mn.py")], False],
        "third_party_since": [[], False],
        "holders": [0, False],
        "forget_user_modules": [True, False],
        "purge_user_modules": [True, False],
    }


def test_objects_that_are_not_modules_are_read_as_usual_and_never_raise() -> None:
    class Shim:  # what some packages put in `sys.modules` in place of a module
        __file__ = "/somewhere/shim.py"

        def __init__(self) -> None:
            self.value = 1

    class Hostile:
        @property
        def __dict__(self) -> dict[str, object]:  # type: ignore[override]
            raise RuntimeError("read")

        def __getattr__(self, name: str) -> object:
            raise RuntimeError(name)

    assert namespace(Shim()) == {"value": 1} and module_file(Shim()) == "/somewhere/shim.py"
    assert namespace(Hostile()) is None and module_file(Hostile()) is None
    assert module_file(json) == json.__file__ and namespace(json) is vars(json)


EAGER = """
    import torch
    from distcheck.runtime.torchscript import apply_torchscript_mode
    from distcheck.spec import MLIPSpec

    lazy("lazy_heavy_ts")
    lazy("lazy_other_ts")

    class NotAModule:  # some packages put instances in sys.modules
        @property
        def __dict__(self):
            raise RuntimeError("read")
    sys.modules["odd_entry_ts"] = NotAModule()

    import scripted_ts
    compiled = scripted_ts.double
    spec = lambda mode: MLIPSpec.from_dict(
        {"format": "distcheck-spec", "version": 1, "distribution": {"torchscript": mode}})
    apply_torchscript_mode(spec("eager"))
    eager = scripted_ts.double
    heavy = "heavy_dependency_ts" in sys.modules
    namespace = object.__getattribute__(sys.modules["lazy_heavy_ts"], "__dict__")  # reading it loads nothing
    apply_torchscript_mode(spec("scripted"))
    print(json.dumps({
        "lazy_loaded": namespace.get("LOADED", False), "heavy_imported": heavy,
        "swapped": eager is not compiled and not isinstance(eager, torch.jit.ScriptFunction),
        "eager_value": eager(torch.tensor(2.0)).item(), "restored": scripted_ts.double is compiled,
    }))
"""


@pytest.mark.procs
def test_eager_mode_swaps_compiled_functions_and_loads_no_lazy_module(tmp_path: Path) -> None:
    (tmp_path / "heavy_dependency_ts.py").write_text("VALUE = 1\n")
    (tmp_path / "lazy_heavy_ts.py").write_text("import heavy_dependency_ts\nLOADED = True\n")
    (tmp_path / "lazy_other_ts.py").write_text("raise RuntimeError('a lazy module was loaded')\n")
    (tmp_path / "scripted_ts.py").write_text(
        textwrap.dedent(
            """
            import torch

            @torch.jit.script
            def double(x: torch.Tensor) -> torch.Tensor:
                return x * 2
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "server")])}
    run = subprocess.run(
        [sys.executable, "-c", LAZY + textwrap.dedent(EAGER)], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen == {
        "lazy_loaded": False,
        "heavy_imported": False,
        "swapped": True,
        "eager_value": 4.0,
        "restored": True,
    }
