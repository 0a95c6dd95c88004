"""See everything, or say what was not seen: the accuracy corpus (`examples/accuracy`) end to end.

Every per-edge → per-atom and per-atom → per-system aggregation is routed (the model passes with its
own spec, and its buggy twin still fails) or named (op, count, file:line): aggregations inside
TorchScript are named with the scripted function's line, `next_action` says so first, and auto-fix
records `distribution.torchscript: "eager"`, after which the correct model passes and the buggy twin
still fails. A form with no distributed handler (a per-system product) is named at its Python line and
not "fixed".
"""

from __future__ import annotations

import copy
import inspect
import json
import os
from types import ModuleType
from typing import Any

import pytest

from distcheck import TraceReport, validate_on_cpu
from distcheck.report import Attempt, UnroutedOp, merge_unrouted
from examples.accuracy import (
    mask_loop,
    method_forms,
    multi_total,
    named_only,
    scatter_reduce_forms,
    scripted_imported,
    scripted_local,
    scripted_module,
    scripted_ops,
    segment_offsets,
    unique_counts,
)

pytestmark = pytest.mark.procs

ROUTED = [mask_loop, method_forms, multi_total, segment_offsets, scatter_reduce_forms, unique_counts]
SCRIPTED = [scripted_local, scripted_imported, scripted_module]
OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0, "max_fix_attempts": 3}


def _validate(module: ModuleType, factory: str = "model_factory", **options: Any) -> TraceReport:
    spec = copy.deepcopy(module.SPEC)
    report = validate_on_cpu(getattr(module, factory), module.sample_batch(), spec=spec, **{**OPTIONS, **options})
    assert TraceReport.from_json(report.to_json()) == report  # every typed record survives JSON
    return report


def _marked(module: ModuleType, marker: str) -> tuple[str, int]:
    """`(file, line)` of the source line of `module` holding `marker`."""
    path = os.path.abspath(inspect.getsourcefile(module) or "")
    with open(path) as fh:
        lines = [i for i, text in enumerate(fh, start=1) if marker in text]
    assert len(lines) == 1, (path, marker, lines)
    return path, lines[0]


def _by_aggregation(attempt: Attempt) -> dict[str, UnroutedOp]:
    return {u.aggregation: u for u in attempt.unrouted}


# -- routed forms -----------------------------------------------------------------------------------
@pytest.mark.parametrize("module", ROUTED, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_routed_form_passes_without_a_fix(module: ModuleType) -> None:
    """Mask loops, method/in-place/out= forms, multi-system totals, segment offsets, scatter_reduce
    mean/amax and unique counts are routed: the first attempt passes and nothing is unrouted."""
    report = _validate(module)
    assert report.verdict == "passed", report.next_action
    assert len(report.attempts) == 1 and report.fix_applied is None
    assert report.attempts[0].unrouted == []
    assert report.attempts[0].handler_counts.get("per_system_reduce", 0) >= 2


@pytest.mark.parametrize("module", ROUTED, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_buggy_twin_of_a_routed_form_still_fails(module: ModuleType) -> None:
    """Routing does not hide a real bug (energies anchored to row 0): the twin fails, every attempt,
    and no TorchScript remedy is offered where nothing was unrouted."""
    report = _validate(module, "buggy_model_factory")
    assert report.verdict == "failed", report.next_action
    assert not any(a.passed for a in report.attempts)
    assert all(a.rule != "run_torchscript_eagerly" for a in report.attempts)
    assert report.spec.distribution.torchscript == "scripted"


# -- scripted aggregations --------------------------------------------------------------------------
def _expected_sites(module: ModuleType) -> dict[str, tuple[str, int, str]]:
    """aggregation → (file, line, function) of the scripted op the model runs."""
    if module is scripted_module:
        file, line = _marked(scripted_module, "# unrouted: per-atom -> per-system")
        return {"per_atom_to_per_system": (file, line, "SystemSum.forward")}
    home = scripted_local if module is scripted_local else scripted_ops
    edge_file, edge_line = _marked(home, "# unrouted: per-edge -> per-atom")
    sys_file, sys_line = _marked(home, "# unrouted: per-atom -> per-system")
    if module is scripted_local:
        return {
            "per_edge_to_per_atom": (edge_file, edge_line, "receive"),
            "per_atom_to_per_system": (sys_file, sys_line, "per_system"),
        }
    return {
        "per_edge_to_per_atom": (edge_file, edge_line, "scatter_receivers"),
        "per_atom_to_per_system": (sys_file, sys_line, "_sum_by"),  # two scripted calls deep
    }


@pytest.mark.parametrize("module", SCRIPTED, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_scripted_aggregations_are_named_and_fixed_by_running_them_eagerly(module: ModuleType) -> None:
    report = _validate(module)
    assert report.verdict == "passed", report.next_action
    first, fixed = report.attempts[0], report.attempts[-1]
    assert not first.passed and fixed.passed and fixed.rule == "run_torchscript_eagerly"
    # the fix is recorded in the spec, and nothing runs unseen once it is applied
    assert report.spec.distribution.torchscript == "eager"
    assert report.spec.to_dict()["distribution"]["torchscript"] == "eager"
    assert fixed.unrouted == []
    # named: op, count, the scripted function's own file:line, and the Python line that called it
    named = _by_aggregation(first)
    expected = _expected_sites(module)
    assert set(named) == set(expected)
    for aggregation, (file, line, function) in expected.items():
        op = named[aggregation]
        assert op.origin == "torchscript" and (op.file, op.line, op.function) == (file, line, function), op
        assert op.count == 2 and op.ranks == [0, 1] and op.op in ("aten.index_add", "aten.scatter_add")
        assert op.call_file == os.path.abspath(inspect.getsourcefile(module) or "")
    assert "run_torchscript_eagerly" in report.next_action and report.next_action.startswith("OK — ")


@pytest.mark.parametrize("module", SCRIPTED, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_unrouted_scripted_aggregations_lead_next_action(module: ModuleType) -> None:
    """Without auto-fix the first line names what ran unseen (function, file:line) and the spec field that
    routes it — not output kinds or consolidation."""
    report = _validate(module, auto_fix=False)
    assert report.verdict == "failed"
    head = report.next_action.split("\n")[0]
    assert head.startswith("FAIL — ") and "ran where distcheck's handlers cannot route" in head
    for file, line, function in _expected_sites(module).values():
        assert f"in {function} at {os.path.basename(file)}:{line}" in head, head
    assert 'distribution.torchscript to "eager"' in head
    assert "output_kinds" not in report.next_action
    data = json.loads(report.to_json())
    assert {u["location"] for u in data["attempts"][0]["unrouted"]} == {
        f"{file}:{line}" for file, line, _ in _expected_sites(module).values()
    }


@pytest.mark.parametrize("module", SCRIPTED, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_buggy_scripted_twin_still_fails_after_the_eager_remedy(module: ModuleType) -> None:
    report = _validate(module, "buggy_model_factory")
    assert report.verdict == "failed", report.next_action
    eager = [a for a in report.attempts if a.rule == "run_torchscript_eagerly"]
    assert len(eager) == 1 and not eager[0].passed and eager[0].unrouted == []
    assert report.attempts[0].unrouted  # the scripted run named them


# -- a form with no distributed handler -------------------------------------------------------------
def test_form_without_a_handler_is_named_at_its_python_line_and_not_fixed() -> None:
    report = _validate(named_only)
    assert report.verdict == "failed"
    file, line = _marked(named_only, "# named: no distributed form")
    ops = report.attempts[0].unrouted
    assert [(u.op, u.aggregation, u.origin, u.file, u.line) for u in ops] == [
        ("scatter_reduce(prod)", "per_atom_to_per_system", "python", file, line)
    ]
    assert ops[0].function == "NamedOnly.extra_outputs" and ops[0].count == 2
    head = report.next_action.split("\n")[0]
    assert f"scatter_reduce(prod) ×2 (atoms → systems) in NamedOnly.extra_outputs at named_only.py:{line}" in head
    assert "Code that is safe to write" in head
    # eager TorchScript cannot help a Python-level form: no such fix is tried or recorded
    assert all(a.rule != "run_torchscript_eagerly" for a in report.attempts)
    assert report.spec.distribution.torchscript == "scripted"


def test_undeclared_custom_op_is_named_with_the_kernel() -> None:
    """An undeclared `torch.ops` kernel that aggregates atoms into systems is named after itself, at the
    Python line that calls it."""
    from distcheck import run_distributed
    from distcheck.runtime import load_object

    models = os.path.join(os.path.dirname(__file__), "..", "runtime", "handler_models.py")
    batch = load_object(f"{models}:sample_single")()
    run = run_distributed(f"{models}:factory_custom_op", batch, {"format": "distcheck-spec", "version": 1})
    ops = merge_unrouted([(r.rank, r.unrouted) for r in run.records])
    assert [(u.op, u.aggregation, u.origin, u.function, os.path.basename(u.file or "")) for u in ops] == [
        (
            "distcheck_test::system_sum",
            "per_atom_to_per_system",
            "custom_op",
            "distcheck_test::system_sum",
            "handler_models.py",
        )
    ]


# -- the typed record -------------------------------------------------------------------------------
def test_unrouted_record_json_is_strict_and_merges_over_ranks() -> None:
    op = UnroutedOp("aten.index_add", "per_atom_to_per_system", "torchscript", 3, "/m/ops.py", 25, "_sum_by")
    again = UnroutedOp.from_dict(json.loads(json.dumps(op.to_dict())))
    assert again == op and again.location == "/m/ops.py:25"
    with pytest.raises(ValueError, match="aggregation"):
        UnroutedOp.from_dict({**op.to_dict(), "aggregation": "sideways"})
    with pytest.raises(ValueError, match="count"):
        UnroutedOp.from_dict({**op.to_dict(), "count": "3"})
    merged = merge_unrouted([(0, [op]), (1, [op, UnroutedOp("x", "per_atom_total", "python", 1)])])
    assert [(u.op, u.count, u.ranks) for u in merged] == [("aten.index_add", 6, [0, 1]), ("x", 1, [1])]
