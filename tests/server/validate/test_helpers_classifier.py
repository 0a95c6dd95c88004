"""The helper classifier proposes a `reduction` adapter only when the ranks' owned-row partials add up
to the reference, and says which other failure it saw: ranks that agree with each other but not with
the reference (an upstream divergence; the helper is already global), or ranks that disagree."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from distcheck.spec import MLIPSpec
from distcheck.validate.diagnosis import diagnose_helpers

N, B = 10, 2
SPEC = MLIPSpec.from_dict({"format": "distcheck-spec", "version": 1})
REF = torch.tensor([4.0, 6.0])


def _sample(call: int, out: torch.Tensor, owned: torch.Tensor | None = None, rows: int = N) -> dict[str, Any]:
    return {
        "call": call,
        "arg_shapes": [[rows], [rows]],
        "atom_arg": 0,
        "out_shape": list(out.shape),
        "out_dtype": str(out.dtype),
        "out": out,
        "out_owned": owned,
    }


def _diagnose(rank_samples: list[list[dict[str, Any]]], ref_calls: int = 1) -> dict[str, Any]:
    ref = {"calls": {"pkg.ops.mol_sum": {"n_calls": ref_calls, "samples": [_sample(k, REF) for k in range(ref_calls)]}}}
    ranks = [{"calls": {"pkg.ops.mol_sum": {"n_calls": ref_calls, "samples": s}}} for s in rank_samples]
    (diag,) = diagnose_helpers(ref, ranks, SPEC, N, B)
    assert diag["pattern"] == "per_system_reduction" and diag["consistency_passed"] is False
    return diag


# (rank 0 out, rank 0 owned-row out, rank 1 out, rank 1 owned-row out)
ADD_UP = [
    (torch.tensor([3.0, 2.0]), torch.tensor([1.0, 2.0]), torch.tensor([4.0, 5.0]), torch.tensor([3.0, 4.0])),
    (torch.tensor([4.0, 1.0]), torch.tensor([4.0, 0.0]), torch.tensor([0.5, 6.0]), torch.tensor([0.0, 6.0])),
]
AGREE_OFF_REFERENCE = [
    (torch.tensor([5.0, 7.0]), torch.tensor([2.0, 3.0]), torch.tensor([5.0, 7.0]), torch.tensor([1.0, 1.0])),
    (torch.tensor([4.0, 6.5]), torch.tensor([4.0, 6.5]), torch.tensor([4.0, 6.5]), torch.tensor([4.0, 6.5])),
]
DISAGREE = [
    (torch.tensor([3.0, 2.0]), torch.tensor([1.0, 2.0]), torch.tensor([4.0, 5.0]), torch.tensor([3.0, 9.0])),
    (torch.tensor([1.0, 1.0]), None, torch.tensor([2.0, 2.0]), None),
]


def _ranks(case: tuple[Any, ...], call: int = 0) -> list[list[dict[str, Any]]]:
    o0, w0, o1, w1 = case
    return [[_sample(call, o0, w0)], [_sample(call, o1, w1)]]


@pytest.mark.parametrize("case", ADD_UP)
def test_partials_that_add_up_get_a_reduction_adapter(case: tuple[Any, ...]) -> None:
    diag = _diagnose(_ranks(case))
    assert diag["likely_remedy"] is not None and diag["likely_remedy"]["kind"] == "reduction"
    assert "partial" in diag["suspected_gap"]


@pytest.mark.parametrize("case", AGREE_OFF_REFERENCE)
def test_ranks_that_agree_but_not_with_the_reference_get_no_adapter_and_point_upstream(case: tuple[Any, ...]) -> None:
    diag = _diagnose(_ranks(case))
    assert diag["likely_remedy"] is None
    assert "ranks agree" in diag["suspected_gap"] and "first divergent layer" in diag["suspected_gap"]
    assert "double-count" in diag["suspected_gap"]
    assert "same value, but not the reference" in diag["divergence_notes"][0]


@pytest.mark.parametrize("case", DISAGREE)
def test_ranks_that_disagree_and_do_not_add_up_get_no_adapter(case: tuple[Any, ...]) -> None:
    diag = _diagnose(_ranks(case))
    assert diag["likely_remedy"] is None
    assert "ranks disagree" in diag["suspected_gap"] and "first divergent layer" in diag["suspected_gap"]
    assert "disagree with each other" in diag["divergence_notes"][0]


def test_partials_on_one_call_and_a_divergence_on_another_get_no_adapter_yet() -> None:
    o0, w0, o1, w1 = ADD_UP[0]
    d0, _, d1, dw1 = DISAGREE[0]
    ranks = [[_sample(0, o0, w0), _sample(1, d0, None)], [_sample(0, o1, w1), _sample(1, d1, dw1)]]
    diag = _diagnose(ranks, ref_calls=2)
    assert diag["likely_remedy"] is None and "some calls only" in diag["suspected_gap"]
