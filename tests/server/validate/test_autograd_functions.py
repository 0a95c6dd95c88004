"""Aggregations inside the user's own `torch.autograd.Function` (issue 32 item 5).

The class of mistake: a Function's forward runs with autograd off and its backward is the user's, so
the exchange the handlers add to an aggregation in the forward is in no autograd graph; energies
match, forces do not, and the cause was blamed on "a per-atom quantity computed outside those
aggregations". Every linear shape (one aggregation per layer by `index_add_` with an `index_select`
backward, the same in the `setup_context` style, the whole message step with a hand-written backward,
the whole interaction block in a Function whose backward recomputes it with autograd on, a Function
applying another inside its forward,
`scatter_add` with a `torch.gather` backward, the atoms → systems energy sum in a Function, one
package-style `ScatterSum` Function for both) now passes at attempt 1 to round-off; a forward-only use
passes as before; an aggregation with no exact adjoint (`amax`) is named with the Function's class and
its file:line and passes after the `function_to_local` fix. Models: `examples/accuracy/autograd_function.py`
(180 atoms, world size 2).
"""

from __future__ import annotations

import copy
import inspect
import os
from typing import Any

import pytest

from distcheck import validate_on_cpu
from distcheck.runtime.function_mark import function_label, function_of
from examples.accuracy import autograd_function as models

pytestmark = pytest.mark.procs

OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0}
TARGET = os.path.abspath(models.__file__)


def _line_of(cls: type, text: str) -> int:
    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize(
    "form",
    ["layer", "setup_context", "block", "recompute", "nested", "scatter_add", "readout", "generic", "energy_only"],
)
def test_linear_aggregations_inside_a_function_route_exactly(form: str) -> None:
    """Values and forces to round-off at attempt 1, nothing named, whatever the Function wraps."""
    report = validate_on_cpu(f"{TARGET}:{form}_factory", models.sample_batch(), auto_fix=False, **OPTIONS)
    first = report.attempts[0]
    assert first.passed, report.next_action
    assert first.unrouted == []
    assert max(first.max_abs_diff.values()) < 1e-12, first.max_abs_diff
    assert any(k.startswith("halo_scatter_correction") for k in first.handler_counts)


def test_an_aggregation_with_no_exact_adjoint_is_named_and_fixed() -> None:
    """`amax` inside a Function: named at its line in the forward with the class, called from the
    apply line; the `function_to_local` fix (named in its rationale) passes."""
    report = validate_on_cpu(f"{TARGET}:amax_factory", models.sample_batch(), **OPTIONS)
    first = report.attempts[0]
    assert not first.passed and first.verdicts["energy"].passed and not first.verdicts["forces"].passed
    (op,) = first.unrouted
    assert function_of(op.function) == "EdgeMax"
    assert (op.file, op.line) == (TARGET, _line_of(models.EdgeMax, 'out.scatter_reduce(0, index, messages, "amax"'))
    assert (op.call_file, op.call_line) == (TARGET, _line_of(models.FunctionMPNN, "_LAYER[self.form].apply("))
    assert op.aggregation == "per_edge_to_per_atom"
    fixed = report.attempts[-1]
    assert fixed.passed and fixed.rule == "function_to_local", [a.rule for a in report.attempts]
    assert "EdgeMax (torch.autograd.Function)" in fixed.rationale
    assert fixed.spec.distribution.policy.scatter_mode == "local"


def test_the_function_label_round_trips() -> None:
    """The label the runtime writes names the class the advice reads back; other labels name none."""
    assert function_of(function_label("Outer.Inner")) == "Outer.Inner"
    assert function_of("EdgeMax.forward") is None
    assert function_of(None) is None


def test_a_total_with_no_index_to_mirror_is_named_with_its_remedy() -> None:
    """`e_atom.sum()` in a Function whose backward expands the gradient: no gather to mirror, so named
    at its line with the step that routes it (reduce outside the Function)."""
    report = validate_on_cpu(f"{TARGET}:total_factory", models.sample_batch(), auto_fix=False, **OPTIONS)
    (op,) = report.attempts[0].unrouted
    assert function_of(op.function) == "AtomTotal" and op.aggregation == "per_atom_total"
    assert (op.file, op.line) == (TARGET, _line_of(models.AtomTotal, "e_atom.sum()"))
    assert report.next_action.startswith("FAIL — the backward of AtomTotal (torch.autograd.Function)")
    assert "move the reduction over atoms out of the Function" in report.next_action


@pytest.mark.parametrize("form", ["layer", "amax"])
def test_under_owned_complete_any_reduce_inside_a_function_routes_exactly(form: str) -> None:
    """Under `owned_complete` the exchange is a refresh of the halo rows, linear whatever the reduce:
    `amax` too is exact at attempt 1 (a guard: the local adjoint was exact here before, and the
    refresh's adjoint applied in the backward keeps it so)."""
    spec = copy.deepcopy(models.SPEC)
    spec["distribution"]["policy"]["scatter_mode"] = "owned_complete"
    report = validate_on_cpu(f"{TARGET}:{form}_factory", models.sample_batch(), auto_fix=False, spec=spec, **OPTIONS)
    first = report.attempts[0]
    assert first.passed and first.unrouted == [], report.next_action
    assert max(first.max_abs_diff.values()) < 1e-12, first.max_abs_diff
    assert any(k.startswith("halo_refresh") for k in first.handler_counts)


@pytest.mark.parametrize("factory", ["buggy_model_factory", "buggy_block_factory"])
def test_a_real_bug_behind_a_routed_function_still_fails(factory: str) -> None:
    """No false pass: the exact adjoint leaves a seeded distribution bug (a term anchored to row 0) as
    visible as anywhere else, and no fix hides it."""
    report = validate_on_cpu(f"{TARGET}:{factory}", models.sample_batch(), **OPTIONS)
    assert not report.ok and not any(a.passed for a in report.attempts)


@pytest.mark.parametrize("form", ["layer", "readout", "recompute"])
def test_the_exact_routes_hold_on_three_ranks(form: str) -> None:
    report = validate_on_cpu(
        f"{TARGET}:{form}_factory", models.sample_batch(), auto_fix=False, **{**OPTIONS, "world_size": 3}
    )
    first = report.attempts[0]
    assert first.passed and first.unrouted == [], report.next_action
    assert max(first.max_abs_diff.values()) < 1e-12, first.max_abs_diff
