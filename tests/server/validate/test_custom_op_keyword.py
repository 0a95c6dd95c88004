"""An opaque `torch.ops` kernel that receives its per-atom tensor as a KEYWORD argument, with no
`custom_ops` entry, is named in the report with a ready entry whose positions are the arguments'
indices in the kernel's schema, and declaring that entry makes the model pass: the handler reaches
keyword arguments at those positions (`keyword_kernel_models`; positional calls are in
test_custom_op_named.py). A keyword the schema does not name still gets no entry, saying why."""

from __future__ import annotations

import copy
import inspect
import json
import os
from typing import Any

import keyword_kernel_models as models
import pytest
import torch

from distcheck import TraceReport, validate_on_cpu
from distcheck.report import render_text
from distcheck.runtime.call_args import op_positions
from distcheck.runtime.context import RankContext
from distcheck.runtime.kernel_calls import kernel_call

OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0, "auto_fix": False}
N, B = 12, 2
X = torch.randn(N, 3, dtype=torch.float64)
INDEX = torch.tensor([0] * 6 + [1] * 6)
SEGMENT = torch.ops.distcheck_example.segment_sum


def _ctx() -> RankContext:
    owned = torch.tensor([True] * 8 + [False] * 4)
    return RankContext(
        rank=0, world_size=2, num_global_atoms=16, num_systems=B, local_ids=torch.arange(N), owned_mask=owned,
        scatter_mode="halo_correction",
    )  # fmt: skip


def test_keywords_are_placed_at_their_schema_index_for_a_packet_and_an_overload() -> None:
    kwargs = {"index": INDEX, "x": X, "num_segments": B}
    assert op_positions(SEGMENT, 0, kwargs) == {"x": 0, "index": 1, "num_segments": 2}
    assert op_positions(SEGMENT.default, 1, {"num_segments": B}) == {"num_segments": 2}
    assert op_positions(SEGMENT, 0, {"nope": X}) == {}, "a keyword the schema does not name"
    assert op_positions(SEGMENT, 1, {"x": X}) == {}, "x is already given by position"
    assert op_positions(torch.add, 0, {"x": X}) == {}, "not a torch.ops kernel"


def test_a_keyword_per_atom_tensor_gets_the_entry_a_positional_one_would() -> None:
    out = torch.zeros(B, 3)
    positional = kernel_call(_ctx(), "ns::seg", (X, INDEX, B), {}, out)
    kwargs = {"index": INDEX, "x": X, "num_segments": B}
    keyword = kernel_call(_ctx(), "ns::seg", (), kwargs, out, op_positions(SEGMENT, 0, kwargs))
    assert positional is not None and keyword is not None
    assert (
        keyword[1]["entry"]
        == positional[1]["entry"]
        == {
            "op": "ns::seg",
            "arg_transforms": {"0": "slice_owned", "1": "slice_owned"},
            "output_transforms": {"0": "all_reduce_sum"},
        }
    )
    assert [t["position"] for t in keyword[1]["args"]] == ["0", "1"]
    unnamed = kernel_call(_ctx(), "ns::seg", (INDEX,), {"features": X}, out)
    assert unnamed is not None and unnamed[1]["entry"] is None and "by position" in unnamed[1]["no_entry"]


def _line(marker: str) -> int:
    path = inspect.getsourcefile(models) or ""
    with open(path) as fh:
        (line,) = [i for i, text in enumerate(fh, start=1) if marker in text]
    return line


EXPECTED = {
    models.NEIGHBOUR_SUM: (
        "per_edge_to_per_atom",
        "# kernel: neighbours",
        {
            "op": models.NEIGHBOUR_SUM,
            "arg_transforms": {"0": "gather_inputs"},
            "output_transforms": {"0": "scatter_outputs"},
        },
    ),
    models.SEGMENT_SUM: (
        "per_atom_to_per_system",
        "# kernel: systems",
        {
            "op": models.SEGMENT_SUM,
            "arg_transforms": {"0": "slice_owned", "1": "slice_owned"},
            "output_transforms": {"0": "all_reduce_sum"},
        },
    ),
}


@pytest.mark.procs
def test_keyword_called_kernels_are_named_with_ready_entries_that_make_the_model_pass() -> None:
    report = validate_on_cpu(models.model_factory, models.sample_batch(), spec=copy.deepcopy(models.SPEC), **OPTIONS)
    assert report.verdict == "failed" and TraceReport.from_json(report.to_json()) == report
    named = {u.op: u for u in report.attempts[0].unrouted}
    assert set(named) == set(EXPECTED)
    file = os.path.abspath(inspect.getsourcefile(models) or "")
    for op, (aggregation, marker, entry) in EXPECTED.items():
        u = named[op]
        assert (u.aggregation, u.origin, u.file, u.line) == (aggregation, "custom_op", file, _line(marker))
        assert u.kernel is not None and u.kernel.entry == entry, u.kernel
        assert f"add {json.dumps(entry)} to distribution.custom_ops" in render_text(report)

    declared = copy.deepcopy(models.SPEC)
    declared["distribution"]["custom_ops"] = [entry for _, _, entry in EXPECTED.values()]
    fixed = validate_on_cpu(models.model_factory, models.sample_batch(), spec=declared, **OPTIONS)
    assert fixed.verdict == "passed", fixed.next_action
    assert fixed.attempts[0].unrouted == []
    assert all(fixed.attempts[0].handler_counts.get(f"custom_op[{op}]") == 2 for op in EXPECTED)
