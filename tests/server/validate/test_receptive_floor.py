"""The receptive field read against a measured noise floor, in hops and in Å, the cutoff told from the depth.

Each shape is measured in this process (`measure_receptive_field`, no ranks), on a periodic slab and
on two open rods:

- float32 models (2 and 3 layers; positions centred on each system's mean, so one displaced atom
  leaves round-off in every coordinate; sums reordered by distance; float32 positions in the sample)
  read their own depth, never deeper: before, the round-off read as reach (6 to 14 layers);
- a float64 model with the same round-off read its depth too, and one declared a layer short is
  still read as deeper ("set num_interactions = N");
- a model whose real cutoff is longer than the declared one (1 and 2 layers, float64 and float32) is
  read as a short cutoff, with the cutoff to set, and its depth left as declared; before, it read as
  more layers ("set num_interactions = 3");
- the record, the remedy's text and the halo set before the first run follow the decision.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
import pytest
import torch

from distcheck.batch import Batch
from distcheck.report import ReceptiveField
from distcheck.runtime.factory import load_object
from distcheck.runtime.model import DEFAULT_SKIN
from distcheck.spec import MLIPSpec
from distcheck.validate.field_advice import field_remedy
from distcheck.validate.receptive import apply_measured_field, measure_receptive_field, receptive_record
from distcheck.validate.receptive_graph import distances_from

SHAPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "field_models", "field_shapes.py")
SPEC = load_object(f"{SHAPES}:SPEC")
model = load_object(f"{SHAPES}:model")
periodic_sample = load_object(f"{SHAPES}:periodic_sample")
open_sample = load_object(f"{SHAPES}:open_sample")

pytestmark = pytest.mark.timeout(300)

SAMPLES = {"periodic": periodic_sample, "open": open_sample}
DERIVED = {"forces": True}


def _measure(sample: str, positions: torch.dtype = torch.float64, **kwargs: Any) -> dict[str, Any]:
    wrapper = model(**kwargs)
    batch: Batch = SAMPLES[sample](positions)
    return measure_receptive_field(wrapper, batch, cutoff=wrapper.cutoff, derived=DERIVED)


FLOAT32 = {
    "2 layers, centred": dict(layers=2, centred=True, weight_scale=3.0),
    "2 layers, centred, sums reordered": dict(layers=2, centred=True, reorder=True, weight_scale=3.0),
    "2 layers, float32 positions, centred": dict(layers=2, centred=True, weight_scale=3.0, positions=torch.float32),
    "3 layers, centred": dict(layers=3, centred=True, strong=True),
    "3 layers, sums reordered": dict(layers=3, reorder=True, strong=True),
}


@pytest.mark.parametrize(("shape", "sample"), itertools.product(FLOAT32, SAMPLES))
def test_float32_round_off_is_not_reach(shape: str, sample: str) -> None:
    kwargs = dict(FLOAT32[shape])
    positions = kwargs.pop("positions", torch.float64)
    layers = int(kwargs["layers"])
    found = _measure(sample, positions, declared_depth=layers, cutoff=3.0, dtype=torch.float32, **kwargs)
    assert found["status"] == "measured" and found["measured_depth"] == layers, found
    assert found["remedy"] == "none", found
    if kwargs.get("centred"):  # every coordinate carries the centre's round-off: the floor is the dtype's
        assert found["noise_floor"] >= torch.finfo(torch.float32).eps * 0.1 and "translated" in found["note"], found


@pytest.mark.parametrize(("layers", "sample"), itertools.product((2, 3), SAMPLES))
def test_float64_round_off_is_not_reach_and_a_short_depth_is_still_read(layers: int, sample: str) -> None:
    right = _measure(sample, layers=layers, declared_depth=layers, cutoff=3.0, centred=True)
    assert right["measured_depth"] == layers and right["remedy"] == "none", right
    short = _measure(sample, layers=layers, declared_depth=layers - 1, cutoff=3.0, centred=True)
    assert short["measured_depth"] == layers and short["remedy"] == "depth", short
    record = receptive_record({"receptive_field": short, "wrapper": {"num_interactions": layers - 1}})
    assert record is not None and record.under_declared
    assert field_remedy(record) == f"set num_interactions = {layers} on the wrapper"
    assert record.measured_field == pytest.approx(3.0 * layers)


LONG_CUTOFF = {
    "1 layer": dict(layers=1, dtype=torch.float64),
    "2 layers": dict(layers=2, dtype=torch.float64),
    "1 layer, float32": dict(layers=1, dtype=torch.float32),
    "2 layers, float32": dict(layers=2, dtype=torch.float32, weight_scale=3.0),
    "1 layer, float32, centred": dict(layers=1, dtype=torch.float32, centred=True),
    "2 layers, float32, weak far hops": dict(layers=2, dtype=torch.float32),
}


@pytest.mark.parametrize(("shape", "sample"), itertools.product(LONG_CUTOFF, SAMPLES))
def test_a_cutoff_declared_short_is_read_as_the_cutoff(shape: str, sample: str) -> None:
    kwargs = LONG_CUTOFF[shape]
    layers = int(kwargs["layers"])
    found = _measure(sample, declared_depth=layers, cutoff=3.0, true_cutoff=4.0, **kwargs)
    assert found["status"] == "measured" and found["remedy"] == "cutoff", found
    assert found["measured_depth"] == layers, found  # the depth is as declared
    assert 3.5 < found["reach_angstrom"] <= 4.0 * layers + 1e-9, found
    assert 3.0 < found["suggested_cutoff"] <= 5.0, found  # longer than declared; weak far hops hide the rest
    record = receptive_record({"receptive_field": found, "wrapper": {"num_interactions": layers}})
    assert record is not None and record.under_declared and record.remedy == "cutoff"
    remedy = field_remedy(record)
    assert remedy is not None and remedy.startswith(f"set cutoff = {found['suggested_cutoff']:g} on the wrapper")
    assert "num_interactions" not in remedy
    # the halo before the first run covers the reach in Å, not hops × the declared cutoff
    assert record.measured_field is not None and record.measured_field < found["reach_hops"] * 3.0
    spec, note = apply_measured_field(MLIPSpec.from_dict(SPEC), record)
    assert spec.distribution.policy.halo_width == pytest.approx(record.measured_field + DEFAULT_SKIN)
    assert note is not None and "cutoff" in note and f"{record.halo_width_set:g} Å" in note


def test_a_declared_field_that_covers_the_model_has_no_remedy() -> None:
    for sample in SAMPLES:
        found = _measure(sample, layers=2, declared_depth=2, cutoff=4.0, true_cutoff=4.0)
        record = receptive_record({"receptive_field": found, "wrapper": {"num_interactions": 2}})
        assert record is not None and not record.under_declared and field_remedy(record) is None, found


def test_distances_are_to_the_nearest_periodic_image() -> None:
    batch = periodic_sample()
    cell = batch.cell[0].to(torch.float64)
    pos = batch.positions.to(torch.float64)
    for atom in (0, 57, 200):
        shifts = torch.tensor(list(itertools.product((-1, 0, 1), repeat=3)), dtype=torch.float64) @ cell
        brute = torch.linalg.vector_norm(pos.unsqueeze(1) + shifts.unsqueeze(0) - pos[atom], dim=-1).min(1).values
        np.testing.assert_allclose(distances_from(batch, atom), brute.numpy(), atol=1e-9)
    rods = open_sample()
    d = distances_from(rods, 3)
    first = rods.system_slices()[0]
    np.testing.assert_allclose(
        d[first], torch.linalg.vector_norm(rods.positions[first] - rods.positions[3], dim=-1).numpy()
    )
    assert np.isinf(d[first.stop :]).all()


def test_the_remedy_text_names_what_to_set() -> None:
    base: dict[str, Any] = dict(
        status="measured", cutoff=5.0, declared_depth=1, declared_field=5.0, basis="x", probes=2, under_declared=True
    )
    cutoff = ReceptiveField(
        **base, measured_depth=1, measured_field=5.3, reach_hops=2, reach_angstrom=5.3, remedy="cutoff"
    )
    cutoff.suggested_cutoff = 5.5
    text = field_remedy(cutoff)
    assert text is not None and text.startswith("set cutoff = 5.5 on the wrapper") and "5.3 Å" in text
    depth = ReceptiveField(**base, measured_depth=3, measured_field=15.0, remedy="depth")
    assert field_remedy(depth) == "set num_interactions = 3 on the wrapper"
    covered = ReceptiveField(**{**base, "under_declared": False}, measured_depth=1, measured_field=5.0)
    assert field_remedy(covered) is None


# -- end to end: one validation per class --------------------------------------------------------


@pytest.mark.procs
def test_a_short_cutoff_is_fixed_by_the_reach_and_named_in_the_advice() -> None:
    from distcheck import validate_on_cpu

    report = validate_on_cpu(f"{SHAPES}:factory_cutoff_short", load_object(f"{SHAPES}:sample_batch")(), timeout_sec=120)
    field = report.receptive_field
    assert field is not None and field.remedy == "cutoff" and field.measured_depth == 1, field
    assert field.halo_width_set == pytest.approx(field.measured_field + DEFAULT_SKIN)
    assert field.halo_width_set < 2 * 3.0 + DEFAULT_SKIN  # not the two hops' 6.5 Å
    assert report.ok, report.next_action
    remedy = field_remedy(field)
    assert remedy is not None and remedy in report.next_action and "num_interactions" not in remedy


@pytest.mark.procs
def test_a_float32_model_declared_right_passes_with_its_own_halo() -> None:
    from distcheck import validate_on_cpu

    report = validate_on_cpu(
        f"{SHAPES}:factory_float32_centred", load_object(f"{SHAPES}:sample_batch")(), timeout_sec=120
    )
    field = report.receptive_field
    assert field is not None and field.measured_depth == 2 and not field.under_declared, field
    assert report.ok and report.attempts[0].spec.distribution.policy.halo_width is None, report.next_action
    assert "UNDER-DECLARED" not in report.next_action


def test_the_trust_lines_give_the_remedy_the_measurement_chose() -> None:
    import json
    from pathlib import Path

    from distcheck.report import TraceReport
    from distcheck.validate.trust_action import trust_lines

    fixture = Path(__file__).resolve().parents[2] / "extension" / "fixtures" / "receptive_fixed.json"
    cut = dict(remedy="cutoff", suggested_cutoff=4.0, reach_angstrom=7.2, reach_hops=4, measured_depth=2)
    for changes, says, never in (
        (cut, "set cutoff = 4 on the wrapper", "num_interactions ="),
        ({"remedy": "depth"}, "set num_interactions = 3 on the wrapper", "set cutoff"),
    ):
        data = json.loads(fixture.read_text())
        data["receptive_field"].update(changes)
        lines = trust_lines(TraceReport.from_dict(data))
        line = next(line for line in lines if line.startswith("receptive field"))
        assert says in line and never not in line and "report.spec keeps halo_width" in line, line
