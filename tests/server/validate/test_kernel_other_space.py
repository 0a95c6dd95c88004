"""An undeclared kernel that aggregates into another index space is named like the others (issue 32
item 6).

The class of mistake: an opaque `torch.ops` kernel sums per-atom (or per-edge) data into rows that are
neither atoms, edges nor systems (k-vectors of an Ewald sum, histogram bins, a feature vector), so
its shapes read as "replicated" and it went unnamed while every rank computed a partial. Now any such
output whose values depend on the per-atom or per-edge data (found by calling the kernel again with
that data changed) is a total over atoms (or an edge sum), named with the kernel, its line and the
`custom_ops` entry that sums the output over ranks; an output that depends on weights only is not, and
neither is a kernel that may write to its arguments (never called again). End to end:
`examples/accuracy/ewald_kernel.py` (a structure factor into `[num_k, 2]`) is named at its call line,
and declaring the proposed entry makes it pass.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
import torch

from distcheck import validate_on_cpu
from distcheck.runtime.context import RankContext
from distcheck.runtime.kernel_calls import kernel_call, mutates
from examples.accuracy import ewald_kernel

N, B, E, K, F = 12, 1, 30, 7, 3
POS = torch.randn(N, 3, dtype=torch.float64)
Q = torch.randn(N, dtype=torch.float64)
KVEC = torch.randn(K, 3, dtype=torch.float64)
EDGES = torch.randint(0, N, (2, E))
PAIR = torch.rand(E, dtype=torch.float64)
WEIGHTS = torch.randn(F, F, dtype=torch.float64)


def _ctx(mode: str = "halo_correction") -> RankContext:
    owned = torch.tensor([True] * 8 + [False] * 4)
    return RankContext(
        rank=0, world_size=2, num_global_atoms=16, num_systems=B, local_ids=torch.arange(N),
        owned_mask=owned, scatter_mode=mode,
    )  # fmt: skip


def _structure_factor(pos: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    phase = pos @ k.T
    return torch.stack([(q[:, None] * phase.cos()).sum(0), (q[:, None] * phase.sin()).sum(0)], -1)


def _histogram(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    return torch.exp(-((x[:, None] - bins[None, :]) ** 2)).sum(0)


def _edge_spectrum(pair: torch.Tensor, edges: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return (pair[:, None] * torch.cos(pair[:, None] * k[:, 0])).sum(0)


def _feature_mean(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return (x @ weights).mean(0)


def _weights_only(x: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x @ weights, weights.T @ weights


def _call(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[str, dict[str, Any]] | None:
    def rerun(a: Sequence[Any], k: Mapping[str, Any]) -> Any:
        return fn(*a, **k)

    return kernel_call(_ctx(), "ns::k", args, {}, fn(*args), rerun=rerun)


@pytest.mark.parametrize(
    ("fn", "args", "summed_args"),
    [
        (_structure_factor, (POS, Q, KVEC), {"0", "1"}),  # atoms → k-vectors [K, 2]
        (_histogram, (Q, torch.linspace(-2, 2, 5, dtype=torch.float64)), {"0"}),  # atoms → bins [5]
        (_feature_mean, (POS, WEIGHTS), {"0"}),  # atoms → features [F]
    ],
    ids=["structure_factor", "histogram", "feature_mean"],
)
def test_atoms_into_another_space_are_a_total_over_atoms(
    fn: Callable[..., Any], args: tuple[Any, ...], summed_args: set[str]
) -> None:
    found = _call(fn, args)
    assert found is not None and found[0] == "per_atom_total"
    assert found[1]["entry"] == {
        "op": "ns::k",
        "arg_transforms": dict.fromkeys(sorted(summed_args), "slice_owned"),
        "output_transforms": {"0": "all_reduce_sum"},
    }


def test_edges_into_another_space_sum_the_output_over_ranks() -> None:
    found = _call(_edge_spectrum, (PAIR, EDGES, KVEC))
    assert found is not None and found[0] == "per_edge_to_per_system"
    assert found[1]["entry"] == {"op": "ns::k", "arg_transforms": {}, "output_transforms": {"0": "all_reduce_sum"}}


def test_outputs_of_the_weights_alone_and_unprobed_kernels_are_not_named() -> None:
    assert _call(_weights_only, (POS, WEIGHTS)) is None
    # no rerun (a kernel called from TorchScript or one that may write its arguments): shapes alone, as before
    assert kernel_call(_ctx(), "ns::k", (POS, Q, KVEC), {}, _structure_factor(POS, Q, KVEC)) is None


def test_a_kernel_that_writes_an_argument_is_never_called_again() -> None:
    assert not mutates(torch.ops.distcheck_example.structure_factor.default)
    assert not mutates(torch.ops.distcheck_example.structure_factor)
    assert mutates(torch.ops.aten.add_.Tensor)
    assert mutates(object())


@pytest.mark.procs
def test_the_structure_factor_kernel_is_named_and_its_entry_passes() -> None:
    target = os.path.abspath(ewald_kernel.__file__)
    options: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0, "auto_fix": False}
    report = validate_on_cpu(f"{target}:model_factory", ewald_kernel.sample_batch(), **options)
    (op,) = report.attempts[0].unrouted
    assert (op.op, op.aggregation, op.origin) == ("distcheck_example::structure_factor", "per_atom_total", "custom_op")
    assert op.file == target and op.line is not None and "structure_factor(" in open(target).readlines()[op.line - 1]
    assert op.kernel is not None and op.kernel.entry == ewald_kernel.STRUCTURE_FACTOR_ENTRY
    assert "distcheck_example::structure_factor" in report.next_action and '"all_reduce_sum"' in report.next_action
    spec = copy.deepcopy(ewald_kernel.SPEC)
    spec["distribution"]["custom_ops"] = [op.kernel.entry]
    fixed = validate_on_cpu(f"{target}:model_factory", ewald_kernel.sample_batch(), spec=spec, **options)
    assert fixed.attempts[0].passed and max(fixed.attempts[0].max_abs_diff.values()) < 1e-12
    # no false pass: the corpus's row-0 bug still fails with the kernel declared
    buggy = validate_on_cpu(f"{target}:buggy_model_factory", ewald_kernel.sample_batch(), spec=spec, **options)
    assert not buggy.attempts[0].passed
