"""`runtime.op_trace.OpTracer` in one process: which ops it records and where it names them. The user's
line (a helper's own line in another user file), a third-party package's op at the user's line that
called into it with the package's own line as `site`, no gradient or anything made from one, no
integer or per-edge tensor, and the fingerprint of each level. No processes.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import torch

from distcheck.runtime.op_trace import OpTracer

USER = """
import torch
from helper_file import total
from fakepkg.ops import double

def run(x, edges):
    y = x * 2.0  # op: mul
    t = total(y)
    z = double(y)  # op: package
    ids = torch.arange(x.shape[0])
    w = edges * 3.0
    g = torch.autograd.grad(y.sum(), x)[0]
    f = -g * 4.0
    return t, z, ids, w, f
"""
HELPER = """
def total(values):
    return values.sum()  # op: helper
"""
PACKAGE = """
def double(values):
    return values + values  # op: inside
"""


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _line(path: Path, marker: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), start=1) if f"# op: {marker}" in t)


def test_the_tracer_names_the_users_line_and_the_packages(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "site-packages" / "fakepkg"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (site / "ops.py").write_text(textwrap.dedent(PACKAGE))
    user, helper = tmp_path / "user_model.py", tmp_path / "helper_file.py"
    user.write_text(textwrap.dedent(USER))
    helper.write_text(textwrap.dedent(HELPER))
    sys.path[:0] = [str(tmp_path), str(site.parent)]
    try:
        module = _load(user, "user_model")
        x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
        edges = torch.randn(100, dtype=torch.float64)
        tracer = OpTracer(6, 1)
        with tracer:
            module.run(x, edges)
    finally:
        del sys.path[:2]
        for name in ("user_model", "helper_file", "fakepkg", "fakepkg.ops"):
            sys.modules.pop(name, None)
    found = {(r["op"], Path(r["file"]).name, r["line"]): r for r in tracer.collect()["ops"]}
    mul = found[("Tensor.mul", "user_model.py", _line(user, "mul"))]
    assert mul["level"] == "per_atom" and mul["site"] is None
    assert abs(float(mul["value"][2]) - sum(1 + (i * 0.6180339887498949) % 1 for i in range(6))) < 1e-12
    assert found[("Tensor.sum", "helper_file.py", _line(helper, "helper"))]["level"] == "small"
    inside = found[("Tensor.add", "user_model.py", _line(user, "package"))]
    assert inside["site"] == f"{site / 'ops.py'}:{_line(site / 'ops.py', 'inside')}"
    # `y.sum()` (the energy, 3 lines below) too; nothing from `torch.arange`, the edges or the gradient
    assert set(found) == {
        ("Tensor.mul", "user_model.py", _line(user, "mul")),
        ("Tensor.sum", "helper_file.py", _line(helper, "helper")),
        ("Tensor.add", "user_model.py", _line(user, "package")),
        ("Tensor.sum", "user_model.py", _line(user, "package") + 3),
    }
