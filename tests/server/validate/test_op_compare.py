"""Op-by-op comparison of op traces (`validate.op_trace`): the first op in the reference's order whose
value departs (per-atom fingerprints as the ranks' sum, the others rank by rank), ops a rank did not
record skipped, a departure within the tolerances not one, NaN where the reference has NaN not one;
rank against rank when the reference has no record. Synthetic records, no processes.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from distcheck.validate.op_trace import first_departing_op, first_disagreeing_op

F64 = torch.float64


def rec(line: int, level: str, value: list[float], op: str = "Tensor.mul", k: int = 0) -> dict[str, Any]:
    return {
        "key": f"/m.py:{line}:{op}#{k}",
        "op": op,
        "file": "/m.py",
        "line": line,
        "function": "f",
        "level": level,
        "value": torch.tensor(value, dtype=F64),
    }


def test_per_atom_ops_are_compared_as_the_ranks_sum() -> None:
    ref = [rec(1, "per_atom", [3.0, 3.0, 2.0]), rec(2, "per_atom", [5.0, 5.0, 2.0])]
    ok = [
        [rec(1, "per_atom", [1.0, 1.0, 1.0]), rec(2, "per_atom", [2.0, 2.0, 1.0])],
        [rec(1, "per_atom", [2.0, 2.0, 1.0]), rec(2, "per_atom", [3.0, 3.0, 1.0])],
    ]
    assert first_departing_op(ref, ok, 1e-8, 1e-8) is None
    bad = [ok[0], [ok[1][0], rec(2, "per_atom", [3.5, 3.5, 1.0])]]  # a halo row counted twice
    op = first_departing_op(ref, bad, 1e-8, 1e-8)
    assert op is not None and op.line == 2 and op.level == "per_atom" and op.ranks == [0, 1] and op.compared == 1
    assert op.rel_diff is not None and math.isclose(op.rel_diff, 0.1)


def test_small_values_rank_by_rank_and_the_tolerance() -> None:
    ref = [rec(1, "small", [1.0, 2.0]), rec(2, "small", [4.0])]
    near = [[rec(1, "small", [1.0, 2.0]), rec(2, "small", [4.0 + 1e-9])]] * 2
    assert first_departing_op(ref, near, 1e-8, 1e-6) is None
    off = [[rec(1, "small", [1.0, 2.0]), rec(2, "small", [4.0])], [rec(1, "small", [1.0, 2.5]), rec(2, "small", [9.0])]]
    op = first_departing_op(ref, off, 1e-8, 1e-6)
    assert op is not None and (op.line, op.ranks, op.against) == (1, [1], "reference")


def test_unmatched_records_are_skipped() -> None:
    """Missing on a rank (routed there), another level, another shape: not compared."""
    ref = [rec(1, "small", [1.0]), rec(2, "small", [1.0, 1.0]), rec(3, "per_system", [1.0]), rec(4, "small", [2.0])]
    ranks = [
        [rec(2, "small", [5.0]), rec(3, "small", [7.0]), rec(4, "small", [2.0])],
        [rec(1, "small", [9.0]), rec(2, "small", [5.0]), rec(3, "small", [7.0]), rec(4, "small", [3.0])],
    ]
    op = first_departing_op(ref, ranks, 1e-8, 1e-8)
    assert op is not None and op.line == 4 and op.compared == 0


def test_nan_where_the_reference_has_nan_is_no_departure() -> None:
    nan = float("nan")
    ref = [rec(1, "small", [nan, 1.0]), rec(2, "small", [1.0])]
    same = [[rec(1, "small", [nan, 1.0]), rec(2, "small", [1.0])]] * 2
    assert first_departing_op(ref, same, 1e-8, 1e-8) is None
    new = [same[0], [rec(1, "small", [nan, 1.0]), rec(2, "small", [nan])]]
    op = first_departing_op(ref, new, 1e-8, 1e-8)
    assert op is not None and op.line == 2 and op.rel_diff == math.inf


def test_ranks_against_rank_zero_when_the_reference_has_no_record() -> None:
    ranks = [
        [rec(1, "per_atom", [1.0, 1.0, 1.0]), rec(2, "small", [4.0]), rec(3, "small", [1.0], k=1)],
        [rec(1, "per_atom", [9.0, 9.0, 1.0]), rec(2, "small", [4.0]), rec(3, "small", [2.0], k=1)],
    ]
    op = first_disagreeing_op(ranks, 1e-8, 1e-8)
    assert op is not None and (op.line, op.call, op.against, op.ranks) == (3, 1, "ranks", [1])
    assert first_disagreeing_op(ranks[:1], 1e-8, 1e-8) is None
