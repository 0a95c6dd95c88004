"""Undeclared `torch.ops` kernels are named with a ready `custom_ops` entry (issue 17 item 4).

The class of mistake: an opaque kernel aggregates across atoms or edges where the runtime cannot see,
and the spec does not declare it. Its shapes on a rank say which arguments are per-atom, per-edge,
per-system or replicated and which transforms route it; every shape of the mistake (atoms →
systems, edges → atoms, edges → systems) is named at the user's call line with that entry, a kernel
that aggregates nothing (elementwise, a gather into edges) is not, and declaring the proposed entries
makes the correct model pass. `examples/custom_op_model.py` registers the kernels with torch.library.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
from typing import Any

import pytest
import torch

from distcheck import TraceReport, validate_on_cpu
from distcheck.report import KernelCall, KernelTensor, UnroutedOp, render_text
from distcheck.runtime.context import RankContext
from distcheck.runtime.kernel_calls import kernel_call
from distcheck.spec import MLIPSpec
from distcheck.validate import autofix
from distcheck.validate.custom_op_rule import RULE
from distcheck.validate.unrouted import custom_op_entries
from examples import custom_op_model

OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0}
EDGE_TO_ATOM = "distcheck_example::edge_to_atom"
SEGMENT_SUM = "distcheck_example::segment_sum"
EDGE_SUM = "distcheck_example::edge_sum"
SOFTPLUS = "distcheck_example::shifted_softplus"


# -- the classifier on one rank's shapes (no processes) ---------------------------------------------
def _ctx(mode: str = "halo_correction") -> RankContext:
    owned = torch.tensor([True] * 8 + [False] * 4)
    return RankContext(
        rank=0, world_size=2, num_global_atoms=16, num_systems=2, local_ids=torch.arange(12),
        owned_mask=owned, scatter_mode=mode,
    )  # fmt: skip


N, B, E, F = 12, 2, 30, 3
X = torch.randn(N, F, dtype=torch.float64)
INDEX = torch.tensor([0] * 6 + [1] * 6)
EDGES = torch.randint(0, N, (2, E))
MESSAGES = torch.randn(E, F, dtype=torch.float64)
WEIGHTS = torch.randn(F, F, dtype=torch.float64)


def _entry(found: tuple[str, dict[str, Any]] | None) -> dict[str, Any] | None:
    assert found is not None
    entry: dict[str, Any] | None = found[1]["entry"]
    return entry


def test_atoms_to_systems_slices_every_per_atom_argument_and_sums_the_output() -> None:
    found = kernel_call(_ctx(), "ns::seg", (X, INDEX, B), {}, torch.zeros(B, F))
    assert found is not None and found[0] == "per_atom_to_per_system"
    assert [(t["position"], t["role"]) for t in found[1]["args"]] == [("0", "per_atom"), ("1", "per_atom")]
    assert _entry(found) == {
        "op": "ns::seg",
        "arg_transforms": {"0": "slice_owned", "1": "slice_owned"},
        "output_transforms": {"0": "all_reduce_sum"},
    }
    # the same mistake with a replicated weight in between and the data after it
    found = kernel_call(_ctx(), "ns::seg2", (WEIGHTS, INDEX, X), {}, (torch.zeros(B, F),))
    assert _entry(found) == {
        "op": "ns::seg2",
        "arg_transforms": {"1": "slice_owned", "2": "slice_owned"},
        "output_transforms": {"0": "all_reduce_sum"},
    }
    assert found is not None and found[1]["args"][0]["role"] == "replicated"


@pytest.mark.parametrize("index", [EDGES, EDGES[1]], ids=["edge_index[2,E]", "receivers[E]"])
def test_edges_to_atoms_gathers_per_atom_inputs_and_scatters_the_output(index: torch.Tensor) -> None:
    found = kernel_call(_ctx(), "ns::mp", (X, MESSAGES, index, N), {}, torch.zeros(N, F, dtype=torch.float64))
    assert found is not None and found[0] == "per_edge_to_per_atom"
    assert {t["position"]: t["role"] for t in found[1]["args"]} == {"0": "per_atom", "1": "per_edge", "2": "per_edge"}
    assert _entry(found) == {
        "op": "ns::mp",
        "arg_transforms": {"0": "gather_inputs"},
        "output_transforms": {"0": "scatter_outputs"},
    }
    # under `local` an edge aggregation is exact on the rows that matter: nothing to name
    assert kernel_call(_ctx("local"), "ns::mp", (X, MESSAGES, index, N), {}, torch.zeros(N, F)) is None
    # under `owned_complete` its halo rows are never refreshed and no transform only refreshes them: named, no entry
    found = kernel_call(_ctx("owned_complete"), "ns::mp", (X, MESSAGES, index, N), {}, torch.zeros(N, F))
    assert found is not None and found[1]["entry"] is None and "halo_correction" in found[1]["no_entry"]


def test_edges_to_systems_sums_the_output_and_has_no_entry_under_local() -> None:
    edge_system = INDEX[EDGES[0]]
    found = kernel_call(_ctx(), "ns::pairs", (MESSAGES[:, 0], edge_system, EDGES), {}, torch.zeros(B))
    assert found is not None and found[0] == "per_edge_to_per_system"
    assert _entry(found) == {"op": "ns::pairs", "arg_transforms": {}, "output_transforms": {"0": "all_reduce_sum"}}
    found = kernel_call(_ctx("local"), "ns::pairs", (MESSAGES[:, 0], edge_system, EDGES), {}, torch.zeros(B))
    assert found is not None and found[1]["entry"] is None and "halo_correction" in found[1]["no_entry"]


@pytest.mark.parametrize(
    ("args", "out"),
    [
        ((X,), X.clone()),  # elementwise per-atom
        ((X, WEIGHTS), X @ WEIGHTS),  # per-atom rows times replicated weights
        ((X, EDGES), X[EDGES[0]] - X[EDGES[1]]),  # a gather into edges
        ((torch.randn(B, F), WEIGHTS), torch.randn(B, F)),  # per-system in, per-system out
        ((WEIGHTS,), WEIGHTS.sum()),  # replicated in, a scalar out
    ],
    ids=["elementwise", "linear", "gather_to_edges", "per_system", "replicated"],
)
def test_kernels_that_aggregate_nothing_are_not_named(args: tuple[Any, ...], out: torch.Tensor) -> None:
    assert kernel_call(_ctx(), "ns::op", args, {}, out) is None


def test_no_entry_when_no_transform_fits_and_the_reason_says_what_to_change() -> None:
    found = kernel_call(_ctx(), "ns::kw", (INDEX,), {"x": X}, torch.zeros(B, F))
    assert found is not None and found[1]["entry"] is None and "by position" in found[1]["no_entry"]
    found = kernel_call(_ctx(), "ns::both", (X, INDEX), {}, (torch.zeros(B), X.clone()))
    assert found is not None and found[1]["entry"] is None and "split it" in found[1]["no_entry"]


# -- the entries a report proposes (no torch) --------------------------------------------------------
def _op(op: str, line: int, entry: dict[str, Any] | None, why: str | None = None) -> UnroutedOp:
    kernel = KernelCall([KernelTensor("0", "per_atom", [5], "float64")], [], entry, why)
    return UnroutedOp(op, "per_atom_to_per_system", "custom_op", 1, "/m/model.py", line, op, kernel=kernel)


def test_one_entry_per_kernel_and_a_note_when_its_calls_need_different_ones() -> None:
    a = {"op": "ns::a", "arg_transforms": {"0": "slice_owned"}, "output_transforms": {"0": "all_reduce_sum"}}
    b = {"op": "ns::b", "arg_transforms": {}, "output_transforms": {"0": "all_reduce_sum"}}
    b2 = {**b, "output_transforms": {"0": "scatter_outputs"}}
    spec = MLIPSpec.coerce({"format": "distcheck-spec", "version": 1})
    ready, notes = custom_op_entries(spec, [_op("ns::a", 3, a), _op("ns::a", 9, a), _op("ns::b", 4, b)])
    assert ready == [a, b] and notes == []
    ready, notes = custom_op_entries(spec, [_op("ns::a", 3, a), _op("ns::b", 4, b), _op("ns::b", 7, b2)])
    assert ready == [a] and len(notes) == 1 and notes[0].startswith("ns::b: ") and "model.py:7" in notes[0]
    ready, notes = custom_op_entries(spec, [_op("ns::c", 5, None, "pass x by position")])
    assert ready == [] and notes == ["ns::c: pass x by position"]
    declared = MLIPSpec.coerce({"format": "distcheck-spec", "version": 1, "distribution": {"custom_ops": [a]}})
    assert custom_op_entries(declared, [_op("ns::a", 3, a)]) == ([], [])


# -- end to end: named, declared, passing ------------------------------------------------------------
def _line(marker: str) -> int:
    path = inspect.getsourcefile(custom_op_model) or ""
    with open(path) as fh:
        lines = [i for i, text in enumerate(fh, start=1) if marker in text]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


def _validate(factory: Any, spec: dict[str, Any], **options: Any) -> TraceReport:
    report = validate_on_cpu(factory, custom_op_model.sample_batch(), spec=spec, **{**OPTIONS, **options})
    assert TraceReport.from_json(report.to_json()) == report
    return report


MESSAGE_PASSING = {
    EDGE_TO_ATOM: ("per_edge_to_per_atom", "# kernel: edges"),
    SEGMENT_SUM: ("per_atom_to_per_system", "# kernel: atoms"),
}
CASES = [
    (custom_op_model.model_factory, MESSAGE_PASSING),
    (custom_op_model.pair_factory, {EDGE_SUM: ("per_edge_to_per_system", "# kernel: pairs")}),
]


@pytest.mark.procs
@pytest.mark.parametrize(("factory", "expected"), CASES, ids=["message_passing", "pair"])
def test_undeclared_kernels_are_named_and_their_entries_make_the_model_pass(
    factory: Any, expected: dict[str, tuple[str, str]]
) -> None:
    report = _validate(factory, copy.deepcopy(custom_op_model.SPEC), auto_fix=False)
    assert report.verdict == "failed"
    first = report.attempts[0]
    named = {u.op: u for u in first.unrouted}
    assert set(named) == set(expected), "every aggregating kernel named, the elementwise one not"
    assert SOFTPLUS not in named and f"unintercepted[{SOFTPLUS}]" not in first.handler_counts
    file = os.path.abspath(inspect.getsourcefile(custom_op_model) or "")
    for op, (aggregation, marker) in expected.items():
        u = named[op]
        assert (u.aggregation, u.origin, u.file, u.line, sorted(u.ranks)) == (
            aggregation, "custom_op", file, _line(marker), [0, 1],
        )  # fmt: skip
        assert u.count == 2 and u.kernel is not None and u.kernel.entry is not None
        assert u.kernel.entry["op"] == op and u.kernel.args and u.kernel.outputs
    entries = [named[op].kernel.entry for op in expected]  # type: ignore[union-attr]
    head = report.next_action.split("\n")[0]
    for entry in entries:
        assert json.dumps(entry) in head and "to distribution.custom_ops" in head
    text = render_text(report)
    assert all(f"add {json.dumps(e)} to distribution.custom_ops" in text for e in entries)

    declared = copy.deepcopy(custom_op_model.SPEC)
    declared["distribution"]["custom_ops"] = entries
    fixed = _validate(factory, declared, auto_fix=False)
    assert fixed.verdict == "passed", fixed.next_action
    assert fixed.attempts[0].unrouted == []
    assert all(fixed.attempts[0].handler_counts.get(f"custom_op[{op}]") == 2 for op in expected)


@pytest.mark.procs
def test_declare_custom_ops_rule_adds_the_entries_when_it_is_in_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autofix, "RULES", (autofix.RULES[0], RULE, *autofix.RULES[1:]))
    report = _validate(custom_op_model.pair_factory, copy.deepcopy(custom_op_model.SPEC), max_fix_attempts=2)
    assert report.verdict == "passed" and report.attempts[-1].rule == "declare_custom_ops", report.next_action
    assert [c.to_dict() for c in report.spec.distribution.custom_ops] == [
        {"op": EDGE_SUM, "arg_transforms": {}, "output_transforms": {"0": "all_reduce_sum"}}
    ]
    assert "declared distcheck_example::edge_sum" in report.attempts[-1].rationale
