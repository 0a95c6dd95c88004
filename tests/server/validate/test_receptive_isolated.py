"""A depth declared short on a dense periodic crystal is read as the depth, not as a longer cutoff.

On a dense crystal the atoms a deeper model moves look like a sharp ball of the reach in Å: its
far hops ride edges near the cutoff, which carry little, so the atoms more hops predict at the rim do
not move, and weighing the two predicted sets named a cutoff (`set cutoff = 12.5` for SchNet's 3 × 5 Å
declared as 1 interaction). The probes displaced again with every atom within the declared cutoff
removed (`receptive_isolated`) move nothing under a deeper model, and something under a longer
cutoff. Each shape below (2 and 3 layers, 4 and 5 Å cutoffs, float32 and float64, two cross-sections)
read as a cutoff before; the short-cutoff shapes of `test_receptive_floor` still read as the cutoff.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import torch

from distcheck.batch import Batch
from distcheck.runtime.factory import load_object
from distcheck.runtime.model import DEFAULT_SKIN
from distcheck.spec import MLIPSpec
from distcheck.validate.field_advice import field_remedy
from distcheck.validate.receptive import apply_measured_field, measure_receptive_field, receptive_record
from distcheck.validate.receptive_graph import distances_from
from distcheck.validate.receptive_isolated import isolated_sample
from examples.structures import make_batch, periodic_slab_system

SHAPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "field_models", "field_shapes.py")
SPEC = load_object(f"{SHAPES}:SPEC")
model = load_object(f"{SHAPES}:model")

pytestmark = pytest.mark.timeout(300)


def _crystal(cells: tuple[int, int, int]) -> Batch:
    """A dense periodic crystal: lattice sites 2.6 Å apart, jittered by 0.2 Å, long along z."""
    return make_batch([periodic_slab_system(cells, spacing=2.6, jitter=0.2, seed=5)])


DEEPER = {
    "2 layers, cutoff 4, float32, 4 x 4 cells": dict(layers=2, cutoff=4.0, dtype=torch.float32, cells=(4, 4, 24)),
    "2 layers, cutoff 4, float32, 3 x 3 cells": dict(layers=2, cutoff=4.0, dtype=torch.float32, cells=(3, 3, 24)),
    "2 layers, cutoff 5, float32, strong hops": dict(
        layers=2, cutoff=5.0, dtype=torch.float32, strong=True, cells=(3, 3, 24)
    ),
    "3 layers, cutoff 5, float32, 4 x 4 cells": dict(layers=3, cutoff=5.0, dtype=torch.float32, cells=(4, 4, 24)),
    "3 layers, cutoff 4, float32, 3 x 3 cells": dict(layers=3, cutoff=4.0, dtype=torch.float32, cells=(3, 3, 24)),
    "3 layers, cutoff 5, float64, 3 x 3 cells": dict(layers=3, cutoff=5.0, dtype=torch.float64, cells=(3, 3, 24)),
}


@pytest.mark.parametrize("shape", DEEPER)
def test_a_depth_declared_short_on_a_dense_crystal_is_read_as_the_depth(shape: str) -> None:
    kwargs: dict[str, Any] = dict(DEEPER[shape])
    cells = kwargs.pop("cells")
    layers, cutoff = int(kwargs["layers"]), float(kwargs["cutoff"])
    wrapper = model(declared_depth=1, **kwargs)
    found = measure_receptive_field(wrapper, _crystal(cells), cutoff=cutoff, derived={"forces": True})
    assert found["status"] == "measured" and found["remedy"] == "depth", found
    # float32 may hide the weakest far hop (never read deeper), so the depth is at least 2, at most the model's
    assert 2 <= found["measured_depth"] <= layers, found
    assert found["reach_angstrom"] <= found["reach_hops"] * cutoff, found  # hops of the declared cutoff carry it
    assert "no other atom moved" in found["note"], found
    record = receptive_record({"receptive_field": found, "wrapper": {"num_interactions": 1}})
    assert record is not None and record.under_declared and record.suggested_cutoff is None
    assert field_remedy(record) == f"set num_interactions = {found['measured_depth']} on the wrapper"
    spec, note = apply_measured_field(MLIPSpec.from_dict(SPEC), record)
    halo = found["measured_depth"] * cutoff + DEFAULT_SKIN
    assert spec.distribution.policy.halo_width == pytest.approx(halo)
    assert note is not None and "hops" in note and "cutoff of" not in note


def test_the_isolated_sample_leaves_each_probe_no_atom_within_the_cutoff() -> None:
    batch = make_batch(
        [periodic_slab_system((3, 3, 12), spacing=2.6, jitter=0.2, seed=5), periodic_slab_system((3, 3, 10), seed=2)]
    )
    batch.extras["tag"] = torch.arange(batch.num_atoms)
    batch.extras["note"] = "kept"
    first, second = batch.system_slices()
    probes = [first.start + 40, second.start + 17]
    smaller, rows = isolated_sample(batch, probes, 4.0)
    assert smaller.extras["note"] == "kept" and smaller.num_systems == 2
    kept = smaller.extras["tag"].numpy()
    assert [int(kept[r]) for r in rows] == probes  # the probes' rows, the probes themselves
    for probe, row in zip(probes, rows, strict=True):
        d_full, d_small = distances_from(batch, probe), distances_from(smaller, row)
        others = np.arange(smaller.num_atoms) != row
        assert (d_small[others] >= 4.0).all()  # nothing within the cutoff of a probe
        system = first if probe < second.start else second
        farther = [i for i in range(system.start, system.stop) if d_full[i] >= 4.0]
        assert set(farther) <= set(kept.tolist())  # every atom beyond it kept
    nl = smaller.neighbor_list(4.0 - 1e-6)
    for row in rows:
        assert not (nl.edge_index[0] == row).any()  # the probe has no edge in the declared cutoff's graph


def test_round_off_of_the_isolated_runs_alone_is_not_read_as_a_longer_cutoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The full sample's probe runs kept every bit far away (floor 0), yet the isolated test's own two runs
    differ in their last bits, as a float32 model on two CPU threads was seen to: they are judged against
    the measured floor, never a zero one, so the depth is still named."""
    from distcheck.validate import receptive

    kwargs: dict[str, Any] = dict(DEEPER["2 layers, cutoff 4, float32, 3 x 3 cells"])
    batch = _crystal(kwargs.pop("cells"))
    real = receptive._run
    noise = torch.Generator().manual_seed(0)

    def last_bits_differ(wrapper: Any, sample: Batch) -> dict[str, torch.Tensor]:
        out = dict(real(wrapper, sample))
        if sample.num_atoms < batch.num_atoms:  # the isolated sample's runs only
            for k, v in out.items():
                if v.is_floating_point():
                    sign = torch.randint(0, 2, v.shape, generator=noise).to(v.dtype) * 2 - 1
                    out[k] = v + sign * v.abs() * torch.finfo(v.dtype).eps
        return out

    monkeypatch.setattr(receptive, "_run", last_bits_differ)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the full sample's runs then keep every bit: the floor reads 0
    try:
        found = measure_receptive_field(model(declared_depth=1, **kwargs), batch, cutoff=4.0, derived={"forces": True})
    finally:
        torch.set_num_threads(threads)
    assert found["noise_floor"] == 0.0, found  # the shape this guards: no round-off seen before the isolated runs
    assert found["status"] == "measured" and found["remedy"] == "depth", found
    assert "no other atom moved" in found["note"], found
