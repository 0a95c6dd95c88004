"""`distribution.torchscript: "eager"` swaps compiled module-level functions for their Python originals
without touching what the process only registered: a lazily imported module stays unloaded (loading it
would import packages the model never used, such as scipy.sparse or pytest under cupyx), and objects
that are not modules in `sys.modules` are passed over. Each case runs in a fresh interpreter, as a rank
does, so the JIT switch cannot leak into other tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CASE = """
    import importlib.util, json, sys, types
    import torch
    from distcheck.runtime.torchscript import apply_torchscript_mode
    from distcheck.spec import MLIPSpec

    def lazy(name):
        spec = importlib.util.find_spec(name)
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)  # registers it; runs nothing until an attribute is read
        return module

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
        [sys.executable, "-c", textwrap.dedent(CASE)], env=env, capture_output=True, text=True, timeout=120
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
