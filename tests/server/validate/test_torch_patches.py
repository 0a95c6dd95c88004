"""A model module that patches torch gets the verdict a fresh process gives (warm equals cold).

The models (`torch_patch_models/`) are the examples' pair potential, correct, each with one shape of
the same mistake: a `torch.Tensor` method or torch function wrapped at import to double what it
returns (`index_add_`, `abs`, `max`, `exp`), passthrough wrappers that only count their calls, a global
forward hook that doubles the model's outputs, `torch.exp` wrapped by the factory instead of the import.

- Imported into the process that validates (the user's script, the CLI, the editor's runner), such a
  module must not reach distcheck's own consolidation and comparison (`runtime.pristine`): the report
  is the one a fresh subprocess gives, which never imports it, and none of the counting wrappers is
  ever called by distcheck.
- Re-imported by a resident rank for the next run of the validation (an auto-fix attempt, the round-off
  floor's control run), its patch would apply twice: the ranks retire instead
  (`isolation.torch_surface`), so the report is the one with resident ranks off.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import distcheck
from distcheck import TraceReport, validate_on_cpu
from distcheck.runtime.isolation import _NAMESPACES, _namespace, isolated_global_state
from distcheck.runtime.run_result import RETIRED_TIMING

pytestmark = pytest.mark.procs

HERE = Path(__file__).resolve().parent
MODELS = HERE / "torch_patch_models"
ROOT = HERE.parents[2]
SERVER = Path(distcheck.__file__).resolve().parents[1]
_HOOKS = torch.nn.modules.module


def _ref(name: str) -> str:
    return f"{MODELS / name}.py:model_factory"


def _pair() -> Any:
    if str(MODELS) not in sys.path:
        sys.path.insert(0, str(MODELS))
    return importlib.import_module("pair")


@pytest.fixture
def torch_put_back() -> Iterator[None]:
    """Whatever a module imported by the test patches in torch (attributes, global hooks) is put back
    after it, and the test's modules are forgotten: this process stays what it was for other tests."""
    saved = {name: dict(vars(_namespace(name))) for name in _NAMESPACES if _namespace(name) is not None}
    hooks = {n: dict(v) for n, v in vars(_HOOKS).items() if n.startswith("_global_") and isinstance(v, dict)}
    modules = set(sys.modules)
    try:
        yield
    finally:
        for name, was in saved.items():
            space = _namespace(name)
            for key in [k for k, v in vars(space).items() if k not in was and not isinstance(v, types.ModuleType)]:
                delattr(space, key)
            for key, value in was.items():
                if vars(space).get(key) is not value:
                    setattr(space, key, value)
        for name, was_hooks in hooks.items():
            live = getattr(_HOOKS, name)
            live.clear()
            live.update(was_hooks)
        for name in set(sys.modules) - modules:
            if name in ("pair", "counting", "double_index_add", "scaled_reductions"):
                sys.modules.pop(name, None)


def _verdicts(report: TraceReport) -> list[tuple[bool, str | None, dict[str, float | None]]]:
    return [(a.passed, a.rule, dict(a.max_abs_diff)) for a in report.attempts]


def _fresh_process(name: str) -> dict[str, Any]:
    """The report of validating `name` in a fresh interpreter that never imports it (the ranks and the
    reference do): passed, and each attempt's (passed, rule, max_abs_diff)."""
    code = f"""
        import json, sys
        sys.path.insert(0, {str(MODELS)!r})
        import pair
        from distcheck import validate_on_cpu
        report = validate_on_cpu({_ref(name)!r}, pair.sample_batch())
        attempts = [[a.passed, a.rule, a.max_abs_diff] for a in report.attempts]
        print(json.dumps({{"ok": report.ok, "attempts": attempts}}))
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SERVER), str(ROOT)]))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=240, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _same_verdicts(warm: TraceReport, cold: dict[str, Any]) -> None:
    assert warm.ok == cold["ok"]
    got = _verdicts(warm)
    assert [(p, r) for p, r, _ in got] == [(p, r) for p, r, _ in cold["attempts"]]
    for (_, _, diffs), (_, _, want) in zip(got, cold["attempts"]):
        assert diffs.keys() == want.keys()
        for name, value in diffs.items():  # a doubled abs or max doubles a max diff: equal within round-off
            assert value == pytest.approx(want[name], rel=1e-6, abs=1e-300), (name, diffs, want)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["double_index_add", "scaled_reductions"])
@pytest.mark.usefixtures("torch_put_back")
def test_a_module_that_patched_torch_here_gets_the_verdict_of_a_fresh_process(name: str) -> None:
    """`index_add_` adding twice, `abs` and `max` doubled, in this process: consolidation and the diff
    compute as if nothing had been patched (today: forces doubled by consolidation, max diffs doubled)."""
    cold = _fresh_process(name)
    assert cold["ok"], cold
    sample = _pair().sample_batch()
    module = importlib.import_module(name)  # the patch applies here now
    patched = {"double_index_add": torch.Tensor.index_add_, "scaled_reductions": torch.Tensor.abs}[name]
    assert patched.__module__ == name, "the module did not patch torch in this process"
    warm = validate_on_cpu(module.model_factory, sample)
    _same_verdicts(warm, cold)


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("torch_put_back")
def test_distcheck_never_calls_the_torch_functions_a_users_module_replaced() -> None:
    """Passthrough wrappers that count their calls (index_add_, abs, sub, max, sum, isclose, allclose,
    isfinite, where, exp, the boolean operators): validating in this process calls none of them here."""
    cold = _fresh_process("counting")
    sample = _pair().sample_batch()
    counting = importlib.import_module("counting")
    counting.CALLS.clear()
    warm = validate_on_cpu(counting.model_factory, sample)
    assert dict(counting.CALLS) == {}, "distcheck called the user's wrappers in the validating process"
    _same_verdicts(warm, cold)
    assert warm.ok


def _one_fix(name: str) -> TraceReport:
    pair = _pair()
    return validate_on_cpu(_ref(name), pair.sample_batch(), spec=pair.shallow_spec())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["double_exp", "scaling_hook", "factory_exp"])
def test_resident_ranks_retire_after_an_import_that_patched_torch(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose import (or factory) doubles `torch.exp`, or registers a global forward hook that
    doubles its outputs, on a spec whose halo is too shallow: the first attempt fails (its error is far
    above the round-off floor), `widen_halo` fixes it. With resident ranks the report is the one with
    every run in new ranks (today the control run and the fix attempt ran in ranks that had imported
    the module twice: a floor off by the patch, a first attempt that passed with a halo too shallow)."""
    kept = _one_fix(name)
    monkeypatch.setenv("DISTCHECK_RESIDENT_RANKS", "0")
    fresh = _one_fix(name)
    assert [(p, r) for p, r, _ in _verdicts(fresh)] == [(False, None), (True, "widen_halo")]
    _same_verdicts(kept, {"ok": fresh.ok, "attempts": [list(v) for v in _verdicts(fresh)]})
    # the ranks that imported the module said they would serve no further run
    assert kept.attempts[0].timings.get(RETIRED_TIMING) == 2.0


def test_the_guard_names_each_change_to_torch_and_none_otherwise() -> None:
    """`GlobalStateGuard.unrestored` (what makes a resident rank retire): a wrapped tensor method and
    torch function, a global forward hook, an op defined; nothing when nothing changed."""
    with isolated_global_state(on_unrestored=None) as quiet:
        torch.zeros(3).index_add_(0, torch.tensor([0]), torch.ones(1))
    assert quiet.unrestored == []
    original_method, original_function = torch.Tensor.index_add_, torch.exp
    library = torch.library.Library("distcheck_patch_probe", "DEF")
    try:
        with isolated_global_state(on_unrestored=None) as guard:
            torch.Tensor.index_add_ = lambda self, *a, **k: original_method(self, *a, **k)  # type: ignore[method-assign]
            torch.exp = lambda x, **k: original_function(x, **k)  # type: ignore[assignment]
            handle = torch.nn.modules.module.register_module_forward_hook(lambda m, a, out: out)
            library.define("twice(Tensor x) -> Tensor")
    finally:
        del torch.Tensor.index_add_
        torch.exp = original_function  # type: ignore[assignment]
        handle.remove()
        library._destroy()
    text = "\n".join(guard.unrestored)
    assert "torch.Tensor.index_add_ was replaced" in text
    assert "torch.exp was replaced" in text
    assert "_global_forward_hooks" in text
    assert "distcheck_patch_probe::twice" in text
    assert all("serves no further run" in line for line in guard.unrestored)
