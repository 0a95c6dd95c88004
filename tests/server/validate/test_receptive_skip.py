"""A coupling that skips the neighbour graph is not receptive-field depth.

A model that reads a fixed row (`pos[0]`, `pos[-1]`, the row of a fixed index) couples a displaced atom
to that row's atom, however far away it is, with nothing moving in between. Counting those hops as
depth (before: the buggy accuracy twins measured 3 layers for a pair potential) flagged an
under-declared depth, and `next_action` then blamed a shallow halo for a bug no halo can fix. The
measurement now counts only hops reached level by level and names the skip in its note, and
`next_action` shows it as evidence. All in this process (no ranks).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distcheck.batch import Batch
from distcheck.report import ReceptiveField, TraceReport
from distcheck.report.parts import ReportMeta
from distcheck.spec import MLIPSpec
from distcheck.validate.receptive import measure_receptive_field
from distcheck.validate.receptive_graph import gapless_reach
from distcheck.validate.trust_action import GRAPH_SKIP, trust_lines
from examples import mpnn
from examples.accuracy import base, mask_loop, method_forms

pytestmark = pytest.mark.timeout(120)


class _AnchoredAt(base.AccuracyModel):
    """The accuracy pair potential with its per-atom energies anchored to row `row` (any fixed row)."""

    row: int

    def __init__(self, row: int) -> None:
        super().__init__(bug=False)
        self.row = row

    def atom_energies(self, batch: Batch, pos: torch.Tensor) -> torch.Tensor:
        e_atom: torch.Tensor = super().atom_energies(batch, pos)
        e_atom = e_atom + 1e-3 * torch.linalg.vector_norm(pos - pos[self.row], dim=-1)
        return e_atom


def _measure(wrapper: torch.nn.Module) -> dict[str, object]:
    return measure_receptive_field(wrapper, base.sample_batch(), cutoff=base.CUTOFF, derived={"forces": True})


@pytest.mark.parametrize(
    "factory",
    [mask_loop.buggy_model_factory, method_forms.buggy_model_factory, lambda: _AnchoredAt(-1), lambda: _AnchoredAt(7)],
    ids=["mask_loop-pos0", "method_forms-pos0", "last-row", "row-7"],
)
def test_a_fixed_row_coupling_is_not_depth(factory: object) -> None:
    found = _measure(factory())  # type: ignore[operator]
    assert found["status"] == "measured" and found["measured_depth"] == 1, found
    assert GRAPH_SKIP in str(found["note"]), found["note"]


def test_a_real_deep_model_keeps_its_depth_and_no_skip() -> None:
    wrapper = mpnn.model_factory()
    found = measure_receptive_field(
        wrapper, mpnn.sample_batch(), cutoff=float(wrapper.cutoff), derived={"forces": True}
    )
    assert found["measured_depth"] == 3 and GRAPH_SKIP not in str(found["note"]), found


@pytest.mark.parametrize(
    ("levels", "reach"),
    [([0, 1, 1, 2], 2), ([0, 1, 5], 1), ([0], 0), ([0, 2, 2], 0), ([0, 1, 2, 3, 3, 6], 3)],
)
def test_reach_stops_at_the_first_empty_level(levels: list[int], reach: int) -> None:
    assert gapless_reach(np.array(levels)) == reach


def test_next_action_shows_the_skip_as_evidence() -> None:
    skip = f"forces also moved 5 hop(s) away with nothing moving in between: {GRAPH_SKIP} (x)"
    note = f"2 atom(s) displaced; forces: 1 layer(s); {skip}"
    field = ReceptiveField(
        status="measured", cutoff=4.0, declared_depth=1, declared_field=4.0, measured_depth=1,
        measured_field=4.0, basis="forces", probes=2, under_declared=False, note=note,
    )  # fmt: skip
    report = TraceReport(
        ok=False, spec=base_spec(), attempts=[], next_action="", meta=ReportMeta(), receptive_field=field
    )
    (line,) = trust_lines(report)
    assert line.startswith("receptive field: forces also moved 5 hop(s)") and "per-system quantities" in line
    field.note = "2 atom(s) displaced; forces: 1 layer(s)"
    assert trust_lines(report) == []


def base_spec() -> MLIPSpec:
    return MLIPSpec.coerce(base.SPEC)


@pytest.mark.parametrize(
    ("halo", "shown"),
    [
        ({"matches": True, "interpretation": "The halo is 4 Å and ... = 3.2 Å: complete."}, True),
        ({"matches": False, "interpretation": "The halo is 2 Å ... too shallow"}, False),
        ({}, False),
    ],
)
def test_unknown_cause_lists_a_complete_halo_among_what_was_checked(halo: dict[str, object], shown: bool) -> None:
    from distcheck.report import Attempt
    from distcheck.validate.evidence import unknown_cause_lines

    attempt = Attempt(0, base_spec(), "", None, False, {}, {}, {}, {}, None, [], None, {}, halo, {})
    lines = unknown_cause_lines(attempt, "forces (max abs 0.2 > 1e-05)", True)
    assert lines[0].startswith("FAIL — forces") and "cause unknown" in lines[0]
    halo_lines = [line for line in lines if line.startswith("- halo: ")]
    assert halo_lines == ([f"- halo: {halo['interpretation']}"] if shown else [])
