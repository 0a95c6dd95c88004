"""Output comparison: element by element in atom order, atol-or-rtol, and the failure statuses."""

from __future__ import annotations

import math

import pytest
import torch

from distcheck.validate.diff import compare_output, compare_outputs, failing_rows, nonfinite_report

VERDICT_KEYS = {
    "name",
    "kind",
    "passed",
    "max_abs_diff",
    "max_rel_diff",
    "status",
    "worst_index",
    "n_failing",
    "n_total",
    "expected_value",
    "actual_value",
}


def forces(n: int = 6, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g, dtype=torch.float64)


def test_identical_outputs_pass_with_exact_keys() -> None:
    ref = forces()
    v = compare_output("forces", ref.clone(), ref, "per_node", 1e-6, 1e-5)
    assert set(v) == VERDICT_KEYS
    assert v["passed"] is True and v["status"] == "ok"
    assert v["max_abs_diff"] == 0.0 and v["max_rel_diff"] == 0.0
    assert v["n_failing"] == 0 and v["n_total"] == 6
    assert isinstance(v["max_abs_diff"], float)


def test_permuted_rows_fail() -> None:
    """Forces on the wrong atoms must not pass: no sorting, no order-free comparison."""
    ref = forces()
    perm = torch.tensor([1, 0, 2, 3, 5, 4])
    v = compare_output("forces", ref[perm], ref, "per_node", 1e-6, 1e-5)
    assert v["passed"] is False and v["status"] == "mismatch"
    assert v["n_failing"] == 4  # atoms 0, 1, 4, 5 carry another atom's force
    assert failing_rows(ref[perm], ref, 1e-6, 1e-5).tolist() == [True, True, False, False, True, True]
    # The same multiset of values, sorted, would match: make sure that is not what we do.
    assert torch.equal(ref[perm].sort(dim=0).values, ref.sort(dim=0).values)


def test_atol_or_rtol() -> None:
    atol, rtol = 1e-6, 1e-3
    ref = torch.tensor([1e-9, 1000.0, 1.0], dtype=torch.float64)
    got = torch.tensor([2e-9, 1000.5, 1.1], dtype=torch.float64)
    # element 0: abs 1e-9 <= atol, rel 1.0 > rtol  -> passes by atol only
    # element 1: abs 0.5 > atol,   rel 5e-4 <= rtol -> passes by rtol only
    # element 2: abs 0.1 > atol,   rel 0.1 > rtol   -> fails
    only_atol = compare_output("q", got[:1], ref[:1], "per_node", atol, rtol)
    assert only_atol["passed"] and only_atol["max_rel_diff"] == pytest.approx(1.0)
    only_rtol = compare_output("q", got[1:2], ref[1:2], "per_node", atol, rtol)
    assert only_rtol["passed"] and only_rtol["max_abs_diff"] == pytest.approx(0.5)
    neither = compare_output("q", got[2:], ref[2:], "per_node", atol, rtol)
    assert not neither["passed"] and neither["status"] == "mismatch"
    both = compare_output("q", got, ref, "per_node", atol, rtol)
    assert both["n_failing"] == 1 and both["n_total"] == 3
    assert both["worst_index"] == [1]  # largest abs diff is element 1 even though it passes
    assert (both["expected_value"], both["actual_value"]) == (float(ref[1]), float(got[1]))
    assert both["max_abs_diff"] == pytest.approx(0.5)
    assert both["max_rel_diff"] == pytest.approx(1.0)


def test_zero_reference_gives_finite_rel() -> None:
    ref = torch.zeros(4, dtype=torch.float32)
    got = torch.tensor([0.0, 1e-9, 0.0, 0.0], dtype=torch.float32)
    v = compare_output("charges", got, ref, "per_node", 1e-6, 1e-5)
    assert v["passed"] is True  # by atol
    assert math.isfinite(v["max_rel_diff"]) and v["max_rel_diff"] > 1e20  # 1e-9 / float32 tiny
    strict = compare_output("charges", got, ref, "per_node", 0.0, 1e-5)
    assert strict["passed"] is False and strict["n_failing"] == 1 and strict["worst_index"] == [1]
    exact = compare_output("charges", ref.clone(), ref, "per_node", 0.0, 0.0)
    assert exact["passed"] is True  # 0 <= 0


def test_missing_and_extra_outputs() -> None:
    ref = {"energy": torch.tensor([1.0]), "forces": forces(4)}
    got = {"energy": torch.tensor([1.0]), "extra": torch.ones(3)}
    out = compare_outputs(got, ref, {"energy": "per_graph", "forces": "per_node"}, 1e-6, 1e-5)
    assert list(out) == ["energy", "forces"]  # "extra" is ignored
    assert out["energy"]["passed"] is True
    miss = out["forces"]
    assert set(miss) == VERDICT_KEYS
    assert miss["status"] == "missing" and miss["passed"] is False
    assert miss["max_abs_diff"] is None and miss["max_rel_diff"] is None and miss["worst_index"] is None
    assert miss["expected_value"] is None and miss["actual_value"] is None
    assert miss["n_total"] == 4 and miss["kind"] == "per_node"


def test_shape_mismatch() -> None:
    ref = forces(5)
    v = compare_output("forces", forces(4), ref, "per_node", 1e-6, 1e-5)
    assert v["status"] == "shape" and v["passed"] is False
    assert v["max_abs_diff"] is None and v["max_rel_diff"] is None
    with pytest.raises(ValueError, match="shapes differ"):
        failing_rows(forces(4), ref, 1e-6, 1e-5)


def test_nonfinite() -> None:
    ref = forces(4)
    got = ref.clone()
    got[2, 1] = float("nan")
    got[3, 0] = ref[3, 0] + 1.0
    v = compare_output("forces", got, ref, "per_node", 1e-6, 1e-5)
    assert v["status"] == "nonfinite" and v["passed"] is False
    assert v["n_failing"] == 2  # atoms 2 and 3
    assert v["max_abs_diff"] == pytest.approx(1.0)  # over the finite elements
    assert v["worst_index"] == [2, 1]  # the non-finite element is the worst
    all_nan = compare_output("energy", torch.full((2,), float("inf")), torch.ones(2), "per_graph", 1e-6, 1e-5)
    assert all_nan["status"] == "nonfinite" and all_nan["max_abs_diff"] is None


def test_matching_nonfinite_reference_is_not_a_failure() -> None:
    ref = torch.tensor([float("nan"), float("inf"), 1.0])
    assert compare_output("x", ref.clone(), ref, "global", 0.0, 0.0)["passed"] is True
    got = torch.tensor([1.0, float("inf"), 1.0])
    v = compare_output("x", got, ref, "global", 1e-6, 1e-5)
    assert v["status"] == "mismatch" and v["n_failing"] == 1 and v["worst_index"] == [0]


def test_per_node_counts_atoms_and_other_kinds_count_elements() -> None:
    ref = forces(5)
    got = ref.clone()
    got[1] += 1.0  # three bad elements on one atom
    got[4, 2] += 1.0
    node = compare_output("forces", got, ref, "per_node", 1e-6, 1e-5)
    assert node["n_failing"] == 2 and node["n_total"] == 5
    graph = compare_output("forces", got, ref, "per_graph", 1e-6, 1e-5)
    assert graph["n_failing"] == 4 and graph["n_total"] == 15
    assert failing_rows(got, ref, 1e-6, 1e-5).tolist() == [False, True, False, False, True]


def test_worst_index_is_multi_index() -> None:
    ref = torch.zeros(2, 3, 3, dtype=torch.float64)
    got = ref.clone()
    got[1, 2, 0] = 0.5
    got[0, 1, 1] = 0.25
    v = compare_output("stress", got, ref, "per_graph", 1e-6, 1e-5)
    assert v["worst_index"] == [1, 2, 0]
    assert v["max_abs_diff"] == pytest.approx(0.5)
    scalar = compare_output("e", torch.tensor(2.0), torch.tensor(1.0), "global", 1e-6, 1e-5)
    assert scalar["worst_index"] == [] and scalar["n_total"] == 1 and scalar["n_failing"] == 1


def test_mixed_dtypes_compare_in_float64() -> None:
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    got = torch.tensor([1.0, 2.0 + 1e-6], dtype=torch.float32)
    v = compare_output("e", got, ref, "per_graph", 1e-8, 1e-9)
    assert v["passed"] is False and v["max_abs_diff"] == pytest.approx(float(got[1].double() - 2.0))


def test_empty_output() -> None:
    v = compare_output("forces", torch.zeros(0, 3), torch.zeros(0, 3), "per_node", 1e-6, 1e-5)
    assert v["passed"] is True and v["n_total"] == 0 and v["n_failing"] == 0


def test_nonfinite_report() -> None:
    rank_outputs = [
        {"energy": torch.tensor([1.0]), "forces": torch.ones(3, 3)},
        {"energy": torch.tensor([float("nan")]), "forces": torch.tensor([[float("inf"), float("nan"), 0.0]])},
        {"count": torch.tensor([3])},
    ]
    assert nonfinite_report(rank_outputs) == [
        {"rank": 1, "output": "energy", "count": 1},
        {"rank": 1, "output": "forces", "count": 2},
    ]
    assert nonfinite_report([{"energy": torch.ones(1)}]) == []


def test_the_values_at_the_worst_element_of_every_shape() -> None:
    """A diff view needs the two numbers: the reference's and the distributed value at the worst element."""
    ref = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    got = ref.clone()
    got[2, 1] += 0.25
    v = compare_output("forces", got, ref, "per_node", 1e-6, 1e-6)
    assert v["worst_index"] == [2, 1] and (v["expected_value"], v["actual_value"]) == (7.0, 7.25)
    scalar = compare_output("energy", torch.tensor(3.5), torch.tensor(3.0), "per_graph", 1e-6, 1e-6)
    assert (scalar["expected_value"], scalar["actual_value"]) == (3.0, 3.5)
    inf = compare_output("e", torch.tensor([1.0, float("inf")]), torch.tensor([1.0, 2.0]), "per_graph", 1e-6, 1e-6)
    assert inf["status"] == "nonfinite" and (inf["expected_value"], inf["actual_value"]) == (2.0, float("inf"))
    z = compare_output("c", torch.ones(2, dtype=torch.complex64), torch.zeros(2, dtype=torch.complex64), "global", 0, 0)
    assert z["expected_value"] is None and z["actual_value"] is None
