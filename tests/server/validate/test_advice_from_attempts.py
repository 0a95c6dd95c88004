"""`next_action` is derived from the attempts (issue 32, item 4): it never advises a remedy auto-fix tried
and rolled back, names the adapter the user declared when that adapter is what fails, keeps every ready
remedy (helper adapter, `custom_ops` entry, the receptive field's depth or cutoff) with the spec text to
write — once — and says why a fix with evidence was not tried. Reports are built by hand: no process."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distcheck.report import (
    Attempt,
    HelperDiagnosis,
    OutputVerdict,
    ReceptiveField,
    Rollback,
    TraceReport,
    UnroutedOp,
)
from distcheck.report.fixes import SkippedFix
from distcheck.report.kernels import KernelCall, KernelTensor
from distcheck.report.ops import DivergentOp
from distcheck.report.parts import HaloCompleteness, LayerDivergence, ReportMeta, view
from distcheck.spec import MLIPSpec
from distcheck.validate.next_action import next_action

BARE: dict[str, Any] = {"format": "distcheck-spec", "version": 1, "output_kinds": {"energy": "per_graph"}}
ADAPTER = {"kind": "reduction", "module_path": "pkg.ops", "attr_name": "mol_sum", "atom_arg": 0, "atom_dim": 0}
ENTRY = {"op": "mylib::seg_sum", "arg_transforms": {"0": "slice_owned"}, "output_transforms": {"0": "all_reduce_sum"}}


def _spec(**distribution: Any) -> MLIPSpec:
    return MLIPSpec.from_dict({**BARE, "distribution": distribution})


def _attempt(index: int, spec: MLIPSpec, rel: float, rule: str | None = None, **extra: Any) -> Attempt:
    v = OutputVerdict("energy", "per_graph", False, rel, rel, "mismatch", [0], 1, 1)
    a = Attempt(index, spec, f"try {index}", rule, False, {}, {}, {"energy": v}, {}, None, [], None, {}, {}, {})
    for key, value in extra.items():
        setattr(a, key, value)
    return a


def _report(attempts: list[Attempt], field: ReceptiveField | None = None) -> TraceReport:
    r = TraceReport(
        ok=False,
        spec=attempts[0].spec,
        attempts=attempts,
        next_action="",
        meta=ReportMeta(world_size=2, atol=1e-5, rtol=1e-4),
        best_index=0,
        receptive_field=field,
    )
    r.next_action = next_action(r)
    return r


def _rolled(index: int, spec: MLIPSpec, rule: str) -> Attempt:
    return _attempt(index, spec, 0.9, rule, rolled_back=Rollback(0, "larger differences"))


def _scripted(op: str = "aten.index_add") -> UnroutedOp:
    return UnroutedOp(op, "per_atom_to_per_system", "torchscript", 2, "m.py", 10, "readout", "m.py", 40, [0, 1])


def _helper(wrapped: bool, remedy: dict[str, Any] | None, passed: bool | None = False) -> HelperDiagnosis:
    gap = None if wrapped else "pkg.ops.mol_sum reduces per system over the rows each rank holds"
    notes = ["call 0: the ranks disagree with each other"]
    return HelperDiagnosis(
        "pkg.ops", "mol_sum", 1, {0: 1, 1: 1}, "per_system_sum", 0.9, "sum_over_ranks_matches_ref", passed,
        wrapped, gap, remedy, None, notes,
    )  # fmt: skip


def _kernel() -> UnroutedOp:
    call = KernelCall(
        [KernelTensor("0", "per_atom", [10], "float64")], [KernelTensor("0", "per_system", [1], "float64")], ENTRY
    )
    return UnroutedOp(
        "mylib::seg_sum", "per_atom_to_per_system", "custom_op", 2, "m.py", 12, None, None, None, [0, 1], call
    )


# ---- what was tried and rolled back is not advised again


@pytest.mark.parametrize("ops", [[_scripted()], [_scripted(), _scripted("aten.scatter_add")]])
def test_the_eager_remedy_auto_fix_rolled_back_is_not_advised(ops: list[UnroutedOp]) -> None:
    scripted = _spec()
    eager = _spec(torchscript="eager")
    report = _report([_attempt(0, scripted, 0.1, unrouted=ops), _rolled(1, eager, "run_torchscript_eagerly")])
    head = report.next_action.split("\n")[0]
    assert "(auto-fix does)" not in head and 'set distribution.torchscript to "eager"' not in head, head
    assert "already tried" in head and "attempt 2" in head, head
    assert "third_party_helpers" in head, head  # the step that is left
    # not tried: the advice stands
    fresh = _report([_attempt(0, scripted, 0.1, unrouted=ops)])
    assert '"eager" (auto-fix does)' in fresh.next_action.split("\n")[0]


def test_a_custom_ops_entry_auto_fix_rolled_back_is_not_advised() -> None:
    declared = _spec(custom_ops=[ENTRY])
    report = _report([_attempt(0, _spec(), 0.1, unrouted=[_kernel()]), _rolled(1, declared, "declare_custom_ops")])
    text = report.next_action
    assert f"add {json.dumps(ENTRY)} to distribution.custom_ops" not in text, text
    assert "already tried mylib::seg_sum in distribution.custom_ops (attempt 2)" in text.split("\n")[0], text
    fresh = _report([_attempt(0, _spec(), 0.1, unrouted=[_kernel()])])
    assert f"add {json.dumps(ENTRY)} to distribution.custom_ops" in fresh.next_action


def test_a_widened_halo_auto_fix_rolled_back_is_said_with_the_halo_advice() -> None:
    shallow = {"matches": False, "halo_width": 3.5, "required_width": 9.0, "interpretation": "The halo is 3.5 Å"}
    wider = _spec(policy={"halo_width": 9.5})
    halo = view(HaloCompleteness, shallow)
    report = _report([_attempt(0, _spec(), 0.1, halo_completeness=halo), _rolled(1, wider, "widen_halo")])
    head = report.next_action.split("\n")[0]
    assert head.startswith("FAIL — halo too shallow") and "widened it in attempt 2" in head, head


def test_a_helper_adapter_auto_fix_rolled_back_is_not_advised() -> None:
    declared = _spec(third_party_helpers=[ADAPTER])
    report = _report(
        [
            _attempt(0, _spec(), 0.1, helper_diagnostics=[_helper(False, ADAPTER)]),
            _rolled(1, declared, "declare_helper_adapter"),
        ]
    )
    text = report.next_action
    assert f"add {json.dumps(ADAPTER)} to distribution.third_party_helpers" not in text, text
    assert "rolled back" in text.split("\n")[0] and "upstream" in text.split("\n")[0], text


# ---- the user's own declaration, when it is what fails


@pytest.mark.parametrize(
    "declared",
    [
        {**ADAPTER, "atom_arg": 1},  # wrong argument
        {"kind": "python", "module_path": "pkg.ops", "attr_name": "mol_sum", "replacement": "pkg.fixed:mol_sum"},
        ADAPTER,  # the right shape, yet it does not agree
    ],
)
def test_a_declared_adapter_that_fails_is_named(declared: dict[str, Any]) -> None:
    spec = _spec(third_party_helpers=[declared])
    remedy = ADAPTER if declared != ADAPTER else None
    report = _report([_attempt(0, spec, 0.1, helper_diagnostics=[_helper(True, remedy)])])
    head = report.next_action.split("\n")[0]
    assert "your declared adapter" in head and "pkg.ops.mol_sum" in head, head
    assert json.dumps(spec.helper("pkg.ops.mol_sum").to_dict()) in head, head  # type: ignore[union-attr]
    if remedy is not None:
        assert f"replace it with {json.dumps(remedy)}" in head, head


@pytest.mark.parametrize("op", ["torch.ops.mylib.seg_sum", "mylib::seg_sum", "torch.ops.mylib.seg_sum.default"])
def test_a_declared_custom_op_whose_output_departs_first_is_named(op: str) -> None:
    spec = _spec(custom_ops=[ENTRY])
    layer = LayerDivergence(first_op=DivergentOp(op, "/p/model.py", 41, "Readout.forward"))
    report = _report([_attempt(0, spec, 0.1, layer_divergence=layer)])
    head = report.next_action.split("\n")[0]
    assert "your declared entry" in head and "mylib::seg_sum" in head and "model.py:41" in head, head
    assert json.dumps(spec.distribution.custom_ops[0].to_dict()) in head, head


def test_a_declared_custom_op_is_named_among_what_was_checked() -> None:
    spec = _spec(custom_ops=[ENTRY])
    report = _report([_attempt(0, spec, 0.1, handler_counts={"custom_op[mylib::seg_sum]": 4})])
    assert "your declared distribution.custom_ops entries: mylib::seg_sum ×4" in report.next_action, report.next_action


# ---- every ready remedy, once


def _field(remedy: str) -> ReceptiveField:
    return ReceptiveField(
        "measured", 3.0, 1, 3.0, 2, 6.0, "forces", 4, True, None, "", reach_hops=2, reach_angstrom=6.0,
        remedy=remedy, suggested_cutoff=6.5 if remedy == "cutoff" else None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("unrouted", "helpers", "field", "expected"),
    [
        # an unrouted Python reduction leads; the flagged helper's adapter used to be dropped
        (
            [UnroutedOp("aten.sum", "per_atom_to_per_system", "python", 1, "m.py", 3)],
            [_helper(False, ADAPTER)],
            None,
            [f"add {json.dumps(ADAPTER)} to distribution.third_party_helpers"],
        ),
        # a kernel leads, a helper and a cutoff remedy follow
        (
            [_kernel()],
            [_helper(False, ADAPTER)],
            _field("cutoff"),
            [
                f"add {json.dumps(ENTRY)} to distribution.custom_ops",
                f"add {json.dumps(ADAPTER)} to distribution.third_party_helpers",
                "set cutoff = 6.5 on the wrapper",
            ],
        ),
        # two helpers: both adapters; a depth remedy
        (
            [],
            [_helper(False, ADAPTER), _helper(False, {**ADAPTER, "attr_name": "mol_mean"})],
            _field("depth"),
            [
                f"add {json.dumps(ADAPTER)} to distribution.third_party_helpers",
                f"add {json.dumps({**ADAPTER, 'attr_name': 'mol_mean'})} to distribution.third_party_helpers",
                "set num_interactions = 2 on the wrapper",
            ],
        ),
    ],
)
def test_every_ready_remedy_is_kept_once(
    unrouted: list[UnroutedOp], helpers: list[HelperDiagnosis], field: ReceptiveField | None, expected: list[str]
) -> None:
    report = _report([_attempt(0, _spec(), 0.1, unrouted=unrouted, helper_diagnostics=helpers)], field)
    text = report.next_action
    for remedy in expected:
        assert text.count(remedy) == 1, (remedy, text)


def test_a_skipped_fix_is_the_next_step() -> None:
    skip = SkippedFix("owned_complete_to_local", "a 9.5 Å halo would leave a rank holding system 0 whole", 9.5)
    report = _report([_attempt(0, _spec(), 0.1, skipped_fixes=[skip])])
    head = report.next_action.split("\n")[0]
    assert "not tried (owned_complete_to_local)" in head and "9.5 Å" in head, head
    assert "cause unknown" not in report.next_action
