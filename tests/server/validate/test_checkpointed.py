"""Models that use activation checkpointing (`torch.utils.checkpoint`) validate (issue 32 item 5's class).

The class of mistake: a checkpointed region keeps no activations, and the backward runs it again from
a saved-tensor hook, inside `torch.autograd.grad`, where the rank's handlers were off. The
recomputation then saved other tensors than the handlers' forward did and every rank crashed with
torch's `CheckpointError` (and, had it not, would have computed this rank's partial aggregates). Every
shape now passes at attempt 1 to round-off, at two and three ranks: a checkpoint per layer, one around
the whole interaction stack, `checkpoint_sequential`, a region holding the readout and the atoms →
systems sum, energy only, and the reentrant form (a `torch.autograd.Function`) with `.backward()`.
What the handlers count is counted once per forward however often the backward recomputes; an
aggregation no handler routes inside a region is named once per forward; a real bug inside a
checkpointed layer still fails. Models: `examples/accuracy/checkpointed.py` (180 atoms).
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import pytest

from distcheck import validate_on_cpu
from examples.accuracy import checkpointed as models

pytestmark = pytest.mark.procs

OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0}
TARGET = os.path.abspath(models.__file__)
LAYERS = models.CheckpointedMPNN.num_interactions


def _passes_counted_once(form: str, world_size: int) -> None:
    report = validate_on_cpu(
        f"{TARGET}:{form}_factory", models.sample_batch(), auto_fix=False, **{**OPTIONS, "world_size": world_size}
    )
    first = report.attempts[0]
    assert first.passed and first.unrouted == [], report.next_action
    assert max(first.max_abs_diff.values()) < 1e-12, first.max_abs_diff
    # one edges → atoms aggregation per layer and rank, whatever the backward recomputed
    assert first.handler_counts["halo_scatter_correction[index_add]"] == LAYERS * world_size, first.handler_counts


@pytest.mark.parametrize("form", ["layer", "stack", "sequential", "readout", "energy_only", "reentrant"])
def test_checkpointed_regions_route_exactly_and_count_once(form: str) -> None:
    """Values and forces to round-off at attempt 1, nothing named, each aggregation counted once."""
    _passes_counted_once(form, 2)


@pytest.mark.parametrize("form", ["layer", "readout"])
def test_checkpointed_regions_route_exactly_on_three_ranks(form: str) -> None:
    _passes_counted_once(form, 3)


def test_an_unrouted_aggregation_in_a_region_is_named_once_per_forward() -> None:
    """A per-system product inside a checkpointed region: named at its line, counted once per rank
    (the backward's recomputation of the region is not a second run of the forward)."""
    report = validate_on_cpu(f"{TARGET}:prod_factory", models.sample_batch(), auto_fix=False, **OPTIONS)
    (op,) = report.attempts[0].unrouted
    lines, start = inspect.getsourcelines(models.CheckpointedMPNN.forward)
    line = start + next(i for i, text in enumerate(lines) if '"prod")' in text)
    assert (op.file, op.line, op.op) == (TARGET, line, "scatter_reduce(prod)")
    assert op.count == OPTIONS["world_size"], op


@pytest.mark.parametrize("factory", ["buggy_model_factory", "buggy_stack_factory"])
def test_a_real_bug_inside_a_checkpointed_region_still_fails(factory: str) -> None:
    """No false pass: a term anchored to row 0 inside the checkpointed layers fails however the region
    is recomputed, and no fix hides it."""
    report = validate_on_cpu(f"{TARGET}:{factory}", models.sample_batch(), **OPTIONS)
    assert not report.ok and not any(a.passed for a in report.attempts)
